// A GGUF file written field by field as llama.cpp's gguf.c lays it out (the reader's and the
// loader's tests build their files with it, valid and broken), and a Llama's params written as
// llama.cpp's converter writes them (its names and keys, q/k rows permuted for its RoPE).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>

#include <ctformer/core/quant.hpp>
#include <ctformer/core/reflect.hpp>
#include <ctformer/io/gguf.hpp>
#include <ctformer/io/safetensors.hpp>
#include <ctformer/layer/config.hpp>
#include <ctformer/layer/names.hpp>

namespace test {
namespace gg = ctformer::gguf;
namespace ct = ::ctformer;

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

// ---- Models as llama.cpp's converter writes them ----
// IEEE half of x, rounded to nearest even (what numpy's astype(float16) gives).
inline std::uint16_t to_half(float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x), sign = (u >> 16) & 0x8000u;
    const std::uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
    if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
    if (a < 0x38800000u) {                                                     // a subnormal half
        const float f = std::bit_cast<float>(a) * 16777216.0f;                  // units of 2^-24
        return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(f)));
    }
    const std::uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

enum class gguf_store { f32, f16, bf16, q4_0, q8_0, q5_0, q4_1, q4_k, q5_k, q6_k };
inline bool k_quant(gguf_store s) { return s == gguf_store::q4_k || s == gguf_store::q5_k || s == gguf_store::q6_k; }

// The k-quants' blocks of 256 by plain rules (not ggml's searches: any valid block serves, the loader
// reads what is stored): Q6_K a scale per 16 (the value of largest magnitude at -32) as d·sc with
// sc int8; Q4_K/Q5_K a scale and a minimum per 32 (min <= 0 at level 0, the maximum at the top
// level) as d·sc and dmin·m with 6-bit sc and m packed as ggml's get_scale_min_k4 reads them.
inline void encode_q6_k(const float* x, std::string& out) {
    float sub[16], dmax = 0;
    for (int s = 0; s < 16; ++s) {
        float m = 0;
        for (int j = 0; j < 16; ++j) m = std::fabs(x[16 * s + j]) > std::fabs(m) ? x[16 * s + j] : m;
        sub[s] = m / -32, dmax = std::max(dmax, std::fabs(sub[s]));
    }
    const std::uint16_t dh = to_half(dmax / 127);
    const float d = ct::simd::half_value(dh);
    std::uint8_t b[210] = {};
    std::int8_t sc[16];
    for (int s = 0; s < 16; ++s) sc[s] = static_cast<std::int8_t>(d ? std::max(-127.f, std::min(127.f, std::round(sub[s] / d))) : 0);
    for (int j = 0; j < 256; ++j) {
        const float step = d * sc[j / 16];
        const int q = step ? std::max(-32, std::min(31, static_cast<int>(std::round(x[j] / step)))) + 32 : 32;
        const int half = j / 128, r = j % 128, quarter = r / 32, l = r % 32;
        std::uint8_t& lo = b[64 * half + l + (quarter % 2 ? 32 : 0)];
        lo = static_cast<std::uint8_t>(lo | (quarter < 2 ? q & 0xf : (q & 0xf) << 4));
        b[128 + 32 * half + l] = static_cast<std::uint8_t>(b[128 + 32 * half + l] | (q >> 4) << (2 * quarter));
    }
    for (int half = 0; half < 2; ++half)
        for (int quarter = 0; quarter < 4; ++quarter)
            for (int i = 0; i < 2; ++i) b[192 + 8 * half + i + 2 * quarter] = static_cast<std::uint8_t>(sc[8 * half + 2 * quarter + i]);
    std::memcpy(b + 208, &dh, 2);
    out.append(reinterpret_cast<const char*>(b), 210);
}
inline void encode_q45_k(const float* x, bool five, std::string& out) {
    const int top = five ? 31 : 15;
    float scale[8], mn[8], dmax = 0, mmax = 0;
    for (int s = 0; s < 8; ++s) {
        float lo = 0, hi = x[32 * s];
        for (int j = 0; j < 32; ++j) lo = std::min(lo, x[32 * s + j]), hi = std::max(hi, x[32 * s + j]);
        scale[s] = (hi - lo) / static_cast<float>(top), mn[s] = -lo;
        dmax = std::max(dmax, scale[s]), mmax = std::max(mmax, mn[s]);
    }
    const std::uint16_t dh = to_half(dmax / 63), mh = to_half(mmax / 63);
    const float d = ct::simd::half_value(dh), dmin = ct::simd::half_value(mh);
    std::uint8_t sc[8], m[8];
    for (int s = 0; s < 8; ++s) {
        sc[s] = static_cast<std::uint8_t>(d ? std::min(63.f, std::round(scale[s] / d)) : 0);
        m[s] = static_cast<std::uint8_t>(dmin ? std::min(63.f, std::round(mn[s] / dmin)) : 0);
    }
    std::uint8_t b[176] = {};
    std::memcpy(b, &dh, 2), std::memcpy(b + 2, &mh, 2);
    std::uint8_t* packed = b + 4;
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            packed[j] = static_cast<std::uint8_t>(packed[j] | sc[j]), packed[j + 4] = static_cast<std::uint8_t>(packed[j + 4] | m[j]);
        } else {
            packed[j + 4] = static_cast<std::uint8_t>((sc[j] & 0xf) | (m[j] & 0xf) << 4);
            packed[j - 4] = static_cast<std::uint8_t>(packed[j - 4] | (sc[j] >> 4) << 6);
            packed[j] = static_cast<std::uint8_t>(packed[j] | (m[j] >> 4) << 6);
        }
    }
    std::uint8_t* qs = b + (five ? 48 : 16);
    for (int j = 0; j < 256; ++j) {
        const int chunk = j / 64, r = j % 64, l = r % 32, sub = 2 * chunk + r / 32;
        const float step = d * sc[sub], off = dmin * m[sub];
        const int n = step ? std::max(0, std::min(top, static_cast<int>(std::round((x[j] + off) / step)))) : 0;
        qs[32 * chunk + l] = static_cast<std::uint8_t>(qs[32 * chunk + l] | (r < 32 ? n & 0xf : (n & 0xf) << 4));
        if (five && n >= 16) b[16 + l] = static_cast<std::uint8_t>(b[16 + l] | 1u << sub);
    }
    out.append(reinterpret_cast<const char*>(b), five ? 176 : 144);
}

