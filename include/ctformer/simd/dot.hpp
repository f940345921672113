// ctformer/simd/dot.hpp — integer dot products of bytes, four to a 32-bit lane: the one operation
// xsimd does not have, so each arch's instruction is named here and nowhere else.
//
//   ivec          32-bit integer lanes, as many as vec<float> has (a scalar int32 where floats have
//                 no vectors)
//   dot_i8(acc, w, x)    acc[i] += Σ_j w[i].byte(j) · x[i].byte(j), w and x signed, in [-127, 127]
//   dot_i8(acc, w, x, ax)  the same with ax = abs_i8(x) given (dot_i8_takes_abs: formed once for many w)
//   dot_u8(acc, u, x)    the same with u unsigned, in [0, 127]
//   dot_u4x2(p, u, x, v, y), partial_sum(p)   two dot_u8 with u, v in [0, 15] (int4 levels), summed
//                        in 16 bits where that pays (x86), widened once per block
//
//   x86 (SSSE3 to AVX-512)   maddubs (u8 · s8 -> pairs in s16) + madd with ones; VNNI's dpbusd where
//                            the compiler targets it. Signed · signed: |x| · (w with x's sign).
//   aarch64                  sdot where the compiler targets it (armv8.2-a+dotprod), else vmull
//                            (s8 · s8 -> s16) and pairwise adds
//   armv7 NEON               vmull and pairwise adds
//   scalar and others        the fields sign-extended with shifts, int32 products
// Exact on every path: |w · x| <= 127 · 127, so two products never overflow 16 bits.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "arch.hpp"

#if CTFORMER_XSIMD && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#elif CTFORMER_XSIMD && (defined(__aarch64__) || defined(__ARM_NEON))
#include <arm_neon.h>
#endif

namespace ctformer::simd {

#if CTFORMER_XSIMD
using ivec = std::conditional_t<vectorized<float>, xsimd::batch<std::int32_t, arch>, std::int32_t>;
#else
using ivec = std::int32_t;
#endif
static_assert(sizeof(ivec) == sizeof(vec<float>), "ctformer: an int32 vector matches a float vector");

// Each 8 lanes evens first, (0, 2, 4, 6, 1, 3, 5, 7): the int4 formats' order of a block's inputs.
// One in-register shuffle on x86 with 8 lanes or more (lane_shuffle8); elsewhere callers permute
// through memory.
#if CTFORMER_XSIMD && (defined(__x86_64__) || defined(__i386__))
inline constexpr bool lane_shuffle8 = vectorized<float> && width<float> >= 8;
namespace detail {
struct evens_first_lanes {
    static constexpr unsigned get(std::size_t i, std::size_t) {
        const std::size_t j = i & 7;
        return static_cast<unsigned>((i - j) + (j < 4 ? 2 * j : 2 * (j - 4) + 1));
    }
};
}  // namespace detail
inline ivec evens_first8(const ivec& v) {
    if constexpr (lane_shuffle8) {
        const auto f = xsimd::bitwise_cast<vec<float>>(v);
        return xsimd::bitwise_cast<ivec>(
            xsimd::swizzle(f, xsimd::make_batch_constant<xsimd::batch<std::uint32_t, arch>, detail::evens_first_lanes>()));
    } else {
        return v;
    }
}
#else
inline constexpr bool lane_shuffle8 = false;
inline ivec evens_first8(const ivec& v) { return v; }
#endif

// The low bytes of v's lanes (each in [-128, 127]) to p, one byte a lane: a block's int32 roundings
// to its int8 row in one narrowing (vpmovdb, packs, vmovn) instead of lane by lane.
template <class R> [[gnu::always_inline]] inline void store_low_bytes(const R& v, std::int8_t* p) {
#if CTFORMER_XSIMD && defined(__AVX512F__)
    if constexpr (sizeof(R) == 64) return _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
#endif
#if CTFORMER_XSIMD && defined(__AVX2__)
    if constexpr (sizeof(R) == 32) {
        const __m256i x = v;
        const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
        return _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(w, w));
    }
#endif
#if CTFORMER_XSIMD && defined(__SSE2__)
    if constexpr (sizeof(R) == 16) {
        const __m128i w = _mm_packs_epi32(v, v);
        const std::int32_t b = _mm_cvtsi128_si32(_mm_packs_epi16(w, w));
        return static_cast<void>(std::memcpy(p, &b, 4));
    }
#endif
#if CTFORMER_XSIMD && (defined(__aarch64__) || defined(__ARM_NEON))
    if constexpr (sizeof(R) == 16) {
        const int16x4_t h = vmovn_s32(v);
        const std::int32_t b = vget_lane_s32(vreinterpret_s32_s8(vmovn_s16(vcombine_s16(h, h))), 0);
        return static_cast<void>(std::memcpy(p, &b, 4));
    }
#endif
    constexpr std::size_t n = sizeof(R) / 4;
    alignas(64) std::int32_t lanes[n];
    std::memcpy(lanes, &v, sizeof lanes);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::int8_t>(lanes[i]);
}

