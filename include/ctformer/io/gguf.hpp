// ctformer/io/gguf.hpp — the GGUF format (llama.cpp's model files, versions 2 and 3) over
// caller-owned bytes: the header, every metadata key and value (arrays included), the tensor
// infos, the alignment. No heap: parse() validates the whole file into an index of fixed capacity
// (keys and tensors are views into the bytes, which must outlive it); every malformed field is a
// status naming it, and a failed parse leaves the index empty.
//
//   static ct::gguf::file<> g;   ct::status s = g.parse(mapped.bytes());
//   const ct::gguf::kv* heads = g.find("llama.attention.head_count");   std::uint64_t h;  heads->v.get(h);
//   const ct::gguf::tensor_info* t = g.find_tensor("blk.0.attn_q.weight");   g.data(*t) ...
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "../core/status.hpp"

namespace ctformer::gguf {

// Metadata value types (gguf_type)
enum class value_type : std::uint32_t { u8, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };
// Tensor element types (ggml_type): the ones a file may hold and their block layout
enum class ggml_type : std::uint32_t {
    f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9, q2_k = 10, q3_k = 11, q4_k = 12,
    q5_k = 13, q6_k = 14, q8_k = 15, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, bf16 = 30,
};
struct block_layout {
    std::uint32_t elems = 0, bytes = 0;  // elements per block and its bytes (0: not a type this reader knows)
};
constexpr block_layout layout_of(ggml_type t) {
    switch (t) {
        case ggml_type::f32: case ggml_type::i32: return {1, 4};
        case ggml_type::f16: case ggml_type::bf16: case ggml_type::i16: return {1, 2};
        case ggml_type::i8: return {1, 1};
        case ggml_type::i64: case ggml_type::f64: return {1, 8};
        case ggml_type::q4_0: return {32, 18};
        case ggml_type::q4_1: return {32, 20};
        case ggml_type::q5_0: return {32, 22};
        case ggml_type::q5_1: return {32, 24};
        case ggml_type::q8_0: return {32, 34};
        case ggml_type::q8_1: return {32, 36};
        case ggml_type::q2_k: return {256, 84};
        case ggml_type::q3_k: return {256, 110};
        case ggml_type::q4_k: return {256, 144};
        case ggml_type::q5_k: return {256, 176};
        case ggml_type::q6_k: return {256, 210};
        case ggml_type::q8_k: return {256, 292};
    }
    return {};
}
constexpr std::size_t scalar_bytes(value_type t) {
    switch (t) {
        case value_type::u8: case value_type::i8: case value_type::boolean: return 1;
        case value_type::u16: case value_type::i16: return 2;
        case value_type::u32: case value_type::i32: case value_type::f32: return 4;
        case value_type::u64: case value_type::i64: case value_type::f64: return 8;
        default: return 0;  // (string, array: variable)
    }
}

namespace detail {
template <class T> constexpr T load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);  // (GGUF is little-endian, as every target here)
    return v;
}
// A cursor over the bytes: every read checks what is left.
struct cursor {
    const std::byte* p;
    const std::byte* end;
    bool ok = true;
    template <class T> T read() {
        if (!ok || static_cast<std::size_t>(end - p) < sizeof(T)) return ok = false, T{};
        const T v = detail::load<T>(p);
        p += sizeof(T);
        return v;
    }
    std::string_view string() {
        const auto n = read<std::uint64_t>();
        if (!ok || n > static_cast<std::uint64_t>(end - p)) return ok = false, std::string_view{};
        const std::string_view s(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
        p += n;
        return s;
    }
    bool skip(std::uint64_t n) {
        if (!ok || n > static_cast<std::uint64_t>(end - p)) return ok = false;
        p += n;
        return true;
    }
};
}  // namespace detail

// A metadata value: a view into the file.
struct value {
    value_type type = value_type::u8;
    value_type elem = value_type::u8;  // an array's element type
    std::uint64_t count = 0;           // an array's length
    const std::byte* p = nullptr;      // the payload (a string's bytes; an array's first element)
    std::uint64_t bytes = 0;           // the payload's size

    // The value as an integer (any integer or bool type, in range), a float (f32/f64) or a
    // string; false (and out untouched) if it is not one.
    constexpr bool get(std::uint64_t& out) const {
        std::int64_t v = 0;
        if (!integer(type, p, v) || v < 0) return type == value_type::u64 ? (out = detail::load<std::uint64_t>(p), true) : false;
        out = static_cast<std::uint64_t>(v);
        return true;
    }
    constexpr bool get(double& out) const {
        if (type == value_type::f32) return out = detail::load<float>(p), true;
        if (type == value_type::f64) return out = detail::load<double>(p), true;
        return false;
    }
    constexpr bool get(std::string_view& out) const {
        if (type != value_type::string) return false;
        out = {reinterpret_cast<const char*>(p), static_cast<std::size_t>(bytes)};
        return true;
    }
    // Element i of an array of numbers as a double (false: not such an array, or i past its end).
    constexpr bool number_at(std::uint64_t i, double& out) const {
        if (type != value_type::array || i >= count) return false;
        const std::byte* q = p + i * scalar_bytes(elem);
        std::int64_t v = 0;
        if (elem == value_type::f32) return out = detail::load<float>(q), true;
        if (elem == value_type::f64) return out = detail::load<double>(q), true;
        if (elem == value_type::u64) return out = static_cast<double>(detail::load<std::uint64_t>(q)), true;
        if (!integer(elem, q, v)) return false;
        return out = static_cast<double>(v), true;
    }
    // An array of strings, in order: f(index, string_view) for each (false: not such an array).
    template <class F> constexpr bool for_each_string(F&& f) const {
        if (type != value_type::array || elem != value_type::string) return false;
        const std::byte* q = p;
        for (std::uint64_t i = 0; i < count; ++i) {
            const auto n = detail::load<std::uint64_t>(q);
            f(i, std::string_view(reinterpret_cast<const char*>(q + 8), static_cast<std::size_t>(n)));
            q += 8 + n;
        }
        return true;
    }

