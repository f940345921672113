// Gradients against finite differences in double for every parameter and input element (d_model
// 12, heads 3, T 5, S 7: post-norm, pre-norm, decoder-only), gradient accumulation, and misuse of
// backward as error values. (Split from test_gradcheck.cpp: each test file compiles in < 30 s.)
#include "common.hpp"
#include "grad_fixture.hpp"
#include "grad_rig.hpp"
#include "reference.hpp"

using test::Rig;

namespace {
// Central differences in double on every parameter and input element: d(sum(out · d_out)).
template <class L, std::size_t B, std::size_t T, std::size_t S, class SM, class CM>
void finite_differences(const char* what, const SM& sm, const CM& cm) {
    using R = Rig<L, B, T, S>;
    R r;
    r.init(57);
    r.train(ct::dropout_config{0, 0, 0, 0, 0}, sm, cm);
    constexpr double h = 1e-6;
    double worst = 0;
    std::size_t count = 0;
    auto probe = [&](const std::string& name, auto& x, const auto& grad) {
        double err = 0, scale = 0;
        for (std::size_t i = 0; i < x.size; ++i) {
            const double x0 = x.get(i);
            x.set(i, x0 + h);
            const double lp = r.loss(sm, cm);
            x.set(i, x0 - h);
            const double lm = r.loss(sm, cm);
            x.set(i, x0);
            const double fd = (lp - lm) / (2 * h), an = grad.get(i);
            err = std::max(err, std::fabs(fd - an));
            scale = std::max(scale, std::fabs(fd));
            ++count;
        }
        INFO(std::string(what) << ": " << name << " finite-difference error " << err << ", max |grad| " << scale);
        CHECK(err <= 1e-6 * std::max(scale, 1.0));
        worst = std::max(worst, err / std::max(scale, 1.0));
    };
    // parameters: walk params and grads in the same order
    std::vector<std::function<void()>> jobs;
    ct::for_each_tensor(r.params, [&](std::string_view name, auto& t) {
        ct::for_each_tensor(r.grads, [&](std::string_view gname, const auto& g) {
            if constexpr (std::is_same_v<std::remove_cvref_t<decltype(g)>, std::remove_cvref_t<decltype(t)>>)
                if (gname == name) probe(std::string(name), t, g);
        });
    });
    probe("tgt", r.tgt, r.d_tgt);
    if constexpr (L::cross) probe("memory", r.mem, r.d_mem);
    CHECK(count == ct::parameter_count<typename L::Params>() + r.tgt.size + (L::cross ? r.mem.size : 0));
    std::printf("  finite differences, %-40s %zu elements, worst error %.2g (relative to max(|grad|, 1))\n", what,
                count, worst);
}
}  // namespace

TEST_CASE("backward vs finite differences (double, d_model 12, heads 3, T 5, S 7)") {
    using Post = ct::DecoderLayer<ct::d_model<12>, ct::heads<3>, ct::ffn_dim<20>, ct::dtype<double>,
                                  ct::activation<ct::gelu>>;
    finite_differences<Post, 2, 5, 7>("post-norm, GELU, causal + key_lengths", ct::causal{}, ct::key_lengths{7, 4});
    using Pre = ct::DecoderLayer<ct::d_model<12>, ct::heads<3>, ct::ffn_dim<20>, ct::dtype<double>,
                                 ct::norm_first<true>, ct::norm<ct::rms_norm>, ct::activation<ct::silu>>;
    static ct::Tensor<double, 5, 7> add;
    ref::randomize_tensor(add, 5);
    finite_differences<Pre, 2, 5, 7>("pre-norm, RMSNorm, SiLU, additive mask", ct::causal{}, ct::mask_from(add));
    using Gpt = ct::DecoderOnlyBlock<ct::d_model<12>, ct::heads<3>, ct::ffn_dim<20>, ct::dtype<double>,
                                     ct::norm_first<true>, ct::activation<ct::gelu_tanh>>;
    finite_differences<Gpt, 2, 5, 5>("decoder-only, gelu_tanh, causal", ct::causal{}, ct::no_mask{});
}

TEST_CASE("backward: gradients accumulate, and misuse is an error value") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    using R = Rig<L, 2, 5, 7>;
    R r;
    r.init(3);
    static typename L::template Activations<2, 5, 7> empty;
    static typename L::Grads before;
    ct::zero_params(r.grads);
    const ct::status st = L::backward(r.params, empty, r.ws, r.d_out, r.grads, r.d_tgt, r.d_mem);
    CHECK(st.code == ct::errc::no_activations);
    r.train(ct::dropout_config{0, 0, 0, 0, 0}, ct::causal{}, ct::no_mask{});
    before = r.grads;
    const auto d_tgt1 = r.d_tgt;
    // a second backward adds the same gradients again: exactly twice the first
    REQUIRE(L::backward(r.params, r.acts, r.ws, r.d_out, r.grads, r.d_tgt, r.d_mem, ct::causal{}).ok());
    double err = 0;
    ct::for_each_tensor(r.grads, [&](std::string_view name, const auto& t) {
        ct::for_each_tensor(before, [&](std::string_view n2, const auto& b) {
            if constexpr (std::is_same_v<std::remove_cvref_t<decltype(b)>, std::remove_cvref_t<decltype(t)>>)
                if (n2 == name)
                    for (std::size_t i = 0; i < t.size; ++i) err = std::max(err, double(std::fabs(t.get(i) - 2 * b.get(i))));
        });
    });
    for (std::size_t i = 0; i < r.d_tgt.size; ++i) err = std::max(err, double(std::fabs(r.d_tgt.storage[i] - 2 * d_tgt1.storage[i])));
    CHECK(err < 1e-5);
}
