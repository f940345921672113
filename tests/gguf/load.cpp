// A Llama from a GGUF file (io/gguf_load.hpp): the PyTorch fixtures' models (tests/data/gen.py,
// Hugging Face's layout) written as llama.cpp's converter writes them — q and k rows permuted for
// its RoPE (convert_hf_to_gguf.py's LlamaModel.permute), llama.cpp's names and keys — load back to
// the same numbers and compute PyTorch's logits; F16/BF16 files round as stored; Q4_0 goes into
// int4 weights exactly; every configuration key, name, shape and format error is reported with
// nothing written. (Block decoding against ggml itself: blocks.cpp; greedy tokens against
// llama.cpp on the same files: scripts/gguf_agreement.)
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <ctformer/io/gguf_load.hpp>

#include "gguf/as_stored.hpp"
#include "gguf/writer.hpp"
#include "model_fixture.hpp"

namespace {
namespace gg = ctformer::gguf;
using test::gguf_writer;
using namespace gguf_test;

template <class... O>
using Small = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::ffn_dim<48>, ct::norm_eps<1, 100000>, O...>;
using GQA = Small<ct::kv_heads<2>>;
using MQA = Small<ct::kv_heads<1>, ct::dtype<double>, ct::rope<ct::interleaved, 500000>, ct::tied_embeddings<true>>;

template <class Model> struct loaded {
    static inline typename Model::Params want, got;
    static inline gg::file<32, 64> g;
    std::vector<std::byte> bytes;
};

// Loads the fixture's params (Hugging Face's names) and the same model from a GGUF written from them.
template <class Model> void from_fixture(test::File& fx, const gguf_writer& w, loaded<Model>& l) {
    fx.load(l.want, "params.");
    l.bytes = w.bytes();
    REQUIRE(l.g.parse(l.bytes).ok());
    std::memset(static_cast<void*>(&l.got), 0, sizeof l.got);
    const ct::status st = ct::load_gguf(l.got, l.g);
    REQUIRE_MESSAGE(st.ok(), ct::to_string(st.code) << " " << st.tensor_name());
}

// Values (get(i), every tensor) that differ between two params of one type, as the bits of their floats.
template <class P> std::vector<double> values_of(const P& p) {
    std::vector<double> v;
    ct::for_each_tensor(p, [&](std::string_view, const auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) v.push_back(static_cast<double>(t.get(i)));
    });
    return v;
}
template <class P> std::size_t differing(const P& a, const P& b) {
    const std::vector<double> x = values_of(a), y = values_of(b);
    std::size_t n = 0;
    for (std::size_t i = 0; i < x.size(); ++i) n += std::memcmp(&x[i], &y[i], sizeof x[i]) != 0;
    return n;
}
}  // namespace

TEST_CASE("gguf load: llama.cpp's layout (permuted q/k, its names) gives back the Hugging Face model, and PyTorch's logits") {
    test::File fx("llama_gqa");
    static loaded<GQA> l;
    static GQA::Params p0;
    fx.load(p0, "params.");
    from_fixture(fx, test::llama_gguf<GQA>(p0, test::gguf_store::f32), l);
    CHECK(differing(l.got, l.want) == 0);

    static GQA::Workspace<2, 7> ws;
    static ct::Tensor<ct::token, 2, 7> tokens;
    static ct::Tensor<double, 2, 7> ids;
    static ct::Tensor<float, 2, 7, 37> logits, want;
    fx.read("input.tokens", ids);
    for (std::size_t i = 0; i < ids.size; ++i) tokens.storage[i] = static_cast<ct::token>(ids.storage[i]);
    fx.read("output", want);
    REQUIRE(GQA::forward(l.got, ws, tokens, logits).ok());
    CHECK_CLOSE("logits from the GGUF", logits.data(), want.data(), want.size, test::golden_tol<float>);

    // a file without output.weight ties the head in llama.cpp: an untied type reads token_embd twice
    static loaded<GQA> head_tied;
    from_fixture(fx, test::llama_gguf<GQA>(p0, test::gguf_store::f32, "output.weight"), head_tied);
    std::size_t head_off = 0;
    for (std::size_t i = 0; i < 37 * 32; ++i)
        head_off += head_tied.got.lm_head.weight.get(i) != head_tied.got.tok_embeddings.weight.get(i);
    CHECK(head_off == 0);

    // a file whose q/k rows were not permuted loads as another model: the test sees the layout
    static loaded<GQA> unpermuted;
    from_fixture(fx, test::llama_gguf<GQA>(p0, test::gguf_store::f32, {}, false), unpermuted);
    CHECK(differing(unpermuted.got, unpermuted.want) > 0);
    REQUIRE(GQA::forward(unpermuted.got, ws, tokens, logits).ok());
    CHECK(test::compare(logits.data(), want.data(), want.size).max_abs > 1e-3);
}

