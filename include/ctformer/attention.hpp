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
    constexpr std::size_t RB = attention_row_block, KT = attention_key_tile;
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    for (std::size_t i0 = 0; i0 < Tq; i0 += RB) {
        const std::size_t rows = Tq - i0 < RB ? Tq - i0 : RB;
        std::size_t kend[RB], kend_block = 0;  // keys each row / the block needs
        T m[RB], l[RB];
        for (std::size_t r = 0; r < rows; ++r) {
            kend[r] = mask.key_end(hr.b, qpos0 + i0 + r, S);
            kend_block = kend[r] > kend_block ? kend[r] : kend_block;
            m[r] = neg_inf;
            l[r] = T(0);
            for (std::size_t d = 0; d < Dh; ++d) out[(i0 + r) * ldo + d] = T(0);
        }
        for (std::size_t j0 = 0; j0 < kend_block; j0 += KT) {
            const std::size_t n = kend_block - j0 < KT ? kend_block - j0 : KT;
            // scores: (rows, n) = q_block: (rows, Dh) · kt[:, j0:j0+n]: (Dh, n)
            kernels::gemm(rows, n, Dh, q + i0 * ldq, ldq, kt + j0, ldk, scores, n);
            for (std::size_t r = 0; r < rows; ++r) {
                const std::size_t qpos = qpos0 + i0 + r;
                T* row = scores + r * n;
                const std::size_t valid = kend[r] > j0 ? (kend[r] - j0 < n ? kend[r] - j0 : n) : 0;
                kernels::map_inplace(row, valid, [scale](const auto& x) { return x * scale; });
                if constexpr (Mask::has_apply) mask.apply(mask_row{hr.b, hr.h, hr.heads, qpos}, row, j0, valid);
                for (std::size_t j = valid; j < n; ++j) row[j] = neg_inf;
                const T correction = kernels::online_softmax_tile(row, n, m[r], l[r]);
                if (correction != T(1))
                    kernels::map_inplace(out + (i0 + r) * ldo, Dh, [correction](const auto& x) { return x * correction; });
                if constexpr (Drop::enabled)
                    drop.apply(row, n, site, (std::uint64_t{hr.b * hr.heads + hr.h} << 32) | qpos, j0);
            }
            // out_block += p: (rows, n) · v[j0:j0+n]: (n, Dh), accumulated in the GEMM's epilogue
            kernels::gemm(rows, Dh, n, scores, n, v + j0 * ldv, ldv, out + i0 * ldo, ldo, static_cast<const T*>(nullptr),
                          kernels::identity_op{}, static_cast<T*>(nullptr), true);
        }
        for (std::size_t r = 0; r < rows; ++r) {  // normalize; fully blocked rows stay zero
            const T inv = l[r] > T(0) ? T(1) / l[r] : T(0);
            kernels::map_inplace(out + (i0 + r) * ldo, Dh, [inv](const auto& x) { return x * inv; });
        }
    }
}

// k: (S, Dh) rows at stride ldk -> kt: (Dh, S) at stride ldt.
template <class T>
inline void transpose_keys(std::size_t S, std::size_t Dh, const T* k, std::size_t ldk, T* kt, std::size_t ldt) {
    for (std::size_t j = 0; j < S; ++j)
        for (std::size_t d = 0; d < Dh; ++d) kt[d * ldt + j] = k[j * ldk + d];
}

}  // namespace ctformer
