// Models against PyTorch: a 2-layer nn.TransformerDecoder with final norm (outputs and every
// gradient), a GPT built from torch.nn parts (logits, loss, every gradient; float, and double with
// tied embeddings + sinusoidal positions), 3 steps of torch.optim.AdamW and SGD; finite
// differences in double for the embeddings, LM head and loss; stack step == stack forward;
// checkpoints that continue bit for bit; reproducible generation.
#include <algorithm>
#include <cstring>
#include <vector>

#include "grad_fixture.hpp"
#include "model_fixture.hpp"

namespace {

using Dec = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
using DecStack = ct::DecoderStack<Dec, 2>;
template <class T>
using GBlock = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>,
                                    ct::activation<ct::gelu>, ct::dtype<T>>;
template <class T> using SmallGPT = ct::GPT<13, 8, 2, GBlock<T>>;
using TiedGPT = ct::GPT<13, 8, 2, GBlock<double>, ct::tied_embeddings<true>, ct::positions<ct::sinusoidal>>;

// Every role's byte size is a compile-time constant, Params included, equal to its sizeof.
static_assert(Dec::Params::bytes == sizeof(Dec::Params) && DecStack::Params::bytes == sizeof(DecStack::Params));
static_assert(SmallGPT<float>::Params::bytes == sizeof(SmallGPT<float>::Params) &&
              TiedGPT::Params::bytes == sizeof(TiedGPT::Params));
static_assert(SmallGPT<float>::Params::bytes >= sizeof(float) * ct::parameter_count<SmallGPT<float>::Params>());
// ... and every other role, of a layer, a stack and a GPT (padding included: what the user reserves).
template <class... R> constexpr bool bytes_are_sizeof = ((R::bytes == sizeof(R)) && ...);
static_assert(bytes_are_sizeof<Dec::Workspace<2, 5, 7>, Dec::TrainWorkspace<2, 5, 7>, Dec::StepWorkspace<2, 3>,
                               Dec::Activations<2, 5, 7>, Dec::KVCache<2, 9>, Dec::CrossKVCache<2, 7>>);
static_assert(bytes_are_sizeof<DecStack::Workspace<1, 3, 5>, DecStack::TrainWorkspace<1, 3, 5>, DecStack::Activations<1, 3, 5>,
                               DecStack::KVCache<1, 4>, DecStack::CrossKVCache<1, 5>, DecStack::StepWorkspace<1, 1>>);
static_assert(bytes_are_sizeof<SmallGPT<float>::Workspace<2, 8>, SmallGPT<float>::TrainWorkspace<2, 8>,
                               SmallGPT<float>::Activations<2, 8>, SmallGPT<float>::StepWorkspace<1, 3>,
                               SmallGPT<float>::KVCache<1, 8>, SmallGPT<float>::GenerateWorkspace<4>, TiedGPT::Activations<1, 5>>);

// Scratch sized from the shapes: a one-token step of a small layer needs no more than its forward
// over one block of fill_cross_cache's rows (16), with the scalar kernels (a microcontroller's) no
// more than its 8-token forward: the GEMM packing block is bounded by the layer's dimensions, not
// a fixed 256, and no buffer depends on the caches' capacity.
using SmallLayer = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>>;
static_assert(SmallLayer::StepWorkspace<1, 1>::bytes <= SmallLayer::Workspace<1, 16, 16>::bytes);
static_assert(!ct::kernels::gemm_tile<float>::compact ||
              SmallLayer::StepWorkspace<1, 1>::bytes <= SmallLayer::Workspace<1, 8, 8>::bytes);
// The attentions' buffers and the FFN's hidden rows share one region (roles.hpp), and the memory's
// k|v and the cross queries take the dead self q|k|v's place in it: at the base shape the region is
// the hidden rows' 1.06 MB (separate buffers: 2.9 MB), the Workspace under 1.6 MB on every build.
using BaseLayer = ct::DecoderLayer<ct::d_model<512>, ct::heads<8>, ct::ffn_dim<2048>>;
static_assert(BaseLayer::Workspace<1, 128, 128>::bytes < 1'600'000);

using test::File;
using test::check_all;

// ---- DecoderStack ----
struct StackRig {
    static inline DecStack::Params params;
    static inline DecStack::Grads grads;
    static inline DecStack::TrainWorkspace<2, 5, 7> ws;
    static inline DecStack::Activations<2, 5, 7> acts;
    static inline ct::Tensor<float, 2, 5, 16> tgt, out, want, d_out, d_tgt;
    static inline ct::Tensor<float, 2, 7, 16> mem, d_mem;
    static inline ct::Tensor<bool, 2, 7> pad;
    File file{"stack_decoder_2"};
    StackRig() {
        file.load(params, "params.");
        file.read("input.tgt", tgt);
        file.read("input.memory", mem);
        file.read("output", want);
        file.read("grad.output", d_out);
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t s = 0; s < 7; ++s) pad(b, s) = s >= (b == 0 ? 7u : 4u);
    }
};

