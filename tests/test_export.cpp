// tools/export.py's files: each supported kind exported from PyTorch (tests/data/gen.py), loaded
// into the C++ alias the exporter printed (data/export_aliases.hpp) and run against PyTorch's
// output; then the configuration check: a type that differs in any one field the file carries
// (heads, activation, norm_first, eps, kv_heads, norm type, layer count, vocab, context, tying) is
// errc::config_mismatch naming the field and both values, with nothing written.
#include <cstring>
#include <string>

#include "data/export_aliases.hpp"
#include "model_fixture.hpp"

namespace {
using test::File;

template <class P> ct::status load(File& f, P& p, const ct::safetensors::load_options& opt = {}) {
    return ct::load_state_dict(p, f.f, {}, opt);
}

TEST_CASE("export: a TransformerDecoderLayer, its alias, PyTorch's output") {
    static ExportLayer::Params p;
    static ExportLayer::Workspace<2, 5, 6> ws;
    static ct::Tensor<float, 2, 5, 32> tgt, out, want;
    static ct::Tensor<float, 2, 6, 32> mem;
    File f("export_layer"), io("export_layer.io");
    REQUIRE(load(f, p).ok());
    io.read("tgt", tgt);
    io.read("memory", mem);
    io.read("output", want);
    REQUIRE(ExportLayer::forward(p, ws, tgt, mem, out, ct::causal{}).ok());
    CHECK_CLOSE("export_layer", out.data(), want.data(), want.size, test::golden_tol<float>);
}

TEST_CASE("export: a TransformerDecoder with final norm") {
    static ExportStack::Params p;
    static ExportStack::Workspace<1, 4, 3> ws;
    static ct::Tensor<float, 1, 4, 16> tgt, out, want;
    static ct::Tensor<float, 1, 3, 16> mem;
    File f("export_stack"), io("export_stack.io");
    REQUIRE(load(f, p).ok());
    io.read("tgt", tgt);
    io.read("memory", mem);
    io.read("output", want);
    REQUIRE(ExportStack::forward(p, ws, tgt, mem, out, ct::causal{}).ok());
    CHECK_CLOSE("export_stack", out.data(), want.data(), want.size, test::golden_tol<float>);
}

template <class M, std::size_t B, std::size_t T> void model_against_pytorch(const char* name) {
    static typename M::Params p;
    static typename M::template Workspace<B, T> ws;
    static ct::Tensor<double, B, T> ids;
    static ct::Tensor<ct::token, B, T> tokens;
    static ct::Tensor<float, B, T, M::vocab> logits, want;
    File f(name), io(std::string(name) + ".io");
    REQUIRE(load(f, p).ok());
    io.read("tokens", ids);
    io.read("output", want);
    for (std::size_t i = 0; i < ids.size; ++i) tokens.storage[i] = static_cast<ct::token>(ids.storage[i]);
    REQUIRE(M::forward(p, ws, tokens, logits).ok());
    CHECK_CLOSE(name, logits.data(), want.data(), want.size, test::golden_tol<float>);
}
TEST_CASE("export: the GPT of docs/models.md") { model_against_pytorch<ExportGPT, 2, 6>("export_gpt"); }
TEST_CASE("export: a Llama (GQA, tied)") { model_against_pytorch<ExportLlama, 2, 7>("export_llama"); }
TEST_CASE("export: a Hugging Face directory (config.json, BF16 MLP weights, a rotary buffer)") {
    model_against_pytorch<ExportLlamaHF, 2, 7>("export_llama_hf");
}

// A type differing from the file in one field: config_mismatch, the message, nothing written.
template <class P> void mismatch(const char* file, const char* message) {
    static P p;
    std::memset(static_cast<void*>(&p), 0, sizeof p);
    File f(file);
    const ct::status st = load(f, p);
    INFO(file << ": " << ct::to_string(st.code) << " " << std::string(st.tensor_name()));
    CHECK(st.code == ct::errc::config_mismatch);
    CHECK(st.tensor_name() == message);
    bool untouched = true;
    ct::for_each_tensor(p, [&](std::string_view, const auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) untouched = untouched && t.get(i) == 0;
    });
    CHECK(untouched);
}
template <class... O> using Layer32 = ct::DecoderLayer<ct::d_model<32>, ct::ffn_dim<64>, O...>;
template <class... O>
using Llama37 = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::ffn_dim<48>, ct::norm_eps<1, 100000>, O...>;
using GBlock = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::activation<ct::gelu>,
                                    ct::norm_first<true>>;

