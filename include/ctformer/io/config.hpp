// ctformer/io/config.hpp — the configuration a file carries, checked against the C++ type at load.
//
// tools/export.py writes the model's configuration into the safetensors __metadata__ as
// "ctformer.<field>" strings (ctformer.kind, ctformer.d_model, ctformer.heads, ...): the fields a
// params type describes (layer/config.hpp: config::describe; stacks and models add theirs).
// load_state_dict compares each field the type describes with the file's before writing anything:
// a mistake that leaves every shape unchanged (heads 8 for 4, ReLU for GELU, norm_first, eps) is
// then errc::config_mismatch naming the field, the file's value and the type's, instead of a model
// that loads and computes something else. A file without "ctformer.kind" loads unchecked (unless
// load_options::require_config); one written for a part of a file (ctformer.prefix) is checked only
// when loaded at that prefix.
#pragma once
#include <cstddef>
#include <string_view>

#include "../core/status.hpp"
#include "safetensors.hpp"

namespace ctformer::safetensors::detail {

// A bounded text buffer (no heap): the mismatch message.
struct text {
    char buf[96]{};
    std::size_t n = 0;
    text& operator<<(std::string_view s) {
        for (char c : s)
            if (n + 1 < sizeof buf) buf[n++] = c;
        return *this;
    }
    text& operator<<(std::size_t v) {
        char d[20];
        std::size_t k = 0;
        do d[k++] = static_cast<char>('0' + v % 10); while ((v /= 10) != 0);
        while (k) *this << std::string_view(&d[--k], 1);
        return *this;
    }
    std::string_view view() const { return {buf, n}; }
};

// A decimal number as written by Python's repr (digits, '.', exponent); false if it is not one.
[[gnu::cold]] constexpr bool parse_number(std::string_view s, double& out) {
    std::size_t i = 0;
    const bool neg = i < s.size() && s[i] == '-';
    if (neg) ++i;
    double m = 0;
    int exp10 = 0, digits = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) m = m * 10 + (s[i] - '0');
    if (i < s.size() && s[i] == '.')
        for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits, --exp10) m = m * 10 + (s[i] - '0');
    if (digits == 0) return false;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        const bool eneg = i < s.size() && s[i] == '-';
        if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
        int e = 0, ed = 0;
        for (; i < s.size() && s[i] >= '0' && s[i] <= '9' && e < 10000; ++i, ++ed) e = e * 10 + (s[i] - '0');
        if (ed == 0) return false;
        exp10 += eneg ? -e : e;
    }
    if (i != s.size() || exp10 < -400 || exp10 > 400) return false;
    for (; exp10 > 0; --exp10) m *= 10;
    for (; exp10 < 0; ++exp10) m /= 10;
    out = neg ? -m : m;
    return true;
}

// One field: the file's value (empty: absent, not checked) against the type's.
struct field_check {
    std::string_view file;
    bool operator()(bool v) const { return file == (v ? "true" : "false"); }
    bool operator()(const char* v) const { return file == v; }
    bool operator()(std::size_t v) const {
        double d = 0;
        return parse_number(file, d) && d == static_cast<double>(v);
    }
    bool operator()(double v) const {  // (eps, written from a float: equal to 1e-6 relative)
        double d = 0;
        const double tol = 1e-6 * (v < 0 ? -v : v);
        return parse_number(file, d) && d - v <= tol && v - d <= tol;
    }
};
inline void append_value(text& t, bool v) { t << (v ? "true" : "false"); }
inline void append_value(text& t, const char* v) { t << v; }
inline void append_value(text& t, std::size_t v) { t << v; }
[[gnu::cold]] inline void append_value(text& t, double v) {  // three significant digits, d.dde-n (a file's: any double)
    if (v != v) return void(t << "nan");
    if (v < 0) t << "-", v = -v;
    if (v > 1.7976931348623157e308) return void(t << "inf");
    if (v == 0) return void(t << "0");
    int e = 0;
    while (v > 0 && v < 1) v *= 10, --e;
    while (v >= 10) v /= 10, ++e;
    auto m = static_cast<std::size_t>(v * 100 + 0.5);
    if (m >= 1000) m = (m + 5) / 10, ++e;  // (9.995 rounds to 10.0)
    t << m / 100 << "." << m / 10 % 10 << m % 10 << "e" << (e < 0 ? "-" : "") << static_cast<std::size_t>(e < 0 ? -e : e);
}

// A described value of any kind, so that one check (one copy of code) serves every field.
struct field_value {
    enum { boolean, string, count, real } kind;
    bool b = false;
    const char* s = nullptr;
    std::size_t n = 0;
    double d = 0;
    field_value(bool v) : kind(boolean), b(v) {}
    field_value(const char* v) : kind(string), s(v) {}
    field_value(std::size_t v) : kind(count), n(v) {}
    field_value(double v) : kind(real), d(v) {}
    template <class F> decltype(auto) visit(F&& f) const {
        switch (kind) {
            case boolean: return f(b);
            case string: return f(s);
            case count: return f(n);
            default: return f(d);
        }
    }
};

// One field the type describes against the file's metadata; st holds the first mismatch.
template <std::size_t Cap>
[[gnu::cold]] void check_field(const file<Cap>& f, status& st, std::string_view name, const field_value& value) {
    char key[64] = "ctformer.";
    std::size_t n = 9;
    for (char c : name)
        if (n + 1 < sizeof key) key[n++] = c;
    const std::string_view in_file = f.metadata(std::string_view(key, n));
    if (in_file.empty() || value.visit(field_check{in_file})) return;
    if (name == "weight_format" && in_file == "dense") return;  // quantized at load
    if (name == "weight_group" && f.metadata("ctformer.weight_format") == "dense") return;
    text t;
    t << name << ": file " << in_file << ", type ";
    value.visit([&t](auto v) { append_value(t, v); });
    st = status::error(errc::config_mismatch, t.view());
}

template <class P, std::size_t Cap>
[[gnu::cold]] status check_config(const file<Cap>& f, std::string_view prefix, bool require) {
    if constexpr (!requires { P::kind; }) {
        (void)f, (void)prefix, (void)require;
        return {};
    } else {
        const std::string_view kind = f.metadata("ctformer.kind");
        if (kind.empty())
            return require ? status::error(errc::config_mismatch, "ctformer.kind: the file carries no configuration")
                           : status{};
        if (f.metadata("ctformer.prefix") != prefix) return {};  // the configuration describes another part
        status st;
        auto check = [&](std::string_view name, auto value) {
            if (st) check_field(f, st, name, field_value(value));
        };
        check("kind", P::kind);
        P::describe(check);
        return st;
    }
}

}  // namespace ctformer::safetensors::detail