TEST_CASE("DecoderStack = nn.TransformerDecoder (2 layers + final norm): output and every gradient") {
    StackRig r;
    CHECK(r.file.f.metadata("kind") == "stack");
    REQUIRE(DecStack::forward(r.params, r.ws, r.tgt, r.mem, r.out, ct::causal{}, ct::key_padding(r.pad)).ok());
    CHECK_CLOSE("stack forward", r.out.data(), r.want.data(), r.out.size, test::golden_tol<float>);
    ct::zero_grad(r.grads);
    r.d_tgt = {};
    r.d_mem = {};
    const ct::dropout_config none{0.0f, 0.0f, 0.0f, 0, 0};
    REQUIRE(DecStack::forward_train(r.params, r.ws, r.acts, r.tgt, r.mem, r.out, none, ct::causal{},
                                    ct::key_padding(r.pad))
                .ok());
    CHECK_CLOSE("stack forward_train", r.out.data(), r.want.data(), r.out.size, test::golden_tol<float>);
    REQUIRE(DecStack::backward(r.params, r.acts, r.ws, r.d_out, r.grads, r.d_tgt, r.d_mem, ct::causal{},
                               ct::key_padding(r.pad))
                .ok());
    const double worst = check_all(r.file, r.grads, "grad.", test::grad_rel_tol<float>);
    static ct::Tensor<float, 2, 5, 16> want_tgt;
    static ct::Tensor<float, 2, 7, 16> want_mem;
    r.file.read("grad.tgt", want_tgt);
    r.file.read("grad.memory", want_mem);
    test::GradFixture<Dec, 2, 5, 7>::check("stack grad.tgt", r.d_tgt, want_tgt);
    test::GradFixture<Dec, 2, 5, 7>::check("stack grad.memory", r.d_mem, want_mem);
    std::printf("  stack_decoder_2: worst parameter gradient error %.3g of its max magnitude\n", worst);
    // state_dict names are nn.TransformerDecoder's
    std::size_t layers1 = 0, norm = 0;
    ct::for_each_tensor(r.params, [&](std::string_view n, const auto&) {
        layers1 += n.starts_with("layers.1.");
        norm += n.starts_with("norm.");
    });
    CHECK(layers1 == 18);
    CHECK(norm == 2);
}

