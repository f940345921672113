// ctformer/io/gguf_load.hpp — a Llama-family model from a GGUF file (llama.cpp's), all or nothing:
// the architecture's keys checked against the C++ type, every tensor found by llama.cpp's name
// (layer/names.hpp: param_names<llama_cpp>), its shape, format and values checked, and only then
// anything written.
//
//   static ct::gguf::file<> g;          g.parse(mapped.bytes());
//   static Model::Params p;             ct::status s = ct::load_gguf(p, g);
//
// Configuration (errc::config_mismatch naming the key, the file's value and the type's):
// general.architecture "llama"; llama.embedding_length = d_model, block_count = layers,
// attention.head_count = heads, attention.head_count_kv = kv_heads (absent: heads),
// feed_forward_length = ffn_dim, attention.layer_norm_rms_epsilon = eps (1e-6 relative),
// rope.freq_base = rope_theta (absent: 10000), rope.dimension_count = rotary_dim (absent: the head
// dimension), vocab_size or the tokenizer's token count = vocab, context_length >= context (a
// shorter context is a smaller cache, not another model); and the structure a llama file implies:
// RMSNorm before each sub-layer, SwiGLU, no biases, RoPE, a final norm.
//
// Values: F32, F16, BF16 and the block formats of io/ggml_blocks.hpp (Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K), each tensor in its own (a Q4_K_M file mixes Q4_K and Q6_K), decoded to
// the value ggml's dequantizer gives. Into dense weights any of them; into a quantized weight
// format (ct::weights<F>) float values are quantized at load as from safetensors, and the block
// formats go in as stored (the same numbers): Q4_0 into int4_group<32>; Q4_0, Q4_1 and Q4_K into
// int4_group_min<32>; Q4_0, Q5_0 and Q6_K into int6_group<16> (Q4_0, Q5_0: int6_group<32> too);
// every format of six bits or fewer into int6_group_min<16> (all but Q6_K: int6_group_min<32>);
// Q4_0, Q5_0 and Q8_0 into int8_group<32> (Q8_0's −128 is value_out_of_range: the int8 kernels'
// range is [−127, 127]); these and Q6_K into int8_group<16>; every block format into
// int8_group_min<16> (a scale, an integer and a minimum per 16). Each tensor goes into its own
// matrix's format: a type with per-tensor formats (ct::weights<F, ct::down_weights<F2>, ...>, as
// tools/export.py prints them from the file) keeps a Q4_K_M file's mix — Q4_K in
// int4_group_min<32>, the head's Q6_K in int6_group<16>, the projections that are Q4_K in some
// layers and Q6_K in others in int6_group_min<16>. Another block format into a quantized format is
// errc::wrong_dtype naming the tensor (quantizing twice loses what the file kept).
//
// RoPE layout: llama.cpp's converter permutes each head's q and k rows from Hugging Face's
// rotate-half order to the interleaved pairs its RoPE rotates; a type with rotate-half RoPE (the
// Llama default) gets them back in Hugging Face's order, a type with interleaved RoPE as stored —
// either way the model computes what the file's model computes.
//
// A file without output.weight has its head tied to token_embd (llama.cpp's rule): an untied type
// loads token_embd into lm_head too; a tied type and a file with output.weight is config_mismatch.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "../core/quant.hpp"
#include "../core/reflect.hpp"
#include "../core/status.hpp"
#include "../layer/names.hpp"
#include "config.hpp"
#include "ggml_blocks.hpp"
#include "gguf.hpp"
#include "state_dict.hpp"

