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
