// Compile-time policies (norm, activation, score scale, bias split, user types) against the scalar
// reference, and the numpy tutorial's printed output reproduced through user policies.
#include "common.hpp"
#include "reference.hpp"
#include "tutorial_weights.hpp"

namespace {

template <class L, std::size_t B, std::size_t T, std::size_t S, class SM = ct::no_mask>
void check_against_reference(const char* what, ref::config cfg, const SM& sm = {}, ref::vec self_dense = {}) {
    using V = typename L::T;
    static typename L::Params params;
    static typename L::template Workspace<B, T, S> ws;
    static ct::Tensor<V, B, T, L::D> tgt, out;
    static ct::Tensor<V, B, S, L::D> mem;
    ref::randomize(params, 21);
    ref::randomize_tensor(tgt, 22);
    ref::randomize_tensor(mem, 23);
    if constexpr (L::cross) L::forward(params, ws, tgt, mem, out, sm);
    else L::forward(params, ws, tgt, out, sm);
    const ref::vec want = ref::forward(cfg, ref::read_params(params), ref::to_vec(tgt), ref::to_vec(mem), self_dense, {});
    CHECK_CLOSE(what, out.data(), want.data(), out.size, test::ref_tol<V>);
}

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu_ref(double x) { return x / (1 + std::exp(-x)); }

// A user activation that only knows scalars: the kernels apply it lane by lane.
struct leaky_relu {
    template <class T> T operator()(T x) const requires std::is_floating_point_v<T> { return x > 0 ? x : T(0.01) * x; }
};

}  // namespace

TEST_CASE("policies: activations") {
    ref::config c{2, 5, 7, 16, 4, 32};
    c.act = gelu_erf;
    check_against_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::activation<ct::gelu>>, 2, 5, 7>("gelu (erf)", c);
    c.act = gelu_tanh_ref;
    check_against_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::activation<ct::gelu_tanh>>, 2, 5, 7>("gelu (tanh)", c);
    c.act = silu_ref;
    check_against_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::activation<ct::silu>, ct::dtype<double>>, 2, 5, 7>("silu, double", c);
    c.act = [](double x) { return x > 0 ? x : 0.01 * x; };
    check_against_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<36>, ct::activation<leaky_relu>>, 2, 5, 7>(
        "user scalar functor", [&] { auto d = c; d.F = 36; return d; }());
}

TEST_CASE("policies: RMSNorm, score scale, per-module bias, pre-norm, decoder-only") {
    ref::config c{2, 6, 3, 32, 2, 40};
    c.norm = ref::config::rms;
    c.pre_norm = true;
    check_against_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<40>, ct::norm<ct::rms_norm>, ct::norm_first<true>>, 2, 6, 3>("RMSNorm pre-norm", c);
    c.pre_norm = false;
    c.norm = ref::config::layer;
    c.scale = 1.0;
    check_against_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<40>, ct::score_scale<ct::no_scale>>, 2, 6, 3>("unscaled scores", c);
    c.scale = 0.125;
    check_against_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<40>, ct::score_scale<ct::scale_ratio<1, 8>>, ct::attn_bias<false>>, 2, 6, 3>("scale 1/8, attention without bias", c);
    c.scale = -1;
    c.eps = 1e-6;
    check_against_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<40>, ct::ffn_bias<false>, ct::layer_norm_eps<1, 1000000>, ct::dtype<double>>, 2, 6, 3>("ffn without bias, eps 1e-6, double", c);
    ref::config g{3, 10, 10, 24, 3, 50};
    g.cross = false;
    g.pre_norm = true;
    g.norm = ref::config::rms;
    g.act = silu_ref;
    auto causal = [&] {
        ref::vec m(3 * 3 * 10 * 10);
        for (std::size_t x = 0; x < m.size(); ++x) m[x] = (x % 10) > (x / 10) % 10 ? ref::NEG_INF : 0.0;
        return m;
    }();
    check_against_reference<ct::DecoderOnlyBlock<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<50>, ct::norm<ct::rms_norm>, ct::norm_first<true>, ct::activation<ct::silu>>, 3, 10, 10>(
        "decoder-only, RMSNorm, SiLU, odd sizes", g, ct::causal{}, causal);
}

