// ctformer/io/quantized.hpp — a quantized weight (core/quant.hpp) in a safetensors file.
//
// A weight W (Out, In) named N is stored pre-quantized as (docs/weights.md, "Quantized weights"):
//   bf16               N BF16 (Out, In)
//   int8_per_channel   N I8 (Out, In),      N_scale F32 (Out)
//   int8_group<G>      N I8 (Out, In),      N_scale F32 (Out, In / G)
//   int8_group_min<G>  as int8_group<G>,    and N_min F32 (Out, In / G): w = s · q − m
//   int4_group<G>      N U8 (Out, In / 2),  N_scale F32 (Out, In / G); byte j of a row holds input
//                      2j in its low nibble and 2j + 1 in its high nibble, two's complement
//   int4_group_min<G>  as int4_group<G> with levels 0..15, and N_min F32 (Out, In / G)
//   int6_group<G>      N I8 (Out, In) in [-32, 31], N_scale F32 (Out, In / G)
//   int6_group_min<G>  N I8 (Out, In) in [0, 63],   N_scale and N_min F32 (Out, In / G)
// (with ct::f16 scales, int8_group<G, ct::f16> ..., N_scale and N_min are F16; a float format reads
// F16 scales too: exact; with ct::kscale, N_scale and N_min are I8 and their halves N_scale_super
// and N_min_super F16 (Out, In / 256)), which save_state_dict writes and load_state_dict reads back exactly
// (tools/export.py writes the same with --weights). A file whose N is in a float dtype is quantized
// at load instead.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "../core/quant.hpp"
#include "../core/reflect.hpp"
#include "safetensors.hpp"

