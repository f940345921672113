// LoRA adapters (modules/lora.hpp, ct::lora): a Llama block with adapters against PEFT's formulas
// in plain torch (tests/data/gen.py, lora_case: output, the adapters' and the input's gradients,
// with and without adapter dropout — ctformer's draws reproduced there — and 3 AdamW steps over
// the adapters alone); finite differences in double through A, B and the input; the base frozen.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "model_fixture.hpp"

namespace {
using test::File;

template <class T, unsigned Targets, std::size_t R, long long Alpha, class... Extra>
using Block = ct::LlamaBlock<ct::d_model<16>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<32>, ct::max_positions<8>,
                             ct::norm_eps<1, 100000>, ct::dtype<T>, ct::lora<R, Alpha, Targets>, Extra...>;
constexpr std::size_t B = 2, Tq = 5;

template <class L> struct Rig {
    using T = typename L::T;
    static inline typename L::Params params;
    static inline typename L::Adapters adapters, grads;
    static inline typename L::template TrainWorkspace<B, Tq> ws;
    static inline typename L::template Activations<B, Tq> acts;
    static inline ct::Tensor<T, B, Tq, L::D> x, y, want, dy, dx, want_dx;
    File file;
    explicit Rig(const std::string& name) : file(name) {
        file.load(params, "params.");
        file.load(adapters, "adapters.");
        file.read("input.tgt", x);
        file.read("output", want);
        file.read("grad.output", dy);
        file.read("grad.input.tgt", want_dx);
    }
    ct::dropout_config dropout() {
        const float p = std::stof(std::string(file.f.metadata("lora_dropout")));
        ct::dropout_config dc{0.0f, 0.0f, 0.0f, std::stoull(std::string(file.f.metadata("dropout_seed"))),
                              static_cast<std::uint32_t>(std::stoul(std::string(file.f.metadata("dropout_step"))))};
        dc.lora_p = p;
        return dc;
    }
    // forward_train + backward with the fixture's adapters; grads and dx from zero
    void train() {
        ct::zero_grad(grads);
        for (auto& v : dx.storage) v = T(0);
        REQUIRE(L::forward_train(ct::with_adapters(params, adapters), ws, acts, x, y, dropout(), ct::causal{}).ok());
        REQUIRE(L::backward(ct::with_adapters(params, adapters), acts, ws, dy, grads, dx, ct::causal{}).ok());
    }
};

template <class L> void against_pytorch(const std::string& name) {
    using T = typename L::T;
    Rig<L> r(name);
    r.train();
    const double tol = test::golden_tol<T>;
    CHECK_CLOSE(name << " output", r.y.data(), r.want.data(), r.y.size, tol);
    CHECK_CLOSE(name << " d_tgt", r.dx.data(), r.want_dx.data(), r.dx.size, tol);
    const double worst = test::check_all(r.file, r.grads, "grad.adapters.", std::is_same_v<T, float> ? 1e-5 : 1e-12);
    std::size_t n = 0;
    ct::for_each_tensor(r.grads, [&](std::string_view, const auto&) { ++n; });
    std::printf("  %-22s output, d_tgt and %zu adapter gradients: worst %.3g of the tensor's max\n", name.c_str(), n, worst);
}

// rsLoRA (PEFT's use_rslora: the scale α/√r)
using RsBlock = ct::LlamaBlock<ct::d_model<16>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<32>, ct::max_positions<8>,
                               ct::norm_eps<1, 100000>, ct::dtype<double>, ct::lora<8, 16, ct::lora_q | ct::lora_v, ct::rslora>>;

TEST_CASE("rsLoRA (ct::rslora: α/√r) = PEFT's use_rslora formulas in torch; use_rslora in adapter_config.json; merge") {
    against_pytorch<RsBlock>("lora_rslora_qv_f64");
    char cfg[512];
    const std::size_t n = ct::write_adapter_config<RsBlock::Adapters>(cfg);
    const std::string_view text(cfg, n);
    CHECK(text.find("\"use_rslora\": true") != std::string_view::npos);
    CHECK(ct::check_adapter_config<RsBlock::Adapters>(text).ok());
    using Plain = Block<double, ct::lora_q | ct::lora_v, 8, 16>;
    const ct::status plain = ct::check_adapter_config<Plain::Adapters>(text);
    CHECK(plain.code == ct::errc::config_mismatch);
    CHECK(std::string(plain.tensor_name()).starts_with("use_rslora: file true, type false"));
    const ct::status missing = ct::check_adapter_config<RsBlock::Adapters>(R"({"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]})");
    CHECK(std::string(missing.tensor_name()) == "use_rslora: file false, type true (ct::rslora)");
    // merged with the rsLoRA scale: the base then runs as base + adapters
    Rig<RsBlock> r("lora_rslora_qv_f64");
    static RsBlock::Workspace<B, Tq> ws;
    static ct::Tensor<double, B, Tq, 16> with, merged;
    REQUIRE(RsBlock::forward(ct::with_adapters(r.params, r.adapters), ws, r.x, with, ct::causal{}).ok());
    REQUIRE(ct::merge_adapters(r.params, r.adapters).ok());
    REQUIRE(RsBlock::forward(r.params, ws, r.x, merged, ct::causal{}).ok());
    CHECK_CLOSE("rsLoRA merged vs adapters", merged.data(), with.data(), merged.size, 1e-12);
}

TEST_CASE("LoRA on every projection = PEFT's formulas in torch (float; double with adapter dropout 0.25)") {
    against_pytorch<Block<float, ct::lora_all, 4, 8>>("lora_all_f32");
    against_pytorch<Block<double, ct::lora_all, 4, 8>>("lora_all_dropout_f64");
    against_pytorch<Block<double, ct::lora_q | ct::lora_v, 8, 16>>("lora_qv_f64");
}

TEST_CASE("AdamW over the adapters alone = torch.optim.AdamW, 3 steps; the base params do not change") {
    using L = Block<float, ct::lora_all, 4, 8>;
    Rig<L> r("lora_all_f32");
    static typename L::Params before;
    before = r.params;
    static ct::AdamW<L::Adapters> opt;
    opt.options.lr = 1e-2;
    for (int k = 0; k < 3; ++k) {
        ct::zero_grad(r.grads);
        REQUIRE(L::forward_train(ct::with_adapters(r.params, r.adapters), r.ws, r.acts, r.x, r.y,
                                 ct::dropout_config{0.0f, 0.0f, 0.0f, 0, 0}, ct::causal{}).ok());
        REQUIRE(L::backward(ct::with_adapters(r.params, r.adapters), r.acts, r.ws, r.dy, r.grads, r.dx, ct::causal{}).ok());
        REQUIRE(opt.step(r.adapters, r.grads).ok());
    }
    const double worst = test::check_all(r.file, r.adapters, "adamw.", 2e-6);
    std::printf("  AdamW over adapters, 3 steps: worst |ctformer - torch| %.3g of the tensor's max\n", worst);
    CHECK(std::memcmp(&before, &r.params, sizeof before) == 0);
    // the optimizer alone, from torch's gradients of each step: bit for bit
    r.file.load(r.adapters, "adapters.");
    static ct::AdamW<L::Adapters> exact;
    exact.options.lr = 1e-2;
    for (int k = 1; k <= 3; ++k) {
        r.file.load(r.grads, "adamw_grad" + std::to_string(k) + ".");
        REQUIRE(exact.step(r.adapters, r.grads).ok());
    }
    CHECK(test::check_all(r.file, r.adapters, "adamw.", 0.0) == 0.0);
}

