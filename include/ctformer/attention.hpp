// ctformer/attention.hpp — scaled dot-product attention for one (batch row, head), shared by the
// full forward and the cached step. Keys are read pre-transposed (kt: (Dh, S)) so scores are a
// GEMM vectorized along the keys; a step with one query row is then a GEMV over the cache.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>

#include "dropout.hpp"
#include "kernels/gemm.hpp"
#include "kernels/softmax.hpp"
#include "masks.hpp"

namespace ctformer {

// Query rows per block, and keys per tile: attention runs over (16 x 64) score tiles with an online
// softmax, so its scratch does not grow with the sequence and causal tiles past a block's last
// query are never computed.
inline constexpr std::size_t attention_row_block = 16;
inline constexpr std::size_t attention_key_tile = 64;

struct head_ref {
    std::size_t b, h, heads;
};

// q: (Tq, Dh) rows at stride ldq, positions qpos0.. ; kt: (Dh, S) at stride ldk; v: (S, Dh) at
// stride ldv -> out: (Tq, Dh) at stride ldo.
// out = softmax(q·kt · scale + mask) · v, per row; a row whose keys are all blocked gives zeros.
// Scratch: scores (attention_row_block x attention_key_tile).
// Dropout (training) is applied to the probabilities (dropping before normalizing is the same).
template <class T, class Mask, class Drop>
inline void attend_head(std::size_t Tq, std::size_t S, std::size_t Dh, const T* q, std::size_t ldq, const T* kt,
                        std::size_t ldk, const T* v, std::size_t ldv, T* out, std::size_t ldo, T* scores,
                        T scale, const Mask& mask, head_ref hr, std::size_t qpos0, const Drop& drop,
                        dropout_site site) {
    constexpr std::size_t RB = attention_row_block, KT = attention_key_tile, W = simd::width<T>;
    static_assert(KT % W == 0, "ctformer: the key tile must be a whole number of vectors");
    for (std::size_t i0 = 0; i0 < Tq; i0 += RB) {
        const std::size_t rows = Tq - i0 < RB ? Tq - i0 : RB;
        std::size_t kend[RB], kend_block = 0;  // keys each row / the block needs
        T m[RB], l[RB];
        for (std::size_t r = 0; r < rows; ++r) {
            kend[r] = mask.key_end(hr.b, qpos0 + i0 + r, S);
            kend_block = kend[r] > kend_block ? kend[r] : kend_block;
            m[r] = -std::numeric_limits<T>::infinity();
            l[r] = T(0);
            for (std::size_t d = 0; d < Dh; ++d) out[(i0 + r) * ldo + d] = T(0);
        }
        for (std::size_t j0 = 0; j0 < kend_block; j0 += KT) {
            const std::size_t n = kend_block - j0 < KT ? kend_block - j0 : KT;
            // score rows are padded to whole vectors with blocked scores: the softmax then has no
            // scalar tail (a scalar exp costs as much as a vector one)
            const std::size_t ld = simd::whole_vectors<T>(n);
            // scores: (rows, n) at stride ld = q_block: (rows, Dh) · kt[:, j0:j0+n]: (Dh, n), then · scale
            // (a separate pass: a second GEMM instantiation with the scale in its epilogue got inlined
            // here and ran 25% slower at head_dim 64)
            kernels::gemm(rows, n, Dh, q + i0 * ldq, ldq, kt + j0, ldk, scores, ld);
            for (std::size_t r = 0; r < rows; ++r) {
                const std::size_t qpos = qpos0 + i0 + r;
                T* row = scores + r * ld;
                const std::size_t valid = kend[r] > j0 ? (kend[r] - j0 < n ? kend[r] - j0 : n) : 0;
                kernels::map_inplace(row, n, [scale](const auto& x) { return x * scale; });
                if constexpr (Mask::has_apply) mask.apply(mask_row{hr.b, hr.h, hr.heads, qpos}, row, j0, valid);
                kernels::block_tail(row, valid, ld);
                const T correction = kernels::online_softmax_tile(row, ld, m[r], l[r]);
                if (correction != T(1) && j0 > 0)  // before the first tile out is still zero
                    kernels::map_inplace(out + (i0 + r) * ldo, Dh, [correction](const auto& x) { return x * correction; });
                if constexpr (Drop::enabled)
                    drop.apply(row, n, site, (std::uint64_t{hr.b * hr.heads + hr.h} << 32) | qpos, j0);
            }
            // out_block += p: (rows, n) · v[j0:j0+n]: (n, Dh), accumulated in the GEMM's epilogue
            kernels::gemm(rows, Dh, n, scores, ld, v + j0 * ldv, ldv, out + i0 * ldo, ldo, static_cast<const T*>(nullptr),
                          kernels::identity_op{}, static_cast<T*>(nullptr), true);
        }
        for (std::size_t r = 0; r < rows; ++r) {  // normalize; fully blocked rows stay zero
            const T inv = l[r] > T(0) ? T(1) / l[r] : T(0);
            kernels::map_inplace(out + (i0 + r) * ldo, Dh, [inv](const auto& x) { return x * inv; });
        }
    }
}

namespace detail {
// scores: (R·W) = (q: (Dh) · kt: (Dh, R·W) at stride ldk) · scale, the scale applied once per
// vector of scores (as attend_head does). With one or two vectors, even and odd d go to separate
// accumulators so that at least four FMA chains overlap.
template <std::size_t Dh, std::size_t R, class T>
inline void query_score_block(const T* q, const T* kt, std::size_t ldk, T scale, T* scores) {
    constexpr std::size_t W = simd::width<T>, P = R <= 2 ? 2 : 1;
    using vt = simd::vec<T>;
    vt acc[P][R];
    for (std::size_t ph = 0; ph < P; ++ph)
        for (std::size_t u = 0; u < R; ++u) acc[ph][u] = vt(T(0));
    std::size_t d = 0;
    for (const T* col = kt; d + P <= Dh; d += P, col += P * ldk)
#pragma GCC unroll 2
        for (std::size_t ph = 0; ph < P; ++ph) {
            const vt qd(q[d + ph]);
#pragma GCC unroll 4
            for (std::size_t u = 0; u < R; ++u) acc[ph][u] = simd::fma<T>(qd, simd::load(col + ph * ldk + u * W), acc[ph][u]);
        }
    if constexpr (P > 1 && Dh % P != 0)
        for (std::size_t u = 0; u < R; ++u)
            acc[0][u] = simd::fma<T>(vt(q[Dh - 1]), simd::load(kt + (Dh - 1) * ldk + u * W), acc[0][u]);
    const vt sv(scale);
    for (std::size_t u = 0; u < R; ++u) {
        if constexpr (P > 1) acc[0][u] += acc[1][u];
        simd::store(scores + u * W, acc[0][u] * sv);
    }
}

// scores: (n) = (q: (Dh) · kt: (Dh, n) at stride ldk) · scale, vectorized along the keys. Whole
// vectors are read past n while they stay inside the row (avail: columns left in it); those extra
// scores are never used.
template <std::size_t Dh, class T>
inline void query_scores(std::size_t n, std::size_t avail, const T* q, const T* kt, std::size_t ldk, T scale,
                         T* scores) {
    constexpr std::size_t W = simd::width<T>;
    const std::size_t up = simd::whole_vectors<T>(n), vend = up <= avail ? up : n - n % W;
    std::size_t j = 0;
    for (; j + 4 * W <= vend; j += 4 * W) query_score_block<Dh, 4>(q, kt + j, ldk, scale, scores + j);
    switch ((vend - j) / W) {
        case 3: query_score_block<Dh, 3>(q, kt + j, ldk, scale, scores + j); break;
        case 2: query_score_block<Dh, 2>(q, kt + j, ldk, scale, scores + j); break;
        case 1: query_score_block<Dh, 1>(q, kt + j, ldk, scale, scores + j); break;
        default: break;
    }
    for (j = vend; j < n; ++j) {
        T s = T(0);
        for (std::size_t d = 0; d < Dh; ++d) s += q[d] * kt[d * ldk + j];
        scores[j] = s * scale;
    }
}

// out: (Dh) = out · correction + p: (n) · v: (n, Dh) at stride ldv. Dh is split into blocks of up
// to 8 vectors kept in registers; with few vectors per block, even and odd keys go to separate
// accumulators so the FMA chains overlap.
template <std::size_t Dh, class T>
inline void query_values(std::size_t n, const T* p, const T* v, std::size_t ldv, T correction, T* out) {
    constexpr std::size_t W = simd::width<T>, NV = Dh / W, BV = NV < 8 ? NV : 8, P = BV <= 4 ? 2 : 1;
    using vt = simd::vec<T>;
    if constexpr (BV > 0) {
        for (std::size_t d0 = 0; d0 + BV * W <= NV * W; d0 += BV * W) {
            vt acc[P][BV];
            for (std::size_t u = 0; u < BV; ++u) {
                acc[0][u] = simd::load(out + d0 + u * W) * vt(correction);
                if constexpr (P > 1) acc[1][u] = vt(T(0));
            }
            std::size_t j = 0;
            for (; j + P <= n; j += P)
#pragma GCC unroll 2
                for (std::size_t ph = 0; ph < P; ++ph) {
                    const vt pj(p[j + ph]);
                    const T* vj = v + (j + ph) * ldv + d0;
#pragma GCC unroll 8
                    for (std::size_t u = 0; u < BV; ++u) acc[ph][u] = simd::fma<T>(pj, simd::load(vj + u * W), acc[ph][u]);
                }
            for (; j < n; ++j)
                for (std::size_t u = 0; u < BV; ++u)
                    acc[0][u] = simd::fma<T>(vt(p[j]), simd::load(v + j * ldv + d0 + u * W), acc[0][u]);
            for (std::size_t u = 0; u < BV; ++u) {
                if constexpr (P > 1) acc[0][u] += acc[1][u];
                simd::store(out + d0 + u * W, acc[0][u]);
            }
        }
        // the vectors left when NV is not a multiple of 8
        for (std::size_t d = NV / BV * BV * W; d < NV * W; d += W) {
            vt acc = simd::load(out + d) * vt(correction);
            for (std::size_t j = 0; j < n; ++j) acc = simd::fma<T>(vt(p[j]), simd::load(v + j * ldv + d), acc);
            simd::store(out + d, acc);
        }
    }
    for (std::size_t d = NV * W; d < Dh; ++d) {  // columns past the last whole vector
        T acc = out[d] * correction;
        for (std::size_t j = 0; j < n; ++j) acc += p[j] * v[j * ldv + d];
        out[d] = acc;
    }
}
}  // namespace detail

// One query row (a decoding step): q: (Dh) at position qpos, kt: (Dh, S) at stride ldk, v: (S, Dh)
// at stride ldv -> out: (Dh). Same result as attend_head with Tq = 1, without its per-block
// bookkeeping: the row's scores fill the whole scratch (tile keys per pass, online softmax across
// passes), so a step costs one GEMV along the keys, one softmax and one GEMV along the values.
template <std::size_t Dh, class T, class Mask, class Drop>
inline void attend_query(std::size_t S, const T* q, const T* kt, std::size_t ldk, const T* v, std::size_t ldv, T* out,
                         T* scores, std::size_t tile, T scale, const Mask& mask, head_ref hr, std::size_t qpos,
                         const Drop& drop, dropout_site site) {
    const std::size_t kend = mask.key_end(hr.b, qpos, S);
    T m = -std::numeric_limits<T>::infinity(), l = T(0);
    for (std::size_t d = 0; d < Dh; ++d) out[d] = T(0);
    for (std::size_t j0 = 0; j0 < kend; j0 += tile) {
        const std::size_t n = kend - j0 < tile ? kend - j0 : tile;
        detail::query_scores<Dh>(n, ldk - j0, q, kt + j0, ldk, scale, scores);
        if constexpr (Mask::has_apply) mask.apply(mask_row{hr.b, hr.h, hr.heads, qpos}, scores, j0, n);
        // pad to a whole vector of blocked scores when the scratch has room: no scalar exp tail
        const std::size_t up = simd::whole_vectors<T>(n), ns = up <= tile ? up : n;
        kernels::block_tail(scores, n, ns);
        const T correction = kernels::online_softmax_tile(scores, ns, m, l);
        if constexpr (Drop::enabled)
            drop.apply(scores, n, site, (std::uint64_t{hr.b * hr.heads + hr.h} << 32) | qpos, j0);
        detail::query_values<Dh>(n, scores, v + j0 * ldv, ldv, correction, out);
    }
    const T inv = l > T(0) ? T(1) / l : T(0);  // fully blocked rows stay zero
    kernels::map_inplace(out, Dh, [inv](const auto& x) { return x * inv; });
}

// attend_head, or attend_query when there is one query row.
template <std::size_t Dh, class T, class Mask, class Drop>
inline void attend(std::size_t Tq, std::size_t S, const T* q, std::size_t ldq, const T* kt, std::size_t ldk, const T* v,
                   std::size_t ldv, T* out, std::size_t ldo, T* scores, T scale, const Mask& mask, head_ref hr,
                   std::size_t qpos0, const Drop& drop, dropout_site site) {
    if (Tq == 1)
        attend_query<Dh>(S, q, kt, ldk, v, ldv, out, scores, attention_row_block * attention_key_tile, scale, mask, hr,
                         qpos0, drop, site);
    else
        attend_head(Tq, S, Dh, q, ldq, kt, ldk, v, ldv, out, ldo, scores, scale, mask, hr, qpos0, drop, site);
}

// k: (S, Dh) rows at stride ldk -> kt: (Dh, S) at stride ldt.
template <class T>
inline void transpose_keys(std::size_t S, std::size_t Dh, const T* k, std::size_t ldk, T* kt, std::size_t ldt) {
    for (std::size_t j = 0; j < S; ++j)
        for (std::size_t d = 0; d < Dh; ++d) kt[d * ldt + j] = k[j * ldk + d];
}

}  // namespace ctformer
