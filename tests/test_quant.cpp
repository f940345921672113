// Quantized weights (core/quant.hpp, kernels/gemm_quant.hpp): bf16, int8 per channel, int4 and
// int6 groups — storage and its edge cases, every kernel path against a double product of the
// dequantized values. The decoder layer, the files and the models: tests/quant_models/ (a suite
// built for fewer ISAs: this one is built for every one in CI, its kernels being per ISA).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "model_fixture.hpp"

#include "quant_fixture.hpp"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace {
using namespace quant_test;
}  // namespace

// ---- Storage: quantize, dequantize, edge cases ----

TEST_CASE_TEMPLATE("quant: round trip within half a step of each scale; zero rows and a huge value", Fmt, ct::bf16,
                   ct::int8_per_channel, ct::int8_group<16>, ct::int8_group_min<32>, ct::int4_group<32>, ct::int4_group_min<32>,
                   ct::int6_group<16>, ct::int6_group_min<32>, ct::int8_group<32, ct::f16>, ct::int4_group_min<32, ct::f16>,
                   ct::int6_group<16, ct::f16>) {
    // (int4, int6: the largest magnitude to -2^(bits-1) steps, Q4_0's rule; levels: from the minimum;
    // ct::f16 scales: the rule's scale rounded to a half, the integers from the rounded scale)
    constexpr double scale_eps = ct::half_scales<Fmt> ? 0x1p-11 : 1e-6;
    auto scale = [](auto s) { return double(ct::quant::scale_value(s)); };
    constexpr bool int4 = Fmt::per_word == 8 && !ct::unsigned_levels<Fmt>, levels = ct::unsigned_levels<Fmt>;
    constexpr double half = double(1u << (ct::level_bits<Fmt> - 1)), top = double((1u << ct::level_bits<Fmt>) - 1);
    constexpr std::size_t Out = 37, In = 64;  // (37: a partial panel on every ISA)
    using W = ct::QuantizedWeight<Fmt, Out, In>;
    static W w;
    std::vector<float> v = random_values(Out * In, 3);
    for (std::size_t k = 0; k < In; ++k) v[5 * In + k] = 0;  // an all-zero row
    const float huge = ct::half_scales<Fmt> ? 2e5f : 1e30f;  // (halves: a scale within 65504)
    v[9 * In + 40] = huge;                                   // one huge value
    w.quantize([&](std::size_t i) { return v[i]; });
    for (std::size_t o = 0; o < Out; ++o)
        for (std::size_t k = 0; k < In; ++k) {
            const std::size_t i = o * In + k;
            const double x = v[i], y = w.get(i);
            double bound;
            if constexpr (std::is_same_v<Fmt, ct::bf16>) {
                bound = std::fabs(x) * 0x1p-8;  // round to nearest with 8 significant bits
            } else {  // half a step; int4: a step where Q4_0's rule clips (a value of the opposite sign
                      // near the group's extreme would need +8 steps: it gets 7)
                bound = (int4 ? 1.0 : 0.5) * std::fabs(scale(w.scales[W::scale_index(o, k)])) * (1 + 1e-6);
            }
            INFO("o " << o << " k " << k << ": " << x << " -> " << y);
            REQUIRE(std::fabs(x - y) <= bound);
        }
    for (std::size_t k = 0; k < In; ++k) CHECK(w.get(5 * In + k) == 0.f);
    CHECK(std::fabs(w.get(9 * In + 40) - huge) <= huge * 0x1p-8);
    // every other value in the huge value's row (int8) or group (int4) rounds to zero (levels from
    // the minimum: to the group's minimum)
    if constexpr (!std::is_same_v<Fmt, ct::bf16>) {
        const std::size_t k0 = Fmt::group ? 40 / Fmt::group * Fmt::group : 0, k1 = Fmt::group ? k0 + Fmt::group : In;
        float lo = 0;
        for (std::size_t k = k0; k < k1; ++k) lo = std::min(lo, v[9 * In + k]);
        for (std::size_t k = k0; k < k1; ++k)
            if (k != 40) CHECK(w.get(9 * In + k) == doctest::Approx(levels ? lo : 0.f).epsilon(scale_eps));
    }
    // levels from the minimum use all 16 (64) (llama.cpp's Q4_1 rule): s = (max - min) / 15 (63), m = -min
    if constexpr (levels) {
        const std::size_t o = 2;
        double lo = v[o * In], hi = lo;
        for (std::size_t k = 0; k < Fmt::group; ++k) lo = std::min(lo, double(v[o * In + k])), hi = std::max(hi, double(v[o * In + k]));
        CHECK(scale(w.scales[W::scale_index(o, 0)]) == doctest::Approx((hi - lo) / top).epsilon(scale_eps));
        CHECK(scale(w.mins[W::scale_index(o, 0)]) == doctest::Approx(-lo).epsilon(scale_eps));
    }
    // int4 uses all 16 levels: the value of largest magnitude is -8 steps exactly (Q4_0's rule); int8
    // groups put it at ±127 steps (Q8_0's rule)
    if constexpr (Fmt::group > 0 && !int4 && !levels) {
        const std::size_t o = 2;
        double m = 0;
        for (std::size_t k = 0; k < Fmt::group; ++k) m = std::max(m, std::fabs(double(v[o * In + k])));
        CHECK(scale(w.scales[W::scale_index(o, 0)]) == doctest::Approx(m / 127).epsilon(scale_eps));
    }
    if constexpr (int4) {
        const std::size_t o = 2;
        double m = 0;
        for (std::size_t k = 0; k < Fmt::group; ++k) m = std::fabs(v[o * In + k]) > std::fabs(m) ? v[o * In + k] : m;
        CHECK(scale(w.scales[W::scale_index(o, 0)]) == doctest::Approx(m / -half).epsilon(scale_eps));
    }
    // every field reads back as written: set_field and field over the high plane too
    for (std::size_t o = 0; o < Out; o += 7)
        for (std::size_t k = 0; k < In; ++k) {
            const std::uint32_t f = w.field(o, k);
            if constexpr (!std::is_same_v<Fmt, ct::bf16>) CHECK(f < (1u << ct::level_bits<Fmt>));
            static W x;
            std::memset(&x, 0, sizeof x);
            x.set_field(o, k, static_cast<std::int32_t>(f));
            CHECK(x.field(o, k) == f);
        }
}

