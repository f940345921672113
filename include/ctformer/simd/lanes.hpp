// ctformer/simd/lanes.hpp — loads, stores, fused multiply-add and the operations across the lanes
// of one vector (sums, maxima, transposes), each with a scalar branch where vec<T> is T.
#pragma once
#include <array>
#include <bit>
#include <cstdint>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "arch.hpp"

namespace ctformer::simd {

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
// A vector of T from p: T itself, or (T float) bf16 bits widened: the upper halves of the floats.
template <class T, class E> [[gnu::always_inline]] inline vec<T> load_as(const E* p) {
    if constexpr (std::is_same_v<E, T>) return load(p);
    else {
        static_assert(std::is_same_v<T, float> && std::is_same_v<E, std::uint16_t>, "ctformer: bf16 widens to float");
#if CTFORMER_XSIMD
        if constexpr (vectorized<float>) {  // zero-extend the 16-bit lanes, shift them up
            using U = xsimd::batch<std::uint32_t, arch>;
            return xsimd::bitwise_cast<vec<float>>(U::load_unaligned(p) << 16);
        } else
#endif
            return std::bit_cast<float>(std::uint32_t(*p) << 16);
    }
}
// a·b + c on vectors: one rounding where the arch has a fused multiply-add. xsimd 8.1 gives
// AVX-512 none (its generic a*b + c, fused only if the compiler contracts it: not under
// -ffp-contract=off, nor by clang at -O0 with -ffp-contract=fast, where AdamW's bit-for-bit test
// caught it), so AVX-512 calls the intrinsic. Scalars: std::fma where the target has a fused
// multiply-add (one instruction): left to contraction, a·b + c was fused or not depending on how
// the caller was inlined, and a norm's backward split over threads differed from its row loop in
// the last bit (AVX-512, d_model 40: the rows' 8-value scalar tails); elsewhere a·b + c.
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
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA) || defined(__FP_FAST_FMAF)
        if constexpr (std::is_floating_point_v<V>) return std::fma(a, b, c); else
#endif
        return a * b + c;
}
template <class T> inline vec<T> fma(const vec<T>& a, const vec<T>& b, const vec<T>& c) { return vfma(a, b, c); }
// vfma on scalars in constexpr code (its plain a·b + c under constant evaluation): a kernel's
// scalar tails whose bits must not depend on how the caller was inlined.
template <class T> [[gnu::always_inline]] constexpr T sfma(T a, T b, T c) {
    if (std::is_constant_evaluated()) return a * b + c;
    return vfma(a, b, c);
}

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
template <class T> inline vec<T> hsum_lanes(vec<T>* v);
// The same with max for +: lane i = the largest of v[i]'s lanes (no NaN among them).
template <class T> inline vec<T> hmax_lanes(vec<T>* v);
namespace detail {
template <class T, class Op, class Each> inline vec<T> reduce_lanes(vec<T>* v, const Op& op, const Each& each) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T> && detail::has_swizzle) {
        constexpr std::size_t W = width<T>;
        auto step = [v, &op]<std::size_t K>(std::integral_constant<std::size_t, K>) {
            const auto hi = detail::lanes_with_bit<T, K>();
#pragma GCC unroll 16
            for (std::size_t i = 0; i < W / (2 * K); ++i)  // pairs (v[2i], v[2i+1]) -> v[i]
                v[i] = op(xsimd::select(hi, v[2 * i + 1], v[2 * i]), detail::swap_lanes_by<T, K>(xsimd::select(hi, v[2 * i], v[2 * i + 1])));
        };
        step(std::integral_constant<std::size_t, 1>{});
        if constexpr (W >= 4) step(std::integral_constant<std::size_t, 2>{});
        if constexpr (W >= 8) step(std::integral_constant<std::size_t, 4>{});
        if constexpr (W >= 16) step(std::integral_constant<std::size_t, 8>{});
        return v[0];
    } else if constexpr (vectorized<T>) {
        alignas(64) T s[width<T>];
        for (std::size_t i = 0; i < width<T>; ++i) s[i] = each(v[i]);
        return vec<T>::load_aligned(s);
    } else
#endif
    return (void)op, (void)each, v[0];
}
}  // namespace detail
template <class T> inline vec<T> hsum_lanes(vec<T>* v) {
    return detail::reduce_lanes<T>(v, [](const vec<T>& a, const vec<T>& b) { return a + b; }, [](const vec<T>& a) { return hsum<T>(a); });
}
template <class T> inline T hmax(const vec<T>& v) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<T>) return detail::vector_hmax<T>(v); else
#endif
    return v;
}
template <class T> inline vec<T> hmax_lanes(vec<T>* v) {
    return detail::reduce_lanes<T>(
        v,
        [](const vec<T>& a, const vec<T>& b) -> vec<T> {
#if CTFORMER_XSIMD
            if constexpr (vectorized<T>) return xsimd::max(a, b); else
#endif
            return a > b ? a : b;
        },
        [](const vec<T>& a) { return hmax<T>(a); });
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

}  // namespace ctformer::simd
