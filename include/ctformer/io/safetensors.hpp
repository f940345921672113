// ctformer/io/safetensors.hpp — the safetensors format over caller-owned bytes: dtypes, the parsed
// index of a file (state_dict.hpp binds it to params, both ways).
//
// No heap, no exceptions: parse() validates the whole header (JSON syntax, dtypes, shapes,
// offsets inside the buffer, no overlaps, no duplicates) into an index of fixed capacity, and
// load_state_dict() checks every name, shape and dtype before it writes anything, so a failed
// load leaves the params exactly as they were. Every failure is a status naming tensor and problem.
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "../core/status.hpp"
#include "../simd/half.hpp"
#include "json.hpp"

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



// The parsed index of one safetensors buffer. Capacity is a compile-time constant so the index
// can live in static storage; it points into the caller's bytes, which must outlive it.
template <std::size_t Capacity = 128> class file {
  public:
    // On error the index is empty: it keeps no view of bytes (its metadata included), which the
    // caller may free.
    status parse(std::span<const std::byte> bytes) {
        const status st = parse_into(bytes);
        if (!st) count_ = 0, data_ = nullptr, data_size_ = 0, metadata_ = {};
        return st;
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
    [[gnu::cold]] std::string_view metadata(std::string_view key) const {
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

    // Element i of e converted to T: F32/F64/F16/BF16 to float/double (F16 and BF16 widen exactly),
    // I32/I64 to an integer type, BOOL to bool (the loader's check_shaped allows only these pairs;
    // no other is compiled: a 64-bit integer to float is a software routine on 32-bit cores).
    template <class T> T element(const entry& e, std::size_t i) const {
        const std::byte* src = data(e) + i * dtype_size(e.type);
        auto raw = [src](auto v) {
            std::memcpy(&v, src, sizeof v);
            return v;
        };
        if constexpr (std::is_floating_point_v<T>) {
            switch (e.type) {
                case dtype::F32: return static_cast<T>(raw(float{}));
                case dtype::F64: return static_cast<T>(raw(double{}));
                case dtype::F16: return static_cast<T>(simd::half_value(raw(std::uint16_t{})));
                case dtype::BF16: return static_cast<T>(std::bit_cast<float>(std::uint32_t{raw(std::uint16_t{})} << 16));
                case dtype::I8: return static_cast<T>(raw(std::int8_t{}));  // (two-level scales' integers)
                default: return T{};
            }
        } else if constexpr (std::is_same_v<T, bool>) {
            return std::to_integer<std::uint8_t>(*src) != 0;
        } else {
            return e.type == dtype::I32 ? static_cast<T>(raw(std::int32_t{})) : static_cast<T>(raw(std::int64_t{}));
        }
    }

  private:
    [[gnu::cold]] status parse_into(std::span<const std::byte> bytes) {
        count_ = 0, data_ = nullptr, data_size_ = 0, metadata_ = {};
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
    [[gnu::cold]] status parse_header(detail::json& js, std::size_t& count) {
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

    [[gnu::cold]] static status parse_entry(detail::json& js, entry& e) {
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

}  // namespace safetensors

}  // namespace ctformer