namespace detail {
// Byte j of each lane, sign-extended (signed) or zero-extended, as int32 lanes.
template <std::size_t J, bool Signed, class V> inline V byte_field(const V& x) {
    if constexpr (Signed) return V(x << int(24 - 8 * J)) >> 24;
    else if constexpr (J == 3) return V(x >> 24) & V(0xff);  // (>> of int32 is arithmetic)
    else return V(x >> int(8 * J)) & V(0xff);
}
template <bool Signed, class V> inline V dot_fields(const V& acc, const V& a, const V& x) {
    return acc + byte_field<0, Signed>(a) * byte_field<0, true>(x) + byte_field<1, Signed>(a) * byte_field<1, true>(x) +
           byte_field<2, Signed>(a) * byte_field<2, true>(x) + byte_field<3, Signed>(a) * byte_field<3, true>(x);
}
#if CTFORMER_XSIMD && defined(__SSSE3__)
template <class R> inline R maddubs(R u, R x) {
#if defined(__AVX512BW__)
    if constexpr (sizeof(R) == 64) return _mm512_maddubs_epi16(u, x); else
#endif
#if defined(__AVX2__)
    if constexpr (sizeof(R) == 32) return _mm256_maddubs_epi16(u, x); else
#endif
    return _mm_maddubs_epi16(u, x);
}
template <class R> inline R madd(R a, R b) {
#if defined(__AVX512BW__)
    if constexpr (sizeof(R) == 64) return _mm512_madd_epi16(a, b); else
#endif
#if defined(__AVX2__)
    if constexpr (sizeof(R) == 32) return _mm256_madd_epi16(a, b); else
#endif
    return _mm_madd_epi16(a, b);
}
template <class R> inline R add_i16(R a, R b) {
#if defined(__AVX512BW__)
    if constexpr (sizeof(R) == 64) return _mm512_add_epi16(a, b); else
#endif
#if defined(__AVX2__)
    if constexpr (sizeof(R) == 32) return _mm256_add_epi16(a, b); else
#endif
    return _mm_add_epi16(a, b);
}
// u8 · s8 pairs summed to s16, pairs of those to s32, added to acc (u <= 127 or x's pairs small):
// VNNI's one instruction where the compiler targets it.
template <class R> inline R maddubs_acc(R acc, R u, R x) {
#if defined(__AVX512VNNI__)
    if constexpr (sizeof(R) == 64) return _mm512_dpbusd_epi32(acc, u, x); else
#endif
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
    if constexpr (sizeof(R) == 32) return _mm256_dpbusd_epi32(acc, u, x); else
#endif
    return R(ivec(acc) + ivec(madd(maddubs(u, x), R(ivec(0x00010001)))));
}
// w with the sign of x, bytewise (where x = 0 anything: it meets |x| = 0).
template <class R> inline R sign_i8(R w, R x) {
#if defined(__AVX512BW__)
    if constexpr (sizeof(R) == 64) return _mm512_mask_sub_epi8(w, _mm512_movepi8_mask(x), _mm512_setzero_si512(), w); else
#endif
#if defined(__AVX2__)
    if constexpr (sizeof(R) == 32) return _mm256_sign_epi8(w, x); else
#endif
    return _mm_sign_epi8(w, x);
}
template <class R> inline R abs_i8(R x) {
#if defined(__AVX512BW__)
    if constexpr (sizeof(R) == 64) return _mm512_abs_epi8(x); else
#endif
#if defined(__AVX2__)
    if constexpr (sizeof(R) == 32) return _mm256_abs_epi8(x); else
#endif
    return _mm_abs_epi8(x);
}
#endif
#if CTFORMER_XSIMD && (defined(__aarch64__) || defined(__ARM_NEON))
inline int32x4_t neon_dot(int32x4_t acc, int8x16_t a, int8x16_t x) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, x);
#elif defined(__aarch64__)
    const int16x8_t pairs = vpaddq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(x)), vmull_high_s8(a, x));
    return vpadalq_s16(acc, pairs);