// Element values of a (rows, in) tensor in the file's format.
inline std::string encode(const std::vector<float>& v, std::size_t in, gguf_store s) {
    std::string out;
    auto put = [&](const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); };
    if (s == gguf_store::f32) put(v.data(), v.size() * 4);
    for (std::size_t i = 0; s == gguf_store::f16 && i < v.size(); ++i) {
        const std::uint16_t h = to_half(v[i]);
        put(&h, 2);
    }
    for (std::size_t i = 0; s == gguf_store::bf16 && i < v.size(); ++i) {
        const auto h = static_cast<std::uint16_t>(ct::quant::bf16_bits(v[i]));
        put(&h, 2);
    }
    for (std::size_t b = 0; s == gguf_store::q8_0 && b < v.size(); b += 32) {  // ggml's quantize_row_q8_0_ref
        float amax = 0;
        for (std::size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[b + j]));
        const float d = amax / 127, id = d ? 1.0f / d : 0.0f;
        const std::uint16_t h = to_half(d);
        put(&h, 2);
        for (std::size_t j = 0; j < 32; ++j) {
            const auto q = static_cast<std::int8_t>(std::round(v[b + j] * id));  // (roundf: half away from zero)
            put(&q, 1);
        }
    }
    for (std::size_t b = 0; s == gguf_store::q4_0 && b < v.size(); b += 32) {  // ggml's quantize_row_q4_0_ref
        (void)in;
        float m = 0;
        for (std::size_t j = 0; j < 32; ++j)
            if (std::fabs(v[b + j]) > std::fabs(m)) m = v[b + j];
        const float d = m / -8, id = d ? 1.0f / d : 0.0f;
        const std::uint16_t h = to_half(d);
        put(&h, 2);
        for (std::size_t j = 0; j < 16; ++j) {
            const auto lo = static_cast<std::uint8_t>(std::min(15, static_cast<int>(v[b + j] * id + 8.5f)));
            const auto hi = static_cast<std::uint8_t>(std::min(15, static_cast<int>(v[b + j + 16] * id + 8.5f)));
            const auto byte = static_cast<std::uint8_t>(lo | hi << 4);
            put(&byte, 1);
        }
    }
    for (std::size_t b = 0; s == gguf_store::q5_0 && b < v.size(); b += 32) {  // ggml's quantize_row_q5_0_ref
        float m = 0;
        for (std::size_t j = 0; j < 32; ++j)
            if (std::fabs(v[b + j]) > std::fabs(m)) m = v[b + j];
        const float d = m / -16, id = d ? 1.0f / d : 0.0f;
        const std::uint16_t h = to_half(d);
        std::uint32_t qh = 0;
        std::uint8_t qs[16];
        for (std::size_t j = 0; j < 16; ++j) {
            const auto x0 = static_cast<std::uint8_t>(std::min(31, static_cast<int>(static_cast<std::int8_t>(v[b + j] * id + 16.5f))));
            const auto x1 = static_cast<std::uint8_t>(std::min(31, static_cast<int>(static_cast<std::int8_t>(v[b + j + 16] * id + 16.5f))));
            qs[j] = static_cast<std::uint8_t>((x0 & 0xf) | (x1 & 0xf) << 4);
            qh |= ((x0 & 0x10u) >> 4) << j | ((x1 & 0x10u) >> 4) << (j + 16);
        }
        put(&h, 2), put(&qh, 4), put(qs, 16);
    }
    for (std::size_t b = 0; s == gguf_store::q6_k && b < v.size(); b += 256) encode_q6_k(v.data() + b, out);
    for (std::size_t b = 0; (s == gguf_store::q4_k || s == gguf_store::q5_k) && b < v.size(); b += 256)
        encode_q45_k(v.data() + b, s == gguf_store::q5_k, out);
    for (std::size_t b = 0; s == gguf_store::q4_1 && b < v.size(); b += 32) {  // ggml's quantize_row_q4_1_ref
        float lo = v[b], hi = v[b];
        for (std::size_t j = 0; j < 32; ++j) lo = std::min(lo, v[b + j]), hi = std::max(hi, v[b + j]);
        const float d = (hi - lo) / 15, id = d ? 1.0f / d : 0.0f;
        const std::uint16_t hd = to_half(d), hm = to_half(lo);
        put(&hd, 2), put(&hm, 2);
        for (std::size_t j = 0; j < 16; ++j) {
            const auto x0 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>((v[b + j] - lo) * id + 0.5f))));
            const auto x1 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>((v[b + j + 16] - lo) * id + 0.5f))));
            const auto byte = static_cast<std::uint8_t>(x0 | x1 << 4);
            put(&byte, 1);
        }
    }
    return out;
}
inline gg::ggml_type type_of(gguf_store s) {
    constexpr gg::ggml_type t[] = {gg::ggml_type::f32,  gg::ggml_type::f16,  gg::ggml_type::bf16, gg::ggml_type::q4_0,
                                   gg::ggml_type::q8_0, gg::ggml_type::q5_0, gg::ggml_type::q4_1, gg::ggml_type::q4_k,
                                   gg::ggml_type::q5_k, gg::ggml_type::q6_k};
    return t[static_cast<int>(s)];
}