TEST_CASE("DecoderStack: step token by token (self caches + filled cross caches) = forward rows") {
    StackRig r;
    static DecStack::KVCache<2, 5> cache;
    static DecStack::CrossKVCache<2, 7> cc;
    static DecStack::StepWorkspace<2, 1> sws;
    static ct::Tensor<float, 2, 1, 16> x, y;
    REQUIRE(DecStack::forward(r.params, r.ws, r.tgt, r.mem, r.out, ct::causal{}, ct::key_padding(r.pad)).ok());
    cache.reset();
    CHECK(DecStack::step(r.params, sws, cache, cc, x, y).code == ct::errc::cache_empty);
    DecStack::fill_cross_cache(r.params, sws, cc, r.mem);
    double worst = 0;
    for (std::size_t t = 0; t < 5; ++t) {
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t d = 0; d < 16; ++d) x(b, 0, d) = r.tgt(b, t, d);
        REQUIRE(DecStack::step(r.params, sws, cache, cc, x, y, ct::causal{}, ct::key_padding(r.pad)).ok());
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t d = 0; d < 16; ++d) worst = std::max(worst, double(std::fabs(y(b, 0, d) - r.out(b, t, d))));
    }
    INFO("max |step - forward| " << worst);
    CHECK(worst <= 2e-5);
    CHECK(cache.length(0) == 5);
    CHECK(cache.layer(1).length(1) == 5);
    CHECK(DecStack::step(r.params, sws, cache, cc, x, y).code == ct::errc::cache_full);
    CHECK(cache.truncate(0, 2).ok());
    CHECK(cache.layer(0).length(0) == 2);
    CHECK(cache.layer(1).length(0) == 2);
    CHECK(cache.truncate(0, 3).code == ct::errc::out_of_range);
    CHECK(cache.truncate(2, 0).code == ct::errc::out_of_range);
}

TEST_CASE("DecoderStack of decoder-only blocks: forward = layers by hand; step and step_ragged = forward rows") {
    using Blk = GBlock<double>;
    using S = ct::DecoderStack<Blk, 3>;
    static S::Params p;
    static S::Workspace<2, 6> ws;
    static Blk::Workspace<2, 6> lws;
    static ct::Tensor<double, 2, 6, 16> x, out, by_hand;
    static S::KVCache<2, 6> cache;
    static S::StepWorkspace<2, 2> sws;
    static ct::Tensor<double, 2, 2, 16> xs, ys;
    ct::for_each_tensor(p, [](std::string_view name, auto& t) {
        const bool gamma = name.find("norm") != std::string_view::npos && name.ends_with("weight");
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, gamma ? 1.0 + 0.01 * double(i % 7) : 0.05 * std::sin(0.37 * double(i) + double(name.size())));
    });
    for (std::size_t i = 0; i < x.size; ++i) x.storage[i] = std::cos(0.11 * double(i));
    REQUIRE(S::forward(p, ws, x, out, ct::causal{}).ok());
    by_hand = x;
    for (std::size_t l = 0; l < 3; ++l) REQUIRE(Blk::forward(p.layers[l], lws, by_hand, by_hand, ct::causal{}).ok());
    for (std::size_t m = 0; m < 12; ++m)
        ct::modules::norm<Blk::config>::forward(p.norm, by_hand.data() + m * 16, by_hand.data() + m * 16, 1);
    CHECK_CLOSE("stack vs layers by hand", out.data(), by_hand.data(), out.size, 1e-12);
    // one set of entry points: ct::no_memory in the memory's place is the short form, bit for bit
    {
        static ct::Tensor<double, 2, 6, 16> out1, out2, d_out, d_tgt, d_tgt2;
        static S::TrainWorkspace<2, 6> tws;
        static S::Activations<2, 6> acts;
        static S::Grads g, g2;
        static S::KVCache<2, 6> c1, c2;
        static ct::Tensor<double, 2, 2, 16> y1, y2;
        const ct::no_memory none;
        REQUIRE(S::forward(p, ws, x, none, out2, ct::causal{}).ok());
        CHECK(std::memcmp(out.data(), out2.data(), sizeof out.storage) == 0);
        REQUIRE(Blk::forward(p.layers[0], lws, x, none, out2, ct::causal{}).ok());
        REQUIRE(Blk::forward(p.layers[0], lws, x, out1, ct::causal{}).ok());
        CHECK(std::memcmp(out1.data(), out2.data(), sizeof out.storage) == 0);
        for (std::size_t i = 0; i < d_out.size; ++i) d_out.storage[i] = std::sin(0.3 * double(i));
        const ct::dropout_config dc{0.1f, -1, -1, 5, 1};
        REQUIRE(S::forward_train(p, tws, acts, x, out1, dc, ct::causal{}).ok());
        REQUIRE(S::backward(p, acts, tws, d_out, g, d_tgt, ct::causal{}).ok());
        REQUIRE(S::forward_train(p, tws, acts, x, none, out2, dc, ct::causal{}).ok());
        ct::no_memory d_none;
        REQUIRE(S::backward(p, acts, tws, d_out, g2, d_tgt2, d_none, ct::causal{}).ok());
        CHECK(std::memcmp(out1.data(), out2.data(), sizeof out.storage) == 0);
        CHECK(std::memcmp(d_tgt.data(), d_tgt2.data(), sizeof d_tgt.storage) == 0);
        CHECK(std::memcmp(&g, &g2, sizeof g) == 0);
        static ct::Tensor<double, 2, 2, 16> x2;
        for (std::size_t i = 0; i < x2.size; ++i) x2.storage[i] = x.storage[i];
        REQUIRE(S::step(p, sws, c1, x2, y1, ct::causal{}).ok());
        REQUIRE(S::step(p, sws, c2, none, x2, y2, ct::causal{}).ok());
        CHECK(std::memcmp(y1.data(), y2.data(), sizeof y1.storage) == 0);
        REQUIRE(S::step_ragged(p, sws, c1, x2, y1, {1, 2}, ct::causal{}).ok());
        REQUIRE(S::step_ragged(p, sws, c2, none, x2, y2, {1, 2}, ct::causal{}).ok());
        CHECK(std::memcmp(y1.data(), y2.data(), sizeof y1.storage) == 0);
        CHECK(c1.lengths() == c2.lengths());
    }
    // row 0 fed 2 positions per step, row 1 ragged: 1, 2, 2, 1
    const std::array<std::size_t, 2> counts[4] = {{2, 1}, {2, 2}, {2, 2}, {0, 1}};
    std::size_t pos[2] = {0, 0};
    double worst = 0;
    for (const auto& c : counts) {
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t i = 0; i < 2; ++i)
                for (std::size_t d = 0; d < 16; ++d) xs(b, i, d) = i < c[b] ? x(b, pos[b] + i, d) : 99.0;
        REQUIRE(S::step_ragged(p, sws, cache, xs, ys, c, ct::causal{}).ok());
        for (std::size_t b = 0; b < 2; ++b) {
            for (std::size_t i = 0; i < 2; ++i)
                for (std::size_t d = 0; d < 16; ++d)
                    worst = std::max(worst, i < c[b] ? std::fabs(ys(b, i, d) - out(b, pos[b] + i, d)) : std::fabs(ys(b, i, d)));
            pos[b] += c[b];
        }
    }
    INFO("max |step - forward| " << worst);
    CHECK(worst <= 1e-12);
    CHECK(cache.length(0) == 6);
    CHECK(cache.length(1) == 6);
}