TEST_CASE("quant: halves (ct::f16 scales): every half widens exactly, floats round to the nearest half, ties to even") {
    // the reference: the definition (sign, 5-bit exponent biased by 15, 10-bit mantissa) in double
    auto value = [](std::uint32_t h) {
        const std::uint32_t e = h >> 10 & 31, m = h & 0x3ff;
        const double mag = e == 0 ? std::ldexp(double(m), -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(double(1024 + m), int(e) - 25);
        return h & 0x8000 ? -mag : mag;
    };
    alignas(64) std::uint16_t all[65536];
    for (std::uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<std::uint16_t>(h);
    std::size_t wrong = 0, unround = 0, vec_wrong = 0;
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const double want = value(h), got = ct::simd::half_value(all[h]);
        if (!(got == want || (got != got && want != want))) ++wrong;
        if (want == want && ct::simd::half_bits(static_cast<float>(want)) != h) ++unround;  // (every half rounds to itself)
    }
    constexpr std::size_t W = ct::simd::width<float>;
    for (std::size_t i = 0; i < 65536; i += W) {  // the vector widening (F16C, NEON or integer ops) = the scalar one
        float lanes[W];
        ct::simd::store(lanes, ct::simd::load_half(all + i));
        for (std::size_t j = 0; j < W; ++j) {
            const float want = ct::simd::half_value(all[i + j]);
            if (std::memcmp(&lanes[j], &want, 4) != 0 && !(want != want && lanes[j] != lanes[j])) ++vec_wrong;
        }
    }
    CHECK(wrong == 0u);
    CHECK(unround == 0u);
    CHECK(vec_wrong == 0u);
    // floats between halves: the nearer one, ties to the even mantissa; past 65520 inf; tiny: zero
    std::mt19937 gen(11);
    std::size_t not_nearest = 0, not_hardware = 0;
    for (int i = 0; i < 200000; ++i) {
        const float x = std::bit_cast<float>((static_cast<std::uint32_t>(gen()) & 0x47ffffffu) | (i % 2 ? 0x80000000u : 0u));
        const std::uint16_t h = ct::simd::half_bits(x);
#if defined(__F16C__)
        if (h != static_cast<std::uint16_t>(_mm_cvtsi128_si32(_mm_cvtps_ph(_mm_set_ss(x), 0)))) ++not_hardware;  // (the x86 conversion instruction, nearest even)
#endif
        if ((h & 0x7fffu) == 0x7c00u) {  // inf: only from 65520 on
            if (std::fabs(x) < 65520.f) ++not_nearest;
            continue;
        }
        const double d = std::fabs(double(x) - value(h));
        for (int step : {-1, 1}) {
            const std::uint32_t n = (h & 0x7fffu) + step;
            if (n > 0x7c00u) continue;
            const double dn = std::fabs(double(x) - value(n | (h & 0x8000u)));
            if (dn < d || (dn == d && (h & 1))) ++not_nearest;
        }
    }
    CHECK(not_nearest == 0u);
    CHECK(not_hardware == 0u);
    CHECK(ct::simd::half_bits(65504.f) == 0x7bffu);
    CHECK(ct::simd::half_bits(65519.f) == 0x7bffu);
    CHECK(ct::simd::half_bits(65520.f) == 0x7c00u);
    CHECK(ct::simd::half_bits(-0x1p-25f) == 0x8000u);              // a tie: to zero (even)
    CHECK(ct::simd::half_bits(0x1.8p-25f) == 0x0001u);             // past the tie: the smallest subnormal
    CHECK(ct::simd::half_bits(0x1.ff8p-15f) == 0x03ffu);           // the largest subnormal
    CHECK(ct::simd::half_bits(0x1.ffcp-15f) == 0x0400u);           // a tie between it and 2^-14: even
    CHECK((ct::simd::half_bits(NAN) & 0x7e00u) == 0x7e00u);
    // a format's scale saturates at the largest half, never inf
    static ct::QuantizedWeight<ct::int8_group<16, ct::f16>, 1, 16> big;
    big.quantize([](std::size_t i) { return i == 3 ? 1e30f : 1.f; });
    CHECK(big.scales[0] == 0x7bffu);
    CHECK(big.get(3) == 65504.f * 127);
}

TEST_CASE("quant: bf16 rounds to nearest even") {
    CHECK(ct::quant::bf16_bits(1.f) == 0x3f80u);
    CHECK(ct::quant::bf16_bits(std::bit_cast<float>(0x3f808000u)) == 0x3f80u);  // tie: to even
    CHECK(ct::quant::bf16_bits(std::bit_cast<float>(0x3f818000u)) == 0x3f82u);  // tie: to even (up)
    CHECK(ct::quant::bf16_bits(std::bit_cast<float>(0x3f808001u)) == 0x3f81u);  // above the tie
}

// ---- Kernels: every path (GEMV rows 1..4, GEMM rows, edge panels, two K blocks, bias, act,
// accumulate) against a double dot product over the dequantized values ----

template <class Fmt, std::size_t N, std::size_t K> void kernel_case() {
    using W = ct::QuantizedWeight<Fmt, N, K>;
    static W w;
    const std::vector<float> v = random_values(N * K, 7);
    w.quantize([&](std::size_t i) { return v[i]; });
    random_minimums(w, 5);
    const std::vector<float> bias = random_values(N, 8);
    static float pack[ct::kernels::gemm_pack_elems<float>(64, K)];
    for (std::size_t M : {1, 2, 3, 4, 5, 7, 13, 64}) {
        for (bool accumulate : {false, true}) {
            const std::vector<float> a = random_values(M * K, unsigned(M));
            const std::vector<float> c0 = random_values(M * N, 99);
            std::vector<float> c = c0;
            const ct::relu act{};
            ct::kernels::gemm_panels(M, N, K, a.data(), K, w.panels(), c.data(), N, bias.data(), act, pack, accumulate);
            double worst = 0;
            for (std::size_t m = 0; m < M; ++m)
                for (std::size_t n = 0; n < N; ++n) {
                    double s = (accumulate ? c0[m * N + n] : 0) + bias[n], mag = std::fabs(s);
                    for (std::size_t k = 0; k < K; ++k) {
                        s += double(a[m * K + k]) * w.get(n * K + k);
                        mag += std::fabs(double(a[m * K + k]) * w.get(n * K + k));
                    }
                    worst = std::max(worst, std::fabs(std::max(s, 0.0) - c[m * N + n]) / mag);
                }
            INFO(fmt_name<Fmt>() << " M " << M << " N " << N << " K " << K << " accumulate " << accumulate
                                 << ": worst error " << worst << " of the sum of |terms|");
            CHECK(worst <= 1e-6);
        }
    }
}

// (one int4 group size across this file's kernels and models: every kernel instantiation is
// compiled once per format and activation, and this suite is built for every ISA in CI)
TEST_CASE_TEMPLATE("quant: gemm_panels over quantized panels = the dequantized product", Fmt, ct::bf16,
                   ct::int8_per_channel, ct::int8_group<32>, ct::int8_group_min<16>, ct::int4_group<16>, ct::int4_group_min<16>,
                   ct::int6_group<16>, ct::int6_group_min<32>, ct::int8_group<32, ct::f16>, ct::int4_group_min<16, ct::f16>) {
    kernel_case<Fmt, 3 * ct::kernels::gemm_tile<float>::NR + 5, 320>();  // two K blocks, an edge panel
    kernel_case<Fmt, 8, 64>();                                            // one partial panel
}

// k-quant scales (ct::kscale): a group's scale an int8 times a half per 256 inputs, in every kernel
// (groups of 32 and of 16 under a half; the scale step is one helper for every format: two formats
// keep this suite's build, compiled for every ISA in CI, short).
TEST_CASE_TEMPLATE("quant: two-level scales (ct::kscale) — the rule, exact products, every kernel", Fmt,
                   ct::int4_group_min<32, ct::kscale>, ct::int6_group_min<16, ct::kscale>) {
    constexpr std::size_t Out = 37, In = 512;
    using W = ct::QuantizedWeight<Fmt, Out, In>;
    static_assert(W::two_level && sizeof(typename W::scale_type) == 1);
    static W w;
    std::vector<float> v = random_values(Out * In, 21);
    for (std::size_t k = 0; k < In; ++k) v[5 * In + k] = 0;  // an all-zero row
    w.quantize([&](std::size_t i) { return v[i]; });
    constexpr bool levels = ct::unsigned_levels<Fmt>;
    double err2 = 0, step2 = 0;
    std::size_t n = 0;
    for (std::size_t o = 0; o < Out; ++o)
        for (std::size_t k0 = 0; k0 < In; k0 += ct::kscale::super) {
            // the half is the 256 inputs' largest scale over 127 (rounded), each int8 the nearest multiple
            double s[ct::kscale::super / Fmt::group], big = 0;
            for (std::size_t g = 0; g < ct::kscale::super / Fmt::group; ++g) {
                double m;
                W::group_rule([&](std::size_t i) { return v[i]; }, o, k0 + g * Fmt::group, s[g], m);
                big = std::max(big, std::fabs(s[g]));
            }
            const std::uint16_t h = w.super.scales[W::super_index(o, k0)];
            CHECK(h == ct::simd::half_bits(static_cast<float>(big / 127)));
            const double d = ct::simd::half_value(h);
            for (std::size_t g = 0; g < ct::kscale::super / Fmt::group; ++g) {
                const std::size_t k = k0 + g * Fmt::group;
                if (d != 0) CHECK(std::fabs(double(w.scales[W::scale_index(o, k)]) - s[g] / d) <= 0.5 + 1e-9);
                CHECK(w.scale_of(o, k) == static_cast<float>(d * w.scales[W::scale_index(o, k)]));  // (exact)
                // every integer is the rule's from the scale (and minimum) as stored: nearest, clamped
                const double se = w.scale_of(o, k), lo = levels ? -double(w.min_of(o, k)) : 0.0;
                constexpr double half = double(1u << (ct::level_bits<Fmt> - 1)), top = double((1u << ct::level_bits<Fmt>) - 1);
                constexpr double qlo = levels ? 0 : Fmt::per_word == 4 ? -127 : -half, qhi = levels ? top : Fmt::per_word == 4 ? 127 : half - 1;
                for (std::size_t j = k; j < k + Fmt::group; ++j) {
                    const double q = se == 0 ? 0 : std::clamp(std::nearbyint((v[o * In + j] - lo) / se), qlo, qhi);
                    INFO("o " << o << " k " << j << ": " << v[o * In + j] << " -> " << w.get(o * In + j));
                    CHECK(w.get(o * In + j) == static_cast<float>(levels ? float(se) * float(q) - w.min_of(o, k) : float(se) * float(q)));
                    err2 += (v[o * In + j] - w.get(o * In + j)) * double(v[o * In + j] - w.get(o * In + j)), step2 += se * se, ++n;
                }
            }
        }
    // and near the values: the RMS error within 0.4 of the RMS step (rounding alone: 0.29)
    INFO("RMS error " << std::sqrt(err2 / n) << ", RMS step " << std::sqrt(step2 / n));
    CHECK(std::sqrt(err2 / n) <= 0.4 * std::sqrt(step2 / n));
    for (std::size_t k = 0; k < In; ++k) CHECK(w.get(5 * In + k) == 0.f);
    // the vector widening of int8s = the scalar one, every value
    alignas(64) std::int8_t all[256];
    for (int i = 0; i < 256; ++i) all[i] = static_cast<std::int8_t>(i - 128);
    constexpr std::size_t L = ct::simd::width<float>;
    for (std::size_t i = 0; i < 256; i += L) {
        float lanes[L];
        ct::simd::store(lanes, ct::simd::load_i8(all + i));
        for (std::size_t j = 0; j < L; ++j) CHECK(lanes[j] == float(all[i + j]));
    }
    kernel_case<Fmt, 3 * ct::kernels::gemm_tile<float>::NR + 5, 512>();  // two K blocks, an edge panel
    kernel_case<Fmt, 8, 256>();                                           // one partial panel
}

// dX (+)= dY · W through quantized panels (adapters train over quantized bases) against the double
// reference over get(): every row count the GEMM dispatches differently, two K blocks, edge panels.
TEST_CASE_TEMPLATE("quant: gemm_nt_quant (the input gradient through W) = its scalar reference", Fmt, ct::bf16,
                   ct::int8_per_channel, ct::int8_group_min<16>, ct::int4_group<16>, ct::int8_dot<ct::int4_group<16>>,
                   ct::int4_group_min<16>, ct::int6_group<16>, ct::int6_group_min<16>, ct::int4_group<16, ct::f16>,
                   ct::int8_dot<ct::int6_group_min<16, ct::kscale>>) {
    constexpr std::size_t Out = 2 * ct::kernels::gemm_tile<float>::NR + 3, In = ct::two_level_scales<Fmt> ? 512 : 320;
    using W = ct::QuantizedWeight<Fmt, Out, In>;
    static W w;
    const std::vector<float> v = random_values(Out * In, 11);
    w.quantize([&](std::size_t i) { return v[i]; });
    random_minimums(w, 5);
    static float block[ct::kernels::nt_quant_block_elems];
    static float pack[ct::kernels::gemm_train_pack_elems<float>(40, Out, In)];
    for (std::size_t M : {1, 3, 8, 16, 32, 37})
        for (bool accumulate : {false, true}) {
            const std::vector<float> a = random_values(M * Out, 12), c0 = random_values(M * In, 13);
            std::vector<float> c = c0, want = c0;
            ct::kernels::gemm_nt_quant(M, In, Out, a.data(), Out, w.panels(), c.data(), In, block, pack, accumulate);
            ct::kernels::gemm_nt_quant_reference(M, a.data(), Out, w, want.data(), In, accumulate);
            // (float sums of 67 terms; levels with a minimum reach twice int4's magnitudes: twice the rounding)
            CHECK_CLOSE(fmt_name<Fmt>() << " M " << M << " accumulate " << accumulate, c.data(), want.data(), c.size(),
                        ct::unsigned_levels<Fmt> ? 4e-5 : 2e-5);
        }
}
