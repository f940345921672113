// ctformer/layer/layer.hpp — the decoder layer as a type: entry points and the sub-layer sequence, over
// the modules (modules/: linear, attention, feed_forward, norm) and the memory roles (roles.hpp).
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
// Training: forward_train(params, tws, acts, ...) saves Activations; backward(params, acts, tws,
// d_out, grads, d_tgt[, d_memory], masks...) adds every gradient (docs/training.md).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "config.hpp"
#include "../core/dropout.hpp"
#include "../kernels/elementwise.hpp"
#include "checks.hpp"
#include "kv_cache.hpp"
#include "../core/masks.hpp"
#include "../modules/attention.hpp"
#include "../modules/feed_forward.hpp"
#include "../modules/linear.hpp"
#include "../modules/norm.hpp"
#include "../core/reflect.hpp"
#include "../core/schedule.hpp"
#include "params.hpp"
#include "roles.hpp"
#include "row_regions.hpp"
#include "../core/status.hpp"
#include "../core/tensor.hpp"

namespace ctformer {

template <class L, std::size_t N, bool FinalNorm> struct DecoderStack;

// What a layer's entry points take as weights: its Params (the base alone) or the base with
// adapters (ct::with_adapters(params, adapters): layers with ct::lora, modules/lora.hpp).
template <class PA, class P, class A> concept params_or_adapted = std::is_same_v<PA, P> || std::is_same_v<PA, adapted<P, A>>;

template <class Cfg> struct Layer : detail::layer_checks<Cfg>, detail::row_regions<Cfg> {
    // A stack checks its call once, then runs its layers' backward without re-checking (stack.hpp).
    template <class, std::size_t, bool> friend struct DecoderStack;
    using config = Cfg;
    using value_type = typename Cfg::value_type;
    using T = value_type;
    static constexpr std::size_t D = Cfg::d_model, H = Cfg::heads, Dh = Cfg::head_dim, F = Cfg::ffn_dim;
    static constexpr bool cross = Cfg::cross_attention, pre_norm = Cfg::norm_first;
    static constexpr std::size_t sublayers = cross ? 3 : 2;
    using Params = params_role<LayerParams<Cfg>>;
    // Gradients have the params' type: the same reflected names (for_each_tensor, save_state_dict
    // writes them in PyTorch's layout) and the same storage layout (an optimizer is elementwise).
    using Grads = Params;
    // Low-rank adapters (ct::lora): their own role, in RAM beside base params that may be anywhere.
    // Entry points take Params or ct::with_adapters(params, adapters); backward then adds the
    // adapters' gradients only (the base is frozen). Without the option every member is absent.
    using Adapters = params_role<LayerAdapters<Cfg>>;
    template <class PA> using grads_of = std::conditional_t<std::is_same_v<PA, Params>, Grads, Adapters>;
    static constexpr const Params& base_of(const Params& p) { return p; }
    static constexpr const Params& base_of(const adapted<Params, Adapters>& p) { return p.params; }
    static constexpr const Adapters* adapters_of(const Params&) { return nullptr; }
    static constexpr const Adapters* adapters_of(const adapted<Params, Adapters>& p) { return &p.adapters; }
    using Activation = typename Cfg::activation_type;
    using Norm = typename Cfg::norm_type;
    using Attn = modules::attention<Cfg>;
    using FFN = modules::feed_forward<Cfg>;
    using NormM = modules::norm<Cfg>;
    // The checks before anything is written (checks.hpp); check_inputs and check_aliasing are also
    // the stacks', which check once before their first layer writes.
    using checks = detail::layer_checks<Cfg>;
    using checks::check_aliasing;
    using checks::check_inputs;
    template <class Mem, class Tgt> using memory_t = typename checks::template memory_t<Mem, Tgt>;
    using checks::check_call;
    using checks::check_trainable;
    using checks::data_of;
    // The row stages' scheduling (row_regions.hpp): run_rows below is written against over_rows.
    using rows = detail::row_regions<Cfg>;
    using typename rows::row_scratch;
    using rows::add_rows;
    using rows::copy_rows;
    using rows::in_row_parts;
    using rows::over_rows;

    // ---- Memory roles (roles.hpp); each has a static constexpr bytes ----
    template <std::size_t B, std::size_t Tq, std::size_t S = Tq> using Workspace = ctformer::Workspace<Cfg, B, Tq, S>;
    template <std::size_t B, std::size_t Tq, std::size_t S = Tq>
    using TrainWorkspace = ctformer::TrainWorkspace<Cfg, B, Tq, S>;
    template <std::size_t B, std::size_t Tq, std::size_t S = Tq>
    using Activations = ctformer::Activations<Cfg, B, Tq, S>;
    template <std::size_t B, std::size_t Chunk> using StepWorkspace = ctformer::StepWorkspace<Cfg, B, Chunk>;
    // A self-attention cache holds the kv_heads key/value heads (GQA: heads/kv_heads times smaller).
    template <std::size_t B, std::size_t Capacity>
    using KVCache = ctformer::KVCache<T, B, Cfg::kv_heads, Dh, Capacity, typename Cfg::cache_element>;
    template <std::size_t B, std::size_t S> using CrossKVCache = ctformer::CrossKVCache<T, B, H, Dh, S, typename Cfg::cache_element>;

    // ---- One set of entry points for both kinds of layer ----
    // The memory argument (mem, d_memory, a step's cross cache) is a tensor or CrossKVCache for a
    // layer with cross-attention, ct::no_memory for a decoder-only block; decoder-only blocks also
    // have the short forms without it (at the end of each group), which forward to these.
    template <class M> static constexpr bool memory_arg = cross ? !std::is_same_v<M, no_memory> : std::is_same_v<M, no_memory>;

    // ---- Inference (eval mode: dropout is the identity) ----
    // Every entry point returns a status: errc::out_of_range if a mask's runtime values do not fit
    // (a key length above the key count), errc::non_finite for a NaN/inf input with
    // check_finite<true>; on an error nothing is computed or written.
    template <params_or_adapted<Params, Adapters> PA, class Tgt, class Mem, class Out, class WS, class SelfMask = no_mask, class CrossMask = no_mask>
        requires memory_arg<Mem>
    static constexpr status forward(const PA& p, WS& ws, const Tgt& tgt, const Mem& mem, Out& out,
                                    const SelfMask& sm = {}, const CrossMask& cm = {}) {
        checks::template check_shapes<Tgt, memory_t<Mem, Tgt>, Out, WS, SelfMask, CrossMask>();
        if (status st = check_call(sm, cm, tgt, mem, out); !st) return st;
        run(p, ws, tgt.data(), data_of(mem), out.data(), sm, cm, no_dropout{}, static_cast<void*>(nullptr));
        return {};
    }
    template <params_or_adapted<Params, Adapters> PA, class Tgt, class Out, class WS, class SelfMask = no_mask>
        requires(!cross && tensor_like<Out>)
    static constexpr status forward(const PA& p, WS& ws, const Tgt& tgt, Out& out, const SelfMask& sm = {}) {
        return forward(p, ws, tgt, no_memory{}, out, sm);
    }

    // ---- Training-mode forward: dropout at PyTorch's sites, reproducible from (seed, step) ----
    template <params_or_adapted<Params, Adapters> PA, class Tgt, class Mem, class Out, class WS, class SelfMask = no_mask, class CrossMask = no_mask>
        requires(memory_arg<Mem> && !is_activations_v<Tgt>)
    static status forward_train(const PA& p, WS& ws, const Tgt& tgt, const Mem& mem, Out& out,
                                const dropout_config& dc, const SelfMask& sm = {}, const CrossMask& cm = {}) {
        checks::template check_trainable<!std::is_same_v<PA, Params>>();
        checks::template check_shapes<Tgt, memory_t<Mem, Tgt>, Out, WS, SelfMask, CrossMask>();
        if (status st = check_call(sm, cm, tgt, mem, out, &dc); !st) return st;
        run(p, ws, tgt.data(), data_of(mem), out.data(), sm, cm, dropout_rng(dc), static_cast<void*>(nullptr));
        return {};
    }
    // The same, saving what backward needs into acts (Activations<B, Tq, S>).
    template <params_or_adapted<Params, Adapters> PA, class Acts, class Tgt, class Mem, class Out, class WS, class SelfMask = no_mask, class CrossMask = no_mask>
        requires(memory_arg<Mem> && is_activations_v<Acts>)
    static status forward_train(const PA& p, WS& ws, Acts& acts, const Tgt& tgt, const Mem& mem, Out& out,
                                const dropout_config& dc, const SelfMask& sm = {}, const CrossMask& cm = {}) {
        using M = memory_t<Mem, Tgt>;
        checks::template check_trainable<!std::is_same_v<PA, Params>>();
        checks::template check_shapes<Tgt, M, Out, WS, SelfMask, CrossMask>();
        checks::template check_acts<Acts, Tgt::shape[0], Tgt::shape[1], M::shape[1]>();
        if (status st = check_call(sm, cm, tgt, mem, out, &dc); !st) return st;
        acts.dropout = dc;
        run(p, ws, tgt.data(), data_of(mem), out.data(), sm, cm, dropout_rng(dc), &acts);
        acts.filled = true;
        return {};
    }
    template <params_or_adapted<Params, Adapters> PA, class Tgt, class Out, class WS, class SelfMask = no_mask>
        requires(!cross && tensor_like<Out>)
    static status forward_train(const PA& p, WS& ws, const Tgt& tgt, Out& out, const dropout_config& dc,
                                const SelfMask& sm = {}) {
        return forward_train(p, ws, tgt, no_memory{}, out, dc, sm);
    }
    template <params_or_adapted<Params, Adapters> PA, class Acts, class Tgt, class Out, class WS, class SelfMask = no_mask>
        requires(!cross && is_activations_v<Acts> && tensor_like<Out>)
    static status forward_train(const PA& p, WS& ws, Acts& acts, const Tgt& tgt, Out& out, const dropout_config& dc,
                                const SelfMask& sm = {}) {
        return forward_train(p, ws, acts, tgt, no_memory{}, out, dc, sm);
    }

    // ---- Backward ----
    // From the Activations of a forward_train and d_out: (B, Tq, D), the gradient of the loss
    // with respect to its output, ADDS (+=) the gradients of every parameter to grads, of tgt to
    // d_tgt and of memory to d_memory (zero them first; micro-batches then add up). The masks
    // must be the forward's; dropout is regenerated from the dropout_config it saved.
    // Returns errc::no_activations (and changes nothing) if acts were never filled; the masks and
    // d_out are checked as the forward's inputs are.
    template <params_or_adapted<Params, Adapters> PA, class Acts, class WS, class DOut, class DTgt, class DMem, class SelfMask = no_mask,
              class CrossMask = no_mask>
        requires(memory_arg<DMem> && is_activations_v<Acts>)
    static status backward(const PA& p, const Acts& acts, WS& ws, const DOut& d_out, grads_of<PA>& grads, DTgt& d_tgt,
                           DMem& d_memory, const SelfMask& sm = {}, const CrossMask& cm = {}) {
        using LW = Workspace<Acts::batch, Acts::tgt_len, Acts::src_len>;
        checks::template check_shapes<DOut, memory_t<DMem, DOut>, DTgt, LW, SelfMask, CrossMask>();
        checks::template check_backward<Acts, WS, DOut, !std::is_same_v<PA, Params>>();
        if (!acts.filled) return status::error(errc::no_activations);
        if (status st = checks::template check_inputs<DOut, void>(sm, Acts::tgt_len, cm, cross ? Acts::src_len : 0,
                                                                  d_out.data(), "d_out", nullptr);
            !st)
            return st;
        const dropout_rng drop(acts.dropout);
        if constexpr (std::is_same_v<PA, Params>)
            backward_rows(p, &grads, {}, acts, ws, d_out.data(), d_tgt.data(), data_of(d_memory), sm, cm, drop);
        else
            backward_rows(p.params, nullptr, {&p.adapters, &grads}, acts, ws, d_out.data(), d_tgt.data(), data_of(d_memory),
                          sm, cm, drop);
        return {};
    }
    template <params_or_adapted<Params, Adapters> PA, class Acts, class WS, class DOut, class DTgt, class SelfMask = no_mask>
        requires(!cross && is_activations_v<Acts> && !std::is_same_v<SelfMask, no_memory>)
    static status backward(const PA& p, const Acts& acts, WS& ws, const DOut& d_out, grads_of<PA>& grads, DTgt& d_tgt,
                           const SelfMask& sm = {}) {
        no_memory none;
        return backward(p, acts, ws, d_out, grads, d_tgt, none, sm);
    }

    static constexpr T score_scale() { return Attn::score_scale(); }
    // The norm before (pre-norm) or after (post-norm) sub-layer k (self, [cross,] ffn).
    template <class P> static constexpr auto& norm_of(P& p, std::size_t k) {
        if constexpr (cross) return k == 0 ? p.norm1 : (k == 1 ? p.norm2 : p.norm3);
        else return k == 0 ? p.norm1 : p.norm2;
    }
    template <class P> static constexpr auto& ffn_of(P& p) { return p.ffn; }

  private:
    // forward_train saves the residual stream entering norm i (Acts void: inference, nothing).
    template <class Acts>
    static constexpr void save_stream(Acts* a, std::size_t i, const T* x, std::size_t r0, std::size_t r1) {
        if constexpr (!std::is_same_v<Acts, void>)
            if (a) copy_rows(x + r0 * D, a->x[i] + r0 * D, r1 - r0);
    }

    // The three sub-layers over B*Tq rows: x -> y (y may alias x: each stage reads a row before
    // writing it). Shared by forward, forward_train and step.
    // Without output dropout (eval, or p = 0) each sub-layer's last GEMM adds its result onto the
    // residual stream y in its epilogue; with it, the branch goes to ws.branch, is dropped out,
    // then added. Every GEMM that accumulates into y reads a buffer other than y (ctx, hidden), and
    // the GEMMs that read y (q/kv, linear1) finish before y is written.
    // acts (training): the attention's q|k|v, outputs and log-sum-exps, linear1's pre-activation
    // and each norm's input are written there instead of (or besides) the workspace.
    // Everything but the heads is row-local: it runs in row stages (over_rows), between the heads.
    // (parameters: each entry point passes its own key/value sources, masks and dropout types.)
    // (pa: the entry point's Params or adapted bundle, as it came: without adapters the call has
    // the arguments it had before them — the microcontroller's stack bound counts its frames)
    template <class PA, class WS, class SelfSrc, class CrossSrc, class SM, class CM, class Drop, class Acts>
    static constexpr void run_rows(const PA& pa, WS& ws, std::size_t B, std::size_t Tq, const T* x, T* y,
                         const SelfSrc& self_src, const CrossSrc& cross_src, const SM& sm, const CM& cm,
                         const Drop& drop, Acts* acts) {
        const Params& p = base_of(pa);
        [[maybe_unused]] const Adapters* ad = adapters_of(pa);
        const std::size_t M = B * Tq;
        const detail::alone_scope alone(!std::is_same_v<Acts, void> && schedule::train_alone(M));
        const bool fused = !drop.drops(dropout_site::self_attn_out);  // one p for the three output sites
        T* const branch = fused ? y : ws.branch;
        const bool parts = in_row_parts(M);
        const row_scratch whole{ws.pack, ws.hidden()};
        // before sub-layer k, rows [r0, r1): their input (pre-norm: normalized into ws.normed)
        auto start = [&](std::size_t k, const T* stream, std::size_t r0, std::size_t r1) -> const T* {
            if constexpr (pre_norm) {
                save_stream(acts, k, stream, r0, r1);
                NormM::forward(norm_of(p, k), stream + r0 * D, ws.normed + r0 * D, r1 - r0);
                return ws.normed;
            } else {
                return stream;
            }
        };
        // after sub-layer k: the residual add (unless fused) and, post-norm, the norm, in place on y
        auto finish = [&](std::size_t k, const T* resid, dropout_site site, std::size_t r0, std::size_t r1) {
            if (!fused) {
                drop_rows(drop, ws.branch + r0 * D, r1 - r0, D, D, Tq, site, r0);
                add_rows(y + r0 * D, resid + r0 * D, ws.branch + r0 * D, r1 - r0);
            }
            if constexpr (!pre_norm) {
                save_stream(acts, k + 1, y, r0, r1);
                NormM::forward(norm_of(p, k), y + r0 * D, y + r0 * D, r1 - r0);
            }
        };
        auto ffn = [&](std::size_t r0, std::size_t r1, const row_scratch& sc) {
            const T* in = start(sublayers - 1, y, r0, r1);
            T* u = nullptr;
            if constexpr (!std::is_same_v<Acts, void>)
                if (acts) u = acts->ffn.u + r0 * FFN::ldh;
            // (without the option the lambdas do not name ad: their frames stay as they were, the
            // microcontroller's stack bound counts them)
            if constexpr (Cfg::has_lora)
                FFN::forward(ffn_of(p), in + r0 * D, sc.hidden, branch + r0 * D, fused, r1 - r0, Tq, drop, sc.pack, u, r0,
                             ffn_lora(ad, drop, Tq));
            else
                FFN::forward(ffn_of(p), in + r0 * D, sc.hidden, branch + r0 * D, fused, r1 - r0, Tq, drop, sc.pack, u, r0);
            finish(sublayers - 1, y, dropout_site::ffn_out, r0, r1);
        };
        T* spans = nullptr;
        if constexpr (requires { ws.key_spans(); }) spans = ws.key_spans();
        typename Attn::buffers bf{ws.qkv(), ws.ctx(), nullptr, ws.scores, spans},
            bfc{ws.q_cross(), ws.ctx(), nullptr, ws.scores, spans};
        if constexpr (!std::is_same_v<Acts, void>)
            if (acts) {
                bf = {acts->self_attn.qkv, acts->self_attn.ctx, acts->self_attn.lse, ws.scores};
                if constexpr (cross) bfc = {acts->cross_attn.q, acts->cross_attn.ctx, acts->cross_attn.lse, ws.scores};
            }
        over_rows(parts, M, whole, [&](std::size_t r0, std::size_t r1, const row_scratch& sc) {
            if constexpr (!pre_norm) save_stream(acts, 0, x, r0, r1);
            if constexpr (Cfg::has_lora)
                Attn::self_project(p.self_attn, bf.qkv, start(0, x, r0, r1), r0, r1, Tq, self_src, sc.pack,
                                   attn_lora(ad, drop, Tq));
            else
                Attn::self_project(p.self_attn, bf.qkv, start(0, x, r0, r1), r0, r1, Tq, self_src, sc.pack);
        });
        Attn::self_heads(bf, B, Tq, self_src, sm, drop);
        // rows [0, M): the self-attention's output, (cross) its queries, else the FFN; rows
        // [M, M + Ms): the memory's k|v (they take the self q|k|v's place: after its heads)
        std::size_t Ms = 0;
        if constexpr (cross) Ms = cross_src.memory_rows();
        over_rows(parts, M + Ms, whole, [&](std::size_t r0, std::size_t r1, const row_scratch& sc) {
            if constexpr (cross)
                if (r1 > M) cross_src.project(p.multihead_attn, r0 > M ? r0 - M : 0, r1 - M, sc.pack, cross_adapters(ad));
            if (r0 >= M) return;
            r1 = r1 < M ? r1 : M;
            if (fused && y != x) copy_rows(x + r0 * D, y + r0 * D, r1 - r0);  // the residual the output adds onto
            if constexpr (Cfg::has_lora)
                Attn::out_projection(p.self_attn, bf.ctx + r0 * D, branch + r0 * D, fused, r1 - r0, sc.pack,
                                     attn_lora(ad, drop, Tq), r0);
            else
                Attn::out_projection(p.self_attn, bf.ctx + r0 * D, branch + r0 * D, fused, r1 - r0, sc.pack);
            finish(0, x, dropout_site::self_attn_out, r0, r1);
            if constexpr (cross && Cfg::has_lora)  // memory is never normalized
                Attn::cross_query(p.multihead_attn, bfc.qkv, start(1, y, r0, r1), r0, r1, sc.pack, cross_lora(ad, drop, Tq));
            else if constexpr (cross)
                Attn::cross_query(p.multihead_attn, bfc.qkv, start(1, y, r0, r1), r0, r1, sc.pack);
            else
                ffn(r0, r1, sc);
        });
        if constexpr (cross) {
            Attn::cross_heads(bfc, B, Tq, cross_src, cm, drop);
            over_rows(parts, M, whole, [&](std::size_t r0, std::size_t r1, const row_scratch& sc) {
                if constexpr (Cfg::has_lora)
                    Attn::out_projection(p.multihead_attn, bfc.ctx + r0 * D, branch + r0 * D, fused, r1 - r0, sc.pack,
                                         cross_lora(ad, drop, Tq), r0);
                else
                    Attn::out_projection(p.multihead_attn, bfc.ctx + r0 * D, branch + r0 * D, fused, r1 - r0, sc.pack);
                finish(1, y, dropout_site::cross_attn_out, r0, r1);
                ffn(r0, r1, sc);
            });
        }
    }

    // (A training call whose weight gradients would not split runs alone, schedule::train_alone:
    // its backward would read back on one core what the forward's parts wrote on two.)

    // What the modules' calls pass to their adapters (nothing for a layer without ct::lora).
    template <class Drop> static constexpr auto attn_lora(const Adapters* ad, const Drop& drop, std::size_t Tq) {
        if constexpr (Cfg::has_lora) return lora_pass<typename Adapters::attn_t, Drop>{ad ? &ad->self_attn : nullptr, drop, Tq};
        else return no_lora_pass{};
    }
    template <class Drop> static constexpr auto cross_lora(const Adapters* ad, const Drop& drop, std::size_t Tq) {
        return lora_pass<typename Adapters::cross_t, Drop>{ad ? &ad->multihead_attn : nullptr, drop, Tq};
    }
    // The cross-attention's adapters for the memory's projection (absent: none).
    static constexpr auto cross_adapters([[maybe_unused]] const Adapters* ad) {
        if constexpr (Cfg::has_lora && cross) return ad ? &ad->multihead_attn : nullptr;
        else return static_cast<const absent*>(nullptr);
    }
    // Which adapters project the memory (a cross cache records it): the cross-attention's, or null (the base's).
    static constexpr const void* memory_adapters([[maybe_unused]] const Adapters* ad) {
        if constexpr (Cfg::has_lora && cross) return (Cfg::lora_targets & lora_cross) ? static_cast<const void*>(ad) : nullptr;
        else return nullptr;
    }
    template <class Drop> static constexpr auto ffn_lora(const Adapters* ad, const Drop& drop, std::size_t Tq) {
        if constexpr (Cfg::has_lora) return lora_pass<typename Adapters::ffn_t, Drop>{ad ? &ad->ffn : nullptr, drop, Tq};
        else return no_lora_pass{};
    }

    template <class PA, std::size_t B, std::size_t Tq, std::size_t S, class SM, class CM, class Drop, class Acts = void>
    static constexpr void run(const PA& p, Workspace<B, Tq, S>& ws, const T* x, const T* mem, T* y, const SM& sm,
                    const CM& cm, const Drop& drop, Acts* acts) {
        using self_src = typename Attn::transient_self;
        if constexpr (cross) {
            T* kv_mem = ws.kv_mem();
            if constexpr (!std::is_same_v<Acts, void>)
                if (acts) {
                    kv_mem = acts->cross_attn.kv_mem;
                    for (std::size_t i = 0; i < B * S * D; ++i) acts->cross_attn.mem[i] = mem[i];
                }
            run_rows(p, ws, B, Tq, x, y, self_src{Tq}, typename Attn::transient_cross{mem, kv_mem, B * S, S, Tq}, sm,
                     cm, drop, acts);
        } else {
            run_rows(p, ws, B, Tq, x, y, self_src{Tq}, typename Attn::no_source{}, sm, cm, drop, acts);
        }
    }

    // The sub-layers in reverse. grad: the residual stream's gradient, from d_out down to d_tgt.
    // Sub-layer k (self, [cross,] ffn), post-norm: grad = norm_k'(grad); its branch's gradient
    // (through the output dropout) goes back through the branch and adds onto grad.
    // Pre-norm: the branch's input gradient goes back through norm_k and adds onto grad.
    // (parameters: each entry point passes its own key/value sources, masks and dropout types.)
    // g: the params' gradients (+=), or null: the base is frozen and lg (the adapters the forward
    // ran and their gradients) receives them.
    template <std::size_t B, std::size_t Tq, std::size_t S, class SM, class CM, class Drop>
    static void backward_rows(const Params& p, Grads* g, const lora_grads<Adapters>& lg, const Activations<B, Tq, S>& a,
                              TrainWorkspace<B, Tq, S>& ws, const T* d_out, T* d_tgt, T* d_mem, const SM& sm, const CM& cm,
                              const Drop& drop) {
        constexpr std::size_t M = B * Tq;
        const detail::alone_scope alone(schedule::train_alone(M));
        T* const grad = ws.grad;
        copy_rows(d_out, grad, M);
        const typename Attn::grad_scratch sc{ws.qkv(), nullptr, ws.ctx(), ws.kt, ws.vt, ws.tiles, ws.train_pack()},
            sc_cross{ws.q_cross(), ws.kv_mem(), ws.ctx(), ws.kt, ws.vt, ws.tiles, ws.train_pack()};
        auto sublayer = [&](std::size_t k, dropout_site site, auto&& branch_backward) {
            if constexpr (!pre_norm) norm_backward(p, g, k, a.x[k + 1], grad, grad, M, false);
            const T* dbranch = grad;
            if (drop.drops(site)) {
                copy_rows(grad, ws.dbranch, M);
                drop_rows(drop, ws.dbranch, M, D, D, Tq, site);
                dbranch = ws.dbranch;
            }
            if constexpr (pre_norm) {
                NormM::forward(norm_of(p, k), a.x[k], ws.input, M);
                branch_backward(modules::branch_grad<T>{ws.input, dbranch, ws.din, false});
                norm_backward(p, g, k, a.x[k], ws.din, grad, M, true);
            } else {
                const T* in = a.x[0];
                if (k > 0) {
                    NormM::forward(norm_of(p, k - 1), a.x[k], ws.input, M);
                    in = ws.input;
                }
                branch_backward(modules::branch_grad<T>{in, dbranch, grad, true});
            }
        };
        sublayer(sublayers - 1, dropout_site::ffn_out, [&](const modules::branch_grad<T>& bg) {
            FFN::backward(ffn_of(p), g ? &ffn_of(*g) : nullptr, bg, a.ffn.u, ws.hidden(), M, Tq, drop, sc.pack,
                          adapter_grads(lg, &Adapters::ffn));
        });
        if constexpr (cross)
            sublayer(1, dropout_site::cross_attn_out, [&](const modules::branch_grad<T>& bg) {
                Attn::cross_backward(p.multihead_attn, g ? &g->multihead_attn : nullptr, a.cross_attn, bg, d_mem, B, cm, drop,
                                     sc_cross, adapter_grads(lg, &Adapters::multihead_attn));
            });
        sublayer(0, dropout_site::self_attn_out, [&](const modules::branch_grad<T>& bg) {
            Attn::self_backward(p.self_attn, g ? &g->self_attn : nullptr, a.self_attn, bg, B, sm, drop, sc,
                                adapter_grads(lg, &Adapters::self_attn));
        });
        add_rows(d_tgt, d_tgt, grad, M);
    }

    // sub-layer k's norm backward: its params' gradients too, unless frozen (g null)
    static void norm_backward(const Params& p, Grads* g, std::size_t k, const T* x, const T* dy, T* dx, std::size_t M,
                              bool accumulate) {
        if (g) NormM::backward(norm_of(p, k), norm_of(*g, k), x, dy, dx, M, accumulate);
        else NormM::backward_input(norm_of(p, k), x, dy, dx, M, accumulate);
    }
    // a module's share of lg (member: &Adapters::self_attn or ::ffn)
    template <class Part> static auto adapter_grads(const lora_grads<Adapters>& lg, Part LayerAdapters<Cfg>::*member) {
        if constexpr (Cfg::has_lora) return lora_grads<Part>{lg.ad ? &(lg.ad->*member) : nullptr, lg.g ? &(lg.g->*member) : nullptr};
        else return no_lora_pass{};
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
        static_assert(Cache::heads == Cfg::kv_heads && Cache::head_dim == Dh,
                      "ctformer: KV cache built for another layer shape");
        static_assert(!Cfg::rope || Cache::capacity <= Cfg::max_positions,
                      "ctformer: the KV cache's capacity exceeds the RoPE table's max_positions");
        constexpr std::size_t B = X::shape[0], C = X::shape[1], Cap = Cache::capacity;
        static_assert(C <= Cap, "ctformer: step chunk is longer than the KV cache capacity");
        static_assert(std::is_same_v<SWS, StepWorkspace<B, C>>,
                      "ctformer: step workspace shape differs: use Layer::StepWorkspace<batch, chunk>");
        static_assert(SM::template fits<T, B, H, Cap, Cap>,
                      "ctformer: self-attention mask does not fit (batch, heads, capacity, capacity) or dtype");
        (void)sizeof(CM);
    }

    // (parameters: each entry point passes its own key/value sources, masks and dropout types.)
    template <class PA, class Cache, class CrossSrc, class SWS, class X, class Y, class SM, class CM>
    static status step_impl(const PA& p, SWS& ws, Cache& cache, const CrossSrc& cross_src, std::size_t cross_keys,
                            const X& x, Y& y, const std::array<std::size_t, Cache::batch>& count, const SM& sm,
                            const CM& cm) {
        constexpr std::size_t B = X::shape[0], C = X::shape[1];
        const status in = checks::template check_inputs<X, void>(sm, Cache::capacity, cm, cross_keys, nullptr, "x", nullptr);
        if (!in) return in;
        for (std::size_t b = 0; b < B; ++b) {
            if (count[b] > C) return status::error(errc::out_of_range, "count");
            if (count[b] > Cache::capacity - cache.length(b)) return status::error(errc::cache_full);  // (no wrap)
        }
        if constexpr (Cfg::check_finite)  // only the rows fed: a ragged row's tail is padding
            for (std::size_t b = 0; b < B; ++b)
                if (!kernels::all_finite(x.data() + b * C * D, count[b], D, D)) return status::error(errc::non_finite, "x");
        if (status st = check_aliasing(y.data(), Y::size, x.data(), X::size, "x", nullptr, 0); !st) return st;
        const std::array<std::size_t, B> pos0 = cache.lengths();
        const T* xin = x.data();
        T* yout = y.data();
        // One batch row: only its fed rows are computed (a short prompt in a long chunk); more
        // rows keep their stride C (rows past a row's count are computed and zeroed below).
        const std::size_t rows = B == 1 && count[0] < C ? count[0] : C;  // (count <= C: checked above)
        if (rows > 0) {
            if constexpr (cross)
                run_rows(p, ws, B, rows, xin, yout, typename Attn::template cached_self<Cache>{cache, pos0, count},
                         cross_src(pos0, count), sm, cm, no_dropout{}, static_cast<void*>(nullptr));
            else
                run_rows(p, ws, B, rows, xin, yout, typename Attn::template cached_self<Cache>{cache, pos0, count},
                         typename Attn::no_source{}, sm, cm, no_dropout{}, static_cast<void*>(nullptr));
        }
        for (std::size_t b = 0; b < B; ++b) {
            detail::cache_access::lengths(cache)[b] += count[b];
            for (std::size_t i = count[b]; i < C; ++i)  // rows not fed this step: zero, not stale
                for (std::size_t d = 0; d < D; ++d) yout[(b * C + i) * D + d] = T(0);
        }
        return {};
    }

  public:
    // ---- Incremental decoding ----
    // Paddle's gen_cache: project memory (B, S, D) into the cross-attention cache, once per source.
    // (pa: Params, or ct::with_adapters(params, adapters): the cross-attention's adapters project the memory too)
    template <params_or_adapted<Params, Adapters> PA, class Mem, std::size_t B, std::size_t S, std::size_t C>
        requires cross
    static void fill_cross_cache(const PA& pa, StepWorkspace<B, C>& ws, CrossKVCache<B, S>& cc, const Mem& mem) {
        const Params& p = base_of(pa);
        static_assert(std::is_same_v<typename Mem::value_type, T>, "ctformer: mixed dtypes: memory and cache");
        static_assert(Mem::rank == 3 && Mem::shape[0] == B && Mem::shape[1] == S && Mem::shape[2] == D,
                      "ctformer: memory must be (batch, src_len, d_model) matching the cross cache");
        constexpr std::size_t R = StepWorkspace<B, C>::fill_rows;
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t j0 = 0; j0 < S; j0 += R) {
                const std::size_t rows = S - j0 < R ? S - j0 : R;
                Attn::project_memory(p.multihead_attn, mem.data() + (b * S + j0) * D, rows, ws.staging(), 2 * D, ws.pack,
                                     cross_adapters(adapters_of(pa)));
                for (std::size_t r = 0; r < rows; ++r)
                    for (std::size_t h = 0; h < H; ++h)
                        cc.put(b, h, j0 + r, ws.staging() + r * 2 * D + h * Dh, ws.staging() + r * 2 * D + D + h * Dh);
            }
        detail::cache_access::set_filled(cc, true, memory_adapters(adapters_of(pa)));
    }

