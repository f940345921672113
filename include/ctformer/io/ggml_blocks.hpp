// ctformer/io/ggml_blocks.hpp — the value of one element of a GGUF tensor in any of ggml's float
// and block formats, computed as ggml's dequantize_row_* computes it (in float, the same
// operations in the same order), so a model loaded from the values is the file's model exactly.
//
//   format  block (elements, bytes)   an element's value
//   F32/F16/BF16   1                   the number
//   Q8_0    32, 34: d f16, q i8[32]    d·q
//   Q4_0    32, 18: d, qs[16]          d·(n − 8); n of element j: low nibble of qs[j] (j < 16), else high of qs[j − 16]
//   Q4_1    32, 20: d, m, qs[16]       d·n + m
//   Q5_0    32, 22: d, qh u32, qs[16]  d·((n | h << 4) − 16); h: bit j of qh
//   Q5_1    32, 24: d, m, qh, qs[16]   d·(n | h << 4) + m
//   Q4_K   256, 144: d, dmin, scales[12], qs[128]      (d·sc)·n − (dmin·m), 8 sub-blocks of 32,
//                                                      6-bit sc and m packed in scales
//   Q5_K   256, 176: d, dmin, scales[12], qh[32], qs[128]   the same with a fifth bit from qh
//   Q6_K   256, 210: ql[128], qh[64], sc i8[16], d     (d·sc)·(q − 32), 16 sub-blocks of 16
// (Q2_K, Q3_K and the i-quants are not read: supported() says so.)
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "gguf.hpp"
#include "safetensors.hpp"

