// Llama-family models against PyTorch (tests/data/gen.py writes Hugging Face LlamaForCausalLM's math
// in plain torch: RMSNorm, rotate-half or interleaved RoPE, repeat_kv, SiLU/GELU gating) under
// Hugging Face's names: GQA (float), MQA with tied embeddings and interleaved RoPE (double), MHA
// with GeGLU (double), partial rotary (double): logits, loss, every gradient and 20 greedy tokens.
// Then: the cached step equals the forward token by token and in chunks; both RoPE layouts against
// their formulas; finite differences in double through RoPE attention and the gated feed-forward;
// GQA caches' sizes.
#include <cmath>
#include <cstring>
#include <vector>
#include <string>

#include "model_fixture.hpp"
#include "reference.hpp"

namespace {
using test::File;

template <class... O>
using Small = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::ffn_dim<48>, ct::norm_eps<1, 100000>, O...>;
using GQA = Small<ct::kv_heads<2>>;
using MQA = Small<ct::kv_heads<1>, ct::dtype<double>, ct::rope<ct::interleaved, 500000>, ct::tied_embeddings<true>>;
using MHA = Small<ct::dtype<double>, ct::activation<ct::gelu>>;
using Partial = Small<ct::kv_heads<2>, ct::dtype<double>, ct::rope<ct::rotate_half, 10000, 4>>;  // 4 of 8 dims rotated

// A GQA cache holds kv_heads heads: heads/kv_heads times smaller than multi-head attention's.
static_assert(GQA::KVCache<1, 32>::bytes * 2 <= Small<>::KVCache<1, 32>::bytes + 512);
static_assert(sizeof(MQA::Stack::layer_type::KVCache<1, 32>::kt) * 4 == sizeof(ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>,
                                                                   ct::ffn_dim<48>, ct::dtype<double>>::Stack::layer_type::KVCache<1, 32>::kt));
static_assert(GQA::Params::bytes == sizeof(GQA::Params));

template <class Model, std::size_t B, std::size_t T> using Rig = test::ModelRig<Model, B, T>;

template <class Model> void against_pytorch(const std::string& name) {
    using V = typename Model::T;
    Rig<Model, 2, 7> r(name);
    static ct::Tensor<V, 2, 7, 37> want;
    static ct::Tensor<V, 1> want_loss;
    r.file.read("output", want);
    r.file.read("loss", want_loss);
    REQUIRE(Model::forward(r.params, r.iws, r.tokens, r.logits).ok());
    CHECK_CLOSE(name << " logits", r.logits.data(), want.data(), want.size, test::golden_tol<V>);
    const V loss = r.loss();
    CHECK_CLOSE(name << " loss", &loss, want_loss.data(), 1, test::golden_tol<V>);
    ct::zero_grad(r.grads);
    REQUIRE(Model::backward(r.params, r.acts, r.ws, r.grads).ok());
    const double worst = test::check_all(r.file, r.grads, "grad.", test::grad_rel_tol<V>);

    // greedy generation through the caches = PyTorch's greedy tokens (full recomputation)
    static ct::Tensor<double, 5> prompt_f;
    static ct::Tensor<double, 20> want_gen;
    r.file.read("gen.prompt", prompt_f);
    r.file.read("gen.tokens", want_gen);
    ct::token prompt[5];
    for (std::size_t i = 0; i < 5; ++i) prompt[i] = static_cast<ct::token>(prompt_f.storage[i]);
    static typename Model::template KVCache<1, 32> cache;
    static typename Model::template GenerateWorkspace<4> gws;
    cache.reset();
    std::vector<ct::token> got;
    got.reserve(20);
    REQUIRE(Model::generate(r.params, gws, cache, prompt, 5, 20, ct::sampling{.temperature = 0}, [&](ct::token t) {
                got.push_back(t);
                return true;
            }).ok());
    REQUIRE(got.size() == 20);
    std::size_t same = 0;
    for (std::size_t i = 0; i < 20; ++i) same += got[i] == static_cast<ct::token>(want_gen.storage[i]);
    CHECK(same == 20);
    std::printf("  %-32s loss %.8g (torch %.8g), worst gradient error %.3g of its max magnitude, greedy %zu/20\n",
                name.c_str(), double(loss), double(want_loss.storage[0]), worst, same);
}

TEST_CASE("Llama = Hugging Face LlamaForCausalLM's math: GQA (kv_heads 2), float, untied, rotate-half RoPE") {
    against_pytorch<GQA>("llama_gqa");
    std::size_t n = 0;
    ct::for_each_tensor(Rig<GQA, 2, 7>::params, [&](std::string_view name, const auto&) {
        n += name == "model.embed_tokens.weight" || name == "model.layers.1.self_attn.k_proj.weight" ||
             name == "model.layers.0.mlp.gate_proj.weight" || name == "model.layers.0.input_layernorm.weight" ||
             name == "model.layers.1.post_attention_layernorm.weight" || name == "model.norm.weight" ||
             name == "lm_head.weight";
    });
    CHECK(n == 7);
}
TEST_CASE("Llama: MQA (kv_heads 1), double, tied embeddings, interleaved RoPE with theta 500000") {
    against_pytorch<MQA>("llama_mqa_tied_interleaved_f64");
}
TEST_CASE("Llama: MHA, double, GeGLU") { against_pytorch<MHA>("llama_mha_geglu_f64"); }
TEST_CASE("Llama: partial rotary (RoPE on 4 of each head's 8 dimensions, the rest passed through), double") {
    against_pytorch<Partial>("llama_partial_rotary_f64");
}

TEST_CASE("Llama: step token by token and in ragged chunks = the forward's logits (RoPE positions from the cache)") {
    using M = MQA;
    Rig<M, 2, 7> r("llama_mqa_tied_interleaved_f64");
    REQUIRE(M::forward(r.params, r.iws, r.tokens, r.logits).ok());
    static M::KVCache<2, 32> cache;
    static M::StepWorkspace<2, 3> sws;
    static ct::Tensor<ct::token, 2, 3> chunk;
    static ct::Tensor<double, 2, 3, 37> out;
    const std::array<std::size_t, 2> counts[4] = {{1, 3}, {3, 2}, {2, 1}, {1, 1}};
    std::size_t pos[2] = {0, 0};
    double worst = 0;
    for (const auto& c : counts) {
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t i = 0; i < 3; ++i) chunk(b, i) = i < c[b] ? r.tokens(b, pos[b] + i) : -1;
        REQUIRE(M::step_ragged(r.params, sws, cache, chunk, out, c).ok());
        for (std::size_t b = 0; b < 2; ++b) {
            for (std::size_t i = 0; i < c[b]; ++i)
                for (std::size_t v = 0; v < 37; ++v)
                    worst = std::max(worst, std::fabs(out(b, i, v) - r.logits(b, pos[b] + i, v)));
            pos[b] += c[b];
        }
    }
    INFO("max |step - forward| " << worst);
    CHECK(worst <= 1e-11);
    CHECK(cache.length(0) == 7);
    CHECK(cache.length(1) == 7);
}