  private:
    static constexpr bool integer(value_type t, const std::byte* q, std::int64_t& v) {
        switch (t) {
            case value_type::u8: case value_type::boolean: v = detail::load<std::uint8_t>(q); return true;
            case value_type::i8: v = detail::load<std::int8_t>(q); return true;
            case value_type::u16: v = detail::load<std::uint16_t>(q); return true;
            case value_type::i16: v = detail::load<std::int16_t>(q); return true;
            case value_type::u32: v = detail::load<std::uint32_t>(q); return true;
            case value_type::i32: v = detail::load<std::int32_t>(q); return true;
            case value_type::i64: v = detail::load<std::int64_t>(q); return true;
            default: return false;
        }
    }
};

struct kv {
    std::string_view key;
    value v;
};

inline constexpr std::size_t max_dims = 4;  // (GGML_MAX_DIMS)
struct tensor_info {
    std::string_view name;
    std::uint32_t n_dims = 0;
    std::array<std::uint64_t, max_dims> dims{};  // ggml's order: dims[0] the innermost (a row's length)
    ggml_type type = ggml_type::f32;
    std::uint64_t offset = 0, bytes = 0;  // within the data section
    constexpr std::uint64_t elements() const {
        std::uint64_t n = 1;
        for (std::uint32_t i = 0; i < n_dims; ++i) n *= dims[i];
        return n;
    }
};

