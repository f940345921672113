// Gradients against the scalar reference backward (tests/reference.hpp: plain loops, dense
// probabilities) for every policy, mask kind and dropout, and against finite differences in
// double for every parameter and input element.
#include <functional>

#include "common.hpp"
#include "grad_fixture.hpp"
#include "reference.hpp"

namespace {

double relu_grad(double x) { return x > 0 ? 1.0 : 0.0; }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_grad(double x) {
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_tanh_grad(double x) {
    const double c = std::sqrt(2.0 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
}
double silu_ref(double x) { return x / (1 + std::exp(-x)); }
double silu_grad(double x) {
    const double s = 1 / (1 + std::exp(-x));
    return s * (1 + x * (1 - s));
}

ref::vec causal_dense(std::size_t B, std::size_t H, std::size_t T) {
    ref::vec m(B * H * T * T);
    for (std::size_t x = 0; x < m.size(); ++x) m[x] = (x % T) > (x / T) % T ? ref::NEG_INF : 0.0;
    return m;
}

// The library's objects for one configuration, static (never on the stack).
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

}  // namespace

TEST_CASE("backward vs scalar reference: policies, bias, odd shapes") {
    using ct::dropout_config;
    const dropout_config none{0, 0, 0, 0, 0};
    ref::config c{2, 6, 5, 32, 2, 40};
    c.norm = ref::config::rms;
    c.pre_norm = true;
    c.act = silu_ref;
    check_vs_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<40>, ct::norm<ct::rms_norm>,
                                        ct::norm_first<true>, ct::activation<ct::silu>>, 2, 6, 5>(
        "RMSNorm, SiLU, pre-norm", c, silu_grad, none, ct::causal{}, ct::no_mask{}, causal_dense(2, 2, 6));
    check_vs_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<40>, ct::norm<ct::rms_norm>,
                                        ct::norm_first<true>, ct::activation<ct::silu>, ct::dtype<double>>, 2, 6, 5>(
        "RMSNorm, SiLU, pre-norm, double", c, silu_grad, none, ct::causal{}, ct::no_mask{}, causal_dense(2, 2, 6));
    ref::config d{2, 7, 5, 24, 3, 50};
    d.act = gelu_tanh_ref;
    d.scale = 0.125;
    check_vs_reference<ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<50>, ct::activation<ct::gelu_tanh>,
                                        ct::attn_bias<false>, ct::score_scale<ct::scale_ratio<1, 8>>>, 2, 7, 5>(
        "D24 (split weight segments), gelu_tanh, attention without bias, scale 1/8", d, gelu_tanh_grad, none);
    ref::config e{2, 7, 5, 24, 3, 50};
    check_vs_reference<ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<50>, ct::ffn_bias<false>,
                                        ct::norm_bias<false>, ct::dtype<double>>, 2, 7, 5>(
        "ffn and norm without bias, double", e, relu_grad, none, ct::causal{}, ct::no_mask{}, causal_dense(2, 3, 7));
}

TEST_CASE("backward vs scalar reference: fully blocked rows, single query row, decoder-only") {
    const ct::dropout_config none{0, 0, 0, 0, 0};
    // batch row 1 has no memory keys at all: its cross-attention output is zero, no gradient flows
    ref::config c{2, 5, 7, 16, 4, 32};
    ref::vec cross(2 * 4 * 5 * 7, 0.0);
    for (std::size_t h = 0; h < 4; ++h)
        for (std::size_t i = 0; i < 5; ++i)
            for (std::size_t j = 0; j < 7; ++j) cross[((1 * 4 + h) * 5 + i) * 7 + j] = ref::NEG_INF;
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>, 2, 5, 7>(
        "key_lengths{7, 0}", c, relu_grad, none, ct::no_mask{}, ct::key_lengths{7, 0}, {}, cross);
    // a bool mask that blocks every key of query 2
    static ct::Tensor<bool, 5, 7> m;
    for (std::size_t j = 0; j < 7; ++j) m(2, j) = true;
    m(0, 3) = true;
    ref::vec dense(2 * 4 * 5 * 7, 0.0);
    for (std::size_t x = 0; x < dense.size(); ++x)
        if (m.storage[x % 35]) dense[x] = ref::NEG_INF;
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>>, 2, 5, 7>(
        "bool mask with a fully blocked row", [&] { auto d = c; d.pre_norm = true; return d; }(), relu_grad, none,
        ct::no_mask{}, ct::mask_from(m), {}, dense);
    // one query row: attention takes the one-query path, which saves the log-sum-exp too
    ref::config one{3, 1, 4, 16, 2, 24};
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<24>>, 3, 1, 4>(
        "tgt_len 1", one, relu_grad, none);
    ref::config g{2, 9, 9, 24, 3, 40};
    g.cross = false;
    g.pre_norm = true;
    g.act = gelu_ref;
    ref::vec causal(2 * 3 * 9 * 9);
    for (std::size_t x = 0; x < causal.size(); ++x) causal[x] = (x % 9) > (x / 9) % 9 ? ref::NEG_INF : 0.0;
    check_vs_reference<ct::DecoderOnlyBlock<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<40>, ct::norm_first<true>,
                                            ct::activation<ct::gelu>>, 2, 9, 9>(
        "decoder-only, causal", g, gelu_grad, none, ct::causal{}, ct::no_mask{}, causal);
}

TEST_CASE("backward vs scalar reference: dropout at every site, same draws as the forward") {
    ref::config c{2, 6, 5, 16, 4, 32};
    const ct::dropout_config dc{0.2f, 0.3f, 0.25f, 1234, 7};
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>, 2, 6, 5>(
        "post-norm, dropout p 0.2 / attn 0.3 / act 0.25", c, relu_grad, dc);
    c.pre_norm = true;
    c.act = gelu_ref;
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>,
                                        ct::activation<ct::gelu>, ct::dtype<double>>, 2, 6, 5>(
        "pre-norm, double, dropout", c, gelu_grad, dc);
    ref::config g{1, 7, 7, 16, 2, 24};
    g.cross = false;
    ref::vec causal(2 * 7 * 7);
    for (std::size_t x = 0; x < causal.size(); ++x) causal[x] = (x % 7) > (x / 7) % 7 ? ref::NEG_INF : 0.0;
    check_vs_reference<ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<24>>, 1, 7, 7>(
        "decoder-only, dropout", g, relu_grad, ct::dropout_config{0.1f, -1, -1, 99, 3}, ct::causal{}, ct::no_mask{},
        causal);
}

TEST_CASE("backward vs scalar reference: several row blocks, key tiles and GEMM blocks") {
    // 260 rows (two K blocks of the weight-gradient GEMMs), F 300 (two K blocks of dX and several
    // row blocks of the transposed packing), T 130 (three key tiles, nine row blocks)
    ref::config c{2, 130, 20, 32, 2, 300};
    c.pre_norm = true;
    ref::vec causal(2 * 2 * 130 * 130);
    for (std::size_t x = 0; x < causal.size(); ++x) causal[x] = (x % 130) > (x / 130) % 130 ? ref::NEG_INF : 0.0;
    check_vs_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<300>, ct::norm_first<true>>, 2, 130,
                       20>("B2 T130 S20 D32 F300", c, relu_grad, ct::dropout_config{0, 0, 0, 0, 0}, ct::causal{},
                           ct::no_mask{}, causal);
}

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
