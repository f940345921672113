// GGUF's k-quants into two-level scales (ct::kscale): the file's halves and integers as stored
// (Q4_K, Q5_K, Q6_K and Q4_K_M's mix), the dense model's numbers, the exporter's aliases, errors.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/as_stored.hpp"

namespace {
using namespace gguf_test;
// The k-quants need rows of 256 inputs.
template <class... O> using KQ = ct::Llama<37, 32, 2, ct::d_model<256>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<256>, O...>;
using KWide = KQ<>;
// Q4_K_M's mix by layer: Q4_K in one layer, Q6_K in the other and the head.
test::gguf_store by_layer(std::string_view name) {
    return name.starts_with("blk.0.") ? test::gguf_store::q4_k : test::gguf_store::q6_k;
}
using KMix = KQ<ct::weights<ct::int6_group_min<16, ct::kscale>, ct::head_weights<ct::int6_group<16, ct::kscale>>>>;
using KMixA8 = KQ<ct::weights<ct::int6_group_min<16, ct::kscale>, ct::int8_activations, ct::head_weights<ct::int6_group<16, ct::kscale>>>>;
using KMixFloat = KQ<ct::weights<ct::int6_group_min<16>, ct::head_weights<ct::int6_group<16>>>>;
}  // namespace

TEST_CASE("gguf load: the k-quants into two-level scales (ct::kscale) as stored, computing the dense model; what they refuse") {
    static KWide::Params src, dense;
    fill_random(src, 29);
    using S = test::gguf_store;
    using T = gg::ggml_type;
    as_stored_equals_dense<KQ<ct::weights<ct::int4_group_min<32, ct::kscale>>>, KWide>(S::q4_k, T::q4_k, src);
    as_stored_equals_dense<KQ<ct::weights<ct::int6_group_min<32, ct::kscale>>>, KWide>(S::q5_k, T::q5_k, src);
    as_stored_equals_dense<KQ<ct::weights<ct::int6_group<16, ct::kscale>, ct::int8_activations>>, KWide>(S::q6_k, T::q6_k, src);
    // the exporter's aliases: two-level wherever every tensor of a matrix is a k-quant
    CHECK(std::string(gg::stored_format(1u << 12)) == "ct::int4_group_min<32, ct::kscale>");            // Q4_K alone
    CHECK(std::string(gg::stored_format(1u << 12 | 1u << 13)) == "ct::int6_group_min<32, ct::kscale>");  // Q4_K + Q5_K
    CHECK(std::string(gg::stored_format(1u << 14)) == "ct::int6_group<16, ct::kscale>");                 // Q6_K alone
    CHECK(std::string(gg::stored_format(1u << 14 | 1u << 12)) == "ct::int6_group_min<16, ct::kscale>");  // Q4_K_M's down
    CHECK(std::string(gg::stored_format(1u << 14 | 1u << 8)) == "ct::int8_group<16>");                   // (with Q8_0: one level)
    const std::vector<std::byte> bytes = test::llama_gguf_by<KWide>(src, by_layer).bytes();
    static gg::file<32, 64> g;
    REQUIRE(g.parse(bytes).ok());
    const char* f[8];
    gg::stored_formats(g, f);
    for (int m = 0; m < 7; ++m) CHECK_MESSAGE(std::string(f[m]) == "ct::int6_group_min<16, ct::kscale>", gg::matrix_names[m]);
    CHECK(std::string(f[7]) == "ct::int6_group<16, ct::kscale>");
    as_stored_equals_dense<KMix, KWide>(bytes, src);
    as_stored_equals_dense<KMixA8, KWide>(bytes, src);
    // the weights' bytes: an int8 a run and a half a 256 instead of two floats a run
    const double ratio = double(sizeof(KMix::Params)) / double(sizeof(KMixFloat::Params));
    INFO("params " << sizeof(KMix::Params) << " B against " << sizeof(KMixFloat::Params) << " B with float scales");
    CHECK(ratio < 0.75);
    // the same numbers: weight-only logits are the dense model's to float rounding
    static KMix::Params m, back;
    REQUIRE(ct::load_gguf(m, g).ok());
    REQUIRE(ct::load_gguf(dense, g).ok());
    same_logits<KWide, KMix>(dense, m, 5, 2);
    // saved as stored (I8 integers, F16 halves) and read back: the same weights
    std::vector<std::byte> buf(ct::save_state_dict(m, {}).bytes);
    REQUIRE(ct::save_state_dict(m, buf).st.ok());
    REQUIRE(ct::load_state_dict(back, std::span<const std::byte>(buf)).ok());
    CHECK(std::memcmp(&back, &m, sizeof m) == 0);
    // formats that cannot hold them: wrong_dtype naming the tensor, nothing written
    static KQ<ct::weights<ct::int6_group<16, ct::kscale>>>::Params signed_levels;  // (Q4_K's minimum)
    refused_untouched(signed_levels, g, "blk.0.attn_q.weight: Q4_K into a quantized weight format");
    static KQ<ct::weights<ct::int6_group_min<32, ct::kscale>>>::Params thirty_two;  // (Q6_K's runs are 16)
    refused_untouched(thirty_two, g, "blk.1.attn_q.weight: Q6_K into a quantized weight format");
    const std::vector<std::byte> q8 = test::llama_gguf<KWide>(src, S::q8_0).bytes();  // (a half a 32: no k-quant)
    static gg::file<32, 64> g8;
    REQUIRE(g8.parse(q8).ok());
    static KQ<ct::weights<ct::int8_group<32, ct::kscale>>>::Params eight;
    refused_untouched(eight, g8, "blk.0.attn_q.weight: Q8_0 into a quantized weight format");
    // Q6_K as levels keeps 32·d as its minimum's half: a d past 65504 / 32 is value_out_of_range
    // (nothing written)
    std::vector<std::byte> big = bytes;
    const auto at = static_cast<std::size_t>(g.data(*g.find_tensor("blk.1.attn_q.weight")) - bytes.data()) + 208;
    const std::uint16_t d = ct::simd::half_bits(4096.f);
    std::memcpy(big.data() + at, &d, 2);
    static gg::file<32, 64> gb;
    REQUIRE(gb.parse(big).ok());
    std::memcpy(&back, &m, sizeof m);
    const ct::status st = ct::load_gguf(back, gb);
    CHECK(st.code == ct::errc::value_out_of_range);
    CHECK(st.tensor_name() == "blk.1.attn_q.weight");
    CHECK(std::memcmp(&back, &m, sizeof m) == 0);
}
