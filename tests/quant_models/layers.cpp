// Quantized weights in a layer and in files (core/quant.hpp, io/quantized.hpp): the decoder layer
// against its float twin whose weights are the dequantized values (get(i) of every quantized
// weight, copied into the dense type: ctformer matches it at the float tolerance; the error
// against PyTorch's own unquantized outputs printed per format, docs/quantization.md); files saved
// as stored and loaded back exactly; #60's defects of the quantized loaders, each a regression case.
// (The storage and kernels: tests/test_quant.cpp.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "quant_fixture.hpp"

namespace {
using namespace quant_test;
}  // namespace

// ---- Layers, stacks and models on the PyTorch fixtures ----

using CrossDense = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
template <class Fmt> using CrossQ = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::weights<Fmt>>;

TEST_CASE_TEMPLATE("quant: nn.TransformerDecoderLayer (cross-attention) forward = its dequantized float layer", Fmt,
                   ct::bf16, ct::int8_per_channel, ct::int4_group<16>) {
    using LQ = CrossQ<Fmt>;
    static typename LQ::Params q;
    static CrossDense::Params d;
    test::File file("post_relu_causal_mempad");
    file.load(q, "params.");
    dequantized_copy(q, d);
    static ct::Tensor<float, 2, 5, 16> tgt, out_q, out_d, torch;
    static ct::Tensor<float, 2, 7, 16> mem;
    file.read("input.tgt", tgt);
    file.read("input.memory", mem);
    file.read("output", torch);
    static typename LQ::template Workspace<2, 5, 7> wq;
    static CrossDense::Workspace<2, 5, 7> wd;
    REQUIRE(LQ::forward(q, wq, tgt, mem, out_q, ct::causal{}, ct::key_lengths{7, 4}).ok());
    REQUIRE(CrossDense::forward(d, wd, tgt, mem, out_d, ct::causal{}, ct::key_lengths{7, 4}).ok());
    check_rel("quantized vs dequantized float layer", out_q.data(), out_d.data(), out_q.size, quant_tol);
    const double vs_torch = check_rel("against PyTorch's unquantized output", out_q.data(), torch.data(), out_q.size, 0.2);
    std::printf("  quant %-5s decoder layer D16: %.3g of max vs dequantized float, %.3g vs PyTorch fp32\n", fmt_name<Fmt>(),
                test::compare(out_q.data(), out_d.data(), out_q.size).max_abs / max_abs(out_d.data(), out_d.size), vs_torch);
}

// ---- Loading ----

TEST_CASE("quant: NaN or inf in the float source is an error at load and nothing is written") {
    using LQ = CrossQ<ct::int8_per_channel>;
    static typename LQ::Params q, before;
    test::File file("post_relu_nomask");
    file.load(q, "params.");
    std::memcpy(&before, &q, sizeof q);
    // the same file with one weight replaced by NaN, then by inf
    for (const float bad : {NAN, INFINITY}) {
        std::vector<std::byte> bytes = file.bytes;
        const ct::safetensors::entry* e = file.f.find("params.linear2.weight");
        REQUIRE(e);
        REQUIRE(e->type == ct::safetensors::dtype::F32);
        const std::size_t at = std::size_t(file.f.data(*e) - file.bytes.data()) + 4 * 17;
        std::memcpy(bytes.data() + at, &bad, 4);
        const ct::status st = ct::load_state_dict(q, std::span<const std::byte>(bytes), "params.");
        CHECK(st.code == ct::errc::non_finite);
        CHECK(st.tensor_name() == "params.linear2.weight");
        CHECK(std::memcmp(&before, &q, sizeof q) == 0);
    }
}

