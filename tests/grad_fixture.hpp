// A PyTorch fixture's gradients (grad.* in tests/data, d(sum(output · grad.output)) by autograd)
// against forward_train + backward.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>

#include "fixture.hpp"

namespace test {

// Gradients against PyTorch: float max abs error <= 1e-4 x the tensor's max magnitude, double 1e-9 x.
template <class T> constexpr double grad_rel_tol = std::is_same_v<T, float> ? 1e-4 : 1e-9;

template <class X, class Y> errors compare_tensors(const X& got, const Y& want) {
    errors e;
    for (std::size_t i = 0; i < got.size; ++i) {
        const double g = static_cast<double>(got.get(i)), w = static_cast<double>(want.get(i));
        const double a = std::fabs(g - w);
        if (!(a <= e.max_abs)) e.max_abs = std::isnan(a) ? INFINITY : a;
    }
    return e;
}
template <class X> double max_magnitude(const X& x) {
    double m = 0;
    for (std::size_t i = 0; i < x.size; ++i) m = std::max(m, std::fabs(static_cast<double>(x.get(i))));
    return m;
}

template <class Layer, std::size_t B, std::size_t Tq, std::size_t S> struct GradFixture : Fixture<Layer, B, Tq, S> {
    using base = Fixture<Layer, B, Tq, S>;
    using T = typename Layer::T;
    static constexpr std::size_t D = Layer::D;
    static inline typename Layer::template TrainWorkspace<B, Tq, S> tws;
    static inline typename Layer::template Activations<B, Tq, S> acts;
    static inline typename Layer::Grads grads, want;
    static inline ct::Tensor<T, B, Tq, D> d_out, d_tgt, want_tgt;
    static inline ct::Tensor<T, B, S, D> d_mem, want_mem;

    explicit GradFixture(const std::string& n) : base(n) {
        REQUIRE(ct::read_tensor(this->file, "grad.output", d_out).ok());
        REQUIRE(ct::read_tensor(this->file, "grad.tgt", want_tgt).ok());
        if constexpr (Layer::cross) REQUIRE(ct::read_tensor(this->file, "grad.memory", want_mem).ok());
        ct::for_each_tensor(want, [&](std::string_view name, auto& t) {
            const std::string full = "grad." + std::string(name);
            REQUIRE_MESSAGE(ct::read_tensor(this->file, full, t).ok(), full);
        });
    }

    template <class X, class Y> static void check(const std::string& what, const X& got, const Y& exp) {
        const errors e = compare_tensors(got, exp);
        const double scale = max_magnitude(exp), tol = grad_rel_tol<T> * scale;
        INFO(what << ": max abs err " << e.max_abs << " (" << e.max_abs / scale << " of max |grad| " << scale
                  << "), tol " << tol);
        CHECK(e.max_abs <= tol);
    }

    // forward_train (no dropout) then backward with the given masks; every gradient checked.
    template <class... M> void run_backward(const char* variant, const M&... masks) {
        ct::zero_params(grads);
        for (auto& v : d_tgt.storage) v = T(0);
        for (auto& v : d_mem.storage) v = T(0);
        const ct::dropout_config none{0.0f, 0.0f, 0.0f, 0, 0};
        ct::status st;
        if constexpr (Layer::cross) {
            Layer::forward_train(this->params, tws, acts, this->tgt, this->mem, this->out, none, masks...);
            st = Layer::backward(this->params, acts, tws, d_out, grads, d_tgt, d_mem, masks...);
        } else {
            Layer::forward_train(this->params, tws, acts, this->tgt, this->out, none, masks...);
            st = Layer::backward(this->params, acts, tws, d_out, grads, d_tgt, masks...);
        }
        REQUIRE(st.ok());
        const std::string tag = this->name + " [" + variant + "] ";
        CHECK_CLOSE(tag << "output", this->out.data(), this->expected.data(), this->out.size, golden_tol<T>);
        double worst = 0;
        auto note = [&](const auto& got, const auto& exp) {
            worst = std::max(worst, compare_tensors(got, exp).max_abs / std::max(max_magnitude(exp), 1e-300));
        };
        check(tag + "grad.tgt", d_tgt, want_tgt);
        note(d_tgt, want_tgt);
        if constexpr (Layer::cross) {
            check(tag + "grad.memory", d_mem, want_mem);
            note(d_mem, want_mem);
        }
        // every parameter: walk both structs in the same (declaration) order
        std::size_t matched = 0, expected_count = 0;
        ct::for_each_tensor(want, [&](std::string_view, const auto&) { ++expected_count; });
        ct::for_each_tensor(want, [&](std::string_view name, const auto& w) {
            ct::for_each_tensor(grads, [&](std::string_view gname, const auto& gt) {
                if constexpr (std::is_same_v<std::remove_cvref_t<decltype(gt)>, std::remove_cvref_t<decltype(w)>>)
                    if (gname == name) {
                        check(tag + "grad." + std::string(name), gt, w);
                        note(gt, w);
                        ++matched;
                    }
            });
        });
        CHECK(matched == expected_count);  // every parameter's gradient was compared
        std::printf("  %-26s %-24s worst grad error %.3g of the tensor's max magnitude\n", this->name.c_str(), variant,
                    worst);
    }
};

}  // namespace test