TEST_CASE("LoRA: eval forward and step equal the training forward without dropout; Params alone run the base") {
    using L = Block<float, ct::lora_all, 4, 8>;
    Rig<L> r("lora_all_f32");
    static L::Workspace<B, Tq> ws;
    static ct::Tensor<float, B, Tq, 16> y, base;
    REQUIRE(L::forward(ct::with_adapters(r.params, r.adapters), ws, r.x, y, ct::causal{}).ok());
    CHECK_CLOSE("eval forward with adapters", y.data(), r.want.data(), y.size, test::golden_tol<float>);
    // decoding one position at a time through a KV cache, with adapters
    static L::KVCache<B, 8> cache;
    static L::StepWorkspace<B, 1> sws;
    for (std::size_t t = 0; t < Tq; ++t) {
        ct::Tensor<float, B, 1, 16> xt, yt;
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t d = 0; d < 16; ++d) xt(b, 0, d) = r.x(b, t, d);
        REQUIRE(L::step(ct::with_adapters(r.params, r.adapters), sws, cache, xt, yt).ok());
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t d = 0; d < 16; ++d) {
                INFO("b " << b << " t " << t << " d " << d);
                CHECK(std::fabs(yt(b, 0, d) - y(b, t, d)) <= 1e-5);
            }
    }
    // the base alone differs (the fixture's B is not zero), and equals adapters with B = 0
    REQUIRE(L::forward(r.params, ws, r.x, base, ct::causal{}).ok());
    CHECK(test::compare(base.data(), y.data(), y.size).max_abs > 1e-3);
    static L::Adapters zero_b;
    zero_b = r.adapters;
    ct::for_each_tensor(zero_b, [](std::string_view name, auto& t) {
        if (name.find("lora_B") != std::string_view::npos)
            for (auto& v : t.storage) v = 0;
    });
    REQUIRE(L::forward(ct::with_adapters(r.params, zero_b), ws, r.x, y, ct::causal{}).ok());
    CHECK(test::compare(base.data(), y.data(), y.size).max_abs == 0);
}

// Central differences of loss() (h = 1e-6) against backward's gradients: the worst error relative
// to max(1, |difference|) over every probe.
template <class Loss> struct central_differences {
    Loss& loss;
    double worst = 0;
    std::size_t checked = 0;
    void probe(double& v, double analytic) {
        const double h = 1e-6, keep = v;
        v = keep + h;
        const double up = loss();
        v = keep - h;
        const double down = loss();
        v = keep;
        const double fd = (up - down) / (2 * h);
        worst = std::max(worst, std::fabs(fd - analytic) / std::max(1.0, std::fabs(fd)));
        ++checked;
    }
    // every stride-th element of x: (n) against dx
    void tensor(double* x, const double* dx, std::size_t n, std::size_t stride) {
        for (std::size_t i = 0; i < n; i += stride) probe(x[i], dx[i]);
    }
    // every stride-th element of every adapter tensor, in PyTorch's order (A row-major, B in
    // panels), against g's (the same types, visited in the same order)
    template <class A> void adapters(A& ad, const A& g, std::size_t stride) {
        std::vector<const double*> grads;
        ct::for_each_tensor(g, [&](std::string_view, const auto& t) { grads.push_back(t.storage); });
        std::size_t k = 0;
        ct::for_each_tensor(ad, [&](std::string_view, auto& t) {
            using X = std::remove_cvref_t<decltype(t)>;
            for (std::size_t i = 0; i < t.size; i += stride) {
                std::size_t s = i;
                if constexpr (requires { X::storage_index(i); }) s = X::storage_index(i);
                probe(t.storage[s], grads[k][s]);
            }
            ++k;
        });
    }
};
template <class Loss> central_differences(Loss&) -> central_differences<Loss>;  // (clang 14: no aggregate deduction)

// loss(θ) = Σ out · dy in double; central differences against backward's gradient
TEST_CASE("LoRA gradients by finite differences in double: A, B and the input, with adapter dropout") {
    using L = Block<double, ct::lora_all, 4, 8>;
    Rig<L> r("lora_all_dropout_f64");
    r.train();
    const ct::dropout_config dc = r.dropout();
    static L::Workspace<B, Tq> fws;
    static ct::Tensor<double, B, Tq, 16> out;
    auto loss = [&] {
        REQUIRE(L::forward_train(ct::with_adapters(r.params, r.adapters), fws, r.x, out, dc, ct::causal{}).ok());
        double s = 0;
        for (std::size_t i = 0; i < out.size; ++i) s += out.data()[i] * r.dy.data()[i];
        return s;
    };
    central_differences fd{loss};
    fd.adapters(r.adapters, r.grads, 7);
    fd.tensor(r.x.data(), r.dx.data(), r.x.size, 5);
    std::printf("  finite differences (double, lora_p 0.25): %zu probes, worst relative error %.3g\n", fd.checked, fd.worst);
    CHECK(fd.worst <= 1e-7);
}

// ---- Models: adapters on every block of a Llama (the stack, the frozen embeddings, norm and head) ----
template <class... O>
using SmallLlama = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::ffn_dim<48>, ct::norm_eps<1, 100000>, O...>;
using LoraGQA = SmallLlama<ct::kv_heads<2>, ct::lora<4, 8, ct::lora_all>>;
using LoraTied = SmallLlama<ct::kv_heads<1>, ct::dtype<double>, ct::tied_embeddings<true>,
                            ct::lora<8, 16, ct::lora_q | ct::lora_v | ct::lora_down>>;

