// ctformer/kernels/optim.hpp — an optimizer's elementwise update over raw storage (optim.hpp
// reflects the parameters and calls it once per tensor).
//
// PyTorch's kernels round every product they do not fuse; under -ffp-contract=fast (the project's
// flag) the compiler would fuse a product into the add after it, so each such product passes
// through kernels::rounded, an empty asm that keeps the value in its register (the compiler cannot
// see through it, so it cannot contract it). The vector loop and the scalar tail (the kernel's
// reference) compute the same operations, each correctly rounded (mul, div, sqrt, fma): they agree
// bit for bit (tests/test_kernels.cpp) where the vectors are IEEE's (simd::ieee_vectors: x86 with
// FMA3 or AVX-512, aarch64); elsewhere (SSE without FMA3, armv7 NEON) the scalar loop, with
// std::fma, does every element.
#pragma once
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "../simd/simd.hpp"

namespace ctformer::kernels {

// x, opaque to the optimizer: rounded where it was computed, never fused into its use.
template <class V> [[gnu::always_inline]] inline V rounded(V x) {
#if defined(__GNUC__) || defined(__clang__)
    if constexpr (std::is_arithmetic_v<V>) {
#if defined(__x86_64__) && defined(__AVX512F__)
        __asm__("" : "+v"(x));
#elif defined(__x86_64__)
        __asm__("" : "+x"(x));
#elif defined(__aarch64__)
        __asm__("" : "+w"(x));
#else
        __asm__("" : "+m"(x));
#endif
    } else {
#if CTFORMER_XSIMD
        auto r = x.data;
#if defined(__x86_64__) && defined(__AVX512F__)
        __asm__("" : "+v"(r));
#elif defined(__x86_64__)
        __asm__("" : "+x"(r));
#elif defined(__aarch64__)
        __asm__("" : "+w"(r));
#else
        __asm__("" : "+m"(r));
#endif
        x = V(r);
#endif
    }
#endif
    return x;
}

namespace detail {
template <class V> [[gnu::always_inline]] inline V fused(const V& a, const V& b, const V& c) {  // a·b + c, one rounding
    if constexpr (std::is_arithmetic_v<V>) return std::fma(a, b, c); else return simd::vfma(a, b, c);
}
}  // namespace detail

// torch.optim.AdamW's per-element scalars, rounded to the dtype (PyTorch's Python scalars).
template <class T> struct adamw_scalars {
    T decay, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, neg_step, bias_correction2_sqrt;
};

// p, g, m, v: (n) parameters, gradients, first and second moments -> p, m, v after one step:
//   p = p·decay;  m = fma(1-β1, g, m·β1);  v = fma((1-β2)·g, g, v·β2)
//   p = p + (neg_step·m) / (sqrt(v) / bc2 + eps)
template <class T>
inline void adamw_update(std::size_t n, T* p, const T* g, T* m, T* v, const adamw_scalars<T>& s) {
    auto one = [&s]<class V>(V pi, V gi, V& mi, V& vi) {
        pi = rounded(pi * V(s.decay));
        mi = detail::fused(V(s.one_minus_beta1), gi, rounded(mi * V(s.beta1)));
        vi = detail::fused(rounded(V(s.one_minus_beta2) * gi), gi, rounded(vi * V(s.beta2)));
        const V denom = simd::vdiv(simd::vsqrt(vi), V(s.bias_correction2_sqrt)) + V(s.eps);
        return pi + simd::vdiv(rounded(V(s.neg_step) * mi), denom);
    };
    std::size_t i = 0;
    if constexpr (simd::ieee_vectors<T>)  // (elsewhere the scalar loop does it all: see ieee_vectors)
        for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += simd::width<T>) {
            simd::vec<T> mi = simd::load(m + i), vi = simd::load(v + i);
            simd::store(p + i, one(simd::load(p + i), simd::load(g + i), mi, vi));
            simd::store(m + i, mi), simd::store(v + i, vi);
        }
    for (; i < n; ++i) p[i] = one(p[i], g[i], m[i], v[i]);
}

}  // namespace ctformer::kernels
