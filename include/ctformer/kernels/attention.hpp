// ctformer/kernels/attention.hpp — scaled dot-product attention for one (batch row, head):
// forward (shared by the full forward and the cached step) and backward side by side. Keys are
// read pre-transposed (kt: (Dh, S)) so scores are a GEMM vectorized along the keys; a step with
// one query row is then a GEMV over the cache. The training forward saves one number per query
// row, the log-sum-exp of its scores; backward recomputes the probabilities tile by tile from it
// (FlashAttention-2), so nothing of size (Tq, S) is ever stored.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../core/dropout.hpp"
#include "attention_query.hpp"
#include "gemm.hpp"
#include "softmax.hpp"
#include "../core/masks.hpp"

namespace ctformer::kernels {

// Query rows per block, and keys per tile: attention runs over (64 keys x 16 query rows) score
// tiles with an online softmax, so its scratch does not grow with the sequence and causal tiles
// past a block's last query are never computed.
inline constexpr std::size_t attention_row_block = 16;
inline constexpr std::size_t attention_key_tile = 64;
// Scratch of attend / attend_head, in elements: one score tile and a row block's queries.
inline constexpr std::size_t attention_scratch_elems(std::size_t Dh) {
    return attention_row_block * (attention_key_tile + Dh);
}

// A row-major matrix in place: element (i, j) at p[i·ld + j].
template <class T> struct strided {
    T* p;
    std::size_t ld;
    constexpr T* row(std::size_t i) const { return p + i * ld; }
};

struct head_ref {
    std::size_t b, h, heads;
};

// What travels with a head through the attention kernels: the score scale, the mask, which head,
// the position of its first query row, dropout and its site (mask and dropout by reference: a rule
// lives no longer than the call it is made for).
template <class T, class Mask, class Drop> struct score_rule {
    T scale;
    const Mask& mask;
    head_ref head;
    std::size_t qpos0;
    const Drop& drop;
    dropout_site site;
    constexpr score_rule at(std::size_t i) const { return {scale, mask, head, qpos0 + i, drop, site}; }  // rows i..
};
template <class T, class Mask, class Drop>
constexpr score_rule<T, Mask, Drop> rule_of(T scale, const Mask& mask, head_ref head, std::size_t qpos0, const Drop& drop,
                                            dropout_site site) {
    return {scale, mask, head, qpos0, drop, site};
}

// A head's keys: rows (keys, Dh) at stride ld (the forward's projections, read where they are), or
// transposed, (Dh, keys) at stride ld (a KV cache, where a step's scores are a GEMV along the keys).
template <class T> struct keys_ref {
    const T* p;
    std::size_t ld;
    bool transposed;
};

// out: (rows, Dh) at ldo += p · v: (n, Dh) at ldv with p[r, j] at p[r * pr + j * pj], skipping
// every zero probability: the exact path when some value is not finite, where a blocked key
// (p = 0) must contribute nothing rather than 0·NaN (the GEMM multiplies every pair).
// (v as E: T, or a bf16 cache's bits.)
// (parameters: plain pointers and strides, unpacked from the views at attend's boundary.)
template <class T, class E>
constexpr void values_skipping_zeros(std::size_t rows, std::size_t n, std::size_t Dh, const T* p, std::size_t pr,
                                     std::size_t pj, const E* v, std::size_t ldv, T* out, std::size_t ldo) {
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < n; ++j)
            if (const T x = p[r * pr + j * pj]; x != T(0)) {
                if constexpr (std::is_same_v<E, T>) kernels::axpy(out + r * ldo, v + j * ldv, x, Dh);
                else
                    for (std::size_t d = 0; d < Dh; ++d)
                        out[r * ldo + d] = simd::sfma(x, from_cache<T>(v[j * ldv + d]), out[r * ldo + d]);
            }
}
// Whether rows (rows, cols) at ldx of E are all finite (bf16 bits: exponent not all ones).
template <class T, class E> constexpr bool cache_all_finite(const E* x, std::size_t rows, std::size_t cols, std::size_t ldx) {
    if constexpr (std::is_same_v<E, T>) return kernels::all_finite(x, rows, cols, ldx);
    else {
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j)
                if ((x[i * ldx + j] & 0x7f80u) == 0x7f80u) return false;
        return true;
    }
}

