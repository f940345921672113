// ctformer/text/pretokenize.hpp — GPT-2's pre-tokenization without a regex engine. The pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// tried alternative by alternative at each position, as its reference encoder's regular
// expression does: contractions, letters, numbers, other characters (each optionally after one
// space), then a run of whitespace that leaves its last character to the next word, then any
// whitespace. Letters and numbers are Unicode's classes (unicode_classes.hpp), whitespace
// JavaScript's \s. An invalid UTF-8 byte is one "other" character.
#pragma once
#include <cstddef>
#include <cstdint>

#include "unicode_classes.hpp"
#include "utf8.hpp"

namespace ctformer::text {

namespace detail {
template <std::size_t N> constexpr bool in_ranges(const unicode::code_range (&r)[N], std::uint32_t cp) {
    std::size_t lo = 0, hi = N;
    while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return true;
    }
    return false;
}
enum class char_class : std::uint8_t { letter, number, space, other };
constexpr bool js_space(std::uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}
constexpr char_class classify(std::uint32_t cp) {
    if (cp < 0x80) {  // (ASCII without the tables)
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return char_class::letter;
        if (cp >= '0' && cp <= '9') return char_class::number;
        return js_space(cp) ? char_class::space : char_class::other;
    }
    if (cp == utf8::invalid) return char_class::other;
    if (js_space(cp)) return char_class::space;
    if (in_ranges(unicode::letters, cp)) return char_class::letter;
    if (in_ranges(unicode::numbers, cp)) return char_class::number;
    return char_class::other;
}
struct character {
    char_class cls;
    std::size_t len;
    bool ascii_space;  // U+0020, the optional space of the pattern
};
constexpr character char_at(const char* s, std::size_t n) {
    const utf8::decoded d = utf8::decode(s, n);
    return {classify(d.cp), d.len, d.cp == 0x20};
}
}  // namespace detail

// The end of the word that starts at s[pos] (pos < n).
constexpr std::size_t gpt2_word_end(const char* s, std::size_t n, std::size_t pos) {
    using detail::char_class;
    auto at = [&](std::size_t p) { return detail::char_at(s + p, n - p); };
    auto run = [&](std::size_t p, char_class c) {  // the end of a run of class c from p
        while (p < n) {
            const auto ch = at(p);
            if (ch.cls != c) break;
            p += ch.len;
        }
        return p;
    };
    if (s[pos] == '\'' && pos + 1 < n) {
        const char a = s[pos + 1], b = pos + 2 < n ? s[pos + 2] : '\0';
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
    }
    const auto c = at(pos);
    if (c.ascii_space && pos + 1 < n) {  // " ?" before letters, numbers or others
        const auto d = at(pos + 1);
        if (d.cls != char_class::space) return run(pos + 1, d.cls);
    }
    if (c.cls != char_class::space) return run(pos, c.cls);
    const std::size_t end = run(pos, char_class::space);
    if (end == n) return end;
    // \s+(?!\S): all but the last whitespace character, if that leaves any; else \s+
    std::size_t last = pos;
    for (std::size_t p = pos; p < end; p += at(p).len) last = p;
    return last > pos ? last : end;
}

}  // namespace ctformer::text
