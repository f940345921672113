// ctformer/kernels/gemm_train.hpp — the backward pass's two GEMM shapes over weights in panel
// layout (kernels/gemm.hpp's tiles and packing): a weight's gradient dWᵀ += Xᵀ·dY
// (gemm_tn_panels), an input's gradient dX = dY·W (gemm_nt_panels), and a bias's gradient, the
// column sums of dY. Parallel parts as the forward's: cut by core/schedule.hpp.
#pragma once
#include <cstddef>

#include "../core/schedule.hpp"
#include "elementwise.hpp"
#include "gemm.hpp"

namespace ctformer::kernels {

// ---- The backward pass's two GEMM shapes (training) ----

// Rows for which gemm_nt_panels computes cᵀ = P · aᵀ instead: one or two vectors of them. dX =
// dY · W reads the weight's panels transposed, and the packed path transposes every (NR x NR)
// block once per call, whatever M: at M = 16 on AVX-512 that costs as much as a third of the
// FMAs (`BM_gemm_nt/16/64/256` 64% of the peak). Transposed, the panels are a row-major a
// (N x NR, one panel per K block) read in place, and only the few rows of a and c are
// transposed, through the scratch. Only at those row counts does it pay (measurements:
// scripts/performance_log.md, "GEMM: few-row input gradients").
template <class T> constexpr bool nt_few_rows(std::size_t M) {
    constexpr std::size_t W = simd::width<T>;
    return !gemm_tile<T>::compact && (M == W || M == 2 * W);
}
// Scratch of that path for gemm_nt_panels of `rows` rows (aᵀ: (K, rows), cᵀ: (N, rows)).
template <class T> constexpr std::size_t nt_few_rows_elems(std::size_t rows, std::size_t max_k, std::size_t max_in) {
    return nt_few_rows<T>(rows) ? (max_k + max_in) * rows : 0;
}

// Scratch of gemm_tn_panels / gemm_nt_panels: gemm_nt_panels of at most max_rows rows, inner
// dimension at most max_k and width at most max_in; gemm_tn_panels over at most max_rows rows
// (its inner dimension) for weights of at most max_in inputs (its M, packed tn_block_rows at a
// time). nt_rows: the row count of every gemm_nt_panels the scratch serves, where known (0: any
// count up to max_rows).
template <class T>
constexpr std::size_t gemm_train_pack_elems(std::size_t max_rows, std::size_t max_k, std::size_t max_in,
                                            std::size_t nt_rows = 0) {
    using tile = gemm_tile<T>;
    constexpr std::size_t W = simd::width<T>;
    const std::size_t nt = detail::pack_block_elems<T>(max_rows, max_k);
    constexpr std::size_t step = detail::tn_row_step, block = detail::tn_a_block_bytes / sizeof(T);
    const std::size_t kc = max_rows < tile::KC ? max_rows : tile::KC, in = (max_in + step - 1) / step * step;
    const std::size_t budget = block > step * kc ? block : step * kc;  // tn_block_rows(kc) · kc at most
    const std::size_t tn = kc * tile::NR + (in * kc < budget ? in * kc : budget);
    // (rows unknown: the larger few-row count that max_rows admits)
    const std::size_t rows = nt_rows ? nt_rows : max_rows >= 2 * W ? 2 * W : max_rows >= W ? W : 0;
    const std::size_t few = nt_few_rows_elems<T>(rows, max_k, max_in), most = nt > tn ? nt : tn;
    return most > few ? most : few;
}

// A weight's gradient: c: (M, N) in panel layout += aᵀ · b, a: (K, M) row-major at lda (the
// layer's input rows X), b: (K, N) row-major at ldb (the output gradient dY). With M = In, N = Out
// this is dWᵀ += Xᵀ · dY, stored exactly like the weight (PackedWeight's panels).
template <class T>
inline void gemm_tn_panels(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* b,
                           std::size_t ldb, T* c_panels, T* pack) {
    if (M == 0 || N == 0 || K == 0) return;
    constexpr auto tn = [](auto&&... args) {
        detail::gemm_packed<T, detail::a_layout::cols, detail::b_layout::rows, detail::c_layout::panels>(args...);
    };
    // Parts of the rows of c (the weight's inputs), each packing only its rows of a; b is packed
    // once per block of rows either way (tn_block_rows).
    constexpr std::size_t step = detail::tn_row_step;
    const auto part = [&](std::size_t g0, std::size_t g1) {  // on another thread: its own scratch
        alignas(64) T task_pack[detail::tn_task_pack_elems<T>];
        const std::size_t m0 = g0 * step, m1 = g1 * step < M ? g1 * step : M;
        tn(m1 - m0, N, K, a + m0, lda, b, ldb, c_panels + m0 * gemm_tile<T>::NR, M, static_cast<const T*>(nullptr),
           identity_op{}, +task_pack, true, std::size_t(0), N);
    };
    if (!schedule::split_grad_rows(M, N, K, step, part))
        tn(M, N, K, a, lda, b, ldb, c_panels, std::size_t(0), static_cast<const T*>(nullptr), identity_op{}, pack, true,
           std::size_t(0), N);
}

// An input's gradient: c: (M, N) (+)= a: (M, K) · Pᵀ, P: (N, K) in panel layout (a weight stored
// as Wᵀ panels, so Pᵀ = W: this is dX = dY · W).
// Pack: gemm_train_pack_elems<T>(M, K, N) elements at least.
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T>
inline void gemm_nt_panels(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* p_panels,
                           T* c, std::size_t ldc, T* pack, bool accumulate) {
    if (M == 0 || N == 0) return;
    if (nt_few_rows<T>(M) && K > 0) {  // cᵀ: (N, M) (+)= P: (N, K) · aᵀ: (K, M), panel by panel of P
        constexpr std::size_t NR = gemm_tile<T>::NR;
        T* const at = pack;          // aᵀ: (K, M)
        T* const ct = pack + K * M;  // cᵀ: (N, M)
        transpose(M, K, a, lda, at, M);
        if (accumulate) transpose(M, N, c, ldc, ct, M);
        for (std::size_t k0 = 0; k0 < K; k0 += NR)  // P's columns k0.. : a (N, NR) row-major block
            detail::gemm_in_place<detail::a_layout::rows>(N, M, K - k0 < NR ? K - k0 : NR, p_panels + k0 * N, NR,
                                                          at + k0 * M, M, ct, M, static_cast<const T*>(nullptr),
                                                          identity_op{}, accumulate || k0 > 0);
        transpose(N, M, ct, M, c, ldc);
        return;
    }
    constexpr auto nt = [](auto&&... args) {
        detail::gemm_packed<T, detail::a_layout::rows, detail::b_layout::panels_t, detail::c_layout::rows>(args...);
    };
    const auto part = [&](std::size_t n0, std::size_t nc) {  // columns n0..: another thread's scratch, a's rows in blocks
        // (b is always packed here: compact kernels too)
        alignas(64) T task_pack[detail::pack_block_elems<T>(detail::task_rows, gemm_tile<T>::KC)];
        const std::size_t mb = detail::packs_a<T, detail::a_layout::rows>(M, K < gemm_tile<T>::KC ? K : gemm_tile<T>::KC, lda)
                                   ? detail::task_rows : M;
        for (std::size_t m0 = 0; m0 < M; m0 += mb)
            nt(M - m0 < mb ? M - m0 : mb, N, K, a + m0 * lda, lda, p_panels, std::size_t(0), c + m0 * ldc, ldc,
               static_cast<const T*>(nullptr), identity_op{}, +task_pack, accumulate, n0, n0 + nc);
    };
    if (!detail::split_panels<T>(M, N, K, part))
        nt(M, N, K, a, lda, p_panels, std::size_t(0), c, ldc, static_cast<const T*>(nullptr), identity_op{}, pack, accumulate,
           std::size_t(0), N);
}

// Column sums: acc: (N) += Σ_r x[r, :] (x: (rows, N) at ldx): a bias's gradient. Columns in
// 16-wide blocks over the current executor: each column adds its rows in order, whatever the split.
template <class T> inline void add_column_sums(T* acc, const T* x, std::size_t rows, std::size_t N, std::size_t ldx) {
    schedule::split_columns(rows, N, [&](std::size_t c0, std::size_t c1) {
        for (std::size_t r = 0; r < rows; ++r) add_inplace(acc + c0, x + r * ldx + c0, c1 - c0);
    });
}

}  // namespace ctformer::kernels
