// ctformer/simd/arch.hpp — the one place the vector architecture is chosen.
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
#if defined(__x86_64__) && !defined(CTFORMER_QUIET_SSE2)
// (a note, not a warning: -Werror builds stay buildable; CTFORMER_QUIET_SSE2 silences it)
#pragma message("ctformer: compiled for baseline x86-64 (SSE2), about 3x slower than with -march=native or " \
                "-march=x86-64-v3 (docs/api.md, Build)")
#endif
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

}  // namespace ctformer::simd
