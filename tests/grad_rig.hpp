// The library's objects for one layer configuration, static (never on the stack): randomized
// params and inputs, one training step (forward_train + backward), and the eval-mode loss
// sum(forward · d_out) in double; and check_vs_reference, ctformer's gradients against the scalar
// reference backward. Shared by test_gradcheck*.cpp and test_finite_diff.cpp.
#pragma once
#include <functional>

#include "common.hpp"
#include "grad_fixture.hpp"
#include "reference.hpp"

namespace test {

template <class L, std::size_t B, std::size_t T, std::size_t S> struct Rig {
    using V = typename L::T;
    static constexpr std::size_t D = L::D;
    static inline typename L::Params params;
    static inline typename L::Grads grads;
    static inline typename L::template TrainWorkspace<B, T, S> ws;
    static inline typename L::template Activations<B, T, S> acts;
    static inline ct::Tensor<V, B, T, D> tgt, out, d_out, d_tgt;
    static inline ct::Tensor<V, B, S, D> mem, d_mem;

    void init(std::uint64_t seed) {
        ref::randomize(params, seed);
        ref::randomize_tensor(tgt, seed + 1);
        ref::randomize_tensor(mem, seed + 2);
        ref::randomize_tensor(d_out, seed + 3);
    }
    template <class SM, class CM> void train(const ct::dropout_config& dc, const SM& sm, const CM& cm) {
        ct::zero_params(grads);
        for (auto& v : d_tgt.storage) v = V(0);
        for (auto& v : d_mem.storage) v = V(0);
        ct::status st;
        if constexpr (L::cross) {
            L::forward_train(params, ws, acts, tgt, mem, out, dc, sm, cm);
            st = L::backward(params, acts, ws, d_out, grads, d_tgt, d_mem, sm, cm);
        } else {
            L::forward_train(params, ws, acts, tgt, out, dc, sm);
            st = L::backward(params, acts, ws, d_out, grads, d_tgt, sm);
        }
        REQUIRE(st.ok());
    }
    // loss = sum(forward(...) · d_out) in eval mode, double accumulation
    template <class SM, class CM> double loss(const SM& sm, const CM& cm) {
        static typename L::template Workspace<B, T, S> fws;
        if constexpr (L::cross) L::forward(params, fws, tgt, mem, out, sm, cm);
        else L::forward(params, fws, tgt, out, sm);
        double s = 0;
        for (std::size_t i = 0; i < out.size; ++i) s += double(out.storage[i]) * double(d_out.storage[i]);
        return s;
    }
};

}  // namespace test

namespace test {

inline double relu_grad(double x) { return x > 0 ? 1.0 : 0.0; }
inline double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
inline double gelu_grad(double x) {
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}
inline double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
inline double gelu_tanh_grad(double x) {
    const double c = std::sqrt(2.0 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
}
inline double silu_ref(double x) { return x / (1 + std::exp(-x)); }
inline double silu_grad(double x) {
    const double s = 1 / (1 + std::exp(-x));
    return s * (1 + x * (1 - s));
}

inline ref::vec causal_dense(std::size_t B, std::size_t H, std::size_t T) {
    ref::vec m(B * H * T * T);
    for (std::size_t x = 0; x < m.size(); ++x) m[x] = (x % T) > (x / T) % T ? ref::NEG_INF : 0.0;
    return m;
}


template <class V> constexpr double ref_grad_tol = std::is_same_v<V, float> ? 2e-4 : 1e-10;  // x max |grad|

// ctformer's forward_train + backward against ref::forward_backward.
template <class L, std::size_t B, std::size_t T, std::size_t S, class SM = ct::no_mask, class CM = ct::no_mask>
void check_vs_reference(const char* what, ref::config cfg, std::function<double(double)> act_grad,
                        const ct::dropout_config& dc, const SM& sm = {}, const CM& cm = {}, ref::vec self_dense = {},
                        ref::vec cross_dense = {}) {
    using R = Rig<L, B, T, S>;
    using V = typename L::T;
    R r;
    r.init(31);
    r.train(dc, sm, cm);
    cfg.train = true;
    cfg.drop = dc;
    const ref::train_result want = ref::forward_backward(cfg, ref::read_params(r.params), ref::to_vec(r.tgt),
                                                         ref::to_vec(r.mem), self_dense, cross_dense,
                                                         ref::to_vec(r.d_out), act_grad);
    CHECK_CLOSE(what << ": output", r.out.data(), want.out.data(), r.out.size, test::ref_tol<V> * 10);
    auto check = [&](const std::string& name, const auto& got, const ref::vec& w) {
        double scale = 0, err = 0;
        for (std::size_t i = 0; i < w.size(); ++i) {
            scale = std::max(scale, std::fabs(w[i]));
            const double e = std::fabs(double(got.get(i)) - w[i]);
            err = std::isnan(e) ? INFINITY : std::max(err, e);
        }
        INFO(std::string(what) << ": " << name << " max abs err " << err << ", max |grad| " << scale);
        CHECK(err <= ref_grad_tol<V> * std::max(scale, 1e-3));
    };
    check("d_tgt", r.d_tgt, want.d_tgt);
    if constexpr (L::cross) check("d_memory", r.d_mem, want.d_mem);
    std::size_t n = 0;
    ct::for_each_tensor(r.grads, [&](std::string_view name, const auto& t) {
        check(std::string(name), t, want.grads.at(std::string(name)));
        ++n;
    });
    CHECK(n == want.grads.size());
}

}  // namespace test
