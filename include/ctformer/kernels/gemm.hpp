// ctformer/kernels/gemm.hpp — the GEMM every module uses.
//
//   c: (M, N) = a: (M, K) · b: (K, N) [+ bias: (N)] then act elementwise.
//
// The micro-kernel broadcasts one a[m, k] and multiplies it with contiguous vectors of b's row k.
// The register tile (MR rows x NV vectors, panels.hpp) is chosen at compile time from the vector
// width; K is blocked: by KC where an operand is packed (the scratch holds a block), by the longer
// KC_in_place where none is (c's tile is then loaded and stored once per block, b's block in L2).
// Two entry points: gemm (b row-major at a stride: attention's keys and values) and gemm_panels
// (b already in panel layout: the weights, packed once at load time).
#pragma once
#include <cstddef>
#include <cstring>
#include <utility>

#include "elementwise.hpp"
#include "../core/schedule.hpp"
#include "../core/panels.hpp"

namespace ctformer::kernels {

// Rows at or below which gemm streams b as a GEMV instead of tiling.
inline constexpr std::size_t small_m_rows = 4;

namespace detail {

#if CTFORMER_XSIMD
#define CTFORMER_UNROLL_K _Pragma("GCC unroll 2")
#else
#define CTFORMER_UNROLL_K
#endif

// GCC's -Warray-bounds inspects every compile-time tile height even where the runtime row count
// rules it out (e.g. a 3-row tensor and the 6-row tile); the row dispatch below never reads past
// `rows`. Silenced here only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif

// How a is laid out: rows: row-major (M, K) at lda; cols: transposed, stored (K, M) at lda (a
// weight gradient's Xᵀ, attention's keys read from kᵀ and probabilities from their transposed
// tile); packed: a block packed by pack_a (k-major, MR rows per k; the micro-kernel's input only).
enum class a_layout { rows, cols, packed };
// a[r, k] is at a[r * a_row_stride + k * a_k_stride].
template <class T, a_layout AL> constexpr std::size_t a_row_stride(std::size_t lda) { return AL == a_layout::rows ? lda : 1; }
template <class T, a_layout AL> constexpr std::size_t a_k_stride(std::size_t lda) {
    return AL == a_layout::rows ? 1 : AL == a_layout::packed ? gemm_tile<T>::MR : lda;
}

// One register tile: c[0..R, 0..V*W) (+)= a[0..R, k0..k1) · b[k0..k1, 0..V*W).
// from_c: start from c's values instead of zero (a later K block, or a residual already in c);
// bias (null for none) is added at the start (the activation: micro_rows, after the tile).
// a in layout AL; PackedB: b is a panel (k-major, NR columns per k), else row-major at ldb.
// Packed strides are compile-time constants. One tile per row count and layout, never inlined:
// callers inlining their own copies, one per activation, were most of a translation unit's code.
template <class T, std::size_t R, std::size_t V, a_layout AL, bool PackedB>
[[gnu::noinline]] inline void micro_tile(std::size_t kc, const T* a, std::size_t lda_, const T* b, std::size_t ldb_, T* c,
                                         std::size_t ldc, const T* bias, bool from_c) {
    constexpr std::size_t W = simd::width<T>;
    using vt = simd::vec<T>;
    const std::size_t a_row = a_row_stride<T, AL>(lda_), a_k = a_k_stride<T, AL>(lda_),
                      ldb = PackedB ? gemm_tile<T>::NR : ldb_;
    // The accumulators must stay in registers: the r/v loops are unrolled explicitly because
    // GCC's -O2 does not fully unroll them.
    vt acc[R][V];
#pragma GCC unroll 16
    for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (std::size_t v = 0; v < V; ++v) {
            const vt init = from_c ? simd::load(c + r * ldc + v * W) : vt(T(0));
            acc[r][v] = bias ? init + simd::load(bias + v * W) : init;
        }
    // Two k steps per loop trip halve the loop overhead (measured +12% on the tiny layer's GEMMs);
    // the scalar build keeps one (code size).
    CTFORMER_UNROLL_K
    for (std::size_t k = 0; k < kc; ++k) {
        vt bv[V];
#pragma GCC unroll 4
        for (std::size_t v = 0; v < V; ++v) bv[v] = simd::load(b + k * ldb + v * W);
#pragma GCC unroll 16
        for (std::size_t r = 0; r < R; ++r) {
            const vt ar(a[r * a_row + k * a_k]);
#pragma GCC unroll 4
            for (std::size_t v = 0; v < V; ++v) acc[r][v] = simd::fma<T>(ar, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 16
    for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (std::size_t v = 0; v < V; ++v)
            simd::store(c + r * ldc + v * W, acc[r][v]);
}

// Rows of the next register tile when `left` rows remain: MR, except that a remainder between MR
// and 2·MR is split evenly (16 rows on a 12-row tile: 8 + 8, not 12 + 4, whose 4-row tile has too
// few independent FMA chains to hide their latency). Only where a is read in place: a packed a
// block is laid out in whole MR-row tiles.
template <class T> constexpr std::size_t balanced_rows(std::size_t left) {
    constexpr std::size_t MR = gemm_tile<T>::MR;
    return left <= MR ? left : (left < 2 * MR ? (left + 1) / 2 : MR);
}

// Row tails: dispatch a runtime row count 1..MR to the compile-time tile (a fold, no recursion);
// last: then act over the tile's rows, still in L1. Compact kernels: a whole tile, or the rows one
// by one.
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, std::size_t V, a_layout AL, bool PackedB, class Act, std::size_t... Rs>
inline void micro_rows(std::size_t rows, std::index_sequence<Rs...>, std::size_t kc, const T* a, std::size_t lda,
                       const T* b, std::size_t ldb, T* c, std::size_t ldc, const T* bias, bool from_c, bool last,
                       const Act& act) {
    constexpr std::size_t MR = sizeof...(Rs), W = simd::width<T>;
    if constexpr (gemm_tile<T>::compact) {
        if (rows == MR) {
            micro_tile<T, MR, V, AL, PackedB>(kc, a, lda, b, ldb, c, ldc, bias, from_c);
        } else {
            for (std::size_t r = 0; r < rows; ++r)
                micro_tile<T, 1, V, AL, PackedB>(kc, a + r * a_row_stride<T, AL>(lda), lda, b, ldb, c + r * ldc, ldc,
                                                 bias, from_c);
        }
    } else {
        ((rows == Rs + 1 ? (micro_tile<T, Rs + 1, V, AL, PackedB>(kc, a, lda, b, ldb, c, ldc, bias, from_c), 0) : 0),
         ...);
    }
    if constexpr (!std::is_same_v<Act, identity_op>)
        for (std::size_t r = 0; last && r < rows; ++r)
            for (std::size_t v = 0; v < V; ++v)
                simd::store(c + r * ldc + v * W, apply_vec<T>(act, simd::load(c + r * ldc + v * W)));
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Columns narrower than one vector: plain scalar dot products. Also the scalar reference of every
// entry point, and all of them in a constant expression (xsimd is not constexpr). a in layout AL
// (rows or cols).
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <a_layout AL = a_layout::rows, class T, class Act>
constexpr void scalar_cols(std::size_t rows, std::size_t cols, std::size_t kc, const T* a, std::size_t lda, const T* b,
                        std::size_t ldb, T* c, std::size_t ldc, const T* bias, bool from_c, bool last,
                        const Act& act) {
    const std::size_t a_row = a_row_stride<T, AL>(lda), a_k = a_k_stride<T, AL>(lda);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < cols; ++j) {
            T s = from_c ? c[r * ldc + j] : T(0);
            if (bias) s += bias[j];
            for (std::size_t k = 0; k < kc; ++k) s += a[r * a_row + k * a_k] * b[k * ldb + j];
            c[r * ldc + j] = last ? static_cast<T>(act(s)) : s;
        }
}

// a (row-major) is read where it is unless its block (M x KC) exceeds a_unpacked_bytes and its
// row stride is a multiple of a_alias_bytes: then the MR rows a tile reads side by side map to one
// L1 set and evict each other. Elsewhere packing costs a pass over a per K block that the tiles
// do not pay back (scripts/performance_log.md, "GEMM: when a is packed").
inline constexpr std::size_t a_unpacked_bytes = 16 * 1024, a_alias_bytes = 4096;
// Whether the packed path packs a's (rows x kc) block (always when a is transposed; never on
// compact kernels, which have no caches to feed).
template <class T, a_layout AL> constexpr bool packs_a(std::size_t rows, std::size_t kc, std::size_t lda) {
    return AL == a_layout::cols || (!gemm_tile<T>::compact && rows * kc * sizeof(T) > a_unpacked_bytes &&
                                    lda * sizeof(T) % a_alias_bytes == 0);
}

// Few rows (a decoding step, a GEMV): stream b's rows front to back, four at a time, and
// accumulate the M <= small_m_rows output rows in c (which stays in L1). Reading b contiguously is
// what bounds a step: its weights come from L2/L3 once per token.
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, class Act>
inline void gemm_small_m(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* b,
                         std::size_t ldb, T* c, std::size_t ldc, const T* bias, const Act& act, bool accumulate) {
    constexpr std::size_t W = simd::width<T>, KB = 8;  // rows of b per pass over c
    using vt = simd::vec<T>;
    const std::size_t nv = N - N % W, kb_end = K - K % KB;
    for (std::size_t m = 0; m < M; ++m)
        for (std::size_t j = 0; j < N; ++j) c[m * ldc + j] = (accumulate ? c[m * ldc + j] : T(0)) + (bias ? bias[j] : T(0));
    for (std::size_t k = 0; k < kb_end; k += KB) {
        const T* bk = b + k * ldb;
        for (std::size_t j = 0; j < nv; j += W) {
            vt v[KB];
#pragma GCC unroll 8
            for (std::size_t q = 0; q < KB; ++q) v[q] = simd::load(bk + q * ldb + j);
            for (std::size_t m = 0; m < M; ++m) {
                const T* am = a + m * lda + k;
                T* cm = c + m * ldc + j;
                vt acc = simd::load(cm);
#pragma GCC unroll 8
                for (std::size_t q = 0; q < KB; ++q) acc = simd::fma<T>(vt(am[q]), v[q], acc);
                simd::store(cm, acc);
            }
        }
        for (std::size_t j = nv; j < N; ++j)
            for (std::size_t m = 0; m < M; ++m)
                for (std::size_t q = 0; q < KB; ++q) c[m * ldc + j] += a[m * lda + k + q] * bk[q * ldb + j];
    }
    for (std::size_t k = kb_end; k < K; ++k) {
        const T* bk = b + k * ldb;
        for (std::size_t m = 0; m < M; ++m) {
            const vt am(a[m * lda + k]);
            T* cm = c + m * ldc;
            for (std::size_t j = 0; j < nv; j += W) simd::store(cm + j, simd::fma<T>(am, simd::load(bk + j), simd::load(cm + j)));
            for (std::size_t j = nv; j < N; ++j) cm[j] += a[m * lda + k] * bk[j];
        }
    }
    if constexpr (!std::is_same_v<Act, identity_op>)
        for (std::size_t m = 0; m < M; ++m) map_inplace(c + m * ldc, N, act);
}

// Operand layouts of the packed path. b: row-major (K, N) at ldb; a weight in panel layout (K, N); or
// the transpose of a panel-layout (N, K) matrix (dX = dY · W with W stored as Wᵀ panels). c:
// row-major (M, N) at ldc, or panel layout (M, N) (a weight gradient stored like its weight).
enum class b_layout { rows, panels, panels_t };
enum class c_layout { rows, panels };

// Rows of a packed per pass when a is transposed (the weight-gradient GEMMs: M is a weight's
// input dimension, K the layer's rows): as many as fit tn_a_block_bytes, since every pass repacks
// all of b (the output gradient, whose rows lie far apart).
inline constexpr std::size_t tn_a_block_bytes = 192 * 1024, tn_row_step = 12;  // (12: every MR divides it)
template <class T> constexpr std::size_t tn_block_rows(std::size_t kc) {
    const std::size_t rows = tn_a_block_bytes / sizeof(T) / (kc ? kc : 1) / tn_row_step * tn_row_step;
    return rows < tn_row_step ? tn_row_step : rows;
}

// Software prefetch (into L2) for the packed path: weights and gradients come from L3 or DRAM in a
// layer (its operands do not fit L2), and each block's first row tile would otherwise wait on
// them. The lines of the block read next are requested a share per row tile of the current one;
// the next tile's c before a tile that reads it. Not on compact kernels (microcontrollers: no
// caches).
template <class T> inline void prefetch_l1(const T* p) { __builtin_prefetch(p, 0, 3); }
template <class T> inline void prefetch_l2(const T* p) { __builtin_prefetch(p, 0, 2); }
inline constexpr std::size_t line_bytes = 64, prefetch_min_bytes = 256 * 1024, forward_prefetch_min_bytes = 1024 * 1024;

// One (kc x NR) block of b, columns n0.., packed k-major with zero columns past N.
template <class T, b_layout BL>
inline void pack_b(std::size_t N, std::size_t k0, std::size_t kc, std::size_t n0, const T* b, std::size_t ldb, T* bp) {
    using tile = gemm_tile<T>;
    constexpr std::size_t W = tile::W, NV = tile::NV, NR = tile::NR;
    const std::size_t ncols = N - n0 < NR ? N - n0 : NR;
    if constexpr (BL == b_layout::rows) {
        const T* src = b + k0 * ldb + n0;
        if (ncols == NR) {
            for (std::size_t k = 0; k < kc; ++k)
#pragma GCC unroll 4
                for (std::size_t v = 0; v < NV; ++v) simd::store(bp + k * NR + v * W, simd::load(src + k * ldb + v * W));
        } else {
            for (std::size_t k = 0; k < kc; ++k)
                for (std::size_t j = 0; j < NR; ++j) bp[k * NR + j] = j < ncols ? src[k * ldb + j] : T(0);
        }
    } else {  // panels_t: b(k, n) = P(n, k), P (N, ·) in panel layout: its (NR x NR) blocks are
              // contiguous (rows n, columns k), so each is one small transpose read front to back
        for (std::size_t kb = 0; kb < kc; kb += NR) {
            const std::size_t kk = k0 + kb, kn = kc - kb < NR ? kc - kb : NR;
            const T* blk = b + ((kk / NR) * N + n0) * NR + kk % NR;
            T* dst = bp + kb * NR;
            // the next block lies N·NR elements on (another page): fetch it while this one is transposed
            if (kb + NR < kc)
                for (std::size_t i = 0; i < NR * NR; i += line_bytes / sizeof(T)) prefetch_l1(blk + N * NR + i);
            if (ncols == NR) {
                transpose(NR, kn, blk, NR, dst, NR);
            } else {
                for (std::size_t t = 0; t < kn; ++t)
                    for (std::size_t j = 0; j < NR; ++j) dst[t * NR + j] = j < ncols ? blk[j * NR + t] : T(0);
            }
        }
    }
}

// a rows m0.. of the (mc x kc) block at k0, packed k-major in tiles of MR rows (zero rows past M).
template <class T, a_layout AL>
inline void pack_a(std::size_t M, std::size_t m0, std::size_t k0, std::size_t kc, const T* a, std::size_t lda, T* ap) {
    constexpr std::size_t MR = gemm_tile<T>::MR;
    if constexpr (AL == a_layout::rows) {
        std::size_t k = 0;
        if constexpr (MR <= simd::width<T> && 2 * MR >= simd::width<T>) {  // (spill past MR: one row)
            // W columns at a time: the MR rows' vectors (zero past M and past MR) transposed in
            // registers; vector i holds column k + i's MR values and is stored whole at row k + i
            // (its lanes past MR land in row k + i + 1, which the next store rewrites), the last
            // through a buffer (it would write past the block).
            constexpr std::size_t W = simd::width<T>;
            for (; k + W <= kc; k += W) {
                simd::vec<T> v[W];
#pragma GCC unroll 16
                for (std::size_t r = 0; r < W; ++r)
                    v[r] = r < MR && m0 + r < M ? simd::load(a + (m0 + r) * lda + k0 + k) : simd::vec<T>(T(0));
                simd::transpose_square<T>(v);
#pragma GCC unroll 16
                for (std::size_t i = 0; i + 1 < W; ++i) simd::store(ap + (k + i) * MR, v[i]);
                alignas(64) T last[W];
                simd::store(last, v[W - 1]);
                std::memcpy(ap + (k + W - 1) * MR, last, MR * sizeof(T));
            }
        }
        for (std::size_t r = 0; r < MR; ++r) {
            const T* src = a + (m0 + r) * lda + k0;
            const bool in = m0 + r < M;
            for (std::size_t kk = k; kk < kc; ++kk) ap[kk * MR + r] = in ? src[kk] : T(0);
        }
    } else {  // a's columns m0.. are contiguous in each stored row k: copy MR at a time
        // (a fixed-size memcpy: vector moves; element loops stayed scalar, GCC 12 unable to rule
        // out that ap aliases a)
        const std::size_t n = M - m0 < MR ? M - m0 : MR;
        for (std::size_t k = 0; k < kc; ++k) {
            const T* src = a + (k0 + k) * lda + m0;
            T* dst = ap + k * MR;
            if (n == MR) {
                std::memcpy(dst, src, MR * sizeof(T));
            } else {
                for (std::size_t r = 0; r < MR; ++r) dst[r] = r < n ? src[r] : T(0);
            }
        }
    }
}

// Share `part` of `parts` of the lines of [p, p + n).
template <class T> inline void prefetch_share(const T* p, std::size_t n, std::size_t part, std::size_t parts) {
    constexpr std::size_t L = line_bytes / sizeof(T);
    const std::size_t lines = (n + L - 1) / L;
    for (std::size_t l = part * lines / parts; l < (part + 1) * lines / parts; ++l) prefetch_l2(p + l * L);
}

// Share `part` of `parts` of the lines panel n0 of b's block [k0, k0 + kc) is read from (b packed
// from rows or from transposed panels: the backward's operands).
template <class T, b_layout BL>
inline void prefetch_b_share(std::size_t N, std::size_t k0, std::size_t kc, std::size_t n0, const T* b,
                             std::size_t ldb, std::size_t part, std::size_t parts) {
    constexpr std::size_t NR = gemm_tile<T>::NR, L = line_bytes / sizeof(T);  // elements per line
    constexpr std::size_t block_lines = (NR * NR + L - 1) / L;
    const std::size_t ncols = N - n0 < NR ? N - n0 : NR, row_lines = (ncols + L - 1) / L;  // (never past b's end)
    static_assert(BL != b_layout::panels, "panel-layout blocks are contiguous: prefetch_share");
    const std::size_t lines = BL == b_layout::panels_t ? (kc + NR - 1) / NR * block_lines : kc * row_lines;
    const std::size_t l0 = part * lines / parts, l1 = (part + 1) * lines / parts;
    for (std::size_t l = l0; l < l1; ++l) {
        if constexpr (BL == b_layout::panels_t)
            prefetch_l2(b + ((k0 / NR + l / block_lines) * N + n0) * NR + l % block_lines * L);
        else prefetch_l2(b + (k0 + l / row_lines) * ldb + n0 + l % row_lines * L);
    }
}

// The lines of c's tile (rows x ncols at m0, n0) in layout CL (a panel-layout tile is whole).
template <class T, c_layout CL>
inline void prefetch_c_tile(const T* c, std::size_t ldc, std::size_t M, std::size_t m0, std::size_t rows, std::size_t n0,
                            std::size_t ncols) {
    constexpr std::size_t NR = gemm_tile<T>::NR, L = line_bytes / sizeof(T);
    if constexpr (CL == c_layout::panels) {
        for (std::size_t i = 0; i < rows * NR; i += L) prefetch_l2(c + (n0 / NR * M + m0) * NR + i);
    } else {
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t j = 0; j < ncols; j += L) prefetch_l2(c + (m0 + r) * ldc + n0 + j);
    }
}

// The packed path (BLIS-style): per block of rows (all of them unless a is transposed) and per K
// block, pack a's rows (when a is transposed, or its block and row stride are large); per N panel,
// pack b's panel (or read it where it is: weights in panel layout); then one register tile per
// MR rows. Edge tiles (rows < MR or columns < NR) run on a small zero-padded tile and copy back
// their valid part; a c in panel layout has whole (zero-padded) panels and takes every tile in place.
// b in panel layout: ldb is the number of elements from b on that the forward may prefetch (0:
// none; gemm_panels_packed decides): the block the tiles read next (the next panel's, the first
// panel's next K block, or, after this call's last, the weight's next panel).
// Columns [n_lo, n_hi) only (n_lo a multiple of NR): a part of the columns, the operands' layout
// still that of all N. c in panel layout: ldc is its panels' row count where c holds more rows
// than these M (0: M).
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, a_layout AL, b_layout BL, c_layout CL, class Act>
inline void gemm_packed(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* b,
                        std::size_t ldb, T* c, std::size_t ldc, const T* bias, const Act& act, T* pack,
                        bool accumulate, std::size_t n_lo = 0, std::size_t n_hi = std::size_t(-1)) {
    using tile = gemm_tile<T>;
    constexpr std::size_t MR = tile::MR, NV = tile::NV, NR = tile::NR, KC = tile::KC, KCI = tile::KC_in_place;
    // a is packed only when transposed, or large and far apart; compact kernels' scratch (from
    // gemm_pack_elems) then holds nothing, so no pointer into it is formed.
    constexpr bool may_pack_a = AL == a_layout::cols || !tile::compact;
    T* bp = pack;
    T* ap = may_pack_a ? pack + (K < KC ? K : KC) * NR : nullptr;  // after one (kc x NR) block of b
    // K block: KC, or KC_in_place where neither operand is packed (b in panel layout, a's rows read
    // in place at that block too: packs_a grows with the block)
    const std::size_t KB = BL == b_layout::panels && !packs_a<T, AL>(M, K < KCI ? K : KCI, lda) ? KCI : KC;
    const std::size_t kblocks = K == 0 ? 1 : (K + KB - 1) / KB;
    // The backward's GEMMs (b packed from far-apart rows or blocks) where b is too large to stay in
    // L2 from one call to the next: the next panel's block. Panels (the forward's weights): the
    // block that follows in memory, where the caller allows it (ldb).
    constexpr bool backward = AL == a_layout::cols || BL == b_layout::panels_t;
    const std::size_t b_bytes = K * N * sizeof(T);
    const bool prefetch = !tile::compact && (BL == b_layout::panels ? ldb > 0 : backward && b_bytes >= prefetch_min_bytes);
    const std::size_t mc = AL == a_layout::cols ? tn_block_rows<T>(K < KC ? K : KC) : M;
    const std::size_t c_rows = CL == c_layout::panels && ldc ? ldc : M;  // a panel's rows in c
    for (std::size_t mb = 0; mb < M; mb += mc) {
      const std::size_t mend = M - mb < mc ? M : mb + mc;
      for (std::size_t kb = 0; kb < kblocks; ++kb) {
        const std::size_t k0 = kb * KB, kc = K == 0 ? 0 : (K - k0 < KB ? K - k0 : KB);
        const bool first = kb == 0, from_c = !first || accumulate, last = kb + 1 == kblocks;
        // a is read where it is when its block stays in L1 (packing it cost 11% of the tiny layer's
        // instructions) or its rows do not alias in L1 (a_alias_bytes); compact kernels (no caches
        // to feed) always read it in place.
        const bool packed_a = packs_a<T, AL>(mend - mb, kc, lda);
        for (std::size_t m0 = mb; packed_a && m0 < mend; m0 += MR)
            pack_a<T, AL>(mend, m0, k0, kc, a, lda, ap + (m0 - mb) * kc);
        const std::size_t n_end = n_hi < N ? n_hi : N;
        for (std::size_t n0 = n_lo; n0 < n_end; n0 += NR) {
            const std::size_t ncols = n_end - n0 < NR ? n_end - n0 : NR;
            const T* panel = bp;
            if constexpr (BL == b_layout::panels) panel = b + (n0 / NR * K + k0) * NR;
            else pack_b<T, BL>(N, k0, kc, n0, b, ldb, bp);
            alignas(64) T bias_pad[NR];  // a partial panel's bias, zero-padded (whole panels read it in place)
            const T* bias_n = bias && first ? bias + n0 : nullptr;
            if (bias_n && ncols < NR) {
                for (std::size_t j = 0; j < NR; ++j) bias_pad[j] = j < ncols ? bias[n0 + j] : T(0);
                bias_n = bias_pad;
            }
            const std::size_t tiles = (mend - mb + MR - 1) / MR;
            const T* b_next = nullptr;  // panels: the block the tiles read next, b_next_len elements
            std::size_t b_next_len = 0;
            if constexpr (BL == b_layout::panels) {
                if (prefetch) {
                    if (n0 + NR < n_end) b_next = panel + K * NR;            // the next panel's block
                    else if (kb + 1 < kblocks) b_next = b + (k0 + kc) * NR;  // the first panel's next K block
                    else b_next = panel + kc * NR;                           // what follows this call in memory
                    const std::size_t left = ldb - std::size_t(b_next - b);  // (never past ldb)
                    b_next_len = left < KB * NR ? left : KB * NR;
                }
            }
            for (std::size_t m0 = mb, rows = 0, t = 0; m0 < mend; m0 += rows, ++t) {
                rows = packed_a ? (mend - m0 < MR ? mend - m0 : MR) : balanced_rows<T>(mend - m0);
                if (prefetch) {
                    const std::size_t share = t < tiles ? t : tiles - 1;
                    if constexpr (BL == b_layout::panels) {
                        prefetch_share(b_next, b_next_len, share, tiles);
                    } else if (n0 + NR < n_end) {
                        prefetch_b_share<T, BL>(N, k0, kc, n0 + NR, b, ldb, share, tiles);
                    }
                    const std::size_t next = m0 + rows, next_rows = mend - next < MR ? mend - next : MR;
                    if (from_c && next < mend) prefetch_c_tile<T, CL>(c, ldc, c_rows, next, next_rows, n0, ncols);
                }
                const bool whole = CL == c_layout::panels || ncols == NR;
                T* cm = CL == c_layout::panels ? c + (n0 / NR * c_rows + m0) * NR : c + m0 * ldc + n0;
                const std::size_t ldcm = CL == c_layout::panels ? NR : ldc;
                alignas(64) T edge[MR * NR];  // a partial panel goes through a padded tile
                T* dst = whole ? cm : edge;
                const std::size_t ldd = whole ? ldcm : NR;
                if (!whole && from_c)
                    for (std::size_t r = 0; r < rows; ++r)
                        for (std::size_t j = 0; j < NR; ++j) edge[r * NR + j] = j < ncols ? cm[r * ldc + j] : T(0);
                if (packed_a)
                    micro_rows<T, NV, a_layout::packed, true>(rows, std::make_index_sequence<MR>{}, kc, ap + (m0 - mb) * kc, 0, panel,
                                                  0, dst, ldd, bias_n, from_c, last, act);
                else if constexpr (AL == a_layout::rows)
                    micro_rows<T, NV, a_layout::rows, true>(rows, std::make_index_sequence<MR>{}, kc, a + m0 * lda + k0, lda,
                                                   panel, 0, dst, ldd, bias_n, from_c, last, act);
                if (!whole)
                    for (std::size_t r = 0; r < rows; ++r)
                        for (std::size_t j = 0; j < ncols; ++j) cm[r * ldc + j] = edge[r * NR + j];
            }
        }
      }
    }
}

// The forward's weights (b in panel layout) against a row-major a: panel-major where a is read in
// place, one gemm_packed per panel, so that each panel's K blocks run one after another and the
// weights are read front to back as one stream (a panel is contiguous) while c's (M x NR) column
// stays in L1 across them (K block by K block, every panel's first block is read before any
// second block). The tiles prefetch the block they read next (gemm_packed) only where a panel row
// is under two cache lines (256-bit vectors and narrower: the 6 x 16 tile consumes a panel's lines
// twice as fast per FMA as the 12 x 32 one) and the weight exceeds forward_prefetch_min_bytes.
// (Measurements: scripts/performance_log.md, "GEMM: panel order and prefetch".)
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, class Act>
inline void gemm_panels_packed(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* b,
                               T* c, std::size_t ldc, const T* bias, const Act& act, T* pack, bool accumulate) {
    using tile = gemm_tile<T>;
    constexpr std::size_t NR = tile::NR, KC = tile::KC;
    constexpr bool narrow_panels = NR * sizeof(T) < 2 * line_bytes;
    const std::size_t elems = panel_elems<T>(K, N);
    const bool prefetch = !tile::compact && narrow_panels && K * N * sizeof(T) >= forward_prefetch_min_bytes;
    constexpr auto rows = a_layout::rows;
    constexpr auto panels = b_layout::panels;
    // One K block: the same order either way, in one call. a packed: once per K block for every panel.
    if (K <= KC || packs_a<T, rows>(M, KC, lda))
        return gemm_packed<T, rows, panels, c_layout::rows>(M, N, K, a, lda, b, prefetch ? elems : 0, c, ldc, bias, act,
                                                            pack, accumulate);
    for (std::size_t n0 = 0; n0 < N; n0 += NR)
        gemm_packed<T, rows, panels, c_layout::rows>(M, N - n0 < NR ? N - n0 : NR, K, a, lda, b + n0 * K,
                                                     prefetch ? elems - n0 * K : 0, c + n0, ldc, bias ? bias + n0 : nullptr,
                                                     act, pack, accumulate);
}

// Few rows against panels (a decoding step): each panel is one contiguous (K x NR) stream of
// weights; P panels are read side by side (P streams, R·P·NV accumulators, enough independent
// FMAs to hide their latency) and every weight is loaded exactly once per call.
// c: (R, P·NR) at ldc (+)= a: (R, K) · panels p0..p0+P + bias (P·NR, padded; or null).
template <class T, std::size_t R, std::size_t P, class Act>
inline void gemv_panel_tile(std::size_t K, const T* a, std::size_t lda, const T* bp, T* c, std::size_t ldc,
                            const T* bias, const Act& act, bool accumulate) {
    using tile = gemm_tile<T>;
    constexpr std::size_t W = tile::W, NV = tile::NV, NR = tile::NR;
    using vt = simd::vec<T>;
    vt acc[R][P][NV];
#pragma GCC unroll 4
    for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (std::size_t p = 0; p < P; ++p)
#pragma GCC unroll 4
            for (std::size_t v = 0; v < NV; ++v) {
                const vt init = accumulate ? simd::load(c + r * ldc + p * NR + v * W) : vt(T(0));
                acc[r][p][v] = bias ? init + simd::load(bias + p * NR + v * W) : init;
            }
    const std::size_t pstride = K * NR;
    for (std::size_t k = 0; k < K; ++k) {
        vt bv[P][NV];
#pragma GCC unroll 4
        for (std::size_t p = 0; p < P; ++p)
#pragma GCC unroll 4
            for (std::size_t v = 0; v < NV; ++v) bv[p][v] = simd::load(bp + p * pstride + k * NR + v * W);
#pragma GCC unroll 4
        for (std::size_t r = 0; r < R; ++r) {
            const vt ar(a[r * lda + k]);
#pragma GCC unroll 4
            for (std::size_t p = 0; p < P; ++p)
#pragma GCC unroll 4
                for (std::size_t v = 0; v < NV; ++v) acc[r][p][v] = simd::fma<T>(ar, bv[p][v], acc[r][p][v]);
        }
    }
#pragma GCC unroll 4
    for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (std::size_t p = 0; p < P; ++p)
#pragma GCC unroll 4
            for (std::size_t v = 0; v < NV; ++v) simd::store(c + r * ldc + p * NR + v * W, apply_vec<T>(act, acc[r][p][v]));
}

// A vector of a quantized weight's scales (or minimums) as floats: stored as floats, halves or int8s.
[[gnu::always_inline]] inline simd::vec<float> load_scale(const float* p) { return simd::load(p); }
[[gnu::always_inline]] inline simd::vec<float> load_scale(const std::uint16_t* p) { return simd::load_half(p); }
[[gnu::always_inline]] inline simd::vec<float> load_scale(const std::int8_t* p) { return simd::load_i8(p); }
// The scales (minimums) of a group row's lanes from `at` of panels w (quant_panels' indexing);
// two-level scales times their half (exact).
template <class Fmt> [[gnu::always_inline]] inline simd::vec<float> group_scale(const quant_panels<Fmt>& w, std::size_t at) {
    if constexpr (two_level_scales<Fmt>) return load_scale(w.scales + at) * simd::load_half(w.supers.scales + w.super_index(at));
    else return load_scale(w.scales + at);
}
template <class Fmt> [[gnu::always_inline]] inline simd::vec<float> group_min(const quant_panels<Fmt>& w, std::size_t at) {
    if constexpr (two_level_scales<Fmt>) return load_scale(w.mins + at) * simd::load_half(w.supers.mins + w.super_index(at));
    else return load_scale(w.mins + at);
}

// The quantized GEMV tiles' last step: c: (R, Q·NR) at ldc (+)= acc · scales (per column, ps
// apart per panel; null: none) + bias, then act.
template <std::size_t R, std::size_t Q, class Act>
inline void store_scaled_tile(const simd::vec<float> (&acc)[R][Q][gemm_tile<float>::NV], const float* scales, std::size_t ps,
                              float* c, std::size_t ldc, const float* bias, const Act& act, bool accumulate) {
    using tile = gemm_tile<float>;
    using vt = simd::vec<float>;
    constexpr std::size_t W = tile::W, NV = tile::NV, NR = tile::NR;
#pragma GCC unroll 4
    for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
            for (std::size_t v = 0; v < NV; ++v) {
                vt y = acc[r][q][v];
                if (scales) y = y * simd::load(scales + q * ps + v * W);
                if (accumulate) y = y + simd::load(c + r * ldc + q * NR + v * W);
                if (bias) y = y + simd::load(bias + q * NR + v * W);
                simd::store(c + r * ldc + q * NR + v * W, apply_vec<float>(act, y));
            }
}

// How the GEMV walks a weight's panels: where panel p starts, how many it reads side by side, how
// many rows one pass takes, and one tile. Dense panels here; quantized ones in gemm_quant.hpp.
template <class B> struct panel_source;
template <class T> struct panel_source<const T*> {
    // Streams side by side: 4 for one row, else 2 (one stream alone reads L3 ~30% slower). Four
    // rows would spill accumulators, so they take two passes of 2 rows over the same panels, the
    // second finding them in L2.
    static constexpr std::size_t streams(std::size_t R) { return gemm_tile<T>::compact ? 1 : (R == 1 ? 4 : 2); }
    static constexpr std::size_t pass_rows(std::size_t R) { return R == 4 ? 2 : R; }
    static const T* at(const T* b, std::size_t p, std::size_t K) { return b + p * K * gemm_tile<T>::NR; }
    template <std::size_t R, std::size_t Q, class Act>
    static void tile(std::size_t K, const T* a, std::size_t lda, const T* b, T* c, std::size_t ldc, const T* bias,
                     const Act& act, bool accumulate) {
        gemv_panel_tile<T, R, Q>(K, a, lda, b, c, ldc, bias, act, accumulate);
    }
};

// c: (R, N) at ldc (+)= a: (R, K) · the panels of b (a panel_source) + bias, then act. (A: T, or
// the rows as the source reads them: int8 activations, gemv_int8.hpp.)
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, std::size_t R, class B, class A, class Act>
inline void gemv_panels(std::size_t N, std::size_t K, const A* a, std::size_t lda, const B& b, T* c, std::size_t ldc,
                        const T* bias, const Act& act, bool accumulate) {
    using src = panel_source<B>;
    constexpr std::size_t NR = gemm_tile<T>::NR, P = src::streams(R), RA = src::pass_rows(R), RB = R - RA;
    const std::size_t full = N / NR, groups = full / P, singles = full % P;
    auto tiles = [&]<std::size_t Q>(const B& bp, T* cc, std::size_t ldcc, const T* bias_q) {
        src::template tile<RA, Q>(K, a, lda, bp, cc, ldcc, bias_q, act, accumulate);
        if constexpr (RB > 0) src::template tile<RB, Q>(K, a + RA * lda, lda, bp, cc + RA * ldcc, ldcc, bias_q, act, accumulate);
    };
    // (pointer steps instead of p·NR products: GCC 12 otherwise "proves" an overflow in the
    // unrolled tile and warns, -Waggressive-loop-optimizations)
    const T* bias_p = bias;
    std::size_t p = 0;
    for (std::size_t g = 0; g < groups; ++g, p += P, c += P * NR, bias_p = bias_p ? bias_p + P * NR : nullptr)
        tiles.template operator()<P>(src::at(b, p, K), c, ldc, bias_p);
    for (std::size_t i = 0; i < singles; ++i, ++p, c += NR, bias_p = bias_p ? bias_p + NR : nullptr)
        tiles.template operator()<1>(src::at(b, p, K), c, ldc, bias_p);
    if (const std::size_t ncols = N - full * NR; ncols) {  // last, zero-padded panel
        alignas(64) T edge[R * NR] = {};
        alignas(64) T bias_pad[NR] = {};
        if (accumulate)
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t j = 0; j < ncols; ++j) edge[r * NR + j] = c[r * ldc + j];
        if (bias_p)
            for (std::size_t j = 0; j < ncols; ++j) bias_pad[j] = bias_p[j];
        tiles.template operator()<1>(src::at(b, p, K), edge, NR, bias_p ? bias_pad : nullptr);
        for (std::size_t r = 0; r < R; ++r)
            for (std::size_t j = 0; j < ncols; ++j) c[r * ldc + j] = edge[r * NR + j];
    }
}

// ---- Parallel parts: cut by the scheduling room (core/schedule.hpp) ----
template <class T, class F> inline bool split_panels(std::size_t M, std::size_t N, std::size_t K, F&& f) {
    return schedule::split_panels<gemm_tile<T>::NR>(M, N, K, f);
}

// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, class B, class A, class Act>
inline bool gemv_rows_here(std::size_t M, std::size_t N, std::size_t K, const A* a, std::size_t lda, const B& b, T* c,
                           std::size_t ldc, const T* bias, const Act& act, bool accumulate);

// Rows 1..4 (small_m_rows) of any panel source through the GEMV at its compile-time row count, its
// panels split over the current executor (each thread streams its share of the weights); false
// (nothing done) for more rows.
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, class B, class A, class Act>
inline bool gemv_rows(std::size_t M, std::size_t N, std::size_t K, const A* a, std::size_t lda, const B& b, T* c,
                      std::size_t ldc, const T* bias, const Act& act, bool accumulate) {
    if (M > small_m_rows) return false;
    const auto part = [&](std::size_t n0, std::size_t nc) {
        gemv_rows_here(M, nc, K, a, lda, panel_source<B>::at(b, n0 / gemm_tile<T>::NR, K), c + n0, ldc,
                       bias ? bias + n0 : nullptr, act, accumulate);
    };
    return schedule::split_gemv<gemm_tile<T>::NR>(M, N, K, part) ||
           gemv_rows_here(M, N, K, a, lda, b, c, ldc, bias, act, accumulate);
}
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, class B, class A, class Act>
inline bool gemv_rows_here(std::size_t M, std::size_t N, std::size_t K, const A* a, std::size_t lda, const B& b, T* c,
                           std::size_t ldc, const T* bias, const Act& act, bool accumulate) {
    if constexpr (gemm_tile<T>::compact) {  // one row at a time: one GEMV in the image (each row's sums are the same)
        if (M > small_m_rows) return false;
        for (std::size_t m = 0; m < M; ++m) gemv_panels<T, 1>(N, K, a + m * lda, lda, b, c + m * ldc, ldc, bias, act, accumulate);
        return true;
    }
    switch (M) {
    case 1: return gemv_panels<T, 1>(N, K, a, lda, b, c, ldc, bias, act, accumulate), true;
    case 2: return gemv_panels<T, 2>(N, K, a, lda, b, c, ldc, bias, act, accumulate), true;
    case 3: return gemv_panels<T, 3>(N, K, a, lda, b, c, ldc, bias, act, accumulate), true;
    case 4: return gemv_panels<T, 4>(N, K, a, lda, b, c, ldc, bias, act, accumulate), true;
    default: return false;
    }
}

// Unpacked: register tiles over a (layout AL) and b (row-major) where they are, K in KC blocks;
// columns past the last whole vector as scalar dot products.
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <a_layout AL, class T, class Act>
[[gnu::noinline]] inline void gemm_in_place(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* b,
                          std::size_t ldb, T* c, std::size_t ldc, const T* bias, const Act& act, bool accumulate) {
    using tile = gemm_tile<T>;
    constexpr std::size_t W = tile::W, MR = tile::MR, NV = tile::NV, NR = tile::NR, KC = tile::KC;
    const std::size_t kblocks = K == 0 ? 1 : (K + KC - 1) / KC, a_row = a_row_stride<T, AL>(lda), a_k = a_k_stride<T, AL>(lda);
    for (std::size_t n0 = 0; n0 < N; n0 += NR) {
        const std::size_t ncols = N - n0 < NR ? N - n0 : NR;
        for (std::size_t kb = 0; kb < kblocks; ++kb) {
            const std::size_t k0 = kb * KC, kc = K == 0 ? 0 : (K - k0 < KC ? K - k0 : KC);
            const bool from_c = kb > 0 || accumulate, last = kb + 1 == kblocks;
            const T* bk = b + k0 * ldb + n0;
            const T* bias_n = bias && kb == 0 ? bias + n0 : nullptr;
            for (std::size_t m0 = 0, rows = 0; m0 < M; m0 += rows) {
                rows = balanced_rows<T>(M - m0);
                const T* am = a + m0 * a_row + k0 * a_k;
                T* cm = c + m0 * ldc + n0;
                std::size_t j = 0;
                if (ncols == NR) {
                    micro_rows<T, NV, AL, false>(rows, std::make_index_sequence<MR>{}, kc, am, lda, bk, ldb, cm, ldc, bias_n,
                                                 from_c, last, act);
                    j = NR;
                }
                for (; j + W <= ncols && W > 1; j += W)
                    micro_rows<T, 1, AL, false>(rows, std::make_index_sequence<MR>{}, kc, am, lda, bk + j, ldb, cm + j, ldc,
                                                bias_n ? bias_n + j : nullptr, from_c, last, act);
                if (j < ncols)
                    scalar_cols<AL>(rows, ncols - j, kc, am, lda, bk + j, ldb, cm + j, ldc, bias_n ? bias_n + j : nullptr,
                                    from_c, last, act);
            }
        }
    }
}

#undef CTFORMER_UNROLL_K
}  // namespace detail


// Scratch for the packed path of gemms of at most max_rows rows and inner dimension at most max_k:
// one (kc x NR) panel of b and the (rows x kc) block of a, kc = min(max_k, KC), both k-major, so
// the micro-kernel reads two contiguous streams with compile-time strides. Lives in the caller's
// workspace (its size is a compile-time constant there); small layers get small scratch.
namespace detail {
template <class T> constexpr std::size_t pack_block_elems(std::size_t max_rows, std::size_t max_k) {
    using tile = gemm_tile<T>;
    const std::size_t kc = max_k < tile::KC ? max_k : tile::KC;
    return kc * tile::NR + (max_rows + tile::MR - 1) / tile::MR * tile::MR * kc;
}
}  // namespace detail
namespace detail {
// A parallel task's own scratch, on its thread's stack (the workspace's is one thread's): one
// (KC x NR) block of b and a's rows packed task_rows at a time (float: 144 KB on AVX2, 160 KB on
// AVX-512).
inline constexpr std::size_t task_rows = 128;
template <class T>
inline constexpr std::size_t task_pack_elems = gemm_tile<T>::compact ? 1 : pack_block_elems<T>(task_rows, gemm_tile<T>::KC);
// ... and for the weight-gradient GEMM (a transposed: a block of tn_block_rows rows, gemm_tn_panels)
template <class T>
inline constexpr std::size_t tn_task_pack_elems =
    gemm_tile<T>::KC * gemm_tile<T>::NR +
    (tn_a_block_bytes / sizeof(T) > tn_row_step * gemm_tile<T>::KC ? tn_a_block_bytes / sizeof(T) : tn_row_step * gemm_tile<T>::KC);
// Rows of a a task hands the packed path at once: all of them, unless the path may pack a (then
// what its scratch holds).
template <class T> constexpr std::size_t task_row_block(std::size_t M, std::size_t K, std::size_t lda) {
    const std::size_t kc = K < gemm_tile<T>::KC_in_place ? K : gemm_tile<T>::KC_in_place;
    return packs_a<T, a_layout::rows>(M, kc, lda) ? task_rows : M;
}
}  // namespace detail
// Compact kernels read a and b where they are on these paths: one element (no scratch) suffices.
template <class T> constexpr std::size_t gemm_pack_elems(std::size_t max_rows, std::size_t max_k = gemm_tile<T>::KC) {
    return gemm_tile<T>::compact ? 1 : detail::pack_block_elems<T>(max_rows, max_k);
}

// c: (M, N) = a: (M, K) · b: (K, N) + bias: (N) (bias may be null), then c = act(c).
// Strides lda/ldb/ldc are in elements; c must not overlap a or b. pack (optional): scratch of
// gemm_pack_elems<T>(M) elements; with it a and b are packed (the fast path for M > 4).
// accumulate: c = act(c + a·b + bias), as in gemm_panels.
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, class Act = identity_op>
constexpr void gemm(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* b,
                    std::size_t ldb, T* c, std::size_t ldc, const T* bias = nullptr, const Act& act = {},
                    T* pack = nullptr, bool accumulate = false) {
    using tile = gemm_tile<T>;
    if (M == 0 || N == 0) return;
    if (simd::constant_evaluated())
        return detail::scalar_cols(M, N, K, a, lda, b, ldb, c, ldc, bias, accumulate, true, act);
    if (M <= small_m_rows) return detail::gemm_small_m(M, N, K, a, lda, b, ldb, c, ldc, bias, act, accumulate);
    if (pack != nullptr && !tile::compact)  // (compact kernels read b in place: no caches to feed)
        return detail::gemm_packed<T, detail::a_layout::rows, detail::b_layout::rows, detail::c_layout::rows>(
            M, N, K, a, lda, b, ldb, c, ldc, bias, act, pack, accumulate);
    detail::gemm_in_place<detail::a_layout::rows>(M, N, K, a, lda, b, ldb, c, ldc, bias, act, accumulate);
}

// c: (M, N) (+)= aᵀ · b with a stored transposed, (K, M) at lda, and b: (K, N) row-major at ldb,
// both read where they are (operands that sit in L1: attention's key and probability tiles).
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T>
constexpr void gemm_tn(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* b, std::size_t ldb,
                       T* c, std::size_t ldc, bool accumulate) {
    if (M == 0 || N == 0) return;
    if (simd::constant_evaluated())
        return detail::scalar_cols<detail::a_layout::cols>(M, N, K, a, lda, b, ldb, c, ldc, static_cast<const T*>(nullptr),
                                                           accumulate, true, identity_op{});
    detail::gemm_in_place<detail::a_layout::cols>(M, N, K, a, lda, b, ldb, c, ldc, static_cast<const T*>(nullptr),
                                                  identity_op{}, accumulate);
}

// c: (M, N) = a: (M, K) · b: (K, N) + bias: (N) (bias may be null), then c = act(c), with b in
// panel layout (panels.hpp: PackedWeight::panels()). accumulate: c = act(c + a·b + bias), the
// residual add fused into the epilogue. pack: scratch of gemm_pack_elems<T>(M) elements for a's
// rows (unused when M <= small_m_rows). c must not overlap a or b.
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class T, class Act = identity_op>
constexpr void gemm_panels(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda,
                           const T* b_panels, T* c, std::size_t ldc, const T* bias, const Act& act, T* pack,
                           bool accumulate = false) {
    static_assert(small_m_rows == 4, "gemm_panels dispatches rows 1..4 to the GEMV");
    if (M == 0 || N == 0) return;
    if (simd::constant_evaluated()) {  // each panel is a row-major (K, NR) matrix
        constexpr std::size_t NR = gemm_tile<T>::NR;
        for (std::size_t n0 = 0; n0 < N; n0 += NR)
            detail::scalar_cols(M, N - n0 < NR ? N - n0 : NR, K, a, lda, b_panels + n0 * K, NR, c + n0, ldc,
                                bias ? bias + n0 : nullptr, accumulate, true, act);
        return;
    }
    if (detail::gemv_rows(M, N, K, a, lda, b_panels, c, ldc, bias, act, accumulate)) return;
    const auto part = [&](std::size_t n0, std::size_t nc) {  // columns n0.. on another thread: its own scratch
        alignas(64) T task_pack[detail::task_pack_elems<T>];
        const std::size_t mb = detail::task_row_block<T>(M, K, lda);
        for (std::size_t m0 = 0; m0 < M; m0 += mb)
            detail::gemm_panels_packed(M - m0 < mb ? M - m0 : mb, nc, K, a + m0 * lda, lda, b_panels + n0 * K,
                                       c + m0 * ldc + n0, ldc, bias ? bias + n0 : nullptr, act, task_pack, accumulate);
    };
    if (!detail::split_panels<T>(M, N, K, part))
        detail::gemm_panels_packed(M, N, K, a, lda, b_panels, c, ldc, bias, act, pack, accumulate);
}

}  // namespace ctformer::kernels