TEST_CASE("policies: d_model and ffn_dim not multiples of the GEMM panel (padded weight segments)") {
    // D = 24: Wq | Wk | Wv do not abut in panel layout (NR = 16 floats on AVX2), so the QKV and
    // memory projections run one GEMM per segment; F = 50 leaves a partial last panel.
    ref::config c{2, 7, 5, 24, 3, 50};
    check_against_reference<ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<50>>, 2, 7, 5>("D24 F50", c);
    check_against_reference<ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<50>, ct::dtype<double>>, 2, 7, 5>(
        "D24 F50, double", c);
    c.pre_norm = true;
    check_against_reference<ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<50>, ct::norm_first<true>>, 2, 7, 5>(
        "D24 F50, pre-norm", c);
}

TEST_CASE("params: PackedWeight keeps PyTorch's element order over padded panel segments") {
    using W = ct::PackedWeight<float, 3 * 24, 24, 24>;  // in_proj_weight of d_model 24
    static W w;
    constexpr std::size_t NR = W::NR, seg_panels = (24 + NR - 1) / NR;
    static_assert(W::size == 3 * 24 * 24 && W::storage_size == 3 * seg_panels * 24 * NR);
    for (std::size_t i = 0; i < W::size; ++i) w.set(i, static_cast<float>(i));
    bool order = true, layout = true;
    for (std::size_t i = 0; i < W::size; ++i) order = order && w.get(i) == static_cast<float>(i);
    // W[24 + n][k] (Wk's row n) is element (k, n) of segment 1's panels
    for (std::size_t n = 0; n < 24; ++n)
        for (std::size_t k = 0; k < 24; ++k)
            layout = layout && w.panels(1)[ct::kernels::panel_index<float>(24, k, n)] == static_cast<float>((24 + n) * 24 + k);
    CHECK(order);
    CHECK(layout);
}

TEST_CASE("params: names and layouts are PyTorch's, bias-free configurations have no bias") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    std::vector<std::string> names;
    static L::Params p;
    ct::for_each_tensor(p, [&](std::string_view n, const auto&) { names.emplace_back(n); });
    const std::vector<std::string> want = {
        "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
        "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", "multihead_attn.out_proj.weight",
        "multihead_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
        "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias"};
    CHECK(names == want);
    static_assert(ct::parameter_count<L::Params>() == 2 * (3 * 16 * 16 + 3 * 16 + 16 * 16 + 16) + 32 * 16 + 32 + 16 * 32 + 16 + 6 * 16);
    using NB = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::bias<false>>;
    static_assert(ct::parameter_count<NB::Params>() == 3 * 16 * 16 + 16 * 16 + 32 * 16 + 16 * 32 + 2 * 16);
    // Linear weight (out, in) element order: get(o * in + i) is W[o][i].
    p.ffn.linear1.weight.set(3 * 16 + 5, 7.0f);
    CHECK(p.ffn.linear1.weight.get(3 * 16 + 5) == 7.0f);
    // stored in panel layout: W[3][5] is element (k = 5, n = 3) of Wᵀ
    CHECK(p.ffn.linear1.weight.panels()[ct::kernels::panel_index<float>(16, 5, 3)] == 7.0f);
    ct::zero_params(p);
    CHECK(p.ffn.linear1.weight.get(3 * 16 + 5) == 0.0f);
}

