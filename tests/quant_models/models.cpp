// Quantized weights in the models (tests/test_quant.cpp has the storage and kernels, layers.cpp
// the layer and files, decoding.cpp int8 activations and bf16 caches): a GPT and a Llama with quantized weights against the float models whose weights are the
// dequantized values — forward logits, step token by token, greedy generation — and their distance
// to PyTorch's unquantized logits (printed; docs/quantization.md).
#include "quant_fixture.hpp"

namespace {
using namespace quant_test;

template <class Fmt>
using GPTQ = ct::GPT<13, 8, 2, ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>,
                                                 ct::activation<ct::gelu>, ct::weights<Fmt>>>;
using GPTD = GPTQ<ct::dense>;

// forward logits, step token by token (the GEMV path) and greedy generation, quantized vs float
template <class MQ, class MD, std::size_t B, std::size_t T>
void model_case(const char* fixture, const char* what) {
    constexpr std::size_t V = MQ::vocab;
    static typename MQ::Params q;
    static typename MD::Params d;
    test::File file(fixture);
    file.load(q, "params.");
    dequantized_copy(q, d);
    static ct::Tensor<double, B, T> ids;
    static ct::Tensor<ct::token, B, T> tokens;
    file.read("input.tokens", ids);
    for (std::size_t i = 0; i < ids.size; ++i) tokens.storage[i] = static_cast<ct::token>(ids.storage[i]);
    static ct::Tensor<float, B, T, V> lq, ld, torch;
    file.read("output", torch);
    static typename MQ::template Workspace<B, T> wq;
    static typename MD::template Workspace<B, T> wd;
    REQUIRE(MQ::forward(q, wq, tokens, lq).ok());
    REQUIRE(MD::forward(d, wd, tokens, ld).ok());
    const double fwd = check_rel("forward logits", lq.data(), ld.data(), lq.size, quant_tol);
    const double vs_torch = test::compare(lq.data(), torch.data(), lq.size).max_abs / max_abs(torch.data(), torch.size);

    // one token at a time through the caches: each row of the forward's logits
    const double worst_step = step_vs_forward<MQ>(q, tokens, lq, "step", quant_tol);
    // greedy generation: the same tokens as the dequantized float model's
    static typename MQ::template KVCache<1, MQ::context> gq;
    static typename MD::template KVCache<1, MD::context> gd;
    static typename MQ::template GenerateWorkspace<4> gwq;
    static typename MD::template GenerateWorkspace<4> gwd;
    std::vector<ct::token> a, b;
    gq.reset(), gd.reset();
    REQUIRE(MQ::generate(q, gwq, gq, tokens.data(), 3, MQ::context - 3, ct::sampling{.temperature = 0}, [&](ct::token t) {
                a.push_back(t);
                return true;
            }).ok());
    REQUIRE(MD::generate(d, gwd, gd, tokens.data(), 3, MQ::context - 3, ct::sampling{.temperature = 0}, [&](ct::token t) {
                b.push_back(t);
                return true;
            }).ok());
    CHECK(a == b);
    std::printf("  quant %-5s %-22s forward %.3g, step %.3g of max vs dequantized float; %.3g vs PyTorch fp32\n", what,
                fixture, fwd, worst_step, vs_torch);
}

// (one format: the GPT's modules are the layer's above; each format's kernels run in the Llama below)
TEST_CASE("quant: GPT (learned positions, untied quantized LM head) forward, step, generate") {
    model_case<GPTQ<ct::int8_per_channel>, GPTD, 2, 6>("gpt_small", "int8");
}

template <class... O>
using LlamaS = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::ffn_dim<48>, ct::norm_eps<1, 100000>, ct::kv_heads<2>, O...>;

TEST_CASE_TEMPLATE("quant: Llama (GQA, SwiGLU, RoPE) forward, step, generate", Fmt, ct::bf16, ct::int8_per_channel,
                   ct::int4_group<16>) {
    model_case<LlamaS<ct::weights<Fmt>>, LlamaS<>, 2, 7>("llama_gqa", fmt_name<Fmt>());
}

}  // namespace