TEST_CASE("gguf load: interleaved RoPE is llama.cpp's own layout (no permutation), a file without output.weight is tied") {
    test::File fx("llama_mqa_tied_interleaved_f64");
    static loaded<MQA> l;
    static MQA::Params p0;
    fx.load(p0, "params.");
    from_fixture(fx, test::llama_gguf<MQA>(p0, test::gguf_store::f32), l);
    // the file stores floats: the double model's values round through F32
    const std::vector<double> got = values_of(l.got), want = values_of(l.want);
    std::size_t off = 0;
    for (std::size_t i = 0; i < got.size(); ++i) off += got[i] != static_cast<double>(static_cast<float>(want[i]));
    CHECK(off == 0);
    CHECK(got.size() == ct::parameter_count<MQA::Params>());
}

TEST_CASE("gguf load: F16 and BF16 files load their rounded values") {
    test::File fx("llama_gqa");
    static GQA::Params p0;
    fx.load(p0, "params.");
    for (test::gguf_store s : {test::gguf_store::f16, test::gguf_store::bf16}) {
        static loaded<GQA> l;
        from_fixture(fx, test::llama_gguf<GQA>(p0, s), l);
        std::size_t off = 0, n = 0;
        ct::for_each_tensor(l.want, [&](std::string_view name, const auto& w) {
            ct::for_each_tensor(l.got, [&](std::string_view name2, const auto& g) {
                using X = std::remove_cvref_t<decltype(w)>;
                if constexpr (std::is_same_v<X, std::remove_cvref_t<decltype(g)>>) {
                    if (name != name2) return;
                    for (std::size_t i = 0; i < X::size; ++i, ++n) {
                        const float v = w.get(i);
                        const float r = X::rank == 1 ? v  // (1-D tensors stay F32)
                                      : s == test::gguf_store::f16 ? ct::simd::half_value(test::to_half(v))
                                                        : ct::quant::bf16_value(static_cast<std::uint16_t>(ct::quant::bf16_bits(v)));
                        off += g.get(i) != r;
                    }
                }
            });
        });
        INFO((s == test::gguf_store::f16 ? "F16" : "BF16") << ": " << off << " of " << n << " values differ from the rounded originals");
        CHECK(off == 0);
        CHECK(n == ct::parameter_count<GQA::Params>());
    }
}

TEST_CASE("gguf load: Q8_0 into int8_group<32> weights as stored; -128 is value_out_of_range") {
    static Wide<>::Params src;
    fill_random(src, 11);
    as_stored_equals_dense<Wide<ct::weights<ct::int8_group<32>>>>(test::gguf_store::q8_0, gg::ggml_type::q8_0, src);
    as_stored_equals_dense<Wide<ct::weights<ct::int8_group<32>, ct::int8_activations>>>(test::gguf_store::q8_0, gg::ggml_type::q8_0, src);
    // one q byte of attn_q set to -128: refused into int8 weights (their kernels' range), read into dense ones
    test::gguf_writer w = test::llama_gguf<Wide<>>(src, test::gguf_store::q8_0);
    std::vector<std::byte> bytes = w.bytes();
    static gg::file<32, 64> g;
    REQUIRE(g.parse(bytes).ok());
    const auto at = static_cast<std::size_t>(g.data(*g.find_tensor("blk.0.attn_q.weight")) - bytes.data()) + 2 + 5;
    bytes[at] = std::byte{0x80};
    REQUIRE(g.parse(bytes).ok());
    static Wide<ct::weights<ct::int8_group<32>>>::Params q8;
    const ct::status st = ct::load_gguf(q8, g);
    CHECK(st.code == ct::errc::value_out_of_range);
    CHECK(st.tensor_name() == "blk.0.attn_q.weight");
    static Wide<>::Params dense;
    CHECK(ct::load_gguf(dense, g).ok());
}