// ---- tutorial_numpy_decoder.md ----
namespace {
// The tutorial's layer_norm: (x - mean) / (population std + 1e-6), no affine.
struct tutorial_norm {
    template <class T, std::size_t D, bool Bias> using params = ct::no_params;
    template <std::size_t D, class T> static void apply(const ct::no_params&, const T* x, T* y, T) {
        const auto m = ct::kernels::moments(x, D);
        ct::kernels::scale_shift(x, y, D, static_cast<T>(m.mean), static_cast<T>(1.0 / (std::sqrt(m.var) + 1e-6)),
                                 static_cast<const T*>(nullptr), static_cast<const T*>(nullptr));
    }
};
// numpy (in, out) matrices into PyTorch's (out, in) weights, through the importer interface.
template <class W> void set_numpy(W& w, const double* np, std::size_t in, std::size_t out, std::size_t row0 = 0) {
    for (std::size_t o = 0; o < out; ++o)
        for (std::size_t i = 0; i < in; ++i) w.set((row0 + o) * in + i, np[i * out + o]);
}
}  // namespace

TEST_CASE("numpy tutorial: Final Decoder Output reproduced to 1e-6") {
    using namespace tutorial_weights;
    using L = ct::DecoderLayer<ct::d_model<4>, ct::heads<1>, ct::ffn_dim<8>, ct::dtype<double>, ct::attn_bias<false>,
                               ct::ffn_bias<true>, ct::norm<tutorial_norm>, ct::score_scale<ct::no_scale>>;
    static L::Params p;
    static L::Workspace<1, 3, 3> ws;
    set_numpy(p.self_attn.in_proj_weight, W_q, 4, 4, 0);
    set_numpy(p.self_attn.in_proj_weight, W_k, 4, 4, 4);
    set_numpy(p.self_attn.in_proj_weight, W_v, 4, 4, 8);
    set_numpy(p.multihead_attn.in_proj_weight, W_q_cross, 4, 4, 0);
    set_numpy(p.multihead_attn.in_proj_weight, W_k_cross, 4, 4, 4);
    set_numpy(p.multihead_attn.in_proj_weight, W_v_cross, 4, 4, 8);
    for (std::size_t i = 0; i < 16; ++i) {  // identity out_proj
        p.self_attn.out_proj.weight.set(i, i % 5 == 0 ? 1.0 : 0.0);
        p.multihead_attn.out_proj.weight.set(i, i % 5 == 0 ? 1.0 : 0.0);
    }
    set_numpy(p.ffn.linear1.weight, W1, 4, 8);
    set_numpy(p.ffn.linear2.weight, W2, 8, 4);
    for (std::size_t i = 0; i < 8; ++i) p.ffn.linear1.bias.set(i, b1[i]);
    for (std::size_t i = 0; i < 4; ++i) p.ffn.linear2.bias.set(i, b2[i]);
    static ct::Tensor<double, 1, 3, 4> tgt{{}, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2}};
    static ct::Tensor<double, 1, 3, 4> mem{{}, {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1}};
    static ct::Tensor<double, 1, 3, 4> out;
    L::forward(p, ws, tgt, mem, out, ct::causal{});
    const double printed[] = {-1.38105652, 0.32562049, -0.3177617, 1.37319773, -1.55247148, 0.42240549,
                              -0.05660705, 1.18667304, -1.60418732, 0.45399003, 0.04642535, 1.10377194};
    CHECK_CLOSE("numpy tutorial", out.data(), printed, 12, 1e-6);
}

TEST_CASE("forward in place: out may alias tgt (post- and pre-norm)") {
    auto run = [](auto layer_tag) {
        using L = typename decltype(layer_tag)::type;
        static typename L::Params p;
        static typename L::template Workspace<2, 6, 5> ws;
        static ct::Tensor<float, 2, 6, 16> x, out;
        static ct::Tensor<float, 2, 5, 16> mem;
        ref::randomize(p, 61);
        ref::randomize_tensor(x, 62);
        ref::randomize_tensor(mem, 63);
        L::forward(p, ws, x, mem, out, ct::causal{});
        L::forward(p, ws, x, mem, x, ct::causal{});  // in place
        CHECK(std::equal(out.storage, out.storage + out.size, x.storage));
    };
    run(std::type_identity<ct::DecoderLayer<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<24>>>{});
    run(std::type_identity<ct::DecoderLayer<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<24>, ct::norm_first<true>>>{});
}