    // A step's cross cache: filled, and through the adapters the step runs (the base's: none).
    template <params_or_adapted<Params, Adapters> PA, std::size_t B, std::size_t S>
        requires cross
    static status check_cross_cache(const PA& pa, const CrossKVCache<B, S>& cc) {
        if (!cc.filled()) return status::error(errc::cache_empty);
        if (detail::cache_access::adapters(cc) != memory_adapters(adapters_of(pa)))
            return status::error(errc::cache_mismatch, detail::cache_access::adapters(cc) ? "filled with other adapters than the step's"
                                                                                          : "filled from the base alone; the step runs adapters");
        return {};
    }

    // Feeds the next Chunk positions of every batch row (x: (B, Chunk, D)) and writes their
    // outputs (y: (B, Chunk, D)); their keys/values are appended to the cache. Equal to the rows of
    // the full forward over the whole prefix. Masks see absolute positions: self masks are sized
    // (capacity, capacity); cross masks (capacity, src_len). cc: the filled CrossKVCache, or
    // ct::no_memory for a decoder-only block.
    // Overflowing the capacity returns errc::cache_full and changes nothing.
    template <params_or_adapted<Params, Adapters> PA, class X, class Y, class SWS, std::size_t B, std::size_t Cap, class CC, class SM = no_mask,
              class CM = no_mask>
        requires memory_arg<CC>
    static status step(const PA& p, SWS& ws, KVCache<B, Cap>& cache, const CC& cc, const X& x, Y& y,
                       const SM& sm = {}, const CM& cm = {}) {
        std::array<std::size_t, B> count;
        count.fill(X::shape[1]);
        return step_ragged(p, ws, cache, cc, x, y, count, sm, cm);
    }
    // Ragged batch: count[b] <= Chunk positions of row b are fed (rows past count[b] output zeros).
    template <params_or_adapted<Params, Adapters> PA, class X, class Y, class SWS, std::size_t B, std::size_t Cap, class CC, class SM = no_mask,
              class CM = no_mask>
        requires memory_arg<CC>
    static status step_ragged(const PA& p, SWS& ws, KVCache<B, Cap>& cache, const CC& cc, const X& x, Y& y,
                              const std::array<std::size_t, B>& count, const SM& sm = {}, const CM& cm = {}) {
        check_step_shapes<KVCache<B, Cap>, X, Y, SWS, SM, CM>();
        if constexpr (cross) {
            constexpr std::size_t S = CC::src_len;
            static_assert(std::is_same_v<CC, CrossKVCache<B, S>>,
                          "ctformer: a step's cross cache must be the layer's CrossKVCache<batch, src_len>");
            static_assert(CM::template fits<T, B, H, Cap, S>,
                          "ctformer: cross-attention mask does not fit (batch, heads, capacity, src_len) or dtype");
            if (status st = check_cross_cache(p, cc); !st) return st;
            auto src = [&cc](const std::array<std::size_t, B>& pos0, const std::array<std::size_t, B>& n) {
                return typename Attn::template cached_cross<CC, B>{cc, pos0, n};
            };
            return step_impl(p, ws, cache, src, S, x, y, count, sm, cm);
        } else {
            return step_impl(p, ws, cache, typename Attn::no_source{}, 0, x, y, count, sm, no_mask{});
        }
    }
    template <params_or_adapted<Params, Adapters> PA, class X, class Y, class SWS, std::size_t B, std::size_t Cap, class SM = no_mask>
        requires(!cross && tensor_like<X>)
    static status step(const PA& p, SWS& ws, KVCache<B, Cap>& cache, const X& x, Y& y, const SM& sm = {}) {
        return step(p, ws, cache, no_memory{}, x, y, sm);
    }
    template <params_or_adapted<Params, Adapters> PA, class X, class Y, class SWS, std::size_t B, std::size_t Cap, class SM = no_mask>
        requires(!cross && tensor_like<X>)
    static status step_ragged(const PA& p, SWS& ws, KVCache<B, Cap>& cache, const X& x, Y& y,
                              const std::array<std::size_t, B>& count, const SM& sm = {}) {
        return step_ragged(p, ws, cache, no_memory{}, x, y, count, sm);
    }
};

template <class... Opts> using DecoderLayer = Layer<config<Opts...>>;
template <class... Opts> using DecoderOnlyBlock = Layer<config<cross_attention<false>, Opts...>>;
// A Llama-family decoder block (LlamaDecoderLayer): llama_config's defaults, overridable.
//   using Block = ct::LlamaBlock<ct::d_model<288>, ct::heads<6>, ct::kv_heads<2>, ct::ffn_dim<768>,
//                                ct::max_positions<256>>;
template <class... Opts> using LlamaBlock = Layer<llama_config<Opts...>>;

}  // namespace ctformer
