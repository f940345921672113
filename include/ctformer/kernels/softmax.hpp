// ctformer/kernels/softmax.hpp — numerically safe softmax over one row of scores.
#pragma once
#include <cstddef>
#include <limits>

#include "elementwise.hpp"

namespace ctformer::kernels {

// row: (n) -> row: exp(row - shift); returns the sum of the new values (one horizontal reduction).
template <class T> constexpr T exp_shift_sum(T* row, std::size_t n, T shift) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    T s = T(0);
    if (!simd::constant_evaluated()) {
        const simd::vec<T> sv(shift);
        simd::vec<T> acc(T(0));
        for (const std::size_t nv = n - n % W; i < nv; i += W) {
            const simd::vec<T> e = simd::vexp(simd::load(row + i) - sv);
            simd::store(row + i, e);
            acc += e;
        }
        s = simd::hsum<T>(acc);
    }
    for (; i < n; ++i) {
        row[i] = simd::vexp(row[i] - shift);
        s += row[i];
    }
    return s;
}

// row[valid, n) = -inf (blocked): one blend, then whole vectors (scalar stores followed by the
// softmax's vector loads would stall store forwarding); scalar only past the last whole vector.
template <class T> constexpr void block_tail(T* row, std::size_t valid, std::size_t n) {
    constexpr std::size_t W = simd::width<T>;
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    if (simd::constant_evaluated()) {
        for (std::size_t j = valid; j < n; ++j) row[j] = neg_inf;
        return;
    }
    std::size_t j = valid / W * W;
    if (j < valid && j + W <= n) {
        simd::store(row + j, simd::keep_lanes<T>(simd::load(row + j), valid - j, neg_inf));
        j += W;
    }
    if (j < valid) j = valid;  // the partial vector is the row's end: scalar
    for (; j + W <= n; j += W) simd::store(row + j, simd::vec<T>(neg_inf));
    for (; j < n; ++j) row[j] = neg_inf;
}

// row: (n) scores, -inf where blocked -> row: (n) probabilities.
// A row with every score blocked (or n == 0) becomes all zeros and returns false: ctformer's
// documented convention is a zero attention output for such a query, never NaN.
template <class T> constexpr bool softmax_inplace(T* row, std::size_t n) {
    if (n == 0) return false;
    const T m = max(row, n);
    if (m == -std::numeric_limits<T>::infinity()) {
        for (std::size_t i = 0; i < n; ++i) row[i] = T(0);
        return false;
    }
    const T inv = T(1) / exp_shift_sum(row, n, m);
    map_inplace(row, n, [inv](const auto& x) { return x * inv; });
    return true;
}

// online_softmax_rows for g <= W rows (the ones past g are padding: blocked, never written).
template <class T> inline void softmax_row_group(T* s, std::size_t g, std::size_t ld, T* m, T* l, T* corr) {
    constexpr std::size_t W = simd::width<T>;
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    using V = simd::vec<T>;
    alignas(64) T m_old[W], l_old[W], shift[W];
    V part[W];
    for (std::size_t i = 0; i < W; ++i) {
        V acc(neg_inf);
        if (i < g)
            for (std::size_t j = 0; j < ld; j += W) acc = simd::vmax(acc, simd::load(s + i * ld + j));
        part[i] = acc;
        m_old[i] = i < g ? m[i] : neg_inf;
        l_old[i] = i < g ? l[i] : T(0);
    }
    const V tile_max = simd::reduce_lanes<T>(part, [](const auto& a, const auto& b) { return simd::vmax(a, b); });
    const V mo = simd::load(m_old), m_new = simd::vmax(mo, tile_max), ninf(neg_inf);
    // a tile with every score blocked leaves (m, l) and returns 1; the first tile with a score, 0
    const V c = simd::vselect(tile_max == ninf, V(T(1)), simd::vselect(mo == ninf, V(T(0)), simd::vexp(mo - m_new)));
    simd::store(shift, simd::vselect(m_new == ninf, V(T(0)), m_new));
    for (std::size_t i = 0; i < W; ++i) {
        V acc(T(0));
        if (i < g)
            for (std::size_t j = 0; j < ld; j += W) {
                const V e = simd::vexp(simd::load(s + i * ld + j) - V(shift[i]));
                simd::store(s + i * ld + j, e);
                acc += e;
            }
        part[i] = acc;
    }
    const V l_new = simd::load(l_old) * c + simd::reduce_lanes<T>(part, [](const auto& a, const auto& b) { return a + b; });
    alignas(64) T out_m[W], out_l[W], out_c[W];
    simd::store(out_m, m_new);
    simd::store(out_l, l_new);
    simd::store(out_c, c);
    for (std::size_t i = 0; i < g; ++i) {
        m[i] = out_m[i];
        l[i] = out_l[i];
        corr[i] = out_c[i];
    }
}

// One key tile of a streaming (online) softmax, for attention over keys in tiles.
// row: (n) scores of this tile (-inf where blocked) -> row: exp(score - m') where m' is the new
// running maximum; (m, l) are the row's running max and sum of exponentials, updated in place.
// Returns the factor (exp(m - m')) by which everything accumulated from earlier tiles must be
// scaled; a tile whose scores are all blocked becomes zeros and returns 1.
template <class T> constexpr T online_softmax_tile(T* row, std::size_t n, T& m, T& l) {
    const T tile_max = n ? max(row, n) : -std::numeric_limits<T>::infinity();
    if (tile_max == -std::numeric_limits<T>::infinity()) {
        for (std::size_t i = 0; i < n; ++i) row[i] = T(0);
        return T(1);
    }
    const T m_new = tile_max > m ? tile_max : m;
    const T correction = m == -std::numeric_limits<T>::infinity() ? T(0) : simd::vexp(m - m_new);
    l = l * correction + exp_shift_sum(row, n, m_new);
    m = m_new;
    return correction;
}

// online_softmax_tile over a tile of score rows: s: (rows, ld) at stride ld (whole vectors, -inf
// where blocked), m, l: (rows) running statistics -> s: exp(score - m'), corr: (rows) the factors.
// Vectors of rows at a time: the rows' maxima and sums come out of simd::reduce_lanes together, so
// the statistics of a block of rows are vector arithmetic rather than one latency chain per row.
template <class T> constexpr void online_softmax_rows(T* s, std::size_t rows, std::size_t ld, T* m, T* l, T* corr) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t r0 = 0;
    if constexpr (W > 1) {
        if (!simd::constant_evaluated())
            for (; r0 < rows; r0 += W) softmax_row_group(s + r0 * ld, rows - r0 < W ? rows - r0 : W, ld, m + r0, l + r0, corr + r0);
    }
    for (; r0 < rows; ++r0) corr[r0] = online_softmax_tile(s + r0 * ld, ld, m[r0], l[r0]);
}

// The softmax's backward for one row: dp: (n) the gradient of the probabilities p: (n) ->
// dp = p ∘ (dp - di) · scale, the gradient of the (scaled) scores; di = Σ p ∘ dp (attention
// passes rowsum(dO ∘ O), the same number without a pass over the keys).
template <class T> constexpr void softmax_backward(T* dp, const T* p, std::size_t n, T di, T scale) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    for (const std::size_t nv = simd::vector_part<T>(n); i < nv; i += W)
        simd::store(dp + i, simd::load(p + i) * (simd::load(dp + i) - simd::vec<T>(di)) * simd::vec<T>(scale));
    for (; i < n; ++i) dp[i] = p[i] * (dp[i] - di) * scale;
}

}  // namespace ctformer::kernels
