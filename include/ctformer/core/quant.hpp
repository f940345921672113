// ctformer/core/quant.hpp — weight formats (ct::weights<F>) and the quantized weight's storage.
//
//   dense              the layer's dtype (PackedWeight)
//   bf16               bfloat16, rounded to nearest even; 2 bytes a weight
//   int8_per_channel   q in [-127, 127], w = s[out] · q, s = max|W[out, :]| / 127; 1 byte (+ 4 per row)
//   int8_group<G>      q in [-127, 127] per group of G inputs, w = s[out, g] · q, s = max|W[out, g]| / 127
//                      (llama.cpp's Q8_0 rule; GGUF's Q8_0 is int8_group<32>, Q6_K int8_group<16>); 1 byte (+ 4 per G)
//   int8_group_min<G>  int8_group<G> with a minimum per group: w = s[out, g] · q − m[out, g]; what
//                      every GGUF block format is as stored (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
//                      Q6_K: a scale, an integer and a minimum a run of 16 or 32), so a file that mixes
//                      them (Q4_K_M) loads into one format; from floats, quantized as int8_group (m = 0)
//   int4_group<G>      q in [-8, 7] per group of G inputs, w = s[out, g] · q, s = m / -8 with m the
//                      group's value of largest magnitude (llama.cpp's Q4_0 rule); half a byte (+ 4 per G)
//   int6_group<G>      q in [-32, 31], the same rule at six bits (s = m / -32): GGUF's Q6_K as stored
//                      (d·sc, q − 32); three quarters of a byte (+ 4 per G)
//   int6_group_min<G>  levels 0..63 with a scale and a minimum per group (s = (max − min) / 63): GGUF's
//                      Q5_K as stored, and a Q4_K_M file's projections that mix Q4_K and Q6_K by layer
//   <G, ct::f16>       any grouped format with its scales (and minimums) as IEEE halves: 2 bytes a
//                      group instead of 4 (GGUF's Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 keep theirs so)
//   <G, ct::kscale>    k-quant scales: a group's scale (and minimum) an int8 times a half shared by
//                      256 inputs (GGUF's Q4_K, Q5_K, Q6_K as stored: d·sc, dmin·m); 1 byte a group
//                      and 2 per 256, so Q4_K reads in 4.6 bits a weight instead of 6
//
// A QuantizedWeight keeps the panel layout of PackedWeight (core/panels.hpp: column panels of NR
// outputs, read front to back) but packs P = 32 / bits consecutive inputs of one output into a
// 32-bit word, lowest bits first (two's complement; bf16: the float's upper half):
//
//   input k of output n:  word ((n / NR) · In/P + k / P) · NR + n % NR,  bits (k % P) · 32/P and up
//   its scale (int8):     scales[n]     (int4): scales[((n / NR) · In/G + k / G) · NR + n % NR]
//
// so a vector of NR/NV words holds one word row of a panel and a kernel widens it in registers
// with shifts alone, the same on every ISA (kernels/gemm_quant.hpp). Segments (Wq | Wk | Wv) each
// start on a whole panel, as in PackedWeight. Padding columns hold zero words and zero scales.
//
// Six-bit formats keep each field's low four bits as int4's words and its top two in a second plane
// after all the words (the high plane), one word per 16 inputs of an output, in the same panel order:
//
//   top bits of input k of output n:  high word ((n / NR) · In/16 + k / 16) · NR + n % NR,
//   bits 8·j + 4·t + 2·e (k % 16 = 8t + 2j + e)
//
// so that byte j of a high word, shifted, lands on the bytes int4's evens and odds widen to.
//
// Two-level scales (ct::kscale) keep the groups' int8s where the scales are and the halves in a
// plane of their own, one per 256 inputs of an output in the same panel order:
//
//   half of input k of output n:  supers[((n / NR) · In/256 + k / 256) · NR + n % NR]
#pragma once
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../simd/half.hpp"
#include "tensor.hpp"

