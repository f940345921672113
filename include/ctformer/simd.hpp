// ctformer/simd.hpp — the one place the vector architecture is chosen.
//
// The arch is named explicitly at compile time (never xsimd::default_arch): define
// CTFORMER_ARCH to an xsimd arch type to force one, CTFORMER_SCALAR for a plain scalar build,
// or let the compiler flags decide (-march=native / x86-64-v4 -> AVX-512, x86-64-v3 -> AVX2+FMA).
// Every kernel uses the helpers below, so a scalar build is the same code with width 1.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <type_traits>

#if !defined(CTFORMER_SCALAR)
#include <xsimd/xsimd.hpp>
#endif

namespace ctformer::simd {

#if defined(CTFORMER_SCALAR)
struct scalar_arch {
    static constexpr const char* name() { return "scalar"; }
};
using arch = scalar_arch;
template <class T> using vec = T;
template <class T> inline constexpr std::size_t width = 1;
#else
#if defined(CTFORMER_ARCH)
using arch = CTFORMER_ARCH;
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
#error "ctformer: no SIMD arch detected; define CTFORMER_SCALAR for a scalar build"
#endif
template <class T> using vec = xsimd::batch<T, arch>;
template <class T> inline constexpr std::size_t width = vec<T>::size;
#endif

inline constexpr const char* arch_name() { return arch::name(); }

// n rounded up to whole vectors of T.
template <class T> constexpr std::size_t whole_vectors(std::size_t n) { return (n + width<T> - 1) / width<T> * width<T>; }

template <class T> inline vec<T> load(const T* p) {
#if defined(CTFORMER_SCALAR)
    return *p;
#else
    return vec<T>::load_unaligned(p);
#endif
}
template <class T> inline void store(T* p, const vec<T>& v) {
#if defined(CTFORMER_SCALAR)
    *p = v;
#else
    v.store_unaligned(p);
#endif
}
template <class T> inline vec<T> splat(T x) { return vec<T>(x); }
template <class T> inline vec<T> fma(const vec<T>& a, const vec<T>& b, const vec<T>& c) {
#if defined(CTFORMER_SCALAR)
    return a * b + c;
#else
    return xsimd::fma(a, b, c);
#endif
}
template <class T> inline T hsum(const vec<T>& v) {
#if defined(CTFORMER_SCALAR)
    return v;
#else
    return xsimd::hadd(v);
#endif
}
#if !defined(CTFORMER_SCALAR)
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
}  // namespace detail
#endif
template <class T> inline T hmax(const vec<T>& v) {
#if defined(CTFORMER_SCALAR)
    return v;
#else
    alignas(64) T tmp[width<T>];
    if constexpr (detail::has_swizzle) {  // log2(width) rotate-and-max steps, then lane 0
        vec<T> m = v;
        if constexpr (width<T> >= 16) m = xsimd::select(m > detail::rotate<T, 8>(m), m, detail::rotate<T, 8>(m));
        if constexpr (width<T> >= 8) m = xsimd::select(m > detail::rotate<T, 4>(m), m, detail::rotate<T, 4>(m));
        if constexpr (width<T> >= 4) m = xsimd::select(m > detail::rotate<T, 2>(m), m, detail::rotate<T, 2>(m));
        if constexpr (width<T> >= 2) m = xsimd::select(m > detail::rotate<T, 1>(m), m, detail::rotate<T, 1>(m));
        m.store_aligned(tmp);
        return tmp[0];
    } else {
        v.store_aligned(tmp);
        T m = tmp[0];
        for (std::size_t i = 1; i < width<T>; ++i) m = tmp[i] > m ? tmp[i] : m;
        return m;
    }
#endif
}

// Lanes [0, count) of x, and fill in the others (count may exceed the width).
template <class T> inline vec<T> keep_lanes(const vec<T>& x, std::size_t count, T fill) {
#if defined(CTFORMER_SCALAR)
    return count > 0 ? x : fill;
#else
    const vec<T> idx = vec<T>::load_unaligned(detail::lane_index<T>.data());
    return xsimd::select(idx < vec<T>(T(count)), x, vec<T>(fill));
#endif
}

// Elementwise math on a scalar or a batch, with one spelling for both.
// Accuracy (measured by tests/test_kernels.cpp, documented in docs/design.md):
// xsimd's exp/erf/tanh are Cephes-style polynomial kernels within a few ulp of libm.
#if defined(CTFORMER_SCALAR)
#define CTFORMER_VMATH(scalar_expr, vector_expr) return scalar_expr;
#else
#define CTFORMER_VMATH(scalar_expr, vector_expr)      \
    if constexpr (std::is_arithmetic_v<V>) return scalar_expr; \
    else return vector_expr;
#endif
// (select rather than xsimd::max: the latter trips a GCC 12 false positive in avx512fintrin.h)
template <class V> inline V vmax(const V& a, const V& b) { CTFORMER_VMATH(a > b ? a : b, xsimd::select(a > b, a, b)) }
template <class V, class M> inline V vselect(const M& m, const V& a, const V& b) {
    CTFORMER_VMATH(m ? a : b, xsimd::select(m, a, b))
}
// exp: xsimd converts x·log2(e) to an integer, undefined behaviour for ±inf and NaN (a blocked
// score is -inf): the argument is clamped to where exp is already 0 or inf, NaN is passed around.
template <class V> inline V vexp(const V& x) {
#if !defined(CTFORMER_SCALAR)
    if constexpr (!std::is_arithmetic_v<V>) {
        using T = typename V::value_type;
        constexpr T lo = std::is_same_v<T, float> ? T(-104) : T(-746), hi = std::is_same_v<T, float> ? T(89) : T(710);
        const auto nan = !(x == x);  // (x != x is an ordered compare for double on some xsimd archs: false for NaN)
        const V safe = xsimd::select(nan, V(T(0)), xsimd::select(x < V(lo), V(lo), xsimd::select(x > V(hi), V(hi), x)));
        return xsimd::select(nan, x, xsimd::exp(safe));
    } else
#endif
        return std::exp(x);
}
template <class V> inline V verf(const V& x) { CTFORMER_VMATH(std::erf(x), xsimd::erf(x)) }
template <class V> inline V vtanh(const V& x) { CTFORMER_VMATH(std::tanh(x), xsimd::tanh(x)) }
template <class V> inline V vsqrt(const V& x) { CTFORMER_VMATH(std::sqrt(x), xsimd::sqrt(x)) }

#undef CTFORMER_VMATH

}  // namespace ctformer::simd