namespace ctformer {

namespace gguf::detail {
using safetensors::detail::text;

// The fields a params type describes (layer/config.hpp, models/gpt.hpp), by name.
struct described_config {
    std::size_t d_model = 0, heads = 0, kv_heads = 0, ffn_dim = 0, layers = 0, vocab = 0, context = 0, rope_theta = 0,
                rotary_dim = 0;
    double eps = 0;
    std::string_view activation, norm, positions, rope;
    bool gated = false, norm_first = false, attn_bias = true, ffn_bias = true, norm_bias = true, tied = false, final_norm = false;
};
template <class P> constexpr described_config described() {
    described_config c;
    P::describe([&](std::string_view f, auto v) {
        using V = decltype(v);
        if constexpr (std::is_same_v<V, std::size_t>) {
            std::size_t* slots[] = {&c.d_model, &c.heads, &c.kv_heads, &c.ffn_dim, &c.layers, &c.vocab, &c.context, &c.rope_theta, &c.rotary_dim};
            constexpr std::string_view names[] = {"d_model", "heads", "kv_heads", "ffn_dim", "layers", "vocab", "context", "rope_theta", "rotary_dim"};
            for (std::size_t i = 0; i < 9; ++i)
                if (f == names[i]) *slots[i] = v;
        } else if constexpr (std::is_same_v<V, bool>) {
            bool* slots[] = {&c.gated, &c.norm_first, &c.attn_bias, &c.ffn_bias, &c.norm_bias, &c.tied, &c.final_norm};
            constexpr std::string_view names[] = {"gated", "norm_first", "attn_bias", "ffn_bias", "norm_bias", "tied", "final_norm"};
            for (std::size_t i = 0; i < 7; ++i)
                if (f == names[i]) *slots[i] = v;
        } else if constexpr (std::is_same_v<V, double>) {
            if (f == "eps") c.eps = v;
        } else {
            std::string_view* slots[] = {&c.activation, &c.norm, &c.positions, &c.rope};
            constexpr std::string_view names[] = {"activation", "norm", "positions", "rope"};
            for (std::size_t i = 0; i < 4; ++i)
                if (f == names[i]) *slots[i] = v;
        }
    });
    return c;
}

inline status config_error(std::string_view key, std::string_view file, std::string_view type) {
    text t;
    t << key << ": file " << file << ", type " << type;
    return status::error(errc::config_mismatch, t.view());
}
inline status config_error(std::string_view key, std::uint64_t file, std::size_t type) {
    text f, t;
    f << static_cast<std::size_t>(file), t << type;
    return config_error(key, f.view(), t.view());
}
// A llama.* key's integer (absent: fallback, or an error where there is none (0); present but not a
// non-negative integer: an error).
template <class G> status key_number(const G& g, std::string_view key, std::uint64_t fallback, std::uint64_t& out) {
    const kv* e = g.find(key);
    out = fallback;
    if (!e && fallback == 0) return config_error(key, "absent", "required");
    if (e && !e->v.get(out)) return status::error(errc::config_mismatch, key);
    return {};
}
// The vocabulary size the file states (llama.vocab_size, the tokenizer's tokens, token_embd's rows).
template <class G> std::uint64_t file_vocab(const G& g) {
    std::uint64_t v = 0;
    if (const kv* e = g.find("llama.vocab_size"); e && e->v.get(v)) return v;
    if (const kv* e = g.find("tokenizer.ggml.tokens"); e && e->v.type == value_type::array) return e->v.count;
    if (const tensor_info* t = g.find_tensor("token_embd.weight"); t && t->n_dims == 2) return t->dims[1];
    return 0;
}

template <class P, class G> status check_llama_config(const G& g) {
    constexpr described_config c = described<P>();
    std::string_view arch;
    const kv* a = g.find("general.architecture");
    if (!a || !a->v.get(arch)) return status::error(errc::config_mismatch, "general.architecture: absent");
    if (arch != "llama") return config_error("general.architecture", arch, "llama");
    // the structure a llama file implies
    if (!c.gated || c.activation != "silu") return config_error("general.architecture", "llama (SwiGLU)", c.gated ? c.activation : std::string_view("an ungated FFN"));
    if (c.norm != "rms_norm" || !c.norm_first || !c.final_norm || c.norm_bias)
        return config_error("general.architecture", "llama (RMSNorm before each sub-layer)", c.norm);
    if (c.attn_bias || c.ffn_bias) return config_error("general.architecture", "llama (no biases)", "biases");
    if (c.positions != "rotary") return config_error("general.architecture", "llama (RoPE)", c.positions);
    struct number {
        std::string_view key;
        std::size_t type;
        std::uint64_t fallback;
    };
    const std::size_t head_dim = c.d_model / c.heads;
    const number numbers[] = {{"llama.embedding_length", c.d_model, 0},      {"llama.block_count", c.layers, 0},
                              {"llama.attention.head_count", c.heads, 0},    {"llama.attention.head_count_kv", c.kv_heads, c.heads},
                              {"llama.feed_forward_length", c.ffn_dim, 0},   {"llama.rope.dimension_count", c.rotary_dim, head_dim}};
    for (const number& n : numbers) {
        std::uint64_t v = 0;
        if (status st = key_number(g, n.key, n.fallback, v); !st) return st;
        if (v != n.type) return config_error(n.key, v, n.type);
    }
    if (const std::uint64_t v = file_vocab(g); v != c.vocab) return config_error("llama.vocab_size", v, c.vocab);
    std::uint64_t ctx = 0;
    if (status st = key_number(g, "llama.context_length", c.context, ctx); !st) return st;
    if (ctx < c.context) return config_error("llama.context_length (at least the type's context)", ctx, c.context);
    double eps = 0, theta = 10000;
    const kv* e = g.find("llama.attention.layer_norm_rms_epsilon");
    if (!e || !e->v.get(eps) || !(eps - c.eps <= 1e-6 * c.eps && c.eps - eps <= 1e-6 * c.eps)) {  // (NaN: a mismatch)
        text f, t;
        safetensors::detail::append_value(f, e && e->v.get(eps) ? eps : 0.0);
        safetensors::detail::append_value(t, c.eps);
        return config_error("llama.attention.layer_norm_rms_epsilon", f.view(), t.view());
    }
    if (const kv* r = g.find("llama.rope.freq_base"); r && !r->v.get(theta)) return status::error(errc::config_mismatch, "llama.rope.freq_base");
    if (theta != static_cast<double>(c.rope_theta)) {  // (the file's value as a double: negative, huge or NaN too)
        text f, t;
        safetensors::detail::append_value(f, theta);
        t << c.rope_theta;
        return config_error("llama.rope.freq_base", f.view(), t.view());
    }
    const bool file_tied = g.find_tensor("output.weight") == nullptr;
    if (c.tied && !file_tied) return config_error("output.weight", "an untied head", "tied embeddings");
    return {};
}

template <class F> struct base_format { using type = F; };
template <class F> struct base_format<int8_dot<F>> { using type = F; };  // (the same storage)
template <class F> using base_format_t = typename base_format<F>::type;
// Whether weight format F holds ggml format t as stored (a scale per group, an integer per weight):
// Q4_0 in int4_group<G> (G = 8, 16, 32); Q4_0, Q4_1 and Q4_K in int4_group_min<G>; Q4_0 and Q5_0
// in int6_group<16 or 32>, Q6_K in int6_group<16>; all but Q8_0 in int6_group_min<16> (all but
// Q8_0 and Q6_K in int6_group_min<32>); Q4_0, Q5_0 and Q8_0 in int8_group<16 or 32>, Q6_K in
// int8_group<16>; every block format in int8_group_min<16> (all but Q6_K in int8_group_min<32>) —
// each with int8 activations too. With ct::f16 scales, only where the file's own halves are the
// scale and minimum: Q8_0, Q4_0, Q5_0 (not as levels: 8d, 16d), Q4_1 and Q5_1.
// A format with float scales in place of two-level ones (the same integers and groups).
template <class F> struct float_scaled { using type = F; };
template <template <std::size_t, class> class F, std::size_t G> struct float_scaled<F<G, kscale>> { using type = F<G, float>; };
template <class F> constexpr bool stores_as_is(ggml_type t) {
    using B = base_format_t<F>;
    if (is_float(t) || !supported(t)) return false;
    // (two-level scales: the k-quants' own d·sc and dmin·m, where float scales would hold them)
    if constexpr (two_level_scales<B>)
        return (t == ggml_type::q4_k || t == ggml_type::q5_k || t == ggml_type::q6_k) && stores_as_is<typename float_scaled<B>::type>(t);
    if constexpr (half_scales<B>) {
        using T = ggml_type;
        const bool shifted = unsigned_levels<B> && (t == T::q4_0 || t == T::q5_0);
        if (shifted || !(t == T::q8_0 || t == T::q4_0 || t == T::q5_0 || t == T::q4_1 || t == T::q5_1)) return false;
    }
    if constexpr (has_high_plane<B> && unsigned_levels<B>)  // (levels 0..63 and a minimum: Q6_K as q, d·sc, 32·d·sc)
        return t != ggml_type::q8_0 && (B::group == 16 || (B::group == 32 && t != ggml_type::q6_k));
    else if constexpr (has_high_plane<B>)
        return (B::group <= 32 && (t == ggml_type::q4_0 || t == ggml_type::q5_0)) || (B::group == 16 && t == ggml_type::q6_k);
    else if constexpr (unsigned_levels<B>)  // (4-bit levels and a minimum: Q4_0 as n and 8d)
        return 32 % B::group == 0 && (t == ggml_type::q4_0 || t == ggml_type::q4_1 || t == ggml_type::q4_k);
    else if constexpr (has_min<B>) return B::group == 16 || (B::group == 32 && t != ggml_type::q6_k);
    else if constexpr (B::per_word == 8 && B::group > 0) return t == ggml_type::q4_0 && 32 % B::group == 0;
    else if constexpr (B::per_word == 4 && B::group > 0)
        return (B::group <= 32 && (t == ggml_type::q4_0 || t == ggml_type::q5_0 || t == ggml_type::q8_0)) ||
               (B::group == 16 && t == ggml_type::q6_k);
    else return false;
}

// Where a parameter's values come from: a tensor of the file, with a row map undoing the q/k
// permutation (heads > 0: rows of `heads` heads of head_dim each).
struct source {
    const tensor_info* t = nullptr;
    const std::byte* data = nullptr;
    std::size_t heads = 0, head_dim = 0;
    std::size_t row(std::size_t o) const {  // Hugging Face row o -> the file's row
        if (heads == 0) return o;
        const std::size_t h = o / head_dim, r = o % head_dim, half = head_dim / 2;
        return h * head_dim + 2 * (r % half) + r / half;
    }
    float value(std::size_t i) const {  // element i of the (Out, In) or (N) tensor, row-major
        const std::size_t in = static_cast<std::size_t>(t->dims[0]);
        return element(t->type, data, row(i / in) * in + i % in);
    }
};

// The parameter named `name` (llama.cpp's names) of P: its source in g (nullptr: absent).
template <class P, class G> source find_source(const G& g, std::string_view name) {
    constexpr described_config c = described<P>();
    source s;
    s.t = g.find_tensor(name);
    if (!s.t && name == "output.weight") s.t = g.find_tensor("token_embd.weight");  // tied in the file
    if (!s.t) return s;
    s.data = g.data(*s.t);
    if (c.rope == "rotate_half") {
        const bool q = name.ends_with(".attn_q.weight"), k = name.ends_with(".attn_k.weight");
        if (q || k) s.heads = q ? c.heads : c.kv_heads, s.head_dim = c.d_model / c.heads;
    }
    return s;
}

// Checks one parameter X against its source: present, the shape (ggml lists dims innermost first),
// a format X can take, every value acceptable.
template <class X> status check_tensor(const source& s, std::string_view name, const safetensors::load_options& opt) {
    text t;
    t << name;
    if (!s.t) return status::error(errc::missing_tensor, t.view());
    bool same = s.t->n_dims == X::rank;
    for (std::size_t i = 0; same && i < X::rank; ++i) same = s.t->dims[X::rank - 1 - i] == X::shape[i];
    if (!same) {
        t << ": expected ";
        safetensors::detail::append_shape(t, X::shape.data(), X::rank);
        t << ", found (";
        for (std::size_t i = s.t->n_dims; i-- > 0;) t << static_cast<std::size_t>(s.t->dims[i]) << (i ? ", " : ")");
        return status::error(errc::wrong_shape, t.view());
    }
    constexpr bool quantized = is_quantized_weight_v<X>;
    bool as_stored = false;
    if constexpr (quantized) as_stored = stores_as_is<typename X::format>(s.t->type);
    if (!supported(s.t->type) || (quantized && !is_float(s.t->type) && !as_stored)) {
        t << ": " << type_name(s.t->type) << (supported(s.t->type) ? " into a quantized weight format" : " (not read)");
        return status::error(errc::wrong_dtype, t.view());
    }
    if constexpr (quantized) {
        using F = typename X::format;
        if constexpr (two_level_scales<F> && unsigned_levels<F>)
            if (as_stored && s.t->type == ggml_type::q6_k)  // (Q6_K as levels: its minimum's half is 32·d)
                for (std::size_t i = 0; i < X::size; i += kscale::super)
                    if (!(std::fabs(simd::half_value(kquant_element(s.t->type, s.data, i).d)) * 32.f <= 65504.f))
                        return status::error(errc::value_out_of_range, t.view());
    }
    if (as_stored && s.t->type == ggml_type::q8_0)  // -128: outside the int8 kernels' [-127, 127]
        for (std::size_t i = 0; i < X::size; ++i) {
            float scale;
            if (integer_element(s.t->type, s.data, i, scale) == -128) return status::error(errc::value_out_of_range, t.view());
        }
    const bool must_be_finite = opt.reject_non_finite || quantized;  // (a quantized weight's scales: finite)
    if (!must_be_finite && opt.max_abs <= 0) return {};
    for (std::size_t i = 0; i < X::size; ++i) {
        const float v = s.value(i);
        if (v - v != 0) {
            if (must_be_finite) return status::error(errc::non_finite, t.view());
        } else if (opt.max_abs > 0 && (v > opt.max_abs || v < -opt.max_abs)) {
            return status::error(errc::value_out_of_range, t.view());
        }
    }
    return {};
}

// Block-format rows into the weight format that holds them as stored (the check accepted them):
// each run's scale and each integer, the same numbers (Q4_0: d, n − 8; Q5_0: d, n − 16; Q8_0: d, q;
// Q6_K: d·sc, q − 32; with a minimum: Q4_K's d·sc, n, dmin·m; unsigned levels: Q4_0's d, n, 8d,
// Q5_0's d, n, 16d, Q6_K's d·sc, q, 32·d·sc — each product exact in float); a group shorter than
// the file's run repeats its scale. Two-level scales keep a k-quant's halves and integers: d and
// sc, dmin and m (Q6_K as levels: 32·d and sc).
template <class X> void write_as_stored(X& w, const source& s) {
    for (auto& v : w.storage) v = 0;
    for (auto& v : w.scales) v = 0;
    for (auto& v : w.mins) v = 0;
    using F = typename X::format;
    constexpr std::size_t In = X::in_features;
    constexpr std::size_t G = F::group ? F::group : In;  // (ungrouped formats never hold blocks)
    const ggml_type t = s.t->type;
    if constexpr (X::two_level) {
        w.super = {};
        for (std::size_t o = 0; o < X::out_features; ++o)
            for (std::size_t k = 0; k < In; ++k) {
                kquant_parts p = kquant_element(t, s.data, s.row(o) * In + k);
                if (unsigned_levels<F> && t == ggml_type::q6_k)  // (check_tensor: 32·d is a finite half)
                    p.n += 32, p.dmin = simd::half_bits(32.f * simd::half_value(p.d)), p.m = p.sc;
                if (k % G == 0) w.scales[X::scale_index(o, k)] = static_cast<std::int8_t>(p.sc);
                if (k % kscale::super == 0) w.super.scales[X::super_index(o, k)] = p.d;
                if constexpr (has_min<F>) {
                    if (k % G == 0) w.mins[X::scale_index(o, k)] = static_cast<std::int8_t>(p.m);
                    if (k % kscale::super == 0) w.super.mins[X::super_index(o, k)] = p.dmin;
                }
                w.set_field(o, k, p.n);
            }
        return;
    }
    // (levels from the minimum: a signed format's integers shifted up by its most negative one)
    const int shift = !unsigned_levels<F> ? 0 : t == ggml_type::q4_0 ? 8 : t == ggml_type::q5_0 ? 16 : t == ggml_type::q6_k ? 32 : 0;
    for (std::size_t o = 0; o < X::out_features; ++o)
        for (std::size_t k = 0; k < In; ++k) {
            float scale, min = 0;
            int q = has_min<F> ? affine_element(t, s.data, s.row(o) * In + k, scale, min) : integer_element(t, s.data, s.row(o) * In + k, scale);
            if (shift) q += shift, min = static_cast<float>(shift) * scale;
            if (k % G == 0) w.scales[X::scale_index(o, k)] = quant::to_scale<typename X::scale_type>(scale);
            if constexpr (has_min<F>)
                if (k % G == 0) w.mins[X::scale_index(o, k)] = quant::to_scale<typename X::scale_type>(min);
            w.set_field(o, k, q);
        }
}
// Element type T's writer, once per T (as state_dict.hpp's write_named).
template <class T> [[gnu::noinline]] void write_dense(const safetensors::detail::tensor_ref<T>& t, const source& s) {
    for (std::size_t i = 0; i < t.size; ++i) t.storage[t.index(i)] = static_cast<T>(s.value(i));
}

template <class P, class G> status check_model(const P& params, const G& g, const safetensors::load_options& opt) {
    status result;
    std::size_t used = 0;
    for_each_tensor_as<llama_cpp>(params, [&](std::string_view name, const auto& t) {
        if (!result) return;
        const source s = find_source<P>(g, name);
        result = check_tensor<std::remove_cvref_t<decltype(t)>>(s, name, opt);
        used += s.t && s.t->name == name;
    });
    if (!result || used == g.tensors()) return result;
    for (std::size_t i = 0; i < g.tensors(); ++i) {  // a tensor the type does not have: name it
        bool known = false;
        for_each_tensor_as<llama_cpp>(params, [&](std::string_view name, const auto&) { known = known || g.tensor(i).name == name; });
        if (!known) return status::error(errc::unexpected_tensor, g.tensor(i).name);
    }
    return {};
}
template <class P, class G> void write_model(P& params, const G& g) {
    for_each_tensor_as<llama_cpp>(params, [&](std::string_view name, auto& t) {
        using X = std::remove_cvref_t<decltype(t)>;
        const source s = find_source<P>(g, name);
        if constexpr (is_quantized_weight_v<X>) {
            if (!is_float(s.t->type)) {
                write_as_stored(t, s);
            } else {
                t.quantize([&](std::size_t i) { return s.value(i); });
            }
        } else {
            write_dense(safetensors::detail::ref_of(t), s);
        }
    });
}
}  // namespace gguf::detail

// Loads a Llama-family model's params from a parsed GGUF file (see the top of this file): on any
// error nothing has been written. opt.reject_non_finite and opt.max_abs apply to the decoded values.
template <class P, std::size_t K, std::size_t N>
status load_gguf(P& params, const gguf::file<K, N>& g, const safetensors::load_options& opt = {}) {
    if (status st = gguf::detail::check_llama_config<P>(g); !st) return st;
    if (status st = gguf::detail::check_model(static_cast<const P&>(params), g, opt); !st) return st;
    gguf::detail::write_model(params, g);
    return {};
}

}  // namespace ctformer
