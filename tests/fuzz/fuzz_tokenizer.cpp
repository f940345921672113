// libFuzzer target for the tokenizer: its file format and its input. A byte string starting with
// 'F' is a tokenizer file: it loads or returns an error (the tokenizer untouched), and a loaded one
// encodes and decodes without reading outside its tables. Any other byte string is text for the
// tables of the generated header (SentencePiece BPE, identity normalization, whitespace kept): it is
// encoded (ids in the vocabulary), decoded token by token (every piece of text the decoder emits is
// whole UTF-8), and where it is valid UTF-8 that needs no <unk> (and holds no "▁"), decoded back to
// itself.
// Built by .ci/run with clang -fsanitize=fuzzer,address,undefined; seeds in tests/fuzz/corpus_tokenizer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include <ctformer/text/load.hpp>

#include "sp_identity_tables.hpp"

namespace {
namespace ct = ctformer;
ct::tokenizer::Workspace<4096> ws;
ct::token ids[4096];
ct::tokenizer header, loaded;

void check_whole(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto d = ct::text::utf8::decode(s.data() + i, s.size() - i);
        if (d.cp == ct::text::utf8::invalid) std::abort();
        i += d.len;
    }
}

char decoded[3 * 4096 + 16];
std::size_t n_decoded = 0;
void keep(std::string_view s) {
    check_whole(s);
    for (const char c : s)
        if (n_decoded < sizeof decoded) decoded[n_decoded++] = c;
}
bool valid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto d = ct::text::utf8::decode(s.data() + i, s.size() - i);
        if (d.cp == ct::text::utf8::invalid) return false;
        i += d.len;
    }
    return true;
}

// Encodes text, decodes it token by token; lossless (valid UTF-8, no <unk>): decode(encode(text)) == text.
void exercise(const ct::tokenizer& t, std::string_view text, bool lossless_check) {
    std::size_t n = 0;
    if (!t.encode(text, ids, n, ws, {.add_bos = t.bos() >= 0})) return;
    ct::text_decoder dec(t);
    n_decoded = 0;
    bool unknown = false;
    for (std::size_t i = 0; i < n; ++i) {
        if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= t.vocab()) std::abort();
        unknown = unknown || ids[i] == t.unk();
        if (!dec.push(ids[i], keep)) std::abort();
    }
    dec.finish(keep);
    // (a "▁" in the text is a space to SentencePiece: it decodes as one)
    const bool lossless = !unknown && valid_utf8(text) && text.find("\xE2\x96\x81") == std::string_view::npos;
    if (lossless_check && lossless && std::string_view(decoded, n_decoded) != text) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (header.vocab() == 0 && !ct::make_tokenizer(sp_identity_tables, sp_identity_metadata, header)) std::abort();
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    if (size > 0 && in[0] == 'F') {
        const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1), size - 1);
        ct::safetensors::file<32> f;
        if (!f.parse(bytes)) return 0;
        loaded = header;
        const ct::status st = ct::load_tokenizer(f, loaded);
        if (!st && loaded.vocab() != header.vocab()) std::abort();  // an error changed the tokenizer
        if (!st) return 0;
        for (const std::string_view text : {"Hello world", "  two  spaces ", "\xff\xfe bytes \xe2\x82", "ctformer <|user|>"})
            exercise(loaded, text, false);
        ct::text_decoder dec(loaded);  // every id, in order
        for (std::size_t i = 0; i < loaded.vocab() && i < 4096; ++i)
            if (!dec.push(static_cast<ct::token>(i), check_whole)) std::abort();
        dec.finish(check_whole);
        return 0;
    }
    exercise(header, in, true);
    return 0;
}