// ---- GPT ----
template <class Model, std::size_t B, std::size_t T> using GPTRig = test::ModelRig<Model, B, T>;

template <class Model> void gpt_against_pytorch(const std::string& name) {
    using V = typename Model::T;
    GPTRig<Model, 2, 6> r(name);
    static ct::Tensor<V, 2, 6, 13> want;
    static ct::Tensor<V, 1> want_loss;
    r.file.read("output", want);
    r.file.read("loss", want_loss);
    REQUIRE(Model::forward(r.params, r.iws, r.tokens, r.logits).ok());
    CHECK_CLOSE(name << " logits", r.logits.data(), want.data(), want.size, test::golden_tol<V>);
    const V loss = r.loss();
    CHECK_CLOSE(name << " loss", &loss, want_loss.data(), 1, test::golden_tol<V>);
    ct::zero_grad(r.grads);
    REQUIRE(Model::backward(r.params, r.acts, r.ws, r.grads).ok());
    const double worst = check_all(r.file, r.grads, "grad.", test::grad_rel_tol<V>);
    std::printf("  %-26s loss %.8g (torch %.8g), worst gradient error %.3g of its max magnitude\n", name.c_str(),
                double(loss), double(want_loss.storage[0]), worst);
}

TEST_CASE("GPT = the torch.nn GPT: logits, cross-entropy with ignore_index, every gradient (float)") {
    gpt_against_pytorch<SmallGPT<float>>("gpt_small");
    std::size_t n = 0;
    ct::for_each_tensor(GPTRig<SmallGPT<float>, 2, 6>::params, [&](std::string_view name, const auto&) {
        n += name == "wte.weight" || name == "wpe.weight" || name == "lm_head.weight" ||
             name == "transformer.norm.weight" || name == "transformer.layers.1.linear2.bias";
    });
    CHECK(n == 5);
}

