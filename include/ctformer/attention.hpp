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

// Query rows handled per block: causal blocks only compute keys up to the block's last query.
inline constexpr std::size_t attention_row_block = 16;

struct head_ref {
    std::size_t b, h, heads;
};

// q: (Tq, Dh) rows at stride ldq, positions qpos0.. ; kt: (Dh, S) at stride ldk; v: (S, Dh) at
// stride ldv -> out: (Tq, Dh) at stride ldo.
// out = softmax(q·kt · scale + mask) · v, per row; a row whose keys are all blocked gives zeros.
// scores: scratch of attention_row_block x S. Dropout (training) is applied to the probabilities.
template <class T, class Mask, class Drop>
inline void attend_head(std::size_t Tq, std::size_t S, std::size_t Dh, const T* q, std::size_t ldq, const T* kt,
                        std::size_t ldk, const T* v, std::size_t ldv, T* out, std::size_t ldo, T* scores, T scale,
                        const Mask& mask, head_ref hr, std::size_t qpos0, const Drop& drop,
                        dropout_site site) {
    constexpr std::size_t RB = attention_row_block;
    for (std::size_t i0 = 0; i0 < Tq; i0 += RB) {
        const std::size_t rows = Tq - i0 < RB ? Tq - i0 : RB;
        std::size_t kend_block = 0;  // keys this block needs: the largest key_end of its rows
        for (std::size_t r = 0; r < rows; ++r) {
            const std::size_t e = mask.key_end(hr.b, qpos0 + i0 + r, S);
            kend_block = e > kend_block ? e : kend_block;
        }
        // scores: (rows, kend_block) = q_block: (rows, Dh) · kt[:, :kend_block]: (Dh, kend_block)
        kernels::gemm(rows, kend_block, Dh, q + i0 * ldq, ldq, kt, ldk, scores, kend_block);
        for (std::size_t r = 0; r < rows; ++r) {
            const std::size_t qpos = qpos0 + i0 + r;
            T* row = scores + r * kend_block;
            const std::size_t n = mask.key_end(hr.b, qpos, S);
            kernels::map_inplace(row, n, [scale](const auto& x) { return x * scale; });
            if constexpr (Mask::has_apply) mask.apply(mask_row{hr.b, hr.h, hr.heads, qpos}, row, n);
            for (std::size_t j = n; j < kend_block; ++j) row[j] = -std::numeric_limits<T>::infinity();
            kernels::softmax_inplace(row, kend_block);
            if constexpr (Drop::enabled)
                drop.apply(row, kend_block, site, (std::uint64_t{hr.b * hr.heads + hr.h} << 32) | qpos);
        }
        // out_block: (rows, Dh) = p: (rows, kend_block) · v[:kend_block]: (kend_block, Dh)
        kernels::gemm(rows, Dh, kend_block, scores, kend_block, v, ldv, out + i0 * ldo, ldo);
    }
}

// k: (S, Dh) rows at stride ldk -> kt: (Dh, S) at stride ldt.
template <class T>
inline void transpose_keys(std::size_t S, std::size_t Dh, const T* k, std::size_t ldk, T* kt, std::size_t ldt) {
    for (std::size_t j = 0; j < S; ++j)
        for (std::size_t d = 0; d < Dh; ++d) kt[d * ldt + j] = k[j * ldk + d];
}

}  // namespace ctformer
