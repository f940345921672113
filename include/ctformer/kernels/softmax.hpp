// ctformer/kernels/softmax.hpp — numerically safe softmax over one row of scores.
#pragma once
#include <cstddef>
#include <limits>

#include "elementwise.hpp"

namespace ctformer::kernels {

// row: (n) -> row: exp(row - shift), shift >= every value (the row's maximum: vexp_nonpositive);
// returns the sum of the new values (one horizontal reduction).
template <class T> constexpr T exp_shift_sum(T* row, std::size_t n, T shift) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    T s = T(0);
    if (!simd::constant_evaluated()) {
        const simd::vec<T> sv(shift);
        simd::vec<T> acc(T(0));
        for (const std::size_t nv = n - n % W; i < nv; i += W) {
            const simd::vec<T> e = simd::vexp_nonpositive(simd::load(row + i) - sv);
            simd::store(row + i, e);
            acc += e;
        }
        s = simd::hsum<T>(acc);
    }
    for (; i < n; ++i) {
        row[i] = simd::vexp_nonpositive(row[i] - shift);
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

// online_softmax_cols for the L columns of one V (a vector, or T for one column).
// (parameters: one column group's running state, each a pointer the caller's loop advances.)
template <class T, class V, std::size_t L, class Load, class Store>
constexpr void softmax_col_group(T* s, std::size_t n, std::size_t ld, const T* kend, std::size_t j0, T* m, T* l,
                                 T* corr, Load load, Store store) {
    const V ninf(-std::numeric_limits<T>::infinity()), zero(T(0)), one(T(1)), mo = load(m);
    // key j0 + j is blocked in the columns whose key end it reaches: keys below every column's end
    // are read as they are, keys past every column's end are zero probabilities without an exp
    // (a causal block's first columns), the others blocked (and stored so) where they reach it
    T kmin = kend[0], kmax = kend[0];
    for (std::size_t i = 1; i < L; ++i) {
        kmin = kend[i] < kmin ? kend[i] : kmin;
        kmax = kend[i] > kmax ? kend[i] : kmax;
    }
    const auto in_tile = [j0, n](T e) { return std::size_t(e) > j0 ? (std::size_t(e) - j0 < n ? std::size_t(e) - j0 : n) : 0; };
    const std::size_t open = in_tile(kmin), need = in_tile(kmax);
    const V ke = load(kend) - V(T(j0));
    V mx[2] = {ninf, ninf};  // two independent chains of maxima (one chain: bound by the max's latency)
    std::size_t j = 0;
    for (; j + 2 <= open; j += 2) {
        mx[0] = simd::vmax(mx[0], load(s + j * ld));
        mx[1] = simd::vmax(mx[1], load(s + (j + 1) * ld));
    }
    for (; j < need; ++j) {
        V x = load(s + j * ld);
        if (j >= open) {
            x = simd::vselect(V(T(j)) < ke, x, ninf);
            store(s + j * ld, x);
        }
        mx[0] = simd::vmax(mx[0], x);
    }
    const V tile_max = simd::vmax(mx[0], mx[1]), m_new = simd::vmax(mo, tile_max);
    // a tile with every score blocked leaves (m, l) and has factor 1; the first tile with a score, 0
    // (-inf - -inf, never formed: it is NaN, and no constant expression)
    const auto first = mo == ninf;
    const V c = simd::vselect(tile_max == ninf, one,
                              simd::vselect(first, zero, simd::vexp(simd::vselect(first, zero, mo) - simd::vselect(first, zero, m_new))));
    const V shift = simd::vselect(m_new == ninf, zero, m_new);
    V sum = zero;
    for (std::size_t j = 0; j < need; ++j) {
        const V e = simd::vexp_nonpositive(load(s + j * ld) - shift);
        store(s + j * ld, e);
        sum += e;
    }
    for (std::size_t j = need; j < n; ++j) store(s + j * ld, zero);
    store(m, m_new);
    store(l, load(l) * c + sum);
    store(corr, c);
}

// online_softmax_tile down the columns of a transposed score tile: s: (n, R) at stride R, row j
// the scores of key j0 + j for R query rows (R a whole number of vectors); the keys of column r
// end at kend[r] (keys past it are blocked, whatever s holds); m, l: (R) running statistics ->
// s: exp(score - m'), corr: (R) the factors. Every statistic is a vertical vector operation: no
// horizontal reductions however few the keys.
template <class T>
constexpr void online_softmax_cols(T* s, std::size_t n, std::size_t R, const T* kend, std::size_t j0, T* m, T* l, T* corr) {
    constexpr std::size_t W = simd::width<T>;
    if (simd::constant_evaluated()) {
        auto ld = [](const T* p) { return *p; };
        auto st = [](T* p, const T& x) { *p = x; };
        for (std::size_t r = 0; r < R; ++r) softmax_col_group<T, T, 1>(s + r, n, R, kend + r, j0, m + r, l + r, corr + r, ld, st);
        return;
    }
    auto ld = [](const T* p) { return simd::load(p); };
    auto st = [](T* p, const simd::vec<T>& x) { simd::store(p, x); };
    for (std::size_t r = 0; r < R; r += W)
        softmax_col_group<T, simd::vec<T>, W>(s + r, n, R, kend + r, j0, m + r, l + r, corr + r, ld, st);
}

// s: (n, R) at stride R, columns of exponentials whose sums are l: (R) -> probabilities (s / l); a
// column with l = 0 (every key blocked) stays zero. Attention normalizes here when a block's keys
// fit one tile: (n x R) products instead of (R x Dh) on its output, and no pass after the values.
template <class T> constexpr void normalize_cols(T* s, std::size_t n, std::size_t R, const T* l) {
    constexpr std::size_t W = simd::width<T>;
    if (simd::constant_evaluated()) {
        for (std::size_t r = 0; r < R; ++r) {
            const T inv = l[r] > T(0) ? T(1) / l[r] : T(0);
            for (std::size_t j = 0; j < n; ++j) s[j * R + r] *= inv;
        }
        return;
    }
    using V = simd::vec<T>;
    for (std::size_t r = 0; r < R; r += W) {
        const V lv = simd::load(l + r), inv = simd::vselect(lv > V(T(0)), V(T(1)) / lv, V(T(0)));
        for (std::size_t j = 0; j < n; ++j) simd::store(s + j * R + r, simd::load(s + j * R + r) * inv);
    }
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
