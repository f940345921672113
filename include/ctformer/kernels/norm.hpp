// ctformer/kernels/norm.hpp — row normalizations (LayerNorm, RMSNorm) over one d_model row.
#pragma once
#include <cmath>
#include <cstddef>

#include "elementwise.hpp"

namespace ctformer::kernels {

struct moments_t {
    double mean, var;
};

// x: (n) -> mean and biased (population) variance, two passes for accuracy.
template <class T> inline moments_t moments(const T* x, std::size_t n) {
    constexpr std::size_t W = simd::width<T>;
    const T mean = sum(x, n) / static_cast<T>(n);
    const simd::vec<T> mv(mean);
    simd::vec<T> acc(T(0));
    std::size_t i = 0;
    for (const std::size_t nv = n - n % W; i < nv; i += W) {
        const simd::vec<T> d = simd::load(x + i) - mv;
        acc = simd::fma<T>(d, d, acc);
    }
    T ss = simd::hsum<T>(acc);
    for (; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
    return {static_cast<double>(mean), static_cast<double>(ss / static_cast<T>(n))};
}

// y: (n) = (x - shift) * scale * gamma + beta; gamma/beta may be null (no affine / no bias).
// y may alias x.
template <class T>
inline void scale_shift(const T* x, T* y, std::size_t n, T shift, T scale, const T* gamma, const T* beta) {
    constexpr std::size_t W = simd::width<T>;
    const simd::vec<T> sv(shift), kv(scale);
    std::size_t i = 0;
    for (const std::size_t nv = n - n % W; i < nv; i += W) {
        simd::vec<T> v = (simd::load(x + i) - sv) * kv;
        if (gamma) v = v * simd::load(gamma + i);
        if (beta) v = v + simd::load(beta + i);
        simd::store(y + i, v);
    }
    for (; i < n; ++i) {
        T v = (x[i] - shift) * scale;
        if (gamma) v *= gamma[i];
        if (beta) v += beta[i];
        y[i] = v;
    }
}

// LayerNorm: y = (x - mean) / sqrt(var + eps) * gamma + beta (PyTorch's biased variance).
template <class T>
inline void layer_norm_row(const T* x, T* y, std::size_t n, T eps, const T* gamma, const T* beta) {
    const moments_t m = moments(x, n);
    const T rstd = static_cast<T>(1.0 / std::sqrt(m.var + static_cast<double>(eps)));
    scale_shift(x, y, n, static_cast<T>(m.mean), rstd, gamma, beta);
}

// RMSNorm: y = x / sqrt(mean(x²) + eps) * gamma.
template <class T> inline void rms_norm_row(const T* x, T* y, std::size_t n, T eps, const T* gamma) {
    constexpr std::size_t W = simd::width<T>;
    simd::vec<T> acc(T(0));
    std::size_t i = 0;
    for (const std::size_t nv = n - n % W; i < nv; i += W) {
        const simd::vec<T> v = simd::load(x + i);
        acc = simd::fma<T>(v, v, acc);
    }
    T ss = simd::hsum<T>(acc);
    for (; i < n; ++i) ss += x[i] * x[i];
    const T rstd = T(1) / std::sqrt(ss / static_cast<T>(n) + eps);
    scale_shift(x, y, n, T(0), rstd, gamma, static_cast<const T*>(nullptr));
}

}  // namespace ctformer::kernels
