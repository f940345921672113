// ctformer/modules/activations.hpp — the activation functions a user picks at compile time
// (ct::activation<...>). Each is a plain type; a user type with the same members works the same.
#pragma once
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "../simd/simd.hpp"

namespace ctformer {

namespace detail {
template <class V> struct lane { using type = V; };
#if CTFORMER_XSIMD
template <class T, class A> struct lane<xsimd::batch<T, A>> { using type = T; };
#endif
template <class V> using lane_t = typename lane<V>::type;
}  // namespace detail

// An activation's value and derivative at one x, from an activation that computes both at once.
template <class V> struct value_derivative {
    V value, derivative;
};

// ---- Activations: callable on a scalar and on a simd::vec (a scalar-only user functor is applied
// lane by lane by the kernels). Training also needs `derivative(x)`, the derivative at the
// pre-activation x, callable the same way. A built-in has a name: the exporter writes it and
// load_state_dict checks it against a file's configuration (io/config.hpp). ----
struct relu {
    static constexpr const char* name = "relu";
    template <class V> constexpr V operator()(const V& x) const { return simd::vmax(x, V(detail::lane_t<V>(0))); }
    // PyTorch's convention: 0 at x = 0.
    template <class V> constexpr V derivative(const V& x) const {
        using T = detail::lane_t<V>;
        return simd::vselect(x > V(T(0)), V(T(1)), V(T(0)));
    }
};
// PyTorch's activation="gelu": x/2 · (1 + erf(x/√2)) = x·Φ(x).
struct gelu {
    static constexpr const char* name = "gelu";
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
    static constexpr const char* name = "gelu_tanh";
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
    static constexpr const char* name = "silu";
    // x · s, s = sigmoid(x) = 1 / (1 + exp(-x))
    template <class V> [[gnu::always_inline]] constexpr V operator()(const V& x) const { return x * sigmoid(x); }
    // s · (1 + x · (1 - s))
    template <class V> [[gnu::always_inline]] constexpr V derivative(const V& x) const { return value_and_derivative(x).derivative; }
    // Both from one exp and one division (a gated backward needs both): the two members' values.
    template <class V> [[gnu::always_inline]] constexpr value_derivative<V> value_and_derivative(const V& x) const {
        using T = detail::lane_t<V>;
        const V s = sigmoid(x);
        return {x * s, s * (V(T(1)) + x * (V(T(1)) - s))};
    }
    template <class V> [[gnu::always_inline]] static constexpr V sigmoid(const V& x) {
        using T = detail::lane_t<V>;
        return V(T(1)) / (V(T(1)) + simd::vexp(-x));
    }
};
struct identity_activation {
    static constexpr const char* name = "identity";
    template <class V> constexpr V operator()(const V& x) const { return x; }
    template <class V> constexpr V derivative(const V&) const { return V(detail::lane_t<V>(1)); }
};

// Whether an activation can be trained through (it has derivative(x)).
template <class A, class T> concept differentiable_activation = requires(const A& a, T x) {
    { a.derivative(x) };
};

}  // namespace ctformer