TEST_CASE("GPT with tied embeddings and sinusoidal positions against PyTorch (double)") {
    gpt_against_pytorch<TiedGPT>("gpt_tied_sinusoidal_f64");
}

TEST_CASE("GPT: finite differences in double for wte, wpe, lm_head, a block weight and the loss") {
    using M = SmallGPT<double>;
    GPTRig<M, 2, 6> r("gpt_small");  // the float fixture's params, loaded into double
    ct::zero_grad(r.grads);
    (void)r.loss();
    REQUIRE(M::backward(r.params, r.acts, r.ws, r.grads).ok());
    double worst = 0;
    auto probe = [&](auto& param, auto& grad, std::size_t i) {
        const double h = 1e-5, v = param.get(i);
        param.set(i, v + h);
        const double lp = r.loss();
        param.set(i, v - h);
        const double lm = r.loss();
        param.set(i, v);
        const double fd = (lp - lm) / (2 * h), an = grad.get(i);
        const double err = std::fabs(fd - an) / std::max(1e-6, std::fabs(fd) + std::fabs(an));
        INFO("element " << i << ": finite difference " << fd << ", backward " << an);
        CHECK(err <= 1e-6);
        worst = std::max(worst, err);
    };
    for (std::size_t i : {0u, 17u, 100u, 207u}) probe(r.params.tok_embeddings.weight, r.grads.tok_embeddings.weight, i);
    for (std::size_t i : {0u, 33u, 95u}) probe(r.params.pos_embeddings.weight, r.grads.pos_embeddings.weight, i);
    for (std::size_t i : {1u, 50u, 207u}) probe(r.params.lm_head.weight, r.grads.lm_head.weight, i);
    for (std::size_t i : {3u, 300u}) probe(r.params.stack.layers[1].ffn.linear1.weight, r.grads.stack.layers[1].ffn.linear1.weight, i);
    probe(r.params.stack.norm.weight, r.grads.stack.norm.weight, 5);
    std::printf("  GPT finite differences (double): worst relative error %.3g\n", worst);
}

TEST_CASE("GPT: micro-batches with loss_scale add up to the whole batch's gradient") {
    using M = SmallGPT<double>;
    GPTRig<M, 2, 6> whole("gpt_small");
    for (auto& t : whole.targets.storage) t = t < 0 ? 0 : t;  // equal counts per half: mean of means
    ct::zero_grad(whole.grads);
    (void)whole.loss();
    REQUIRE(M::backward(whole.params, whole.acts, whole.ws, whole.grads).ok());
    static M::Grads parts;
    static M::TrainWorkspace<1, 6> ws;
    static M::Activations<1, 6> acts;
    static ct::Tensor<ct::token, 1, 6> tok, tgt;
    ct::zero_grad(parts);
    for (std::size_t b = 0; b < 2; ++b) {
        for (std::size_t t = 0; t < 6; ++t) tok(0, t) = whole.tokens(b, t), tgt(0, t) = whole.targets(b, t);
        double l;
        REQUIRE(M::forward_train(whole.params, ws, acts, tok, tgt, l).ok());
        REQUIRE(M::backward(whole.params, acts, ws, parts, 0.5).ok());
    }
    double worst = 0;
    ct::zip_storage([&](std::size_t n, const double* a, const double* b) {
        for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    }, static_cast<const M::Grads&>(parts), static_cast<const M::Grads&>(whole.grads));
    INFO("max |micro-batched - whole| " << worst);
    CHECK(worst <= 1e-12);
}