TEST_CASE("RoPE: both layouts against their formulas; the table against libm; rotate then rotate back") {
    constexpr std::size_t R = 8, P = 40;
    const auto& tab = ct::kernels::rope_table_v<double, R, P, 10000>;
    double worst_table = 0, worst_half = 0, worst_inter = 0, worst_back = 0;
    for (std::size_t pos = 0; pos < P; ++pos) {
        const double* c = tab.cos + pos * R / 2;
        const double* s = tab.sin + pos * R / 2;
        double x[R], h[R], in[R];
        for (std::size_t d = 0; d < R; ++d) x[d] = h[d] = in[d] = std::sin(1.7 * double(d + 1) + double(pos));
        ct::kernels::rope_rotate<ct::rotate_half, false>(h, c, s, R);
        ct::kernels::rope_rotate<ct::interleaved, false>(in, c, s, R);
        for (std::size_t i = 0; i < R / 2; ++i) {
            const double a = double(pos) * std::pow(10000.0, -2.0 * double(i) / double(R));
            worst_table = std::max({worst_table, std::fabs(c[i] - std::cos(a)), std::fabs(s[i] - std::sin(a))});
            // rotate-half: (x_i, x_{i+R/2}) by angle a; interleaved: (x_{2i}, x_{2i+1})
            worst_half = std::max({worst_half, std::fabs(h[i] - (x[i] * std::cos(a) - x[i + R / 2] * std::sin(a))),
                                   std::fabs(h[i + R / 2] - (x[i + R / 2] * std::cos(a) + x[i] * std::sin(a)))});
            worst_inter = std::max({worst_inter, std::fabs(in[2 * i] - (x[2 * i] * std::cos(a) - x[2 * i + 1] * std::sin(a))),
                                    std::fabs(in[2 * i + 1] - (x[2 * i + 1] * std::cos(a) + x[2 * i] * std::sin(a)))});
        }
        ct::kernels::rope_rotate<ct::rotate_half, true>(h, c, s, R);
        for (std::size_t d = 0; d < R; ++d) worst_back = std::max(worst_back, std::fabs(h[d] - x[d]));
    }
    INFO("table " << worst_table << ", rotate-half " << worst_half << ", interleaved " << worst_inter << ", back "
                  << worst_back);
    CHECK(worst_table <= 1e-12);
    CHECK(worst_half <= 1e-12);
    CHECK(worst_inter <= 1e-12);
    CHECK(worst_back <= 1e-14);
}