template <class Model, std::size_t Tq = 7> void model_against_pytorch(const std::string& name) {
    using V = typename Model::T;
    test::ModelRig<Model, 2, Tq> r(name);
    static typename Model::Adapters ad, g;
    r.file.load(ad, "adapters.");
    const auto pa = ct::with_adapters(r.params, ad);
    static ct::Tensor<V, 2, Tq, Model::vocab> want;
    static ct::Tensor<V, 1> want_loss;
    r.file.read("output", want);
    r.file.read("loss", want_loss);
    ct::dropout_config dc{0.0f, 0.0f, 0.0f, std::stoull(std::string(r.file.f.metadata("dropout_seed"))),
                          static_cast<std::uint32_t>(std::stoul(std::string(r.file.f.metadata("dropout_step"))))};
    dc.lora_p = std::stof(std::string(r.file.f.metadata("lora_dropout")));
    if (dc.lora_p == 0) {  // (the fixture's logits are the training forward's: with dropout they differ from eval's)
        REQUIRE(Model::forward(pa, r.iws, r.tokens, r.logits).ok());
        CHECK_CLOSE(name << " logits (eval)", r.logits.data(), want.data(), want.size, 10 * test::golden_tol<V>);
    }
    V loss = 0;
    REQUIRE(Model::forward_train(pa, r.ws, r.acts, r.tokens, r.targets, loss, dc).ok());
    CHECK(std::fabs(loss - want_loss.storage[0]) <= 10 * test::golden_tol<V>);
    ct::zero_grad(g);
    static typename Model::Params before;
    before = r.params;
    REQUIRE(Model::backward(pa, r.acts, r.ws, g).ok());
    const double worst = test::check_all(r.file, g, "grad.adapters.", std::is_same_v<V, float> ? 2e-5 : 1e-11);
    std::printf("  %-28s logits, loss and every adapter gradient: worst %.3g of the tensor's max\n", name.c_str(), worst);
    CHECK(std::memcmp(&before, &r.params, sizeof before) == 0);
}

TEST_CASE("LoRA Llama = PEFT's formulas in torch: untied GQA float; tied MQA double with adapter dropout") {
    model_against_pytorch<LoraGQA>("lora_llama_gqa");
    model_against_pytorch<LoraTied>("lora_llama_tied_dropout_f64");
}

// A GPT of nn.MultiheadAttention blocks (packed in-projection) with ct::lora_mha: PEFT's
// lora.MultiheadAttention (one adapter over in_proj_weight, one over out_proj, merged for the
// forward: no adapter dropout) beside linear1/linear2 adapters (with dropout in the double case).
template <class T>
using LoraGPTBlock = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>, ct::activation<ct::gelu>,
                                          ct::dtype<T>, ct::lora<4, 8, ct::lora_mha | ct::lora_up | ct::lora_down>>;
using LoraGPT = ct::GPT<13, 8, 2, LoraGPTBlock<float>>;
using LoraGPTTied = ct::GPT<13, 8, 2, LoraGPTBlock<double>, ct::tied_embeddings<true>, ct::positions<ct::sinusoidal>>;

TEST_CASE("LoRA GPT = PEFT's nn.MultiheadAttention adapters in torch: untied float; tied double with adapter dropout") {
    model_against_pytorch<LoraGPT, 6>("lora_gpt_f32");
    model_against_pytorch<LoraGPTTied, 6>("lora_gpt_tied_dropout_f64");
    // PEFT's names and target_modules
    static LoraGPT::Adapters ad;
    std::vector<std::string> names;
    ct::for_each_tensor(ad, [&](std::string_view n, const auto&) { names.emplace_back(n); });
    CHECK(names[0] == "transformer.layers.0.self_attn.lora_A.weight");
    CHECK(names[3] == "transformer.layers.0.self_attn.base_layer.out_proj.lora_B.weight");
    char cfg[512];
    const std::size_t n = ct::write_adapter_config<LoraGPT::Adapters>(cfg);
    CHECK(std::string_view(cfg, n).find("\"target_modules\": [\"linear1\", \"linear2\", \"self_attn\"]") != std::string_view::npos);
    CHECK(ct::check_adapter_config<LoraGPT::Adapters>(std::string_view(cfg, n)).ok());
    const ct::status st = ct::check_adapter_config<LoraGPT::Adapters>(R"({"r": 4, "lora_alpha": 8, "target_modules": ["linear1", "linear2"]})");
    CHECK(st.code == ct::errc::config_mismatch);
    CHECK(std::string(st.tensor_name()) == "target_modules: self_attn in the type, not the file");
}

TEST_CASE("LoRA GPT merge: the packed in_proj_weight and out_proj take PEFT's nn.MultiheadAttention adapters") {
    test::ModelRig<LoraGPTTied, 2, 6> r("lora_gpt_tied_dropout_f64");
    static LoraGPTTied::Adapters ad;
    r.file.load(ad, "adapters.");
    static ct::Tensor<double, 2, 6, 13> with, merged;
    REQUIRE(LoraGPTTied::forward(ct::with_adapters(r.params, ad), r.iws, r.tokens, with).ok());
    static LoraGPTTied::Params base;
    base = r.params;
    REQUIRE(ct::merge_adapters(r.params, ad).ok());
    REQUIRE(LoraGPTTied::forward(r.params, r.iws, r.tokens, merged).ok());
    CHECK_CLOSE("merged vs adapters", merged.data(), with.data(), merged.size, 1e-12);
    REQUIRE(ct::merge_adapters(r.params, ad, -1).ok());
    double worst = 0;
    const double* a = &base.stack.layers[1].self_attn.in_proj_weight.storage[0];
    const double* b = &r.params.stack.layers[1].self_attn.in_proj_weight.storage[0];
    for (std::size_t i = 0; i < sizeof base.stack.layers[1].self_attn.in_proj_weight.storage / sizeof(double); ++i)
        worst = std::max(worst, std::fabs(a[i] - b[i]));
    CHECK(worst > 0);  // (a merge changed it) ...
    CHECK(worst < 1e-14);  // ... and the unmerge took it back to a rounding
}

// ---- A cross-attention layer (nn.TransformerDecoderLayer) with PEFT's adapters on self_attn and
// multihead_attn (lora.MultiheadAttention: the cross-attention's in-projection adapter over the
// queries and the memory) and linear1/linear2 ----
constexpr unsigned dec_targets = ct::lora_mha | ct::lora_cross | ct::lora_up | ct::lora_down;
using LoraDec = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::lora<4, 8, dec_targets>>;
using LoraDecPre = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>, ct::dtype<double>,
                                    ct::lora<8, 16, dec_targets>>;
constexpr std::size_t S = 7;