TEST_CASE("GPT: bad tokens and targets are errors that change nothing") {
    GPTRig<SmallGPT<float>, 2, 6> r("gpt_small");
    float loss = 7;
    r.tokens(1, 3) = 13;
    CHECK(SmallGPT<float>::forward_train(r.params, r.ws, r.acts, r.tokens, r.targets, loss).code == ct::errc::out_of_range);
    CHECK(SmallGPT<float>::forward(r.params, r.iws, r.tokens, r.logits).code == ct::errc::out_of_range);
    r.tokens(1, 3) = 2;
    r.targets(0, 0) = -1;
    CHECK(SmallGPT<float>::forward_train(r.params, r.ws, r.acts, r.tokens, r.targets, loss).code == ct::errc::out_of_range);
    CHECK(loss == 7);
    static SmallGPT<float>::Activations<2, 6> empty;
    CHECK(SmallGPT<float>::backward(r.params, empty, r.ws, r.grads).code == ct::errc::no_activations);
}

// ---- Optimizers: 3 steps of torch.optim with the fixture's gradients ----
template <class Opt> void optimizer_against_pytorch(const std::string& name, Opt& opt) {
    using M = SmallGPT<float>;
    File file(name);
    static M::Params params;
    static M::Grads grads;
    file.load(params, "params.");
    for (int k = 1; k <= 3; ++k) {
        file.load(grads, "grad" + std::to_string(k) + ".");
        opt.step(params, grads);
        const double worst = check_all(file, params, "after" + std::to_string(k) + ".", 0.0);  // bit for bit
        std::printf("  %-12s step %d: worst |ctformer - torch| %.3g of the tensor's max magnitude\n", name.c_str(), k,
                    worst);
    }
    CHECK(opt.steps() == 3);
}

TEST_CASE("AdamW = torch.optim.AdamW (lr 1e-2, defaults otherwise), 3 steps") {
    static ct::AdamW<SmallGPT<float>::Params> opt;
    opt.options.lr = 1e-2;
    optimizer_against_pytorch("optim_adamw", opt);
}

TEST_CASE("SGD = torch.optim.SGD (momentum 0.9, nesterov, weight_decay 1e-2), 3 steps") {
    static ct::SGD<SmallGPT<float>::Params> opt;
    opt.options = {.lr = 5e-2, .momentum = 0.9, .dampening = 0, .weight_decay = 1e-2, .nesterov = true};
    optimizer_against_pytorch("optim_sgd", opt);
}

TEST_CASE("clip_grad_norm and the cosine warmup schedule") {
    static SmallGPT<double>::Grads g;
    ct::zero_grad(g);
    g.tok_embeddings.weight.storage[0] = 3;
    g.stack.norm.weight.storage[1] = 4;
    CHECK(ct::clip_grad_norm(g, 10.0) == doctest::Approx(5.0));
    CHECK(g.tok_embeddings.weight.storage[0] == 3);  // below max_norm: unchanged
    CHECK(ct::clip_grad_norm(g, 1.0) == doctest::Approx(5.0));
    CHECK(g.tok_embeddings.weight.storage[0] == doctest::Approx(0.6).epsilon(1e-6));
    CHECK(g.stack.norm.weight.storage[1] == doctest::Approx(0.8).epsilon(1e-6));
    const ct::cosine_warmup s{1.0, 10, 110, 0.1};
    CHECK(s(0) == doctest::Approx(0.1));
    CHECK(s(9) == doctest::Approx(1.0));
    CHECK(s(60) == doctest::Approx(0.55));
    CHECK(s(110) == doctest::Approx(0.1));
}