namespace ctformer {

// The grouped formats' second parameter, how a scale (and a minimum) is kept: float, or f16 —
// IEEE half precision as GGUF's Q8_0, Q4_0, Q5_0, Q4_1 and Q5_1 store theirs (2 bytes a group
// instead of 4; scales from floats rounded to the nearest half, saturating at ±65504).
struct f16 {
    static constexpr const char* name = "f16";
};
// Two-level scales, the k-quants': a group's scale is an int8 times its 256 inputs' half (exact in
// float), kept in a plane of int8s and a plane of halves (layout below).
struct kscale {
    static constexpr const char* name = "kscale";
    static constexpr std::size_t super = 256;  // inputs sharing a half
};
template <class S> inline constexpr bool scale_kind = std::is_same_v<S, float> || std::is_same_v<S, f16> || std::is_same_v<S, kscale>;

struct dense {
    static constexpr const char* name = "dense";
    static constexpr std::size_t per_word = 1, group = 0;
    static constexpr bool integer_dot = false;
};
struct bf16 {
    static constexpr const char* name = "bf16";
    static constexpr std::size_t per_word = 2, group = 0;
    static constexpr bool scaled = false, integer_dot = false;
};
struct int8_per_channel {
    static constexpr const char* name = "int8_per_channel";
    static constexpr std::size_t per_word = 4, group = 0;
    static constexpr bool scaled = true, integer_dot = false;
    using scale_type = float;
};
template <std::size_t G, class S = float> struct int8_group {
    static_assert(G >= 16 && 256 % G == 0, "ctformer: int8 groups are 16, 32, 64, 128 or 256 inputs");
    static constexpr const char* name = "int8_group";
    static constexpr std::size_t per_word = 4, group = G;
    static constexpr bool scaled = true, integer_dot = false;
    using scale_type = S;
    static_assert(scale_kind<S>, "ctformer: a format's scales are float, ct::f16 or ct::kscale");
};
template <std::size_t G, class S = float> struct int8_group_min : int8_group<G, S> {
    static constexpr const char* name = "int8_group_min";
    static constexpr bool has_min = true;
};
template <std::size_t G, class S = float> struct int4_group {
    static_assert(G >= 8 && 256 % G == 0, "ctformer: int4 groups are 8, 16, 32, 64, 128 or 256 inputs");
    static constexpr const char* name = "int4_group";
    static constexpr std::size_t per_word = 8, group = G;
    static constexpr bool scaled = true, integer_dot = false;
    using scale_type = S;
    static_assert(scale_kind<S>, "ctformer: a format's scales are float, ct::f16 or ct::kscale");
};
// Levels 0..15 with a scale and a minimum per group (llama.cpp's Q4_1 rule from floats; GGUF's
// Q4_K and Q4_1 as stored, Q4_0 as (d, n, 8d)): w = s · q − m, half a byte (+ 8 per G).
template <std::size_t G, class S = float> struct int4_group_min : int4_group<G, S> {
    static constexpr const char* name = "int4_group_min";
    static constexpr bool has_min = true, unsigned_levels = true;
};
// Six bits: int4's words (the low four bits) and a plane of the top two (layout above).
template <std::size_t G, class S = float> struct int6_group {
    static_assert(G >= 16 && 256 % G == 0, "ctformer: int6 groups are 16, 32, 64, 128 or 256 inputs");
    static constexpr const char* name = "int6_group";
    static constexpr std::size_t per_word = 8, group = G, high_bits = 2;
    static constexpr bool scaled = true, integer_dot = false;
    using scale_type = S;
    static_assert(scale_kind<S>, "ctformer: a format's scales are float, ct::f16 or ct::kscale");
};
template <std::size_t G, class S = float> struct int6_group_min : int6_group<G, S> {
    static constexpr const char* name = "int6_group_min";
    static constexpr bool has_min = true, unsigned_levels = true;
};
// F's weights times activations quantized to int8 per block (kernels/gemv_int8.hpp): integer dot
// products in the inner loop, the activations' rounding added to the weights'. Same storage,
// files and name as F; spelled ct::weights<F, ct::int8_activations>.
template <class F> struct int8_dot : F {
    static_assert(F::scaled, "ctformer: int8 activations pair with the int8, int6 and int4 weight formats");
    static constexpr bool integer_dot = true;
    using weight_format = F;
};

// The weight matrices a format can be chosen for one by one (ct::weights' per-tensor overrides,
// layer/config.hpp): a block's projections and the model's LM head (tied: the embedding too).
namespace proj {
struct q {}; struct k {}; struct v {}; struct o {}; struct gate {}; struct up {}; struct down {}; struct head {};
}  // namespace proj
template <class Role, class F> struct role_format {
    using role = Role;
    using format = F;
};
// Formats by weight matrix (a GGUF file mixes them: Q4_K_M is Q4_K, Q5_0, Q6_K and Q8_0 by tensor):
// Default, except for the roles that a role_format<Role, F> among Overrides names.
template <class Default, class... Overrides> struct per_tensor {
    static constexpr const char* name = "per_tensor";
    static constexpr std::size_t per_word = 1, group = 0;  // (each role's format checks its own)
    static constexpr bool integer_dot = false;
    using default_format = Default;
};
namespace detail {
template <class Role, class Default, class... O> struct pick_format { using type = Default; };
template <class Role, class Default, class O, class... Rest> struct pick_format<Role, Default, O, Rest...> {
    using type = std::conditional_t<std::is_same_v<typename O::role, Role>, typename O::format,
                                    typename pick_format<Role, Default, Rest...>::type>;
};
template <class M, class Role> struct role_format_of { using type = M; };
template <class D, class... O, class Role> struct role_format_of<per_tensor<D, O...>, Role> {
    using type = typename pick_format<Role, D, O...>::type;
};
}  // namespace detail
// The format of weight matrix Role under M (a format, or a per_tensor map of them).
template <class M, class Role> using role_format_t = typename detail::role_format_of<M, Role>::type;

template <class F> inline constexpr bool is_quantized_format = !std::is_same_v<F, dense>;
template <class D, class... O>
inline constexpr bool is_quantized_format<per_tensor<D, O...>> = is_quantized_format<D> || (is_quantized_format<typename O::format> || ...);
// Whether format F subtracts a minimum per group (int8_group_min, int4_group_min, and int8_dot of them).
template <class F> inline constexpr bool has_min = requires { F::has_min; };
// Whether F's integers are unsigned levels (int4_group_min: 0..15) rather than two's complement.
template <class F> inline constexpr bool unsigned_levels = requires { F::unsigned_levels; };
// Whether F keeps its fields' top bits in a high plane (int6_group, int6_group_min).
template <class F> inline constexpr bool has_high_plane = requires { F::high_bits; };
// The bits of one of F's integers: a word's share, and the high plane's two (int8 8, int6 6, int4 4).
template <class F> inline constexpr std::size_t level_bits = 32 / F::per_word + (has_high_plane<F> ? 2 : 0);
// Whether F keeps its scales (and minimums) as halves (the formats' second parameter ct::f16).
template <class F> inline constexpr bool half_scales = [] {
    if constexpr (requires { typename F::scale_type; }) return std::is_same_v<typename F::scale_type, f16>;
    else return false;
}();
// Whether F keeps two-level scales (the formats' second parameter ct::kscale).
template <class F> inline constexpr bool two_level_scales = [] {
    if constexpr (requires { typename F::scale_type; }) return std::is_same_v<typename F::scale_type, kscale>;
    else return false;
}();
// A scale (or minimum) of F as stored: a float, a half's bits, or (two-level) the group's int8.
template <class F>
using scale_t = std::conditional_t<half_scales<F>, std::uint16_t, std::conditional_t<two_level_scales<F>, std::int8_t, float>>;

namespace quant {
// float -> bfloat16 bits, round to nearest even (inf stays inf, NaN stays a quiet NaN).
constexpr std::uint32_t bf16_bits(float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
// A scale as stored (S float, or a half's bits: rounded to nearest, within ±65504) and its value.
template <class S> constexpr S to_scale(float x) {
    if constexpr (std::is_same_v<S, float>) return x;
    else return simd::half_bits(x > 65504.f ? 65504.f : x < -65504.f ? -65504.f : x);
}
constexpr float scale_value(float s) { return s; }
constexpr float scale_value(std::uint16_t s) { return simd::half_value(s); }
constexpr float scale_value(std::int8_t s) { return static_cast<float>(s); }
// bfloat16 bits -> the float they are the upper half of (exact).
constexpr float bf16_value(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); }
// Field `slot` (bits wide) of word w, sign-extended (bf16: the float it is the upper half of;
// unsigned levels: zero-extended).
template <class Fmt> inline float decode(std::uint32_t w, std::size_t slot) {
    if constexpr (std::is_same_v<Fmt, bf16>) {
        return std::bit_cast<float>(slot == 0 ? w << 16 : w & 0xffff0000u);
    } else if constexpr (unsigned_levels<Fmt>) {
        constexpr std::size_t bits = 32 / Fmt::per_word;
        return static_cast<float>(w >> (bits * slot) & ((1u << bits) - 1));
    } else {
        constexpr std::size_t bits = 32 / Fmt::per_word;
        return static_cast<float>(static_cast<std::int32_t>(w << (32 - bits * (slot + 1))) >> (32 - bits));
    }
}
// A six-bit field from its low nibble and its two top bits, sign-extended (unsigned levels: as is).
template <class Fmt> inline float decode6(std::uint32_t low4, std::uint32_t top2) {
    const std::uint32_t u = (low4 & 15u) | (top2 & 3u) << 4;
    if constexpr (unsigned_levels<Fmt>) return static_cast<float>(u);
    else return static_cast<float>(static_cast<std::int32_t>(u << 26) >> 26);
}
// The bit of a high word where input k's top two bits start (layout above).
constexpr std::size_t high_shift(std::size_t k) {
    const std::size_t r = k % 16;
    return 8 * (r % 8 / 2) + 4 * (r / 8) + 2 * (r % 2);
}
}  // namespace quant

namespace detail {
// A two-level format's panels' halves (ct::kscale: the scales', the minimums'); nothing for the
// other formats (an empty member: their panels stay four pointers).
template <bool TwoLevel> struct super_pointers {
    const std::uint16_t* scales = nullptr;
    const std::uint16_t* mins = nullptr;
    super_pointers at(std::size_t off) const { return {scales ? scales + off : nullptr, mins ? mins + off : nullptr}; }
};
template <> struct super_pointers<false> {
    super_pointers at(std::size_t) const { return {}; }
};
}  // namespace detail
// A quantized weight's panels as the kernels read them: words, scales (and minimums) of one segment onwards.
template <class Fmt> struct quant_panels {
    const std::uint32_t* words;
    const scale_t<Fmt>* scales;
    const scale_t<Fmt>* mins = nullptr;   // (has_min<Fmt>: laid out as the scales)
    const std::uint32_t* high = nullptr;  // (has_high_plane<Fmt>: the top bits' words)
    [[no_unique_address]] detail::super_pointers<two_level_scales<Fmt>> supers{};  // (the halves, a 256 inputs' each)
    // One scale per output (int8_per_channel: applied to the row sums), or none (grouped: per group).
    const float* row_scales() const {
        if constexpr (Fmt::scaled && Fmt::group == 0) return scales;
        else return nullptr;
    }
    // Panel p's onwards, K inputs a panel (every kernel's stride over the panels).
    quant_panels panel(std::size_t p, std::size_t K) const {
        constexpr std::size_t NR = panels::gemm_tile<float>::NR;
        const std::size_t sp = Fmt::scaled ? p * (Fmt::group ? K / Fmt::group : 1) * NR : 0, hp = p * (K / kscale::super) * NR;
        return {words + p * (K / Fmt::per_word) * NR, scales + sp, mins ? mins + sp : nullptr, high ? high + p * (K / 16) * NR : nullptr,
                supers.at(hp)};
    }
    // The half of the scale at `at` (a group row's lane, as the kernels index scales: whole panels'
    // rows of K / G from here, then a lane).
    static constexpr std::size_t super_index(std::size_t at) {
        constexpr std::size_t NR = panels::gemm_tile<float>::NR, per = Fmt::group ? kscale::super / Fmt::group : 1;
        return at / NR / per * NR + at % NR;
    }
};
namespace detail {
// A two-level weight's halves (ct::kscale): N a plane, the minimums' too; nothing for other formats.
template <std::size_t N, bool Min> struct super_planes {
    alignas(64) std::uint16_t scales[N];
    alignas(64) std::uint16_t mins[Min ? N : 1];
};
template <bool Min> struct super_planes<0, Min> {};
}  // namespace detail

// PyTorch Linear weight W: (Out, In) in format Fmt, layout above. Presents PyTorch's shape and
// element order like PackedWeight (get(i): the dequantized value); written whole by quantize().
template <class Fmt, std::size_t Out, std::size_t In, std::size_t Seg = Out> struct QuantizedWeight : shape_of<Out, In> {
    static_assert(Seg > 0 && Out % Seg == 0, "ctformer: weight segments must divide the output features");
    static_assert(In % Fmt::per_word == 0, "ctformer: quantized weights pack 32 bits of inputs per word: the input "
                                           "features must be a multiple of 2 (bf16), 4 (int8) or 8 (int4)");
    static_assert(Fmt::group == 0 || In % Fmt::group == 0, "ctformer: the int4 group size must divide the input features");
    using value_type = float;
    using format = Fmt;
    using shape_of<Out, In>::size;
    static constexpr std::size_t out_features = Out, in_features = In, segment = Seg, segments = Out / Seg;
    static constexpr std::size_t NR = panels::gemm_tile<float>::NR, P = Fmt::per_word;
    static constexpr std::size_t groups = Fmt::group ? In / Fmt::group : 1;  // scale rows per panel
    static constexpr std::size_t segment_words = panels::panel_count<float>(Seg) * (In / P) * NR;
    static constexpr std::size_t segment_scales = Fmt::scaled ? panels::panel_count<float>(Seg) * groups * NR : 0;
    static constexpr std::size_t segment_high = has_high_plane<Fmt> ? panels::panel_count<float>(Seg) * (In / 16) * NR : 0;
    static constexpr bool segments_contiguous = Seg % NR == 0;
    static_assert(!has_high_plane<Fmt> || In % 16 == 0, "ctformer: int6 weights need a multiple of 16 input features");
    alignas(64) std::uint32_t storage[segments * (segment_words + segment_high)];  // (the high plane after the words)
    using scale_type = scale_t<Fmt>;  // (float, or a half's bits)
    alignas(64) scale_type scales[segments * segment_scales ? segments * segment_scales : 1];
    // a group's minimum, where the format has one (elsewhere one scale, unaligned: no padding in the params)
    alignas(has_min<Fmt> ? 64 : alignof(scale_type)) scale_type mins[has_min<Fmt> ? segments * segment_scales : 1];
    static constexpr bool two_level = two_level_scales<Fmt>;
    static_assert(!two_level || In % kscale::super == 0, "ctformer: k-quant scales (ct::kscale) need a multiple of 256 input features");
    static constexpr std::size_t segment_supers = two_level ? panels::panel_count<float>(Seg) * (In / kscale::super) * NR : 0;
    [[no_unique_address]] detail::super_planes<segments * segment_supers, has_min<Fmt>> super;  // (two-level: the halves)

    quant_panels<Fmt> panels(std::size_t s = 0) const {
        quant_panels<Fmt> p{storage + s * segment_words, scales + s * segment_scales, has_min<Fmt> ? mins + s * segment_scales : nullptr,
                            has_high_plane<Fmt> ? storage + segments * segment_words + s * segment_high : nullptr};
        if constexpr (two_level) p.supers = {super.scales + s * segment_supers, has_min<Fmt> ? super.mins + s * segment_supers : nullptr};
        return p;
    }

    // Where input k of output o lives.
    static constexpr std::size_t word_index(std::size_t o, std::size_t k) {
        const std::size_t n = o % Seg;
        return o / Seg * segment_words + ((n / NR) * (In / P) + k / P) * NR + n % NR;
    }
    static constexpr std::size_t high_index(std::size_t o, std::size_t k) {  // (has_high_plane<Fmt>)
        const std::size_t n = o % Seg;
        return segments * segment_words + o / Seg * segment_high + ((n / NR) * (In / 16) + k / 16) * NR + n % NR;
    }
    static constexpr std::size_t scale_index(std::size_t o, std::size_t k) {
        const std::size_t n = o % Seg;
        constexpr std::size_t span = Fmt::group ? Fmt::group : In;  // inputs sharing one scale
        return o / Seg * segment_scales + ((n / NR) * groups + k / span) * NR + n % NR;
    }
    static constexpr std::size_t super_index(std::size_t o, std::size_t k) {  // (two-level)
        const std::size_t n = o % Seg;
        return o / Seg * segment_supers + ((n / NR) * (In / kscale::super) + k / kscale::super) * NR + n % NR;
    }
    // Input k of output o's scale and minimum as the kernels take them (two-level: the int8 times
    // the half, exact).
    float scale_of(std::size_t o, std::size_t k) const {
        const float s = quant::scale_value(scales[scale_index(o, k)]);
        if constexpr (two_level) return simd::half_value(super.scales[super_index(o, k)]) * s;
        else return s;
    }
    float min_of(std::size_t o, std::size_t k) const {
        const float m = quant::scale_value(mins[scale_index(o, k)]);
        if constexpr (two_level) return simd::half_value(super.mins[super_index(o, k)]) * m;
        else return m;
    }
    // Element i of W in PyTorch's row-major (Out, In) order, dequantized: s · q (− m) (bf16: exact).
    float get(std::size_t i) const {
        const std::size_t o = i / In, k = i % In;
        float q;
        if constexpr (has_high_plane<Fmt>)
            q = quant::decode6<Fmt>(storage[word_index(o, k)] >> (k % P * 4), storage[high_index(o, k)] >> quant::high_shift(k));
        else q = quant::decode<Fmt>(storage[word_index(o, k)], k % P);
        if constexpr (has_min<Fmt>) return scale_of(o, k) * q - min_of(o, k);
        else if constexpr (Fmt::scaled) return scale_of(o, k) * q;
        else return q;
    }

    // Quantizes W from value(i) (element i in row-major order, finite; read more than once), every
    // word and scale including the padding.
    template <class V> void quantize(V&& value) {
        for (std::size_t i = 0; i < sizeof storage / sizeof storage[0]; ++i) storage[i] = 0;
        for (std::size_t i = 0; i < sizeof scales / sizeof scales[0]; ++i) scales[i] = 0;
        for (std::size_t i = 0; i < sizeof mins / sizeof mins[0]; ++i) mins[i] = 0;
        if constexpr (two_level) super = {};
        constexpr std::size_t span = Fmt::group ? Fmt::group : In;  // inputs sharing one scale
        constexpr std::size_t bits = level_bits<Fmt>;
        constexpr bool int8 = bits == 8, u = unsigned_levels<Fmt>;
        constexpr double half = double(1u << (bits - 1)), top = double((1u << bits) - 1);
        for (std::size_t o = 0; o < Out; ++o)
            for (std::size_t k0 = 0; k0 < In; k0 += span) {
                double s = 0, lo = 0;  // bf16: unused; unsigned levels: the group's minimum
                if constexpr (two_level) {
                    if (k0 % kscale::super == 0) quantize_scales(value, o, k0);
                    s = scale_of(o, k0), lo = has_min<Fmt> ? -static_cast<double>(min_of(o, k0)) : 0.0;
                } else if constexpr (Fmt::scaled) {
                    double m;
                    group_rule(value, o, k0, s, m);
                    scales[scale_index(o, k0)] = quant::to_scale<scale_type>(static_cast<float>(s));
                    s = quant::scale_value(scales[scale_index(o, k0)]);
                    if constexpr (u) {
                        mins[scale_index(o, k0)] = quant::to_scale<scale_type>(static_cast<float>(m));
                        lo = -static_cast<double>(quant::scale_value(mins[scale_index(o, k0)]));
                    }
                }
                for (std::size_t k = k0; k < k0 + span; ++k) {
                    const double v = static_cast<double>(value(o * In + k));
                    if constexpr (std::is_same_v<Fmt, bf16>) {
                        storage[word_index(o, k)] |= quant::bf16_bits(static_cast<float>(v)) << (k % P * 16);
                    } else {
                        constexpr double qlo = u ? 0 : int8 ? -127 : -half, qhi = u ? top : int8 ? 127 : half - 1;
                        double q = s == 0 ? 0 : std::nearbyint((v - lo) / s);
                        q = q < qlo ? qlo : q > qhi ? qhi : q;
                        set_field(o, k, static_cast<std::int32_t>(q));
                    }
                }
            }
    }
    // Group (o, k0)'s scale s and minimum m (w = s·q − m) by the format's rule, unrounded: unsigned
    // levels llama.cpp's Q4_1 (s = (max − min) / top, m = −min), else m = 0 and s = max|w| / 127
    // (int8) or the value of largest magnitude over −2^(bits−1).
    template <class V> static void group_rule(const V& value, std::size_t o, std::size_t k0, double& s, double& m) {
        constexpr std::size_t span = Fmt::group ? Fmt::group : In, bits = level_bits<Fmt>;
        double lo = static_cast<double>(value(o * In + k0)), hi = lo, big = 0;
        for (std::size_t k = k0; k < k0 + span; ++k) {
            const double v = static_cast<double>(value(o * In + k));
            lo = v < lo ? v : lo, hi = v > hi ? v : hi;
            if (std::fabs(v) > std::fabs(big)) big = v;
        }
        if constexpr (unsigned_levels<Fmt>) s = (hi - lo) / double((1u << bits) - 1), m = -lo;
        else s = bits == 8 ? std::fabs(big) / 127.0 : big / -double(1u << (bits - 1)), m = 0;
    }
    // Two-level: the 256 inputs from k0 of output o — each group's scale (and minimum) by the rule,
    // the largest magnitude over 127 as the half, each group's int8 the nearest multiple of it.
    template <class V> void quantize_scales(V& value, std::size_t o, std::size_t k0) {
        constexpr std::size_t span = Fmt::group, n = kscale::super / span;
        double s[n], m[n], smax = 0, mmax = 0;
        for (std::size_t g = 0; g < n; ++g) {
            group_rule(value, o, k0 + g * span, s[g], m[g]);
            smax = std::fabs(s[g]) > smax ? std::fabs(s[g]) : smax, mmax = std::fabs(m[g]) > mmax ? std::fabs(m[g]) : mmax;
        }
        auto put = [&](std::uint16_t& half, scale_type* ints, const double* x, double big) {
            half = quant::to_scale<std::uint16_t>(static_cast<float>(big / 127.0));
            const double d = simd::half_value(half);
            for (std::size_t g = 0; g < n; ++g) {
                const double q = d == 0 ? 0 : std::nearbyint(x[g] / d);
                ints[scale_index(o, k0 + g * span)] = static_cast<scale_type>(q < -127 ? -127 : q > 127 ? 127 : q);
            }
        };
        put(super.scales[super_index(o, k0)], scales, s, smax);
        if constexpr (has_min<Fmt>) put(super.mins[super_index(o, k0)], mins, m, mmax);
    }

    // Input k of output o's integer (two's complement or a level), into words that held zero there;
    // and back, its bits as stored (level_bits<Fmt> of them, not sign-extended).
    constexpr void set_field(std::size_t o, std::size_t k, std::int32_t q) {
        constexpr std::size_t low = 32 / P;
        const auto u = static_cast<std::uint32_t>(q);
        storage[word_index(o, k)] |= (u & ((1u << low) - 1)) << (k % P * low);
        if constexpr (has_high_plane<Fmt>) storage[high_index(o, k)] |= (u >> 4 & 3u) << quant::high_shift(k);
    }
    constexpr std::uint32_t field(std::size_t o, std::size_t k) const {
        constexpr std::size_t low = 32 / P;
        std::uint32_t u = storage[word_index(o, k)] >> (k % P * low) & ((1ull << low) - 1);
        if constexpr (has_high_plane<Fmt>) u |= (storage[high_index(o, k)] >> quant::high_shift(k) & 3u) << 4;
        return u;
    }
};

template <class X> struct is_quantized_weight : std::false_type {};
template <class F, std::size_t O, std::size_t I, std::size_t S>
struct is_quantized_weight<QuantizedWeight<F, O, I, S>> : std::true_type {};
template <class X> inline constexpr bool is_quantized_weight_v = is_quantized_weight<std::remove_cv_t<X>>::value;
template <class F, std::size_t O, std::size_t I, std::size_t S>
struct is_tensor_storage<QuantizedWeight<F, O, I, S>> : std::true_type {};

// A KV cache's element for format F (ct::kv_cache<F>): the layer's T, or bf16 bits (float layers).
template <class T, class F> using cache_element_t = std::conditional_t<std::is_same_v<F, bf16>, std::uint16_t, T>;
// x as a cache of element E stores it (bf16: rounded to nearest even), and back.
template <class E, class T> constexpr E to_cache(T x) {
    if constexpr (std::is_same_v<E, T>) return x;
    else return static_cast<E>(quant::bf16_bits(x));
}
template <class T, class E> constexpr T from_cache(E x) {
    if constexpr (std::is_same_v<E, T>) return x;
    else return quant::bf16_value(x);
}

// A Linear weight (Out, In) in format Fmt for a layer of dtype T.
template <class Fmt, class T, std::size_t Out, std::size_t In, std::size_t Seg = Out>
using weight_storage_t = std::conditional_t<is_quantized_format<Fmt>, QuantizedWeight<Fmt, Out, In, Seg>, PackedWeight<T, Out, In, Seg>>;

}  // namespace ctformer