template <class L> struct CrossRig : Rig<L> {
    using T = typename L::T;
    static inline typename L::template TrainWorkspace<B, Tq, S> cws;
    static inline typename L::template Activations<B, Tq, S> cacts;
    static inline ct::Tensor<T, B, S, L::D> mem, dmem, want_dmem;
    explicit CrossRig(const std::string& name) : Rig<L>(name) {
        this->file.read("input.memory", mem);
        this->file.read("grad.input.memory", want_dmem);
    }
    void train() {
        ct::zero_grad(this->grads);
        for (auto& v : this->dx.storage) v = T(0);
        for (auto& v : dmem.storage) v = T(0);
        const auto pa = ct::with_adapters(this->params, this->adapters);
        REQUIRE(L::forward_train(pa, cws, cacts, this->x, mem, this->y, this->dropout(), ct::causal{}).ok());
        REQUIRE(L::backward(pa, cacts, cws, this->dy, this->grads, this->dx, dmem, ct::causal{}).ok());
    }
};

template <class L> void cross_against_pytorch(const std::string& name) {
    using T = typename L::T;
    CrossRig<L> r(name);
    static typename L::Params before;
    before = r.params;
    r.train();
    const double tol = test::golden_tol<T>;
    CHECK_CLOSE(name << " output", r.y.data(), r.want.data(), r.y.size, tol);
    CHECK_CLOSE(name << " d_tgt", r.dx.data(), r.want_dx.data(), r.dx.size, tol);
    CHECK_CLOSE(name << " d_memory", r.dmem.data(), r.want_dmem.data(), r.dmem.size, tol);
    const double worst = test::check_all(r.file, r.grads, "grad.adapters.", std::is_same_v<T, float> ? 1e-5 : 1e-12);
    std::size_t n = 0;
    ct::for_each_tensor(r.grads, [&](std::string_view, const auto&) { ++n; });
    CHECK(n == 12);
    std::printf("  %-28s output, d_tgt, d_memory and %zu adapter gradients: worst %.3g of the tensor's max\n", name.c_str(), n, worst);
    CHECK(std::memcmp(&before, &r.params, sizeof before) == 0);  // (the base is frozen)
}

TEST_CASE("LoRA on a cross-attention layer = PEFT's adapters in torch: post-norm float; pre-norm double with adapter dropout") {
    cross_against_pytorch<LoraDec>("lora_decoder_f32");
    cross_against_pytorch<LoraDecPre>("lora_decoder_pre_dropout_f64");
    // PEFT's names and target_modules
    std::vector<std::string> names;
    ct::for_each_tensor(CrossRig<LoraDec>::adapters, [&](std::string_view n, const auto&) { names.emplace_back(n); });
    REQUIRE(names.size() == 12);
    CHECK(names[4] == "multihead_attn.lora_A.weight");
    CHECK(names[7] == "multihead_attn.base_layer.out_proj.lora_B.weight");
    char cfg[512];
    const std::size_t n = ct::write_adapter_config<LoraDec::Adapters>(cfg);
    CHECK(std::string_view(cfg, n).find("\"target_modules\": [\"linear1\", \"linear2\", \"self_attn\", \"multihead_attn\"]") !=
          std::string_view::npos);
    CHECK(ct::check_adapter_config<LoraDec::Adapters>(std::string_view(cfg, n)).ok());
    const ct::status st =
        ct::check_adapter_config<LoraDec::Adapters>(R"({"r": 4, "lora_alpha": 8, "target_modules": ["linear1", "linear2", "self_attn"]})");
    CHECK(st.code == ct::errc::config_mismatch);
    CHECK(std::string(st.tensor_name()) == "target_modules: multihead_attn in the type, not the file");
}

TEST_CASE("LoRA cross-attention: eval forward, steps over a cross cache filled with the adapters, merge") {
    CrossRig<LoraDec> r("lora_decoder_f32");
    const auto pa = ct::with_adapters(r.params, r.adapters);
    static LoraDec::Workspace<B, Tq, S> ws;
    static ct::Tensor<float, B, Tq, 16> y, base;
    REQUIRE(LoraDec::forward(pa, ws, r.x, r.mem, y, ct::causal{}).ok());
    CHECK_CLOSE("eval forward with adapters", y.data(), r.want.data(), y.size, test::golden_tol<float>);
    // one position at a time: the cross cache holds the memory's k|v through the adapter
    static LoraDec::KVCache<B, 8> cache;
    static LoraDec::CrossKVCache<B, S> cc;
    static LoraDec::StepWorkspace<B, 1> sws;
    LoraDec::fill_cross_cache(pa, sws, cc, r.mem);
    double worst = 0;
    for (std::size_t t = 0; t < Tq; ++t) {
        ct::Tensor<float, B, 1, 16> xt, yt;
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t d = 0; d < 16; ++d) xt(b, 0, d) = r.x(b, t, d);
        REQUIRE(LoraDec::step(pa, sws, cache, cc, xt, yt, ct::causal{}).ok());
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t d = 0; d < 16; ++d) worst = std::max(worst, double(std::fabs(yt(b, 0, d) - y(b, t, d))));
    }
    INFO("steps vs forward: max abs " << worst);
    CHECK(worst <= 1e-5);
    // a cross cache holds the memory as the adapters that filled it projected it: stepping through
    // other adapters (or the base alone, or adapters over a base-filled cache) is cache_mismatch,
    // with nothing written
    ct::Tensor<float, B, 1, 16> x0, y0;
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t d = 0; d < 16; ++d) x0(b, 0, d) = r.x(b, 0, d), y0(b, 0, d) = 7.f;
    REQUIRE(cache.truncate_all(0).ok());
    const ct::status base_step = LoraDec::step(r.params, sws, cache, cc, x0, y0, ct::causal{});
    CHECK(base_step.code == ct::errc::cache_mismatch);
    CHECK(std::string(base_step.tensor_name()) == "filled with other adapters than the step's");
    static LoraDec::Adapters other;
    other = r.adapters;
    CHECK(LoraDec::step(ct::with_adapters(r.params, other), sws, cache, cc, x0, y0, ct::causal{}).code == ct::errc::cache_mismatch);
    LoraDec::fill_cross_cache(r.params, sws, cc, r.mem);
    const ct::status adapted_step = LoraDec::step(pa, sws, cache, cc, x0, y0, ct::causal{});
    CHECK(adapted_step.code == ct::errc::cache_mismatch);
    CHECK(std::string(adapted_step.tensor_name()) == "filled from the base alone; the step runs adapters");
    CHECK(cache.length(0) == 0);
    bool untouched = true;
    for (std::size_t i = 0; i < y0.size; ++i) untouched = untouched && y0.data()[i] == 7.f;
    CHECK(untouched);
    // the base's cache serves the base, whose outputs differ from the adapted ones
    REQUIRE(LoraDec::step(r.params, sws, cache, cc, x0, y0, ct::causal{}).ok());
    double diff = 0;
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t d = 0; d < 16; ++d) diff = std::max(diff, double(std::fabs(y0(b, 0, d) - y(b, 0, d))));
    CHECK(diff > 1e-3);
    cc.reset();
    CHECK(LoraDec::step(r.params, sws, cache, cc, x0, y0, ct::causal{}).code == ct::errc::cache_empty);
    // merged into the base: the same outputs; unmerged: the base back within a rounding
    REQUIRE(LoraDec::forward(r.params, ws, r.x, r.mem, base, ct::causal{}).ok());
    CHECK(test::compare(base.data(), y.data(), y.size).max_abs > 1e-3);
    static LoraDec::Params keep;
    keep = r.params;
    REQUIRE(ct::merge_adapters(r.params, r.adapters).ok());
    static ct::Tensor<float, B, Tq, 16> merged;
    REQUIRE(LoraDec::forward(r.params, ws, r.x, r.mem, merged, ct::causal{}).ok());
    CHECK_CLOSE("merged vs adapters", merged.data(), y.data(), y.size, test::golden_tol<float>);
    REQUIRE(ct::merge_adapters(r.params, r.adapters, -1).ok());
    CHECK(test::compare(&r.params.multihead_attn.in_proj_weight.storage[0], &keep.multihead_attn.in_proj_weight.storage[0],
                        sizeof keep.multihead_attn.in_proj_weight.storage / sizeof(float))
              .max_abs < 1e-6);
    r.params = keep;
}

