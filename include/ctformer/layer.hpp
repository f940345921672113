// ctformer/layer.hpp — the decoder layer as a type.
//
//   using Layer = ct::DecoderLayer<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<256>>;
//   static Layer::Params params;                 // immutable weights (load_state_dict)
//   static Layer::Workspace<B, T, S> ws;         // scratch, sized at compile time
//   Layer::forward(params, ws, tgt, memory, out, ct::causal{}, ct::key_padding(mem_pad));
//
// forward follows torch.nn.TransformerDecoderLayer exactly (batch-first):
//   post-norm: x = norm1(x + SA(x)); x = norm2(x + CA(x, mem)); x = norm3(x + FF(x))
//   pre-norm:  x = x + SA(norm1(x)); x = x + CA(norm2(x), mem); x = x + FF(norm3(x))
// and the decoder-only block (no cross-attention, FFN normed by norm2) TransformerEncoderLayer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "attention.hpp"
#include "config.hpp"
#include "dropout.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"
#include "masks.hpp"
#include "params.hpp"
#include "tensor.hpp"

namespace ctformer {

template <class Cfg> struct Layer {
    using config = Cfg;
    using value_type = typename Cfg::value_type;
    using T = value_type;
    static constexpr std::size_t D = Cfg::d_model, H = Cfg::heads, Dh = Cfg::head_dim, F = Cfg::ffn_dim;
    static constexpr bool cross = Cfg::cross_attention, pre_norm = Cfg::norm_first;
    using Params = LayerParams<Cfg>;
    using Activation = typename Cfg::activation_type;
    using Norm = typename Cfg::norm_type;

    // Scratch for one forward over (B, Tq) queries and (B, S) memory rows. Place it in static
    // storage or memory you own; bytes is a compile-time constant for budgets.
    template <std::size_t B, std::size_t Tq, std::size_t S = Tq> struct Workspace {
        static_assert(B > 0 && Tq > 0 && S > 0, "ctformer: batch, tgt_len and src_len must be non-zero");
        static constexpr std::size_t M = B * Tq, Ms = cross ? B * S : 1, Smax = S > Tq ? S : Tq;
        alignas(64) T qkv[M * 3 * D];      // self: q|k|v per row; cross: q
        alignas(64) T kv_mem[Ms * 2 * D];  // cross: k|v of every memory row
        alignas(64) T ctx[M * D];          // concatenated head outputs
        alignas(64) T branch[M * D];       // a sub-layer's output before the residual add
        alignas(64) T normed[pre_norm ? M * D : 1];
        alignas(64) T hidden[M * F];
        alignas(64) T kt[Dh * Smax];                           // one head's keys, transposed
        alignas(64) T scores[attention_row_block * Smax];      // one block of query rows
        static constexpr std::size_t bytes = sizeof(T) * (M * 3 * D + Ms * 2 * D + 2 * M * D +
                                                          (pre_norm ? M * D : 1) + M * F + Dh * Smax +
                                                          attention_row_block * Smax);
    };

    // ---- Inference (eval mode: dropout is the identity) ----
    template <class Tgt, class Mem, class Out, class WS, class SelfMask = no_mask, class CrossMask = no_mask>
        requires cross
    static void forward(const Params& p, WS& ws, const Tgt& tgt, const Mem& mem, Out& out, const SelfMask& sm = {},
                        const CrossMask& cm = {}) {
        check_shapes<Tgt, Mem, Out, WS, SelfMask, CrossMask>();
        run(p, ws, tgt.data(), mem.data(), out.data(), sm, cm, no_dropout{});
    }
    // Decoder-only block: no memory.
    template <class Tgt, class Out, class WS, class SelfMask = no_mask>
        requires(!cross)
    static void forward(const Params& p, WS& ws, const Tgt& tgt, Out& out, const SelfMask& sm = {}) {
        check_shapes<Tgt, Tgt, Out, WS, SelfMask, no_mask>();
        run(p, ws, tgt.data(), static_cast<const T*>(nullptr), out.data(), sm, no_mask{}, no_dropout{});
    }

    // ---- Training-mode forward: dropout at PyTorch's sites, reproducible from (seed, step) ----
    template <class Tgt, class Mem, class Out, class WS, class SelfMask = no_mask, class CrossMask = no_mask>
    static void forward_train(const Params& p, WS& ws, const Tgt& tgt, const Mem& mem, Out& out,
                              const dropout_config& dc, const SelfMask& sm = {}, const CrossMask& cm = {})
        requires cross
    {
        check_shapes<Tgt, Mem, Out, WS, SelfMask, CrossMask>();
        run(p, ws, tgt.data(), mem.data(), out.data(), sm, cm, dropout_rng(dc));
    }
    template <class Tgt, class Out, class WS, class SelfMask = no_mask>
    static void forward_train(const Params& p, WS& ws, const Tgt& tgt, Out& out, const dropout_config& dc,
                              const SelfMask& sm = {})
        requires(!cross)
    {
        check_shapes<Tgt, Tgt, Out, WS, SelfMask, no_mask>();
        run(p, ws, tgt.data(), static_cast<const T*>(nullptr), out.data(), sm, no_mask{}, dropout_rng(dc));
    }

    // ---- Building blocks, public so caches and stacks reuse them ----
    static T score_scale() { return Cfg::scale_type::template value<T>(Dh); }

    template <class NP> static void norm_rows(const NP& np, const T* x, T* y, std::size_t rows) {
        for (std::size_t r = 0; r < rows; ++r) Norm::template apply<D>(np, x + r * D, y + r * D, static_cast<T>(Cfg::eps));
    }
    // y = x + branch (pre-norm) or y = norm(x + branch) (post-norm), row by row; y may alias x.
    template <class NP>
    static void residual(const NP& np, const T* x, const T* branch, T* y, std::size_t rows) {
        kernels::add(y, x, branch, rows * D);
        if constexpr (!pre_norm) norm_rows(np, y, y, rows);
    }
    // branch: (rows, D) = FF(x: (rows, D)) with dropout after the activation and on the output.
    // Dropout rows are numbered (batch row << 32 | position), so every caller draws the same stream.
    static std::uint64_t row_id(std::size_t r, std::size_t Tq) {
        return (std::uint64_t{r / Tq} << 32) | (r % Tq);
    }
    template <class Drop>
    static void feed_forward(const Params& p, const T* x, T* hidden, T* branch, std::size_t rows, std::size_t Tq,
                             const Drop& drop) {
        kernels::gemm(rows, F, D, x, D, p.linear1.weight.kernel_data(), F, hidden, F, p.linear1.bias_data(),
                      Activation{});
        if constexpr (Drop::enabled)
            for (std::size_t r = 0; r < rows; ++r) drop.apply(hidden + r * F, F, dropout_site::ffn_activation, row_id(r, Tq));
        kernels::gemm(rows, D, F, hidden, F, p.linear2.weight.kernel_data(), D, branch, D, p.linear2.bias_data());
        if constexpr (Drop::enabled)
            for (std::size_t r = 0; r < rows; ++r) drop.apply(branch + r * D, D, dropout_site::ffn_out, row_id(r, Tq));
    }
    template <class Drop>
    static void drop_rows(const Drop& drop, T* x, std::size_t rows, std::size_t Tq, dropout_site site) {
        if constexpr (Drop::enabled)
            for (std::size_t r = 0; r < rows; ++r) drop.apply(x + r * D, D, site, row_id(r, Tq));
    }
    template <class MHA> static void out_projection(const MHA& a, const T* ctx, T* branch, std::size_t rows) {
        kernels::gemm(rows, D, D, ctx, D, a.out_proj.weight.kernel_data(), D, branch, D, a.out_proj.bias_data());
    }
    // The norm applied before (pre-norm) or after (post-norm) each sub-layer.
    static const auto& norm_self(const Params& p) { return p.norm1; }
    static const auto& norm_cross(const Params& p) { return p.norm2; }
    static const auto& norm_ffn(const Params& p) {
        if constexpr (cross) return p.norm3;
        else return p.norm2;
    }

  private:
    template <class Tgt, class Mem, class Out, class WS, class SM, class CM> static constexpr void check_shapes() {
        static_assert(tensor_like<Tgt> && tensor_like<Mem> && tensor_like<Out>,
                      "ctformer: tgt, memory and out must be ct::Tensor / ct::TensorView (or have value_type, shape, "
                      "data())");
        static_assert(std::is_same_v<typename Tgt::value_type, T> && std::is_same_v<typename Mem::value_type, T> &&
                          std::is_same_v<typename Out::value_type, T>,
                      "ctformer: mixed dtypes: tgt, memory and out must have the layer's dtype");
        static_assert(Tgt::rank == 3 && Mem::rank == 3 && Out::rank == 3,
                      "ctformer: tgt, memory and out are (batch, len, d_model) tensors");
        static_assert(Tgt::shape[2] == D, "ctformer: d_model mismatch: tgt's last dimension is not the layer's d_model");
        static_assert(Mem::shape[2] == D,
                      "ctformer: d_model mismatch: memory's last dimension is not the layer's d_model");
        static_assert(Tgt::shape[0] == Mem::shape[0], "ctformer: batch mismatch: tgt and memory batch sizes differ");
        static_assert(Out::shape == Tgt::shape, "ctformer: out must have tgt's shape (batch, tgt_len, d_model)");
        constexpr std::size_t B = Tgt::shape[0], Tq = Tgt::shape[1], S = Mem::shape[1];
        static_assert(std::is_same_v<WS, Workspace<B, Tq, S>>,
                      "ctformer: workspace shape differs from the call: use Layer::Workspace<batch, tgt_len, src_len>");
        static_assert(SM::template fits<T, B, H, Tq, Tq>,
                      "ctformer: self-attention mask does not fit (batch, heads, tgt_len, tgt_len) or dtype");
        static_assert(CM::template fits<T, B, H, Tq, S>,
                      "ctformer: cross-attention mask does not fit (batch, heads, tgt_len, src_len) or dtype");
    }

    // Multi-head self-attention of x: (B*Tq, D) -> ws.branch: (B*Tq, D).
    template <class WS, class Mask, class Drop>
    static void self_attention(const Params& p, WS& ws, const T* x, std::size_t B, std::size_t Tq, const Mask& mask,
                               const Drop& drop) {
        const auto& a = p.self_attn;
        const std::size_t M = B * Tq;
        // qkv: (M, 3D) = x: (M, D) · in_proj_weightᵀ: (D, 3D) + in_proj_bias
        kernels::gemm(M, 3 * D, D, x, D, a.in_proj_weight.kernel_data(), 3 * D, ws.qkv, 3 * D, a.in_bias_data());
        const T scale = score_scale();
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t h = 0; h < H; ++h) {
                const T* base = ws.qkv + b * Tq * 3 * D + h * Dh;
                transpose_keys(Tq, Dh, base + D, 3 * D, ws.kt, Tq);
                attend_head(Tq, Tq, Dh, base, 3 * D, ws.kt, Tq, base + 2 * D, 3 * D, ws.ctx + b * Tq * D + h * Dh, D,
                            ws.scores, scale, mask, head_ref{b, h, H}, 0, drop, dropout_site::self_attn_weights);
            }
        out_projection(a, ws.ctx, ws.branch, M);
    }

