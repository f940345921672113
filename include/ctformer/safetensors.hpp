// ctformer/safetensors.hpp — reading and writing the safetensors format over caller-owned bytes.
//
// No heap, no exceptions: parse() validates the whole header (JSON syntax, dtypes, shapes,
// offsets inside the buffer, no overlaps, no duplicates) into an index of fixed capacity, and
// load_state_dict() checks every name, shape and dtype before it writes anything, so a failed
// load leaves the params exactly as they were. Every failure is a status naming tensor and problem.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "params.hpp"
#include "status.hpp"

namespace ctformer {

namespace safetensors {

enum class dtype : std::uint8_t { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64 };
inline constexpr std::string_view dtype_names[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
                                                   "BF16", "I32", "U32", "F32", "I64",     "U64",     "F64"};
inline constexpr std::size_t dtype_size(dtype d) {
    constexpr std::size_t s[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    return s[static_cast<std::size_t>(d)];
}
template <class T> inline constexpr dtype dtype_of = std::is_same_v<T, double> ? dtype::F64
                                                     : std::is_same_v<T, bool> ? dtype::BOOL : dtype::F32;

inline constexpr std::size_t max_rank = 8;

struct entry {
    std::string_view name;  // as spelled in the header; compare through names_equal (escapes decoded)
    bool escaped = false;   // name contains a JSON escape sequence
    dtype type;
    std::uint8_t rank;
    std::array<std::uint64_t, max_rank> shape;
    std::uint64_t begin, end;  // byte offsets into the data section
    std::uint64_t numel() const {
        std::uint64_t n = 1;
        for (std::size_t i = 0; i < rank; ++i) n *= shape[i];
        return n;
    }
};

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
    std::string_view string() {
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
    bool next(char& c) {
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
inline bool decoded_match(std::string_view a, bool escaped, std::string_view plain, std::string_view rest, bool whole) {
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

// The parsed index of one safetensors buffer. Capacity is a compile-time constant so the index
// can live in static storage; it points into the caller's bytes, which must outlive it.
template <std::size_t Capacity = 128> class file {
  public:
    status parse(std::span<const std::byte> bytes) {
        count_ = 0;
        data_ = nullptr;
        data_size_ = 0;
        metadata_ = {};
        if (bytes.size() < 8) return status::error(errc::truncated);
        std::uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
        if (n > bytes.size() - 8) return status::error(errc::truncated);
        const char* h = reinterpret_cast<const char*>(bytes.data() + 8);
        detail::json js{h, h + n};
        std::size_t count = 0;
        status st = parse_header(js, count);
        if (!st) return st;
        const std::uint64_t data_size = bytes.size() - 8 - n;
        std::uint64_t covered = 0;
        for (std::size_t i = 0; i < count; ++i) {
            const entry& e = entries_[i];
            const std::uint64_t numel = e.numel();
            if (e.begin > e.end || e.end - e.begin != numel * dtype_size(e.type))  // numel <= 2^56: no overflow
                return status::error(errc::bad_offsets, e.name);
            if (e.end > data_size) return status::error(errc::truncated, e.name);
            bool follows = e.begin == 0;  // starts the data section or where another tensor ends
            for (std::size_t j = 0; j < count; ++j) {
                const entry& o = entries_[j];
                if (j < i && detail::decoded_equal(o.name, o.escaped, e.name, e.escaped))
                    return status::error(errc::duplicate_tensor, e.name);
                if (j < i && e.begin < o.end && o.begin < e.end) return status::error(errc::overlapping_data, e.name);
                follows = follows || (j != i && o.end == e.begin);
            }
            if (!follows) return status::error(errc::bad_offsets, e.name);  // a gap before it
            covered += e.end - e.begin;
        }
        // Disjoint, gap-free tensors that cover the data section exactly, as the reference
        // implementation requires: trailing bytes are an error too.
        if (covered != data_size) return status::error(errc::bad_offsets);
        count_ = count;
        data_ = bytes.data() + 8 + n;
        data_size_ = data_size;
        return {};
    }

    std::size_t size() const { return count_; }
    const entry& operator[](std::size_t i) const { return entries_[i]; }
    // The tensor named prefix + name (names compared with their escapes decoded), or null.
    const entry* find(std::string_view name) const { return find({}, name); }
    const entry* find(std::string_view prefix, std::string_view name) const {
        for (std::size_t i = 0; i < count_; ++i)
            if (detail::decoded_match(entries_[i].name, entries_[i].escaped, prefix, name, true)) return &entries_[i];
        return nullptr;
    }
    // Whether e's decoded name starts with prefix.
    static bool under(const entry& e, std::string_view prefix) {
        return detail::decoded_match(e.name, e.escaped, prefix, {}, false);
    }
    const std::byte* data(const entry& e) const { return data_ + e.begin; }
    // A string value of __metadata__ (raw, escapes not decoded), or empty.
    std::string_view metadata(std::string_view key) const {
        detail::json js{metadata_.data(), metadata_.data() + metadata_.size()};
        if (metadata_.empty() || !js.eat('{') || js.eat('}')) return {};
        do {
            const std::string_view k = js.string();
            js.expect(':');
            const std::string_view v = js.string();
            if (!js.ok) return {};
            if (k == key) return v;
        } while (js.eat(','));
        return {};
    }

    // Element i of e converted to T (F32/F64 to float/double, BOOL to bool).
    template <class T> T element(const entry& e, std::size_t i) const {
        const std::byte* src = data(e) + i * dtype_size(e.type);
        if (e.type == dtype::F32) {
            float v;
            std::memcpy(&v, src, 4);
            return static_cast<T>(v);
        } else if (e.type == dtype::F64) {
            double v;
            std::memcpy(&v, src, 8);
            return static_cast<T>(v);
        } else {
            return static_cast<T>(std::to_integer<std::uint8_t>(*src) != 0);
        }
    }

  private:
    status parse_header(detail::json& js, std::size_t& count) {
        if (!js.expect('{')) return status::error(errc::malformed_header);
        if (js.eat('}')) return js.ws(), js.p == js.end ? status{} : status::error(errc::malformed_header);
        do {
            const std::string_view name = js.string();
            if (!js.expect(':')) return status::error(errc::malformed_header, name);
            if (name == "__metadata__") {
                const char* start = js.p;
                if (!js.expect('{')) return status::error(errc::malformed_header, name);
                if (!js.eat('}')) {
                    do {
                        js.string();
                        js.expect(':');
                        js.string();
                    } while (js.ok && js.eat(','));
                    if (!js.expect('}')) return status::error(errc::malformed_header, name);
                }
                metadata_ = std::string_view(start, static_cast<std::size_t>(js.p - start));
                continue;
            }
            if (count == Capacity) return status::error(errc::too_many_tensors, name);
            entry& e = entries_[count];
            e = entry{};
            e.name = name;
            e.escaped = name.find('\\') != std::string_view::npos;
            status st = parse_entry(js, e);
            if (!st) return st;
            ++count;
        } while (js.eat(','));
        if (!js.expect('}')) return status::error(errc::malformed_header);
        js.ws();
        if (js.p != js.end) return status::error(errc::malformed_header);
        return {};
    }

    static status parse_entry(detail::json& js, entry& e) {
        bool has_dtype = false, has_shape = false, has_offsets = false;
        if (!js.expect('{')) return status::error(errc::malformed_header, e.name);
        do {
            const std::string_view key = js.string();
            if (!js.expect(':')) return status::error(errc::malformed_header, e.name);
            if (key == "dtype" && !has_dtype) {
                const std::string_view d = js.string();
                if (!js.ok) return status::error(errc::malformed_header, e.name);
                std::size_t k = 0;
                while (k < std::size(dtype_names) && dtype_names[k] != d) ++k;
                if (k == std::size(dtype_names)) return status::error(errc::unsupported_dtype, e.name);
                e.type = static_cast<dtype>(k);
                has_dtype = true;
            } else if (key == "shape" && !has_shape) {
                if (!js.expect('[')) return status::error(errc::malformed_header, e.name);
                if (!js.eat(']')) {
                    do {
                        if (e.rank == max_rank) return status::error(errc::malformed_header, e.name);
                        e.shape[e.rank++] = js.uint();
                    } while (js.ok && js.eat(','));
                    if (!js.expect(']')) return status::error(errc::malformed_header, e.name);
                }
                has_shape = true;
            } else if (key == "data_offsets" && !has_offsets) {
                js.expect('[');
                e.begin = js.uint();
                js.expect(',');
                e.end = js.uint();
                if (!js.expect(']')) return status::error(errc::malformed_header, e.name);
                has_offsets = true;
            } else {
                return status::error(errc::malformed_header, e.name);
            }
        } while (js.ok && js.eat(','));
        if (!js.expect('}') || !has_dtype || !has_shape || !has_offsets)
            return status::error(errc::malformed_header, e.name);
        std::uint64_t numel = 1;  // bounded so numel * dtype size cannot overflow
        for (std::size_t i = 0; i < e.rank; ++i) {
            // (no 64-bit division: a software routine on 32-bit targets)
            if (__builtin_mul_overflow(numel, e.shape[i], &numel) || numel > (std::uint64_t{1} << 56))
                return status::error(errc::bad_offsets, e.name);
        }
        return {};
    }

    std::array<entry, Capacity> entries_{};
    std::size_t count_ = 0;
    const std::byte* data_ = nullptr;
    std::uint64_t data_size_ = 0;
    std::string_view metadata_{};
};

// What a load accepts beyond names, shapes and dtypes. A finite F64 value too large for a float
// destination is always an error (errc::value_out_of_range), never a silent inf.
struct load_options {
    bool reject_non_finite = false;  // NaN or inf in the file: errc::non_finite
    double max_abs = 0;              // > 0: any |value| above it is errc::value_out_of_range
};

namespace detail {
// A tensor as the loader sees it, whatever its C++ type: the loader is compiled once per element
// type, not once per tensor shape (code size on a microcontroller, compile time everywhere).
// Element i in PyTorch's row-major order is storage[index(i)].
template <class T> struct tensor_ref {
    T* storage;
    std::size_t rank, size;
    const std::size_t* shape;
    std::size_t in = 0, seg = 0, segment_elems = 0;  // a PackedWeight's panel layout (in == 0: plain)
    std::size_t index(std::size_t i) const {
        if (in == 0) return i;
        const std::size_t o = i / in, k = i % in;
        return o / seg * segment_elems + kernels::panel_index<std::remove_const_t<T>>(in, k, o % seg);
    }
};
template <class X> auto ref_of(X& x) {
    using T = std::conditional_t<std::is_const_v<X>, const typename X::value_type, typename X::value_type>;
    tensor_ref<T> r{x.storage, X::rank, X::size, X::shape.data()};
    if constexpr (requires { X::segment_elems; }) r.in = X::in_features, r.seg = X::segment, r.segment_elems = X::segment_elems;
    return r;
}
// Checks that entry e can fill a T tensor of that shape (convertible dtype, every value acceptable).
template <class T, std::size_t Cap>
status check_shaped(const file<Cap>& f, const entry* e, std::string_view name, std::size_t rank, const std::size_t* shape,
                    std::size_t size, const load_options& opt) {
    if (!e) return status::error(errc::missing_tensor, name);
    const bool dtype_ok = std::is_same_v<T, bool> ? e->type == dtype::BOOL
                                                   : (e->type == dtype::F32 || e->type == dtype::F64);
    if (!dtype_ok) return status::error(errc::wrong_dtype, name);
    if (e->rank != rank) return status::error(errc::wrong_shape, name);
    for (std::size_t i = 0; i < rank; ++i)
        if (e->shape[i] != shape[i]) return status::error(errc::wrong_shape, name);
    // values need a pass only when they could fail: F64 into float, or an option asks
    const bool fits_by_type = e->type == dtype::F32 || std::is_same_v<T, double>;
    if (!std::is_same_v<T, bool> && (!fits_by_type || opt.reject_non_finite || opt.max_abs > 0)) {
        const double limit = std::is_same_v<T, float> ? double(std::numeric_limits<float>::max())
                                                      : std::numeric_limits<double>::max();
        for (std::size_t i = 0; i < size; ++i) {
            const double v = f.template element<double>(*e, i);
            const bool finite = v - v == 0;
            if (!finite && opt.reject_non_finite) return status::error(errc::non_finite, name);
            if (finite && (v > limit || v < -limit || (opt.max_abs > 0 && (v > opt.max_abs || v < -opt.max_abs))))
                return status::error(errc::value_out_of_range, name);
        }
    }
    return {};
}
// The tensor prefix + name of f into t, after the check accepted it. (This and check_named are
// kept out of line: one copy per element type, not one per tensor of a params struct.)
template <class T, std::size_t Cap>
[[gnu::noinline]] void write_named(const file<Cap>& f, std::string_view prefix, std::string_view name, const tensor_ref<T>& t) {
    const entry& e = *f.find(prefix, name);
    for (std::size_t i = 0; i < t.size; ++i) t.storage[t.index(i)] = f.template element<T>(e, i);
}
template <class T, std::size_t Cap>
[[gnu::noinline]] status check_named(const file<Cap>& f, std::string_view prefix, std::string_view name,
                                     const tensor_ref<const T>& t, const load_options& opt) {
    return check_shaped<T>(f, f.find(prefix, name), name, t.rank, t.shape, t.size, opt);
}
}  // namespace detail

// Checks that entry e can fill tensor X (same shape, convertible dtype, every value acceptable).
template <class X, std::size_t Cap>
status check_entry(const file<Cap>& f, const entry* e, std::string_view name, const load_options& opt = {}) {
    return detail::check_shaped<typename X::value_type>(f, e, name, X::rank, X::shape.data(), X::size, opt);
}

}  // namespace safetensors

// Loads every tensor of params from f under prefix (e.g. "params." or "layers.3."). Checks all
// names, shapes, dtypes and values first: on any error nothing has been written. Tensors under the
// prefix that params do not have are an error (unexpected_tensor); tensors outside it are ignored.
namespace safetensors::detail {
template <class P, std::size_t Cap>
status check_state(const P& params, const file<Cap>& f, std::string_view prefix, const load_options& opt) {
    status result;
    std::size_t matched = 0;
    for_each_tensor(params, [&](std::string_view name, const auto& t) {
        if (!result) return;
        result = check_named(f, prefix, name, ref_of(t), opt);
        ++matched;
    });
    if (!result) return result;
    std::size_t under_prefix = 0;
    for (std::size_t i = 0; i < f.size(); ++i)
        if (f.under(f[i], prefix)) ++under_prefix;
    if (under_prefix != matched) {  // some name under the prefix is not a parameter: find it
        for (std::size_t i = 0; i < f.size(); ++i) {
            if (!f.under(f[i], prefix)) continue;
            bool known = false;
            for_each_tensor(params, [&](std::string_view name, const auto&) {
                known = known || safetensors::detail::decoded_match(f[i].name, f[i].escaped, prefix, name, true);
            });
            if (!known) return status::error(errc::unexpected_tensor, f[i].name);
        }
    }
    return {};
}
// After check_state accepted every tensor.
template <class P, std::size_t Cap> void write_state(P& params, const file<Cap>& f, std::string_view prefix) {
    for_each_tensor(params, [&](std::string_view name, auto& t) { write_named(f, prefix, name, ref_of(t)); });
}
}  // namespace safetensors::detail

template <class P, std::size_t Cap>
status load_state_dict(P& params, const safetensors::file<Cap>& f, std::string_view prefix = {},
                       const safetensors::load_options& opt = {}) {
    if (status st = safetensors::detail::check_state(static_cast<const P&>(params), f, prefix, opt); !st) return st;
    safetensors::detail::write_state(params, f, prefix);
    return {};
}

// One object of a multi-object load.
template <class P> struct state_target {
    std::string_view prefix;
    P& object;
};
template <class P> state_target(std::string_view, P&) -> state_target<P>;

// Loads several objects from one file (a checkpoint: params and optimizer state), all or nothing:
// every object is checked as load_state_dict checks one before any is written.
template <std::size_t Cap, class... P>
status load_state_dicts(const safetensors::file<Cap>& f, const safetensors::load_options& opt,
                        const state_target<P>&... parts) {
    status st;
    ((st = st ? safetensors::detail::check_state(static_cast<const P&>(parts.object), f, parts.prefix, opt) : st), ...);
    if (!st) return st;
    (safetensors::detail::write_state(parts.object, f, parts.prefix), ...);
    return {};
}

// Parses bytes with an index on the stack (safetensors::file<128>: 13,352 bytes on 64-bit
// targets, checked by tests/test_safetensors.cpp) and loads params.
template <class P>
status load_state_dict(P& params, std::span<const std::byte> bytes, std::string_view prefix = {},
                       const safetensors::load_options& opt = {}) {
    safetensors::file<128> f;
    if (status st = f.parse(bytes); !st) return st;
    return load_state_dict(params, f, prefix, opt);
}

// Reads one tensor (an input, a mask) by full name into a statically shaped tensor; checked like
// a parameter (out holds its old values after an error).
template <class X, std::size_t Cap>
status read_tensor(const safetensors::file<Cap>& f, std::string_view name, X& out,
                   const safetensors::load_options& opt = {}) {
    const safetensors::entry* e = f.find(name);
    if (status st = safetensors::check_entry<X>(f, e, name, opt); !st) return st;
    for (std::size_t i = 0; i < X::size; ++i) out.set(i, f.template element<typename X::value_type>(*e, i));
    return {};
}

// ---- Writer ----
struct save_result {
    status st;
    std::size_t bytes = 0;  // bytes written (or needed, when the buffer was too small)
};

// One object of a multi-object file: its tensors are written under prefix.
template <class P> struct named_state {
    std::string_view prefix;
    const P& object;
};
template <class P> named_state(std::string_view, const P&) -> named_state<P>;

// Writes objects (params, gradients, optimizer state: anything for_each_tensor walks) as one
// safetensors file, each tensor named prefix + its dotted name, values in their dtype and
// PyTorch's layouts. With an empty out buffer it only computes the size needed.
template <class... P> save_result save_state_dicts(std::span<std::byte> out, const named_state<P>&... parts) {
    struct sink {
        std::span<std::byte> out;
        std::size_t n = 0;
        void put(const void* p, std::size_t len) {
            if (len && n + len <= out.size()) std::memcpy(out.data() + n, p, len);
            n += len;
        }
        void str(std::string_view s) { put(s.data(), s.size()); }
        void num(std::uint64_t v) {
            char buf[24];
            int k = 0;
            do buf[k++] = static_cast<char>('0' + v % 10); while ((v /= 10) != 0);
            while (k) put(&buf[--k], 1);
        }
    };
    // Header into out[8..], measured first so the data section can follow it.
    auto write_header = [&](sink& s) {
        std::uint64_t off = 0;
        bool first = true;
        s.str("{");
        auto entry = [&](std::string_view prefix, std::string_view name, const auto& t) {
            using X = std::remove_cvref_t<decltype(t)>;
            using T = typename X::value_type;
            if (!first) s.str(",");
            first = false;
            s.str("\"");
            s.str(prefix);
            s.str(name);
            s.str("\":{\"dtype\":\"");
            s.str(safetensors::dtype_names[static_cast<std::size_t>(safetensors::dtype_of<T>)]);
            s.str("\",\"shape\":[");
            for (std::size_t i = 0; i < X::rank; ++i) {
                if (i) s.str(",");
                s.num(X::shape[i]);
            }
            s.str("],\"data_offsets\":[");
            s.num(off);
            s.str(",");
            off += X::size * sizeof(T);
            s.num(off);
            s.str("]}");
        };
        (for_each_tensor(parts.object, [&](std::string_view name, const auto& t) { entry(parts.prefix, name, t); }), ...);
        s.str("}");
        while (s.n % 8) s.str(" ");
        return off;
    };
    sink measure{{}, 0};
    const std::uint64_t data_bytes = write_header(measure);
    const std::size_t header = measure.n, total = 8 + header + data_bytes;
    if (out.size() < total) return {status::error(errc::buffer_too_small), total};
    std::uint64_t hn = header;
    for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::byte>((hn >> (8 * i)) & 0xff);
    sink hs{out.subspan(8, header), 0};
    write_header(hs);
    sink ds{out.subspan(8 + header), 0};
    auto data = [&](std::string_view, const auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) {
            const auto v = t.get(i);
            ds.put(&v, sizeof v);
        }
    };
    (for_each_tensor(parts.object, data), ...);
    return {{}, total};
}

// One object (params, grads) under an optional prefix.
template <class P>
save_result save_state_dict(const P& params, std::span<std::byte> out, std::string_view prefix = {}) {
    return save_state_dicts(out, named_state<P>{prefix, params});
}

}  // namespace ctformer
