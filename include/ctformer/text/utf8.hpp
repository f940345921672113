// ctformer/text/utf8.hpp — UTF-8 as the tokenizers read it: one character's length and code point
// with SentencePiece's validity rule (no overlong forms, no surrogates, nothing past U+10FFFF), and
// the replacement character that stands for an invalid byte.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ctformer::text::utf8 {

inline constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD
inline constexpr std::uint32_t invalid = 0xFFFFFFFFu;

constexpr bool trail(unsigned char c) { return (c & 0xC0) == 0x80; }

struct decoded {
    std::uint32_t cp;  // invalid: a byte that starts no valid character
    std::size_t len;   // bytes consumed (1 for an invalid byte)
};

// The character at s[0..n) (n > 0).
constexpr decoded decode(const char* s, std::size_t n) {
    const auto b = [s](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const unsigned char c = b(0);
    if (c < 0x80) return {c, 1};
    if (n >= 2 && (c & 0xE0) == 0xC0 && trail(b(1))) {
        const std::uint32_t cp = ((c & 0x1Fu) << 6) | (b(1) & 0x3Fu);
        if (cp >= 0x80) return {cp, 2};
    } else if (n >= 3 && (c & 0xF0) == 0xE0 && trail(b(1)) && trail(b(2))) {
        const std::uint32_t cp = ((c & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
        if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {cp, 3};
    } else if (n >= 4 && (c & 0xF8) == 0xF0 && trail(b(1)) && trail(b(2)) && trail(b(3))) {
        const std::uint32_t cp =
            ((c & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
        if (cp >= 0x10000 && cp <= 0x10FFFF) return {cp, 4};
    }
    return {invalid, 1};
}

// The length its first byte announces (SentencePiece's OneCharLen), at most n.
constexpr std::size_t announced_length(const char* s, std::size_t n) {
    constexpr unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    const std::size_t l = len[static_cast<unsigned char>(s[0]) >> 4];
    return l < n ? l : n;
}

// How many bytes of s[0..n) form a prefix of some valid character (0: s[0] starts none; n: all of
// them, the character may complete with more bytes). The streaming decoder holds such a tail.
constexpr std::size_t valid_prefix(const char* s, std::size_t n) {
    const auto b = [s](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const unsigned char c = b(0);
    std::size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (WHATWG's table)
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) need = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) need = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return c < 0x80 ? 1 : 0;
    std::size_t k = 1;
    for (; k < need && k < n; ++k) {
        const unsigned char t = b(k);
        if (k == 1 ? (t < lo || t > hi) : !trail(t)) break;
    }
    return k;
}

// s[pos .. pos+n) clamped to s (string_view::substr without its exception: the library throws none)
constexpr std::string_view slice(std::string_view s, std::size_t pos, std::size_t n = std::string_view::npos) {
    pos = pos < s.size() ? pos : s.size();
    return {s.data() + pos, n < s.size() - pos ? n : s.size() - pos};
}

constexpr std::size_t needed(unsigned char c) {
    return c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
}

}  // namespace ctformer::text::utf8
