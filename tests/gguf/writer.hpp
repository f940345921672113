// A GGUF file written field by field as llama.cpp's gguf.c lays it out (the reader's and the
// loader's tests build their files with it, valid and broken).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <ctformer/io/gguf.hpp>

namespace test {
namespace gg = ctformer::gguf;

// A GGUF file, written field by field.
struct gguf_writer {
    std::string head, data;
    std::uint64_t n_kv = 0, n_tensors = 0;
    std::string kvs, infos;
    std::uint32_t version = 3;
    std::size_t alignment = 32;
    template <class T> static void put(std::string& s, T v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
    static void str(std::string& s, std::string_view v) {
        put<std::uint64_t>(s, v.size());
        s.append(v);
    }
    template <class T> gguf_writer& scalar(std::string_view k, gg::value_type t, T v) {
        str(kvs, k);
        put<std::uint32_t>(kvs, static_cast<std::uint32_t>(t));
        put<T>(kvs, v);
        ++n_kv;
        return *this;
    }
    gguf_writer& string(std::string_view k, std::string_view v) {
        str(kvs, k);
        put<std::uint32_t>(kvs, 8);
        str(kvs, v);
        ++n_kv;
        return *this;
    }
    template <class T> gguf_writer& array(std::string_view k, gg::value_type elem, const std::vector<T>& v) {
        str(kvs, k);
        put<std::uint32_t>(kvs, 9);
        put<std::uint32_t>(kvs, static_cast<std::uint32_t>(elem));
        put<std::uint64_t>(kvs, v.size());
        for (const T& x : v) put<T>(kvs, x);
        ++n_kv;
        return *this;
    }
    gguf_writer& strings(std::string_view k, const std::vector<std::string>& v) {
        str(kvs, k);
        put<std::uint32_t>(kvs, 9);
        put<std::uint32_t>(kvs, 8);
        put<std::uint64_t>(kvs, v.size());
        for (const std::string& x : v) str(kvs, x);
        ++n_kv;
        return *this;
    }
    // a tensor of ggml type t, dims in ggml's order, its data: `bytes` bytes of pattern
    gguf_writer& tensor(std::string_view name, std::vector<std::uint64_t> dims, gg::ggml_type t, std::size_t bytes,
                   std::uint64_t offset_override = ~0ull) {
        str(infos, name);
        put<std::uint32_t>(infos, static_cast<std::uint32_t>(dims.size()));
        for (auto d : dims) put<std::uint64_t>(infos, d);
        put<std::uint32_t>(infos, static_cast<std::uint32_t>(t));
        while (data.size() % alignment) data.push_back('\0');
        put<std::uint64_t>(infos, offset_override != ~0ull ? offset_override : data.size());
        for (std::size_t i = 0; i < bytes; ++i) data.push_back(static_cast<char>(i * 7 + name.size()));
        ++n_tensors;
        return *this;
    }
    // a tensor whose data is the given bytes
    gguf_writer& tensor_data(std::string_view name, std::vector<std::uint64_t> dims, gg::ggml_type t, std::string_view payload) {
        const std::size_t at = data.size();
        tensor(name, std::move(dims), t, payload.size());
        data.replace((at + alignment - 1) / alignment * alignment, payload.size(), payload);
        return *this;
    }
    std::vector<std::byte> bytes() const {
        std::string f;
        put<std::uint32_t>(f, 0x46554747u);
        put<std::uint32_t>(f, version);
        put<std::uint64_t>(f, n_tensors);
        put<std::uint64_t>(f, n_kv);
        f += kvs + infos;
        while (f.size() % alignment) f.push_back('\0');
        f += data;
        std::vector<std::byte> out(f.size());
        std::memcpy(out.data(), f.data(), f.size());
        return out;
    }
};

}  // namespace test