TEST_CASE("gguf load: Q8_0, Q4_0 and Q4_1 into ct::f16 scales as stored (the file's halves); a format whose scale is no file half is refused") {
    static Wide<>::Params src;
    fill_random(src, 19);
    using S = test::gguf_store;
    using T = gg::ggml_type;
    as_stored_equals_dense<Wide<ct::weights<ct::int8_group<32, ct::f16>>>>(S::q8_0, T::q8_0, src);
    as_stored_equals_dense<Wide<ct::weights<ct::int8_group<32, ct::f16>, ct::int8_activations>>>(S::q8_0, T::q8_0, src);
    as_stored_equals_dense<Wide<ct::weights<ct::int4_group<32, ct::f16>>>>(S::q4_0, T::q4_0, src);
    as_stored_equals_dense<Wide<ct::weights<ct::int4_group<32, ct::f16>, ct::int8_activations>>>(S::q4_0, T::q4_0, src);
    as_stored_equals_dense<Wide<ct::weights<ct::int6_group<32, ct::f16>>>>(S::q5_0, T::q5_0, src);
    as_stored_equals_dense<Wide<ct::weights<ct::int4_group_min<32, ct::f16>>>>(S::q4_1, T::q4_1, src);
    as_stored_equals_dense<Wide<ct::weights<ct::int8_group_min<32, ct::f16>>>>(S::q4_1, T::q4_1, src);
    // Q4_0 as 4-bit levels needs a minimum 8d (not the file's half): refused, nothing written
    static Wide<ct::weights<ct::int4_group_min<32, ct::f16>>>::Params levels;
    static gg::file<32, 64> g;
    const std::vector<std::byte> bytes = test::llama_gguf<Wide<>>(src, S::q4_0).bytes();
    REQUIRE(g.parse(bytes).ok());
    refused_untouched(levels, g, "blk.0.attn_q.weight: Q4_0 into a quantized weight format");
    static Wide<ct::weights<ct::int4_group<32>>>::Params wide_scales;  // (the same file, float scales: the same values)
    static Wide<ct::weights<ct::int4_group<32, ct::f16>>>::Params halves;
    REQUIRE(ct::load_gguf(wide_scales, g).ok());
    REQUIRE(ct::load_gguf(halves, g).ok());
    const auto& a = wide_scales.stack.layers[1].self_attn.q_proj.weight;
    const auto& b = halves.stack.layers[1].self_attn.q_proj.weight;
    CHECK(sizeof b.scales * 2 == sizeof a.scales);  // (2 bytes a group instead of 4)
    std::size_t off = 0;
    for (std::size_t i = 0; i < a.size; ++i) off += a.get(i) != b.get(i);
    CHECK(off == 0);
    CHECK(std::memcmp(a.storage, b.storage, sizeof a.storage) == 0);
}

TEST_CASE("gguf load: every block format into int8_group_min<16> as stored; saved and read back with its minimums") {
    static Wide<>::Params src;
    fill_random(src, 13);
    using GM = Wide<ct::weights<ct::int8_group_min<16>>>;
    as_stored_equals_dense<GM>(test::gguf_store::q4_0, gg::ggml_type::q4_0, src);
    as_stored_equals_dense<GM>(test::gguf_store::q8_0, gg::ggml_type::q8_0, src);
    as_stored_equals_dense<Wide<ct::weights<ct::int8_group_min<16>, ct::int8_activations>>>(test::gguf_store::q8_0,
                                                                                           gg::ggml_type::q8_0, src);
    // (the k-quants' minimums: tests/llama_cpp loads llama.cpp's Q4_K_M and Q5_K_M files this way)
    static GM::Params q, back;
    static gg::file<32, 64> g;
    const std::vector<std::byte> bytes = test::llama_gguf<Wide<>>(src, test::gguf_store::q4_0).bytes();
    REQUIRE(g.parse(bytes).ok());
    REQUIRE(ct::load_gguf(q, g).ok());
    q.stack.layers[0].ffn.up_proj.weight.mins[3] = 0.25f;  // a minimum to carry
    std::vector<std::byte> buf(ct::save_state_dict(q, {}).bytes);
    REQUIRE(ct::save_state_dict(q, buf).st.ok());
    static ct::safetensors::file<128> f;
    REQUIRE(f.parse(buf).ok());
    CHECK(f.find("model.layers.0.mlp.up_proj.weight_min") != nullptr);
    REQUIRE(ct::load_state_dict(back, f).ok());
    CHECK(differing(back, q) == 0);
    // stored files of the neighbouring format: its minimums are unexpected there, and missing here
    static Wide<ct::weights<ct::int8_group<16>>>::Params plain;
    ct::status st = ct::load_state_dict(plain, f);
    CHECK(st.code == ct::errc::unexpected_tensor);
    CHECK(std::string(st.tensor_name()).ends_with("_min"));
    REQUIRE(ct::load_gguf(plain, g).ok());  // (Q4_0: scale d, integers n - 8 — int8_group<16> holds them too)
    std::vector<std::byte> pbuf(ct::save_state_dict(plain, {}).bytes);
    REQUIRE(ct::save_state_dict(plain, pbuf).st.ok());
    std::memset(static_cast<void*>(&back), 0x5a, sizeof back);
    st = ct::load_state_dict(back, pbuf);
    CHECK(st.code == ct::errc::missing_tensor);
    CHECK(std::string(st.tensor_name()).ends_with(".weight_min"));
}