// The llama.cpp keys of Model, as its converter writes them.
template <class Model> gguf_writer llama_keys() {
    using C = typename Model::Stack::config;
    const std::uint32_t d = C::d_model, layers = Model::layers, ffn = C::ffn_dim, heads = C::heads, kv = C::kv_heads,
                        vocab = Model::vocab;
    const float theta = static_cast<float>(C::rope_type::theta), eps = static_cast<float>(C::eps);
    gguf_writer w;
    w.string("general.architecture", "llama")
        .scalar<std::uint32_t>("llama.context_length", gg::value_type::u32, 2048)
        .scalar<std::uint32_t>("llama.embedding_length", gg::value_type::u32, d)
        .scalar<std::uint32_t>("llama.block_count", gg::value_type::u32, layers)
        .scalar<std::uint32_t>("llama.feed_forward_length", gg::value_type::u32, ffn)
        .scalar<std::uint32_t>("llama.attention.head_count", gg::value_type::u32, heads)
        .scalar<std::uint32_t>("llama.attention.head_count_kv", gg::value_type::u32, kv)
        .scalar<std::uint32_t>("llama.rope.dimension_count", gg::value_type::u32, d / heads)
        .scalar<float>("llama.rope.freq_base", gg::value_type::f32, theta)
        .scalar<float>("llama.attention.layer_norm_rms_epsilon", gg::value_type::f32, eps)
        .scalar<std::uint32_t>("llama.vocab_size", gg::value_type::u32, vocab);
    return w;
}

