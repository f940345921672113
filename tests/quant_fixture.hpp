// Helpers of the quantized-weight suites (tests/test_quant.cpp, tests/test_quant_decode.cpp, tests/quant_models/).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "model_fixture.hpp"

namespace quant_test {

constexpr double quant_tol = 2e-5;  // of the output's max magnitude: the float tolerance

inline std::vector<float> random_values(std::size_t n, unsigned seed, float scale = 1.f) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

// d = the dense params whose weights are q's dequantized values: every value of q (get: quantized
// weights dequantized) in walk order, then into d in the same order (the same structure and names).
template <class Q, class D> void dequantized_copy(const Q& q, D& d) {
    std::vector<double> values;
    ct::for_each_tensor(q, [&](std::string_view, const auto& u) {
        for (std::size_t i = 0; i < u.size; ++i) values.push_back(double(u.get(i)));
    });
    std::size_t at = 0;
    ct::for_each_tensor(d, [&](std::string_view, auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, static_cast<typename std::remove_cvref_t<decltype(t)>::value_type>(values[at++]));
    });
    REQUIRE(at == values.size());
}

inline double max_abs(const float* x, std::size_t n) {
    double m = 0;
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(x[i])));
    return m;
}
// got against want within tol of want's max magnitude; returns the relative error.
inline double check_rel(const char* what, const float* got, const float* want, std::size_t n, double tol) {
    const double scale = std::max(max_abs(want, n), 1e-30), err = test::compare(got, want, n).max_abs;
    INFO(what << ": max abs err " << err << " (" << err / scale << " of max " << scale << ", tol " << tol << ")");
    CHECK(err <= tol * scale);
    return err / scale;
}

// A minimum per group (int8_group_min, int4_group_min): random values of the scales' order (up to 40 steps), so the
// kernels' subtraction is seen; the other formats are left as they are.
template <class W> void random_minimums(W& w, unsigned seed) {
    if constexpr (ct::has_min<typename W::format> && W::two_level) {  // (an int8 a group times a half a 256 inputs)
        std::uint32_t x = seed;
        for (std::size_t o = 0; o < W::out_features; ++o)
            for (std::size_t k = 0; k < W::in_features; k += W::format::group) {
                x = x * 1664525u + 1013904223u;
                const float top = ct::has_high_plane<typename W::format> ? 63.f : 15.f;
                if (k % ct::kscale::super == 0)
                    w.super.mins[W::super_index(o, k)] = ct::simd::half_bits(std::fabs(w.scale_of(o, k)) * top / 127.f + 1e-3f);
                w.mins[W::scale_index(o, k)] = static_cast<std::int8_t>(static_cast<int>((x >> 8) % 255) - 127);
            }
    } else if constexpr (ct::has_min<typename W::format>) {
        std::uint32_t x = seed;
        for (std::size_t o = 0; o < W::out_features; ++o)
            for (std::size_t k = 0; k < W::in_features; k += W::format::group) {
                x = x * 1664525u + 1013904223u;
                const float u = static_cast<float>((x >> 8) % 2001) / 1000.f - 1.f;
                // (levels 0..15: a minimum of up to 15 steps, the values' range as a real group's)
                const float s = ct::quant::scale_value(w.scales[W::scale_index(o, k)]);
                w.mins[W::scale_index(o, k)] = ct::quant::to_scale<typename W::scale_type>(
                    s * u * (ct::unsigned_levels<typename W::format> ? (ct::has_high_plane<typename W::format> ? 63.f : 15.f) : 40.f));
            }
    }
}

template <class Fmt> const char* fmt_name() {
    if constexpr (std::is_same_v<Fmt, ct::bf16>) return "bf16";
    else if constexpr (std::is_same_v<Fmt, ct::int8_per_channel>) return "int8";
    else if constexpr (ct::has_high_plane<Fmt>) return ct::unsigned_levels<Fmt> ? "int6_group_min" : "int6";
    else if constexpr (ct::unsigned_levels<Fmt>) return "int4_group_min";
    else if constexpr (ct::has_min<Fmt>) return "int8_group_min";
    else if constexpr (Fmt::per_word == 4) return "int8_group";
    else return "int4";
}

// Model M stepped one token at a time through its caches (batch B, T tokens): each step's logits
// against the forward's row (within tol, what labels them); the worst relative difference.
template <class M, std::size_t B, std::size_t T, std::size_t V>
double step_vs_forward(const typename M::Params& p, const ct::Tensor<ct::token, B, T>& tokens,
                       const ct::Tensor<float, B, T, V>& forward, const char* what, double tol) {
    static typename M::template KVCache<B, T> cache;
    static typename M::template StepWorkspace<B, 1> ws;
    static ct::Tensor<ct::token, B, 1> one;
    static ct::Tensor<float, B, 1, V> logits;
    cache.reset();
    double worst = 0;
    for (std::size_t t = 0; t < T; ++t) {
        for (std::size_t b = 0; b < B; ++b) one.storage[b] = tokens.storage[b * T + t];
        REQUIRE(M::step(p, ws, cache, one, logits).ok());
        for (std::size_t b = 0; b < B; ++b)
            worst = std::max(worst, check_rel(what, logits.data() + b * V, forward.data() + (b * T + t) * V, V, tol));
    }
    return worst;
}

}  // namespace quant_test
