// ctformer/simd/math.hpp — elementwise math (exp, log, erf, tanh, sqrt, min/max, select, ...) on a
// scalar or a vector with one spelling, constexpr through simd/cmath.hpp.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "arch.hpp"
#include "cmath.hpp"
#include "lanes.hpp"

namespace ctformer::simd {

// Elementwise math on a scalar or a batch, with one spelling for both.
// Accuracy (measured by tests/test_kernels.cpp, documented in docs/design.md):
// xsimd's exp/erf/tanh are Cephes-style polynomial kernels within a few ulp of libm. In a constant
// expression the scalar forms use ctformer::cmath (cmath.hpp), libm's everywhere else.
namespace detail {
template <class T> constexpr T s_exp(T x) { if (std::is_constant_evaluated()) return cmath::exp(x); return std::exp(x); }
template <class T> constexpr T s_log(T x) { if (std::is_constant_evaluated()) return cmath::log(x); return std::log(x); }
template <class T> constexpr T s_erf(T x) { if (std::is_constant_evaluated()) return cmath::erf(x); return std::erf(x); }
template <class T> constexpr T s_tanh(T x) { if (std::is_constant_evaluated()) return cmath::tanh(x); return std::tanh(x); }
template <class T> constexpr T s_sqrt(T x) { if (std::is_constant_evaluated()) return cmath::sqrt(x); return std::sqrt(x); }
}  // namespace detail
#if !CTFORMER_XSIMD
#define CTFORMER_VMATH(scalar_expr, vector_expr) return scalar_expr;
#else
#define CTFORMER_VMATH(scalar_expr, vector_expr)      \
    if constexpr (std::is_arithmetic_v<V>) return scalar_expr; \
    else return vector_expr;
#endif
// max(a, b) = a > b ? a : b and min(a, b) = a < b ? a : b, lane by lane: b where either is NaN.
// On x86 that is exactly the max/min instruction (one instruction where a compare and a blend
// would be two; xsimd's max/min are those instructions there), elsewhere a select (NEON's max
// returns NaN for either NaN operand).
#if CTFORMER_XSIMD && defined(__SSE2__)
#define CTFORMER_VMINMAX(op, cmp) CTFORMER_VMATH(a cmp b ? a : b, xsimd::op(a, b))
#else
#define CTFORMER_VMINMAX(op, cmp) CTFORMER_VMATH(a cmp b ? a : b, xsimd::select(a cmp b, a, b))
#endif
template <class V> constexpr V vmax(const V& a, const V& b) { CTFORMER_VMINMAX(max, >) }
template <class V> constexpr V vmin(const V& a, const V& b) { CTFORMER_VMINMAX(min, <) }
#undef CTFORMER_VMINMAX
template <class V, class M> constexpr V vselect(const M& m, const V& a, const V& b) {
    CTFORMER_VMATH(m ? a : b, xsimd::select(m, a, b))
}
// exp: xsimd converts x·log2(e) to an integer, undefined behaviour for ±inf and NaN (a blocked
// score is -inf): the argument is clamped to where exp is already 0 or inf, NaN is passed around.
// Always inlined: GCC otherwise calls it once per vector of a softmax, spilling the caller's
// registers.
#if CTFORMER_XSIMD
namespace detail {
// f(x) for x clamped to [lo, hi] (where f is already its limit), NaN passed around f: xsimd's exp
// (and its double erf and tanh, through it) convert to integers, undefined for ±inf and NaN.
template <class V, class F> [[gnu::always_inline]] inline V saturated(const V& x, const V& lo, const V& hi, F f) {
    const auto nan = !(x == x);  // (x != x is an ordered compare for double on some xsimd archs: false for NaN)
    return xsimd::select(nan, x, f(xsimd::select(nan, lo, vmin(hi, vmax(lo, x)))));
}
}  // namespace detail
// Vectors of float (the kernels' fast paths).
template <class V> concept float_vector = requires { typename V::value_type; } && std::is_same_v<typename V::value_type, float>;
#endif
template <class V> [[gnu::always_inline]] constexpr inline V vexp(const V& x) {
#if CTFORMER_XSIMD
    if constexpr (!std::is_arithmetic_v<V>) {
        constexpr bool f = float_vector<V>;
        return detail::saturated(x, V(f ? -104 : -746), V(f ? 89 : 710), [](const V& v) { return xsimd::exp(v); });
    } else
#endif
        return detail::s_exp(x);
}
// exp for the softmax's arguments, x <= 0 (scores minus their maximum; -inf where blocked): the
// float kernel is xsimd's (same reduction and polynomial, so the same values), without the
// clamps of either side that vexp needs for any x. Float clamps x at -88 by one max (NaN kept:
// max(-88, x) returns x when x is NaN): there k = -127 and the scale 2^k is built as +0, so every
// x <= -88 (a blocked score's -inf included) gives exactly 0, and (-88, -87.3] the subnormal
// values IEEE products give. x > 88 is outside its domain. Half the instructions of vexp; the max
// instead of a compare and two blends.
template <class V> [[gnu::always_inline]] constexpr inline V vexp_nonpositive(const V& x) {
#if CTFORMER_XSIMD
    if constexpr (!std::is_arithmetic_v<V>) {
        if constexpr (std::is_same_v<typename V::value_type, float>) {
            using I = xsimd::batch<std::int32_t, arch>;
            const V xc = vmax(V(-88.0f), x);
            const I ki = xsimd::nearbyint_as_int(xc * V(1.44269504088896341f));
            const V k = xsimd::to_float(ki);
            V r = vfma(k, V(-0.693359375f), xc);  // xc - k·ln2_hi, exactly xsimd's fnma
            r = vfma(k, V(2.12194440e-4f), r);
            V y = vfma(r, V(1.3997796e-03f), V(8.3955629e-03f));
            y = vfma(r, y, V(4.1665401e-02f));
            y = vfma(r, y, V(1.6666277e-01f));
            y = vfma(r, y, V(0.5f));
            const V e = vfma(y, r * r, r) + V(1.0f);
            return e * xsimd::bitwise_cast<V>((ki + I(127)) << 23);
        } else {
            return xsimd::select(x < V(-87), V(0), vexp(x));
        }
    } else
#endif
        return x < V(-87) ? V(0) : detail::s_exp(x);
}
// erf: float vectors by one rational function, erf(a) = a·P(a²)/Q(a²) with a = x clamped to
// [-4, 4] (erf(±4) rounds to ±1; NaN passes the clamp), P of degree 6 and Q of degree 4 fitted to
// a relative minimax by tools/fit_erf.py: 0.55 ε of approximation, 2.7 ε measured in float over
// [-6, 6] (docs/design.md). One division and ten FMAs where xsimd's erf evaluates two polynomials,
// an exp and a division and blends them. Doubles use xsimd's.
namespace detail {
// P and Q (t⁰ first) scaled for an argument u = r·x: erf(r·x) = x·(r·P(r²·x²))/Q(r²·x²), so
// coefficient i of P is P_i·r·r²ⁱ·s (s: a constant factor folded in) and of Q, Q_i·r²ⁱ.
struct erf_rational {
    float p[7], q[5];
};
constexpr erf_rational erf_scaled(double r, double s) {
    constexpr double P[] = {0x1.20dd74p+0,  0x1.a83536p-3,   0x1.a619bap-5, 0x1.058b84p-8,
                            0x1.34e448p-13, -0x1.04b09ap-19, 0x1.484f4ep-26};
    constexpr double Q[] = {1.0, 0x1.08a6d6p-1, 0x1.e33898p-4, 0x1.ea2ac8p-7, 0x1.0bb1c6p-10};
    erf_rational c{};
    double r2i = 1;  // (r²)ⁱ
    for (int i = 0; i < 7; r2i *= r * r, ++i) {
        c.p[i] = static_cast<float>(P[i] * r * r2i * s);
        if (i < 5) c.q[i] = static_cast<float>(Q[i] * r2i);
    }
    return c;
}
inline constexpr erf_rational erf_plain = erf_scaled(1, 1);  // the fitted float coefficients themselves
// Φ(x) - 1/2 = erf(x/√2)/2: r = 1/√2, s = 1/2 (Q's coefficients exact: powers of two)
inline constexpr erf_rational normal_cdf_half = erf_scaled(0.70710678118654752440, 0.5);
#if CTFORMER_XSIMD
template <std::size_t N, class V> [[gnu::always_inline]] inline V horner(const V& t, const float (&c)[N]) {
    V y = vfma(t, V(c[N - 1]), V(c[N - 2]));
    [&]<std::size_t... I>(std::index_sequence<I...>) { ((y = vfma(t, y, V(c[N - 3 - I]))), ...); }(std::make_index_sequence<N - 2>{});
    return y;
}
// a·P(a²)/Q(a²) with coefficients E and a = x clamped to [-lim, lim] (NaN passes the clamp).
template <const erf_rational& E, class V> [[gnu::always_inline]] inline V erf_ratio(const V& x, float lim) {
    const V a = vmin(V(lim), vmax(V(-lim), x)), t = a * a;
    return a * horner(t, E.p) / horner(t, E.q);
}
#endif
}  // namespace detail
#if CTFORMER_XSIMD
template <class V> [[gnu::always_inline]] inline V verf_float(const V& x) { return detail::erf_ratio<detail::erf_plain>(x, 4.f); }
#endif
// Double vectors: xsimd's erf and tanh, whose exp converts to 64-bit integers in software
// (undefined for ±inf and NaN, caught by UBSan), on x clamped where they are ±1 in double.
template <class V> constexpr V verf(const V& x) {
#if CTFORMER_XSIMD
    if constexpr (float_vector<V>) return verf_float(x);
    else if constexpr (!std::is_arithmetic_v<V>) return detail::saturated(x, V(-6), V(6), [](const V& v) { return xsimd::erf(v); });  // erfc(6) < 2^-54
    else
#endif
        return detail::s_erf(x);
}
// Φ(x) = (1 + erf(x/√2))/2, the standard normal's CDF (GELU: x·Φ(x)). Float vectors fold the 1/√2
// and the 1/2 into verf_float's coefficients (x clamped to ±4√2: two multiplications fewer per
// vector) and clamp to [0, 1]: far below, where erf's rounding would leave -6e-8, Φ is 0 (GELU -0
// as in PyTorch, not +6e-6 at x = -100; NaN at -inf as there); far above it is 1 where the
// rational's unfused rounding (SSE4.2, armv7) would leave 1 + ε (GELU(30) 30.000002, not 30).
template <class V> constexpr V vnormal_cdf(const V& x) {
#if CTFORMER_XSIMD
    if constexpr (float_vector<V>)
        return vmin(V(1.f), vmax(V(0.f), detail::erf_ratio<detail::normal_cdf_half>(x, 5.65685424949238019520f) + V(0.5f)));
    else
#endif
        return V(0.5) * (V(1) + verf(x * V(0.70710678118654752440)));
}
template <class V> constexpr V vtanh(const V& x) {
#if CTFORMER_XSIMD
    if constexpr (float_vector<V>) return xsimd::tanh(x);  // (its exp converts in hardware)
    else if constexpr (!std::is_arithmetic_v<V>) return detail::saturated(x, V(-20), V(20), [](const V& v) { return xsimd::tanh(v); });  // 1 - tanh(20) < 2^-55
    else
#endif
        return detail::s_tanh(x);
}
// a / b, correctly rounded: xsimd 8.1's aarch64 backend divides only doubles itself, floats fall
// back to armv7's reciprocal estimate and Newton steps (ulps off: AdamW's bit-for-bit test caught
// it), so aarch64 floats call the instruction. (The kernels' other divisions keep xsimd's `/`:
// within their tolerances.) sqrt below, likewise.
template <class V> [[gnu::always_inline]] inline V vdiv(const V& a, const V& b) {
#if CTFORMER_XSIMD && defined(__aarch64__)
    if constexpr (!std::is_arithmetic_v<V>)
        if constexpr (std::is_same_v<typename V::value_type, float>) return V(vdivq_f32(a, b));
#endif
    return a / b;
}
template <class V> constexpr V vsqrt(const V& x) {
#if CTFORMER_XSIMD && defined(__aarch64__)
    if constexpr (!std::is_arithmetic_v<V>)
        if constexpr (std::is_same_v<typename V::value_type, float>) return V(vsqrtq_f32(x));
#endif
    CTFORMER_VMATH(detail::s_sqrt(x), xsimd::sqrt(x))
}
template <class V> constexpr V vlog(const V& x) { CTFORMER_VMATH(detail::s_log(x), xsimd::log(x)) }

#undef CTFORMER_VMATH

}  // namespace ctformer::simd
