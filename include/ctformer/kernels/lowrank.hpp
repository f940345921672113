// ctformer/kernels/lowrank.hpp — the products of a low-rank adapter (modules/lora.hpp) whose result
// has few columns, its rank: x·Aᵀ and dy·B. The GEMM's register tile computes its whole width (32
// columns on AVX-512) for the rank's 8. Here, where the rank fills whole vectors or half of one
// (broadcast_tile), a row's results are vectors: one value of a (or a pair of floats, loaded as
// one double) broadcast against the columns' values packed k-major, a tile of rows at a time.
// Elsewhere each result is a dot product along the long dimension, vectors along it, a vector's
// width of results a pass where the rank shares it (rank_block), else four (the row of a read
// once for the four).
#pragma once
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../core/panels.hpp"
#include "../simd/simd.hpp"

namespace ctformer::kernels {

namespace detail {
// r[j] += Σ_k a[k] · b_j[k] for j < J (J ≤ 4), b_j = b + j·ldb: vectors along k, the tail in order.
// (counted in vectors, pointers stepped: GCC 12 otherwise "proves" an overflow of k in the inlined
// copies and warns, -Waggressive-loop-optimizations)
template <class T, std::size_t J> struct dot_sums {
    using V = simd::vec<T>;
    V s[J];
    T t[J];
    dot_sums() {
        for (std::size_t j = 0; j < J; ++j) s[j] = simd::splat<T>(T(0)), t[j] = T(0);
    }
    // the K values at a against each b_j's
    void add(std::size_t K, const T* a, const T* b, std::size_t ldb) {
        constexpr std::size_t W = simd::width<T>;
        const std::size_t vectors = K / W, tail = K % W;
        for (std::size_t v = 0; v < vectors; ++v, a += W, b += W) {
            const V x = simd::load(a);
            for (std::size_t j = 0; j < J; ++j) s[j] = simd::vfma(x, simd::load(b + j * ldb), s[j]);
        }
        for (std::size_t q = 0; q < tail; ++q)
            for (std::size_t j = 0; j < J; ++j) t[j] = simd::sfma(a[q], b[j * ldb + q], t[j]);
    }
    void into(T* r) const {
        for (std::size_t j = 0; j < J; ++j) r[j] += simd::hsum<T>(s[j]) + t[j];
    }
};
// A vector's width of results a pass, for a rank N that shares it evenly: R = width/N rows × the
// N results (N ≤ width), or one row × width of its N results; the width sums then come out of
// one transposing reduction (simd::hsum_lanes) where one horizontal sum per result was most of
// the work. Each result's sum is the same tree over its own lanes in any slot, so rows give the
// same bits however they are grouped (a short last group repeats its last row).
template <class T, std::size_t N> struct rank_block {
    static constexpr std::size_t W = simd::width<T>;
    static constexpr bool rows_in_pass = N <= W && W % N == 0;
    static constexpr bool fits = rows_in_pass || N % W == 0;
    static constexpr std::size_t R = rows_in_pass ? W / N : 1, J = rows_in_pass ? N : W;
    using V = simd::vec<T>;
    V s[W];
    T t[W];
    const T* rows[R];  // the group's rows of a
    rank_block(const T* a, std::size_t lda, std::size_t m, std::size_t M) {
        for (std::size_t i = 0; i < R; ++i) rows[i] = a + (m + i < M ? m + i : M - 1) * lda;
        for (std::size_t i = 0; i < W; ++i) s[i] = simd::splat<T>(T(0)), t[i] = T(0);
    }
    // len values from offset k of each row against the J columns b + j·ldb
    void add(std::size_t k, std::size_t len, const T* b, std::size_t ldb) {
        const std::size_t vectors = len / W, tail = len % W;
        for (std::size_t v = 0; v < vectors; ++v, k += W, b += W) {
            V x[R];
            for (std::size_t i = 0; i < R; ++i) x[i] = simd::load(rows[i] + k);
            for (std::size_t j = 0; j < J; ++j) {
                const V bj = simd::load(b + j * ldb);
                for (std::size_t i = 0; i < R; ++i) s[i * J + j] = simd::vfma(x[i], bj, s[i * J + j]);
            }
        }
        for (std::size_t q = 0; q < tail; ++q)
            for (std::size_t i = 0; i < R; ++i)
                for (std::size_t j = 0; j < J; ++j) t[i * J + j] = simd::sfma(rows[i][k + q], b[j * ldb + q], t[i * J + j]);
    }
    // c's rows m .. (below M) += the sums, columns j0 ..
    void into(T* c, std::size_t ldc, std::size_t m, std::size_t M, std::size_t j0) {
        alignas(64) T sums[W];
        simd::store(sums, simd::hsum_lanes<T>(s));
        for (std::size_t i = 0; i < R && m + i < M; ++i)
            for (std::size_t j = 0; j < J; ++j) c[(m + i) * ldc + j0 + j] += sums[i * J + j] + t[i * J + j];
    }
};

// Where the K values of result column j lie: one row of b at ldb, or — a weight in panel layout
// (PackedWeight<T, K, N>::panels(): input n of outputs p·NR .. p·NR + NR contiguous) — NR values
// in each panel. segments(K, j0, f) calls f(k, len, b_j0 at k, distance between columns).
template <class T> struct row_columns {
    const T* b;
    std::size_t ldb;
    template <class F> void segments(std::size_t K, std::size_t j0, F&& f) const { f(std::size_t(0), K, b + j0 * ldb, ldb); }
};
template <class T> struct panel_columns {
    const T* w;
    std::size_t N;
    template <class F> void segments(std::size_t K, std::size_t j0, F&& f) const {
        constexpr std::size_t NR = panels::gemm_tile<T>::NR;
        for (std::size_t k = 0; k < K; k += NR) f(k, K - k < NR ? K - k : NR, w + ((k / NR) * N + j0) * NR, NR);
    }
};

// N results a row as NV vectors: G = W/N inputs of a row broadcast (G 1, or 2: a pair of floats
// loaded as one double) against the N columns' values packed G inputs a column, k-major (lane
// j·G + g: column j, input k + g), MR rows a tile; a G = 2 result is its two lanes' sum at the end.
// Each lane's sum is one chain along k (K odd: the last input alone, its partner lanes zero), so a
// row gets the same bits in any tile. For ranks filling whole vectors or half of one whose packed
// columns fit packed_bytes (K ≤ 2048 at rank 8); not on compact kernels.
template <class T, std::size_t N> struct broadcast_tile {
    static constexpr std::size_t W = simd::width<T>, G = N % W == 0 ? 1 : 2, NV = N * G / W;
    static constexpr std::size_t packed_bytes = 64 * 1024;
    static constexpr bool pairs = simd::vectorized<double> && std::is_same_v<T, float>;
    static constexpr bool fits_rank = simd::vectorized<T> && !panels::gemm_tile<T>::compact && NV <= 4 &&
                                      (N % W == 0 || (2 * N == W && pairs));
    static constexpr std::size_t registers = W * sizeof(T) >= 64 ? 32 : 16;
    static constexpr std::size_t MR = (registers - NV - 2) / NV > 12 ? 12 : (registers - NV - 2) / NV;
    static constexpr bool fits(std::size_t K) { return fits_rank && (K + G - 1) / G * NV * W * sizeof(T) <= packed_bytes; }
    using V = simd::vec<T>;

    // b's values, k-major, G inputs a column (zero past K): whole blocks of W inputs by one transpose
    // in registers (G = 2: of N float pairs as doubles), the rest one value at a time
    template <class Cols> static void pack(std::size_t K, const Cols& cols, T* packed) {
        constexpr std::size_t J = W / G;  // columns a block covers
        for (std::size_t j0 = 0; j0 < N; j0 += J)
            cols.segments(K, j0, [&](std::size_t k, std::size_t len, const T* p, std::size_t ldb) {  // (k: a multiple of G)
                const std::size_t whole = len / W * W;
                for (std::size_t t = 0; t < whole; t += W) block(p + t, ldb, packed + (k + t) * N + j0 * G);
                for (std::size_t t = whole; t < len; ++t)
                    for (std::size_t jj = 0; jj < J; ++jj) packed[(k + t) / G * N * G + (j0 + jj) * G + (k + t) % G] = p[jj * ldb + t];
            });
        if (G == 2 && K % 2)
            for (std::size_t j = 0; j < N; ++j) packed[K / 2 * N * 2 + 2 * j + 1] = T(0);
    }
    // J columns' W inputs from src (column stride ldb) into W / G packed rows at dst
    static void block(const T* src, std::size_t ldb, T* dst) {
        if constexpr (G == 1) {
            V v[W];
            for (std::size_t j = 0; j < W; ++j) v[j] = simd::load(src + j * ldb);
            simd::transpose_square<T>(v);
            for (std::size_t i = 0; i < W; ++i) simd::store(dst + i * N, v[i]);
        } else {
#if CTFORMER_XSIMD
            using D = simd::vec<double>;
            D v[W / 2];
            for (std::size_t j = 0; j < W / 2; ++j) v[j] = xsimd::bitwise_cast<D>(simd::load(src + j * ldb));
            simd::transpose_square<double>(v);
            for (std::size_t i = 0; i < W / 2; ++i) simd::store(dst + i * W, xsimd::bitwise_cast<V>(v[i]));
#endif
        }
    }
    static V broadcast(const T* x) {
        if constexpr (G == 1) {
            return simd::splat<T>(*x);
        } else {
#if CTFORMER_XSIMD
            double d;
            std::memcpy(&d, x, sizeof d);
            return xsimd::bitwise_cast<V>(simd::vec<double>(d));
#else
            return simd::splat<T>(*x);  // (unreachable: pairs needs vectors)
#endif
        }
    }
    // c's R rows (+)= a's R rows · the packed columns
    template <std::size_t R>
    static void tile(std::size_t K, const T* a, std::size_t lda, const T* packed, T* c, std::size_t ldc, bool accumulate) {
        V acc[R][NV];
        for (std::size_t r = 0; r < R; ++r)
            for (std::size_t v = 0; v < NV; ++v) acc[r][v] = simd::splat<T>(T(0));
        const std::size_t whole = K / G;
        const T* bp = packed;
        for (std::size_t q = 0; q < whole; ++q, bp += NV * W) {
            V b[NV];
            for (std::size_t v = 0; v < NV; ++v) b[v] = simd::load(bp + v * W);
            for (std::size_t r = 0; r < R; ++r) {
                const V x = broadcast(a + r * lda + q * G);
                for (std::size_t v = 0; v < NV; ++v) acc[r][v] = simd::vfma(x, b[v], acc[r][v]);
            }
        }
        if (G == 2 && K % 2)  // the last input alone: its partner lanes hold zeros
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t v = 0; v < NV; ++v) acc[r][v] = simd::vfma(simd::splat<T>(a[r * lda + K - 1]), simd::load(bp + v * W), acc[r][v]);
        alignas(64) T lanes[NV * W];
        for (std::size_t r = 0; r < R; ++r) {
            for (std::size_t v = 0; v < NV; ++v) simd::store(lanes + v * W, acc[r][v]);
            for (std::size_t j = 0; j < N; ++j) {
                const T sum = G == 1 ? lanes[j] : lanes[2 * j] + lanes[2 * j + 1];
                c[r * ldc + j] = accumulate ? c[r * ldc + j] + sum : sum;
            }
        }
    }
    template <std::size_t... Rs>
    static void rows(std::size_t n, std::index_sequence<Rs...>, std::size_t K, const T* a, std::size_t lda, const T* packed, T* c,
                     std::size_t ldc, bool accumulate) {
        ((n == Rs + 1 ? (tile<Rs + 1>(K, a, lda, packed, c, ldc, accumulate), 0) : 0), ...);
    }
    template <class Cols>
    static void run(std::size_t M, std::size_t K, const T* a, std::size_t lda, const Cols& cols, T* c, std::size_t ldc, bool accumulate) {
        alignas(64) T packed[packed_bytes / sizeof(T)];
        pack(K, cols, packed);
        for (std::size_t m = 0; m < M; m += MR) {
            const std::size_t n = M - m < MR ? M - m : MR;
            if (n == MR) tile<MR>(K, a + m * lda, lda, packed, c + m * ldc, ldc, accumulate);
            else rows(n, std::make_index_sequence<MR - 1>{}, K, a + m * lda, lda, packed, c + m * ldc, ldc, accumulate);
        }
    }
};

// c: (M, N) (+)= a: (M, K) · (the N columns of cols): rank blocks where the rank shares a vector's
// width, else four results (then one) a row.
template <std::size_t N, class T, class Cols>
inline void rank_products(std::size_t M, std::size_t K, const T* a, std::size_t lda, const Cols& cols, T* c, std::size_t ldc,
                          bool accumulate) {
    if constexpr (broadcast_tile<T, N>::fits_rank)
        if (broadcast_tile<T, N>::fits(K))
            return broadcast_tile<T, N>::run(M, K, a, lda, cols, c, ldc, accumulate);
    if (!accumulate)
        for (std::size_t m = 0; m < M; ++m)
            for (std::size_t n = 0; n < N; ++n) c[m * ldc + n] = T(0);
    using B = rank_block<T, N>;
    if constexpr (B::fits) {
        for (std::size_t m = 0; m < M; m += B::R)
            for (std::size_t j0 = 0; j0 < N; j0 += B::J) {
                B d(a, lda, m, M);
                cols.segments(K, j0, [&](std::size_t k, std::size_t len, const T* b, std::size_t ldb) { d.add(k, len, b, ldb); });
                d.into(c, ldc, m, M, j0);
            }
    } else {
        const auto results = [&](auto J, std::size_t m, std::size_t j0) {
            dot_sums<T, decltype(J)::value> d;
            cols.segments(K, j0, [&](std::size_t k, std::size_t len, const T* b, std::size_t ldb) { d.add(len, a + m * lda + k, b, ldb); });
            d.into(c + m * ldc + j0);
        };
        for (std::size_t m = 0; m < M; ++m) {
            constexpr std::size_t quads = N / 4;
            for (std::size_t q = 0; q < quads; ++q) results(std::integral_constant<std::size_t, 4>{}, m, 4 * q);
            for (std::size_t j = 4 * quads; j < N; ++j) results(std::integral_constant<std::size_t, 1>{}, m, j);
        }
    }
}
}  // namespace detail

// c: (M, N) (+)= a: (M, K) · bᵀ, b: (N, K) row-major at ldb (N small: a rank).
// (BLAS's parameters: each matrix a pointer and its leading dimension.)
template <std::size_t N, class T>
inline void gemm_nt_rows(std::size_t M, std::size_t K, const T* a, std::size_t lda, const T* b, std::size_t ldb, T* c,
                         std::size_t ldc, bool accumulate) {
    detail::rank_products<N>(M, K, a, lda, detail::row_columns<T>{b, ldb}, c, ldc, accumulate);
}

// c: (M, N) (+)= a: (M, K) · W, W: (K, N) a weight of K outputs and N inputs in panel layout:
// dX = dY · W for a weight with few inputs (N small: a rank).
template <std::size_t N, class T>
inline void gemm_nt_weight_rows(std::size_t M, std::size_t K, const T* a, std::size_t lda, const T* w, T* c, std::size_t ldc,
                                bool accumulate) {
    detail::rank_products<N>(M, K, a, lda, detail::panel_columns<T>{w, N}, c, ldc, accumulate);
}

}  // namespace ctformer::kernels