// Over a quantized base: the frozen in-projection's input gradient through its quantized blocks
// (the queries' block, the memory's two) equals the dense copy's.
TEST_CASE("LoRA cross stack: a step through other adapters than filled its cross cache is cache_mismatch, all or nothing") {
    using S = ct::DecoderStack<LoraDec, 2>;
    static S::Params p;
    static S::Adapters ad, other;
    static S::KVCache<2, 4> cache;
    static S::CrossKVCache<2, 3> cc;
    static S::StepWorkspace<2, 1> sws;
    static ct::Tensor<float, 2, 3, 16> mem;
    static ct::Tensor<float, 2, 1, 16> x, y;
    unsigned seed = 3;
    const auto fill = [&seed](std::string_view, auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) seed = seed * 1103515245u + 12345u, t.set(i, float((seed >> 9) & 1023) / 2048.f - 0.25f);
    };
    ct::for_each_tensor(p, fill);
    ct::for_each_tensor(ad, fill);
    other = ad;
    for (std::size_t i = 0; i < mem.size; ++i) mem.data()[i] = float(i % 7) / 8.f - 0.4f;
    for (std::size_t i = 0; i < x.size; ++i) x.data()[i] = float(i % 5) / 4.f - 0.5f, y.data()[i] = 7.f;
    const auto pa = ct::with_adapters(p, ad);
    S::fill_cross_cache(pa, sws, cc, mem);
    const ct::status st = S::step(p, sws, cache, cc, x, y, ct::causal{});
    CHECK(st.code == ct::errc::cache_mismatch);
    CHECK(std::string(st.tensor_name()) == "layers.0.multihead_attn");
    CHECK(S::step(ct::with_adapters(p, other), sws, cache, cc, x, y, ct::causal{}).code == ct::errc::cache_mismatch);
    CHECK(cache.length(0) == 0);
    bool untouched = true;
    for (std::size_t i = 0; i < y.size; ++i) untouched = untouched && y.data()[i] == 7.f;
    CHECK(untouched);
    REQUIRE(S::step(pa, sws, cache, cc, x, y, ct::causal{}).ok());
    CHECK(cache.length(0) == 1);
    S::fill_cross_cache(ct::with_adapters(p, other), sws, cc, mem);  // refilled: the other adapters step
    CHECK(S::step(ct::with_adapters(p, other), sws, cache, cc, x, y, ct::causal{}).ok());
}

TEST_CASE_TEMPLATE("LoRA cross-attention over int8 / int4 weights = over their dequantized float copy", Fmt, ct::int8_per_channel,
                   ct::int4_group<16>) {
    using Q = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::lora<4, 8, dec_targets>, ct::weights<Fmt>>;
    CrossRig<LoraDec> r("lora_decoder_f32");
    static typename Q::Params q;
    r.file.load(q, "params.");
    std::vector<float> values;
    ct::for_each_tensor(q, [&](std::string_view, const auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) values.push_back(static_cast<float>(t.get(i)));
    });
    static LoraDec::Params dense;
    std::size_t k = 0;
    ct::for_each_tensor(dense, [&](std::string_view, auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, values[k++]);
    });
    REQUIRE(k == values.size());
    static typename Q::Adapters ad, gq;
    r.file.load(ad, "adapters.");
    static typename Q::template TrainWorkspace<B, Tq, S> ws;
    static typename Q::template Activations<B, Tq, S> acts;
    static ct::Tensor<float, B, Tq, 16> yq, dxq;
    static ct::Tensor<float, B, S, 16> dmq;
    const ct::dropout_config dc{0.0f, 0.0f, 0.0f, 1, 1};
    REQUIRE(Q::forward_train(ct::with_adapters(q, ad), ws, acts, r.x, r.mem, yq, dc, ct::causal{}).ok());
    REQUIRE(Q::backward(ct::with_adapters(q, ad), acts, ws, r.dy, gq, dxq, dmq, ct::causal{}).ok());
    r.params = dense;
    r.train();
    CHECK_CLOSE("output", yq.data(), r.y.data(), yq.size, 1e-5);
    CHECK_CLOSE("d_tgt", dxq.data(), r.dx.data(), dxq.size, 1e-5);
    CHECK_CLOSE("d_memory", dmq.data(), r.dmem.data(), dmq.size, 1e-5);
    std::vector<const float*> want;
    ct::for_each_tensor(r.grads, [&](std::string_view, const auto& t) { want.push_back(t.storage); });
    std::size_t j = 0;
    ct::for_each_tensor(gq, [&](std::string_view name, const auto& t) {
        const double e = test::compare(t.storage, want[j++], sizeof t.storage / sizeof t.storage[0]).max_abs;
        const double mag = test::max_magnitude(t);
        INFO(name << ": max abs err " << e << " of max " << mag);
        CHECK(e <= 1e-5 * std::max(mag, 1.0));
        CHECK(mag > 0);
    });
}

// loss(θ) = Σ out · dy in double through the cross-attention's adapters, the memory and the target
TEST_CASE("LoRA cross-attention gradients by finite differences in double: A, B, memory and target, with adapter dropout") {
    using L = LoraDecPre;
    CrossRig<L> r("lora_decoder_pre_dropout_f64");
    r.train();
    const ct::dropout_config dc = r.dropout();
    static L::Workspace<B, Tq, S> fws;
    static ct::Tensor<double, B, Tq, 16> out;
    auto loss = [&] {
        REQUIRE(L::forward_train(ct::with_adapters(r.params, r.adapters), fws, r.x, r.mem, out, dc, ct::causal{}).ok());
        double s = 0;
        for (std::size_t i = 0; i < out.size; ++i) s += out.data()[i] * r.dy.data()[i];
        return s;
    };
    central_differences fd{loss};
    fd.adapters(r.adapters, r.grads, 5);
    fd.tensor(r.mem.data(), r.dmem.data(), r.mem.size, 3);
    fd.tensor(r.x.data(), r.dx.data(), r.x.size, 5);
    std::printf("  cross-attention finite differences (double, lora_p 0.25): %zu probes, worst relative error %.3g\n", fd.checked,
                fd.worst);
    CHECK(fd.worst <= 1e-7);
}

