// ctformer/kernels/sampling.hpp — the vector passes of drawing a token from a row of logits:
// shifting and scaling the row, finding the first value above a threshold (the argmax, a top-k
// scan), block sums and the walk through them that the draw makes. Each with its scalar loop as
// the reference (a constant expression, or a build without vectors, runs only that).
#pragma once
#include <cstddef>

#include "elementwise.hpp"
#include "softmax.hpp"

namespace ctformer::kernels {

// x: (n) -> (x - shift) / divisor, elementwise: the same values in any lane or the tail (vectors
// only where their division is IEEE's, simd::ieee_vectors).
template <class T> constexpr void shift_divide(T* x, std::size_t n, T shift, T divisor) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    if (simd::ieee_vectors<T> && !simd::constant_evaluated()) {
        const simd::vec<T> s(shift), d(divisor);
        for (const std::size_t nv = n - n % W; i < nv; i += W) simd::store(x + i, simd::vdiv(simd::load(x + i) - s, d));
    }
    for (; i < n; ++i) x[i] = (x[i] - shift) / divisor;
}

// The first i in [from, n) with x[i] > t, or n: whole vectors compared at once, the lanes of the
// one that holds it looked at one by one.
template <class T> constexpr std::size_t first_above(const T* x, std::size_t from, std::size_t n, T t) {
    std::size_t i = from;
#if CTFORMER_XSIMD
    if constexpr (simd::vectorized<T>)
        if (!simd::constant_evaluated()) {
            constexpr std::size_t W = simd::width<T>;
            const simd::vec<T> tv(t);
            while (i + W <= n && !xsimd::any(simd::load(x + i) > tv)) i += W;
        }
#endif
    for (; i < n; ++i)
        if (x[i] > t) return i;
    return n;
}

// x: (n) -> x[i] < floor ? 0 : x[i] (min-p's cut, relative to the top value's 1).
template <class T> constexpr void zero_below(T* x, std::size_t n, T floor) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    if (!simd::constant_evaluated()) {
        const simd::vec<T> f(floor), zero(T(0));
        for (const std::size_t nv = n - n % W; i < nv; i += W) {
            const simd::vec<T> v = simd::load(x + i);
            simd::store(x + i, simd::vselect(v < f, zero, v));
        }
    }
    for (; i < n; ++i) x[i] = x[i] < floor ? T(0) : x[i];
}

// The draw's blocks: x summed 64 values at a time (in T, vector accumulators; the last block may
// be shorter), block sums added in double. block_total and block_draw use the same sums.
inline constexpr std::size_t draw_block = 64;
template <class T> constexpr double block_sum(const T* x, std::size_t n) {
    constexpr std::size_t W = simd::width<T>;
    std::size_t i = 0;
    T s = T(0);
    if (!simd::constant_evaluated() && n == draw_block && draw_block % W == 0) {
        simd::vec<T> acc(T(0));
        for (; i < n; i += W) acc += simd::load(x + i);
        s = simd::hsum<T>(acc);
    }
    for (; i < n; ++i) s += x[i];
    return static_cast<double>(s);
}
template <class T> constexpr double block_total(const T* x, std::size_t n) {
    double total = 0;
    for (std::size_t b = 0; b < n; b += draw_block) total += block_sum(x + b, n - b < draw_block ? n - b : draw_block);
    return total;
}
// The index i the draw u in [0, block_total) falls on: blocks whose sum u passes are taken off
// whole, then within the block the first i with x[i] > 0 and u < x[i], each value taken off in
// turn. Past the end (rounding), the last i with x[i] > 0; n when none is.
template <class T> constexpr std::size_t block_draw(const T* x, std::size_t n, double u) {
    for (std::size_t b = 0; b < n; b += draw_block) {
        const std::size_t len = n - b < draw_block ? n - b : draw_block;
        if (b + len < n) {
            const double s = block_sum(x + b, len);
            if (!(u < s)) {
                u -= s;
                continue;
            }
        }
        for (std::size_t i = b; i < b + len; ++i) {
            if (!(x[i] > T(0))) continue;
            if (u < static_cast<double>(x[i])) return i;
            u -= static_cast<double>(x[i]);
        }
    }
    for (std::size_t i = n; i-- > 0;)  // rounding at the very end of the mass
        if (x[i] > T(0)) return i;
    return n;
}

}  // namespace ctformer::kernels