namespace {
// A file that mixes formats by tensor as llama.cpp's Q4_K_M does (its small-model fallbacks: Q5_0 for
// most matrices, Q8_0 for attn_v and the head in some layers, a format with minimums for ffn_down).
test::gguf_store mixed_store(std::string_view name) {
    using S = test::gguf_store;
    if (name == "output.weight" || name == "blk.1.attn_v.weight") return S::q8_0;
    if (name == "blk.0.ffn_down.weight") return S::q4_1;
    if (name == "blk.1.ffn_down.weight") return S::q4_0;
    return S::q5_0;
}
using Mixed = Wide<ct::weights<ct::int8_group<32>, ct::down_weights<ct::int4_group_min<32>>>>;
using MixedA8 = Wide<ct::weights<ct::int8_group<32>, ct::int8_activations, ct::down_weights<ct::int4_group_min<32>>>>;
using MixedHalf = Wide<ct::weights<ct::int6_group<32, ct::f16>, ct::v_weights<ct::int8_group<32, ct::f16>>,
                                   ct::down_weights<ct::int4_group_min<32>>, ct::head_weights<ct::int8_group<32, ct::f16>>>>;
using MixedWide = Wide<ct::weights<ct::int8_group<16>, ct::down_weights<ct::int8_group_min<32>>, ct::head_weights<ct::int8_group_min<16>>>>;
}  // namespace

TEST_CASE("gguf load: per-tensor formats hold a file that mixes block formats by tensor, as stored, and compute the dense model") {
    static Wide<>::Params src, dense;
    fill_random(src, 17);
    const std::vector<std::byte> bytes = test::llama_gguf_by<Wide<>>(src, mixed_store).bytes();
    static gg::file<32, 64> g;
    REQUIRE(g.parse(bytes).ok());
    CHECK(g.find_tensor("blk.0.attn_q.weight")->type == gg::ggml_type::q5_0);
    CHECK(g.find_tensor("blk.0.ffn_down.weight")->type == gg::ggml_type::q4_1);
    // the format each matrix needs, as tools/export.py and gguf_info print it
    const char* f[8];
    gg::stored_formats(g, f);
    const std::string want[8] = {"ct::int6_group<32, ct::f16>", "ct::int6_group<32, ct::f16>", "ct::int8_group<32, ct::f16>",
                                 "ct::int6_group<32, ct::f16>", "ct::int6_group<32, ct::f16>", "ct::int6_group<32, ct::f16>",
                                 "ct::int4_group_min<32>", "ct::int8_group<32, ct::f16>"};
    for (int m = 0; m < 8; ++m) CHECK_MESSAGE(std::string(f[m]) == want[m], gg::matrix_names[m]);
    // (k-quants alone: two-level scales, tests/gguf/kscale.cpp)
    CHECK(std::string(gg::stored_format(1u << 14 | 1u << 12 | 1u << 8)) == "ct::int8_group_min<16>");
    CHECK(std::string(gg::stored_format(1u << 14 | 1u << 8)) == "ct::int8_group<16>");
    CHECK(std::string(gg::stored_format(1u << 30)) == "ct::bf16");
    CHECK(std::string(gg::stored_format(1u << 30 | 1u << 8)) == "ct::dense");
    CHECK(gg::stored_format(1u << 10) == nullptr);  // Q2_K: not read
    CHECK(std::string(gg::stored_format(1u << 2)) == "ct::int4_group<32, ct::f16>");            // Q4_0 alone
    CHECK(std::string(gg::stored_format(1u << 3)) == "ct::int4_group_min<32, ct::f16>");        // Q4_1 alone
    CHECK(std::string(gg::stored_format(1u << 2 | 1u << 3)) == "ct::int4_group_min<32>");       // (Q4_0's 8d: not a file half)
    CHECK(std::string(gg::stored_format(1u << 3 | 1u << 7)) == "ct::int6_group_min<32, ct::f16>");  // Q4_1 + Q5_1
    CHECK(std::string(gg::stored_format(1u << 8 | 1u << 3)) == "ct::int8_group_min<32, ct::f16>");  // Q8_0 + Q4_1
    as_stored_equals_dense<Mixed>(bytes, src);
    as_stored_equals_dense<MixedHalf>(bytes, src);  // (the printed alias: the file's halves as stored)  // (Q4_1's d, n, -m and Q4_0's d, n, 8d in 4-bit levels)
    as_stored_equals_dense<MixedA8>(bytes, src);
    as_stored_equals_dense<MixedWide>(bytes, src);  // (wider formats hold them too)
    static Mixed::Params m;
    REQUIRE(ct::load_gguf(m, g).ok());
    REQUIRE(ct::load_gguf(dense, g).ok());
    // each matrix in its own format, the same numbers: weight-only logits are the dense model's to float rounding
    same_logits<Wide<>, Mixed>(dense, m, 7, 3);
    // a matrix whose format cannot hold its tensors (Q4_1's minimum in int8_group<32>): wrong_dtype naming it, nothing written
    static Wide<ct::weights<ct::int8_group<32>>>::Params plain;
    refused_untouched(plain, g, "blk.0.ffn_down.weight: Q4_1 into a quantized weight format");
}

