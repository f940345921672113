// ctformer/modules/lora.hpp — low-rank adapters (LoRA, PEFT's formulas) over a frozen linear
// layer, forward and backward side by side:
//
//   y = W x + b + s · B (A drop(x)),   s = α / r,   A: (r, In), B: (Out, r)
//
// The base weight W may be of any format (quantized, in flash); A and B are float, in RAM, under
// PEFT's names (lora_A.weight, lora_B.weight): A row-major as PyTorch's (its products have the
// rank as their short side: kernels/lowrank.hpp), B in the panel layout of every weight. The attention and feed-forward modules call these for the projections the
// layer's ct::lora option targets; what a projection has no adapter for is ct::absent.
#pragma once
#include <boost/hana/define_struct.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "../core/dropout.hpp"
#include "../core/status.hpp"
#include "../core/reflect.hpp"
#include "../kernels/lowrank.hpp"
#include "../simd/cmath.hpp"
#include "linear.hpp"

namespace ctformer {

// The projections an adapter can target (ct::lora's Targets: a bitwise or). A plain feed-forward's
// linear1 and linear2 are lora_up and lora_down. lora_mha: nn.MultiheadAttention's packed
// attention as PEFT adapts it (target "self_attn"): one adapter over the in-projection (q|k|v,
// 3·d_model outputs) and one over out_proj, merged into the weights for each forward (so without
// adapter dropout); lora_q .. lora_o are separate projections' (Llama's). lora_cross: a
// cross-attention layer's nn.MultiheadAttention (target "multihead_attn") as PEFT adapts it: its
// in-projection's adapter over the queries' rows (q) and the memory's (k|v).
enum lora_target : unsigned {
    lora_q = 1, lora_k = 2, lora_v = 4, lora_o = 8, lora_gate = 16, lora_up = 32, lora_down = 64,
    lora_attention = 15, lora_mlp = 112, lora_all = 127, lora_mha = 128, lora_cross = 256
};
inline constexpr unsigned lora_target_count = 9;
// An adapter's scale: α / r (LoRA's), or α / √r (rsLoRA: PEFT's use_rslora).
enum lora_scaling : unsigned char { lora_alpha_over_r = 0, rslora = 1 };
constexpr double lora_scale_of(std::size_t R, long long Alpha, lora_scaling S) {
    return static_cast<double>(Alpha) / (S == rslora ? cmath::sqrt(static_cast<double>(R)) : static_cast<double>(R));
}

// lora_A: (R, In), row-major (PyTorch's layout).
template <class T, std::size_t R, std::size_t In> struct LoraA {
    using weight_t = Tensor<T, R, In>;
    BOOST_HANA_DEFINE_STRUCT(LoraA, (weight_t, weight));
};
// lora_B: (Out, R) in panel layout, in output blocks of Seg rows (a packed in-projection's adapter
// is used a block at a time, as its weight: cross-attention's q and the memory's k|v).
template <class T, std::size_t Out, std::size_t R, std::size_t Seg> struct LoraB {
    using weight_t = PackedWeight<T, Out, R, Seg>;
    BOOST_HANA_DEFINE_STRUCT(LoraB, (weight_t, weight));
};
// One adapted projection's adapter: lora_A (R, In), lora_B (Out, R); scale α/R (rsLoRA: α/√R).
template <class T, std::size_t Out, std::size_t In, std::size_t R, long long Alpha, std::size_t Seg = Out,
          lora_scaling S = lora_alpha_over_r>
struct LoraParams {
    static constexpr std::size_t rank = R, in_features = In, out_features = Out, segment = Seg;
    static constexpr T scale = static_cast<T>(lora_scale_of(R, Alpha, S));
    using a_t = LoraA<T, R, In>;
    using b_t = LoraB<T, Out, R, Seg>;
    BOOST_HANA_DEFINE_STRUCT(LoraParams, (a_t, lora_A), (b_t, lora_B));
};
// The adapter of a projection (Bit of Cfg's targets), or ct::absent where it has none.
template <class Cfg, unsigned Bit, std::size_t Out, std::size_t In, std::size_t Seg = Out>
using lora_slot = std::conditional_t<(Cfg::lora_targets & Bit) != 0,
                                     LoraParams<typename Cfg::value_type, Out, In, Cfg::lora_rank, Cfg::lora_alpha, Seg,
                                                Cfg::lora_scale>,
                                     absent>;

// The adapters of an attention's separate projections (named as its params: q_proj, ...).
template <class Cfg> struct AttentionAdapters {
    using role = role::attention;
    static constexpr std::size_t D = Cfg::d_model, Dkv = Cfg::kv_heads * Cfg::head_dim;
    using q_t = lora_slot<Cfg, lora_q, D, D>;
    using k_t = lora_slot<Cfg, lora_k, Dkv, D>;
    using v_t = lora_slot<Cfg, lora_v, Dkv, D>;
    using o_t = lora_slot<Cfg, lora_o, D, D>;
    BOOST_HANA_DEFINE_STRUCT(AttentionAdapters, (q_t, q_proj), (k_t, k_proj), (v_t, v_proj), (o_t, o_proj));
};
// PEFT's names for nn.MultiheadAttention's adapters: the in-projection's at the module's own level
// (self_attn.lora_A.weight, lora_B (3·d_model, r)), out_proj's under its base layer
// (self_attn.base_layer.out_proj.lora_A.weight).
struct peft_mha_names {
    template <class Role> static constexpr std::string_view rename(std::string_view member) {
        return member == "in_proj" ? "" : member == "out_proj" ? "base_layer.out_proj" : member;
    }
};
// Bit: lora_mha (self_attn) or lora_cross (multihead_attn: its in-projection's adapter in blocks
// of D outputs, the queries' and the memory's k|v used apart).
template <class Cfg, unsigned Bit = lora_mha> struct PackedAttentionAdapters {
    using role = role::attention;
    using names = peft_mha_names;
    static constexpr std::size_t D = Cfg::d_model;
    using in_t = lora_slot<Cfg, Bit, 3 * D, D, Bit == lora_cross ? D : 3 * D>;
    using out_t = lora_slot<Cfg, Bit, D, D>;
    BOOST_HANA_DEFINE_STRUCT(PackedAttentionAdapters, (in_t, in_proj), (out_t, out_proj));
};
template <class Cfg>
using attention_adapters_t = std::conditional_t<Cfg::separate_qkv, AttentionAdapters<Cfg>, PackedAttentionAdapters<Cfg>>;

// The adapters of a feed-forward: gated (gate_proj, up_proj, down_proj) or plain (linear1, linear2).
template <class Cfg, bool Gated = Cfg::gated> struct FeedForwardAdapters {
    using role = role::ffn;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim;
    using gate_t = lora_slot<Cfg, lora_gate, F, D>;
    using up_t = lora_slot<Cfg, lora_up, F, D>;
    using down_t = lora_slot<Cfg, lora_down, D, F>;
    BOOST_HANA_DEFINE_STRUCT(FeedForwardAdapters, (gate_t, gate_proj), (up_t, up_proj), (down_t, down_proj));
    template <unsigned Bit, class S> static constexpr auto& slot(S& a) {
        if constexpr (Bit == lora_gate) return a.gate_proj;
        else if constexpr (Bit == lora_up) return a.up_proj;
        else return a.down_proj;
    }
};
template <class Cfg> struct FeedForwardAdapters<Cfg, false> {
    using role = role::ffn;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim;
    using up_t = lora_slot<Cfg, lora_up, F, D>;
    using down_t = lora_slot<Cfg, lora_down, D, F>;
    BOOST_HANA_DEFINE_STRUCT(FeedForwardAdapters, (up_t, linear1), (down_t, linear2));
    template <unsigned Bit, class S> static constexpr auto& slot(S& a) {
        static_assert(Bit != lora_gate, "ctformer: a plain feed-forward has no gate_proj");
        if constexpr (Bit == lora_up) return a.linear1;
        else return a.linear2;
    }
};

// What a sub-layer's call passes to its adapters: which adapters (null: the base alone; Ad is
// ct::absent for a layer without the option), the call's dropout, and the numbering of its rows
// (sequence length Tq: dropout_row_id) — the adapter's input dropout draws its own stream per
// projection (site lora_input + the projection's bit index), as PEFT's one nn.Dropout per adapter.
template <class Ad, class Drop> struct lora_pass {
    const Ad* ad;
    const Drop& drop;
    std::size_t Tq;
};
// Backward's: the adapters the forward ran (null: none) and their gradients (+=).
template <class Ad> struct lora_grads {
    const Ad* ad;
    Ad* g;
};
// Base params with adapters: what the entry points of a layer with ct::lora take in place of its
// Params to run (and train) its adapters; with its Params alone, it runs the base.
//   L::forward(ct::with_adapters(params, adapters), ws, x, y);
template <class P, class A> struct adapted {
    const P& params;
    const A& adapters;
};
template <class P, class A> constexpr adapted<P, A> with_adapters(const P& p, const A& a) { return {p, a}; }

// PEFT's initialisation (init_lora_weights=True): every lora_A from kaiming_uniform_(a=√5), i.e.
// U(−1/√In, 1/√In), every lora_B zero (the adapted model starts as the base). The draws: Philox
// (core/dropout.hpp) keyed by seed, counting (tensor, element): the same on every target.
template <class A> void init_adapters(A& adapters, std::uint64_t seed) {
    std::uint32_t tensor = 0;
    for_each_tensor(adapters, [&](std::string_view name, auto& t) {
        using X = std::remove_cvref_t<decltype(t)>;
        using T = typename X::value_type;
        const bool is_a = name.ends_with("lora_A.weight");  // (no substr: nothing here may throw)
        const double bound = 1.0 / std::sqrt(static_cast<double>(X::shape[1]));  // (A: (R, In))
        for (std::size_t i = 0; i < X::size; ++i) {
            T v = T(0);
            if (is_a) {
                const auto r = philox4x32({static_cast<std::uint32_t>(i), tensor, 0x10a5u, 0},
                                          {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
                const double u = (static_cast<double>(r[0] >> 8) + 0.5) / 16777216.0;  // (0, 1), 24 bits
                v = static_cast<T>((2 * u - 1) * bound);
            }
            t.set(i, v);
        }
        ++tensor;
    });
}

// Merges adapters into their base weights (PEFT's merge_and_unload): W += s·B·A (s = α/r, or α/√r) for every
// adapted projection (sign −1: unmerge, W −= s·B·A: back within a rounding of each element,
// as PEFT's). Base and adapters are matched by name (self_attn.q_proj.weight takes
// self_attn.q_proj.lora_A/B.weight; the packed in_proj_weight self_attn.lora_A/B.weight, out_proj
// self_attn.base_layer.out_proj's); each delta is summed in double. The base must be float:
// errc::invalid_option (nothing written) for a quantized base weight.
template <class P, class A> status merge_adapters(P& params, const A& adapters, int sign = 1) {
    struct pair {  // one adapter, type-erased: element (row, col) of A (R, In) and B (Out, R)
        std::string_view stem;
        const void *a = nullptr, *b = nullptr;
        double (*get_a)(const void*, std::size_t) = nullptr;
        double (*get_b)(const void*, std::size_t) = nullptr;
        std::size_t in = 0, out = 0;
    };
    constexpr std::size_t R = A::lora_rank;
    const double scale = lora_scale_of(R, A::lora_alpha, A::lora_scale) * sign;
    // (PEFT's nn.MultiheadAttention adapters: the in-projection's stem is the module, its base the
    // packed weight under P's names; out_proj's stem has base_layer. before out_proj)
    constexpr std::string_view in_proj_name =
        detail::names_in_force<P, canonical_names>::type::template rename<role::attention>("in_proj_weight");
    constexpr auto adapts = [](std::string_view base, std::string_view stem, std::string_view in_proj) {
        constexpr std::string_view mark = "base_layer.";
        if (const std::size_t at = stem.rfind(mark); at != std::string_view::npos)
            return base.size() == stem.size() - mark.size() + 7 && base.starts_with(stem.substr(0, at)) &&
                   base.substr(at).starts_with(stem.substr(at + mark.size())) && base.ends_with(".weight");
        if (base.size() == stem.size() + 7 && base.starts_with(stem) && base.ends_with(".weight")) return true;
        return base.size() == stem.size() + 1 + in_proj.size() && base.starts_with(stem) && base[stem.size()] == '.' &&
               base.ends_with(in_proj);
    };
    status st;
    // pass 1 checks every base weight exists and is float; pass 2 writes
    for (int pass = 0; pass < 2 && st; ++pass) {
        pair cur;
        for_each_tensor(adapters, [&](std::string_view name, const auto& t) {
            using X = std::remove_cvref_t<decltype(t)>;
            constexpr auto get = [](const void* p, std::size_t i) { return static_cast<double>(static_cast<const X*>(p)->get(i)); };
            if (name.ends_with("lora_A.weight")) {  // (visited before its lora_B)
                cur.stem = std::string_view(name.data(), name.size() - 14);
                cur.a = &t;
                cur.get_a = get;
                cur.in = X::shape[1];
                return;
            }
            cur.b = &t;
            cur.get_b = get;
            cur.out = X::shape[0];
            bool found = false;
            for_each_tensor(params, [&](std::string_view base, auto& w) {
                using Wt = std::remove_cvref_t<decltype(w)>;
                if (found || !adapts(base, cur.stem, in_proj_name)) return;
                found = true;
                if constexpr (is_quantized_weight_v<Wt>) {
                    if (st) st = status::error(errc::invalid_option, base, ": merge needs a float base weight");
                } else if (pass == 1) {
                    for (std::size_t o = 0; o < cur.out; ++o)
                        for (std::size_t i = 0; i < cur.in; ++i) {
                            double d = 0;
                            for (std::size_t r = 0; r < R; ++r) d += cur.get_b(cur.b, o * R + r) * cur.get_a(cur.a, r * cur.in + i);
                            w.set(o * cur.in + i, static_cast<typename Wt::value_type>(w.get(o * cur.in + i) + scale * d));
                        }
                }
            });
            if (!found && st) st = status::error(errc::missing_tensor, cur.stem, ".weight");
        });
    }
    return st;
}

// A call without adapters (the default of every module function that takes a lora_pass).
struct no_lora_pass {};
template <class L> inline constexpr bool passes_adapters = !std::is_same_v<L, no_lora_pass>;

}  // namespace ctformer

namespace ctformer::modules {

struct lora {
    template <class X> static constexpr bool adapter = !std::is_same_v<std::remove_cvref_t<X>, absent>;
    // The dropout site of the adapter on projection Bit.
    template <unsigned Bit> static constexpr dropout_site site() {
        return static_cast<dropout_site>(static_cast<unsigned>(dropout_site::lora_input) + static_cast<unsigned>(__builtin_ctz(Bit)));
    }

    // Output blocks S0 .. S0+NS of an adapter's B (NS 0: all; blocks of LP::segment rows): a
    // packed in-projection's adapter is used a block at a time, as its weight is.
    // y: (rows, NS·Seg) at ldy += s · drop(x) · Aᵀ · B[blocks]ᵀ, x: (rows, In) at ldx holding rows first.. of
    // the call's B·Tq (their dropout numbering). Chunks of rows on the stack: xa = drop(x)·Aᵀ, (chunk, R).
    template <unsigned Bit, std::size_t S0 = 0, std::size_t NS = 0, class LP, class T, class Drop>
    static void forward(const LP& a, const T* x, std::size_t ldx, std::size_t rows, T* y, std::size_t ldy, T* pack,
                        const Drop& drop, std::size_t Tq, std::size_t first) {
        if constexpr (adapter<LP>) {
            constexpr std::size_t R = LP::rank, In = LP::in_features, C = chunk_rows<T, R, In, Drop>();
            alignas(64) T xa[C * R];
            alignas(64) T xd[Drop::enabled ? C * In : 1];
            for (std::size_t r0 = 0; r0 < rows; r0 += C) {
                const std::size_t n = rows - r0 < C ? rows - r0 : C;
                down(a, dropped<Bit, In>(x + r0 * ldx, ldx, n, xd, drop, Tq, first + r0), n, xa);
                linear::forward(a.lora_B.weight, S0, blocks<LP, NS>(), xa, n, static_cast<const T*>(nullptr), y + r0 * ldy, ldy,
                                pack, kernels::identity_op{}, true, R);
            }
        }
    }

    // The adapter's gradients (+=) and its share of dx (dx null: none; dx may not alias x), a chunk
    // of rows at a time: xa = s·drop(x)·Aᵀ, dB += dyᵀ·xa, dxa = s·dy·B, dA += dxaᵀ·drop(x),
    // dx += drop'(dxa·A). x: the forward's input (rows at ldx, dx's stride too), dy: (rows, NS·Seg)
    // at ldy, the gradient of B's blocks S0 .. S0+NS (forward's).
    template <unsigned Bit, std::size_t S0 = 0, std::size_t NS = 0, class LP, class T, class Drop>
    static void backward(const LP& a, LP& g, const T* x, std::size_t ldx, std::size_t rows, const T* dy, std::size_t ldy,
                         T* dx, T* pack, const Drop& drop, std::size_t Tq) {
        if constexpr (adapter<LP>) {
            constexpr std::size_t R = LP::rank, In = LP::in_features, C = chunk_rows<T, R, In, Drop>();
            alignas(64) T xa[C * R];
            alignas(64) T dxa[C * R];
            alignas(64) T xd[Drop::enabled ? C * In : 1];
            for (std::size_t r0 = 0; r0 < rows; r0 += C) {
                const std::size_t n = rows - r0 < C ? rows - r0 : C;
                const auto in = dropped<Bit, In>(x + r0 * ldx, ldx, n, xd, drop, Tq, r0);
                down(a, in, n, xa);
                // dB += dyᵀ · xa (B's panels); dxa = s · dy · B; dA += dxaᵀ · drop(x)
                linear::backward(a.lora_B.weight, g.lora_B.weight, S0, blocks<LP, NS>(), xa, n, dy + r0 * ldy, ldy,
                                 static_cast<T*>(nullptr), static_cast<T*>(nullptr), false, pack, R);
                up_grad<S0, NS>(a, dy + r0 * ldy, ldy, n, dxa);
                kernels::gemm_tn(R, In, n, dxa, R, in.x, in.ld, g.lora_A.weight.data(), In, true);
                if (!dx) continue;
                if (in.x != x + r0 * ldx) add_dropped_share<Bit>(a, dxa, n, dx + r0 * ldx, ldx, xd, drop, Tq, r0);
                else add_share(a, dxa, n, dx + r0 * ldx, ldx);
            }
        }
    }
    // The adapter's gradients alone (its input's buffer is about to become the input's gradient).
    template <unsigned Bit, class LP, class T, class Drop>
    static void weight_grads(const LP& a, LP& g, const T* x, std::size_t ldx, std::size_t rows, const T* dy,
                             std::size_t ldy, T* pack, const Drop& drop, std::size_t Tq) {
        backward<Bit>(a, g, x, ldx, rows, dy, ldy, static_cast<T*>(nullptr), pack, drop, Tq);
    }
    // dx: (rows, In) at ldx += drop'(s · dy·B · A): the adapter's share of its input's gradient alone
    // (it does not read x: callers may run it after x's buffer has become the gradient's).
    template <unsigned Bit, class LP, class T, class Drop>
    static void input_grad(const LP& a, const T* dy, std::size_t ldy, std::size_t rows, T* dx, std::size_t ldx,
                           const Drop& drop, std::size_t Tq) {
        if constexpr (adapter<LP>) {
            constexpr std::size_t R = LP::rank, In = LP::in_features, C = chunk_rows<T, R, In, Drop>();
            alignas(64) T dxa[C * R];
            alignas(64) T dxd[Drop::enabled ? C * In : 1];
            for (std::size_t r0 = 0; r0 < rows; r0 += C) {
                const std::size_t n = rows - r0 < C ? rows - r0 : C;
                up_grad(a, dy + r0 * ldy, ldy, n, dxa);
                if (drop.drops(site<Bit>())) add_dropped_share<Bit>(a, dxa, n, dx + r0 * ldx, ldx, dxd, drop, Tq, r0);
                else add_share(a, dxa, n, dx + r0 * ldx, ldx);
            }
        }
    }

  private:
    template <class LP, std::size_t NS> static constexpr std::size_t blocks() { return NS ? NS : LP::out_features / LP::segment; }
    // Rows per chunk: the chunk's buffers (xa, dxa and, with dropout, a copy of x) within 16 KB of
    // stack (2 KB on compact kernels: microcontrollers), at most 64 rows.
    template <class T, std::size_t R, std::size_t In, class Drop> static constexpr std::size_t chunk_rows() {
        constexpr std::size_t budget = kernels::gemm_tile<T>::compact ? 2048 : 16384;
        constexpr std::size_t per_row = sizeof(T) * (2 * R + (Drop::enabled ? In : 0));
        constexpr std::size_t c = budget / per_row;
        return c < 1 ? 1 : c > 64 ? 64 : c;
    }
    template <class T> struct rows_at {
        const T* x;
        std::size_t ld;
    };
    // xa: (n, R) = s · in · Aᵀ
    template <class LP, class T> static void down(const LP& a, rows_at<T> in, std::size_t n, T* xa) {
        kernels::gemm_nt_rows<LP::rank>(n, LP::in_features, in.x, in.ld, a.lora_A.weight.data(), LP::in_features, xa, LP::rank,
                                        false);
        for (std::size_t i = 0; i < n * LP::rank; ++i) xa[i] *= LP::scale;
    }
    // dxa: (n, R) = s · dy · B[blocks S0 .. S0+NS], dy: (n, NS·Seg) at ldy (a block's panels at a time)
    template <std::size_t S0 = 0, std::size_t NS = 0, class LP, class T>
    static void up_grad(const LP& a, const T* dy, std::size_t ldy, std::size_t n, T* dxa) {
        constexpr std::size_t Seg = LP::segment;
        for (std::size_t s = 0; s < blocks<LP, NS>(); ++s)
            kernels::gemm_nt_weight_rows<LP::rank>(n, Seg, dy + s * Seg, ldy, a.lora_B.weight.panels(S0 + s), dxa, LP::rank, s > 0);
        for (std::size_t i = 0; i < n * LP::rank; ++i) dxa[i] *= LP::scale;
    }
    // dx's n rows += dxa · A
    template <class LP, class T> static void add_share(const LP& a, const T* dxa, std::size_t n, T* dx, std::size_t ldx) {
        kernels::gemm(n, LP::in_features, LP::rank, dxa, LP::rank, a.lora_A.weight.data(), LP::in_features, dx, ldx,
                      static_cast<const T*>(nullptr), kernels::identity_op{}, static_cast<T*>(nullptr), true);
    }
    // dx's n rows (from row r0 of the call) += drop'(dxa · A), through buf: (n, In) scratch
    template <unsigned Bit, class LP, class T, class Drop>
    static void add_dropped_share(const LP& a, const T* dxa, std::size_t n, T* dx, std::size_t ldx, T* buf, const Drop& drop,
                                  std::size_t Tq, std::size_t r0) {
        constexpr std::size_t In = LP::in_features;
        kernels::gemm(n, In, LP::rank, dxa, LP::rank, a.lora_A.weight.data(), In, buf, In, static_cast<const T*>(nullptr),
                      kernels::identity_op{}, static_cast<T*>(nullptr), false);
        for (std::size_t i = 0; i < n; ++i) {
            drop.apply(buf + i * In, In, site<Bit>(), dropout_row_id(r0 + i, Tq));
            kernels::add_inplace(dx + i * ldx, buf + i * In, In);
        }
    }
    // x's n rows through the adapter's dropout (into buf: (n, In)), or x itself where it drops nothing.
    template <unsigned Bit, std::size_t In, class T, class Drop>
    static rows_at<T> dropped(const T* x, std::size_t ldx, std::size_t n, T* buf, const Drop& drop, std::size_t Tq,
                              std::size_t first) {
        if constexpr (Drop::enabled)
            if (drop.drops(site<Bit>())) {
                for (std::size_t i = 0; i < n; ++i) {
                    for (std::size_t c = 0; c < In; ++c) buf[i * In + c] = x[i * ldx + c];
                    drop.apply(buf + i * In, In, site<Bit>(), dropout_row_id(first + i, Tq));
                }
                return {buf, In};
            }
        (void)buf, (void)drop, (void)Tq, (void)first, (void)n;
        return {x, ldx};
    }
};

}  // namespace ctformer::modules