TEST_CASE("Llama: finite differences in double through RoPE attention (q, k, v, o) and the gated FFN") {
    using M = MQA;
    Rig<M, 2, 7> r("llama_mqa_tied_interleaved_f64");
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
    auto& p = r.params.stack.layers;
    auto& g = r.grads.stack.layers;
    for (std::size_t i : {0u, 77u, 500u}) probe(p[0].self_attn.q_proj.weight, g[0].self_attn.q_proj.weight, i);
    for (std::size_t i : {1u, 130u}) probe(p[1].self_attn.k_proj.weight, g[1].self_attn.k_proj.weight, i);
    for (std::size_t i : {5u, 200u}) probe(p[0].self_attn.v_proj.weight, g[0].self_attn.v_proj.weight, i);
    probe(p[1].self_attn.o_proj.weight, g[1].self_attn.o_proj.weight, 99);
    for (std::size_t i : {2u, 900u}) probe(p[0].ffn.gate_proj.weight, g[0].ffn.gate_proj.weight, i);
    probe(p[1].ffn.up_proj.weight, g[1].ffn.up_proj.weight, 41);
    probe(p[0].ffn.down_proj.weight, g[0].ffn.down_proj.weight, 300);
    probe(p[0].norm1.weight, g[0].norm1.weight, 3);
    probe(r.params.tok_embeddings.weight, r.grads.tok_embeddings.weight, 40);
    std::printf("  Llama finite differences (double): worst relative error %.3g\n", worst);
}

TEST_CASE("Llama: AdamW steps lower the loss on a fixed batch") {
    using M = GQA;
    Rig<M, 2, 7> r("llama_gqa");
    static ct::AdamW<M::Params> opt;
    opt.options.lr = 1e-2;
    const float first = r.loss();
    float last = first;
    for (int s = 0; s < 10; ++s) {
        ct::zero_grad(r.grads);
        last = r.loss();
        REQUIRE(M::backward(r.params, r.acts, r.ws, r.grads).ok());
        REQUIRE(opt.step(r.params, r.grads).ok());
    }
    INFO("loss " << first << " -> " << last);
    CHECK(last < 0.8f * first);
}

}  // namespace

// ---- Names apart from structure (layer/names.hpp) ----
namespace {
// The names of P's tensors, in order.
template <class P> std::vector<std::string> names_of(const P& p) {
    std::vector<std::string> out;
    ct::for_each_tensor(p, [&](std::string_view n, const auto&) { out.emplace_back(n); });
    return out;
}
// Saved under its own names, loaded into a zeroed object of the same type: every tensor back.
template <class P> void round_trip(const P& p) {
    static std::byte buf[1 << 20];
    static ct::safetensors::file<128> f;
    static P q;
    q = P{};
    const ct::save_result saved = ct::save_state_dict(p, std::span<std::byte>(buf));
    REQUIRE(saved.st.ok());
    REQUIRE(f.parse(std::span<const std::byte>(buf, saved.bytes)).ok());
    const ct::status st = ct::load_state_dict(q, f);
    INFO(ct::to_string(st.code) << ": " << std::string(st.tensor_name()));
    REQUIRE(st.ok());
    CHECK(std::memcmp(&p, &q, sizeof p) == 0);
}
}  // namespace