namespace {
// The k-quants need rows of 256 inputs.
using KWide = ct::Llama<37, 32, 2, ct::d_model<256>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<256>>;
template <class... O> using KQ = ct::Llama<37, 32, 2, ct::d_model<256>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<256>, O...>;
// Q4_K_M's mix on a model with whole 256-blocks: Q4_K in one layer, Q6_K in the other and the head.
test::gguf_store by_layer(std::string_view name) {
    return name.starts_with("blk.0.") ? test::gguf_store::q4_k : test::gguf_store::q6_k;
}
using KMix = KQ<ct::weights<ct::int6_group_min<16>, ct::head_weights<ct::int6_group<16>>>>;
using KMixA8 = KQ<ct::weights<ct::int6_group_min<16>, ct::int8_activations, ct::head_weights<ct::int6_group<16>>>>;
}  // namespace

TEST_CASE("gguf load: the k-quants in six-bit weights as stored (Q6_K, Q5_K, Q4_K; Q4_K_M's mix by layer), computing the dense model") {
    static KWide::Params src, dense;
    fill_random(src, 23);
    using S = test::gguf_store;
    as_stored_equals_dense<KQ<ct::weights<ct::int6_group<16>>>, KWide>(S::q6_k, gg::ggml_type::q6_k, src);
    as_stored_equals_dense<KQ<ct::weights<ct::int6_group<16>, ct::int8_activations>>, KWide>(S::q6_k, gg::ggml_type::q6_k, src);
    as_stored_equals_dense<KQ<ct::weights<ct::int6_group_min<16>>>, KWide>(S::q6_k, gg::ggml_type::q6_k, src);
    as_stored_equals_dense<KQ<ct::weights<ct::int6_group_min<32>>>, KWide>(S::q5_k, gg::ggml_type::q5_k, src);
    as_stored_equals_dense<KQ<ct::weights<ct::int6_group_min<32>>>, KWide>(S::q4_k, gg::ggml_type::q4_k, src);
    as_stored_equals_dense<KQ<ct::weights<ct::int6_group_min<32>, ct::int8_activations>>, KWide>(S::q5_k, gg::ggml_type::q5_k, src);
    // the mix: each matrix's format as tools/export.py prints it, the same numbers, the dense model's logits
    const std::vector<std::byte> bytes = test::llama_gguf_by<KWide>(src, by_layer).bytes();
    static gg::file<32, 64> g;
    REQUIRE(g.parse(bytes).ok());
    CHECK(g.find_tensor("blk.0.attn_v.weight")->type == gg::ggml_type::q4_k);
    CHECK(g.find_tensor("blk.1.ffn_down.weight")->type == gg::ggml_type::q6_k);
    const char* f[8];
    gg::stored_formats(g, f);
    for (int m = 0; m < 7; ++m) CHECK_MESSAGE(std::string(f[m]) == "ct::int6_group_min<16, ct::kscale>", gg::matrix_names[m]);
    CHECK(std::string(f[7]) == "ct::int6_group<16, ct::kscale>");  // (and with float scales, as here)
    as_stored_equals_dense<KMix, KWide>(bytes, src);
    as_stored_equals_dense<KMixA8, KWide>(bytes, src);
    static KMix::Params m, back;
    static KMixA8::Params m8;
    REQUIRE(ct::load_gguf(m, g).ok());
    REQUIRE(ct::load_gguf(m8, g).ok());
    REQUIRE(ct::load_gguf(dense, g).ok());
    static KWide::Workspace<1, 8> dws;
    static KMix::Workspace<1, 8> mws;
    static KMixA8::Workspace<1, 8> aws;
    static ct::Tensor<ct::token, 1, 8> tok;
    static ct::Tensor<float, 1, 8, 37> a, b, c;
    for (std::size_t i = 0; i < 8; ++i) tok.data()[i] = static_cast<ct::token>((i * 5 + 1) % 37);
    REQUIRE(KWide::forward(dense, dws, tok, a).ok());
    REQUIRE(KMix::forward(m, mws, tok, b).ok());
    REQUIRE(KMixA8::forward(m8, aws, tok, c).ok());
    double worst = 0, worst8 = 0, top = 0;
    for (std::size_t i = 0; i < a.size; ++i) {
        worst = std::max(worst, std::fabs(double(a.data()[i]) - double(b.data()[i])));
        worst8 = std::max(worst8, std::fabs(double(a.data()[i]) - double(c.data()[i])));
        top = std::max(top, std::fabs(double(a.data()[i])));
    }
    INFO("max abs " << worst << " (int8 activations " << worst8 << ") of logits up to " << top);
    CHECK(worst <= 1e-5 * std::max(1.0, top));
    CHECK(worst8 <= 0.02 * std::max(1.0, top));  // (the activations' rounding: docs/quantization.md)
    // saved as stored and read back: the same weights
    std::vector<std::byte> buf(ct::save_state_dict(m, {}).bytes);
    REQUIRE(ct::save_state_dict(m, buf).st.ok());
    REQUIRE(ct::load_state_dict(back, std::span<const std::byte>(buf)).ok());
    CHECK(differing(back, m) == 0);
    // a format that cannot hold them: wrong_dtype naming the tensor, nothing written
    static KQ<ct::weights<ct::int6_group<16>>>::Params plain;
    refused_untouched(plain, g, "blk.0.attn_q.weight: Q4_K into a quantized weight format");
    static KQ<ct::weights<ct::int6_group_min<32>>>::Params thirty_two;  // (Q6_K's runs are 16)
    CHECK(ct::load_gguf(thirty_two, g).code == ct::errc::wrong_dtype);
    static KQ<ct::weights<ct::int6_group_min<16, ct::f16>>>::Params halves;  // (d·sc is no file half)
    refused_untouched(halves, g, "blk.0.attn_q.weight: Q4_K into a quantized weight format");
}

