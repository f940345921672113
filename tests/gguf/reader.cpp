// The GGUF reader (io/gguf.hpp): files written here byte by byte as llama.cpp's gguf.c lays them
// out (every metadata type, arrays of numbers and strings, tensor infos, both alignments), read
// back; then every malformed field an error naming it, every truncation of a valid file an error,
// and a failed parse leaving the gf empty.
#include <cstring>
#include <string>
#include <vector>

#include <ctformer/io/gguf.hpp>

#include "common.hpp"
#include "gguf/writer.hpp"

namespace {
namespace gg = ctformer::gguf;
using test::gguf_writer;

gguf_writer llama_like() {
    gguf_writer w;
    w.string("general.architecture", "llama")
        .scalar<std::uint32_t>("llama.embedding_length", gg::value_type::u32, 64)
        .scalar<std::uint32_t>("llama.block_count", gg::value_type::u32, 2)
        .scalar<float>("llama.attention.layer_norm_rms_epsilon", gg::value_type::f32, 1e-5f)
        .scalar<std::int8_t>("test.i8", gg::value_type::i8, -3)
        .scalar<std::uint16_t>("test.u16", gg::value_type::u16, 65535)
        .scalar<std::int16_t>("test.i16", gg::value_type::i16, -300)
        .scalar<std::int32_t>("test.i32", gg::value_type::i32, -70000)
        .scalar<std::uint64_t>("test.u64", gg::value_type::u64, 1ull << 40)
        .scalar<std::int64_t>("test.i64", gg::value_type::i64, -(1ll << 40))
        .scalar<double>("test.f64", gg::value_type::f64, 0.25)
        .scalar<std::uint8_t>("test.bool", gg::value_type::boolean, 1)
        .scalar<std::uint8_t>("test.u8", gg::value_type::u8, 200)
        .strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81the", ""})
        .array<float>("tokenizer.ggml.scores", gg::value_type::f32, {0.f, 0.f, 0.f, -1.5f, -2.f})
        .array<std::int32_t>("tokenizer.ggml.token_type", gg::value_type::i32, {2, 3, 3, 1, 1});
    w.tensor("token_embd.weight", {64, 5}, gg::ggml_type::f32, 64 * 5 * 4)
        .tensor("blk.0.attn_q.weight", {64, 64}, gg::ggml_type::q8_0, 64 * 64 / 32 * 34)
        .tensor("blk.0.ffn_down.weight", {256, 64}, gg::ggml_type::q4_k, 64 * 144)
        .tensor("output_norm.weight", {64}, gg::ggml_type::f16, 128);
    return w;
}

gg::file<32, 16> gf;  // (static: the index lives where a program would keep it)
}  // namespace

