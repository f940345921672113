// The decoding options beside weight formats: int8 activations (ct::weights<F, ct::int8_activations>;
// simd/dot.hpp, kernels/gemv_int8.hpp) and bf16 KV caches (ct::kv_cache<ct::bf16>).
// int8 activations: the byte dot products against scalar arithmetic, the activation quantizer's
// rounding, every kernel path against a double product of the dequantized activations and weights
// (the integer sums are exact: float rounding only), and the models against their float-activation
// twins at the tolerance the activations' rounding allows (tests/quant_models/decoding.cpp). bf16
// caches: the attention kernels over a bf16 cache against the same kernels over a float cache
// holding the widened values (equal); the layer and models stepping against their forward at
// bf16's tolerance: tests/quant_models/decoding.cpp (docs/quantization.md).
#include <algorithm>
#include <bit>
#include <limits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "quant_fixture.hpp"

#include <ctformer/simd/dot.hpp>

namespace {
using namespace quant_test;
namespace ck = ct::kernels;

using I8 = ct::int8_dot<ct::int8_per_channel>;
using I4 = ct::int8_dot<ct::int4_group<16>>;
using I8G = ct::int8_dot<ct::int8_group<16>>;  // (GGUF's Q6_K as stored; Q8_0 is int8_group<32>)
using I8GM = ct::int8_dot<ct::int8_group_min<16>>;  // (any GGUF block format as stored)
using I4GM = ct::int8_dot<ct::int4_group_min<16>>;  // (GGUF's Q4_K, Q4_1 as stored)
using I6 = ct::int8_dot<ct::int6_group<16>>;          // (GGUF's Q6_K as stored)
using I6GM = ct::int8_dot<ct::int6_group_min<32>>;    // (GGUF's Q5_K as stored)
using I4H = ct::int8_dot<ct::int4_group<16, ct::f16>>;        // (GGUF's Q4_0 as stored, its halves)
using I6GMH = ct::int8_dot<ct::int6_group_min<32, ct::f16>>;  // (GGUF's Q5_1 as stored, its halves)

std::int32_t byte_of(std::int32_t w, int j, bool is_signed) {
    const std::int32_t b = (w >> (8 * j)) & 0xff;
    return is_signed && b > 127 ? b - 256 : b;
}

// ---- simd::dot_i8 (with |w| given too), simd::dot_u8: every lane, the extremes ----

template <class V = ct::simd::ivec>
void run_dots(const std::int32_t* acc, const std::int32_t* w, const std::int32_t* x, const std::int32_t* u, std::int32_t* out_i,
              std::int32_t* out_u, std::int32_t* out_a) {
    if constexpr (std::is_same_v<V, std::int32_t>) {
        *out_i = ct::simd::dot_i8(V(*acc), V(*w), V(*x));  // (V(...): dependent, discarded on vector builds)
        *out_u = ct::simd::dot_u8(V(*acc), V(*u), V(*x));
        *out_a = ct::simd::dot_i8(V(*acc), V(*x), V(*w), ct::simd::abs_i8(V(*w)));  // (the kernels' roles: |w| given)
    }
#if CTFORMER_XSIMD
    else {
        const V vw = V::load_unaligned(w), vx = V::load_unaligned(x);
        ct::simd::dot_i8(V::load_unaligned(acc), vw, vx).store_unaligned(out_i);
        ct::simd::dot_u8(V::load_unaligned(acc), V::load_unaligned(u), vx).store_unaligned(out_u);
        ct::simd::dot_i8(V::load_unaligned(acc), vx, vw, ct::simd::abs_i8(vw)).store_unaligned(out_a);
    }
#endif
}
template <class V = ct::simd::ivec> void run_u4(const std::int32_t* u, const std::int32_t* x, std::int32_t* out) {
    // four calls (the bound), then the partial sum widened
    if constexpr (std::is_same_v<V, std::int32_t>) {
        V p = 0;
        for (int i = 0; i < 4; ++i) p = ct::simd::dot_u4x2(p, u[2 * i], x[2 * i], u[2 * i + 1], x[2 * i + 1]);
        *out = ct::simd::partial_sum(p);
    }
#if CTFORMER_XSIMD
    else {
        constexpr std::size_t L = V::size;
        V p(0);
        for (std::size_t i = 0; i < 4; ++i)
            p = ct::simd::dot_u4x2(p, V::load_unaligned(u + 2 * i * L), V::load_unaligned(x + 2 * i * L),
                                   V::load_unaligned(u + (2 * i + 1) * L), V::load_unaligned(x + (2 * i + 1) * L));
        ct::simd::partial_sum(p).store_unaligned(out);
    }
#endif
}

TEST_CASE("quant int8: byte dot products = scalar sums on every lane, extremes included") {
    constexpr std::size_t L = ct::simd::width<float>;
    std::mt19937 g(5);
    std::uniform_int_distribution<int> s8(-127, 127), u8(0, 127);
    for (int trial = 0; trial < 200; ++trial) {
        alignas(64) std::int32_t w[L], x[L], u[L], acc[L], out_i[L], out_u[L], out_a[L];
        for (std::size_t l = 0; l < L; ++l) {
            std::uint32_t pw = 0, px = 0, pu = 0;
            for (int j = 0; j < 4; ++j) {
                const int a = trial < 2 ? (trial ? -127 : 127) : s8(g), b = trial < 2 ? -127 : s8(g), c = trial < 2 ? 127 : u8(g);
                pw |= std::uint32_t(std::uint8_t(std::int8_t(a))) << (8 * j);
                px |= std::uint32_t(std::uint8_t(std::int8_t(b))) << (8 * j);
                pu |= std::uint32_t(c) << (8 * j);
            }
            w[l] = std::int32_t(pw), x[l] = std::int32_t(px), u[l] = std::int32_t(pu);
            acc[l] = s8(g) * 1000;
        }
        run_dots(acc, w, x, u, out_i, out_u, out_a);
        for (std::size_t l = 0; l < L; ++l) {
            std::int32_t ri = acc[l], ru = acc[l];
            for (int j = 0; j < 4; ++j) {
                ri += byte_of(w[l], j, true) * byte_of(x[l], j, true);
                ru += byte_of(u[l], j, false) * byte_of(x[l], j, true);
            }
            INFO("trial " << trial << " lane " << l);
            REQUIRE(out_i[l] == ri);
            REQUIRE(out_u[l] == ru);
            REQUIRE(out_a[l] == ri);
        }
    }
}

TEST_CASE("quant int8: int4-level dot products summed in 16 bits, at the bound (4 calls of 15 · ±127)") {
    constexpr std::size_t L = ct::simd::width<float>;
    std::mt19937 g(6);
    std::uniform_int_distribution<int> s8(-127, 127), u4(0, 15);
    for (int trial = 0; trial < 100; ++trial) {
        std::int32_t u[8 * L], x[8 * L], out[L];
        for (std::size_t i = 0; i < 8 * L; ++i) {
            std::uint32_t pu = 0, px = 0;
            for (int j = 0; j < 4; ++j) {
                const int a = trial == 0 ? 15 : u4(g), b = trial == 0 ? 127 : trial == 1 ? -127 : s8(g);
                pu |= std::uint32_t(a) << (8 * j);
                px |= std::uint32_t(std::uint8_t(std::int8_t(b))) << (8 * j);
            }
            u[i] = std::int32_t(pu), x[i] = std::int32_t(px);
        }
        run_u4(u, x, out);
        for (std::size_t l = 0; l < L; ++l) {
            std::int32_t want = 0;
            for (std::size_t i = 0; i < 8; ++i)
                for (int j = 0; j < 4; ++j) want += byte_of(u[i * L + l], j, false) * byte_of(x[i * L + l], j, true);
            INFO("trial " << trial << " lane " << l);
            REQUIRE(out[l] == want);
        }
    }
}

// ---- The activation quantizer ----

TEST_CASE("quant int8: activations per block: max -> ±127, within half a step, zero blocks, int4's order") {
    constexpr std::size_t K = 96;
    std::vector<float> x = random_values(K, 11);
    for (std::size_t k = 32; k < 64; ++k) x[k] = 0;  // a zero block
    x[70] = -1e6f;                                    // one huge value
    std::int8_t q8[K], q4[K];
    float s8[K / 4], s4[K / 4];
    std::int32_t sum8[K / 4], sum4[K / 4];
    CHECK(ck::q8_block<I8>(K) == 32);
    CHECK(ck::q8_block<I8>(72) == 8);
    CHECK(ck::q8_block<I4>(K) == 16);
    CHECK(ck::q8_block<ct::int8_dot<ct::int4_group<64>>>(K) == 32);
    ck::quantize_row_q8<I8>(x.data(), K, 32, q8, s8, sum8);
    ck::quantize_row_q8<I4>(x.data(), K, 32, q4, s4, sum4);
    for (std::size_t b = 0; b < K / 32; ++b) {
        float m = 0;
        std::int32_t total = 0;
        for (std::size_t k = b * 32; k < b * 32 + 32; ++k) m = std::max(m, std::fabs(x[k]));
        CHECK(s8[b] == m / 127.f);
        for (std::size_t k = b * 32; k < b * 32 + 32; ++k) {
            INFO("k " << k << ": " << x[k] << " -> " << int(q8[k]) << " · " << s8[b]);
            CHECK(std::abs(int(q8[k])) <= 127);
            CHECK(std::fabs(x[k] - s8[b] * q8[k]) <= 0.5 * s8[b] * (1 + 1e-5) + 1e-30);
            if (std::fabs(x[k]) == m && m > 0) CHECK(std::abs(int(q8[k])) == 127);
            // int4's order: each 8 inputs evens first
            const std::size_t j = k % 8, at = k - j + (j % 2) * 4 + j / 2;
            CHECK(q4[at] == q8[k]);
            total += q8[k];
        }
        CHECK(sum8[b] == total);
        CHECK(sum4[b] == total);
    }
    CHECK(s8[1] == 0.f);
    for (std::size_t k = 64; k < 96; ++k)
        if (k != 70) CHECK(q8[k] == 0);  // the rest of the huge value's block rounds to zero
}

// The scalar reference of quantize_row_q8 (one block at a time): the vector paths give its bits.
template <class Fmt>
void reference_q8(const float* x, std::size_t K, std::size_t B, std::int8_t* q, float* scale, std::int32_t* sum) {
    for (std::size_t k0 = 0, b = 0; k0 < K; k0 += B, ++b) {
        float m = 0;
        bool finite = true;
        for (std::size_t j = 0; j < B; ++j) m = std::max(m, std::fabs(x[k0 + j])), finite = finite && std::isfinite(x[k0 + j]);
        if (!finite) m = std::numeric_limits<float>::quiet_NaN();
        const float inv = finite && m > 0 ? 127.f / m : 0.f;
        std::int32_t total = 0;
        for (std::size_t j = 0; j < B; ++j) {
            const auto v = static_cast<std::int32_t>(finite ? std::nearbyint(x[k0 + j] * inv) : 0.f);
            const std::size_t i = j % 8, at = Fmt::per_word == 8 ? j - i + (i % 2) * 4 + i / 2 : j;
            q[k0 + at] = static_cast<std::int8_t>(v), total += v;
        }
        scale[b] = m / 127.f, sum[b] = total;
    }
}
TEST_CASE_TEMPLATE("quant int8: the row quantizer = its one-block-at-a-time reference, bit for bit (any number of blocks of 32 or 16, NaN and inf rows)",
                   Fmt, I8, I4) {
    for (std::size_t B : {32, 16}) {
    for (std::size_t blocks : {1, 2, 9, 15, 16, 17, 24, 33}) {
        for (int bad = 0; bad < 3; ++bad) {  // finite; a NaN in the last block; an inf in the first
            const std::size_t K = blocks * B;
            std::vector<float> x = random_values(K, unsigned(blocks * 3 + bad), 4.f);
            for (std::size_t k = 32; k < 64 && k < K; ++k) x[k] = 0;  // a zero block
            if (bad == 1) x[K - 5] = std::numeric_limits<float>::quiet_NaN();
            if (bad == 2) x[3] = -std::numeric_limits<float>::infinity();
            std::vector<std::int8_t> q(K), rq(K);
            std::vector<float> s(blocks), rs(blocks);
            std::vector<std::int32_t> t(blocks), rt(blocks);
            ck::quantize_row_q8<Fmt>(x.data(), K, B, q.data(), s.data(), t.data());
            reference_q8<Fmt>(x.data(), K, B, rq.data(), rs.data(), rt.data());
            INFO(blocks << " blocks of " << B << ", case " << bad);
            CHECK(q == rq);
            CHECK(t == rt);
            CHECK(std::memcmp(s.data(), rs.data(), blocks * sizeof(float)) == 0);  // (NaN bits included)
        }
    }
    }
}

// ---- Kernels: rows 1..4 (a step) and more (four at a time), edge panels, K in two chunks, bias,
// act, accumulate; against a double product of the dequantized activations and weights ----

template <class Fmt, std::size_t N, std::size_t K> void int8_kernel_case() {
    using W = ct::QuantizedWeight<Fmt, N, K>;
    static W w;
    const std::vector<float> v = random_values(N * K, 7);
    w.quantize([&](std::size_t i) { return v[i]; });
    random_minimums(w, 9);
    const std::vector<float> bias = random_values(N, 8);
    const std::size_t B = ck::q8_block<Fmt>(K);
    for (std::size_t M : {1, 2, 3, 4, 5, 9, 16, 21, 48, 112}) {  // (16 rows and more: AMX tiles where the build has them, 16, 32 or 64 a pass)
        for (bool accumulate : {false, true}) {
            std::vector<float> a = random_values(M * K, unsigned(M) + 20);
            a[K / 2] *= 50;  // an outlier: its block's step is coarse, the others' are not
            const std::vector<float> c0 = random_values(M * N, 99);
            std::vector<float> c = c0;
            ck::gemm_panels(M, N, K, a.data(), K, w.panels(), c.data(), N, bias.data(), ct::relu{}, nullptr, accumulate);
            double worst = 0;
            std::vector<std::int8_t> q(K);
            std::vector<float> s(K / B);
            std::vector<std::int32_t> sums(K / B);
            for (std::size_t m = 0; m < M; ++m) {
                ck::quantize_row_q8<ct::int8_per_channel>(a.data() + m * K, K, B, q.data(), s.data(), sums.data());
                for (std::size_t n = 0; n < N; ++n) {
                    double acc = (accumulate ? c0[m * N + n] : 0) + bias[n], mag = std::fabs(acc);
                    for (std::size_t k = 0; k < K; ++k) {
                        const double t = double(s[k / B]) * q[k] * w.get(n * K + k);
                        acc += t, mag += std::fabs(t);
                    }
                    worst = std::max(worst, std::fabs(std::max(acc, 0.0) - c[m * N + n]) / mag);
                }
            }
            INFO(fmt_name<typename Fmt::weight_format>() << " int8 activations, M " << M << " N " << N << " K " << K
                                                         << " accumulate " << accumulate << ": worst " << worst
                                                         << " of the sum of |terms|");
            CHECK(worst <= 1e-6);
            if (M % 4 == 0) {  // the same bits four rows at a time (the VNNI / dot-product tile) as all at once
                std::vector<float> c4 = c0;
                for (std::size_t m0 = 0; m0 < M; m0 += 4)
                    ck::gemm_panels(4, N, K, a.data() + m0 * K, K, w.panels(), c4.data() + m0 * N, N, bias.data(), ct::relu{}, nullptr,
                                    accumulate);
                CHECK(std::memcmp(c4.data(), c.data(), c.size() * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE_TEMPLATE("quant int8: gemm_panels with int8 activations = the dequantized product", Fmt, I8, I8G, I8GM, I4, I4GM, I6,
                   I6GM, I4H, I6GMH) {
    constexpr std::size_t NR = ct::kernels::gemm_tile<float>::NR;
    int8_kernel_case<Fmt, 3 * NR + 5, 1056>();  // K in two chunks (five in compact builds), an edge panel
    int8_kernel_case<Fmt, 8, 64>();             // one partial panel
    if constexpr (Fmt::group == 0) int8_kernel_case<Fmt, NR, 72>();  // K not a multiple of 32: blocks of 8
}
TEST_CASE_TEMPLATE("quant int8: two-level scales (ct::kscale: GGUF's Q4_K, Q5_K, Q6_K as stored)", Fmt,
                   ct::int8_dot<ct::int4_group_min<32, ct::kscale>>, ct::int8_dot<ct::int6_group_min<16, ct::kscale>>) {
    constexpr std::size_t NR = ct::kernels::gemm_tile<float>::NR;
    int8_kernel_case<Fmt, 3 * NR + 5, 1280>();  // K in two chunks (more in compact builds), an edge panel
    int8_kernel_case<Fmt, 8, 256>();            // one partial panel
}
TEST_CASE("quant int8: int4 groups wider than a block (64: two blocks of 32 a group)") {
    int8_kernel_case<ct::int8_dot<ct::int4_group<64>>, 2 * ct::kernels::gemm_tile<float>::NR, 256>();
}
TEST_CASE("quant int8: int8 groups of 32 (GGUF's Q8_0) and wider than a block (64)") {
    int8_kernel_case<ct::int8_dot<ct::int8_group<32>>, 2 * ct::kernels::gemm_tile<float>::NR, 256>();
    int8_kernel_case<ct::int8_dot<ct::int8_group<32, ct::f16>>, 2 * ct::kernels::gemm_tile<float>::NR, 256>();
    int8_kernel_case<ct::int8_dot<ct::int8_group<64>>, 2 * ct::kernels::gemm_tile<float>::NR, 256>();
}

TEST_CASE_TEMPLATE("quant int8: NaN or inf in a row's activations makes that row's outputs NaN, the other rows exact", Fmt, I8,
                   I4, I6) {
    constexpr std::size_t N = 24, K = 64;
    static ct::QuantizedWeight<Fmt, N, K> w;
    const std::vector<float> v = random_values(N * K, 41);
    w.quantize([&](std::size_t i) { return v[i]; });
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        for (std::size_t M : {1, 3, 6}) {
            std::vector<float> a = random_values(M * K, 42), ref_a = a;
            a[(M - 1) * K + 37] = bad;  // the last row
            std::vector<float> c(M * N), ref(M * N);
            ck::gemm_panels(M, N, K, a.data(), K, w.panels(), c.data(), N, nullptr, ct::kernels::identity_op{}, nullptr);
            ck::gemm_panels(M, N, K, ref_a.data(), K, w.panels(), ref.data(), N, nullptr, ct::kernels::identity_op{}, nullptr);
            for (std::size_t m = 0; m < M; ++m)
                for (std::size_t n = 0; n < N; ++n) {
                    INFO("bad " << bad << " M " << M << " row " << m << " col " << n);
                    if (m + 1 == M) REQUIRE(std::isnan(c[m * N + n]));
                    else REQUIRE(c[m * N + n] == ref[m * N + n]);
                }
        }
    }
}

// ---- bf16 KV caches ----

TEST_CASE("bf16 cache: rounding to nearest even; inf and NaN kept") {
    CHECK(ct::quant::bf16_bits(1.f) == 0x3f80u);
    CHECK(ct::quant::bf16_bits(std::numeric_limits<float>::infinity()) == 0x7f80u);
    CHECK(ct::quant::bf16_value(std::uint16_t(ct::quant::bf16_bits(-std::numeric_limits<float>::infinity()))) ==
          -std::numeric_limits<float>::infinity());
    for (std::uint32_t nan : {0x7fc00000u, 0x7fffffffu, 0xffffffffu, 0x7f800001u})
        CHECK(std::isnan(ct::quant::bf16_value(std::uint16_t(ct::quant::bf16_bits(std::bit_cast<float>(nan))))));
    CHECK(ct::quant::bf16_bits(std::numeric_limits<float>::max()) == 0x7f80u);  // rounds up to inf (as torch's bf16)
}

// The attention of a step over a bf16 cache = over a float cache holding the widened values:
// one query row (attend_query's GEMVs, widening as they load), three rows (row by row), a causal
// mask, a key mask that blocks a NaN value.
TEST_CASE("bf16 cache: attention over bf16 keys and values = over their widened values") {
    constexpr std::size_t Dh = 24, S = 70;  // (24: a partial vector on AVX-512; 70: a tail past whole vectors)
    using C16 = ct::KVCache<float, 1, 1, Dh, S, std::uint16_t>;
    using C32 = ct::KVCache<float, 1, 1, Dh, S>;
    static C16 c16;
    static C32 c32;
    const std::vector<float> kv = random_values(2 * S * Dh, 31), q = random_values(3 * Dh, 32);
    std::vector<float> k_round(Dh), v_round(Dh);
    for (std::size_t j = 0; j < S; ++j) {
        const float* k = kv.data() + j * Dh;
        std::vector<float> v(kv.begin() + (S + j) * Dh, kv.begin() + (S + j + 1) * Dh);
        if (j == 40) v[3] = std::numeric_limits<float>::quiet_NaN();  // blocked below
        for (std::size_t d = 0; d < Dh; ++d) {
            k_round[d] = ct::quant::bf16_value(std::uint16_t(ct::quant::bf16_bits(k[d])));
            v_round[d] = ct::quant::bf16_value(std::uint16_t(ct::quant::bf16_bits(v[d])));
        }
        c16.put(0, 0, j, k, v.data());
        c32.put(0, 0, j, k_round.data(), v_round.data());
    }
    static float scores[ct::kernels::attention_scratch_elems(Dh)];
    const float scale = 0.2f;
    auto run = [&](const auto& cache, std::size_t Tq, std::size_t n, const auto& mask, float* out) {
        using E = typename std::remove_cvref_t<decltype(cache)>::element_type;
        ct::kernels::attend<Dh>(Tq, n, ct::kernels::strided<const float>{q.data(), Dh}, ct::kernels::keys_ref<E>{cache.keys_t(0, 0), S, true},
                       ct::kernels::strided<const E>{cache.values(0, 0), Dh}, ct::kernels::strided<float>{out, Dh}, scores, ct::kernels::rule_of(scale, mask, ct::kernels::head_ref{0, 0, 1}, n - Tq, ct::no_dropout{}, ct::dropout_site::self_attn_weights));
    };
    for (std::size_t Tq : {1, 3}) {
        float a[3 * Dh], b[3 * Dh];
        run(c16, Tq, 39, ct::causal{}, a);  // keys 0..38
        run(c32, Tq, 39, ct::causal{}, b);
        for (std::size_t i = 0; i < Tq * Dh; ++i) REQUIRE(a[i] == doctest::Approx(b[i]).epsilon(1e-6));
        // all 70 keys, the NaN one blocked by a key mask over its row
        static ct::Tensor<bool, 1, S> blocked;
        blocked.storage[40] = true;
        const auto mask = ct::key_padding(blocked);
        run(c16, Tq, S, mask, a);
        run(c32, Tq, S, mask, b);
        for (std::size_t i = 0; i < Tq * Dh; ++i) {
            REQUIRE(std::isfinite(a[i]));
            REQUIRE(a[i] == doctest::Approx(b[i]).epsilon(1e-6));
        }
    }
    CHECK(sizeof(C16) * 2 <= sizeof(C32) + 64);  // half the memory
}

}  // namespace