// Params p (Hugging Face's layout) as a llama.cpp GGUF: each tensor under its llama.cpp name, q/k
// rows permuted when the model's RoPE is rotate-half, in format s (norms stay F32, as llama.cpp
// keeps 1-D tensors); `skip` leaves a tensor out.
// (store_of(name): each 2-D tensor's format, a file that mixes them as llama.cpp's Q4_K_M does)
template <class Model, class Choose>
gguf_writer llama_gguf_by(const typename Model::Params& p, const Choose& store_of, std::string_view skip = {}, bool permute = true) {
    using C = typename Model::Stack::config;
    gguf_writer w = llama_keys<Model>();
    ct::for_each_tensor_as<ct::llama_cpp>(p, [&](std::string_view name, const auto& t) {
        using X = std::remove_cvref_t<decltype(t)>;
        if (name == skip) return;
        const std::size_t in = X::shape[X::rank - 1], rows = X::size / in;
        std::vector<float> v(X::size);
        const bool q = name.ends_with("attn_q.weight"), k = name.ends_with("attn_k.weight");
        const std::size_t hd = C::d_model / C::heads;
        for (std::size_t f = 0; f < rows; ++f) {
            std::size_t o = f;  // permute: reshape(heads, 2, hd/2, in).swapaxes(1, 2): row (h, i, j) <- (h, j, i)
            if ((q || k) && permute && std::is_same_v<typename C::rope_type::layout, ct::rotate_half>) {
                const std::size_t h = f / hd, r = f % hd, i = r / 2, j = r % 2;
                o = h * hd + j * (hd / 2) + i;
            }
            for (std::size_t c = 0; c < in; ++c) v[f * in + c] = static_cast<float>(t.get(o * in + c));
        }
        const gguf_store s = store_of(name);
        const bool blocks = s != gguf_store::f32 && s != gguf_store::f16 && s != gguf_store::bf16;
        const gguf_store fmt = X::rank == 1 ? gguf_store::f32 : (blocks && in % (k_quant(s) ? 256 : 32) ? gguf_store::f32 : s);
        std::vector<std::uint64_t> dims;
        for (std::size_t i = X::rank; i-- > 0;) dims.push_back(X::shape[i]);
        w.tensor_data(name, dims, type_of(fmt), encode(v, in, fmt));
    });
    return w;
}
template <class Model>
gguf_writer llama_gguf(const typename Model::Params& p, gguf_store s = gguf_store::f32, std::string_view skip = {}, bool permute = true) {
    return llama_gguf_by<Model>(p, [s](std::string_view) { return s; }, skip, permute);
}

}  // namespace test