TEST_CASE("gguf: every metadata type, arrays of numbers and strings, tensor infos and data, read in place") {
    for (std::size_t align : {32u, 64u}) {
        gguf_writer w = llama_like();
        if (align != 32) w.alignment = align, w.scalar<std::uint32_t>("general.alignment", gg::value_type::u32, 64);
        const auto bytes = w.bytes();
        const ct::status st = gf.parse(bytes);
        REQUIRE_MESSAGE(st.ok(), ct::to_string(st.code) << " " << st.tensor_name());
        CHECK(gf.version() == 3);
        CHECK(gf.alignment() == align);
        CHECK(gf.keys() == w.n_kv);
        std::string_view arch;
        REQUIRE(gf.find("general.architecture")->v.get(arch));
        CHECK(arch == "llama");
        std::uint64_t u = 0;
        REQUIRE(gf.find("llama.block_count")->v.get(u));
        CHECK(u == 2);
        REQUIRE(gf.find("test.u16")->v.get(u));
        CHECK(u == 65535);
        REQUIRE(gf.find("test.u64")->v.get(u));
        CHECK(u == (1ull << 40));
        CHECK(!gf.find("test.i8")->v.get(u));  // (negative: not an unsigned)
        CHECK(!gf.find("test.i64")->v.get(u));
        REQUIRE(gf.find("test.bool")->v.get(u));
        CHECK(u == 1);
        double f = 0;
        REQUIRE(gf.find("llama.attention.layer_norm_rms_epsilon")->v.get(f));
        CHECK(f == double(1e-5f));
        REQUIRE(gf.find("test.f64")->v.get(f));
        CHECK(f == 0.25);
        std::vector<std::string> toks;
        REQUIRE(gf.find("tokenizer.ggml.tokens")->v.for_each_string([&](std::uint64_t, std::string_view s) { toks.emplace_back(s); }));
        CHECK(toks == std::vector<std::string>{"<unk>", "<s>", "</s>", "\xe2\x96\x81the", ""});
        const gg::value& sc = gf.find("tokenizer.ggml.scores")->v;
        CHECK(sc.count == 5);
        REQUIRE(sc.number_at(3, f));
        CHECK(f == -1.5);
        CHECK(!sc.number_at(5, f));
        REQUIRE(gf.find("tokenizer.ggml.token_type")->v.number_at(0, f));
        CHECK(f == 2);
        CHECK(gf.find("no.such.key") == nullptr);
        REQUIRE(gf.tensors() == 4);
        const gg::tensor_info* q = gf.find_tensor("blk.0.attn_q.weight");
        REQUIRE(q);
        CHECK((q->type == gg::ggml_type::q8_0 && q->n_dims == 2 && q->dims[0] == 64 && q->dims[1] == 64));
        CHECK(q->bytes == 64 * 64 / 32 * 34);
        CHECK(gf.find_tensor("blk.0.ffn_down.weight")->bytes == 64 * 144);
        for (std::size_t i = 0; i < gf.tensors(); ++i) {  // the data where the writer put it, aligned
            const gg::tensor_info& t = gf.tensor(i);
            CHECK(t.offset % align == 0);
            CHECK(static_cast<char>(gf.data(t)[1]) == static_cast<char>(7 + t.name.size()));
        }
    }
}

TEST_CASE("gguf: version 2 files read as 3; version 1 and others are not_supported") {
    gguf_writer w = llama_like();
    w.version = 2;
    CHECK(gf.parse(w.bytes()).ok());
    for (std::uint32_t v : {1u, 4u}) {
        w.version = v;
        CHECK(gf.parse(w.bytes()).code == ct::errc::not_supported);
        CHECK(gf.keys() == 0);
    }
}

TEST_CASE("gguf: every truncation of a valid file is an error, the gf left empty") {
    const auto full = llama_like().bytes();
    std::size_t errors = 0;
    for (std::size_t n = 0; n < full.size(); ++n) {
        REQUIRE(gf.parse(full).ok());
        const std::vector<std::byte> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
        const ct::status st = gf.parse(cut);
        errors += !st.ok();
        if (!st.ok()) CHECK((gf.keys() == 0 && gf.tensors() == 0));
    }
    CHECK(errors == full.size());
}