namespace detail {
// f(row) on column c of a (n, ld) tile gathered into a row (the mask and dropout hooks take rows).
template <class T, class F> constexpr void on_column(T* col, std::size_t n, std::size_t ld, F f) {
    T row[attention_key_tile];
    for (std::size_t j = 0; j < n; ++j) row[j] = col[j * ld];
    f(row);
    for (std::size_t j = 0; j < n; ++j) col[j * ld] = row[j];
}
// qt: (Dh, R) = the block's query rows q: (rows, Dh) at ldq, transposed and scaled; columns past
// rows are zero (padding lanes: their scores are finite, and blocked).
template <class T>
constexpr void load_queries(std::size_t rows, std::size_t Dh, const T* q, std::size_t ldq, T scale, T* qt, std::size_t R) {
    kernels::transpose_scaled(rows, Dh, q, ldq, qt, R, scale);
    for (std::size_t d = 0; d < Dh; ++d)
        for (std::size_t r = rows; r < R; ++r) qt[d * R + r] = T(0);
}
}  // namespace detail

// q: (Tq, Dh) rows at stride ldq, positions qpos0.. ; k: S keys (keys_ref); v: (S, Dh) at stride
// ldv -> out: (Tq, Dh) at stride ldo.
// out = softmax(q·scale·kᵀ + mask) · v, per row; a row whose keys are all blocked gives zeros.
// A blocked key never contributes, whatever its key and value hold (NaN and inf included).
// Scratch: attention_scratch_elems(Dh).
// Dropout (training) is applied to the probabilities (dropping before normalizing is the same).
// lse (optional): (Tq) the log-sum-exp of each row's scores (-inf for a fully blocked row).
//
// The scores are computed transposed, keys down and a block's query rows across (qt: the block's
// queries transposed and scaled, as PyTorch scales q before the product): the softmax's running
// maximum and sum are then vertical vector operations over the rows, however few the keys, and the
// tile (n, rows) is already the k-major operand of the value product (gemm_tn). Key ends are held
// as T to be compared in vectors (exact below 2^24 keys in float).
// (parameters: plain pointers and strides, unpacked from the views at attend's boundary.)
template <class T, class Mask, class Drop>
constexpr void attend_head(std::size_t Tq, std::size_t S, std::size_t Dh, const T* q, std::size_t ldq, keys_ref<T> k,
                           const T* v, std::size_t ldv, T* out, std::size_t ldo, T* scratch,
                           const score_rule<T, Mask, Drop>& rule, T* lse = nullptr) {
    // (named one by one, not bound: the lambdas below capture them, which clang 14 cannot do for
    // structured bindings)
    const T scale = rule.scale;
    const Mask& mask = rule.mask;
    const head_ref hr = rule.head;
    const std::size_t qpos0 = rule.qpos0;
    const Drop& drop = rule.drop;
    const dropout_site site = rule.site;
    constexpr std::size_t R = attention_row_block, KT = attention_key_tile;
    static_assert(R % simd::width<T> == 0, "ctformer: the row block must be a whole number of vectors");
    T* const st = scratch;           // (n, R): a key tile's scores, then probabilities
    T* const qt = scratch + KT * R;  // (Dh, R): the block's queries, transposed and scaled
    // A key can be blocked (p = 0 beside a value that is not finite) only by a mask or dropout:
    // without either every row sees all S keys, and a value that is not finite reaches the output
    // as it does in PyTorch's product, so the values are not scanned. Dropout of probability 0 (a
    // training forward without it) drops nothing and touches no tile.
    const bool drops = drop.drops(site);
    const bool may_block = Mask::has_apply || drops || !std::is_same_v<Mask, no_mask>;
    const bool v_finite = !may_block || kernels::all_finite(v, S, Dh, ldv);
    for (std::size_t i0 = 0; i0 < Tq; i0 += R) {
        const std::size_t rows = Tq - i0 < R ? Tq - i0 : R;
        std::size_t kend_block = 0;
        alignas(64) T kend[R], m[R], l[R], corr[R];  // kend: keys each row needs (padding rows: none)
        for (std::size_t r = 0; r < R; ++r) {
            const std::size_t e = r < rows ? mask.key_end(hr.b, qpos0 + i0 + r, S) : 0;
            kend_block = e > kend_block ? e : kend_block;
            kend[r] = T(e);
            m[r] = -std::numeric_limits<T>::infinity();
            l[r] = T(0);
        }
        detail::load_queries(rows, Dh, q + i0 * ldq, ldq, scale, qt, R);
        // keys in one tile: the probabilities are normalized before the value product (as PyTorch
        // orders it), else the output after the last tile (the online softmax's rescaling)
        const bool one_tile = kend_block <= KT;
        // out is written by the first tile's value product (a row whose keys are all blocked gets
        // p = 0 there); zeroed first only where nothing or the skipping path writes it.
        if (kend_block == 0 || !v_finite)
            for (std::size_t r = 0; r < rows; ++r)
                for (std::size_t d = 0; d < Dh; ++d) out[(i0 + r) * ldo + d] = T(0);
        for (std::size_t j0 = 0; j0 < kend_block; j0 += KT) {
            const std::size_t n = kend_block - j0 < KT ? kend_block - j0 : KT;
            // st: (n, R) = k[j0:j0+n]: (n, Dh) · qt: (Dh, R)
            if (k.transposed) kernels::gemm_tn(n, R, Dh, k.p + j0, k.ld, qt, R, st, R, false);
            else kernels::gemm(n, R, Dh, k.p + j0 * k.ld, k.ld, qt, R, st, R);
            if constexpr (Mask::has_apply)
                for (std::size_t r = 0; r < rows; ++r) {
                    const std::size_t e = std::size_t(kend[r]), valid = e > j0 ? (e - j0 < n ? e - j0 : n) : 0;
                    detail::on_column(st + r, n, R, [&](T* row) {
                        mask.apply(mask_row{hr.b, hr.h, hr.heads, qpos0 + i0 + r}, row, j0, valid);
                    });
                }
            kernels::online_softmax_cols(st, n, R, kend, j0, m, l, corr);
            if (one_tile) kernels::normalize_cols(st, n, R, l);
            for (std::size_t r = 0; r < rows; ++r) {
                const T c = corr[r];
                if (c != T(1) && j0 > 0)  // before the first tile out is still zero
                    kernels::map_inplace(out + (i0 + r) * ldo, Dh, [c](const auto& x) { return x * c; });
                if (drops)
                    detail::on_column(st + r, n, R, [&](T* row) {
                        drop.apply(row, n, site, (std::uint64_t{hr.b * hr.heads + hr.h} << 32) | (qpos0 + i0 + r), j0);
                    });
            }
            // out_block (+)= p: (rows, n) · v[j0:j0+n]: (n, Dh), p read from st as its transpose
            if (v_finite)
                kernels::gemm_tn(rows, Dh, n, st, R, v + j0 * ldv, ldv, out + i0 * ldo, ldo, j0 > 0);
            else
                values_skipping_zeros(rows, n, Dh, st, 1, R, v + j0 * ldv, ldv, out + i0 * ldo, ldo);
        }
        for (std::size_t r = 0; r < rows; ++r) {  // normalize; fully blocked rows stay zero
            const T inv = l[r] > T(0) ? T(1) / l[r] : T(0);
            if (!one_tile) kernels::map_inplace(out + (i0 + r) * ldo, Dh, [inv](const auto& x) { return x * inv; });
            if (lse) lse[i0 + r] = l[r] > T(0) ? m[r] + simd::vlog(l[r]) : -std::numeric_limits<T>::infinity();
        }
    }
}