// The parsed index of one GGUF buffer: up to Keys metadata entries and Tensors tensors.
template <std::size_t Keys = 64, std::size_t Tensors = 512> class file {
  public:
    status parse(std::span<const std::byte> bytes) {
        const status st = parse_into(bytes);
        if (!st) n_keys_ = n_tensors_ = 0, data_ = nullptr, version_ = 0;
        return st;
    }
    std::uint32_t version() const { return version_; }
    std::uint64_t alignment() const { return alignment_; }
    std::size_t keys() const { return n_keys_; }
    const kv& key(std::size_t i) const { return keys_[i]; }
    const kv* find(std::string_view k) const {
        for (std::size_t i = 0; i < n_keys_; ++i)
            if (keys_[i].key == k) return &keys_[i];
        return nullptr;
    }
    std::size_t tensors() const { return n_tensors_; }
    const tensor_info& tensor(std::size_t i) const { return tensors_[i]; }
    const tensor_info* find_tensor(std::string_view name) const {
        for (std::size_t i = 0; i < n_tensors_; ++i)
            if (tensors_[i].name == name) return &tensors_[i];
        return nullptr;
    }
    const std::byte* data(const tensor_info& t) const { return data_ + t.offset; }

  private:
    static constexpr bool known(value_type t) { return static_cast<std::uint32_t>(t) <= 12; }

    status parse_into(std::span<const std::byte> bytes) {
        n_keys_ = n_tensors_ = 0, data_ = nullptr, version_ = 0, alignment_ = 32;
        detail::cursor c{bytes.data(), bytes.data() + bytes.size()};
        const auto magic = c.read<std::uint32_t>();
        if (!c.ok) return status::error(errc::truncated, "GGUF header");
        if (magic != 0x46554747u) return status::error(errc::malformed_header, "GGUF magic");
        const auto version = c.read<std::uint32_t>();
        if (c.ok && version != 2 && version != 3) return status::error(errc::not_supported, "GGUF version (2 or 3)");
        const auto n_tensors = c.read<std::uint64_t>(), n_kv = c.read<std::uint64_t>();
        if (!c.ok) return status::error(errc::truncated, "GGUF header");
        if (n_kv > Keys) return status::error(errc::too_many_tensors, "GGUF metadata (more keys than the index holds)");
        if (n_tensors > Tensors) return status::error(errc::too_many_tensors, "GGUF tensors (more than the index holds)");
        for (std::uint64_t i = 0; i < n_kv; ++i)
            if (status st = parse_kv(c); !st) return st;
        if (const kv* a = find("general.alignment")) {
            std::uint64_t al = 0;
            if (a->v.type != value_type::u32 || !a->v.get(al) || al == 0 || (al & (al - 1)) || al > 65536)
                return status::error(errc::malformed_header, "general.alignment");
            alignment_ = al;
        }
        for (std::uint64_t i = 0; i < n_tensors; ++i)
            if (status st = parse_tensor(c); !st) return st;
        const std::size_t head = static_cast<std::size_t>(c.p - bytes.data());
        std::size_t start = (head + alignment_ - 1) / alignment_ * alignment_;
        if (start > bytes.size()) {  // (a file without tensors may end before the padding, as llama.cpp accepts)
            if (n_tensors_) return status::error(errc::truncated, "GGUF data section");
            start = bytes.size();
        }
        const std::uint64_t size = bytes.size() - start;
        for (std::size_t i = 0; i < n_tensors_; ++i) {
            const tensor_info& t = tensors_[i];
            if (t.offset > size || t.bytes > size - t.offset) return status::error(errc::truncated, t.name);
            for (std::size_t j = 0; j < i; ++j) {
                const tensor_info& o = tensors_[j];
                if (o.name == t.name) return status::error(errc::duplicate_tensor, t.name);
                if (t.offset < o.offset + o.bytes && o.offset < t.offset + t.bytes) return status::error(errc::overlapping_data, t.name);
            }
        }
        data_ = bytes.data() + start;
        version_ = version;
        return {};
    }

    status parse_kv(detail::cursor& c) {
        kv& e = keys_[n_keys_];
        e.key = c.string();
        const auto type = static_cast<value_type>(c.read<std::uint32_t>());
        if (!c.ok) return status::error(errc::truncated, "GGUF metadata");
        if (e.key.empty()) return status::error(errc::malformed_header, "GGUF metadata: an empty key");
        for (std::size_t j = 0; j < n_keys_; ++j)
            if (keys_[j].key == e.key) return status::error(errc::malformed_header, e.key);  // (twice)
        if (!known(type)) return status::error(errc::malformed_header, e.key);
        e.v = {};
        e.v.type = type;
        if (type == value_type::string) {
            const std::string_view s = c.string();
            e.v.p = reinterpret_cast<const std::byte*>(s.data()), e.v.bytes = s.size();
        } else if (type == value_type::array) {
            e.v.elem = static_cast<value_type>(c.read<std::uint32_t>());
            e.v.count = c.read<std::uint64_t>();
            if (c.ok && (!known(e.v.elem) || e.v.elem == value_type::array))
                return status::error(errc::not_supported, e.key);  // (nested arrays: no model file has them)
            e.v.p = c.p;
            if (e.v.elem == value_type::string) {
                for (std::uint64_t i = 0; i < e.v.count && c.ok; ++i) (void)c.string();
            } else {
                const std::size_t w = scalar_bytes(e.v.elem);
                if (c.ok && e.v.count > static_cast<std::uint64_t>(c.end - c.p) / w) c.ok = false;
                (void)c.skip(e.v.count * w);
            }
            e.v.bytes = static_cast<std::uint64_t>(c.p - e.v.p);
        } else {
            e.v.p = c.p, e.v.bytes = scalar_bytes(type);
            (void)c.skip(e.v.bytes);
        }
        if (!c.ok) return status::error(errc::truncated, e.key);
        ++n_keys_;
        return {};
    }

    status parse_tensor(detail::cursor& c) {
        tensor_info& t = tensors_[n_tensors_];
        t = {};
        t.name = c.string();
        t.n_dims = c.read<std::uint32_t>();
        if (!c.ok) return status::error(errc::truncated, "GGUF tensor infos");
        if (t.name.empty()) return status::error(errc::malformed_header, "GGUF tensor infos: an empty name");
        if (t.n_dims == 0 || t.n_dims > max_dims) return status::error(errc::wrong_shape, t.name);
        std::uint64_t n = 1;
        for (std::uint32_t d = 0; d < t.n_dims; ++d) {
            t.dims[d] = c.read<std::uint64_t>();
            if (c.ok && (t.dims[d] == 0 || t.dims[d] > (std::uint64_t{1} << 48) / n)) return status::error(errc::wrong_shape, t.name);
            n *= t.dims[d];
        }
        t.type = static_cast<ggml_type>(c.read<std::uint32_t>());
        t.offset = c.read<std::uint64_t>();
        if (!c.ok) return status::error(errc::truncated, t.name);
        const block_layout b = layout_of(t.type);
        if (b.elems == 0) return status::error(errc::unsupported_dtype, t.name);
        if (t.dims[0] % b.elems) return status::error(errc::wrong_shape, t.name);  // (rows are whole blocks)
        if (t.offset % alignment_) return status::error(errc::bad_offsets, t.name);
        t.bytes = n / b.elems * b.bytes;
        ++n_tensors_;
        return {};
    }

    std::array<kv, Keys> keys_{};
    std::array<tensor_info, Tensors> tensors_{};
    std::size_t n_keys_ = 0, n_tensors_ = 0;
    const std::byte* data_ = nullptr;
    std::uint32_t version_ = 0;
    std::uint64_t alignment_ = 32;
};

}  // namespace ctformer::gguf