#else
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(x)), hi = vmull_s8(vget_high_s8(a), vget_high_s8(x));
    const int16x8_t pairs = vcombine_s16(vpadd_s16(vget_low_s16(lo), vget_high_s16(lo)),
                                         vpadd_s16(vget_low_s16(hi), vget_high_s16(hi)));
    return vpadalq_s16(acc, pairs);
#endif
}
#endif
}  // namespace detail

// acc[i] += Σ_j w[i].byte(j) · x[i].byte(j), signed bytes in [-127, 127].
[[gnu::always_inline]] inline ivec dot_i8(const ivec& acc, const ivec& w, const ivec& x) {
#if CTFORMER_XSIMD
    if constexpr (!std::is_same_v<ivec, std::int32_t>) {
#if defined(__SSSE3__)
        using R = typename ivec::register_type;
        return ivec(detail::maddubs_acc<R>(acc, detail::abs_i8<R>(x), detail::sign_i8<R>(w, x)));
#elif defined(__aarch64__) || defined(__ARM_NEON)
        return ivec(detail::neon_dot(acc, vreinterpretq_s8_s32(w), vreinterpretq_s8_s32(x)));
#else
        return detail::dot_fields<true>(acc, w, x);
#endif
    } else
#endif
        return detail::dot_fields<true>(acc, w, x);
}

// Whether dot_i8 forms |x| itself (x86 without VNNI: maddubs takes |x| unsigned and w with x's
// sign), so that a caller multiplying one x by many w may give |x| once (the four-argument dot_i8).
inline constexpr bool dot_i8_takes_abs =
#if CTFORMER_XSIMD && defined(__SSSE3__)
    vectorized<float>;
#else
    false;
#endif
// |x| bytewise where dot_i8_takes_abs (x in [-127, 127]); elsewhere x itself (the four-argument dot_i8 ignores it).
inline ivec abs_i8(const ivec& x) {
#if CTFORMER_XSIMD && defined(__SSSE3__)
    if constexpr (dot_i8_takes_abs) return ivec(detail::abs_i8<typename ivec::register_type>(x)); else
#endif
    return x;
}
// dot_i8 with ax = |x| (bytewise) given; where dot_i8_takes_abs is false, ax is not read.
[[gnu::always_inline]] inline ivec dot_i8(const ivec& acc, const ivec& w, const ivec& x, [[maybe_unused]] const ivec& ax) {
#if CTFORMER_XSIMD && defined(__SSSE3__)
    if constexpr (dot_i8_takes_abs) {
        using R = typename ivec::register_type;
        return ivec(detail::maddubs_acc<R>(acc, R(ax), detail::sign_i8<R>(w, x)));
    } else
#endif
        return dot_i8(acc, w, x);
}

