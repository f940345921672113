// ctformer/kernels/elementwise.hpp — applying a functor to vectors, and vector-wide row ops.
// Every kernel here is constexpr: in a constant expression its vector loop covers nothing
// (simd::vector_part) and its scalar loop, the kernel's reference, does all the work.
#pragma once
#include <cstddef>
#include <type_traits>

#include "../simd/simd.hpp"

namespace ctformer::kernels {

struct identity_op {
    template <class V> constexpr V operator()(const V& x) const { return x; }
};

// Applies a functor to a vector; a user functor that only accepts scalars is applied lane by lane.
template <class T, class F> [[gnu::always_inline]] inline simd::vec<T> apply_vec(const F& f, const simd::vec<T>& v) {
    if constexpr (std::is_invocable_r_v<simd::vec<T>, const F&, simd::vec<T>>) {
        return f(v);
    } else {
        alignas(64) T tmp[simd::width<T>];
        simd::store(tmp, v);
        for (std::size_t i = 0; i < simd::width<T>; ++i) tmp[i] = static_cast<T>(f(tmp[i]));
        return simd::load(tmp);
    }
}

// x: (n) -> x: (n), x[i] = f(x[i])
template <class T, class F> constexpr void map_inplace(T* x, std::size_t n, const F& f) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W) simd::store(x + i, apply_vec<T>(f, simd::load(x + i)));
    for (; i < n; ++i) x[i] = static_cast<T>(f(x[i]));
}

// y: (n) = f(x: (n))
template <class T, class F> constexpr void map(const T* x, T* y, std::size_t n, const F& f) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W) simd::store(y + i, apply_vec<T>(f, simd::load(x + i)));
    for (; i < n; ++i) y[i] = static_cast<T>(f(x[i]));
}

// y: (n) += x: (n)
template <class T> constexpr void add_inplace(T* y, const T* x, std::size_t n) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W) simd::store(y + i, simd::load(y + i) + simd::load(x + i));
    for (; i < n; ++i) y[i] += x[i];
}

// y: (n) = a: (n) + b: (n)
template <class T> constexpr void add(T* y, const T* a, const T* b, std::size_t n) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W) simd::store(y + i, simd::load(a + i) + simd::load(b + i));
    for (; i < n; ++i) y[i] = a[i] + b[i];
}

// The vector part of a reduction over [0, nv) (nv a multiple of the width): acc = step(acc, i) for
// every vector i, spread over four independent accumulators, summed at the end. One accumulator
// is bound by the add's latency (a d_model = 128 row is 16 dependent AVX2 adds).
template <class T, class Step> inline simd::vec<T> reduce_vectors(std::size_t nv, Step step) {
    constexpr std::size_t W = simd::width<T>;
    simd::vec<T> a0(T(0)), a1 = a0, a2 = a0, a3 = a0;
    // (counted in vectors: GCC 12 otherwise "proves" an overflow of i in the scalar build's
    // inlined copies and warns, -Waggressive-loop-optimizations)
    const std::size_t vectors = nv / W, quads = vectors / 4;
    for (std::size_t q = 0; q < quads; ++q) {
        const std::size_t i = q * 4 * W;
        a0 = step(a0, i);
        a1 = step(a1, i + W);
        a2 = step(a2, i + 2 * W);
        a3 = step(a3, i + 3 * W);
    }
    for (std::size_t v = quads * 4; v < vectors; ++v) a0 = step(a0, v * W);
    return (a0 + a1) + (a2 + a3);
}

// Horizontal sum of x: (n), vector accumulators, one horizontal reduction at the end.
template <class T> constexpr T sum(const T* x, std::size_t n) {
    using V = simd::vec<T>;
    std::size_t i = 0;
    T s = T(0);
    if (!simd::constant_evaluated()) {
        i = n - n % simd::width<T>;
        s = simd::hsum<T>(reduce_vectors<T>(i, [x](const V& acc, std::size_t j) { return acc + simd::load(x + j); }));
    }
    for (; i < n; ++i) s += x[i];
    return s;
}