// Greedy generation with adapters (the decoding steps' path) against the argmax of the full forward
// over the sequence so far, token by token; Len: the prompt and the new tokens (Tq: the fixture's).
template <class Model, std::size_t Tq, std::size_t Len>
void generation_matches_forward(const std::string& name, std::span<const ct::token> prompt) {
    using V = typename Model::T;
    constexpr std::size_t Vocab = Model::vocab;
    test::ModelRig<Model, 2, Tq> r(name);
    static typename Model::Adapters ad;
    r.file.load(ad, "adapters.");
    const auto pa = ct::with_adapters(r.params, ad);
    static typename Model::template GenerateWorkspace<4> gws;
    static typename Model::template KVCache<1, Len> cache;
    std::vector<ct::token> out;
    ct::sampling greedy;
    greedy.temperature = 0;
    const ct::status gst = Model::generate(pa, gws, cache, prompt.data(), prompt.size(), Len - prompt.size(), greedy, [&](ct::token t) {
        out.push_back(t);
        return true;
    });
    REQUIRE_MESSAGE(gst.ok(), std::string(ct::to_string(gst.code)));
    REQUIRE(out.size() == Len - prompt.size());
    std::vector<ct::token> seq(prompt.begin(), prompt.end());
    for (ct::token t : out) {
        static typename Model::template Workspace<1, Len> ws;
        static ct::Tensor<ct::token, 1, Len> toks;
        static ct::Tensor<V, 1, Len, Vocab> logits;
        for (std::size_t i = 0; i < Len; ++i) toks.storage[i] = i < seq.size() ? seq[i] : 0;
        REQUIRE(Model::forward(pa, ws, toks, logits).ok());
        const V* last = logits.data() + (seq.size() - 1) * Vocab;
        std::size_t best = 0;
        for (std::size_t j = 1; j < Vocab; ++j) best = last[j] > last[best] ? j : best;
        CHECK(static_cast<ct::token>(best) == t);
        seq.push_back(t);
    }
}

TEST_CASE("LoRA: greedy generation with adapters equals the full forward's argmax, token by token (Llama, GPT)") {
    const ct::token prompt[] = {3, 14, 15, 9, 2};
    generation_matches_forward<LoraGQA, 7, 15>("lora_llama_gqa", prompt);
    const ct::token gpt_prompt[] = {3, 11, 5};  // (vocabulary 13)
    generation_matches_forward<LoraGPT, 6, 8>("lora_gpt_f32", gpt_prompt);
}

// ---- Adapters over quantized bases: the same as over the dequantized float weights ----
TEST_CASE_TEMPLATE("LoRA over int8 / int4 weights: loss and adapter gradients = over their dequantized float copy", Fmt,
                   ct::int8_per_channel, ct::int4_group<16>) {
    using Q = SmallLlama<ct::kv_heads<2>, ct::lora<4, 8, ct::lora_all>, ct::weights<Fmt>>;
    test::ModelRig<LoraGQA, 2, 7> r("lora_llama_gqa");
    static typename Q::Params q;
    r.file.load(q, "params.");
    std::vector<float> values;  // q's dequantized values, tensor by tensor, into the dense rig's params
    ct::for_each_tensor(q, [&](std::string_view, const auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) values.push_back(static_cast<float>(t.get(i)));
    });
    std::size_t k = 0;
    ct::for_each_tensor(r.params, [&](std::string_view, auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, values[k++]);
    });
    REQUIRE(k == values.size());
    static typename Q::Adapters ad, gq;
    static LoraGQA::Adapters gd;
    r.file.load(ad, "adapters.");
    static LoraGQA::Adapters ad_dense;
    r.file.load(ad_dense, "adapters.");
    static typename Q::template TrainWorkspace<2, 7> ws;
    static typename Q::template Activations<2, 7> acts;
    float lq = 0, ld = 0;
    REQUIRE(Q::forward_train(ct::with_adapters(q, ad), ws, acts, r.tokens, r.targets, lq).ok());
    REQUIRE(Q::backward(ct::with_adapters(q, ad), acts, ws, gq).ok());
    REQUIRE(LoraGQA::forward_train(ct::with_adapters(r.params, ad_dense), r.ws, r.acts, r.tokens, r.targets, ld).ok());
    REQUIRE(LoraGQA::backward(ct::with_adapters(r.params, ad_dense), r.acts, r.ws, gd).ok());
    CHECK(std::fabs(lq - ld) <= 1e-5 * std::fabs(ld));
    std::vector<const float*> dense;
    ct::for_each_tensor(gd, [&](std::string_view, const auto& t) { dense.push_back(t.storage); });
    double worst = 0;
    std::size_t j = 0;
    ct::for_each_tensor(gq, [&](std::string_view name, const auto& t) {
        const double e = test::compare(t.storage, dense[j++], sizeof t.storage / sizeof t.storage[0]).max_abs;
        const double mag = test::max_magnitude(t);
        INFO(name << ": max abs err " << e << " of max " << mag);
        CHECK(e <= 1e-5 * std::max(mag, 1.0));
        worst = std::max(worst, e / std::max(mag, 1e-30));
        CHECK(mag > 0);
    });
    std::printf("  LoRA over %-5s weights: loss %.6f (dense copy %.6f), adapter gradients within %.3g of max\n",
                Fmt::per_word == 8 ? "int4" : "int8", lq, ld, worst);
}

