// ctformer/kernels/lowrank.hpp — the products of a low-rank adapter (modules/lora.hpp) whose result
// has few columns, its rank: x·Aᵀ and dy·B. The GEMM's register tile computes its whole width (32
// columns on AVX-512) for the rank's 8; here each result is a dot product along the long dimension,
// vectors along it, a vector's width of results a pass where the rank shares it (rank_block), else
// four (the row of a read once for the four).
#pragma once
#include <cstddef>
#include <type_traits>

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

// c: (M, N) (+)= a: (M, K) · (the N columns of cols): rank blocks where the rank shares a vector's
// width, else four results (then one) a row.
template <std::size_t N, class T, class Cols>
inline void rank_products(std::size_t M, std::size_t K, const T* a, std::size_t lda, const Cols& cols, T* c, std::size_t ldc,
                          bool accumulate) {
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
