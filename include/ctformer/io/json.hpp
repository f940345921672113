// ctformer/io/json.hpp — the JSON of a safetensors header: a validating tokenizer over the
// header's bytes and JSON string escapes (names are compared through their decoded form). No
// heap: every value is a view into the header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ctformer::safetensors {

namespace detail {
// The 4 hex digits at q (bounded by end), or -1.
inline long hex4(const char* q, const char* end) {
    if (end - q < 4) return -1;
    long v = 0;
    for (int i = 0; i < 4; ++i) {
        const char c = q[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : ((c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1);
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

// A strict, allocation-free reader of the JSON subset a safetensors header uses.
struct json {
    const char* p;
    const char* end;
    bool ok = true;

    void ws() {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
    }
    bool eat(char c) {
        ws();
        if (p < end && *p == c) {
            ++p;
            return true;
        }
        return false;
    }
    bool expect(char c) { return ok = ok && eat(c); }
    [[gnu::cold]] std::string_view string() {
        ws();
        if (!(p < end && *p == '"')) return ok = false, std::string_view{};
        const char* s = ++p;
        while (p < end && *p != '"') {
            if (static_cast<unsigned char>(*p) < 0x20) return ok = false, std::string_view{};
            if (*p == '\\') {
                if (++p >= end) return ok = false, std::string_view{};
                if (*p == 'u') {
                    // a UTF-16 unit; surrogates must pair (a high one, then \u and a low one)
                    const long u = hex4(p + 1, end);
                    if (u < 0 || (u >= 0xDC00 && u <= 0xDFFF)) return ok = false, std::string_view{};
                    p += 4;
                    if (u >= 0xD800 && u <= 0xDBFF) {
                        const long lo = end - p > 6 && p[1] == '\\' && p[2] == 'u' ? hex4(p + 3, end) : -1;
                        if (lo < 0xDC00 || lo > 0xDFFF) return ok = false, std::string_view{};
                        p += 6;
                    }
                } else if (std::string_view("\"\\/bfnrt").find(*p) == std::string_view::npos) {  // (not strchr: it finds '\0')
                    return ok = false, std::string_view{};
                }
            }
            ++p;
        }
        if (p >= end) return ok = false, std::string_view{};
        return std::string_view(s, static_cast<std::size_t>(p++ - s));
    }
    std::uint64_t uint() {
        ws();
        if (!(p < end && *p >= '0' && *p <= '9')) return ok = false, 0;
        if (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9') return ok = false, 0;  // no leading zeros
        std::uint64_t v = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            const std::uint64_t d = static_cast<std::uint64_t>(*p++ - '0');
            if (v > UINT64_MAX / 10 || (v == UINT64_MAX / 10 && d > UINT64_MAX % 10)) return ok = false, 0;
            v = v * 10 + d;
        }
        if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return ok = false, 0;
        return v;
    }
};
// Reads a JSON string body (validated by json::string) one decoded UTF-8 byte at a time.
struct unescaper {
    std::string_view s;
    std::size_t i = 0;
    unsigned char buf[4] = {};
    int len = 0, pos = 0;
    long hex(std::size_t at) const { return hex4(s.data() + at, s.data() + s.size()); }
    [[gnu::cold]] bool next(char& c) {
        if (pos < len) return c = static_cast<char>(buf[pos++]), true;
        if (i >= s.size()) return false;
        if (s[i] != '\\') return c = s[i++], true;
        const char e = s[i + 1];
        i += 2;
        if (e != 'u') {
            constexpr std::string_view from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
            const std::size_t k = from.find(e);  // always found in a parsed name
            return c = k < to.size() ? to[k] : e, true;
        }
        unsigned long cp = static_cast<unsigned long>(hex(i));
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {  // paired by the parser
            cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<unsigned long>(hex(i + 2)) - 0xDC00);
            i += 6;
        }
        len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        static constexpr unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
        for (int k = len - 1; k > 0; --k, cp >>= 6) buf[k] = static_cast<unsigned char>(0x80 | (cp & 0x3F));
        buf[0] = static_cast<unsigned char>(len == 1 ? cp : (lead[len] | cp));
        pos = 1;
        return c = static_cast<char>(buf[0]), true;
    }
};
// Whether the decoded name a (escaped: may hold escapes) starts with, or equals, plain + rest.
[[gnu::cold]] inline bool decoded_match(std::string_view a, bool escaped, std::string_view plain, std::string_view rest, bool whole) {
    if (!escaped) {
        if (!a.starts_with(plain)) return false;
        a.remove_prefix(plain.size());
        return whole ? a == rest : a.starts_with(rest);
    }
    unescaper u{a};
    char c = 0;
    for (std::string_view part : {plain, rest})
        for (char want : part)
            if (!u.next(c) || c != want) return false;
    return !whole || !u.next(c);
}
inline bool decoded_equal(std::string_view a, bool ae, std::string_view b, bool be) {
    if (!ae && !be) return a == b;
    unescaper x{a}, y{b};
    char c = 0, d = 0;
    for (;;) {
        const bool more = x.next(c);
        if (more != y.next(d)) return false;
        if (!more) return true;
        if (c != d) return false;
    }
}
}  // namespace detail

}  // namespace ctformer::safetensors