namespace ctformer::safetensors::detail {

template <class X> struct quant_layout {
    using Fmt = typename X::format;
    static constexpr std::size_t Out = X::out_features, In = X::in_features;
    static constexpr bool six = has_high_plane<Fmt>, int4 = Fmt::per_word == 8 && !six, scaled = Fmt::scaled, with_min = has_min<Fmt>;
    static constexpr bool levels = unsigned_levels<Fmt>;
    // a byte's range where one byte holds one integer (int8: never -128; int6: six bits); |q| at most
    static constexpr int byte_min = six ? (levels ? 0 : -32) : -127, byte_max = six ? (levels ? 63 : 31) : 127;
    static constexpr double qmax = levels ? double((1u << level_bits<Fmt>) - 1) : int4 ? 8.0 : six ? 32.0 : 127.0;
    static constexpr dtype packed = std::is_same_v<Fmt, bf16> ? dtype::BF16 : int4 ? dtype::U8 : dtype::I8;
    static constexpr std::array<std::size_t, 2> packed_shape{Out, int4 ? In / 2 : In};
    static constexpr std::size_t packed_bytes = Out * packed_shape[1] * (std::is_same_v<Fmt, bf16> ? 2 : 1);
    static constexpr std::size_t groups = Fmt::group ? In / Fmt::group : 1;
    static constexpr std::size_t scale_rank = Fmt::group ? 2 : 1;
    static constexpr std::array<std::size_t, 2> scale_shape{Out, groups};
    static constexpr bool two_level = two_level_scales<Fmt>;
    static constexpr dtype scale_dtype = half_scales<Fmt> ? dtype::F16 : two_level ? dtype::I8 : dtype::F32;
    static constexpr std::size_t scale_bytes = sizeof(scale_t<Fmt>);
    static constexpr std::size_t scale_size = Out * groups;
    static constexpr std::size_t supers = two_level ? In / kscale::super : 0;  // (two-level: halves a row)
    static constexpr std::array<std::size_t, 2> super_shape{Out, supers};
};

// N + "_scale" (or another suffix: "_min", "_scale_super", "_min_super"; names are at most max_name characters).
struct scale_name {
    char buf[::ctformer::detail::max_name + 16];
    std::size_t n = 0;
    explicit scale_name(std::string_view name, std::string_view suffix = "_scale") {
        for (char c : name)
            if (n < ::ctformer::detail::max_name) buf[n++] = c;
        for (char c : suffix) buf[n++] = c;
    }
    std::string_view view() const { return {buf, n}; }
};

// Whether the file holds X's tensor N pre-quantized (in X's packed dtype) rather than in a float dtype.
template <class X, std::size_t Cap>
bool prequantized(const file<Cap>& f, std::string_view prefix, std::string_view name) {
    const entry* e = f.find(prefix, name);
    return e && e->type == quant_layout<X>::packed;
}

// Row o's packed values: field of input k (bf16 bits, or the two's complement integer, or the level).
template <class X> std::uint32_t packed_field(const std::byte* data, std::size_t o, std::size_t k) {
    using Q = quant_layout<X>;
    if constexpr (std::is_same_v<typename X::format, bf16>) {
        std::uint16_t v;
        std::memcpy(&v, data + 2 * (o * Q::In + k), 2);
        return v;
    } else if constexpr (Q::int4) {
        const auto byte = std::to_integer<std::uint32_t>(data[o * (Q::In / 2) + k / 2]);
        return k % 2 ? byte >> 4 : byte & 0xfu;
    } else {
        return std::to_integer<std::uint32_t>(data[o * Q::In + k]);
    }
}

// Copies a pre-quantized N (and N_scale) into t; check_prequantized accepted them.
template <class X, std::size_t Cap>
void read_prequantized(X& t, const file<Cap>& f, std::string_view prefix, std::string_view name) {
    using Q = quant_layout<X>;
    const std::byte* data = f.data(*f.find(prefix, name));
    for (auto& w : t.storage) w = 0;
    for (auto& s : t.scales) s = 0;
    for (std::size_t o = 0; o < Q::Out; ++o)
        for (std::size_t k = 0; k < Q::In; ++k) t.set_field(o, k, static_cast<std::int32_t>(packed_field<X>(data, o, k)));
    auto per_group = [&](std::string_view suffix, typename X::scale_type* out) {
        const entry& e = *f.find(prefix, scale_name(name, suffix).view());
        const std::size_t span = Q::In / Q::groups;
        for (std::size_t o = 0; o < Q::Out; ++o)
            for (std::size_t g = 0; g < Q::groups; ++g) {
                const float v = f.template element<float>(e, o * Q::groups + g);
                if constexpr (Q::two_level) out[X::scale_index(o, g * span)] = static_cast<std::int8_t>(v);
                else out[X::scale_index(o, g * span)] = quant::to_scale<typename X::scale_type>(v);
            }
    };
    if constexpr (Q::scaled) per_group("_scale", t.scales);
    if constexpr (Q::with_min) {
        for (auto& m : t.mins) m = 0;
        per_group("_min", t.mins);
    }
    if constexpr (Q::two_level) {
        auto per_super = [&](std::string_view suffix, std::uint16_t* out) {  // (halves: bits as stored)
            const entry& e = *f.find(prefix, scale_name(name, suffix).view());
            for (std::size_t o = 0; o < Q::Out; ++o)
                for (std::size_t j = 0; j < Q::supers; ++j)
                    out[X::super_index(o, j * kscale::super)] = simd::half_bits(f.template element<float>(e, o * Q::supers + j));
        };
        t.super = {};
        per_super("_scale_super", t.super.scales);
        if constexpr (Q::with_min) per_super("_min_super", t.super.mins);
    }
}

// Writes t's tensors as above: each through emit(name suffix, dtype, rank, shape, bytes, writer),
// writer(put) putting the bytes.
template <class X, class Emit> void emit_quantized(const X& t, Emit&& emit) {
    using Q = quant_layout<X>;
    auto field = [&t](std::size_t o, std::size_t k) { return t.field(o, k); };
    emit(std::string_view{}, Q::packed, 2, Q::packed_shape.data(), Q::packed_bytes, [&](auto&& put) {
        for (std::size_t o = 0; o < Q::Out; ++o) {
            if constexpr (std::is_same_v<typename X::format, bf16>) {
                for (std::size_t k = 0; k < Q::In; ++k) {
                    const auto v = static_cast<std::uint16_t>(field(o, k));
                    put(&v, 2);
                }
            } else if constexpr (Q::int4) {
                for (std::size_t k = 0; k < Q::In; k += 2) {
                    const auto v = static_cast<std::uint8_t>(field(o, k) | field(o, k + 1) << 4);
                    put(&v, 1);
                }
            } else {
                for (std::size_t k = 0; k < Q::In; ++k) {  // (int6: sign-extended, levels as they are)
                    const std::uint32_t f = field(o, k);
                    const auto v = static_cast<std::uint8_t>(Q::six && !Q::levels && f >= 32 ? f | 0xc0u : f);
                    put(&v, 1);
                }
            }
        }
    });
    auto per_group = [&](std::string_view suffix, const typename X::scale_type* values) {
        emit(suffix, Q::scale_dtype, Q::scale_rank, Q::scale_shape.data(), Q::scale_size * Q::scale_bytes, [&, values](auto&& put) {
            const std::size_t span = Q::In / Q::groups;
            for (std::size_t o = 0; o < Q::Out; ++o)
                for (std::size_t g = 0; g < Q::groups; ++g) put(&values[X::scale_index(o, g * span)], Q::scale_bytes);
        });
    };
    if constexpr (Q::scaled) per_group(std::string_view("_scale"), t.scales);
    if constexpr (Q::with_min) per_group(std::string_view("_min"), t.mins);
    if constexpr (Q::two_level) {
        auto per_super = [&](std::string_view suffix, const std::uint16_t* values) {
            emit(suffix, dtype::F16, 2, Q::super_shape.data(), Q::Out * Q::supers * 2, [&, values](auto&& put) {
                for (std::size_t o = 0; o < Q::Out; ++o)
                    for (std::size_t j = 0; j < Q::supers; ++j) put(&values[X::super_index(o, j * kscale::super)], 2);
            });
        };
        per_super(std::string_view("_scale_super"), t.super.scales);
        if constexpr (Q::with_min) per_super(std::string_view("_min_super"), t.super.mins);
    }
}

}  // namespace ctformer::safetensors::detail