namespace ctformer::gguf {

// Whether element() reads format t.
constexpr bool supported(ggml_type t) {
    switch (t) {
        case ggml_type::f32: case ggml_type::f16: case ggml_type::bf16: case ggml_type::q8_0: case ggml_type::q4_0:
        case ggml_type::q4_1: case ggml_type::q5_0: case ggml_type::q5_1: case ggml_type::q4_k: case ggml_type::q5_k:
        case ggml_type::q6_k: return true;
        default: return false;
    }
}
// Whether t's values are floats stored as such (not blocks of integers with scales).
constexpr bool is_float(ggml_type t) { return t == ggml_type::f32 || t == ggml_type::f16 || t == ggml_type::bf16; }

constexpr const char* type_name(ggml_type t) {
    switch (t) {
        case ggml_type::f32: return "F32";   case ggml_type::f16: return "F16";   case ggml_type::bf16: return "BF16";
        case ggml_type::q8_0: return "Q8_0"; case ggml_type::q4_0: return "Q4_0"; case ggml_type::q4_1: return "Q4_1";
        case ggml_type::q5_0: return "Q5_0"; case ggml_type::q5_1: return "Q5_1"; case ggml_type::q8_1: return "Q8_1";
        case ggml_type::q2_k: return "Q2_K"; case ggml_type::q3_k: return "Q3_K"; case ggml_type::q4_k: return "Q4_K";
        case ggml_type::q5_k: return "Q5_K"; case ggml_type::q6_k: return "Q6_K"; case ggml_type::q8_k: return "Q8_K";
        default: return "an integer type";
    }
}

namespace detail {
inline std::uint32_t byte_at(const std::byte* p, std::size_t i) { return std::to_integer<std::uint32_t>(p[i]); }
inline float half_at(const std::byte* p) { return simd::half_value(load<std::uint16_t>(p)); }
// Sub-block j's 6-bit scale and min of a Q4_K/Q5_K block (ggml's get_scale_min_k4).
inline void scale_min_k4(std::size_t j, const std::byte* q, std::uint32_t& sc, std::uint32_t& m) {
    if (j < 4) {
        sc = byte_at(q, j) & 63, m = byte_at(q, j + 4) & 63;
    } else {
        sc = (byte_at(q, j + 4) & 0xF) | ((byte_at(q, j - 4) >> 6) << 4);
        m = (byte_at(q, j + 4) >> 4) | ((byte_at(q, j) >> 6) << 4);
    }
}
// Element j (< 32) of a Q4_0/Q4_1/Q5_0/Q5_1 block b: its integer n (the nibble, and the fifth bit).
inline std::uint32_t small_block_n(const std::byte* qs, std::size_t j) {
    return j < 16 ? byte_at(qs, j) & 0xF : byte_at(qs, j - 16) >> 4;
}
}  // namespace detail

// Q4_0 (d, n − 8 per 32), Q5_0 (d, n − 16 per 32), Q8_0 (d, q per 32), Q6_K (d·sc, q − 32 per 16):
// an integer times a scale shared by a run — what ctformer's int4_group<32> (Q4_0), int8_group<32>
// (Q4_0, Q5_0, Q8_0) and int8_group<16> (all four) weights hold as stored.
// Element i of such a tensor as (scale, integer): value = scale · integer, exactly as element() gives it.
inline int integer_element(ggml_type t, const std::byte* p, std::uint64_t i, float& scale) {
    const block_layout L = layout_of(t);
    const std::byte* b = p + i / L.elems * L.bytes;
    const std::size_t j = static_cast<std::size_t>(i % L.elems);
    if (t == ggml_type::q4_0) return scale = detail::half_at(b), static_cast<int>(detail::small_block_n(b + 2, j)) - 8;
    if (t == ggml_type::q8_0) return scale = detail::half_at(b), static_cast<std::int8_t>(detail::byte_at(b, 2 + j));
    if (t == ggml_type::q5_0)
        return scale = detail::half_at(b), static_cast<int>(detail::small_block_n(b + 6, j) | (detail::load<std::uint32_t>(b + 2) >> j & 1) << 4) - 16;
    // Q6_K: the scale d·sc rounded once (ggml's d * sc[is] * q evaluates (d·sc)·q)
    const std::size_t half = j / 128, r = j % 128, quarter = r / 32, l = r % 32;
    const std::uint32_t lo = quarter % 2 ? detail::byte_at(b + 64 * half, l + 32) : detail::byte_at(b + 64 * half, l);
    const std::uint32_t hi = detail::byte_at(b + 128 + 32 * half, l) >> (2 * quarter) & 3;
    const auto sc = static_cast<std::int8_t>(detail::byte_at(b + 192, 8 * half + l / 16 + 2 * quarter));
    scale = detail::half_at(b + 208) * static_cast<float>(sc);
    return static_cast<int>(((quarter < 2 ? lo & 0xF : lo >> 4) | hi << 4)) - 32;
}

// Element i of any block format as (scale, integer, minimum): value = scale · integer − minimum, the
// numbers element() computes it from (a format without a minimum: 0; Q4_1/Q5_1's added m: −m).
// Every format's runs are 16 or 32 elements long (Q4_K/Q5_K: sub-blocks of 32, Q6_K: 16).
inline int affine_element(ggml_type t, const std::byte* p, std::uint64_t i, float& scale, float& min) {
    const block_layout L = layout_of(t);
    const std::byte* b = p + i / L.elems * L.bytes;
    const std::size_t j = static_cast<std::size_t>(i % L.elems);
    min = 0;
    switch (t) {
        case ggml_type::q4_1:
            return scale = detail::half_at(b), min = -detail::half_at(b + 2), static_cast<int>(detail::small_block_n(b + 4, j));
        case ggml_type::q5_1:
            scale = detail::half_at(b), min = -detail::half_at(b + 2);
            return static_cast<int>(detail::small_block_n(b + 8, j) | (detail::load<std::uint32_t>(b + 4) >> j & 1) << 4);
        case ggml_type::q4_k: case ggml_type::q5_k: {
            const bool five = t == ggml_type::q5_k;
            const std::size_t chunk = j / 64, r = j % 64, l = r % 32, sub = 2 * chunk + r / 32;
            std::uint32_t sc, m;
            detail::scale_min_k4(sub, b + 4, sc, m);
            const std::uint32_t byte = detail::byte_at(b + (five ? 48 : 16), 32 * chunk + l);
            std::uint32_t n = r < 32 ? byte & 0xF : byte >> 4;
            if (five) n += (detail::byte_at(b + 16, l) >> sub & 1) ? 16 : 0;
            scale = detail::half_at(b) * static_cast<float>(sc), min = detail::half_at(b + 2) * static_cast<float>(m);
            return static_cast<int>(n);
        }
        default: return integer_element(t, p, i, scale);  // Q4_0, Q5_0, Q8_0, Q6_K
    }
}

// Element i of a k-quant tensor (Q4_K, Q5_K, Q6_K) in its two levels: the super-block's halves d and
// dmin (bits), the run's integers sc and m, and the integer n: value = (d·sc)·n − dmin·m as
// affine_element's scale and minimum (Q6_K: n = q − 32, no minimum).
struct kquant_parts {
    std::uint16_t d = 0, dmin = 0;
    int sc = 0, m = 0, n = 0;
};
inline kquant_parts kquant_element(ggml_type t, const std::byte* p, std::uint64_t i) {
    const block_layout L = layout_of(t);
    const std::byte* b = p + i / L.elems * L.bytes;
    const std::size_t j = static_cast<std::size_t>(i % L.elems);
    kquant_parts k;
    float scale, min;
    k.n = affine_element(t, p, i, scale, min);
    if (t == ggml_type::q6_k) {
        const std::size_t half = j / 128, r = j % 128;
        k.d = detail::load<std::uint16_t>(b + 208);
        k.sc = static_cast<std::int8_t>(detail::byte_at(b + 192, 8 * half + r % 32 / 16 + 2 * (r / 32)));
    } else {
        std::uint32_t sc, m;
        detail::scale_min_k4(2 * (j / 64) + j % 64 / 32, b + 4, sc, m);
        k.d = detail::load<std::uint16_t>(b), k.dmin = detail::load<std::uint16_t>(b + 2);
        k.sc = static_cast<int>(sc), k.m = static_cast<int>(m);
    }
    return k;
}

// Element i (in the tensor's row-major order) of tensor data p in format t; supported(t). A block
// format's value is scale · integer − minimum from affine_element: the operations ggml's
// dequantize_row_* does, in its order (Q4_1/Q5_1's + m is − (−m), the same float).
inline float element(ggml_type t, const std::byte* p, std::uint64_t i) {
    switch (t) {
        case ggml_type::f32: return detail::load<float>(p + i * 4);
        case ggml_type::f16: return detail::half_at(p + i * 2);
        case ggml_type::bf16: return std::bit_cast<float>(std::uint32_t{detail::load<std::uint16_t>(p + i * 2)} << 16);
        default: {
            if (!supported(t)) return 0;
            float scale, min;
            const int n = affine_element(t, p, i, scale, min);
            return scale * static_cast<float>(n) - min;
        }
    }
}

// ---- Which ctformer weight format holds a file's tensors as stored (tools/export.py, gguf_info) ----

// A Llama's weight matrices in the order of ct::weights' overrides (q_weights ... head_weights).
inline constexpr const char* matrix_names[8] = {"q", "k", "v", "o", "gate", "up", "down", "head"};
// Which of them tensor `name` (llama.cpp's names) is: its index, or -1 (norms; token_embd unless
// the file's head is tied to it).
constexpr int matrix_of(std::string_view name, bool tied) {
    if (name == "output.weight" || (tied && name == "token_embd.weight")) return 7;
    constexpr std::string_view keys[7] = {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_output.weight",
                                          ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight"};
    for (int i = 0; i < 7; ++i)
        if (name.starts_with("blk.") && name.ends_with(keys[i])) return i;
    return -1;
}
// The weight format that holds every tensor whose ggml format is in `types` (bits 1 << ggml_type)
// as stored, the fewest bits a weight first; nullptr where some format is not read.
constexpr const char* stored_format(std::uint64_t types) {
    auto bit = [](ggml_type t) { return std::uint64_t{1} << static_cast<unsigned>(t); };
    auto within = [&](std::initializer_list<ggml_type> ok) {
        std::uint64_t m = 0;
        for (ggml_type t : ok) m |= bit(t);
        return (types & ~m) == 0;
    };
    for (unsigned t = 0; t < 64; ++t)
        if ((types >> t & 1) && !supported(static_cast<ggml_type>(t))) return nullptr;
    if (types == bit(ggml_type::bf16)) return "ct::bf16";
    if (types & (bit(ggml_type::f32) | bit(ggml_type::f16) | bit(ggml_type::bf16))) return "ct::dense";
    // (bits a weight: the integer's, and 32 a group for each scale and minimum, 16 as halves: the
    // file's own halves where they are the scale and minimum, Q8_0, Q4_0, Q5_0, Q4_1 and Q5_1)
    using T = ggml_type;
    // (k-quants alone: their own two levels, an int8 a run and a half a 256 — ggml's k-quant rows
    // are whole 256-blocks, as ct::kscale needs)
    if (within({T::q4_k})) return "ct::int4_group_min<32, ct::kscale>";                                      // 4.6
    if (within({T::q4_k, T::q5_k})) return "ct::int6_group_min<32, ct::kscale>";                             // 6.6
    if (within({T::q6_k})) return "ct::int6_group<16, ct::kscale>";                                          // 6.6
    if (within({T::q4_k, T::q5_k, T::q6_k})) return "ct::int6_group_min<16, ct::kscale>";                    // 7.1
    if (within({T::q4_0})) return "ct::int4_group<32, ct::f16>";                                            // 4.5
    if (within({T::q4_1})) return "ct::int4_group_min<32, ct::f16>";                                        // 5
    if (within({T::q4_0, T::q4_1, T::q4_k})) return "ct::int4_group_min<32>";                                // 6
    if (within({T::q4_0, T::q5_0})) return "ct::int6_group<32, ct::f16>";                                   // 6.5
    if (within({T::q4_1, T::q5_1})) return "ct::int6_group_min<32, ct::f16>";                               // 7
    if (within({T::q4_0, T::q5_0, T::q6_k})) return "ct::int6_group<16>";                                   // 8
    if (within({T::q4_0, T::q4_1, T::q4_k, T::q5_0, T::q5_1, T::q5_k})) return "ct::int6_group_min<32>";    // 8
    if (within({T::q4_0, T::q5_0, T::q8_0})) return "ct::int8_group<32, ct::f16>";                          // 8.5
    if (within({T::q4_0, T::q5_0, T::q8_0, T::q4_1, T::q5_1})) return "ct::int8_group_min<32, ct::f16>";    // 9
    if (!(types & bit(T::q8_0))) return "ct::int6_group_min<16>";                                          // 10
    if (within({T::q4_0, T::q5_0, T::q8_0, T::q6_k})) return "ct::int8_group<16>";                          // 10
    return types & bit(T::q6_k) ? "ct::int8_group_min<16>" : "ct::int8_group_min<32>";                     // 12, 10
}
// Each matrix's stored_format over the file's tensors (by matrix_names' order).
template <class File> void stored_formats(const File& g, const char* (&out)[8]) {
    std::uint64_t types[8] = {};
    const bool tied = g.find_tensor("output.weight") == nullptr;
    for (std::size_t i = 0; i < g.tensors(); ++i)
        if (const int m = matrix_of(g.tensor(i).name, tied); m >= 0) types[m] |= std::uint64_t{1} << (static_cast<unsigned>(g.tensor(i).type) % 64);
    for (int m = 0; m < 8; ++m) out[m] = types[m] ? stored_format(types[m]) : "ct::dense";
}

}  // namespace ctformer::gguf