// --weights: the exporter's quantized file reads back exactly what ctformer makes of the float file
template <class P> bool same_bytes(const P& a, const P& b) { return std::memcmp(&a, &b, sizeof a) == 0; }
template <class Q> void quantized_export(const char* quantized, const char* dense) {
    static typename Q::Params from_file, from_float;
    File fq(quantized), fd(dense);
    const ct::status st = load(fq, from_file, {.require_config = true});
    REQUIRE_MESSAGE(st.ok(), ct::to_string(st.code) << " " << st.tensor_name());
    REQUIRE(load(fd, from_float).ok());  // (a dense file loads into any format: quantized at load)
    CHECK(same_bytes(from_file, from_float));
}
TEST_CASE("export --weights: int4, int6 and int8 (f16 scales) Llamas, int8 layer, bf16 GPT = the float files quantized at load, bit for bit") {
    quantized_export<ExportLlamaInt4>("export_llama_int4", "export_llama");
    quantized_export<ExportLlamaInt6>("export_llama_int6", "export_llama");
    quantized_export<ExportLlamaInt8Half>("export_llama_int8_f16", "export_llama");  // (scales as halves: F16)
    quantized_export<ExportLayerInt8>("export_layer_int8", "export_layer");
    quantized_export<ExportGPTBf16>("export_gpt_bf16", "export_gpt");
    // the format is part of the configuration: an int8 file is not a float layer's
    static ExportLayer::Params dense;
    File f("export_layer_int8");
    ct::status st = load(f, dense);
    CHECK(st.code == ct::errc::config_mismatch);
    CHECK(st.tensor_name() == "weight_format: file int8_per_channel, type dense");
}

TEST_CASE("export: each configuration field the file carries is checked at load") {
    using G = ct::activation<ct::gelu>;
    using NF = ct::norm_first<true>;
    using E = ct::layer_norm_eps<1, 1000000>;
    // the four mistakes that leave every shape unchanged
    mismatch<Layer32<ct::heads<8>, G, NF, E>::Params>("export_layer", "heads: file 4, type 8");
    mismatch<Layer32<ct::heads<4>, ct::activation<ct::relu>, NF, E>::Params>("export_layer",
                                                                            "activation: file gelu, type relu");
    mismatch<Layer32<ct::heads<4>, G, E>::Params>("export_layer", "norm_first: file true, type false");
    mismatch<Layer32<ct::heads<4>, G, NF, ct::layer_norm_eps<1, 1000>>::Params>("export_layer",
                                                                               "eps: file 1e-06, type 1.00e-3");
    // and the others
    mismatch<Llama37<ct::kv_heads<1>, ct::tied_embeddings<true>>::Params>("export_llama", "kv_heads: file 2, type 1");
    mismatch<Llama37<ct::kv_heads<2>, ct::norm<ct::layer_norm>, ct::tied_embeddings<true>>::Params>(
        "export_llama", "norm: file rms_norm, type layer_norm");
    mismatch<Llama37<ct::kv_heads<2>>::Params>("export_llama", "tied: file true, type false");
    mismatch<ct::DecoderStack<ct::DecoderLayer<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<32>>, 3>::Params>(
        "export_stack", "layers: file 2, type 3");
    mismatch<ct::GPT<17, 8, 2, GBlock>::Params>("export_gpt", "vocab: file 13, type 17");
    mismatch<ct::GPT<13, 16, 2, GBlock>::Params>("export_gpt", "context: file 8, type 16");
    mismatch<ct::GPT<13, 8, 2, GBlock, ct::tied_embeddings<true>>::Params>("export_gpt", "tied: file false, type true");
    // another kind altogether
    mismatch<ExportLayer::Params>("export_gpt", "kind: file gpt, type decoder_layer");
}

TEST_CASE("export: a file without a configuration loads as before, unless one is required") {
    File f("post_relu_nomask");  // a fixture with PyTorch's names but no ctformer.* metadata
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    static L::Params lp;
    REQUIRE(ct::load_state_dict(lp, f.f, "params.").ok());
    const ct::status st = ct::load_state_dict(lp, f.f, "params.", {.require_config = true});
    CHECK(st.code == ct::errc::config_mismatch);
    CHECK(st.tensor_name() == "ctformer.kind: the file carries no configuration");
    // a configuration written for the whole file is not checked when one part is loaded
    static ExportStack::layer_type::Params layer0;
    File stack("export_stack");
    CHECK(ct::load_state_dict(layer0, stack.f, "layers.0.").ok());
}

}  // namespace
