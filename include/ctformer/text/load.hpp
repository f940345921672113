// ctformer/text/load.hpp — a tokenizer from a safetensors file (tools/export.py --tokenizer, or a
// model's file that carries one), read in place: the tensors "tokenizer.*" and the metadata
// "tokenizer.*" become the tables' views; nothing is copied. The file's bytes must outlive it.
//
//   ct::mapped_file m;  m.open("tokenizer.safetensors");
//   static ct::safetensors::file<> f;  f.parse(m.bytes());
//   static ct::tokenizer tok;  ct::status s = ct::load_tokenizer(f, tok);
//   s = ct::check_tokenizer<Model>(tok);            // its ids fit the model's vocabulary
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../core/status.hpp"
#include "../io/safetensors.hpp"
#include "tables.hpp"
#include "tokenizer.hpp"

namespace ctformer {

inline constexpr std::string_view tokenizer_format = "ctformer.tokenizer.4";

namespace detail {
constexpr bool parse_int(std::string_view s, std::int64_t& v) {
    bool neg = !s.empty() && s[0] == '-';
    if (neg) s.remove_prefix(1);
    if (s.empty() || s.size() > 12) return false;
    v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    v = neg ? -v : v;
    return true;
}
constexpr bool parse_kind(std::string_view s, text::tokenizer_kind& k) {
    using K = text::tokenizer_kind;
    if (s == "sentencepiece_bpe") k = K::sentencepiece_bpe;
    else if (s == "sentencepiece_unigram") k = K::sentencepiece_unigram;
    else if (s == "bpe") k = K::bpe;
    else if (s == "byte_level_bpe") k = K::byte_level_bpe;
    else return false;
    return true;
}

// The configuration from metadata: get(key) -> the value string (empty if absent).
template <class Get> constexpr status tokenizer_config_from(Get&& get, text::tokenizer_config& c, std::int64_t& vocab) {
    if (get("tokenizer.format") != tokenizer_format)
        return status::error(errc::config_mismatch, "tokenizer.format");  // (not ctformer.tokenizer.4)
    if (!parse_kind(get("tokenizer.kind"), c.kind)) return status::error(errc::config_mismatch, "tokenizer.kind");
    if (!parse_int(get("tokenizer.vocab"), vocab)) return status::error(errc::malformed_header, "tokenizer.vocab");
    struct id_field {
        const char* key;
        std::int32_t* to;
    };
    for (const id_field f : {id_field{"tokenizer.bos", &c.bos}, id_field{"tokenizer.eos", &c.eos},
                             id_field{"tokenizer.unk", &c.unk}, id_field{"tokenizer.pad", &c.pad}}) {
        std::int64_t v = 0;
        if (!parse_int(get(f.key), v) || v < -1 || v > 0x7FFFFFFF) return status::error(errc::malformed_header, f.key);
        *f.to = static_cast<std::int32_t>(v);
    }
    struct flag_field {
        const char* key;
        bool* to;
    };
    for (const flag_field f : {flag_field{"tokenizer.add_dummy_prefix", &c.add_dummy_prefix},
                               flag_field{"tokenizer.remove_extra_whitespaces", &c.remove_extra_whitespaces},
                               flag_field{"tokenizer.escape_whitespaces", &c.escape_whitespaces},
                               flag_field{"tokenizer.byte_fallback", &c.byte_fallback},
                               flag_field{"tokenizer.split_literals", &c.split_literals}}) {
        const std::string_view v = get(f.key);
        if (v != "true" && v != "false") return status::error(errc::malformed_header, f.key);
        *f.to = v == "true";
    }
    return {};
}
}  // namespace detail

// The tokenizer of a generated header's tables and metadata.
template <std::size_t N>
constexpr status make_tokenizer(const text::raw_tables& r, const text::metadata_pair (&meta)[N], tokenizer& out) {
    auto get = [&](std::string_view k) {
        for (const auto& m : meta)
            if (m.key == k) return m.value;
        return std::string_view{};
    };
    text::tokenizer_config c;
    std::int64_t vocab = 0;
    if (status s = detail::tokenizer_config_from(get, c, vocab); !s) return s;
    tokenizer t;
    if (status s = tokenizer::make(r, c, t); !s) return s;
    if (static_cast<std::int64_t>(t.vocab()) != vocab) return status::error(errc::config_mismatch, "tokenizer.vocab");
    out = t;
    return {};
}

// The tokenizer in file f. Errors name the tensor or key; out is untouched on error.
template <std::size_t C> status load_tokenizer(const safetensors::file<C>& f, tokenizer& out) {
    using safetensors::dtype;
    text::raw_tables r;
    struct slot {
        const char* name;
        text::byte_span* to;
        dtype type;  // U32: U16 or U32 (an integer table of either width)
        bool required;
    };
    const slot slots[] = {{"tokenizer.bytes", &r.bytes, dtype::U8, true},
                          {"tokenizer.lengths", &r.lengths, dtype::U8, true},
                          {"tokenizer.offsets", &r.offsets, dtype::U32, true},
                          {"tokenizer.special", &r.special, dtype::U32, false},
                          {"tokenizer.special_bits", &r.special_bits, dtype::U8, true},
                          {"tokenizer.index", &r.index, dtype::U32, true},
                          {"tokenizer.displacements", &r.displacements, dtype::U16, true},
                          {"tokenizer.byte_ids", &r.byte_ids, dtype::U32, true},
                          {"tokenizer.scores", &r.scores, dtype::F32, false},
                          {"tokenizer.merges", &r.merges, dtype::U32, false},
                          {"tokenizer.merge_index", &r.merge_index, dtype::U32, false},
                          {"tokenizer.charsmap", &r.charsmap, dtype::U8, false},
                          {"tokenizer.literals", &r.literals, dtype::U32, false},
                          {"tokenizer.unk_surface", &r.unk_surface, dtype::U8, false},
                          {"tokenizer.prefixes", &r.prefixes, dtype::U8, false}};
    auto fixed_width = [](const char* name) {  // (offsets, special, literals: always U32)
        const std::string_view n = name;
        return n == "tokenizer.offsets" || n == "tokenizer.special" || n == "tokenizer.literals";
    };
    for (const slot& s : slots) {
        const safetensors::entry* e = f.find(s.name);
        if (!e) {
            if (s.required) return status::error(errc::missing_tensor, s.name);
            continue;
        }
        const bool narrow = s.type == dtype::U32 && !fixed_width(s.name) && e->type == dtype::U16;
        if (e->type != s.type && !narrow) return status::error(errc::wrong_dtype, s.name);
        *s.to = {reinterpret_cast<const char*>(f.data(*e)), static_cast<std::size_t>(e->end - e->begin),
                 static_cast<std::uint8_t>(e->type == dtype::U16 ? 2 : 4)};
    }
    for (std::size_t i = 0; i < f.size(); ++i) {
        if (!safetensors::file<C>::under(f[i], "tokenizer.")) continue;
        bool known = false;
        for (const slot& s : slots) known = known || f.find(s.name) == &f[i];
        if (!known) return status::error(errc::unexpected_tensor, f[i].name);
    }
    text::tokenizer_config c;
    std::int64_t vocab = 0;
    if (status s = detail::tokenizer_config_from([&](std::string_view k) { return f.metadata(k); }, c, vocab); !s)
        return s;
    tokenizer t;
    if (status s = tokenizer::make(r, c, t); !s) return s;
    if (static_cast<std::int64_t>(t.vocab()) != vocab) return status::error(errc::config_mismatch, "tokenizer.vocab");
    out = t;
    return {};
}

}  // namespace ctformer