// A decoding step's keys in spans: each span's softmax is taken alone (its own max and sum) and the
// spans are merged in key order, so a head whose spans run on several threads gives the bits it
// gives on one. Spans are equal runs of whole key tiles, as many as the passes over the score
// scratch (query_span_keys keys) the keys need, up to query_spans_max: a query makes the passes it
// made before spans, and one of up to query_span_keys keys has one span (nothing merged).
inline constexpr std::size_t query_span_keys = attention_row_block * attention_key_tile, query_spans_max = 8;
constexpr std::size_t query_spans(std::size_t keys) {
    const std::size_t n = (keys + query_span_keys - 1) / query_span_keys;
    return n < 1 ? 1 : n > query_spans_max ? query_spans_max : n;
}
// span j's first key (whole key tiles; j = spans: the end)
constexpr std::size_t query_span_begin(std::size_t keys, std::size_t j, std::size_t spans) {
    const std::size_t KT = attention_key_tile, w = ((keys + spans - 1) / spans + KT - 1) / KT * KT;
    return j * w < keys ? j * w : keys;
}
// A span's state: its unnormalized output (Dh), then m and l.
constexpr std::size_t query_span_elems(std::size_t Dh) { return Dh + 2; }

// Keys [j0, j1) of one query row: out: (Dh) = Σ exp(s - m)·v, m the scores' max, l = Σ exp(s - m)
// (l = 0: every key blocked). Passes of `tile` keys, online softmax across them.
// (parameters: plain pointers and strides, unpacked from the views at attend's boundary.)
template <std::size_t Dh, class T, class Mask, class Drop, class E>
constexpr void query_span(std::size_t j0, std::size_t j1, const T* q, const E* kt, std::size_t ldk, const E* v,
                          std::size_t ldv, T* out, T& m, T& l, T* scores, std::size_t tile,
                          const score_rule<T, Mask, Drop>& rule) {
    const auto& [scale, mask, hr, qpos, drop, site] = rule;
    // keys below the key end can be blocked only by an element mask or dropout
    const bool drops = drop.drops(site);
    const bool v_finite = !(Mask::has_apply || drops) || cache_all_finite<T>(v + j0 * ldv, j1 - j0, Dh, ldv);
    m = -std::numeric_limits<T>::infinity(), l = T(0);
    for (std::size_t d = 0; d < Dh; ++d) out[d] = T(0);
    for (std::size_t t0 = j0; t0 < j1; t0 += tile) {
        const std::size_t n = j1 - t0 < tile ? j1 - t0 : tile;
        kernels::query_scores<Dh>(n, ldk - t0, q, kt + t0, ldk, scale, scores);
        if constexpr (Mask::has_apply) mask.apply(mask_row{hr.b, hr.h, hr.heads, qpos}, scores, t0, n);
        // pad to a whole vector of blocked scores when the scratch has room: no scalar exp tail
        const std::size_t up = simd::whole_vectors<T>(n), ns = up <= tile ? up : n;
        kernels::block_tail(scores, n, ns);
        const T correction = kernels::online_softmax_tile(scores, ns, m, l);
        if (drops) drop.apply(scores, n, site, (std::uint64_t{hr.b * hr.heads + hr.h} << 32) | qpos, t0);
        if (v_finite) {
            kernels::query_values<Dh>(n, scores, v + t0 * ldv, ldv, correction, out);
        } else {
            kernels::map_inplace(out, Dh, [correction](const auto& x) { return x * correction; });
            values_skipping_zeros(1, n, Dh, scores, ns, 1, v + t0 * ldv, ldv, out, Dh);
        }
    }
}
// (out, m, l) then a later span's (oj, mj, lj) -> both's, in place.
template <std::size_t Dh, class T> constexpr void merge_query_span(T* out, T& m, T& l, const T* oj, T mj, T lj) {
    if (lj == T(0)) return;
    if (l == T(0)) {
        for (std::size_t d = 0; d < Dh; ++d) out[d] = oj[d];
        m = mj, l = lj;
        return;
    }
    const T mn = m > mj ? m : mj, a = simd::vexp(m - mn), c = simd::vexp(mj - mn);
    // oj·c + out·a, one fused multiply-add an element: the same bits in every inlining context (left
    // to contraction, the scalar tail was fused in the step's parts and not in one thread's loop)
    std::size_t d = 0;
    for (const std::size_t nv = simd::vector_part<T>(Dh); d < nv; d += simd::width<T>)
        simd::store(out + d, simd::vfma(simd::load(oj + d), simd::vec<T>(c), simd::load(out + d) * simd::vec<T>(a)));
    for (; d < Dh; ++d) out[d] = simd::sfma(oj[d], c, out[d] * a);
    l = simd::sfma(lj, c, l * a);
    m = mn;
}
template <std::size_t Dh, class T> constexpr void finish_query(T* out, T m, T l, T* lse) {
    const T inv = l > T(0) ? T(1) / l : T(0);  // fully blocked rows stay zero
    kernels::map_inplace(out, Dh, [inv](const auto& x) { return x * inv; });
    if (lse) *lse = l > T(0) ? m + simd::vlog(l) : -std::numeric_limits<T>::infinity();
}