// Horizontal max of x: (n), n >= 1.
template <class T> constexpr T max(const T* x, std::size_t n) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    T m = x[0];
    if (n >= W && !simd::constant_evaluated()) {
        simd::vec<T> acc = simd::load(x);
        for (i = W; i + W <= n; i += W) acc = simd::vmax(acc, simd::load(x + i));
        m = simd::hmax<T>(acc);
    }
    // (a pointer walk: GCC 12 otherwise "proves" an overflow of i in some inlined copies and warns,
    // -Waggressive-loop-optimizations)
    for (const T *p = x + i, *end = x + n; p < end; ++p) m = *p > m ? *p : m;
    return m;
}

// Σ x[i]·y[i] over (n), vector accumulators.
template <class T> constexpr T dot(const T* x, const T* y, std::size_t n) {
    using V = simd::vec<T>;
    std::size_t i = 0;
    T s = T(0);
    if (!simd::constant_evaluated()) {
        i = n - n % simd::width<T>;
        s = simd::hsum<T>(reduce_vectors<T>(
            i, [x, y](const V& acc, std::size_t j) { return simd::fma<T>(simd::load(x + j), simd::load(y + j), acc); }));
    }
    for (; i < n; ++i) s += x[i] * y[i];
    return s;
}

// Whether every element of x: (rows, cols) at ldx is finite: Σ x·0 is 0, or NaN once any x is
// ±inf or NaN (one vector pass, no branch per element).
template <class T> constexpr bool all_finite(const T* x, std::size_t rows, std::size_t cols, std::size_t ldx) {
    constexpr std::size_t W = simd::width<T>;
    T s = T(0);
    if (simd::constant_evaluated()) {
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t i = 0; i < cols; ++i) s += x[r * ldx + i] * T(0);
        return s == T(0);
    }
    // four rows at a time, one accumulator each: four independent chains (one chain was bound by
    // its latency: 4 cycles per vector)
    using V = simd::vec<T>;
    const V zero(T(0));
    V acc[4] = {zero, zero, zero, zero};
    const std::size_t nv = cols - cols % W;
    for (std::size_t r0 = 0; r0 < rows; r0 += 4)
#pragma GCC unroll 4
        for (std::size_t u = 0; u < 4; ++u) {
            if (r0 + u >= rows) break;
            const T* xr = x + (r0 + u) * ldx;
            for (std::size_t i = 0; i < nv; i += W) acc[u] = simd::fma<T>(simd::load(xr + i), zero, acc[u]);
            for (std::size_t i = nv; i < cols; ++i) s += xr[i] * T(0);
        }
    return s + simd::hsum<T>((acc[0] + acc[1]) + (acc[2] + acc[3])) == T(0);
}

// y: (n) = x: (n) · a + y (axpy).
template <class T> constexpr void axpy(T* y, const T* x, T a, std::size_t n) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W)
        simd::store(y + i, simd::fma<T>(simd::load(x + i), simd::vec<T>(a), simd::load(y + i)));
    for (; i < n; ++i) y[i] = simd::sfma(x[i], a, y[i]);
}

// y: (n) = x: (n) ∘ y: (n)
template <class T> constexpr void mul_inplace(T* y, const T* x, std::size_t n) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W) simd::store(y + i, simd::load(y + i) * simd::load(x + i));
    for (; i < n; ++i) y[i] *= x[i];
}

namespace detail {
// The whole (W x W) blocks of transpose, each in registers (simd::transpose_square).
template <bool Scaled, class T>
inline void transpose_blocks(std::size_t rows, std::size_t cols, const T* x, std::size_t ldx, T* y, std::size_t ldy,
                             T scale) {
    constexpr std::size_t W = simd::width<T>;
    for (std::size_t r0 = 0; r0 < rows; r0 += W)
        for (std::size_t c0 = 0; c0 < cols; c0 += W) {
            simd::vec<T> v[W];
#pragma GCC unroll 16
            for (std::size_t i = 0; i < W; ++i) v[i] = simd::load(x + (r0 + i) * ldx + c0);
            simd::transpose_square<T>(v);
#pragma GCC unroll 16
            for (std::size_t i = 0; i < W; ++i) simd::store(y + (c0 + i) * ldy + r0, Scaled ? v[i] * simd::vec<T>(scale) : v[i]);
        }
}
template <bool Scaled, class T>
constexpr void transpose_impl(std::size_t rows, std::size_t cols, const T* x, std::size_t ldx, T* y, std::size_t ldy, T scale) {
    std::size_t rb = 0, cb = 0;  // rows and columns the blocks cover
    if (!simd::constant_evaluated() && simd::width<T> > 1) {
        rb = rows - rows % simd::width<T>, cb = cols - cols % simd::width<T>;
        transpose_blocks<Scaled>(rb, cb, x, ldx, y, ldy, scale);
    }
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = r < rb ? cb : 0; c < cols; ++c) y[c * ldy + r] = Scaled ? x[r * ldx + c] * scale : x[r * ldx + c];
}
}  // namespace detail

