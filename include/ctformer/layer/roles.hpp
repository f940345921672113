// ctformer/layer/roles.hpp — the memory roles a call needs besides the Params: Workspace (scratch of
// one forward), StepWorkspace (scratch of one decoding step), TrainWorkspace (scratch of a
// training forward + backward) and Activations (what forward_train saves for backward).
//
// Each role is one list of members (a *_buffers struct) and a thin type over it whose `bytes` is
// the list's sizeof: the byte size is never restated by hand. All sizes are compile-time
// constants; place the objects in static storage or memory you own. (Which threads a call runs on
// is the calling thread's business: ct::use_executor, core/executor.hpp.)
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "../core/dropout.hpp"
#include "../core/role_size.hpp"
#include "../kernels/gemm.hpp"
#include "../kernels/gemm_train.hpp"
#include "../modules/attention.hpp"
#include "../kernels/attention.hpp"
#include "../modules/feed_forward.hpp"

namespace ctformer {

namespace detail {
// n elements rounded up to whole 64-byte lines (so a buffer after them in a shared region stays aligned)
template <class T> constexpr std::size_t line_elems(std::size_t n) {
    constexpr std::size_t L = 64 % sizeof(T) == 0 ? 64 / sizeof(T) : 1;
    return (n + L - 1) / L * L;
}
// One region for buffers that are dead in turn. The self-attention's q|k|v (M rows) are dead once
// its heads have run, so the cross-attention's k|v of the memory (Ms rows; none in a step) and
// its queries (M rows) take their place, projected after the self-attention; the heads' outputs
// follow (one buffer for both attentions); all of them are dead once the FFN runs, and its hidden
// rows once it returns. Backward reuses them as gradients in the same order (the FFN's first,
// then the cross-attention's, then the self-attention's). Other: the elements of another call's
// scratch that may use the region too. At the base shape the region is 1.06 MB where separate
// buffers would take 2.9 MB, and each buffer's lines were last used a few calls before.
template <class Cfg, std::size_t M, std::size_t Ms, std::size_t Other = 0> struct shared_buffers {
    using T = typename Cfg::value_type;
    using Attn = modules::attention<Cfg>;
    static constexpr std::size_t qkv_elems = line_elems<T>(Attn::qkv_elems(M)),
                                 kv_elems = line_elems<T>(Attn::kv_mem_elems(Ms)),
                                 q_elems = Cfg::cross_attention ? line_elems<T>(Attn::q_elems(M)) : 0,
                                 attn_elems = std::max(qkv_elems, kv_elems + q_elems),
                                 ctx_elems = line_elems<T>(Attn::ctx_elems(M)),
                                 hidden_elems = modules::feed_forward<Cfg>::hidden_elems(M),
                                 shared_elems = std::max({attn_elems + ctx_elems, hidden_elems, Other});
    alignas(64) T shared[shared_elems];
    constexpr T* qkv() { return shared; }                      // (M, qkv_ld) self: q|k|v per row
    constexpr T* kv_mem() { return shared; }                   // (Ms, kv_ld) cross: k|v of every memory row
    constexpr T* q_cross() { return shared + kv_elems; }       // (M, D) cross: the queries
    constexpr T* ctx() { return shared + attn_elems; }         // (M, D) concatenated head outputs
    constexpr T* hidden() { return shared; }                   // (M, F) at ldh: the FFN's hidden rows
};

template <class Cfg, std::size_t B, std::size_t Tq, std::size_t S>
struct workspace_buffers : shared_buffers<Cfg, B * Tq, Cfg::cross_attention ? B * S : 0> {
    static_assert(B > 0 && Tq > 0 && S > 0, "ctformer: batch, tgt_len and src_len must be non-zero");
    using T = typename Cfg::value_type;
    static constexpr bool cross = Cfg::cross_attention, pre_norm = Cfg::norm_first;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim, Dh = Cfg::head_dim;
    static constexpr std::size_t M = B * Tq, Ms = cross ? B * S : 1, Smax = S > Tq ? S : Tq;
    // the forward's GEMMs: M or Ms rows, inner dimension D or F (linear2)
    static constexpr std::size_t pack_elems = kernels::gemm_pack_elems<T>(M > Ms ? M : Ms, D > F ? D : F);
    // (shared_buffers: q|k|v, the memory's k|v and the cross queries, the heads' outputs, the FFN's
    // hidden rows)
    alignas(64) T branch[M * D];       // a sub-layer's output before the residual add
    alignas(64) T normed[pre_norm ? M * D : 1];
    alignas(64) T scores[modules::attention<Cfg>::score_elems];  // one score tile and a block's queries
    alignas(64) T pack[pack_elems];  // GEMM operands packed for the micro-kernel
};

// What backward needs beyond the forward's scratch (whose buffers it reuses for gradients:
// qkv -> d_qkv, kv_mem -> d_kv, q_cross -> d_q, ctx -> d_ctx, hidden -> the FFN's hidden gradient).
template <class Cfg, std::size_t B, std::size_t Tq, std::size_t S> struct train_buffers {
    using base = workspace_buffers<Cfg, B, Tq, S>;
    using T = typename base::T;
    static constexpr std::size_t D = base::D, M = base::M, Ms = base::Ms, Dh = base::Dh, Smax = base::Smax,
                                 pack_elems = base::pack_elems;
    // backward's GEMMs: weight gradients (inner dimension: the M or Ms input rows) and input
    // gradients (inner dimension: an output width, up to 3D for the packed in-projection, or F)
    static constexpr std::size_t F = Cfg::ffn_dim, Mx = M > Ms ? M : Ms, Ox = 3 * D > F ? 3 * D : F;
    // (the input gradients' GEMMs have M or Ms rows)
    static constexpr std::size_t Kx = Mx > Ox ? Mx : Ox, In = D > F ? D : F,
                                 nt_m = Cfg::has_lora ? 0 : M,  // (adapters: input gradients of any row count)
                                 pack_m = kernels::gemm_train_pack_elems<T>(Mx, Kx, In, nt_m),
                                 pack_ms = kernels::gemm_train_pack_elems<T>(Mx, Kx, In, Ms),
                                 train_pack_elems = pack_m > pack_ms ? pack_m : pack_ms;
    alignas(64) T grad[M * D];    // the residual stream's gradient
    alignas(64) T dbranch[M * D];  // a branch's output gradient through its output dropout
    alignas(64) T din[M * D];     // a branch's input gradient (pre-norm: before its norm)
    alignas(64) T input[M * D];   // a branch's input, recomputed from the saved norm input
    alignas(64) T kt[Dh * Smax];  // one head's keys and values, transposed
    alignas(64) T vt[Dh * Smax];
    alignas(64) T tiles[kernels::attention_backward_tile_elems];
    // the backward's GEMMs pack more of a than the forward's; the forward's pack serves when as large
    alignas(64) T extra_pack[train_pack_elems > pack_elems ? train_pack_elems : 1];
};

// fill_cross_cache's staging (fill_rows projected memory rows, k|v) is another call's scratch: it
// uses the shared region too.
inline constexpr std::size_t step_fill_rows = 16;
template <class Cfg, std::size_t B, std::size_t Chunk>
struct step_buffers : shared_buffers<Cfg, B * Chunk, 0, Cfg::cross_attention ? step_fill_rows * 2 * Cfg::d_model : 0> {
    static_assert(B > 0 && Chunk > 0, "ctformer: batch and chunk must be non-zero");
    using T = typename Cfg::value_type;
    static constexpr bool cross = Cfg::cross_attention, pre_norm = Cfg::norm_first;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim, Dh = Cfg::head_dim;
    static constexpr std::size_t batch = B, chunk = Chunk, M = B * Chunk;
    // Staging for fill_cross_cache: projected memory rows, a block at a time.
    static constexpr std::size_t fill_rows = step_fill_rows;
    static constexpr std::size_t pack_elems =
        kernels::gemm_pack_elems<T>(M > fill_rows ? M : fill_rows, D > F ? D : F);
    // A one-row step whose heads do not share evenly among threads runs them by key spans, each
    // part with its own score tile: the workspace's holds the spans' states then (none on bare
    // metal: nothing splits there).
    static constexpr bool by_spans = Chunk == 1 && CTFORMER_THREADS;
    static constexpr std::size_t score_elems = modules::attention<Cfg>::score_elems,
                                 span_elems = by_spans ? B * Cfg::heads * modules::attention<Cfg>::span_state_elems : 0;
    alignas(64) T branch[M * D];
    alignas(64) T normed[pre_norm ? M * D : 1];
    alignas(64) T scores[score_elems > span_elems ? score_elems : span_elems];
    alignas(64) T pack[pack_elems];
    constexpr T* key_spans() { return by_spans ? scores : nullptr; }
    constexpr T* staging() { return this->shared; }  // (fill_rows, 2D): fill_cross_cache's projected rows
};

// Saved by forward_train for backward: the residual streams the norms need, and what each
// module declares it saves (attention.hpp, feed_forward.hpp).
struct nothing_saved {};
template <class Cfg, std::size_t B, std::size_t Tq, std::size_t S> struct activation_buffers {
    static_assert(B > 0 && Tq > 0 && S > 0, "ctformer: batch, tgt_len and src_len must be non-zero");
    using T = typename Cfg::value_type;
    using Attn = modules::attention<Cfg>;
    static constexpr bool cross = Cfg::cross_attention, pre_norm = Cfg::norm_first;
    static constexpr std::size_t D = Cfg::d_model, M = B * Tq, Ms = B * S;
    static constexpr std::size_t sublayers = cross ? 3 : 2;
    // pre-norm: the residual stream entering each sub-layer (its norm's input);
    // post-norm: tgt, then each sub-layer's residual sum (its norm's input)
    static constexpr std::size_t streams = pre_norm ? sublayers : sublayers + 1;
    alignas(64) T x[streams][M * D];
    typename Attn::template self_saved<M> self_attn;
    std::conditional_t<cross, typename Attn::template cross_saved<M, Ms>, nothing_saved> cross_attn;
    typename modules::feed_forward<Cfg>::template saved<M> ffn;
    dropout_config dropout{};  // the forward's draws, regenerated by backward
    bool filled = false;
};
}  // namespace detail

template <class Cfg, std::size_t B, std::size_t Tq, std::size_t S = Tq>
struct Workspace : detail::workspace_buffers<Cfg, B, Tq, S>, sized_role<Workspace<Cfg, B, Tq, S>> {};

// A Workspace that also serves backward (forward_train and backward share it).
template <class Cfg, std::size_t B, std::size_t Tq, std::size_t S = Tq>
struct TrainWorkspace : Workspace<Cfg, B, Tq, S>, detail::train_buffers<Cfg, B, Tq, S>,
                        sized_role<TrainWorkspace<Cfg, B, Tq, S>> {
    using extra = detail::train_buffers<Cfg, B, Tq, S>;
    using sized_role<TrainWorkspace>::bytes;
    typename extra::T* train_pack() {
        if constexpr (extra::train_pack_elems > extra::pack_elems) return this->extra_pack;
        else return this->pack;
    }
};

template <class Cfg, std::size_t B, std::size_t Chunk>
struct StepWorkspace : detail::step_buffers<Cfg, B, Chunk>, sized_role<StepWorkspace<Cfg, B, Chunk>> {};

template <class Cfg, std::size_t B, std::size_t Tq, std::size_t S = Tq>
struct Activations : detail::activation_buffers<Cfg, B, Tq, S>, sized_role<Activations<Cfg, B, Tq, S>> {
    static constexpr std::size_t batch = B, tgt_len = Tq, src_len = S;
};

template <class A> struct is_activations : std::false_type {};
template <class Cfg, std::size_t B, std::size_t Tq, std::size_t S>
struct is_activations<Activations<Cfg, B, Tq, S>> : std::true_type {};
template <class A> inline constexpr bool is_activations_v = is_activations<std::remove_cv_t<A>>::value;

}  // namespace ctformer