// Where a head's key spans go when they run apart (threads): `states` has room for query_spans_max
// states of query_span_elems; span j is computed into its state, and j = all merges them into the
// head's output.
template <class T> struct key_spans {
    static constexpr std::size_t all = std::size_t(-1);
    T* states = nullptr;
    std::size_t j = all;
};

// One query row (a decoding step): q: (Dh) at position rule.qpos0, kt: (Dh, S) at stride ldk, v: (S, Dh)
// at stride ldv -> out: (Dh). Same result as attend_head with Tq = 1, without its per-block
// bookkeeping: a span's scores fill the whole scratch (tile keys per pass), so a step costs one
// GEMV along the keys, one softmax and one GEMV along the values. ks.states: span ks.j only, or
// the merge of the spans there.
// (parameters: plain pointers and strides, unpacked from the views at attend's boundary.)
template <std::size_t Dh, class T, class Mask, class Drop, class E>
constexpr void attend_query(std::size_t S, const T* q, const E* kt, std::size_t ldk, const E* v, std::size_t ldv, T* out,
                            T* scores, std::size_t tile, const score_rule<T, Mask, Drop>& rule, T* lse = nullptr,
                            key_spans<T> ks = {}) {
    const std::size_t kend = rule.mask.key_end(rule.head.b, rule.qpos0, S), spans = query_spans(kend);
    constexpr std::size_t E_ = query_span_elems(Dh);
    const auto span = [&](std::size_t j, T* o, T& m, T& l) {
        query_span<Dh>(query_span_begin(kend, j, spans), query_span_begin(kend, j + 1, spans), q, kt, ldk, v, ldv, o, m,
                       l, scores, tile, rule);
    };
    if (ks.states && ks.j != ks.all) {  // one span, kept for the merge (none past the query's spans)
        T* st = ks.states + ks.j * E_;
        if (ks.j < spans) span(ks.j, st, st[Dh], st[Dh + 1]);
        else st[Dh + 1] = T(0);
        return;
    }
    T m, l;
    if (ks.states) {
        m = -std::numeric_limits<T>::infinity(), l = T(0);
        for (std::size_t j = 0; j < spans; ++j)
            merge_query_span<Dh>(out, m, l, ks.states + j * E_, ks.states[j * E_ + Dh], ks.states[j * E_ + Dh + 1]);
        if (l == T(0))
            for (std::size_t d = 0; d < Dh; ++d) out[d] = T(0);
    } else {
        span(0, out, m, l);
        T oj[Dh], mj, lj;
        for (std::size_t j = 1; j < spans; ++j) {
            span(j, oj, mj, lj);
            merge_query_span<Dh>(out, m, l, oj, mj, lj);
        }
    }
    finish_query<Dh>(out, m, l, lse);
}