// (static params: zero-initialized, every padding byte written alike)
template <class P> bool same_storage(const P& a, const P& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST_CASE_TEMPLATE("quant: saved as stored (packed values and scales), loaded back exactly; errors in a stored file", Fmt,
                   ct::bf16, ct::int8_per_channel, ct::int4_group<16>, ct::int6_group<16>, ct::int6_group_min<16>,
                   ct::int4_group_min<16, ct::f16>) {
    using LQ = CrossQ<Fmt>;
    static typename LQ::Params q, r;
    constexpr bool int4 = Fmt::per_word == 8 && !ct::has_high_plane<Fmt>;  // (int6: a byte a weight)
    test::File file("post_relu_nomask");
    file.load(q, "params.");
    std::vector<std::byte> buf(ct::save_state_dict(q, {}).bytes);
    REQUIRE(ct::save_state_dict(q, buf).st.ok());
    ct::safetensors::file<128> f;
    REQUIRE(f.parse(buf).ok());
    const ct::safetensors::entry* w = f.find("linear1.weight");
    REQUIRE(w);
    using D = ct::safetensors::dtype;
    CHECK(w->type == (std::is_same_v<Fmt, ct::bf16> ? D::BF16 : int4 ? D::U8 : D::I8));
    CHECK(w->shape[0] == 32u);  // linear1: (ffn 32, d_model 16); int4: two inputs a byte
    CHECK(w->shape[1] == (int4 ? 8u : 16u));
    CHECK((f.find("linear1.weight_scale") != nullptr) == Fmt::scaled);
    if constexpr (Fmt::scaled) CHECK(f.find("linear1.weight_scale")->type == (ct::half_scales<Fmt> ? D::F16 : D::F32));
    REQUIRE(ct::load_state_dict(r, f).ok());
    CHECK(same_storage(q, r));
    // a stored file and a float file of the same weights load the same (the quantizer is the same)
    static typename LQ::Params from_float;
    file.load(from_float, "params.");
    CHECK(same_storage(from_float, r));
    if constexpr (ct::half_scales<Fmt>) {  // F16 scales: a float-scale type reads them (exact), not the reverse
        using Wide = CrossQ<ct::int4_group_min<16>>;
        static typename Wide::Params wide;
        REQUIRE(ct::load_state_dict(wide, f).ok());
        double off = 0;
        for (std::size_t i = 0; i < wide.ffn.linear1.weight.size; ++i) off += wide.ffn.linear1.weight.get(i) != r.ffn.linear1.weight.get(i);
        CHECK(off == 0);
        std::vector<std::byte> wbuf(ct::save_state_dict(wide, {}).bytes);
        REQUIRE(ct::save_state_dict(wide, wbuf).st.ok());
        static typename LQ::Params untouched;
        std::memcpy(&untouched, &r, sizeof r);
        const ct::status st = ct::load_state_dict(r, std::span<const std::byte>(wbuf));
        CHECK(st.code == ct::errc::wrong_dtype);
        CHECK(std::string(st.tensor_name()).ends_with("_scale: F32, expected F16"));
        CHECK(same_storage(untouched, r));
    }
    if constexpr (Fmt::scaled) {
        std::memcpy(&from_float, &r, sizeof r);
        // a NaN scale, then a scale of the wrong shape: errors, nothing written
        std::vector<std::byte> bad = buf;
        const ct::safetensors::entry* sc = f.find("linear2.weight_scale");
        const float nan = NAN;
        std::memcpy(bad.data() + (f.data(*sc) - buf.data()), &nan, 4);
        ct::status st = ct::load_state_dict(r, std::span<const std::byte>(bad));
        CHECK(st.code == ct::errc::non_finite);
        CHECK(st.tensor_name() == "linear2.weight_scale");
        CHECK(same_storage(from_float, r));
    }
}

TEST_CASE("quant: a stored int8 weight without its scales, or with a wrong shape, is an error naming it") {
    using LQ = CrossQ<ct::int8_per_channel>;
    static LQ::Params q;
    test::File file("post_relu_nomask");
    file.load(q, "params.");
    std::vector<std::byte> buf(ct::save_state_dict(q, {}).bytes);
    REQUIRE(ct::save_state_dict(q, buf).st.ok());
    // rename linear2.weight_scale to linear2.weight_scalf in the header: missing, then unexpected
    std::string_view text(reinterpret_cast<const char*>(buf.data()), buf.size());
    const std::size_t at = text.find("linear2.weight_scale");
    REQUIRE(at != std::string_view::npos);
    buf[at + 19] = std::byte{'f'};
    const ct::status st = ct::load_state_dict(q, std::span<const std::byte>(buf));
    CHECK(st.code == ct::errc::missing_tensor);
    CHECK(st.tensor_name() == "linear2.weight_scale");
}

TEST_CASE("quant: the configuration: a dense export loads into any format, a quantized type describes its format") {
    std::string fmt, group;
    CrossQ<ct::int4_group<16>>::config::describe([&](std::string_view name, auto value) {
        if constexpr (std::is_same_v<decltype(value), const char*>)
            if (name == "weight_format") fmt = value;
        if constexpr (std::is_same_v<decltype(value), std::size_t>)
            if (name == "weight_group") group = std::to_string(value);
    });
    CHECK(fmt == "int4_group");
    CHECK(group == "16");
    static_assert(sizeof(CrossQ<ct::int8_per_channel>::Params) * 3 < sizeof(CrossDense::Params) * 2,
                  "int8 params are well under the float ones");
}

// ---- #60's defects of the quantized loaders, each a regression case ----
namespace {
template <class LQ> std::vector<std::byte> stored_file(typename LQ::Params& q) {
    test::File file("post_relu_nomask");
    file.load(q, "params.");
    std::vector<std::byte> buf(ct::save_state_dict(q, {}).bytes);
    REQUIRE(ct::save_state_dict(q, buf).st.ok());
    return buf;
}
// the bytes of tensor name in buf (a parsed copy finds it)
std::byte* tensor_bytes(std::vector<std::byte>& buf, std::string_view name) {
    ct::safetensors::file<128> f;
    REQUIRE(f.parse(buf).ok());
    const auto* e = f.find(name);
    REQUIRE(e);
    return buf.data() + (f.data(*e) - buf.data());
}
}  // namespace

TEST_CASE("quant: stored bf16 weights obey reject_non_finite and max_abs, as float files do") {
    using LQ = CrossQ<ct::bf16>;
    static LQ::Params q, r;
    std::vector<std::byte> buf = stored_file<LQ>(q);
    std::memcpy(&r, &q, sizeof q);
    const std::uint16_t nan_bits = 0x7fc0, minus_inf = 0xff80, big = 0x4780;  // NaN, -inf, 65536
    std::byte* w = tensor_bytes(buf, "linear1.weight");
    std::memcpy(w + 6, &nan_bits, 2);
    std::memcpy(w + 10, &minus_inf, 2);
    ct::status st = ct::load_state_dict(r, std::span<const std::byte>(buf), "", {.reject_non_finite = true});
    CHECK(st.code == ct::errc::non_finite);
    CHECK(st.tensor_name() == "linear1.weight");
    std::memcpy(w + 6, &big, 2);
    std::memcpy(w + 10, &big, 2);
    st = ct::load_state_dict(r, std::span<const std::byte>(buf), "", {.max_abs = 1000});
    CHECK(st.code == ct::errc::value_out_of_range);
    CHECK(std::memcmp(&q, &r, sizeof q) == 0);
}

TEST_CASE("quant: stored int8 scales whose product overflows float, or above max_abs, are value_out_of_range") {
    using LQ = CrossQ<ct::int8_per_channel>;
    static LQ::Params q, r;
    std::vector<std::byte> buf = stored_file<LQ>(q);
    std::memcpy(&r, &q, sizeof q);
    std::byte* s = tensor_bytes(buf, "linear2.weight_scale");
    const float huge = 3e38f;  // (x 127: inf)
    std::memcpy(s, &huge, 4);
    ct::status st = ct::load_state_dict(r, std::span<const std::byte>(buf));
    CHECK(st.code == ct::errc::value_out_of_range);
    CHECK(st.tensor_name() == "linear2.weight_scale");
    const float moderate = 100.0f;  // 100 x 127 > 1000
    std::memcpy(s, &moderate, 4);
    CHECK(ct::load_state_dict(r, std::span<const std::byte>(buf)).ok());
    std::memcpy(&r, &q, sizeof q);
    st = ct::load_state_dict(r, std::span<const std::byte>(buf), "", {.max_abs = 1000});
    CHECK(st.code == ct::errc::value_out_of_range);
    CHECK(std::memcmp(&q, &r, sizeof q) == 0);
}

TEST_CASE_TEMPLATE("quant: a stored integer outside its format's range (int8: -128; int6: past six bits) is value_out_of_range, nothing written",
                   Fmt, ct::int8_per_channel, ct::int6_group<16>, ct::int6_group_min<16>) {
    using LQ = CrossQ<Fmt>;
    static typename LQ::Params q, r;
    std::vector<std::byte> buf = stored_file<LQ>(q);
    std::memcpy(&r, &q, sizeof q);
    const bool six = ct::has_high_plane<Fmt>, levels = ct::unsigned_levels<Fmt>;
    for (const std::uint8_t bad : {six ? (levels ? 0xffu : 0xdfu) : 0x80u, six ? (levels ? 64u : 32u) : 0x80u}) {  // -1 / -33, 64 / 32
        std::vector<std::byte> b = buf;
        tensor_bytes(b, "linear1.weight")[3] = std::byte{bad};
        const ct::status st = ct::load_state_dict(r, std::span<const std::byte>(b));
        CHECK(st.code == ct::errc::value_out_of_range);
        CHECK(st.tensor_name() == "linear1.weight");
        CHECK(std::memcmp(&q, &r, sizeof q) == 0);
    }
}

TEST_CASE("quant: a stray <name>_scale beside a float or bf16 weight is unexpected_tensor") {
    // a float file with a stray scale, into an int8 type (quantized at load) and into a bf16 type
    static CrossQ<ct::int8_per_channel>::Params q8;
    static CrossQ<ct::bf16>::Params qb;
    static CrossQ<ct::int8_per_channel>::Params stored;
    std::vector<std::byte> with_scale = stored_file<CrossQ<ct::int8_per_channel>>(stored);
    // the float file: the fixture's layer saved as float
    using LF = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    static LF::Params fl;
    test::File("post_relu_nomask").load(fl, "params.");
    std::vector<std::byte> dense(ct::save_state_dict(fl, {}).bytes);
    REQUIRE(ct::save_state_dict(fl, dense).st.ok());
    // add linear2.weight_scale (from the stored file) to the dense file: rebuild its header
    ct::safetensors::file<128> a, b;
    REQUIRE(a.parse(dense).ok());
    REQUIRE(b.parse(with_scale).ok());
    test::safetensors_writer w;
    for (std::size_t i = 0; i < a.size(); ++i) w.copy(a, a[i]);
    w.copy(b, *b.find("linear2.weight_scale"));
    const std::vector<std::byte> file = w.bytes();
    ct::status st = ct::load_state_dict(q8, std::span<const std::byte>(file));
    CHECK(st.code == ct::errc::unexpected_tensor);
    CHECK(st.tensor_name() == "linear2.weight_scale");
    st = ct::load_state_dict(qb, std::span<const std::byte>(file));
    CHECK(st.code == ct::errc::unexpected_tensor);
    CHECK(st.tensor_name() == "linear2.weight_scale");
}

TEST_CASE("quant: two-level scales (ct::kscale) saved as stored, loaded back exactly; a bad half, a wrong dtype, max_abs: errors, nothing written") {
    using B = ct::DecoderLayer<ct::d_model<256>, ct::heads<4>, ct::ffn_dim<256>, ct::weights<ct::int4_group_min<32, ct::kscale>>>;
    static B::Params q, r;
    unsigned seed = 30;
    ct::for_each_tensor(q, [&](std::string_view, auto& t) {
        const std::vector<float> v = random_values(t.size, ++seed);
        if constexpr (ct::is_quantized_weight_v<std::remove_cvref_t<decltype(t)>>) {
            t.quantize([&](std::size_t i) { return v[i]; });
            random_minimums(t, seed);
        } else {
            for (std::size_t i = 0; i < t.size; ++i) t.set(i, v[i]);
        }
    });
    std::vector<std::byte> buf(ct::save_state_dict(q, {}).bytes);
    REQUIRE(ct::save_state_dict(q, buf).st.ok());
    ct::safetensors::file<128> f;
    REQUIRE(f.parse(buf).ok());
    using D = ct::safetensors::dtype;
    const ct::safetensors::entry *s = f.find("linear1.weight_scale"), *h = f.find("linear1.weight_scale_super"),
                                 *m = f.find("linear1.weight_min"), *mh = f.find("linear1.weight_min_super");
    REQUIRE((s && h && m && mh));
    CHECK(s->type == D::I8);
    CHECK(m->type == D::I8);
    CHECK(h->type == D::F16);
    CHECK(mh->type == D::F16);
    CHECK((s->shape[0] == 256u && s->shape[1] == 8u && h->shape[0] == 256u && h->shape[1] == 1u));
    REQUIRE(ct::load_state_dict(r, f).ok());
    CHECK(same_storage(q, r));
    // a half that is NaN or inf: non_finite naming it; max_abs over s·max q + m; nothing written
    for (const std::uint16_t bad : {std::uint16_t(0x7e00u), std::uint16_t(0x7c00u)}) {
        std::vector<std::byte> b = buf;
        std::memcpy(b.data() + (f.data(*mh) - buf.data()) + 2 * 7, &bad, 2);
        const ct::status st = ct::load_state_dict(r, std::span<const std::byte>(b));
        CHECK(st.code == ct::errc::non_finite);
        CHECK(st.tensor_name() == "linear1.weight_min_super");
        CHECK(same_storage(q, r));
    }
    ct::status st = ct::load_state_dict(r, std::span<const std::byte>(buf), "", {.max_abs = 0.01});
    CHECK(st.code == ct::errc::value_out_of_range);
    CHECK(same_storage(q, r));
    // integers of another dtype (U8 for I8, as a float-scale type's F32 would be): wrong_dtype naming the scales
    std::vector<std::byte> other = buf;
    const std::string key = "\"linear1.weight_scale\":{\"dtype\":\"I8\"";
    const auto at = std::search(other.begin(), other.end(), reinterpret_cast<const std::byte*>(key.data()),
                                reinterpret_cast<const std::byte*>(key.data() + key.size()));
    REQUIRE(at != other.end());
    *(at + static_cast<std::ptrdiff_t>(key.size()) - 3) = std::byte{'U'};
    st = ct::load_state_dict(r, std::span<const std::byte>(other));
    CHECK(st.code == ct::errc::wrong_dtype);
    CHECK(std::string(st.tensor_name()) == "linear1.weight_scale: U8, expected I8");
    CHECK(same_storage(q, r));
    // the values: what the kernels compute from (the int8 times its half)
    for (std::size_t i = 0; i < r.ffn.linear1.weight.size; i += 97) CHECK(r.ffn.linear1.weight.get(i) == q.ffn.linear1.weight.get(i));
}
