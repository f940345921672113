// ctformer/simd.hpp — the one place the vector architecture is chosen.
//
// The arch is named explicitly at compile time (never xsimd::default_arch), and the choice never
// fails:
//   CTFORMER_SCALAR       plain scalar build, xsimd is not included;
//   CTFORMER_ARCH=<arch>  force an xsimd arch type (checked: the compiler must target it);
//   otherwise the compiler flags decide: x86 AVX-512 (-march=native / x86-64-v4), AVX2+FMA
//   (x86-64-v3), SSE4.2, SSE2; aarch64 NEON; armv7 NEON (-mfpu=neon); anything else (Cortex-M,
//   RISC-V without V, ...) is the scalar build, without xsimd.
// The vector type is chosen per element type: where the arch has no vectors of T (double on armv7
// NEON), vec<T> is T itself and those kernels run scalar. Every kernel uses the helpers below, so
// a scalar kernel is the same code with width 1.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "cmath.hpp"

#if defined(CTFORMER_SCALAR)
#define CTFORMER_XSIMD 0
#elif defined(CTFORMER_ARCH) || defined(__SSE2__) || defined(__aarch64__) || defined(__ARM_NEON)
#define CTFORMER_XSIMD 1
#else
#define CTFORMER_XSIMD 0  // no vector unit xsimd knows: scalar kernels
#endif

#if CTFORMER_XSIMD
#include <xsimd/xsimd.hpp>
#endif

namespace ctformer::simd {

#if CTFORMER_XSIMD
#if defined(CTFORMER_ARCH)
using arch = CTFORMER_ARCH;
static_assert(arch::supported(), "ctformer: CTFORMER_ARCH names a vector arch this compiler is not targeting "
                                 "(add its -march / -mfpu flags, or drop CTFORMER_ARCH to let ctformer choose)");
#elif defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) && defined(__AVX512CD__)
using arch = xsimd::avx512bw;  // avx512 hadd needs DQ: build with -march=x86-64-v4 or native
#elif defined(__AVX2__) && defined(__FMA__)
using arch = xsimd::fma3<xsimd::avx2>;
#elif defined(__AVX2__)
using arch = xsimd::avx2;
#elif defined(__SSE4_2__)
using arch = xsimd::sse4_2;
#elif defined(__SSE2__)
using arch = xsimd::sse2;
#elif defined(__aarch64__)
using arch = xsimd::neon64;
#else
using arch = xsimd::neon;  // armv7: float vectors only
#endif
// Whether the arch has vectors of T (armv7 NEON has none of double: xsimd declares an empty register).
template <class T> inline constexpr bool vectorized = [] {
    if constexpr (xsimd::types::has_simd_register<T, arch>::value) return xsimd::batch<T, arch>::size > 0;
    else return false;
}();
template <class T> using vec = std::conditional_t<vectorized<T>, xsimd::batch<T, arch>, T>;
template <class T> inline constexpr std::size_t width = [] {
    if constexpr (vectorized<T>) return xsimd::batch<T, arch>::size;
    else return std::size_t(1);
}();
#else
struct scalar_arch {
    static constexpr const char* name() { return "scalar"; }
};
using arch = scalar_arch;
template <class T> inline constexpr bool vectorized = false;
template <class T> using vec = T;
template <class T> inline constexpr std::size_t width = 1;
#endif

inline constexpr const char* arch_name() { return arch::name(); }

// n rounded up to whole vectors of T.
template <class T> constexpr std::size_t whole_vectors(std::size_t n) { return (n + width<T> - 1) / width<T> * width<T>; }

// Constant evaluation (a layer run inside a constant expression): xsimd is not constexpr, so there
// every kernel skips its vector loops and its scalar loop does all the work. vector_part(n): the
// elements a kernel's vector loop covers, n - n % width at run time and none in a constant expression.
// Test constant_evaluated() in an if statement, never in a const variable's initializer: that
// initializer is tried as a constant expression first, where the test is true, so
// `const size_t v = constant_evaluated() ? 0 : n;` is 0 at run time too (the scalar path, silently).
constexpr bool constant_evaluated() { return std::is_constant_evaluated(); }
template <class T> constexpr std::size_t vector_part(std::size_t n) {
    return std::is_constant_evaluated() ? 0 : n - n % width<T>;
}

// Each helper below takes the scalar branch where vec<T> is T (discarded, never instantiated,
// where T has vectors).
template <class T> inline vec<T> load(const T* p) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T>) return vec<T>::load_unaligned(p); else
#endif
    return *p;
}
template <class T> inline void store(T* p, const vec<T>& v) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T>) v.store_unaligned(p); else
#endif
    *p = v;
}
template <class T> inline vec<T> splat(T x) { return vec<T>(x); }
// a·b + c on vectors: one rounding where the arch has a fused multiply-add. xsimd 8.1 gives
// AVX-512 none (its generic a*b + c, fused only if the compiler contracts it: not under
// -ffp-contract=off, nor by clang at -O0 with -ffp-contract=fast, where AdamW's bit-for-bit test
// caught it), so AVX-512 calls the intrinsic. Scalars: a*b + c (contracted under the project's
// -ffp-contract=fast, like the scalar references).
template <class V> [[gnu::always_inline]] inline V vfma(const V& a, const V& b, const V& c) {
#if CTFORMER_XSIMD
    if constexpr (!std::is_arithmetic_v<V>) {
#if defined(__AVX512F__)
        if constexpr (std::is_base_of_v<xsimd::avx512f, arch>) {
            if constexpr (std::is_same_v<typename V::value_type, float>) return V(_mm512_fmadd_ps(a, b, c));
            else return V(_mm512_fmadd_pd(a, b, c));
        } else
#endif
            return xsimd::fma(a, b, c);
    } else
#endif
        return a * b + c;
}
template <class T> inline vec<T> fma(const vec<T>& a, const vec<T>& b, const vec<T>& c) { return vfma(a, b, c); }

