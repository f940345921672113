// ctformer/kernels/norm.hpp — row normalizations (LayerNorm, RMSNorm) over one d_model row.
#pragma once
#include <cmath>
#include <cstddef>

#include "elementwise.hpp"

namespace ctformer::kernels {

template <class T> struct moments_t {
    T mean, var;
};

// x: (n) -> mean and biased (population) variance, two passes for accuracy, in T: a float layer
// does no double arithmetic (software floating point on single-precision FPUs such as
// Cortex-M4/M33); float statistics meet the PyTorch fixtures' 2e-5 tolerance (tests/test_golden.cpp).
template <class T> constexpr moments_t<T> moments(const T* x, std::size_t n) {
    using V = simd::vec<T>;
    const T mean = sum(x, n) / static_cast<T>(n);
    std::size_t i = 0;
    T ss = T(0);
    if (!simd::constant_evaluated()) {
        const V mv(mean);
        i = n - n % simd::width<T>;
        ss = simd::hsum<T>(reduce_vectors<T>(i, [x, &mv](const V& acc, std::size_t j) {
            const V d = simd::load(x + j) - mv;
            return simd::fma<T>(d, d, acc);
        }));
    }
    for (; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
    return {mean, ss / static_cast<T>(n)};
}

// y: (n) = (x - shift) * scale * gamma + beta; gamma/beta may be null (no affine / no bias).
// y may alias x.
template <class T>
constexpr void scale_shift(const T* x, T* y, std::size_t n, T shift, T scale, const T* gamma, const T* beta) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W) {
        simd::vec<T> v = (simd::load(x + i) - simd::vec<T>(shift)) * simd::vec<T>(scale);
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
constexpr void layer_norm_row(const T* x, T* y, std::size_t n, T eps, const T* gamma, const T* beta) {
    const moments_t<T> m = moments(x, n);
    const T rstd = T(1) / simd::vsqrt(m.var + eps);
    scale_shift(x, y, n, m.mean, rstd, gamma, beta);
}

// RMSNorm: y = x / sqrt(mean(x²) + eps) * gamma.
template <class T> constexpr void rms_norm_row(const T* x, T* y, std::size_t n, T eps, const T* gamma) {
    const T rstd = T(1) / simd::vsqrt(dot(x, x, n) / static_cast<T>(n) + eps);
    scale_shift(x, y, n, T(0), rstd, gamma, static_cast<const T*>(nullptr));
}

// ---- Several rows: the statistics of width<T> rows at a time, as vertical vector operations (one
// accumulator per row, the horizontal sums of all of them in one butterfly, one vector division
// and square root), so rows do not each wait on their own chain of horizontal sums, division and
// square root (BM_layer_norm_rows).
// The last rows (fewer than a vector's width) take the same path, their lanes past the last row
// repeating it: a row's result does not depend on the rows computed with it, so a call over rows
// in parts (layer.hpp's row regions) gives the whole call's bits. Rows of a length that is not a
// whole number of vectors go one by one.
namespace detail {
// x: `valid` (<= width<T>) rows of n (a whole number of vectors) at stride n -> lane r:
// Σ_j f(acc, x[r, j..], r) (lanes from `valid` on: the last row's).
template <class T, class F> inline simd::vec<T> rows_sum(const T* x, std::size_t n, std::size_t valid, F f) {
    constexpr std::size_t W = simd::width<T>;
    simd::vec<T> acc[W];
    const T* row[W];
#pragma GCC unroll 16
    for (std::size_t r = 0; r < W; ++r) acc[r] = simd::vec<T>(T(0)), row[r] = x + (r < valid ? r : valid - 1) * n;
    for (std::size_t j = 0; j < n; j += W)
#pragma GCC unroll 16
        for (std::size_t r = 0; r < W; ++r) acc[r] = f(acc[r], simd::load(row[r] + j), r);
    return simd::hsum_lanes<T>(acc);
}
// y = (x - mean) · rstd · gamma [+ beta] for width<T> rows at r0 at a time (Centered: LayerNorm's
// mean and variance; else RMSNorm's mean of squares, mean 0) where n is a whole number of vectors
// and not in a constant expression; else row by row (layer_norm_row, rms_norm_row).
template <bool Centered, class T>
constexpr void norm_rows(const T* x, T* y, std::size_t rows, std::size_t n, T eps, const T* gamma, const T* beta) {
    using V = simd::vec<T>;
    constexpr std::size_t W = simd::width<T>;
    bool grouped = false;  // (not const: is_constant_evaluated would hold in its initializer)
    if (!simd::constant_evaluated() && simd::vectorized<T> && n % W == 0) grouped = true;
    for (std::size_t r0 = 0; grouped && r0 < rows; r0 += W) {
        const T* xr = x + r0 * n;
        const std::size_t valid = rows - r0 < W ? rows - r0 : W;
        alignas(64) T mean[W] = {}, rstd[W];
        if constexpr (Centered)
            simd::store(mean, simd::vdiv(rows_sum<T>(xr, n, valid, [](const V& a, const V& v, std::size_t) { return a + v; }),
                                         V(static_cast<T>(n))));
        const V ss = rows_sum<T>(xr, n, valid, [&mean](const V& a, const V& v, std::size_t r) {
            const V d = Centered ? v - V(mean[r]) : v;
            return simd::fma<T>(d, d, a);
        });
        simd::store(rstd, simd::vdiv(V(T(1)), simd::vsqrt(simd::vdiv(ss, V(static_cast<T>(n))) + V(eps))));
        for (std::size_t r = 0; r < valid; ++r) scale_shift(xr + r * n, y + (r0 + r) * n, n, mean[r], rstd[r], gamma, beta);
    }
    for (std::size_t r = 0; !grouped && r < rows; ++r) {
        if constexpr (Centered) layer_norm_row(x + r * n, y + r * n, n, eps, gamma, beta);
        else rms_norm_row(x + r * n, y + r * n, n, eps, gamma);
    }
}
}  // namespace detail

// x: (rows, n) -> y: (rows, n), each row LayerNorm'd as layer_norm_row; y may alias x.
template <class T>
constexpr void layer_norm_rows(const T* x, T* y, std::size_t rows, std::size_t n, T eps, const T* gamma, const T* beta) {
    detail::norm_rows<true>(x, y, rows, n, eps, gamma, beta);
}

// x: (rows, n) -> y: (rows, n), each row RMSNorm'd as rms_norm_row; y may alias x.
template <class T> constexpr void rms_norm_rows(const T* x, T* y, std::size_t rows, std::size_t n, T eps, const T* gamma) {
    detail::norm_rows<false>(x, y, rows, n, eps, gamma, static_cast<const T*>(nullptr));
}

// ---- Backward. Statistics are recomputed from the saved input row (one pass over D values,
// cheaper than storing them). With x̂ = (x - mean)·rstd (LayerNorm) or x·rstd (RMSNorm) and
// g = dy ∘ gamma:  dgamma += dy ∘ x̂, dbeta += dy,
//   LayerNorm: dx = rstd · (g - mean(g) - x̂ · mean(g ∘ x̂))
//   RMSNorm:   dx = rstd · (g - x̂ · mean(g ∘ x̂))
// dx is written, or added to when accumulate. gamma/dgamma/dbeta may be null. Every multiply-add
// is an explicit fma: a compiler contracting a·b + c by itself would do so differently where the
// code is inlined differently (the row at once or split in two, modules/norm.hpp), and the
// split's results must be the row's. ----
template <class T> struct row_stats_t {
    T mean, rstd;
};
template <class T> inline row_stats_t<T> row_stats(const T* x, std::size_t n, T eps, bool center) {
    if (!center) return {T(0), T(1) / std::sqrt(dot(x, x, n) / static_cast<T>(n) + eps)};
    const moments_t<T> m = moments(x, n);
    return {m.mean, T(1) / std::sqrt(m.var + eps)};
}

// One row's share of the parameters' gradients, columns [c0, c1) (c0 a multiple of the vector
// width): element i is updated by the same operation whatever the range that holds it.
template <class T>
inline void norm_param_grads(const T* x, const T* dy, std::size_t n, row_stats_t<T> s, std::size_t c0, std::size_t c1,
                             T* dgamma, T* dbeta) {
    constexpr std::size_t W = simd::width<T>;
    using vt = simd::vec<T>;
    const vt mv(s.mean), rv(s.rstd);
    const std::size_t nv = n - n % W, cv = c1 < nv ? c1 : nv;
    std::size_t i = c0;
    for (; i < cv; i += W) {
        const vt xh = (simd::load(x + i) - mv) * rv, d = simd::load(dy + i);
        if (dgamma) simd::store(dgamma + i, simd::fma<T>(d, xh, simd::load(dgamma + i)));
        if (dbeta) simd::store(dbeta + i, simd::load(dbeta + i) + d);
    }
    for (; i < c1; ++i) {
        const T xh = (x[i] - s.mean) * s.rstd;
        if (dgamma) dgamma[i] = simd::vfma(dy[i], xh, dgamma[i]);
        if (dbeta) dbeta[i] += dy[i];
    }
}

// (parameters: one row's tensors and gradients as plain pointers, the per-row kernel's form.)
template <class T>
inline void norm_row_backward(const T* x, const T* dy, T* dx, std::size_t n, row_stats_t<T> s, bool center,
                              const T* gamma, T* dgamma, T* dbeta, bool accumulate) {
    constexpr std::size_t W = simd::width<T>;
    using vt = simd::vec<T>;
    const vt mv(s.mean), rv(s.rstd);
    vt sg(T(0)), sgx(T(0));
    std::size_t i = 0;
    const std::size_t nv = n - n % W;
    for (; i < nv; i += W) {
        const vt xh = (simd::load(x + i) - mv) * rv, d = simd::load(dy + i);
        sg = gamma ? simd::fma<T>(d, simd::load(gamma + i), sg) : sg + d;
        sgx = simd::fma<T>(gamma ? d * simd::load(gamma + i) : d, xh, sgx);
    }
    T s_g = simd::hsum<T>(sg), s_gx = simd::hsum<T>(sgx);
    for (; i < n; ++i) {
        const T xh = (x[i] - s.mean) * s.rstd;
        s_g = gamma ? simd::vfma(dy[i], gamma[i], s_g) : s_g + dy[i];
        s_gx = simd::vfma(gamma ? dy[i] * gamma[i] : dy[i], xh, s_gx);
    }
    if (dgamma || dbeta) norm_param_grads(x, dy, n, s, 0, n, dgamma, dbeta);  // before dx: dx may alias dy
    const T inv_n = T(1) / static_cast<T>(n);
    const T mg = center ? s_g * inv_n : T(0), nmgx = -(s_gx * inv_n);
    const vt mgv(mg), nmgxv(nmgx);
    for (i = 0; i < nv; i += W) {
        const vt xh = (simd::load(x + i) - mv) * rv, d = simd::load(dy + i);
        const vt gm = gamma ? simd::fma<T>(d, simd::load(gamma + i), -mgv) : d - mgv;  // g - mean(g)
        const vt t = simd::fma<T>(xh, nmgxv, gm);                                       // - x̂·mean(g∘x̂)
        simd::store(dx + i, accumulate ? simd::fma<T>(t, rv, simd::load(dx + i)) : t * rv);
    }
    for (; i < n; ++i) {
        const T xh = (x[i] - s.mean) * s.rstd;
        const T t = simd::vfma(xh, nmgx, gamma ? simd::vfma(dy[i], gamma[i], -mg) : dy[i] - mg);
        dx[i] = accumulate ? simd::vfma(t, s.rstd, dx[i]) : t * s.rstd;
    }
}

template <class T>
inline void layer_norm_row_backward(const T* x, const T* dy, T* dx, std::size_t n, T eps, const T* gamma, T* dgamma,
                                    T* dbeta, bool accumulate) {
    norm_row_backward(x, dy, dx, n, row_stats(x, n, eps, true), true, gamma, dgamma, dbeta, accumulate);
}

template <class T>
inline void rms_norm_row_backward(const T* x, const T* dy, T* dx, std::size_t n, T eps, const T* gamma, T* dgamma,
                                  bool accumulate) {
    norm_row_backward(x, dy, dx, n, row_stats(x, n, eps, false), false, gamma, dgamma, static_cast<T*>(nullptr),
                      accumulate);
}

// The parameters' gradients of rows (rows, n) alone, columns [c0, c1), rows in order: what the
// row functions above add to them, split by columns (dx then by rows, with null dgamma/dbeta).
template <class T>
inline void norm_rows_param_grads(const T* x, const T* dy, std::size_t rows, std::size_t n, T eps, bool center,
                                  std::size_t c0, std::size_t c1, T* dgamma, T* dbeta) {
    for (std::size_t r = 0; r < rows; ++r)
        norm_param_grads(x + r * n, dy + r * n, n, row_stats(x + r * n, n, eps, center), c0, c1, dgamma, dbeta);
}

}  // namespace ctformer::kernels
