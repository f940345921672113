// ctformer/modules/attention.hpp — torch.nn.MultiheadAttention as the decoder layer uses it:
// self-attention (q, k, v from the same rows) and cross-attention (q from the rows, k, v from the
// memory), forward and backward side by side. (Its params and score scales: attention_params.hpp;
// the key/value sources that let the full forward and the cached step share this code:
// attention_sources.hpp; how its heads are cut over threads: core/schedule.hpp.)
#pragma once
#include <array>
#include <cstddef>
#include <type_traits>

#include "../core/dropout.hpp"
#include "../core/reflect.hpp"
#include "../core/schedule.hpp"
#include "../kernels/attention.hpp"
#include "../kernels/rope.hpp"
#include "attention_params.hpp"
#include "attention_sources.hpp"
#include "linear.hpp"
#include "lora.hpp"

namespace ctformer::modules {

// The attention kernels this module drives (kernels/attention.hpp).
using kernels::attend;
using kernels::attend_head_backward;
using kernels::attention_backward_tile_elems;
using kernels::attention_row_block;
using kernels::attention_scratch_elems;
using kernels::head_grads;
using kernels::head_ref;
using kernels::head_saved;
using kernels::head_scratch;
using kernels::key_spans;
using kernels::keys_ref;
using kernels::query_rows;
using kernels::query_span_elems;
using kernels::query_spans;
using kernels::query_spans_max;
using kernels::rule_of;
using kernels::strided;

template <class Cfg> struct attention {
    using T = typename Cfg::value_type;
    static constexpr std::size_t D = Cfg::d_model, H = Cfg::heads, Dh = Cfg::head_dim;
    // Grouped-query attention: KH key/value heads, each shared by G query heads (KH = H: MHA).
    static constexpr std::size_t KH = Cfg::kv_heads, G = H / KH, Dkv = KH * Dh;
    static constexpr bool separate = Cfg::separate_qkv;
    using Fmt = typename Cfg::weight_format;
    using Params = std::conditional_t<separate, SeparateAttentionParams<T, D, Dkv, Cfg::attn_bias, Fmt>,
                                      MultiheadAttentionParams<T, D, Cfg::attn_bias, Fmt>>;
    // Row strides of the self-attention's q | k | v (D + 2·Dkv columns: k at k_off, v at v_off)
    // and the memory's projected k | v (2D), whose rows the score tiles read in place.
    static constexpr std::size_t k_off = D, v_off = D + Dkv;
    static constexpr std::size_t qkv_ld = kernels::padded_row_stride<T>(D + 2 * Dkv),
                                 kv_ld = kernels::padded_row_stride<T>(2 * D);
    // RoPE: rotary dimension R of each head, the table of positions [0, max_positions)
    static constexpr bool rope = Cfg::rope;
    static constexpr std::size_t R = Cfg::rotary_dim;
    using rope_layout = typename Cfg::rope_type::layout;

    static constexpr T score_scale() { return Cfg::scale_type::template value<T>(Dh); }

    // ---- What the module needs from the layer's memory roles (roles.hpp lays them out) ----
    // Scratch of a call over M query rows (Ms memory rows): q|k|v, the cross queries and the
    // memory's k|v, the heads' concatenated outputs; and one head's score tile.
    static constexpr std::size_t qkv_elems(std::size_t M) { return M * qkv_ld; }
    static constexpr std::size_t q_elems(std::size_t M) { return M * D; }
    static constexpr std::size_t kv_mem_elems(std::size_t Ms) { return Ms * kv_ld; }
    static constexpr std::size_t ctx_elems(std::size_t M) { return M * D; }
    static constexpr std::size_t score_elems = attention_scratch_elems(Dh);
    // Saved by a training forward for backward (Activations): O(M·D), never (Tq, S) per head.
    template <std::size_t M> struct self_saved {
        alignas(64) T qkv[M * qkv_ld];  // q|k|v as the heads read them (RoPE applied)
        alignas(64) T ctx[M * D];       // the heads' outputs, out_proj's input
        alignas(64) T lse[M * H];       // per (b, h, query row): log-sum-exp of the scores
    };
    template <std::size_t M, std::size_t Ms> struct cross_saved {
        alignas(64) T q[M * D];           // the queries
        alignas(64) T kv_mem[Ms * kv_ld];  // the memory's k|v
        alignas(64) T mem[Ms * D];         // the memory (its projection's weight gradient)
        alignas(64) T ctx[M * D];
        alignas(64) T lse[M * H];
    };

    // ---- Key/value sources (attention_sources.hpp): the full forward reads its projections where
    // they are; the step appends them to a KVCache and reads the cache. ----
    template <class E = T> using kv_view = sources::kv_view<E>;
    using transient_self = sources::transient_self<T>;
    using transient_cross = sources::transient_cross<attention>;
    template <class Cache> using cached_self = sources::cached_self<T, Dh, Cache>;
    template <class Cache, std::size_t B> using cached_cross = sources::cached_cross<Dh, Cache, B>;
    using no_source = sources::no_source;

    // Where a call's buffers are: the workspace's (inference) or the Activations' (training, so
    // backward finds them). lse null: not saved.
    struct buffers {
        T* qkv;     // (B*Tq, 3D) self q|k|v, or (B*Tq, D) cross q
        T* ctx;     // (B*Tq, D)
        T* lse;     // (B*H*Tq) or null
        T* scores;  // one score tile
        T* spans = nullptr;  // (B*H, span_state_elems) a step's key spans (for_heads), or null
    };

    // ---- Forward, in stages: the layer runs the row stages (projections) over all rows at once or
    // over parts of them (layer.hpp, "row regions"), and the heads in between. ----
    // Self-attention's q|k|v of rows [r0, r1): qkv rows = x rows · [Wq; Wk; Wv]ᵀ + b, RoPE applied
    // at each fed row's position (src: where batch row b's rows start and how many are fed).
    // x, qkv: the whole (B*Tq)-row buffers.
    // (lo: the layer's adapters, modules/lora.hpp)
    template <class Src, class Lo = no_lora_pass>
    static constexpr void self_project(const Params& p, T* qkv, const T* x, std::size_t r0, std::size_t r1,
                                       std::size_t Tq, const Src& src, T* pack, Lo lo = {}) {
        project_qkv(p, x + r0 * D, r1 - r0, qkv + r0 * qkv_ld, pack);
        if constexpr (passes_adapters<Lo>)
            if (lo.ad) {
                const std::size_t n = r1 - r0;
                if constexpr (separate) {
                    lora::forward<lora_q>(lo.ad->q_proj, x + r0 * D, D, n, qkv + r0 * qkv_ld, qkv_ld, pack, lo.drop, lo.Tq, r0);
                    lora::forward<lora_k>(lo.ad->k_proj, x + r0 * D, D, n, qkv + r0 * qkv_ld + k_off, qkv_ld, pack, lo.drop, lo.Tq, r0);
                    lora::forward<lora_v>(lo.ad->v_proj, x + r0 * D, D, n, qkv + r0 * qkv_ld + v_off, qkv_ld, pack, lo.drop, lo.Tq, r0);
                } else {  // (PEFT's nn.MultiheadAttention: one adapter over q|k|v, no dropout)
                    lora::forward<lora_mha>(lo.ad->in_proj, x + r0 * D, D, n, qkv + r0 * qkv_ld, qkv_ld, pack, no_dropout{}, lo.Tq, r0);
                }
            }
        if constexpr (rope)
            for (std::size_t r = r0; r < r1; ++r)
                if (r % Tq < src.fed(r / Tq)) rotate_rows<false>(qkv + r * qkv_ld, 1, src.first_pos(r / Tq) + r % Tq);
    }
    // qkv: (rows, D + 2·Dkv) at qkv_ld = x: (rows, D) · [Wq; Wk; Wv]ᵀ + [bq; bk; bv]
    static constexpr void project_qkv(const Params& p, const T* x, std::size_t rows, T* qkv, T* pack) {
        if constexpr (separate) {
            linear::forward(p.q_proj.weight, 0, 1, x, rows, p.q_proj.bias_data(), qkv, qkv_ld, pack);
            linear::forward(p.k_proj.weight, 0, 1, x, rows, p.k_proj.bias_data(), qkv + k_off, qkv_ld, pack);
            linear::forward(p.v_proj.weight, 0, 1, x, rows, p.v_proj.bias_data(), qkv + v_off, qkv_ld, pack);
        } else {
            linear::forward(p.in_proj_weight, 0, 3, x, rows, p.in_bias_data(), qkv, qkv_ld, pack);
        }
    }
    // RoPE on n rows of q|k (at qkv_ld) at positions pos0, pos0 + 1, ...: every query head and key
    // head rotated by its row's position (Inverse: back, for the gradients).
    template <bool Inverse> static constexpr void rotate_rows(T* qkv, std::size_t n, std::size_t pos0) {
        constexpr std::size_t half = R / 2;
        const auto& table = kernels::rope_table_v<T, R, Cfg::max_positions, Cfg::rope_type::theta>;
        for (std::size_t i = 0; i < n; ++i) {
            const T* c = table.cos + (pos0 + i) * half;
            const T* s = table.sin + (pos0 + i) * half;
            T* row = qkv + i * qkv_ld;
            for (std::size_t h = 0; h < H + KH; ++h)  // H query heads, then KH key heads (k_off = D)
                kernels::rope_rotate<rope_layout, Inverse>(row + h * Dh, c, s, R);
        }
    }
    // The heads of a self-attention: bf.qkv: (B*Tq, qkv_ld) -> bf.ctx: (B*Tq, D) (and bf.lse). Each
    // key/value head's G query heads read its keys where the source put them.
    template <class Src, class Mask, class Drop>
    static constexpr void self_heads(const buffers& bf, std::size_t B, std::size_t Tq, const Src& src, const Mask& mask,
                                     const Drop& drop) {
        const T scale = score_scale();
        const auto row = [&](std::size_t b) { return bf.qkv + b * Tq * qkv_ld; };
        const auto head = [&](std::size_t b, std::size_t h, query_rows part, T* scores, key_spans<T> ks) {
            const std::size_t kh = h / G;
            const auto kv = src(b, kh, row(b) + k_off + kh * Dh, row(b) + v_off + kh * Dh, qkv_ld);
            attend<Dh>(kv.rows, kv.keys, strided<const T>{row(b) + h * Dh, qkv_ld}, kv.k, kv.v,
                       strided<T>{bf.ctx + b * Tq * D + h * Dh, D}, scores,
                       rule_of(scale, mask, head_ref{b, h, H}, kv.qpos0, drop, dropout_site::self_attn_weights),
                       bf.lse ? bf.lse + (b * H + h) * Tq : nullptr, part, ks);
        };
        if constexpr (requires { src.store(0, 0, row(0), row(0), qkv_ld); })  // a cache's new rows: all G heads read them
            for_heads<G>(B, H, Tq, most_keys(src, B), bf.scores, bf.spans, head, [&](std::size_t b, std::size_t kh) {
                src.store(b, kh, row(b) + k_off + kh * Dh, row(b) + v_off + kh * Dh, qkv_ld);
            });
        else
            for_heads<G>(B, H, Tq, most_keys(src, B), bf.scores, bf.spans, head);
    }
    template <class Src> static constexpr std::size_t most_keys(const Src& src, std::size_t B) {
        std::size_t k = 0;
        for (std::size_t b = 0; b < B; ++b) k = src.keys(b) > k ? src.keys(b) : k;
        return k;
    }
    struct no_store {
        constexpr void operator()(std::size_t, std::size_t) const {}
    };
    // f(b, h, rows, scores, spans) for every batch row b and query head h < heads, over parts of its
    // Tq query rows, after store(b, g) for the group g of Gs heads that h is in: split over the
    // current executor where the work (query rows x keys a head) pays a fork-join, each part with its
    // own score tile (on its thread's stack); else here, whole heads, with the workspace's. A group's
    // store runs in the part that runs the whole group (its lines stay on that core), else before
    // all heads. A step's heads that do not share evenly among the threads run by key spans
    // instead (kernels/attention.hpp), where `states` has room for them (span_state_elems a head),
    // merged here after. A score costs its 2·Dh multiply-adds and about score_macs more (the
    // softmax, masking, the query block's transposition: the tiny layer's heads take what a GEMM
    // does in ~110 multiply-adds a score).
    static constexpr std::size_t score_macs = 128;
    static constexpr std::size_t span_state_elems = query_spans_max * query_span_elems(Dh);
    template <std::size_t Gs, class F, class S = no_store>
    static constexpr void for_heads(std::size_t B, std::size_t heads, std::size_t Tq, std::size_t keys, T* scores,
                                    T* states, const F& f, const S& store = {}) {
        const std::size_t n = B * heads;
        const auto run = [&](std::size_t u0, std::size_t u1, std::size_t c, bool stores, T* tile) {
            for (std::size_t u = u0; u < u1; ++u) {
                const std::size_t b = u / c / heads, h = u / c % heads;
                if (stores && h % Gs == 0 && u % c == 0) store(b, h / Gs);
                f(b, h, head_rows(u % c, c, Tq), tile, key_spans<T>{});
            }
        };
        bool stored = false;
        if (!std::is_constant_evaluated()) {
            const std::size_t work = n * Tq * keys * (2 * Dh + score_macs);
            const schedule::head_plan plan = schedule::plan_heads(n, Tq, work, row_blocks(Tq), states ? query_spans(keys) : 0,
                                                                   schedule::threads());
            if (!plan.split) return run(0, n, 1, true, scores);
            const std::size_t c = plan.cuts, ks = plan.spans;
            if (!std::is_same_v<S, no_store> && !schedule::whole_groups(plan, n, Gs)) {
                const std::size_t groups = n / Gs, per_row = heads / Gs;
                const auto store_all = [&](std::size_t i0, std::size_t i1) {
                    for (std::size_t i = i0; i < i1; ++i) store(i / per_row, i % per_row);
                };
                const bool split = groups * Tq * 2 * Dh >= schedule::min_elems;
                if (!split || !schedule::split_parts(groups, store_all)) store_all(0, groups);
                stored = true;
            }
            if (ks > 1 ? by_key_spans(n, heads, ks, states, scores, f) : schedule::split_parts(n * c, [&](std::size_t u0, std::size_t u1) {
                    alignas(64) T tile[score_elems];
                    run(u0, u1, c, !stored, tile);
                }))
                return;
        }
        run(0, n, 1, !stored, scores);
    }
    // f over the (head, key span) units in parts, then each head's spans merged here, in key order
    template <class F>
    static bool by_key_spans(std::size_t n, std::size_t heads, std::size_t ks, T* states, T* scores, const F& f) {
        if (!schedule::split_parts(n * ks, [&](std::size_t u0, std::size_t u1) {
                alignas(64) T tile[score_elems];
                for (std::size_t u = u0; u < u1; ++u)
                    f(u / ks / heads, u / ks % heads, query_rows{}, tile, key_spans<T>{states + u / ks * span_state_elems, u % ks});
            }))
            return false;
        for (std::size_t u = 0; u < n; ++u)
            f(u / heads, u % heads, query_rows{}, scores, key_spans<T>{states + u * span_state_elems});
        return true;
    }
    static constexpr std::size_t row_blocks(std::size_t Tq) { return (Tq + attention_row_block - 1) / attention_row_block; }
    // Part j of c of a head's Tq rows (schedule::head_row_blocks: causal rows paired to cost alike)
    static constexpr query_rows head_rows(std::size_t j, std::size_t c, std::size_t Tq) {
        const schedule::block_range r = schedule::head_row_blocks(j, c, row_blocks(Tq));
        return {r.first * attention_row_block, r.end * attention_row_block};
    }

    // Cross-attention's queries of rows [r0, r1): q rows = x rows · Wqᵀ + bq (Wq: the first D rows
    // of in_proj_weight; with lo's adapter, its in-projection adapter's first D outputs too). x, q:
    // the whole (B*Tq)-row buffers.
    template <class Lo = no_lora_pass>
    static constexpr void cross_query(const Params& p, T* q, const T* x, std::size_t r0, std::size_t r1, T* pack, Lo lo = {}) {
        linear::forward(p.in_proj_weight, 0, 1, x + r0 * D, r1 - r0, p.in_bias_data(), q + r0 * D, D, pack);
        if constexpr (passes_adapters<Lo>)  // (PEFT's nn.MultiheadAttention: no adapter dropout)
            if (lo.ad) lora::forward<lora_cross, 0, 1>(lo.ad->in_proj, x + r0 * D, D, r1 - r0, q + r0 * D, D, pack, no_dropout{}, lo.Tq, r0);
    }
    // The heads of a cross-attention: queries bf.qkv: (B*Tq, D), keys/values from src -> bf.ctx.
    template <class Src, class Mask, class Drop>
    static constexpr void cross_heads(const buffers& bf, std::size_t B, std::size_t Tq, const Src& src, const Mask& mask,
                                      const Drop& drop) {
        const T scale = score_scale();
        for_heads<1>(B, H, Tq, most_keys(src, B), bf.scores, bf.spans,
                     [&](std::size_t b, std::size_t h, query_rows part, T* scores, key_spans<T> ks) {
            const auto kv = src(b, h);
            attend<Dh>(kv.rows, kv.keys, strided<const T>{bf.qkv + b * Tq * D + h * Dh, D}, kv.k, kv.v,
                       strided<T>{bf.ctx + b * Tq * D + h * Dh, D}, scores,
                       rule_of(scale, mask, head_ref{b, h, H}, kv.qpos0, drop, dropout_site::cross_attn_weights),
                       bf.lse ? bf.lse + (b * H + h) * Tq : nullptr, part, ks);
        });
    }

    // mem: (rows, D) -> kv: (rows, 2D) at stride ldkv = mem · [Wk; Wv]ᵀ + [bk; bv] (+ the in-projection
    // adapter's last 2D outputs: ad, the cross-attention's adapters, or null)
    template <class Ad = absent>
    static constexpr void project_memory(const Params& p, const T* mem, std::size_t rows, T* kv, std::size_t ldkv,
                                         T* pack, const Ad* ad = nullptr) {
        const auto& a = p;
        const T* bias = a.in_bias_data();
        linear::forward(a.in_proj_weight, 1, 2, mem, rows, bias ? bias + D : nullptr, kv, ldkv, pack);
        if constexpr (!std::is_same_v<Ad, absent>)
            if (ad) lora::forward<lora_cross, 1, 2>(ad->in_proj, mem, D, rows, kv, ldkv, pack, no_dropout{}, 0, 0);
    }

    // out (+)= ctx · out_projᵀ + bias (+ the adapter's; ctx holds rows first.. of the call's)
    template <class Lo = no_lora_pass>
    static constexpr void out_projection(const Params& a, const T* ctx, T* out, bool accumulate, std::size_t rows, T* pack,
                                         Lo lo = {}, std::size_t first = 0) {
        const auto& o = out_proj(a);
        linear::forward(o.weight, 0, 1, ctx, rows, o.bias_data(), out, D, pack, kernels::identity_op{}, accumulate);
        if constexpr (passes_adapters<Lo>)
            if (lo.ad) {
                if constexpr (separate) lora::forward<lora_o>(lo.ad->o_proj, ctx, D, rows, out, D, pack, lo.drop, lo.Tq, first);
                else lora::forward<lora_mha>(lo.ad->out_proj, ctx, D, rows, out, D, pack, no_dropout{}, lo.Tq, first);
            }
    }
    template <class P> static constexpr auto& out_proj(P& a) {  // (the params', or the adapters')
        if constexpr (separate) return a.o_proj;
        else return a.out_proj;
    }

    // ---- Backward ----
    // Saved by the forward: x: (B*Tq, D) its input, qkv: (B*Tq, 3D), ctx: (B*Tq, D), lse. From
    // dy: (B*Tq, D) (the output's gradient): grads of self_attn (+=) and dx (+)= the input's
    // gradient. Scratch: d_qkv (B*Tq, 3D), d_ctx (B*Tq, D), kt, vt (Dh, Tq), tiles.
    struct grad_scratch {
        T* d_q;    // (rows, 3D) self / (rows, D) cross
        T* d_kv;   // cross: (B*S, 2D)
        T* d_ctx;  // (rows, D)
        T* kt;
        T* vt;
        T* tiles;
        T* pack;
    };
    // sv: what the forward saved; bg: the sub-layer's input, output gradient and input gradient.
    // g: the params' gradients (+=), or null (frozen: adapters train, lg: their gradients).
    template <std::size_t M, class Mask, class Drop, class Lg = no_lora_pass>
    static void self_backward(const Params& p, Params* g, const self_saved<M>& sv, const branch_grad<T>& bg, std::size_t B,
                              const Mask& mask, const Drop& drop, const grad_scratch& s, const Lg& lg = {}) {
        const std::size_t Tq = M / B;
        const T *x = bg.x, *qkv = sv.qkv, *ctx = sv.ctx, *lse = sv.lse, *dy = bg.dy;
        T* const dx = bg.dx;
        const bool accumulate = bg.accumulate;
        out_backward(p, g, ctx, dy, M, s);
        if constexpr (passes_adapters<Lg>)
            if (lg.ad) {
                if constexpr (separate) lora::backward<lora_o>(lg.ad->o_proj, lg.g->o_proj, ctx, D, M, dy, D, s.d_ctx, s.pack, drop, Tq);
                else lora::backward<lora_mha>(lg.ad->out_proj, lg.g->out_proj, ctx, D, M, dy, D, s.d_ctx, s.pack, no_dropout{}, Tq);
            }
        const T scale = score_scale();
        // (a key/value head's G query heads in one part, in order: they add into its dk, dv,
        // which that part zeroes first, with its dq: the part that writes them)
        for_head_grads(B, KH, Tq, Tq, s, [&](std::size_t b, std::size_t kh, head_scratch<T> hs) {
            T* const rows = s.d_q + b * Tq * qkv_ld;
            zero_columns(rows + kh * G * Dh, Tq, G * Dh, qkv_ld);
            zero_columns(rows + k_off + kh * Dh, Tq, Dh, qkv_ld);
            zero_columns(rows + v_off + kh * Dh, Tq, Dh, qkv_ld);
            for (std::size_t h = kh * G; h < (kh + 1) * G; ++h) {
                const std::size_t o = b * Tq * qkv_ld, oq = o + h * Dh, ok = o + k_off + kh * Dh, ov = o + v_off + kh * Dh,
                                  oc = b * Tq * D + h * Dh;
                const head_saved<T> f{{qkv + oq, qkv_ld}, {qkv + ok, qkv_ld}, {qkv + ov, qkv_ld}, {ctx + oc, D},
                                      lse + (b * H + h) * Tq};
                const head_grads<T> hg{{s.d_q + oq, qkv_ld}, {s.d_q + ok, qkv_ld}, {s.d_q + ov, qkv_ld}};
                attend_head_backward(Tq, Tq, Dh, f, strided<const T>{s.d_ctx + oc, D}, hg, hs,
                                     rule_of(scale, mask, head_ref{b, h, H}, 0, drop, dropout_site::self_attn_weights));
            }
        });
        if constexpr (rope)  // gradients of the rotated q, k -> of the projections' outputs
            for (std::size_t b = 0; b < B; ++b) rotate_rows<true>(s.d_q + b * Tq * qkv_ld, Tq, 0);
        if constexpr (separate) {
            linear::backward_of(p.q_proj, g ? &g->q_proj : nullptr, x, M, s.d_q, qkv_ld, dx, accumulate, s.pack);
            linear::backward_of(p.k_proj, g ? &g->k_proj : nullptr, x, M, s.d_q + k_off, qkv_ld, dx, true, s.pack);
            linear::backward_of(p.v_proj, g ? &g->v_proj : nullptr, x, M, s.d_q + v_off, qkv_ld, dx, true, s.pack);
            if constexpr (passes_adapters<Lg>)
                if (lg.ad) {
                    lora::backward<lora_q>(lg.ad->q_proj, lg.g->q_proj, x, D, M, s.d_q, qkv_ld, dx, s.pack, drop, Tq);
                    lora::backward<lora_k>(lg.ad->k_proj, lg.g->k_proj, x, D, M, s.d_q + k_off, qkv_ld, dx, s.pack, drop, Tq);
                    lora::backward<lora_v>(lg.ad->v_proj, lg.g->v_proj, x, D, M, s.d_q + v_off, qkv_ld, dx, s.pack, drop, Tq);
                }
        } else {
            linear::backward_or_frozen(p.in_proj_weight, g ? &g->in_proj_weight : nullptr, 0, 3, x, M, s.d_q, qkv_ld,
                                       g ? g->in_bias_data() : nullptr, dx, accumulate, s.pack);
            if constexpr (passes_adapters<Lg>)
                if (lg.ad) lora::backward<lora_mha>(lg.ad->in_proj, lg.g->in_proj, x, D, M, s.d_q, qkv_ld, dx, s.pack, no_dropout{}, Tq);
        }
    }

    // Saved (sv): q: (B*Tq, D), mem: (B*S, D), kv_mem: (B*S, 2D) at kv_ld, ctx, lse; bg.x: (B*Tq, D)
    // the query rows' input. Grads of multihead_attn (+=; g null: frozen, lg: its adapters'),
    // bg.dx (+)= the queries' input gradient and d_mem += the memory's.
    template <std::size_t M, std::size_t Ms, class Mask, class Drop, class Lg = no_lora_pass>
    static void cross_backward(const Params& p, Params* g, const cross_saved<M, Ms>& sv, const branch_grad<T>& bg,
                               T* d_mem, std::size_t B, const Mask& mask, const Drop& drop, const grad_scratch& s,
                               const Lg& lg = {}) {
        const auto& a = p;
        const std::size_t Tq = M / B, S = Ms / B;
        const T *x = bg.x, *q = sv.q, *mem = sv.mem, *kv_mem = sv.kv_mem, *ctx = sv.ctx, *lse = sv.lse, *dy = bg.dy;
        T* const dx = bg.dx;
        const bool accumulate = bg.accumulate;
        out_backward(a, g, ctx, dy, M, s);
        if constexpr (passes_adapters<Lg>)
            if (lg.ad) lora::backward<lora_cross>(lg.ad->out_proj, lg.g->out_proj, ctx, D, M, dy, D, s.d_ctx, s.pack, no_dropout{}, Tq);
        const T scale = score_scale();
        for_head_grads(B, H, Tq, S, s, [&](std::size_t b, std::size_t h, head_scratch<T> hs) {
            const std::size_t oq = b * Tq * D + h * Dh, okv = b * S * kv_ld + h * Dh;
            zero_columns(s.d_q + oq, Tq, Dh, D);
            zero_columns(s.d_kv + okv, S, Dh, kv_ld);
            zero_columns(s.d_kv + okv + D, S, Dh, kv_ld);
            const head_saved<T> f{{q + oq, D}, {kv_mem + okv, kv_ld}, {kv_mem + okv + D, kv_ld}, {ctx + oq, D},
                                  lse + (b * H + h) * Tq};
            const head_grads<T> hg{{s.d_q + oq, D}, {s.d_kv + okv, kv_ld}, {s.d_kv + okv + D, kv_ld}};
            attend_head_backward(Tq, S, Dh, f, strided<const T>{s.d_ctx + oq, D}, hg, hs,
                                 rule_of(scale, mask, head_ref{b, h, H}, 0, drop, dropout_site::cross_attn_weights));
        });
        T* gb = g ? g->in_bias_data() : nullptr;
        auto* gw = g ? &g->in_proj_weight : nullptr;
        linear::backward_or_frozen(a.in_proj_weight, gw, 0, 1, x, M, s.d_q, D, gb, dx, accumulate, s.pack);
        linear::backward_or_frozen(a.in_proj_weight, gw, 1, 2, mem, B * S, s.d_kv, kv_ld, gb ? gb + D : nullptr, d_mem, true,
                                   s.pack);
        if constexpr (passes_adapters<Lg>)
            if (lg.ad) {
                lora::backward<lora_cross, 0, 1>(lg.ad->in_proj, lg.g->in_proj, x, D, M, s.d_q, D, dx, s.pack, no_dropout{}, Tq);
                lora::backward<lora_cross, 1, 2>(lg.ad->in_proj, lg.g->in_proj, mem, D, B * S, s.d_kv, kv_ld, d_mem, s.pack,
                                                 no_dropout{}, S);
            }
    }

  private:
    // f(b, h, scratch) for every batch row b and (key/value) head h < heads, over Tq query rows and
    // S keys: split over the current executor where that pays and a part's scratch (keys and
    // values transposed, two tiles) fits grad_task_elems (192 KB) on its thread's stack; else
    // here, with the workspace's.
    static constexpr std::size_t grad_task_elems = 192 * 1024 / sizeof(T);
    template <class F>
    static void for_head_grads(std::size_t B, std::size_t heads, std::size_t Tq, std::size_t S, const grad_scratch& s, F&& f) {
        const std::size_t n = B * heads, kv = (Dh * S + 63) / 64 * 64;  // (whole lines)
        const bool fits = 2 * kv + attention_backward_tile_elems <= grad_task_elems;
        if (fits && n * Tq * S * Dh >= schedule::min_macs &&
            schedule::split_parts(n, [&](std::size_t i0, std::size_t i1) {
                alignas(64) T buf[grad_task_elems];
                for (std::size_t i = i0; i < i1; ++i) f(i / heads, i % heads, head_scratch<T>{buf, buf + kv, buf + 2 * kv});
            }))
            return;
        for (std::size_t i = 0; i < n; ++i) f(i / heads, i % heads, head_scratch<T>{s.kt, s.vt, s.tiles});
    }

    // x: (rows, cols) at stride ld, to zero: a head's gradient slices before its backward adds into them
    static constexpr void zero_columns(T* x, std::size_t rows, std::size_t cols, std::size_t ld) {
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < cols; ++c) x[r * ld + c] = T(0);
    }
    // out_proj's backward: its grads (+=; ga null: frozen) and d_ctx = dy · W_o.
    static void out_backward(const Params& a, Params* ga, const T* ctx, const T* dy, std::size_t M, const grad_scratch& s) {
        linear::backward_of(out_proj(a), ga ? &out_proj(*ga) : nullptr, ctx, M, dy, D, s.d_ctx, false, s.pack);
    }
};

}  // namespace ctformer::modules