// Query rows [i0, i1) of a head's Tq (i0 a multiple of attention_row_block): the rows keep the
// blocks the whole head forms, so a head split into such ranges gives the bits it gives whole.
struct query_rows {
    std::size_t i0 = 0, i1 = std::size_t(-1);
};

// One head's attention, q: (Tq, Dh), keys k (S of them), v: (S, Dh) -> out: (Tq, Dh) (and lse),
// for the query rows in `part` (all by default): attend_head, or attend_query for one query row
// over transposed keys (a decoding step). The views are unpacked here, at the boundary: the bodies
// index plain pointers. A bf16 cache (E not T) is read by attend_query, row by row: it widens each
// vector as it loads it.
// (parameters: plain pointers and strides, unpacked from the views at attend's boundary.)
template <std::size_t Dh, class T, class Mask, class Drop, class E>
constexpr void attend(std::size_t Tq, std::size_t S, strided<const T> q, keys_ref<E> k, strided<const E> v,
                      strided<T> out, T* scores, const score_rule<T, Mask, Drop>& rule, T* lse = nullptr,
                      query_rows part = {}, key_spans<T> ks = {}) {
    const std::size_t i0 = part.i0, i1 = part.i1 < Tq ? part.i1 : Tq;
    if (i0 >= i1) return;
    if (ks.states && k.transposed)  // (one query row over a cache's keys, in key spans)
        attend_query<Dh>(S, q.p, k.p, k.ld, v.p, v.ld, out.p, scores, query_span_keys, rule, lse, ks);
    else if constexpr (!std::is_same_v<E, T>) {
        for (std::size_t i = i0; i < i1; ++i)
            attend_query<Dh>(S, q.row(i), k.p, k.ld, v.p, v.ld, out.row(i), scores, query_span_keys, rule.at(i),
                             lse ? lse + i : nullptr);
    } else if (Tq == 1 && k.transposed)  // (the whole head's row count chooses the path, not the part's)
        attend_query<Dh>(S, q.p, k.p, k.ld, v.p, v.ld, out.p, scores, query_span_keys, rule, lse);
    else
        attend_head(i1 - i0, S, Dh, q.row(i0), q.ld, k, v.p, v.ld, out.row(i0), out.ld, scores, rule.at(i0),
                    lse ? lse + i0 : nullptr);
}