// x: (rows, cols) at ldx -> y: (cols, rows) at ldy: whole (W x W) blocks in registers, the edges
// element by element. Attention's key and value transposes, its backward's tiles, and the GEMM's
// packing of a transposed weight.
template <class T>
constexpr void transpose(std::size_t rows, std::size_t cols, const T* x, std::size_t ldx, T* y, std::size_t ldy) {
    detail::transpose_impl<false>(rows, cols, x, ldx, y, ldy, T(1));
}
// y = (x · scale)ᵀ in the same pass (attention's queries, scaled as PyTorch scales them).
template <class T>
constexpr void transpose_scaled(std::size_t rows, std::size_t cols, const T* x, std::size_t ldx, T* y, std::size_t ldy,
                                T scale) {
    detail::transpose_impl<true>(rows, cols, x, ldx, y, ldy, scale);
}

// y: (n) = y ∘ f'(x) with f' = f.derivative (an activation's backward: y the output's gradient,
// x the saved pre-activation). A derivative that only accepts scalars is applied lane by lane.
template <class T, class F> constexpr void mul_derivative(T* y, const T* x, std::size_t n, const F& f) {
    constexpr std::size_t W = simd::width<T>;
    auto d = [&f](const auto& v) -> decltype(f.derivative(v)) { return f.derivative(v); };
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W)
        simd::store(y + i, simd::load(y + i) * apply_vec<T>(d, simd::load(x + i)));
    for (; i < n; ++i) y[i] *= static_cast<T>(f.derivative(x[i]));
}

namespace detail {
// f(x) and f'(x) of a vector or scalar: in one evaluation where f has value_and_derivative (SiLU:
// one exp for both), else by its two members; a scalar-only functor lane by lane.
template <class T, class F, class V> [[gnu::always_inline]] inline constexpr void value_and_derivative(const F& f, const V& x, V& v, V& d) {
    if constexpr (requires { f.value_and_derivative(x); }) {
        const auto r = f.value_and_derivative(x);
        v = r.value, d = r.derivative;
    } else if constexpr (std::is_arithmetic_v<V>) {
        v = static_cast<T>(f(x)), d = static_cast<T>(f.derivative(x));
    } else {
        auto dv = [&f](const auto& u) -> decltype(f.derivative(u)) { return f.derivative(u); };
        v = apply_vec<T>(f, x), d = apply_vec<T>(dv, x);
    }
}
}  // namespace detail

// h: (n) = f(gate: (n)) ∘ up: (n) — a gated feed-forward's hidden (h may be gate)
template <class T, class F> constexpr void gated(const T* gate, const T* up, T* h, std::size_t n, const F& f) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W)
        simd::store(h + i, apply_vec<T>(f, simd::load(gate + i)) * simd::load(up + i));
    for (; i < n; ++i) h[i] = static_cast<T>(f(gate[i])) * up[i];
}
// The backward of h = f(gate) ∘ up in one pass: d_up: (n) = dh ∘ f(gate); dh: (n) becomes
// d_gate = dh ∘ up ∘ f'(gate).
template <class T, class F> constexpr void gated_grad(const T* gate, const T* up, T* dh, T* d_up, std::size_t n, const F& f) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W) {
        simd::vec<T> v, d;
        detail::value_and_derivative<T>(f, simd::load(gate + i), v, d);
        const simd::vec<T> g = simd::load(dh + i);
        simd::store(d_up + i, g * v);
        simd::store(dh + i, g * simd::load(up + i) * d);
    }
    for (; i < n; ++i) {
        T v{}, d{};
        detail::value_and_derivative<T>(f, gate[i], v, d);
        const T g = dh[i];
        d_up[i] = g * v;
        dh[i] = g * up[i] * d;
    }
}

}  // namespace ctformer::kernels
