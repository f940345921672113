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
#endif