TEST_CASE("names apart from structure: a GQA + SwiGLU block under PyTorch's names computes what the Llama-named one does") {
    using HF = ct::LlamaBlock<ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<48>, ct::max_positions<16>>;
    using PT = ct::LlamaBlock<ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<48>, ct::max_positions<16>,
                              ct::param_names<ct::pytorch>>;
    static_assert(sizeof(HF::Params) == sizeof(PT::Params));  // one structure
    static HF::Params hp;
    static PT::Params pp;
    static HF::Workspace<1, 9> hws;
    static PT::Workspace<1, 9> pws;
    static ct::Tensor<float, 1, 9, 32> x, hy, py;
    ref::randomize(hp, 41);
    ref::randomize_tensor(x, 42);
    std::memcpy(static_cast<void*>(&pp), &hp, sizeof pp);  // the same members in the same order
    REQUIRE(HF::forward(hp, hws, x, hy, ct::causal{}).ok());
    REQUIRE(PT::forward(pp, pws, x, py, ct::causal{}).ok());
    CHECK(std::memcmp(hy.data(), py.data(), sizeof hy) == 0);
    const std::vector<std::string> want = {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                           "self_attn.out_proj.weight", "linear_gate.weight", "linear1.weight",
                                           "linear2.weight", "norm1.weight", "norm2.weight"};
    CHECK(names_of(pp) == want);
    CHECK(names_of(hp)[4] == "mlp.gate_proj.weight");
    round_trip(pp);
    // a file under one family's names does not load into the other's: named, nothing written
    static std::byte buf[1 << 18];
    static ct::safetensors::file<64> f;
    const ct::save_result saved = ct::save_state_dict(hp, std::span<std::byte>(buf));
    REQUIRE(f.parse(std::span<const std::byte>(buf, saved.bytes)).ok());
    static PT::Params untouched;
    const ct::status st = ct::load_state_dict(untouched, f);
    CHECK(!st.ok());
    static PT::Params zero;
    CHECK(std::memcmp(&untouched, &zero, sizeof zero) == 0);
}

TEST_CASE("names apart from structure: a Llama under GPT-2's names, and a plain GPT under Hugging Face's, load") {
    using G2 = Small<ct::kv_heads<2>, ct::param_names<ct::gpt2>>;
    static G2::Params p;
    ref::randomize(p, 43);
    const std::vector<std::string> n = names_of(p);
    REQUIRE(n.size() == 2 + 2 * 9 + 1);
    CHECK(n.front() == "transformer.wte.weight");
    CHECK(n[1] == "transformer.h.0.attn.q_proj.weight");
    CHECK(n[4] == "transformer.h.0.attn.c_proj.weight");
    CHECK(n[5] == "transformer.h.0.mlp.c_gate.weight");
    CHECK(n[8] == "transformer.h.0.ln_1.weight");
    CHECK(n[n.size() - 2] == "transformer.ln_f.weight");
    CHECK(n.back() == "lm_head.weight");
    round_trip(p);
    // the GPT-shaped model (packed attention, plain FFN, learned positions) under Hugging Face's table
    using Block = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<32>, ct::norm_first<true>,
                                       ct::param_names<ct::hugging_face>, ct::separate_qkv<false>>;
    using M = ct::GPT<11, 8, 1, Block, ct::param_names<ct::hugging_face>>;
    static M::Params m;
    ref::randomize(m, 44);
    const std::vector<std::string> mn = names_of(m);
    CHECK(mn[0] == "model.embed_tokens.weight");
    CHECK(mn[1] == "model.embed_positions.weight");
    CHECK(mn[2] == "model.layers.0.self_attn.in_proj_weight");
    CHECK(mn[4] == "model.layers.0.self_attn.o_proj.weight");
    CHECK(mn[6] == "model.layers.0.mlp.up_proj.weight");
    CHECK(mn[10] == "model.layers.0.input_layernorm.weight");
    round_trip(m);
}