    // Multi-head cross-attention of x: (B*Tq, D) over mem: (B*S, D) -> ws.branch: (B*Tq, D).
    template <class WS, class Mask, class Drop>
    static void cross_attention(const Params& p, WS& ws, const T* x, const T* mem, std::size_t B, std::size_t Tq,
                                std::size_t S, const Mask& mask, const Drop& drop) {
        const auto& a = p.multihead_attn;
        const T* w = a.in_proj_weight.kernel_data();
        const T* bias = a.in_bias_data();
        // q: (M, D) = x · Wqᵀ + bq ; kv: (B*S, 2D) = mem · [Wk; Wv]ᵀ + [bk; bv]
        kernels::gemm(B * Tq, D, D, x, D, w, 3 * D, ws.qkv, D, bias);
        kernels::gemm(B * S, 2 * D, D, mem, D, w + D, 3 * D, ws.kv_mem, 2 * D, bias ? bias + D : nullptr);
        const T scale = score_scale();
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t h = 0; h < H; ++h) {
                const T* kv = ws.kv_mem + b * S * 2 * D + h * Dh;
                transpose_keys(S, Dh, kv, 2 * D, ws.kt, S);
                attend_head(Tq, S, Dh, ws.qkv + b * Tq * D + h * Dh, D, ws.kt, S, kv + D, 2 * D,
                            ws.ctx + b * Tq * D + h * Dh, D, ws.scores, scale, mask, head_ref{b, h, H}, 0, drop,
                            dropout_site::cross_attn_weights);
            }
        out_projection(a, ws.ctx, ws.branch, B * Tq);
    }

    template <std::size_t B, std::size_t Tq, std::size_t S, class SM, class CM, class Drop>
    static void run(const Params& p, Workspace<B, Tq, S>& ws, const T* x, const T* mem, T* y, const SM& sm,
                    const CM& cm, const Drop& drop) {
        constexpr std::size_t M = B * Tq;
        // Self-attention sub-layer. y may alias x: every stage reads a row before writing it.
        const T* in = x;
        if constexpr (pre_norm) {
            norm_rows(norm_self(p), x, ws.normed, M);
            in = ws.normed;
        }
        self_attention(p, ws, in, B, Tq, sm, drop);
        drop_rows(drop, ws.branch, M, Tq, dropout_site::self_attn_out);
        residual(norm_self(p), x, ws.branch, y, M);
        // Cross-attention sub-layer (memory is never normalized).
        if constexpr (cross) {
            in = y;
            if constexpr (pre_norm) {
                norm_rows(norm_cross(p), y, ws.normed, M);
                in = ws.normed;
            }
            cross_attention(p, ws, in, mem, B, Tq, S, cm, drop);
            drop_rows(drop, ws.branch, M, Tq, dropout_site::cross_attn_out);
            residual(norm_cross(p), y, ws.branch, y, M);
        }
        // Feed-forward sub-layer.
        in = y;
        if constexpr (pre_norm) {
            norm_rows(norm_ffn(p), y, ws.normed, M);
            in = ws.normed;
        }
        feed_forward(p, in, ws.hidden, ws.branch, M, Tq, drop);
        residual(norm_ffn(p), y, ws.branch, y, M);
    }
};

template <class... Opts> using DecoderLayer = Layer<config<Opts...>>;
template <class... Opts> using DecoderOnlyBlock = Layer<config<cross_attention<false>, Opts...>>;

}  // namespace ctformer