// ---- Files (PEFT's names and adapter_config.json), merge, initialisation, errors ----
TEST_CASE("LoRA files: PEFT's names and adapter_config.json, saved and loaded back; a wrong r, alpha or target is config_mismatch") {
    test::ModelRig<LoraGQA, 2, 7> r("lora_llama_gqa");
    static LoraGQA::Adapters ad, back;
    r.file.load(ad, "adapters.");
    const ct::save_result size = ct::save_adapters(ad, {});
    std::vector<std::byte> bytes(size.bytes);
    REQUIRE(ct::save_adapters(ad, bytes).st.ok());
    ct::safetensors::file<512> f;
    REQUIRE(f.parse(bytes).ok());
    CHECK(f.find("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight") != nullptr);
    CHECK(f.find("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight") != nullptr);
    char json[512];
    const std::size_t n = ct::write_adapter_config<LoraGQA::Adapters>(json, 0.05f);
    REQUIRE(n < sizeof json);
    const std::string_view config(json, n);
    CHECK(config.find("\"r\": 4") != std::string_view::npos);
    CHECK(config.find("\"lora_dropout\": 0.050") != std::string_view::npos);
    CHECK(config.find("\"target_modules\": [\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\", \"gate_proj\", \"up_proj\", \"down_proj\"]") !=
          std::string_view::npos);
    REQUIRE(ct::load_adapters(back, f, config).ok());
    CHECK(std::memcmp(&ad, &back, sizeof ad) == 0);
    // PEFT's own spelling: indented, other fields, a float alpha, targets in any order, "all-linear"
    CHECK(ct::check_adapter_config<LoraGQA::Adapters>(
              R"({"alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": "x", "bias": "none",
                  "fan_in_fan_out": false, "inference_mode": true, "init_lora_weights": true, "layers_pattern": null,
                  "lora_alpha": 8.0, "lora_dropout": 0.05, "modules_to_save": null, "peft_type": "LORA", "r": 4,
                  "rank_pattern": {}, "revision": null, "target_modules": ["down_proj", "o_proj", "q_proj", "k_proj",
                  "v_proj", "gate_proj", "up_proj"], "task_type": "CAUSAL_LM", "use_rslora": false, "layers_to_transform": [0, 1]})")
              .ok());
    CHECK(ct::check_adapter_config<LoraGQA::Adapters>(R"({"r": 4, "lora_alpha": 8, "target_modules": "all-linear"})").ok());
    const auto code = [](std::string_view j) {
        const ct::status st = ct::check_adapter_config<LoraGQA::Adapters>(j);
        INFO(j << ": " << ct::to_string(st.code) << " " << st.tensor_name());
        return st.code;
    };
    CHECK(code(R"({"r": 8, "lora_alpha": 8, "target_modules": "all-linear"})") == ct::errc::config_mismatch);
    CHECK(code(R"({"r": 4, "lora_alpha": 16, "target_modules": "all-linear"})") == ct::errc::config_mismatch);
    CHECK(code(R"({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]})") == ct::errc::config_mismatch);
    CHECK(code(R"({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "lm_head"]})") == ct::errc::config_mismatch);
    CHECK(code(R"({"r": 4, "lora_alpha": 8})") == ct::errc::config_mismatch);
    CHECK(code(R"({"r": 4, "lora_alpha": 8, "target_modules": "all-linear", "peft_type": "IA3"})") == ct::errc::config_mismatch);
    CHECK(code(R"({"r": 4, "lora_alpha": 8, "target_modules": ".*proj"})") == ct::errc::config_mismatch);
    CHECK(code(R"({"r": 4.5, "lora_alpha": 8, "target_modules": "all-linear"})") == ct::errc::malformed_header);
    CHECK(code(R"({"r": 4, "lora_alpha": 8, "target_modules": "all-linear")") == ct::errc::malformed_header);
    CHECK(code(R"([1, 2])") == ct::errc::malformed_header);
    // numbers past every integer type (found by fuzz_adapters: no conversion overflows)
    const std::string huge(400, '9');
    CHECK(code("{\"r\": " + huge + ", \"lora_alpha\": 8, \"target_modules\": \"all-linear\"}") == ct::errc::malformed_header);
    CHECK(code("{\"r\": 4, \"lora_alpha\": " + huge + ", \"target_modules\": \"all-linear\"}") == ct::errc::config_mismatch);
    CHECK(code(R"({"r": 4, "lora_alpha": -8, "target_modules": "all-linear"})") == ct::errc::config_mismatch);
    CHECK(code(R"({"r": -4, "lora_alpha": 8, "target_modules": "all-linear"})") == ct::errc::malformed_header);
    CHECK(code(R"({"r": 4, "lora_alpha": 8, "x": {"y": [1, {"z": 2}}, "target_modules": "all-linear"})") == ct::errc::malformed_header);
    // the fields that change the arithmetic must hold PEFT's defaults (a real file: rsLoRA's α/√r
    // would otherwise load as α/r), each error naming the field and its value
    const std::string peft_defaults =
        R"("alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": "meta-llama/Llama-2-7b-hf", "bias": "none",
           "fan_in_fan_out": false, "inference_mode": true, "init_lora_weights": true, "layer_replication": null,
           "layers_pattern": null, "layers_to_transform": null, "loftq_config": {}, "lora_alpha": 8, "lora_dropout": 0.05,
           "megatron_config": null, "megatron_core": "megatron.core", "modules_to_save": null, "peft_type": "LORA", "r": 4,
           "rank_pattern": { }, "revision": null, "target_modules": "all-linear", "task_type": "CAUSAL_LM", "use_dora": false,
           "use_rslora": false, "lora_bias": false, "exclude_modules": null)";
    CHECK(code("{" + peft_defaults + "}") == ct::errc::ok);
    CHECK(code("{" + peft_defaults + R"(, "layers_to_transform": [1, 0]})") == ct::errc::ok);  // (every layer, any order)
    const std::pair<const char*, const char*> unsupported[] = {
        {R"("use_rslora": true)", "use_rslora: file true, type false (ct::rslora scales by lora_alpha / sqrt(r))"},
        {R"("use_rslora": "yes")", "use_rslora: \"yes\" ("},
        {R"("use_dora": true)", "use_dora: true (DoRA is not LoRA)"},
        {R"("rank_pattern": {"model.layers.0.self_attn.q_proj": 8})", "rank_pattern: {\"model.layers.0.self_attn.q_proj\": 8} ("},
        {R"("alpha_pattern": {"q_proj": 16})", "alpha_pattern: {\"q_proj\": 16} ("},
        {R"("bias": "lora_only")", "bias: \"lora_only\" ("},
        {R"("lora_bias": true)", "lora_bias: true ("},
        {R"("fan_in_fan_out": true)", "fan_in_fan_out: true ("},
        {R"("modules_to_save": ["lm_head"])", "modules_to_save: [\"lm_head\"] ("},
        {R"("layer_replication": [[0, 1]])", "layer_replication: [[0, 1]] ("},
        {R"("layers_to_transform": [0])", "layers_to_transform: [0] (the type adapts every layer)"},
        {R"("layers_to_transform": 1)", "layers_to_transform: 1 ("},
        {R"("layers_to_transform": [0, 0])", "layers_to_transform: [0, 0] ("},
        {R"("layers_to_transform": [0, 1, 2])", "layers_to_transform: [0, 1, 2] ("},
    };
    for (const auto& u : unsupported) {
        const char *field = u.first, *message = u.second;  // (clang 14: no structured bindings in INFO's capture)
        const ct::status st = ct::check_adapter_config<LoraGQA::Adapters>("{" + peft_defaults + ", " + field + "}");
        INFO(field << ": " << ct::to_string(st.code) << " " << st.tensor_name());
        CHECK(st.code == ct::errc::config_mismatch);
        CHECK(std::string_view(st.tensor_name()).starts_with(message));
    }
    // a file of another rank: its config says so; without the config, its shapes do
    static LoraTied::Adapters other;
    CHECK(ct::load_adapters(other, f, config).code == ct::errc::config_mismatch);
    CHECK(ct::load_adapters(other, f).code != ct::errc::ok);
}

