// The decoding options in layers and models (the kernels: tests/test_quant_decode.cpp): int8
// activations (ct::weights<F, ct::int8_activations>) against the float-activation twins at the
// tolerance the activations' rounding allows, one file serving both; bf16 KV caches
// (ct::kv_cache<ct::bf16>): the layer and a Llama stepping against their forward at bf16's
// tolerance (docs/quantization.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "quant_fixture.hpp"

namespace {
using namespace quant_test;

// ---- Models: against the same weights without the option ----

template <class... O>
using LlamaS = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::ffn_dim<48>, ct::norm_eps<1, 100000>, ct::kv_heads<2>, O...>;

// The activations' rounding against float activations (same quantized weights): measured 0.23%
// (decoder layer, int8) and 0.71% (llama_gqa, int4) of the output's max magnitude; the bound
// leaves room for other ISAs' roundings.
constexpr double int8_act_tol = 4e-2;
// A step over bf16 keys and values against the forward: measured 0.054% (decoder layer, float
// weights), 0.92% with int4 weights and int8 activations besides (llama_gqa).
constexpr double bf16_cache_tol = 2e-2;

// MQ (with the option) against MF (the same weights without it): the forward logits (within
// fwd_tol; 0: equal), step token by token against MQ's own forward (within step_tol), and greedy
// generation whose every token is the argmax of MQ's own step logits.
template <class MQ, class MF> void option_case(const char* what, double fwd_tol, double step_tol) {
    constexpr std::size_t B = 2, T = 7, V = MQ::vocab;
    static typename MQ::Params q;
    static typename MF::Params f;
    test::File file("llama_gqa");
    file.load(q, "params.");
    file.load(f, "params.");
    static ct::Tensor<double, B, T> ids;
    static ct::Tensor<ct::token, B, T> tokens;
    file.read("input.tokens", ids);
    for (std::size_t i = 0; i < ids.size; ++i) tokens.storage[i] = static_cast<ct::token>(ids.storage[i]);
    static ct::Tensor<float, B, T, V> lq, lf, torch;
    file.read("output", torch);
    static typename MQ::template Workspace<B, T> wq;
    static typename MF::template Workspace<B, T> wf;
    REQUIRE(MQ::forward(q, wq, tokens, lq).ok());
    REQUIRE(MF::forward(f, wf, tokens, lf).ok());
    const double fwd = check_rel("with the option vs without", lq.data(), lf.data(), lq.size, fwd_tol);
    if (fwd_tol > 0) CHECK(fwd > 0);  // the option rounds: a different path from the float one
    const double vs_torch = test::compare(lq.data(), torch.data(), lq.size).max_abs / max_abs(torch.data(), torch.size);

    // step token by token = the forward's rows (int8 activations: the same kernel per row; float
    // roundings upstream may move an activation across a rounding boundary: one step of one block)
    const double worst_step = step_vs_forward<MQ>(q, tokens, lq, "step vs forward", step_tol);
    // greedy generation: every token the argmax of the model's own step logits
    static typename MQ::template KVCache<1, MQ::context> gq, sq1;
    static typename MQ::template GenerateWorkspace<4> gw;
    static typename MQ::template StepWorkspace<1, 1> sw1;
    std::vector<ct::token> out;
    gq.reset();
    REQUIRE(MQ::generate(q, gw, gq, tokens.data(), 3, MQ::context - 3, ct::sampling{.temperature = 0}, [&](ct::token t) {
                out.push_back(t);
                return true;
            }).ok());
    REQUIRE(out.size() == MQ::context - 3);
    sq1.reset();
    static ct::Tensor<ct::token, 1, 1> tok;
    static ct::Tensor<float, 1, 1, V> lg;
    std::vector<ct::token> seq(tokens.data(), tokens.data() + 3);
    seq.insert(seq.end(), out.begin(), out.end());
    for (std::size_t t = 0; t + 1 < seq.size(); ++t) {
        tok.storage[0] = seq[t];
        REQUIRE(MQ::step(q, sw1, sq1, tok, lg).ok());
        if (t >= 2) CHECK(seq[t + 1] == ct::token(std::max_element(lg.data(), lg.data() + V) - lg.data()));
    }
    std::printf("  %-28s llama_gqa: forward %.3g of max vs without, step %.3g vs its forward; %.3g vs PyTorch fp32\n",
                what, fwd, worst_step, vs_torch);
}

// (the models of this file are three Llama types: int4 weights with and without int8 activations,
// and with bf16 caches besides; int8 weights with int8 activations run in the decoder layer below
// and in tests/test_alloc_models.cpp's GPT: every model type costs this suite's build in each of
// CI's builds that run it)
using Int4A8 = LlamaS<ct::weights<ct::int4_group<16>, ct::int8_activations>>;
using Int4 = LlamaS<ct::weights<ct::int4_group<16>>>;

TEST_CASE("quant int8: Llama (GQA, SwiGLU, RoPE) with int8 activations: forward, step, generate") {
    option_case<Int4A8, Int4>("int4 + int8 activations", int8_act_tol, 1e-3);
}

TEST_CASE("quant int8: the decoder layer (cross-attention, packed in_proj) with int8 activations") {
    using LQ = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::weights<ct::int8_per_channel, ct::int8_activations>>;
    using LF = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::weights<ct::int8_per_channel>>;
    static typename LQ::Params q;
    static typename LF::Params f;
    test::File file("post_relu_causal_mempad");
    file.load(q, "params.");
    file.load(f, "params.");
    static ct::Tensor<float, 2, 5, 16> tgt, out_q, out_f;
    static ct::Tensor<float, 2, 7, 16> mem;
    file.read("input.tgt", tgt);
    file.read("input.memory", mem);
    static typename LQ::template Workspace<2, 5, 7> wq;
    static typename LF::template Workspace<2, 5, 7> wf;
    REQUIRE(LQ::forward(q, wq, tgt, mem, out_q, ct::causal{}, ct::key_lengths{7, 4}).ok());
    REQUIRE(LF::forward(f, wf, tgt, mem, out_f, ct::causal{}, ct::key_lengths{7, 4}).ok());
    const double e = check_rel("int8 activations vs float activations", out_q.data(), out_f.data(), out_q.size, int8_act_tol);
    CHECK(e > 0);
    std::printf("  quant int8 + int8 activations, decoder layer D16: %.3g of max vs float activations\n", e);
}

TEST_CASE("quant int8: int8 activations are not in the file: one quantized file serves both types") {
    using A8 = Int4A8;
    using F = Int4;
    static A8::Params a;
    static F::Params f;
    test::File file("llama_gqa");
    file.load(a, "params.");
    static std::byte buf[1 << 20];
    const ct::save_result saved = ct::save_state_dict(a, buf);
    REQUIRE(saved.st.ok());
    REQUIRE(ct::load_state_dict(f, std::span<const std::byte>(buf, saved.bytes)).ok());
    static_assert(sizeof(A8::Params) == sizeof(F::Params));
    CHECK(std::memcmp(&a, &f, sizeof f) == 0);  // the same words and scales
}

TEST_CASE("bf16 cache: Llama (GQA, RoPE) steps and generates over bf16 caches") {
    using KV16 = LlamaS<ct::weights<ct::int4_group<16>, ct::int8_activations>, ct::kv_cache<ct::bf16>>;
    option_case<KV16, Int4A8>("bf16 cache + int4 + int8 act", 0, bf16_cache_tol);
    static_assert(sizeof(KV16::KVCache<1, 32>) * 2 <= sizeof(Int4A8::KVCache<1, 32>) + 256);
}

// The decoder layer's self and cross caches in bf16, fed token by token and in chunks of 3 (the
// multi-row step), against the layer's forward on the PyTorch fixture.
template <std::size_t Chunk> void layer_bf16_case() {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::kv_cache<ct::bf16>>;
    constexpr std::size_t B = 2, T = 5, S = 7, D = 16;
    static L::Params p;
    test::File file("post_relu_causal_mempad");
    file.load(p, "params.");
    static ct::Tensor<float, B, T, D> tgt, out, fwd, torch;
    static ct::Tensor<float, B, S, D> mem;
    file.read("input.tgt", tgt);
    file.read("input.memory", mem);
    file.read("output", torch);
    static L::Workspace<B, T, S> w;
    REQUIRE(L::forward(p, w, tgt, mem, fwd, ct::causal{}, ct::key_lengths{7, 4}).ok());
    static L::KVCache<B, T> cache;
    static L::CrossKVCache<B, S> cross;
    static L::StepWorkspace<B, Chunk> sw;
    static ct::Tensor<float, B, Chunk, D> x, y;
    cache.reset();
    L::fill_cross_cache(p, sw, cross, mem);
    for (std::size_t t0 = 0; t0 < T; t0 += Chunk) {
        const std::size_t n = std::min(Chunk, T - t0);
        std::array<std::size_t, B> count{n, n};
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t d = 0; d < D; ++d) x(b, i, d) = tgt(b, t0 + i, d);
        REQUIRE(L::step_ragged(p, sw, cache, cross, x, y, count, ct::causal{}, ct::key_lengths{7, 4}).ok());
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t d = 0; d < D; ++d) out(b, t0 + i, d) = y(b, i, d);
    }
    const double e = check_rel("bf16-cache steps vs forward", out.data(), fwd.data(), out.size, bf16_cache_tol);
    const double vs_torch = check_rel("bf16-cache steps vs PyTorch", out.data(), torch.data(), out.size, bf16_cache_tol);
    CHECK(e > 0);
    std::printf("  bf16 KV cache, decoder layer D16, chunks of %zu: %.3g of max vs forward, %.3g vs PyTorch\n", Chunk, e,
                vs_torch);
}
TEST_CASE("bf16 cache: the decoder layer (self and cross caches), token by token and in chunks of 3") {
    layer_bf16_case<1>();
    layer_bf16_case<3>();
}

}  // namespace