// ---- Checkpoints and generation ----
using Tiny = SmallGPT<float>;
struct Run {
    Tiny::Params params;
    ct::AdamW<Tiny::Params> opt;
};
void train(Run& run, GPTRig<Tiny, 2, 6>& r, int steps) {
    for (int s = 0; s < steps; ++s) {
        ct::zero_grad(r.grads);
        float loss;
        REQUIRE(Tiny::forward_train(run.params, r.ws, r.acts, r.tokens, r.targets, loss).ok());
        REQUIRE(Tiny::backward(run.params, r.acts, r.ws, r.grads).ok());
        ct::clip_grad_norm(r.grads, 1.0);
        run.opt.step(run.params, r.grads, ct::cosine_warmup{1e-2, 2, 10});
    }
}

TEST_CASE("checkpoint: save, load into fresh objects, continue bit for bit; a bad file changes nothing") {
    GPTRig<Tiny, 2, 6> r("gpt_small");
    static Run a, b;
    a.params = r.params;
    train(a, r, 3);
    static std::byte buf[1 << 20];
    const ct::save_result saved = ct::save_checkpoint(std::span<std::byte>(buf), a.params, a.opt);
    REQUIRE(saved.st.ok());
    static ct::safetensors::file<512> f;
    REQUIRE(f.parse(std::span<const std::byte>(buf, saved.bytes)).ok());
    REQUIRE(ct::load_checkpoint(f, b.params, b.opt).ok());
    CHECK(b.opt.steps() == 3);
    train(a, r, 2);
    train(b, r, 2);
    CHECK(std::memcmp(&a.params, &b.params, sizeof a.params) == 0);
    CHECK(std::memcmp(&a.opt, &b.opt, sizeof a.opt) == 0);
    // a checkpoint whose optimizer state lacks a tensor: error, and neither object changes
    static Run c;
    static ct::safetensors::file<512> g;
    static std::byte params_only[1 << 20];
    const ct::save_result po = ct::save_state_dict(a.params, std::span<std::byte>(params_only), "model.");
    REQUIRE(g.parse(std::span<const std::byte>(params_only, po.bytes)).ok());
    const ct::status st = ct::load_checkpoint(g, c.params, c.opt);
    CHECK(st.code == ct::errc::missing_tensor);
    CHECK(st.tensor_name() == "optimizer.exp_avg.wte.weight: nothing under 'optimizer.'; the file has 'model.'");
    static Run zero;
    CHECK(std::memcmp(&c.params, &zero.params, sizeof c.params) == 0);
}

TEST_CASE("generation: same checkpoint and seed give the same tokens; greedy = argmax of the full forward") {
    GPTRig<Tiny, 2, 6> fixture("gpt_small");
    // generate from a saved and reloaded checkpoint
    static Run saved_run;
    static struct {
        Tiny::Params params;
    } r;
    saved_run.params = fixture.params;
    static std::byte buf[1 << 20];
    const ct::save_result saved = ct::save_checkpoint(std::span<std::byte>(buf), saved_run.params, saved_run.opt);
    REQUIRE(saved.st.ok());
    static ct::safetensors::file<512> f;
    static ct::AdamW<Tiny::Params> opt;
    REQUIRE(f.parse(std::span<const std::byte>(buf, saved.bytes)).ok());
    REQUIRE(ct::load_checkpoint(f, r.params, opt).ok());
    static Tiny::KVCache<1, 8> cache;
    static Tiny::GenerateWorkspace<4> gws;
    const ct::token prompt[3] = {4, 1, 7};
    auto run = [&](const ct::sampling& s, std::size_t n) {
        std::vector<ct::token> out;
        out.reserve(8);
        cache.reset();
        const ct::status st = Tiny::generate(r.params, gws, cache, prompt, 3, n, s, [&](ct::token t) {
            out.push_back(t);
            return true;
        });
        REQUIRE(st.ok());
        return out;
    };
    const ct::sampling sampled{.temperature = 0.9f, .top_k = 8, .top_p = 0.95f, .seed = 7, .stop = -1};
    const auto a = run(sampled, 5), b = run(sampled, 5);
    CHECK(a.size() == 5);
    CHECK(a == b);
    const auto greedy = run(ct::sampling{.temperature = 0}, 5);
    // the full forward over prompt + generated: each generated token is the argmax of the row before it
    static Tiny::Workspace<1, 8> ws;
    static ct::Tensor<ct::token, 1, 8> seq;
    static ct::Tensor<float, 1, 8, 13> logits;
    for (std::size_t i = 0; i < 8; ++i) seq(0, i) = i < 3 ? prompt[i] : greedy[i - 3];
    REQUIRE(Tiny::forward(r.params, ws, seq, logits).ok());
    for (std::size_t i = 2; i < 7; ++i) {
        std::size_t best = 0;
        for (std::size_t v = 1; v < 13; ++v)
            if (logits(0, i, v) > logits(0, i, best)) best = v;
        CHECK(static_cast<ct::token>(best) == seq(0, i + 1));
    }
    // the stop token ends generation; the callback can stop it; the cache bounds it
    const std::size_t first = static_cast<std::size_t>(std::find(greedy.begin(), greedy.end(), greedy[2]) - greedy.begin());
    const auto stopped = run(ct::sampling{.temperature = 0, .stop = greedy[2]}, 5);
    CHECK(stopped.size() == first);
    CHECK(cache.length(0) == 3 + first);
    cache.reset();
    std::size_t calls = 0;
    CHECK(Tiny::generate(r.params, gws, cache, prompt, 3, 5, sampled, [&](ct::token) { return ++calls < 2; }).ok());
    CHECK(calls == 2);
    cache.reset();
    CHECK(Tiny::generate(r.params, gws, cache, prompt, 3, 9, sampled, [](ct::token) { return true; }).code ==
          ct::errc::cache_full);
    CHECK(Tiny::generate(r.params, gws, cache, prompt, 0, 1, sampled, [](ct::token) { return true; }).code ==
          ct::errc::out_of_range);
}

}  // namespace