// Whether vec<T>'s arithmetic is IEEE's lane for lane: +, -, ·, vdiv and vsqrt correctly
// rounded, denormals kept, vfma one rounding. True on x86 with FMA3 or AVX-512 and on aarch64; false on
// SSE/AVX without FMA3 (vfma rounds twice) and on armv7 NEON (flushes denormals, approximates /
// and sqrt). A kernel that must equal its scalar reference bit for bit (AdamW's update) runs
// its vector loop only where this holds.
template <class T> inline constexpr bool ieee_vectors = [] {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T>) {
#if defined(__x86_64__) || defined(__i386__)
        return std::is_base_of_v<xsimd::avx512f, arch> || std::is_base_of_v<xsimd::fma3<xsimd::avx2>, arch> ||
               std::is_base_of_v<xsimd::fma3<xsimd::sse4_2>, arch>;
#elif defined(__aarch64__)
        return true;
#else
        return false;
#endif
    } else
#endif
        return true;  // vec<T> is T: the scalar unit
}();
template <class T> inline T hsum(const vec<T>& v) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T>) return xsimd::hadd(v); else
#endif
    return v;
}
#if CTFORMER_XSIMD
namespace detail {
// x86 archs whose xsimd 8.1 backend has swizzle for float and double.
inline constexpr bool has_swizzle = std::is_base_of_v<xsimd::sse2, arch> || std::is_base_of_v<xsimd::avx, arch> ||
                                    std::is_base_of_v<xsimd::avx512f, arch>;
template <std::size_t Step> struct rotate_lanes {  // lane i reads lane i + Step (mod width)
    static constexpr unsigned get(std::size_t i, std::size_t n) { return unsigned((i + Step) % n); }
};
template <class T, std::size_t Step> inline vec<T> rotate(const vec<T>& v) {
    using index_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    return xsimd::swizzle(v, xsimd::make_batch_constant<xsimd::batch<index_t, arch>, rotate_lanes<Step>>());
}
template <class T> inline constexpr std::array<T, width<T>> lane_index = [] {  // 0, 1, 2, ...
    std::array<T, width<T>> a{};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = T(i);
    return a;
}();
template <class T> inline T vector_hmax(const vec<T>& v) {
    alignas(64) T tmp[width<T>];
    if constexpr (has_swizzle) {  // log2(width) rotate-and-max steps, then lane 0
        vec<T> m = v;
        if constexpr (width<T> >= 16) m = xsimd::select(m > rotate<T, 8>(m), m, rotate<T, 8>(m));
        if constexpr (width<T> >= 8) m = xsimd::select(m > rotate<T, 4>(m), m, rotate<T, 4>(m));
        if constexpr (width<T> >= 4) m = xsimd::select(m > rotate<T, 2>(m), m, rotate<T, 2>(m));
        if constexpr (width<T> >= 2) m = xsimd::select(m > rotate<T, 1>(m), m, rotate<T, 1>(m));
        m.store_aligned(tmp);
        return tmp[0];
    } else {
        v.store_aligned(tmp);
        T m = tmp[0];
        for (std::size_t i = 1; i < width<T>; ++i) m = tmp[i] > m ? tmp[i] : m;
        return m;
    }
}
template <std::size_t K> struct swap_lanes {  // lane i reads lane i xor K
    static constexpr unsigned get(std::size_t i, std::size_t) { return unsigned(i ^ K); }
};
template <class T, std::size_t K> inline constexpr std::array<T, width<T>> lane_bit = [] {  // 1 where lane & K
    std::array<T, width<T>> a{};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = (i & K) ? T(1) : T(0);
    return a;
}();
template <class T, std::size_t K> inline auto lanes_with_bit() {  // mask: lane & K
    return vec<T>::load_unaligned(lane_bit<T, K>.data()) != vec<T>(T(0));
}
template <class T, std::size_t K> inline vec<T> swap_lanes_by(const vec<T>& v) {  // lane i <- lane i xor K
    using index_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    return xsimd::swizzle(v, xsimd::make_batch_constant<xsimd::batch<index_t, arch>, swap_lanes<K>>());
}
// One step of transpose_square: for each pair (i, i + K), i without bit K, the lanes with bit K
// set of v[i] trade places with the lanes without it of v[i + K] (one lane swap, three blends).
template <class T, std::size_t K> inline void transpose_step(vec<T>* v) {
    const auto hi = lanes_with_bit<T, K>();
    // unrolled, or GCC keeps the block in memory (measured: a 16 x 16 block ~235 cycles rolled)
#pragma GCC unroll 16
    for (std::size_t i = 0; i < width<T>; ++i) {
        if (i & K) continue;
        const vec<T> t = swap_lanes_by<T, K>(xsimd::select(hi, v[i], v[i + K]));
        v[i] = xsimd::select(hi, t, v[i]);
        v[i + K] = xsimd::select(hi, v[i + K], t);
    }
}
}  // namespace detail
#endif
// v: width<T> vectors, the rows of a square block, transposed in place (v[i] lane j <- v[j] lane
// i): log2(width) butterfly steps in registers on x86, through memory elsewhere (GEMM packing of
// a transposed operand).
template <class T> inline void transpose_square(vec<T>* v) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T>) {
        if constexpr (detail::has_swizzle) {
            if constexpr (width<T> >= 16) detail::transpose_step<T, 8>(v);
            if constexpr (width<T> >= 8) detail::transpose_step<T, 4>(v);
            if constexpr (width<T> >= 4) detail::transpose_step<T, 2>(v);
            if constexpr (width<T> >= 2) detail::transpose_step<T, 1>(v);
        } else {
            constexpr std::size_t W = width<T>;
            alignas(64) T m[W * W];
            for (std::size_t i = 0; i < W; ++i) v[i].store_aligned(m + i * W);
            for (std::size_t i = 0; i < W; ++i)
                for (std::size_t j = i + 1; j < W; ++j) {
                    const T x = m[i * W + j];
                    m[i * W + j] = m[j * W + i];
                    m[j * W + i] = x;
                }
            for (std::size_t i = 0; i < W; ++i) v[i] = vec<T>::load_aligned(m + i * W);
        }
    } else