TEST_CASE("gguf load: Q4_0 into int4_group<32> weights exactly as into dense ones (scale d, integers n - 8)") {
    static Wide<>::Params dense_src, dense;
    fill_random(dense_src, 7);
    as_stored_equals_dense<Wide<ct::weights<ct::int4_group<32>>>>(test::gguf_store::q4_0, gg::ggml_type::q4_0, dense_src);
    static gg::file<32, 64> g;
    const std::vector<std::byte> bytes = test::llama_gguf<Wide<>>(dense_src, test::gguf_store::q4_0).bytes();
    REQUIRE(g.parse(bytes).ok());
    REQUIRE(ct::load_gguf(dense, g).ok());
    // and the dense values are the Q4_0 rounding of the originals: within half a step of each block's scale
    double worst = 0;
    ct::for_each_tensor(dense, [&](std::string_view name, const auto& d) {
        ct::for_each_tensor(dense_src, [&](std::string_view name2, const auto& o) {
            if (name != name2 || !name.ends_with("gate_proj.weight")) return;
            for (std::size_t i = 0; i < d.size; ++i) worst = std::max(worst, std::fabs(double(d.get(i)) - double(o.get(i))));
        });
    });
    CHECK(worst > 0);
    CHECK(worst < 0.035);  // |w| < 0.25: each block's step d = max|w| / 8 <= 1/32 (the largest positive value may clamp by one step)
}

namespace {
// One change to a valid file and the error it must give: code, and the name or key the message starts with.
struct bad_file {
    const char* what;
    gguf_writer w;
    ct::errc code;
    std::string name;
};
}  // namespace