TEST_CASE("sampling: greedy picks the largest logit, the lowest id on ties, never -inf; NaN, +inf or all -inf are non_finite") {
    // (greedy without bias or penalties reads the logits in one pass; with a zero bias it runs the
    // whole chain: both must pick the same token)
    const float inf_f = std::numeric_limits<float>::infinity(), nan_f = std::numeric_limits<float>::quiet_NaN();
    static ct::sampler_scratch<float, 40> scratch;
    const ct::logit_bias zero[] = {{3, 0.f}};
    auto greedy = [&](const std::array<float, 40>& l, bool chain) {
        ct::token next = -5;
        const ct::status st = ct::sample(l.data(), chain ? ct::sampling{.temperature = 0, .bias = zero} : ct::sampling{.temperature = 0}, 0,
                                         scratch, next);
        return st ? next : st.code == ct::errc::non_finite ? ct::token(-1) : ct::token(-2);
    };
    std::array<float, 40> l{};
    for (bool chain : {false, true}) {
        CAPTURE(chain);
        l.fill(0.f);
        CHECK(greedy(l, chain) == 0);  // all tied: the lowest id
        l[7] = 2.f, l[30] = 2.f, l[12] = 1.f;
        CHECK(greedy(l, chain) == 7);
        l.fill(-inf_f);
        l[0] = -inf_f, l[39] = -1e30f;
        CHECK(greedy(l, chain) == 39);  // -inf is never chosen, however the scan starts
        l[39] = -inf_f;
        CHECK(greedy(l, chain) == -1);  // nothing above -inf
        l.fill(1.f), l[20] = nan_f;
        CHECK(greedy(l, chain) == -1);
        l[20] = inf_f;
        CHECK(greedy(l, chain) == -1);
        l.fill(1.f), l[0] = nan_f;  // (where the scan starts)
        CHECK(greedy(l, chain) == -1);
        l[0] = inf_f;
        CHECK(greedy(l, chain) == -1);
    }
    ct::token next = -5;  // top_k = 1 at a temperature is greedy too
    l.fill(0.f), l[11] = 3.f;
    CHECK(ct::sample(l.data(), ct::sampling{.temperature = 0.7f, .top_k = 1}, 0, scratch, next).ok());
    CHECK(next == 11);
}