#endif
    (void)v;
}
// v: width<T> vectors (overwritten) -> lane i = Σ of v[i]'s lanes: log2(width) butterfly steps,
// each halving the vectors (two blends, one lane swap, one add per pair) on x86; the horizontal
// sums one by one elsewhere. A row normalization's statistics for width rows at once.
template <class T> inline vec<T> hsum_lanes(vec<T>* v) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T> && detail::has_swizzle) {
        constexpr std::size_t W = width<T>;
        auto step = [v]<std::size_t K>(std::integral_constant<std::size_t, K>) {
            const auto hi = detail::lanes_with_bit<T, K>();
#pragma GCC unroll 16
            for (std::size_t i = 0; i < W / (2 * K); ++i)  // pairs (v[2i], v[2i+1]) -> v[i]
                v[i] = xsimd::select(hi, v[2 * i + 1], v[2 * i]) +
                       detail::swap_lanes_by<T, K>(xsimd::select(hi, v[2 * i], v[2 * i + 1]));
        };
        step(std::integral_constant<std::size_t, 1>{});
        if constexpr (W >= 4) step(std::integral_constant<std::size_t, 2>{});
        if constexpr (W >= 8) step(std::integral_constant<std::size_t, 4>{});
        if constexpr (W >= 16) step(std::integral_constant<std::size_t, 8>{});
        return v[0];
    } else if constexpr (vectorized<T>) {
        alignas(64) T s[width<T>];
        for (std::size_t i = 0; i < width<T>; ++i) s[i] = hsum<T>(v[i]);
        return vec<T>::load_aligned(s);
    } else
#endif
    return v[0];
}
template <class T> inline T hmax(const vec<T>& v) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T>) return detail::vector_hmax<T>(v); else
#endif
    return v;
}

// Lanes [0, count) of x, and fill in the others (count may exceed the width).
template <class T> inline vec<T> keep_lanes(const vec<T>& x, std::size_t count, T fill) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T>) {
        const vec<T> idx = vec<T>::load_unaligned(detail::lane_index<T>.data());
        return xsimd::select(idx < vec<T>(T(count)), x, vec<T>(fill));
    } else
#endif
    return count > 0 ? x : fill;
}

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
// registers (measured on AVX-512, Zen 5: a 32 x 32 attention head 1.53 -> 1.38 µs inlined).
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
// values IEEE products give. x > 88 is outside its domain. Half the instructions of vexp
// (measured on AVX-512, Zen 5: 16 vectors, exp and sum, 66 -> 48 ns); the max instead of a
// compare and two blends: 32 vectors 2.94 -> 2.61 ns each (AVX2, Zen 4).
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