TEST_CASE("LoRA merge: W + (α/r)·B·A runs as base + adapters; unmerge restores W within rounding; init is PEFT's") {
    test::ModelRig<LoraGQA, 2, 7> r("lora_llama_gqa");
    static LoraGQA::Adapters ad;
    r.file.load(ad, "adapters.");
    static ct::Tensor<float, 2, 7, 37> with, merged;
    REQUIRE(LoraGQA::forward(ct::with_adapters(r.params, ad), r.iws, r.tokens, with).ok());
    static LoraGQA::Params base;
    base = r.params;
    REQUIRE(ct::merge_adapters(r.params, ad).ok());
    REQUIRE(LoraGQA::forward(r.params, r.iws, r.tokens, merged).ok());
    CHECK_CLOSE("merged vs adapters", merged.data(), with.data(), with.size, 2e-5);
    REQUIRE(ct::merge_adapters(r.params, ad, -1).ok());
    double worst = 0;
    std::vector<float> b0;
    ct::for_each_tensor(base, [&](std::string_view, const auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) b0.push_back(t.get(i));
    });
    std::size_t k = 0;
    ct::for_each_tensor(r.params, [&](std::string_view, const auto& t) {
        for (std::size_t i = 0; i < t.size; ++i, ++k) worst = std::max(worst, double(std::fabs(t.get(i) - b0[k])));
    });
    CHECK(worst <= 1e-6);
    // a quantized base cannot take a merge: an error, nothing written
    using Q = SmallLlama<ct::kv_heads<2>, ct::lora<4, 8, ct::lora_all>, ct::weights<ct::int8_per_channel>>;
    static Q::Params q, q0;
    r.file.load(q, "params.");
    q0 = q;
    static Q::Adapters qa;
    r.file.load(qa, "adapters.");
    CHECK(ct::merge_adapters(q, qa).code == ct::errc::invalid_option);
    CHECK(std::memcmp(&q, &q0, sizeof q) == 0);
    // PEFT's initialisation: A uniform within ±1/√In, B zero, so the model starts as its base
    static LoraGQA::Adapters fresh, again;
    ct::init_adapters(fresh, 42);
    ct::init_adapters(again, 42);
    CHECK(std::memcmp(&fresh, &again, sizeof fresh) == 0);
    ct::for_each_tensor(fresh, [&](std::string_view name, const auto& t) {
        using X = std::remove_cvref_t<decltype(t)>;
        const double bound = 1 / std::sqrt(double(X::shape[1]));
        double lo = 0, hi = 0, mean = 0;
        for (std::size_t i = 0; i < t.size; ++i) lo = std::min(lo, double(t.get(i))), hi = std::max(hi, double(t.get(i))), mean += t.get(i);
        INFO(name);
        if (name.find("lora_B") != std::string_view::npos) {
            CHECK(lo == 0);
            CHECK(hi == 0);
        } else {
            CHECK(lo >= -bound);
            CHECK(hi <= bound);
            CHECK(hi - lo >= bound);  // spread over the interval
            CHECK(std::fabs(mean / double(t.size)) <= 0.2 * bound);
        }
    });
    static ct::Tensor<float, 2, 7, 37> plain, started;
    REQUIRE(LoraGQA::forward(r.params, r.iws, r.tokens, plain).ok());
    REQUIRE(LoraGQA::forward(ct::with_adapters(r.params, fresh), r.iws, r.tokens, started).ok());
    CHECK(std::memcmp(plain.data(), started.data(), sizeof plain.storage) == 0);
}

TEST_CASE("LoRA options: adapter dropout outside [0, 1] is invalid_option, nothing written") {
    using L = Block<float, ct::lora_all, 4, 8>;
    Rig<L> r("lora_all_f32");
    ct::dropout_config dc{0.0f, 0.0f, 0.0f, 1, 1};
    for (float bad : {-0.5f, 1.5f, std::nanf("")}) {
        dc.lora_p = bad;
        for (auto& v : r.y.storage) v = 7;
        CHECK(L::forward_train(ct::with_adapters(r.params, r.adapters), r.ws, r.acts, r.x, r.y, dc, ct::causal{}).code ==
              ct::errc::invalid_option);
        CHECK(r.y.storage[0] == 7);
    }
}

// ---- Memory: the issue's target, from the roles' static sizes ----
// stories15M's shape (d_model 288, 6 layers, 6 heads, ffn 768, vocab 32000, context 256), r 8 on
// q and v, batch 1 x 64 tokens: adapters + their gradients + AdamW state + activations + workspace
// against full fine-tuning's params + gradients + AdamW state + the same activations and workspace.
using Stories = ct::Llama<32000, 256, 6, ct::d_model<288>, ct::heads<6>, ct::ffn_dim<768>, ct::norm_eps<1, 100000>,
                          ct::lora<8, 16, ct::lora_q | ct::lora_v>>;
using StoriesMap = ct::adapter_training_memory<Stories, 1, 64>;
constexpr std::size_t stories_lora = StoriesMap::ram;
constexpr std::size_t stories_full = 2 * Stories::Params::bytes + sizeof(ct::AdamW<Stories::Params>) + StoriesMap::activations +
                                     StoriesMap::workspace + StoriesMap::batch;
static_assert(stories_lora * 8 <= stories_full, "LoRA training RAM above 1/8 of full fine-tuning's");

TEST_CASE("LoRA memory: stories15M, r 8 on q and v, 1 x 64 tokens: training RAM at most 1/8 of full fine-tuning's") {
    std::printf("  stories15M r8 q,v, batch 1x64: adapters %zu B (x2 with gradients, AdamW %zu B), activations %zu KB, "
                "workspace %zu KB: %zu KB to train adapters vs %zu KB for full fine-tuning (1/%.1f)\n",
                Stories::Adapters::bytes, sizeof(ct::AdamW<Stories::Adapters>), Stories::Activations<1, 64>::bytes >> 10,
                Stories::TrainWorkspace<1, 64>::bytes >> 10, stories_lora >> 10, stories_full >> 10,
                double(stories_full) / double(stories_lora));
    CHECK(stories_lora * 8 <= stories_full);
}

}  // namespace
