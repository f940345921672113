// ctformer/kernels/attention_query.hpp — the two GEMVs of one query row's attention (a decoding
// step): scores along the cached keys, and the probability-weighted sum of the values. Head_dim
// is a compile-time constant so the accumulators stay in registers. The cache holds E: T, or bf16
// bits widened to float as they are loaded (ct::kv_cache<ct::bf16>).
#pragma once
#include <cstddef>

#include "../core/quant.hpp"
#include "../simd/simd.hpp"

namespace ctformer::kernels {
// scores: (R·W) = (q: (Dh) · kt: (Dh, R·W) at stride ldk) · scale, the scale applied once per
// vector of scores (as attend_head does). With one or two vectors, even and odd d go to separate
// accumulators so that at least four FMA chains overlap.
template <std::size_t Dh, std::size_t R, class T, class E>
inline void query_score_block(const T* q, const E* kt, std::size_t ldk, T scale, T* scores) {
    constexpr std::size_t W = simd::width<T>, P = R <= 2 ? 2 : 1;
    using vt = simd::vec<T>;
    vt acc[P][R];
    for (std::size_t ph = 0; ph < P; ++ph)
        for (std::size_t u = 0; u < R; ++u) acc[ph][u] = vt(T(0));
    std::size_t d = 0;
    for (const E* col = kt; d + P <= Dh; d += P, col += P * ldk)
#pragma GCC unroll 2
        for (std::size_t ph = 0; ph < P; ++ph) {
            const vt qd(q[d + ph]);
#pragma GCC unroll 4
            for (std::size_t u = 0; u < R; ++u) acc[ph][u] = simd::fma<T>(qd, simd::load_as<T>(col + ph * ldk + u * W), acc[ph][u]);
        }
    if constexpr (P > 1 && Dh % P != 0)
        for (std::size_t u = 0; u < R; ++u)
            acc[0][u] = simd::fma<T>(vt(q[Dh - 1]), simd::load_as<T>(kt + (Dh - 1) * ldk + u * W), acc[0][u]);
    const vt sv(scale);
    for (std::size_t u = 0; u < R; ++u) {
        if constexpr (P > 1) acc[0][u] += acc[1][u];
        simd::store(scores + u * W, acc[0][u] * sv);
    }
}

// scores: (n) = (q: (Dh) · kt: (Dh, n) at stride ldk) · scale, vectorized along the keys. Whole
// vectors are read past n while they stay inside the row (avail: columns left in it); those extra
// scores are never used.
template <std::size_t Dh, class T, class E>
constexpr void query_scores(std::size_t n, std::size_t avail, const T* q, const E* kt, std::size_t ldk, T scale,
                            T* scores) {
    constexpr std::size_t W = simd::width<T>;
    const std::size_t up = simd::whole_vectors<T>(n);
    std::size_t vend = up <= avail ? up : n - n % W;
    if (simd::constant_evaluated()) vend = 0;  // (an if: see simd::vector_part)
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
        for (std::size_t d = 0; d < Dh; ++d) s += q[d] * from_cache<T>(kt[d * ldk + j]);
        scores[j] = s * scale;
    }
}

// out: (Dh) = out · correction + p: (n) · v: (n, Dh) at stride ldv. Dh is split into blocks of up
// to 8 vectors kept in registers; with few vectors per block, even and odd keys go to separate
// accumulators so the FMA chains overlap.
template <std::size_t Dh, class T, class E>
constexpr void query_values(std::size_t n, const T* p, const E* v, std::size_t ldv, T correction, T* out) {
    constexpr std::size_t W = simd::width<T>, NV = Dh / W, BV = NV < 8 ? NV : 8, P = BV <= 4 ? 2 : 1;
    using vt = simd::vec<T>;
    std::size_t vector_cols = NV * W;
    if (simd::constant_evaluated()) vector_cols = 0;  // (an if: see simd::vector_part)
    if constexpr (BV > 0) if (vector_cols) {
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
                    const E* vj = v + (j + ph) * ldv + d0;
#pragma GCC unroll 8
                    for (std::size_t u = 0; u < BV; ++u) acc[ph][u] = simd::fma<T>(pj, simd::load_as<T>(vj + u * W), acc[ph][u]);
                }
            for (; j < n; ++j)
                for (std::size_t u = 0; u < BV; ++u)
                    acc[0][u] = simd::fma<T>(vt(p[j]), simd::load_as<T>(v + j * ldv + d0 + u * W), acc[0][u]);
            for (std::size_t u = 0; u < BV; ++u) {
                if constexpr (P > 1) acc[0][u] += acc[1][u];
                simd::store(out + d0 + u * W, acc[0][u]);
            }
        }
        // the vectors left when NV is not a multiple of 8
        for (std::size_t d = NV / BV * BV * W; d < NV * W; d += W) {
            vt acc = simd::load(out + d) * vt(correction);
            for (std::size_t j = 0; j < n; ++j) acc = simd::fma<T>(vt(p[j]), simd::load_as<T>(v + j * ldv + d), acc);
            simd::store(out + d, acc);
        }
    }
    for (std::size_t d = vector_cols; d < Dh; ++d) {  // columns past the last whole vector
        T acc = out[d] * correction;
        for (std::size_t j = 0; j < n; ++j) acc = simd::sfma(p[j], from_cache<T>(v[j * ldv + d]), acc);
        out[d] = acc;
    }
}

}  // namespace ctformer::kernels
