// ctformer/text/normalizer.hpp — SentencePiece's normalization, as its normalizer.cc defines it:
// each prefix of the text becomes its character map's replacement (nmt_nfkc and the like; the
// map's longest rule), or stays itself (identity); an invalid byte becomes U+FFFD; spaces become
// "▁" (escape_whitespaces), runs of spaces and leading/trailing ones go (remove_extra_whitespaces),
// one "▁" goes in front (add_dummy_prefix). User-defined pieces pass unchanged.
#pragma once
#include <cstddef>
#include <string_view>

#include "../core/status.hpp"
#include "tables.hpp"
#include "utf8.hpp"

namespace ctformer::text {

inline constexpr std::string_view space_symbol = "\xE2\x96\x81";  // U+2581 "▁"

namespace detail {
struct normalized_prefix {
    std::string_view to;   // what the prefix becomes
    std::size_t consumed;  // bytes of input it covers
};
constexpr normalized_prefix normalize_one(const tables& t, const char* s, std::size_t n, bool literals) {
    if (literals)
        if (const auto m = t.literal_at(s, n); m.len) return {std::string_view(s, m.len), m.len};
    if (t.has_charsmap())
        if (const auto r = t.normalize_prefix(s, n); r.len) return {r.to, r.len};
    const utf8::decoded d = utf8::decode(s, n);
    if (d.cp == utf8::invalid) return {utf8::replacement, 1};
    return {std::string_view(s, d.len), d.len};
}
}  // namespace detail

// out[0..len) = text normalized; errc::buffer_too_small when it needs more than cap bytes.
// literals: user-defined pieces are kept as they are (SentencePiece; not where the caller already
// cut the text at its literal tokens).
constexpr status normalize(const tables& t, std::string_view text, bool literals, char* out, std::size_t cap,
                           std::size_t& len) {
    const tokenizer_config& c = t.config();
    len = 0;
    auto put = [&](std::string_view s) {
        if (s.size() > cap - len) return false;
        for (char ch : s) out[len++] = ch;
        return true;
    };
    const std::string_view space = c.escape_whitespaces ? space_symbol : std::string_view(" ");
    const char* s = text.data();
    std::size_t n = text.size(), pos = 0;
    if (c.remove_extra_whitespaces)
        while (pos < n) {
            const auto p = detail::normalize_one(t, s + pos, n - pos, literals);
            if (p.to != " ") break;
            pos += p.consumed;
        }
    if (pos == n) return {};
    if (c.add_dummy_prefix && !put(space)) return status::error(errc::buffer_too_small, "normalized text");
    bool prev_space = c.remove_extra_whitespaces;
    while (pos < n) {
        const auto p = detail::normalize_one(t, s + pos, n - pos, literals);
        std::string_view sp = p.to;
        while (prev_space && !sp.empty() && sp.front() == ' ') sp.remove_prefix(1);
        if (!sp.empty()) {
            for (char ch : sp)
                if (!put(ch == ' ' && c.escape_whitespaces ? space_symbol : std::string_view(&ch, 1)))
                    return status::error(errc::buffer_too_small, "normalized text");
            prev_space = sp.back() == ' ';
        }
        pos += p.consumed;
        if (!c.remove_extra_whitespaces) prev_space = false;
    }
    if (c.remove_extra_whitespaces)
        while (len >= space.size() && std::string_view(out + len - space.size(), space.size()) == space) len -= space.size();
    return {};
}

}  // namespace ctformer::text