// Scratch of attend_head_backward, in elements: two (row block x key tile) tiles.
inline constexpr std::size_t attention_backward_tile_elems = 2 * attention_row_block * attention_key_tile;

// What one head's forward saved (rows as projected: q (Tq, Dh), k and v (S, Dh), its output o
// (Tq, Dh), lse (Tq)), and the gradients its backward adds into (dq, dk, dv).
template <class T> struct head_saved {
    strided<const T> q, k, v, o;
    const T* lse;
};
template <class T> struct head_grads {
    strided<T> dq, dk, dv;
};
// Scratch: kt, vt: (Dh, S) each; tiles: attention_backward_tile_elems.
template <class T> struct head_scratch {
    T *kt, *vt, *tiles;
};

namespace detail {
// The body takes the views and the rule as scalars (29 parameters): GCC 12 compiles the inlined
// kernel better so (scripts/performance_log.md, "Attention backward: views at the boundary").
template <class T, class Mask, class Drop>
inline void attend_head_backward(std::size_t Tq, std::size_t S, std::size_t Dh, const T* q, std::size_t ldq,
                                 const T* k, std::size_t ldk, const T* v, std::size_t ldv, const T* o,
                                 std::size_t ldo, const T* lse, const T* d_o, std::size_t lddo, T* dq,
                                 std::size_t lddq, T* dk, std::size_t lddk, T* dv, std::size_t lddv, T* kt, T* vt,
                                 T* tiles, T scale, const Mask& mask, head_ref hr, std::size_t qpos0,
                                 const Drop& drop, dropout_site site) {
    constexpr std::size_t RB = attention_row_block, KT = attention_key_tile;
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    using kernels::identity_op;
    T* const p = tiles;             // (rows, ld): probabilities, then dropped probabilities
    T* const ds = tiles + RB * KT;  // (rows, ld): dP, then dS
    const bool drops = drop.drops(site);
    kernels::transpose(S, Dh, k, ldk, kt, S);  // kt, vt: (Dh, S)
    kernels::transpose(S, Dh, v, ldv, vt, S);
    for (std::size_t i0 = 0; i0 < Tq; i0 += RB) {
        const std::size_t rows = Tq - i0 < RB ? Tq - i0 : RB;
        std::size_t kend[RB], kend_block = 0;
        T di[RB];
        for (std::size_t r = 0; r < rows; ++r) {
            kend[r] = mask.key_end(hr.b, qpos0 + i0 + r, S);
            kend_block = kend[r] > kend_block ? kend[r] : kend_block;
            di[r] = kernels::dot(d_o + (i0 + r) * lddo, o + (i0 + r) * ldo, Dh);
        }
        for (std::size_t j0 = 0; j0 < kend_block; j0 += KT) {
            const std::size_t n = kend_block - j0 < KT ? kend_block - j0 : KT, ld = simd::whole_vectors<T>(n);
            // p: (rows, n) = q_block · kt[:, tile];  ds: (rows, n) = d_o_block · vt[:, tile]
            kernels::gemm(rows, n, Dh, q + i0 * ldq, ldq, kt + j0, S, p, ld);
            kernels::gemm(rows, n, Dh, d_o + i0 * lddo, lddo, vt + j0, S, ds, ld);
            for (std::size_t r = 0; r < rows; ++r) {
                const std::size_t qpos = qpos0 + i0 + r;
                const std::uint64_t drop_row = (std::uint64_t{hr.b * hr.heads + hr.h} << 32) | qpos;
                T* pr = p + r * ld;
                T* dr = ds + r * ld;
                const std::size_t valid = kend[r] > j0 ? (kend[r] - j0 < n ? kend[r] - j0 : n) : 0;
                const T lr = lse[i0 + r];
                kernels::map_inplace(pr, n, [scale](const auto& x) { return x * scale; });
                if constexpr (Mask::has_apply) mask.apply(mask_row{hr.b, hr.h, hr.heads, qpos}, pr, j0, valid);
                kernels::block_tail(pr, valid, ld);
                if (lr == neg_inf) {  // every key blocked: the forward's output was zero, no gradient
                    for (std::size_t j = 0; j < ld; ++j) pr[j] = dr[j] = T(0);
                    continue;
                }
                kernels::map_inplace(pr, ld, [lr](const auto& x) { return simd::vexp_nonpositive(x - std::remove_cvref_t<decltype(x)>(lr)); });
                if (drops) drop.apply(dr, n, site, drop_row, j0);
                kernels::softmax_backward(dr, pr, n, di[r], scale);
                if (drops) drop.apply(pr, n, site, drop_row, j0);
            }
            // dv[tile] += drop(P)ᵀ: (n, rows) · d_o_block: (rows, Dh)   (P read as its transpose)
            kernels::gemm_tn(n, Dh, rows, p, ld, d_o + i0 * lddo, lddo, dv + j0 * lddv, lddv, true);
            // dq_block += dS: (rows, n) · k[tile]: (n, Dh)
            kernels::gemm(rows, Dh, n, ds, ld, k + j0 * ldk, ldk, dq + i0 * lddq, lddq, static_cast<const T*>(nullptr),
                          identity_op{}, static_cast<T*>(nullptr), true);
            // dk[tile] += dSᵀ: (n, rows) · q_block: (rows, Dh)
            kernels::gemm_tn(n, Dh, rows, ds, ld, q + i0 * ldq, ldq, dk + j0 * lddk, lddk, true);
        }
    }
}
}  // namespace detail