TEST_CASE("gguf load: every configuration key, name, shape and format error is an error value naming it, nothing written") {
    static Wide<>::Params src;
    fill_random(src, 3);
    using W = Wide<>;
    auto keys_except = [](std::string_view skip, auto&& add) {  // the valid keys, one replaced by add(writer)
        gguf_writer out;
        out.string("general.architecture", skip == "general.architecture" ? "gpt2" : "llama");
        const std::pair<const char*, std::uint32_t> numbers[] = {
            {"llama.context_length", 2048}, {"llama.embedding_length", 32}, {"llama.block_count", 2},
            {"llama.feed_forward_length", 64}, {"llama.attention.head_count", 4}, {"llama.attention.head_count_kv", 2},
            {"llama.rope.dimension_count", 8}, {"llama.vocab_size", 37}};
        for (const auto& [k2, v] : numbers)
            if (skip != k2) out.scalar<std::uint32_t>(k2, gg::value_type::u32, v);
        if (skip != "llama.rope.freq_base") out.scalar<float>("llama.rope.freq_base", gg::value_type::f32, 10000.f);
        if (skip != "llama.attention.layer_norm_rms_epsilon")
            out.scalar<float>("llama.attention.layer_norm_rms_epsilon", gg::value_type::f32, 1e-6f);
        add(out);
        return out;
    };
    auto tensors_of = [&](gguf_writer w, std::string_view skip = {}) {  // add src's tensors (F32) to w's keys
        const gguf_writer t = test::llama_gguf<W>(src, test::gguf_store::f32, skip);
        w.infos = t.infos, w.data = t.data, w.n_tensors = t.n_tensors;
        return w;
    };
    auto none = [](gguf_writer&) {};
    std::vector<bad_file> cases;
    auto wrong_number = [&](const char* key, std::uint32_t v) {
        cases.push_back({key, tensors_of(keys_except(key, [&](gguf_writer& w) { w.scalar<std::uint32_t>(key, gg::value_type::u32, v); })),
                         ct::errc::config_mismatch, key});
    };
    wrong_number("llama.embedding_length", 64);
    wrong_number("llama.block_count", 3);
    wrong_number("llama.attention.head_count", 8);
    wrong_number("llama.attention.head_count_kv", 4);
    wrong_number("llama.feed_forward_length", 128);
    wrong_number("llama.rope.dimension_count", 4);
    wrong_number("llama.vocab_size", 38);
    wrong_number("llama.context_length", 16);  // shorter than the type's 32
    cases.push_back({"architecture", tensors_of(keys_except("general.architecture", none)), ct::errc::config_mismatch, "general.architecture"});
    cases.push_back({"eps", tensors_of(keys_except("llama.attention.layer_norm_rms_epsilon", [](gguf_writer& w) {
                         w.scalar<float>("llama.attention.layer_norm_rms_epsilon", gg::value_type::f32, 1e-5f); })),
                     ct::errc::config_mismatch, "llama.attention.layer_norm_rms_epsilon"});
    // (a file's eps of any value is named in the message: negative, infinite, NaN — the fuzzer's find)
    for (const auto& [what, value, shown] : {std::tuple{"eps negative", -6968.7f, "file -6.97e3"},
                                              std::tuple{"eps inf", std::numeric_limits<float>::infinity(), "file inf"},
                                              std::tuple{"eps NaN", std::numeric_limits<float>::quiet_NaN(), "file nan"}}) {
        const float v = value;
        cases.push_back({what, tensors_of(keys_except("llama.attention.layer_norm_rms_epsilon", [v](gguf_writer& w) {
                             w.scalar<float>("llama.attention.layer_norm_rms_epsilon", gg::value_type::f32, v); })),
                         ct::errc::config_mismatch, std::string("llama.attention.layer_norm_rms_epsilon: ") + shown});
    }
    cases.push_back({"theta NaN", tensors_of(keys_except("llama.rope.freq_base", [](gguf_writer& w) {
                         w.scalar<float>("llama.rope.freq_base", gg::value_type::f32, std::numeric_limits<float>::quiet_NaN()); })),
                     ct::errc::config_mismatch, "llama.rope.freq_base: file nan, type 10000"});
    cases.push_back({"theta negative", tensors_of(keys_except("llama.rope.freq_base", [](gguf_writer& w) {
                         w.scalar<float>("llama.rope.freq_base", gg::value_type::f32, -1e30f); })),
                     ct::errc::config_mismatch, "llama.rope.freq_base: file -1.00e30, type 10000"});
    cases.push_back({"eps absent", tensors_of(keys_except("llama.attention.layer_norm_rms_epsilon", none)), ct::errc::config_mismatch,
                     "llama.attention.layer_norm_rms_epsilon"});
    cases.push_back({"a required key absent", tensors_of(keys_except("llama.feed_forward_length", none)), ct::errc::config_mismatch,
                     "llama.feed_forward_length: file absent"});
    cases.push_back({"theta", tensors_of(keys_except("llama.rope.freq_base", [](gguf_writer& w) {
                         w.scalar<float>("llama.rope.freq_base", gg::value_type::f32, 500000.f); })),
                     ct::errc::config_mismatch, "llama.rope.freq_base"});
    cases.push_back({"head count as a string", tensors_of(keys_except("llama.attention.head_count", [](gguf_writer& w) {
                         w.string("llama.attention.head_count", "4"); })),
                     ct::errc::config_mismatch, "llama.attention.head_count"});
    cases.push_back({"missing tensor", tensors_of(keys_except("", none), "blk.1.ffn_up.weight"), ct::errc::missing_tensor, "blk.1.ffn_up.weight"});
    {
        gguf_writer w = tensors_of(keys_except("", none));
        w.tensor("rope_freqs.weight", {4}, gg::ggml_type::f32, 16);
        cases.push_back({"unexpected tensor", w, ct::errc::unexpected_tensor, "rope_freqs.weight"});
    }
    {
        gguf_writer w = tensors_of(keys_except("", none), "blk.0.attn_v.weight");
        w.tensor("blk.0.attn_v.weight", {16, 32}, gg::ggml_type::f32, 16 * 32 * 4);  // (In, Out) = (16, 32): transposed
        cases.push_back({"wrong shape", w, ct::errc::wrong_shape, "blk.0.attn_v.weight"});
    }
    {
        gguf_writer w = tensors_of(keys_except("", none), "blk.0.ffn_down.weight");
        w.tensor("blk.0.ffn_down.weight", {64, 32}, gg::ggml_type::q8_1, 32 * 2 * 36);
        cases.push_back({"Q8_1 (not read)", w, ct::errc::wrong_dtype, "blk.0.ffn_down.weight: Q8_1 (not read)"});
    }
    {
        gguf_writer w = tensors_of(keys_except("", none), "blk.0.attn_k.weight");
        std::string inf(16 * 32 * 2, '\0');
        for (std::size_t i = 0; i < inf.size(); i += 2) inf[i + 1] = static_cast<char>(0x7c);  // F16 +inf
        w.tensor_data("blk.0.attn_k.weight", {32, 16}, gg::ggml_type::f16, inf);
        cases.push_back({"inf, rejected by the option", w, ct::errc::non_finite, "blk.0.attn_k.weight"});
    }
    ct::safetensors::load_options strict;
    strict.reject_non_finite = true;
    static W::Params target;
    for (const bad_file& c : cases) {
        CAPTURE(c.what);
        const std::vector<std::byte> bytes = c.w.bytes();
        static gg::file<32, 64> g;
        REQUIRE(g.parse(bytes).ok());
        std::memset(static_cast<void*>(&target), 0x5a, sizeof target);
        const ct::status st = ct::load_gguf(target, g, strict);
        CHECK(st.code == c.code);
        CHECK(std::string(st.tensor_name()).rfind(c.name, 0) == 0);
        MESSAGE(std::string(c.what) << ": " << std::string(ct::to_string(st.code)) << " \"" << std::string(st.tensor_name()) << "\"");
        const auto* raw = reinterpret_cast<const unsigned char*>(&target);
        std::size_t touched = 0;
        for (std::size_t i = 0; i < sizeof target; ++i) touched += raw[i] != 0x5a;
        CHECK(touched == 0);
    }
    // the valid file loads (the cases above differ from it by their one change)
    const std::vector<std::byte> ok = tensors_of(keys_except("", none)).bytes();
    static gg::file<32, 64> g;
    REQUIRE(g.parse(ok).ok());
    CHECK(ct::load_gguf(target, g, strict).ok());
    CHECK(differing(target, src) == 0);
}

