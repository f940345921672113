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
#include "kv_cache.hpp"
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
        alignas(64) T kt[Dh * Smax];                                   // one head's keys, transposed
        alignas(64) T scores[attention_row_block * attention_key_tile];  // one score tile
        static constexpr std::size_t pack_elems = kernels::gemm_pack_elems<T>(M > Ms ? M : Ms);
        alignas(64) T pack[pack_elems];  // GEMM operands packed for the micro-kernel
        static constexpr std::size_t bytes = sizeof(T) * (M * 3 * D + Ms * 2 * D + 2 * M * D +
                                                          (pre_norm ? M * D : 1) + M * F + Dh * Smax +
                                                          attention_row_block * attention_key_tile +
                                                          pack_elems);
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
    // out: (rows, D) = FF(x: (rows, D)) with dropout after the activation (the output's dropout is
    // the caller's), or out += FF(x) (accumulate: the residual add fused into linear2's epilogue).
    // Dropout rows are numbered (batch row << 32 | position), so every caller draws the same stream.
    static std::uint64_t row_id(std::size_t r, std::size_t Tq) {
        return (std::uint64_t{r / Tq} << 32) | (r % Tq);
    }
    template <class Drop>
    static void feed_forward(const Params& p, const T* x, T* hidden, T* out, bool accumulate, std::size_t rows,
                             std::size_t Tq, const Drop& drop, T* pack) {
        linear(p.linear1.weight, 0, 1, x, rows, p.linear1.bias_data(), hidden, F, pack, Activation{});
        if constexpr (Drop::enabled)
            for (std::size_t r = 0; r < rows; ++r) drop.apply(hidden + r * F, F, dropout_site::ffn_activation, row_id(r, Tq));
        linear(p.linear2.weight, 0, 1, hidden, rows, p.linear2.bias_data(), out, D, pack, kernels::identity_op{},
               accumulate);
    }
    template <class Drop>
    static void drop_rows(const Drop& drop, T* x, std::size_t rows, std::size_t Tq, dropout_site site) {
        if constexpr (Drop::enabled)
            for (std::size_t r = 0; r < rows; ++r) drop.apply(x + r * D, D, site, row_id(r, Tq));
    }
    // out (+)= ctx · out_projᵀ + bias
    template <class MHA>
    static void out_projection(const MHA& a, const T* ctx, T* out, bool accumulate, std::size_t rows, T* pack) {
        linear(a.out_proj.weight, 0, 1, ctx, rows, a.out_proj.bias_data(), out, D, pack, kernels::identity_op{},
               accumulate);
    }
    // out: (rows, n·Seg) at ldo = x: (rows, In) · [blocks s0 .. s0+n of W]ᵀ + bias, then act. One GEMM
    // when the blocks abut in panel layout, else one per block (Seg not a multiple of the panel).
    // accumulate: out = act(out + x·Wᵀ + bias), the residual already in out.
    template <class Wt, class Act = kernels::identity_op>
    static void linear(const Wt& w, std::size_t s0, std::size_t n, const T* x, std::size_t rows, const T* bias, T* out,
                       std::size_t ldo, T* pack, const Act& act = {}, bool accumulate = false) {
        constexpr std::size_t In = Wt::in_features, Seg = Wt::segment;
        if constexpr (Wt::segments_contiguous) {
            kernels::gemm_panels(rows, n * Seg, In, x, In, w.panels(s0), out, ldo, bias, act, pack, accumulate);
        } else {
            for (std::size_t s = 0; s < n; ++s)
                kernels::gemm_panels(rows, Seg, In, x, In, w.panels(s0 + s), out + s * Seg, ldo,
                                     bias ? bias + s * Seg : nullptr, act, pack, accumulate);
        }
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

    // ---- Key/value sources: where one (batch row, head)'s keys and values come from. ----
    // The full forward projects them and transposes keys into scratch; the step appends them to
    // a KVCache and reads the cache. Everything else in the pipeline is shared.
    struct kv_view {
        const T* kt;  // keys transposed: (Dh, keys) at stride ldk
        std::size_t ldk;
        const T* v;  // values: (keys, Dh) at stride ldv
        std::size_t ldv;
        std::size_t keys;   // number of keys visible to this call
        std::size_t rows;   // query rows of batch row b in this call
        std::size_t qpos0;  // absolute position of the first query row
    };
    // Forward, self-attention: keys of the Tq rows themselves.
    struct transient_self {
        T* kt;
        std::size_t Tq;
        kv_view operator()(std::size_t, std::size_t, const T* k, const T* v, std::size_t ld) const {
            transpose_keys(Tq, Dh, k, ld, kt, Tq);
            return {kt, Tq, v, ld, Tq, Tq, 0};
        }
    };
    // Forward, cross-attention: keys/values of the memory rows, projected once per call.
    struct transient_cross {
        T* kt;
        const T* kv_mem;  // (B*S, 2D): k | v per memory row
        std::size_t S, Tq;
        kv_view operator()(std::size_t b, std::size_t h) const {
            const T* kv = kv_mem + b * S * 2 * D + h * Dh;
            transpose_keys(S, Dh, kv, 2 * D, kt, S);
            return {kt, S, kv + D, 2 * D, S, Tq, 0};
        }
    };
    // Step, self-attention: append the new rows' keys/values, attend over the whole cache row.
    template <class Cache> struct cached_self {
        Cache& cache;
        const std::array<std::size_t, Cache::batch>& pos0;
        const std::array<std::size_t, Cache::batch>& count;
        kv_view operator()(std::size_t b, std::size_t h, const T* k, const T* v, std::size_t ld) const {
            for (std::size_t i = 0; i < count[b]; ++i) cache.put(b, h, pos0[b] + i, k + i * ld, v + i * ld);
            return {cache.keys_t(b, h), Cache::capacity, cache.values(b, h), Dh, pos0[b] + count[b], count[b],
                    pos0[b]};
        }
    };
    // Step, cross-attention: the memory's keys/values, computed once by fill_cross_cache.
    template <class Cache, std::size_t B> struct cached_cross {
        const Cache& cache;
        const std::array<std::size_t, B>& pos0;
        const std::array<std::size_t, B>& count;
        kv_view operator()(std::size_t b, std::size_t h) const {
            return {cache.keys_t(b, h), Cache::capacity, cache.values(b, h), Dh, Cache::capacity, count[b], pos0[b]};
        }
    };
    struct no_source {};

    // Multi-head self-attention of x: (B*Tq, D) -> out: (B*Tq, D) (accumulate: out += it).
    template <class WS, class Src, class Mask, class Drop>
    static void self_attention(const Params& p, WS& ws, const T* x, std::size_t B, std::size_t Tq, const Src& src,
                               const Mask& mask, const Drop& drop, T* out, bool accumulate) {
        const auto& a = p.self_attn;
        // qkv: (B*Tq, 3D) = x: (B*Tq, D) · in_proj_weightᵀ: (D, 3D) + in_proj_bias
        linear(a.in_proj_weight, 0, 3, x, B * Tq, a.in_bias_data(), ws.qkv, 3 * D, ws.pack);
        const T scale = score_scale();
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t h = 0; h < H; ++h) {
                const T* base = ws.qkv + b * Tq * 3 * D + h * Dh;
                const kv_view kv = src(b, h, base + D, base + 2 * D, 3 * D);
                attend<Dh>(kv.rows, kv.keys, base, 3 * D, kv.kt, kv.ldk, kv.v, kv.ldv,
                            ws.ctx + b * Tq * D + h * Dh, D, ws.scores, scale, mask, head_ref{b, h, H}, kv.qpos0,
                            drop, dropout_site::self_attn_weights);
            }
        out_projection(a, ws.ctx, out, accumulate, B * Tq, ws.pack);
    }

    // Multi-head cross-attention of x: (B*Tq, D) over the source's memory -> out: (B*Tq, D)
    // (accumulate: out += it).
    template <class WS, class Src, class Mask, class Drop>
    static void cross_attention(const Params& p, WS& ws, const T* x, std::size_t B, std::size_t Tq, const Src& src,
                                const Mask& mask, const Drop& drop, T* out, bool accumulate) {
        const auto& a = p.multihead_attn;
        // q: (B*Tq, D) = x · Wqᵀ + bq  (Wq: the first D rows of in_proj_weight)
        linear(a.in_proj_weight, 0, 1, x, B * Tq, a.in_bias_data(), ws.qkv, D, ws.pack);
        const T scale = score_scale();
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t h = 0; h < H; ++h) {
                const kv_view kv = src(b, h);
                attend<Dh>(kv.rows, kv.keys, ws.qkv + b * Tq * D + h * Dh, D, kv.kt, kv.ldk, kv.v, kv.ldv,
                            ws.ctx + b * Tq * D + h * Dh, D, ws.scores, scale, mask, head_ref{b, h, H}, kv.qpos0,
                            drop, dropout_site::cross_attn_weights);
            }
        out_projection(a, ws.ctx, out, accumulate, B * Tq, ws.pack);
    }

    // mem: (B*S, D) -> kv: (B*S, 2D) = mem · [Wk; Wv]ᵀ + [bk; bv]
    static void project_memory(const Params& p, const T* mem, std::size_t rows, T* kv, T* pack) {
        const auto& a = p.multihead_attn;
        const T* bias = a.in_bias_data();
        linear(a.in_proj_weight, 1, 2, mem, rows, bias ? bias + D : nullptr, kv, 2 * D, pack);
    }

    // The three sub-layers over B*Tq rows: x -> y (y may alias x: each stage reads a row before
    // writing it). Shared by forward, forward_train and step.
    // Without output dropout (eval, or p = 0) each sub-layer's last GEMM adds its result onto the
    // residual stream y in its epilogue; with it, the branch goes to ws.branch, is dropped out,
    // then added. Every GEMM that accumulates into y reads a buffer other than y (ctx, hidden), and
    // the GEMMs that read y (q/kv, linear1) finish before y is written.
    template <class WS, class SelfSrc, class CrossSrc, class SM, class CM, class Drop>
    static void run_rows(const Params& p, WS& ws, std::size_t B, std::size_t Tq, const T* x, T* y,
                         const SelfSrc& self_src, const CrossSrc& cross_src, const SM& sm, const CM& cm,
                         const Drop& drop) {
        const std::size_t M = B * Tq;
        const bool fused = !drop.drops(dropout_site::self_attn_out);  // one p for the three output sites
        T* const branch = fused ? y : ws.branch;
        // after a sub-layer: the residual add (unless fused) and, post-norm, the norm, in place on y
        auto finish = [&](const auto& np, const T* resid, dropout_site site) {
            if (!fused) {
                drop_rows(drop, ws.branch, M, Tq, site);
                kernels::add(y, resid, ws.branch, M * D);
            }
            if constexpr (!pre_norm) norm_rows(np, y, y, M);
        };
        const T* in = x;
        if constexpr (pre_norm) {
            norm_rows(norm_self(p), x, ws.normed, M);
            in = ws.normed;
        }
        if (fused && y != x) copy_rows(x, y, M);  // the residual the self-attention output adds onto
        self_attention(p, ws, in, B, Tq, self_src, sm, drop, branch, fused);
        finish(norm_self(p), x, dropout_site::self_attn_out);
        if constexpr (cross) {  // memory is never normalized
            in = y;
            if constexpr (pre_norm) {
                norm_rows(norm_cross(p), y, ws.normed, M);
                in = ws.normed;
            }
            cross_attention(p, ws, in, B, Tq, cross_src, cm, drop, branch, fused);
            finish(norm_cross(p), y, dropout_site::cross_attn_out);
        }
        in = y;
        if constexpr (pre_norm) {
            norm_rows(norm_ffn(p), y, ws.normed, M);
            in = ws.normed;
        }
        feed_forward(p, in, ws.hidden, branch, fused, M, Tq, drop, ws.pack);
        finish(norm_ffn(p), y, dropout_site::ffn_out);
    }
    static void copy_rows(const T* x, T* y, std::size_t rows) {
        for (std::size_t i = 0; i < rows * D; ++i) y[i] = x[i];
    }

    template <std::size_t B, std::size_t Tq, std::size_t S, class SM, class CM, class Drop>
    static void run(const Params& p, Workspace<B, Tq, S>& ws, const T* x, const T* mem, T* y, const SM& sm,
                    const CM& cm, const Drop& drop) {
        if constexpr (cross) {
            project_memory(p, mem, B * S, ws.kv_mem, ws.pack);
            run_rows(p, ws, B, Tq, x, y, transient_self{ws.kt, Tq}, transient_cross{ws.kt, ws.kv_mem, S, Tq}, sm, cm,
                     drop);
        } else {
            run_rows(p, ws, B, Tq, x, y, transient_self{ws.kt, Tq}, no_source{}, sm, cm, drop);
        }
    }

    template <class Cache, class X, class Y, class SWS, class SM, class CM>
    static constexpr void check_step_shapes() {
        static_assert(tensor_like<X> && tensor_like<Y>, "ctformer: step input/output must be tensors");
        static_assert(std::is_same_v<typename X::value_type, T> && std::is_same_v<typename Y::value_type, T> &&
                          std::is_same_v<typename Cache::value_type, T>,
                      "ctformer: mixed dtypes: step tensors and caches must have the layer's dtype");
        static_assert(X::rank == 3 && X::shape[2] == D, "ctformer: d_model mismatch: step input is (batch, chunk, d_model)");
        static_assert(Y::shape == X::shape, "ctformer: step output must have the input's shape");
        static_assert(X::shape[0] == Cache::batch, "ctformer: batch mismatch: step input and KV cache batch sizes differ");
        static_assert(Cache::heads == H && Cache::head_dim == Dh, "ctformer: KV cache built for another layer shape");
        constexpr std::size_t B = X::shape[0], C = X::shape[1], Cap = Cache::capacity;
        static_assert(C <= Cap, "ctformer: step chunk is longer than the KV cache capacity");
        static_assert(std::is_same_v<SWS, StepWorkspace<B, C>>,
                      "ctformer: step workspace shape differs: use Layer::StepWorkspace<batch, chunk>");
        static_assert(SM::template fits<T, B, H, Cap, Cap>,
                      "ctformer: self-attention mask does not fit (batch, heads, capacity, capacity) or dtype");
        (void)sizeof(CM);
    }

    template <class Cache, class CrossSrc, class SWS, class X, class Y, class SM, class CM>
    static status step_impl(const Params& p, SWS& ws, Cache& cache, const CrossSrc& cross_src, const X& x, Y& y,
                            const std::array<std::size_t, Cache::batch>& count, const SM& sm, const CM& cm) {
        constexpr std::size_t B = X::shape[0], C = X::shape[1];
        for (std::size_t b = 0; b < B; ++b) {
            if (count[b] > C) return status::error(errc::out_of_range);
            if (cache.len[b] + count[b] > Cache::capacity) return status::error(errc::cache_full);
        }
        const std::array<std::size_t, B> pos0 = cache.len;
        const T* xin = x.data();
        T* yout = y.data();
        if constexpr (cross)
            run_rows(p, ws, B, C, xin, yout, cached_self<Cache>{cache, pos0, count},
                     cross_src(pos0, count), sm, cm, no_dropout{});
        else
            run_rows(p, ws, B, C, xin, yout, cached_self<Cache>{cache, pos0, count}, no_source{}, sm, cm,
                     no_dropout{});
        for (std::size_t b = 0; b < B; ++b) {
            cache.len[b] += count[b];
            for (std::size_t i = count[b]; i < C; ++i)  // rows not fed this step: zero, not stale
                for (std::size_t d = 0; d < D; ++d) yout[(b * C + i) * D + d] = T(0);
        }
        return {};
    }

  public:
    // ---- Incremental decoding ----
    template <std::size_t B, std::size_t Capacity> using KVCache = ctformer::KVCache<T, B, H, Dh, Capacity>;
    template <std::size_t B, std::size_t S> using CrossKVCache = ctformer::CrossKVCache<T, B, H, Dh, S>;

    // Scratch for a step of `Chunk` positions per batch row (independent of the cache lengths:
    // attention runs over key tiles).
    template <std::size_t B, std::size_t Chunk> struct StepWorkspace {
        static_assert(B > 0 && Chunk > 0, "ctformer: batch and chunk must be non-zero");
        static constexpr std::size_t batch = B, chunk = Chunk, M = B * Chunk;
        alignas(64) T qkv[M * 3 * D];
        alignas(64) T ctx[M * D];
        alignas(64) T branch[M * D];
        alignas(64) T normed[pre_norm ? M * D : 1];
        alignas(64) T hidden[M * F];
        alignas(64) T scores[attention_row_block * attention_key_tile];
        // Staging for fill_cross_cache: projected memory rows, a block at a time.
        static constexpr std::size_t fill_rows = 16;
        alignas(64) T staging[cross ? fill_rows * 2 * D : 1];
        static constexpr std::size_t pack_elems = kernels::gemm_pack_elems<T>(M > fill_rows ? M : fill_rows);
        alignas(64) T pack[pack_elems];
        static constexpr std::size_t bytes =
            sizeof(T) * (M * 3 * D + 2 * M * D + (pre_norm ? M * D : 1) + M * F +
                         attention_row_block * attention_key_tile + (cross ? fill_rows * 2 * D : 1) + pack_elems);
    };

    // Paddle's gen_cache: project memory (B, S, D) into the cross-attention cache, once per source.
    template <class Mem, std::size_t B, std::size_t S, std::size_t C>
        requires cross
    static void fill_cross_cache(const Params& p, StepWorkspace<B, C>& ws, CrossKVCache<B, S>& cc, const Mem& mem) {
        static_assert(std::is_same_v<typename Mem::value_type, T>, "ctformer: mixed dtypes: memory and cache");
        static_assert(Mem::rank == 3 && Mem::shape[0] == B && Mem::shape[1] == S && Mem::shape[2] == D,
                      "ctformer: memory must be (batch, src_len, d_model) matching the cross cache");
        constexpr std::size_t R = StepWorkspace<B, C>::fill_rows;
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t j0 = 0; j0 < S; j0 += R) {
                const std::size_t rows = S - j0 < R ? S - j0 : R;
                project_memory(p, mem.data() + (b * S + j0) * D, rows, ws.staging, ws.pack);
                for (std::size_t r = 0; r < rows; ++r)
                    for (std::size_t h = 0; h < H; ++h)
                        cc.put(b, h, j0 + r, ws.staging + r * 2 * D + h * Dh, ws.staging + r * 2 * D + D + h * Dh);
            }
        cc.len.fill(S);
        cc.filled = true;
    }

    // Feeds the next Chunk positions of every batch row (x: (B, Chunk, D)) and writes their
    // outputs (y: (B, Chunk, D)); their keys/values are appended to the cache. Equal to the rows of
    // the full forward over the whole prefix. Masks see absolute positions: self masks are sized
    // (capacity, capacity); cross masks (capacity, src_len).
    // Overflowing the capacity returns errc::cache_full and changes nothing.
    template <class X, class Y, class SWS, std::size_t B, std::size_t Cap, std::size_t S, class SM = no_mask,
              class CM = no_mask>
        requires cross
    static status step(const Params& p, SWS& ws, KVCache<B, Cap>& cache, const CrossKVCache<B, S>& cc, const X& x, Y& y,
                       const SM& sm = {}, const CM& cm = {}) {
        std::array<std::size_t, B> count;
        count.fill(X::shape[1]);
        return step_ragged(p, ws, cache, cc, x, y, count, sm, cm);
    }
    // Ragged batch: count[b] <= Chunk positions of row b are fed (rows past count[b] output zeros).
    template <class X, class Y, class SWS, std::size_t B, std::size_t Cap, std::size_t S, class SM = no_mask,
              class CM = no_mask>
        requires cross
    static status step_ragged(const Params& p, SWS& ws, KVCache<B, Cap>& cache, const CrossKVCache<B, S>& cc,
                              const X& x, Y& y, const std::array<std::size_t, B>& count, const SM& sm = {},
                              const CM& cm = {}) {
        check_step_shapes<KVCache<B, Cap>, X, Y, SWS, SM, CM>();
        static_assert(CM::template fits<T, B, H, Cap, S>,
                      "ctformer: cross-attention mask does not fit (batch, heads, capacity, src_len) or dtype");
        if (!cc.filled) return status::error(errc::cache_empty);
        auto src = [&cc](const std::array<std::size_t, B>& pos0, const std::array<std::size_t, B>& n) {
            return cached_cross<CrossKVCache<B, S>, B>{cc, pos0, n};
        };
        return step_impl(p, ws, cache, src, x, y, count, sm, cm);
    }
    // Decoder-only block.
    template <class X, class Y, class SWS, std::size_t B, std::size_t Cap, class SM = no_mask>
        requires(!cross)
    static status step(const Params& p, SWS& ws, KVCache<B, Cap>& cache, const X& x, Y& y, const SM& sm = {}) {
        std::array<std::size_t, B> count;
        count.fill(X::shape[1]);
        return step_ragged(p, ws, cache, x, y, count, sm);
    }
    template <class X, class Y, class SWS, std::size_t B, std::size_t Cap, class SM = no_mask>
        requires(!cross)
    static status step_ragged(const Params& p, SWS& ws, KVCache<B, Cap>& cache, const X& x, Y& y,
                              const std::array<std::size_t, B>& count, const SM& sm = {}) {
        check_step_shapes<KVCache<B, Cap>, X, Y, SWS, SM, no_mask>();
        return step_impl(p, ws, cache, no_source{}, x, y, count, sm, no_mask{});
    }
};

template <class... Opts> using DecoderLayer = Layer<config<Opts...>>;
template <class... Opts> using DecoderOnlyBlock = Layer<config<cross_attention<false>, Opts...>>;

}  // namespace ctformer