// The backward of attend_head (FlashAttention-2's, by recomputation), from the forward's saved
// tensors f and d_o: (Tq, Dh) the output's gradient; accumulates dq, dk, dv (+=). Per (row block,
// key tile):
//   P = exp(q·kᵀ·scale + mask - lse)          (the forward's probabilities, recomputed)
//   dP = drop'(d_o · vᵀ);  dS = P ∘ (dP - rowsum(d_o ∘ o)) · scale
//   dv += drop(P)ᵀ · d_o;  dq += dS · k;  dk += dSᵀ · q
// Dropout regenerates the forward's mask from its counters (dropout is linear: its backward is
// the same call).
template <class T, class Mask, class Drop>
inline void attend_head_backward(std::size_t Tq, std::size_t S, std::size_t Dh, const head_saved<T>& f,
                                 strided<const T> d_o, const head_grads<T>& g, const head_scratch<T>& sc,
                                 const score_rule<T, Mask, Drop>& rule) {
    detail::attend_head_backward(Tq, S, Dh, f.q.p, f.q.ld, f.k.p, f.k.ld, f.v.p, f.v.ld, f.o.p, f.o.ld, f.lse, d_o.p,
                                 d_o.ld, g.dq.p, g.dq.ld, g.dk.p, g.dk.ld, g.dv.p, g.dv.ld, sc.kt, sc.vt, sc.tiles,
                                 rule.scale, rule.mask, rule.head, rule.qpos0, rule.drop, rule.site);
}

}  // namespace ctformer::kernels