TEST_CASE("gguf load: another block format into quantized weights is wrong_dtype (quantizing twice); float files quantize at load") {
    static Wide<>::Params src;
    fill_random(src, 5);
    static Wide<ct::weights<ct::int8_per_channel>>::Params q8;
    static gg::file<32, 64> g;
    const std::vector<std::byte> q4_file = test::llama_gguf<Wide<>>(src, test::gguf_store::q4_0).bytes();
    REQUIRE(g.parse(q4_file).ok());
    const ct::status st = ct::load_gguf(q8, g);
    CHECK(st.code == ct::errc::wrong_dtype);
    CHECK(std::string(st.tensor_name()).ends_with(".weight: Q4_0 into a quantized weight format"));
    const std::vector<std::byte> f32_file = test::llama_gguf<Wide<>>(src, test::gguf_store::f32).bytes();
    REQUIRE(g.parse(f32_file).ok());
    REQUIRE(ct::load_gguf(q8, g).ok());
    static Wide<ct::weights<ct::int8_per_channel>>::Params q8_st;  // the same weights quantized from safetensors
    std::vector<std::byte> buf(ct::save_state_dict(src, {}).bytes);
    REQUIRE(ct::save_state_dict(src, buf).st.ok());
    REQUIRE(ct::load_state_dict(q8_st, buf).ok());
    CHECK(differing(q8, q8_st) == 0);
}