TEST_CASE("gguf: malformed fields are errors naming them") {
    struct bad {
        const char* what;
        gguf_writer w;
        ct::errc code;
        std::string name;
    };
    std::vector<bad> cases;
    auto add = [&](const char* what, gguf_writer w, ct::errc code, std::string name) { cases.push_back({what, std::move(w), code, std::move(name)}); };
    {
        gguf_writer w = llama_like();
        w.scalar<std::uint32_t>("llama.block_count", gg::value_type::u32, 3);
        add("a key twice", w, ct::errc::malformed_header, "llama.block_count");
    }
    {
        gguf_writer w;
        w.scalar<std::uint32_t>("x", static_cast<gg::value_type>(13), 1);
        add("an unknown value type", w, ct::errc::malformed_header, "x");
    }
    {
        gguf_writer w;
        w.array<std::uint32_t>("x", gg::value_type::array, {0});
        add("an array of arrays", w, ct::errc::not_supported, "x");
    }
    {
        gguf_writer w = llama_like();
        w.scalar<std::uint32_t>("general.alignment", gg::value_type::u32, 48);
        add("an alignment not a power of two", w, ct::errc::malformed_header, "general.alignment");
    }
    {
        gguf_writer w = llama_like();
        w.scalar<std::uint64_t>("general.alignment", gg::value_type::u64, 64);
        add("an alignment not a u32", w, ct::errc::malformed_header, "general.alignment");
    }
    {
        gguf_writer w;
        w.tensor("t", {8, 8, 1, 1, 2}, gg::ggml_type::f32, 8 * 8 * 2 * 4);
        add("five dimensions", w, ct::errc::wrong_shape, "t");
    }
    {
        gguf_writer w;
        w.tensor("t", {8, 0}, gg::ggml_type::f32, 0);
        add("a dimension of 0", w, ct::errc::wrong_shape, "t");
    }
    {
        gguf_writer w;
        w.tensor("t", {8}, static_cast<gg::ggml_type>(99), 8);
        add("an unknown ggml type", w, ct::errc::unsupported_dtype, "t");
    }
    {
        gguf_writer w;
        w.tensor("t", {48, 2}, gg::ggml_type::q8_0, 3 * 34);
        add("a row that is not whole blocks", w, ct::errc::wrong_shape, "t");
    }
    {
        gguf_writer w;
        w.tensor("t", {8}, gg::ggml_type::f32, 32, 4);
        add("a misaligned offset", w, ct::errc::bad_offsets, "t");
    }
    {
        gguf_writer w;
        w.tensor("t", {8}, gg::ggml_type::f32, 32).tensor("u", {64}, gg::ggml_type::f32, 8, 32);
        add("data past the end", w, ct::errc::truncated, "u");
    }
    {
        gguf_writer w;
        w.tensor("t", {16}, gg::ggml_type::f32, 64).tensor("u", {8}, gg::ggml_type::f32, 32, 32);
        add("overlapping tensors", w, ct::errc::overlapping_data, "u");
    }
    {
        gguf_writer w;
        w.tensor("t", {8}, gg::ggml_type::f32, 32).tensor("t", {8}, gg::ggml_type::f32, 32);
        add("a tensor twice", w, ct::errc::duplicate_tensor, "t");
    }
    for (const bad& b : cases) {
        REQUIRE(gf.parse(llama_like().bytes()).ok());
        const auto bytes = b.w.bytes();
        const ct::status st = gf.parse(bytes);
        CHECK_MESSAGE(st.code == b.code, b.what << ": " << ct::to_string(st.code) << " " << st.tensor_name());
        CHECK_MESSAGE(st.tensor_name() == std::string_view(b.name), b.what << ": " << st.tensor_name());
        CHECK((gf.keys() == 0 && gf.tensors() == 0));
    }
    // more keys or tensors than the gf holds
    gguf_writer many;
    for (int i = 0; i < 40; ++i) many.scalar<std::uint8_t>("k" + std::to_string(i), gg::value_type::u8, 1);
    CHECK(gf.parse(many.bytes()).code == ct::errc::too_many_tensors);
    // a bad magic
    auto bytes = llama_like().bytes();
    bytes[0] = std::byte{'X'};
    CHECK(gf.parse(bytes).code == ct::errc::malformed_header);
}

TEST_CASE("gguf: a file without tensors may end before the data section's padding (llama.cpp reads such files)") {
    gguf_writer w;
    w.string("general.architecture", "llama").scalar<std::uint32_t>("llama.block_count", gg::value_type::u32, 1);
    std::vector<std::byte> bytes = w.bytes();
    const std::size_t unpadded = 24 + w.kvs.size() + w.infos.size();  // (magic, version, two counts, then the keys)
    REQUIRE(unpadded % 32 != 0);
    bytes.resize(unpadded);
    REQUIRE(gf.parse(bytes).ok());
    CHECK((gf.keys() == 2 && gf.tensors() == 0));
}