// acc[i] += Σ_j u[i].byte(j) · x[i].byte(j), u unsigned in [0, 127], x signed.
[[gnu::always_inline]] inline ivec dot_u8(const ivec& acc, const ivec& u, const ivec& x) {
#if CTFORMER_XSIMD
    if constexpr (!std::is_same_v<ivec, std::int32_t>) {
#if defined(__SSSE3__)
        using R = typename ivec::register_type;
        return ivec(detail::maddubs_acc<R>(acc, u, x));
#elif defined(__aarch64__) || defined(__ARM_NEON)
        return ivec(detail::neon_dot(acc, vreinterpretq_s8_s32(u), vreinterpretq_s8_s32(x)));
#else
        return detail::dot_fields<false>(acc, u, x);
#endif
    } else
#endif
        return detail::dot_fields<false>(acc, u, x);
}

// Whether the dot takes unsigned bytes in [0, 255] exactly (VNNI's dpbusd: no 16-bit step), so a
// signed weight w can enter as w + 128 (its top bit flipped) and Σ (w + 128)·x = Σ w·x + 128·Σ x: one
// instruction a product where dot_i8 first moves x's sign onto w.
inline constexpr bool exact_u8_dot =
#if CTFORMER_XSIMD && defined(__AVX512VNNI__) && defined(__AVX512VL__)
    vectorized<float> && sizeof(ivec) >= 32;
#elif CTFORMER_XSIMD && defined(__AVXVNNI__)
    vectorized<float> && sizeof(ivec) == 32;
#else
    false;
#endif
// acc[i] += Σ_j u[i].byte(j) · x[i].byte(j), u unsigned in [0, 255], x signed: dpbusd where
// exact_u8_dot, the fields elsewhere (exact too; the kernels take dot_i8 there).
[[gnu::always_inline]] inline ivec dot_u8_full(const ivec& acc, const ivec& u, const ivec& x) {
#if CTFORMER_XSIMD && defined(__SSSE3__)
    if constexpr (exact_u8_dot) return ivec(detail::maddubs_acc<typename ivec::register_type>(acc, u, x));
#endif
    return detail::dot_fields<false>(acc, u, x);
}

// int4 levels: p (a partial sum, from ivec(0)) += Σ_j u[i].byte(j) · x[i].byte(j) + v[i].byte(j) ·
// y[i].byte(j), u and v unsigned in [0, 15], x and y signed; at most 4 calls before partial_sum(p)
// gives the int32 lanes. x86 without VNNI keeps the partial sums in 16 bits (4 · 2 · 2 · 15 · 127 <
// 2^15) and widens once; with VNNI and elsewhere p is the int32 sum.
[[gnu::always_inline]] inline ivec dot_u4x2(const ivec& p, const ivec& u, const ivec& x, const ivec& v, const ivec& y) {
    if constexpr (exact_u8_dot) return dot_u8_full(dot_u8_full(p, u, x), v, y);
#if CTFORMER_XSIMD && defined(__SSSE3__)
    if constexpr (!std::is_same_v<ivec, std::int32_t>) {
        using R = typename ivec::register_type;
        return ivec(detail::add_i16(R(p), detail::add_i16(detail::maddubs(R(u), R(x)), detail::maddubs(R(v), R(y)))));
    } else
#endif
        return dot_u8(dot_u8(p, u, x), v, y);
}
[[gnu::always_inline]] inline ivec partial_sum(const ivec& p) {
#if CTFORMER_XSIMD && defined(__SSSE3__)
    if constexpr (!std::is_same_v<ivec, std::int32_t> && !exact_u8_dot) {
        using R = typename ivec::register_type;
        return ivec(detail::madd(R(p), R(ivec(0x00010001))));
    } else
#endif
        return p;
}

}  // namespace ctformer::simd
