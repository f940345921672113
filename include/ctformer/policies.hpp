// ctformer/policies.hpp — behaviour a user swaps at compile time: activation, normalization and
// attention score scale. Each is a plain type; a user type with the same members works the same.
#pragma once
#include <boost/hana/define_struct.hpp>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "kernels/norm.hpp"
#include "simd.hpp"
#include "tensor.hpp"

namespace ctformer {

namespace detail {
template <class V> struct lane { using type = V; };
#if CTFORMER_XSIMD
template <class T, class A> struct lane<xsimd::batch<T, A>> { using type = T; };
#endif
template <class V> using lane_t = typename lane<V>::type;
}  // namespace detail

// ---- Activations: callable on a scalar and on a simd::vec (a scalar-only user functor is applied
// lane by lane by the kernels). Training also needs `derivative(x)`, the derivative at the
// pre-activation x, callable the same way. ----
struct relu {
    template <class V> constexpr V operator()(const V& x) const { return simd::vmax(x, V(detail::lane_t<V>(0))); }
    // PyTorch's convention: 0 at x = 0.
    template <class V> constexpr V derivative(const V& x) const {
        using T = detail::lane_t<V>;
        return simd::vselect(x > V(T(0)), V(T(1)), V(T(0)));
    }
};
// PyTorch's activation="gelu": x/2 · (1 + erf(x/√2)) = x·Φ(x).
struct gelu {
    template <class V> constexpr V operator()(const V& x) const { return x * simd::vnormal_cdf(x); }
    // Φ(x) + x·φ(x)
    template <class V> constexpr V derivative(const V& x) const {
        using T = detail::lane_t<V>;
        const V cdf = simd::vnormal_cdf(x);
        const V pdf = V(T(0.39894228040143267794)) * simd::vexp_nonpositive(V(T(-0.5)) * x * x);
        return cdf + x * pdf;
    }
};
// GELU, tanh approximation (PyTorch approximate="tanh").
struct gelu_tanh {
    template <class V> constexpr V operator()(const V& x) const {
        using T = detail::lane_t<V>;
        const V inner = V(T(0.79788456080286535588)) * (x + V(T(0.044715)) * x * x * x);
        return V(T(0.5)) * x * (V(T(1)) + simd::vtanh(inner));
    }
    template <class V> constexpr V derivative(const V& x) const {
        using T = detail::lane_t<V>;
        const V x2 = x * x;
        const V t = simd::vtanh(V(T(0.79788456080286535588)) * (x + V(T(0.044715)) * x2 * x));
        const V dinner = V(T(0.79788456080286535588)) * (V(T(1)) + V(T(3 * 0.044715)) * x2);
        return V(T(0.5)) * (V(T(1)) + t) + V(T(0.5)) * x * (V(T(1)) - t * t) * dinner;
    }
};
// SiLU / swish: x · sigmoid(x).
struct silu {
    template <class V> constexpr V operator()(const V& x) const {
        using T = detail::lane_t<V>;
        return x / (V(T(1)) + simd::vexp(-x));
    }
    // s · (1 + x · (1 - s)), s = sigmoid(x)
    template <class V> constexpr V derivative(const V& x) const {
        using T = detail::lane_t<V>;
        const V s = V(T(1)) / (V(T(1)) + simd::vexp(-x));
        return s * (V(T(1)) + x * (V(T(1)) - s));
    }
};
struct identity_activation {
    template <class V> constexpr V operator()(const V& x) const { return x; }
    template <class V> constexpr V derivative(const V&) const { return V(detail::lane_t<V>(1)); }
};

// Whether an activation can be trained through (it has derivative(x)).
template <class A, class T> concept differentiable_activation = requires(const A& a, T x) {
    { a.derivative(x) };
};

// ---- Normalizations. A norm policy has
//   template <class T, size_t D, bool Bias> using params = ...;   (reflected; no_params if none)
//   template <size_t D, class P, class T> static void apply(const P&, const T* x, T* y, T eps);
// which normalizes one row x: (D) into y: (D); y may alias x; optionally
//   template <size_t D, class P, class T> static void apply_rows(const P&, const T* x, T* y, size_t rows, T eps);
// the same for rows (rows, D) at once (the built-in norms: the statistics of a vector's width of
// rows together); and, for training,
//   template <size_t D, class P, class T> static void backward(const P& p, P& grad, const T* x,
//       const T* dy, T* dx, T eps, bool accumulate);
// which, from the forward's input row x and the output's gradient dy, adds the parameters'
// gradients to grad and writes dx (adds to it when accumulate). ----
struct no_params {
    BOOST_HANA_DEFINE_STRUCT(no_params);
};

template <class T, std::size_t D, bool Bias> struct LayerNormParams;
template <class T, std::size_t D> struct LayerNormParams<T, D, true> {
    using vec_t = Tensor<T, D>;
    BOOST_HANA_DEFINE_STRUCT(LayerNormParams, (vec_t, weight), (vec_t, bias));
};
template <class T, std::size_t D> struct LayerNormParams<T, D, false> {
    using vec_t = Tensor<T, D>;
    BOOST_HANA_DEFINE_STRUCT(LayerNormParams, (vec_t, weight));
};
template <class T, std::size_t D> struct RMSNormParams {
    using vec_t = Tensor<T, D>;
    BOOST_HANA_DEFINE_STRUCT(RMSNormParams, (vec_t, weight));
};

// PyTorch LayerNorm: (x - mean) / sqrt(biased_var + eps) · weight + bias.
struct layer_norm {
    template <class T, std::size_t D, bool Bias> using params = LayerNormParams<T, D, Bias>;
    template <std::size_t D, class T, bool Bias>
    static constexpr void apply(const LayerNormParams<T, D, Bias>& p, const T* x, T* y, T eps) {
        const T* beta = nullptr;
        if constexpr (Bias) beta = p.bias.data();
        kernels::layer_norm_row(x, y, D, eps, p.weight.data(), beta);
    }
    template <std::size_t D, class T, bool Bias>
    static constexpr void apply_rows(const LayerNormParams<T, D, Bias>& p, const T* x, T* y, std::size_t rows, T eps) {
        const T* beta = nullptr;
        if constexpr (Bias) beta = p.bias.data();
        kernels::layer_norm_rows(x, y, rows, D, eps, p.weight.data(), beta);
    }
    template <std::size_t D, class T, bool Bias>
    static void backward(const LayerNormParams<T, D, Bias>& p, LayerNormParams<T, D, Bias>& g, const T* x,
                         const T* dy, T* dx, T eps, bool accumulate) {
        T* dbeta = nullptr;
        if constexpr (Bias) dbeta = g.bias.data();
        kernels::layer_norm_row_backward(x, dy, dx, D, eps, p.weight.data(), g.weight.data(), dbeta, accumulate);
    }
};
// RMSNorm: x / sqrt(mean(x²) + eps) · weight (no bias, no centering).
struct rms_norm {
    template <class T, std::size_t D, bool Bias> using params = RMSNormParams<T, D>;
    template <std::size_t D, class T>
    static constexpr void apply(const RMSNormParams<T, D>& p, const T* x, T* y, T eps) {
        kernels::rms_norm_row(x, y, D, eps, p.weight.data());
    }
    template <std::size_t D, class T>
    static constexpr void apply_rows(const RMSNormParams<T, D>& p, const T* x, T* y, std::size_t rows, T eps) {
        kernels::rms_norm_rows(x, y, rows, D, eps, p.weight.data());
    }
    template <std::size_t D, class T>
    static void backward(const RMSNormParams<T, D>& p, RMSNormParams<T, D>& g, const T* x, const T* dy, T* dx, T eps,
                         bool accumulate) {
        kernels::rms_norm_row_backward(x, dy, dx, D, eps, p.weight.data(), g.weight.data(), accumulate);
    }
};

// Whether a norm policy can be trained through (it has backward).
template <class N, std::size_t D, class P, class T> concept differentiable_norm =
    requires(const P& p, P& g, const T* x, T* dx) { N::template backward<D>(p, g, x, x, dx, T(0), false); };

// ---- Attention score scale: scores = q·kᵀ · scale. ----
struct inv_sqrt_head_dim {
    template <class T> static constexpr T value(std::size_t head_dim) { return T(1) / simd::vsqrt(static_cast<T>(head_dim)); }
};
struct no_scale {
    template <class T> static constexpr T value(std::size_t) { return T(1); }
};
template <long long Num, long long Den = 1> struct scale_ratio {
    static_assert(Den != 0, "ctformer: scale_ratio denominator is zero");
    template <class T> static constexpr T value(std::size_t) { return static_cast<T>(Num) / static_cast<T>(Den); }
};

}  // namespace ctformer
