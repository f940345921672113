// ctformer/simd/half.hpp — IEEE half precision (binary16) as 16-bit patterns: float -> half bits
// (round to nearest even), half bits -> float (exact), and a vector of floats from halves in
// memory (F16C where the target has it, shifts and an integer select elsewhere — never a
// subnormal float operand, so flush-to-zero units such as armv7 NEON convert exactly too); and
// a vector of floats from int8s (the k-quants' other half of a scale).
#pragma once
#include <bit>
#include <cstdint>

#include "arch.hpp"

#if CTFORMER_XSIMD && (defined(__F16C__) || defined(__AVX2__)) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

namespace ctformer::simd {

// The half nearest to x, ties to even; beyond 65504 (by half an ulp) ±inf; NaN stays a quiet NaN.
constexpr std::uint16_t half_bits(float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x), a = u & 0x7fffffffu;
    const auto sign = static_cast<std::uint16_t>(u >> 16 & 0x8000u);
    if (a > 0x7f800000u) return sign | 0x7e00u;
    if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520: rounds past the largest half
    if (a < 0x38800000u) {                         // below 2^-14: a subnormal half, units of 2^-24
        const std::uint32_t e = a >> 23;
        if (e < 102) return sign;  // below 2^-25: zero
        const std::uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
        std::uint32_t q = m >> shift;
        const std::uint32_t rem = m & ((1u << shift) - 1), tie = 1u << (shift - 1);
        q += rem > tie || (rem == tie && (q & 1u));
        return static_cast<std::uint16_t>(sign | q);  // (q = 0x400: the smallest normal, as encoded)
    }
    std::uint32_t h = (a - (112u << 23)) >> 13;  // rebias the exponent, keep 10 mantissa bits
    const std::uint32_t rem = a & 0x1fffu;
    h += rem > 0x1000u || (rem == 0x1000u && (h & 1u));
    return static_cast<std::uint16_t>(sign | h);
}

// The float a half's bits stand for (every half is a float).
constexpr float half_value(std::uint16_t h) {
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16, e = h >> 10 & 31u, m = h & 0x3ffu;
    float mag;
    if (e == 0) mag = static_cast<float>(m) * 0x1p-24f;
    else if (e == 31) mag = std::bit_cast<float>(0x7f800000u | m << 13);
    else mag = std::bit_cast<float>((e + 112u) << 23 | m << 13);
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(mag) | sign);
}

// width<float> halves from p, widened.
[[gnu::always_inline]] inline vec<float> load_half(const std::uint16_t* p) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<float>) {
#if defined(__F16C__) && !defined(CTFORMER_ARCH) && defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) && defined(__AVX512CD__)
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));  // (arch.hpp's avx512bw)
#elif defined(__F16C__) && !defined(CTFORMER_ARCH) && defined(__AVX2__)
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));     // (avx2, fma3<avx2>)
#else
        {
            using U = xsimd::batch<std::uint32_t, arch>;
            const U h = U::load_unaligned(p);  // (zero-extended)
            const U em = (h & U(0x7fffu)) << 13;
            const U normal = em + U(112u << 23);
            // a subnormal half: 2^-14 · (1 + m/1024) − 2^-14, on normal floats only
            const U sub = xsimd::bitwise_cast<U>(xsimd::bitwise_cast<vec<float>>(em + U(113u << 23)) - vec<float>(0x1p-14f));
            U mag = xsimd::select(em < U(1u << 23), sub, normal);
            mag = xsimd::select(em >= U(31u << 23), em + U(224u << 23), mag);  // inf, NaN
            return xsimd::bitwise_cast<vec<float>>(mag | (h & U(0x8000u)) << 16);
        }
#endif
    } else
#endif
        return half_value(*p);
}

// width<float> int8s from p as floats (exact; k-quant scales' integers, core/quant.hpp).
[[gnu::always_inline]] inline vec<float> load_i8(const std::int8_t* p) {
#if CTFORMER_XSIMD
    if constexpr (vectorized<float>) {
#if !defined(CTFORMER_ARCH) && defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) && defined(__AVX512CD__)
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#elif !defined(CTFORMER_ARCH) && defined(__AVX2__)
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
        return xsimd::to_float(xsimd::batch<std::int32_t, arch>::load_unaligned(p));  // (sign-extended)
#endif
    } else
#endif
        return static_cast<float>(*p);
}

}  // namespace ctformer::simd
