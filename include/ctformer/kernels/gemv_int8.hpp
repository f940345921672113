// ctformer/kernels/gemv_int8.hpp — int8 and int4 weights times int8 activations (the formats
// int8_dot<F>, ct::weights<F, ct::int8_activations>): integer dot products in the inner loop.
//
//   c: (M, N) (+)= a: (M, K) · W: (K, N) + bias, then act, where each row of a is first quantized
//   per block of B inputs (llama.cpp's Q8_0 rule: s = max|x| / 127, q = round(x / s)) and
//   c[n] = Σ_blocks s_a · Σ_block q_a · q_w  · s_w   (groups: s_w per group, inside the block sum).
//
// B is 32, or the largest of 16, 8, 4 that divides K (grouped formats: at most the group). The integer sums
// are exact; the float work is one conversion and one multiply-add per block and output. Rows of
// a are quantized 1024 inputs at a time (256 in compact builds) into the stack (no scratch), four
// rows at a time. A block holding NaN or inf gets a NaN scale: the outputs it reaches are NaN, as
// a float product would make them non-finite (never a finite value made up from the rest).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../core/quant.hpp"
#include "../core/schedule.hpp"
#include "../simd/dot.hpp"
#include "gemm.hpp"

// AMX tiles (Sapphire Rapids and later, Linux): compiled where the target has them (-march=native
// on such a machine), used where the kernel grants them; elsewhere the VNNI/dot-product kernels.
#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__linux__) && CTFORMER_XSIMD && !defined(CTFORMER_NO_AMX)
#define CTFORMER_AMX 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define CTFORMER_AMX 0
#endif

namespace ctformer::kernels {

// One row of activations quantized for the integer dot: q (int8; int4 formats: each 8 inputs
// stored evens first, x0 x2 x4 x6 x1 x3 x5 x7, the order a word's low and high nibbles hold),
// scale[b] and (int4) sum[b] = Σ q of block b.
struct q8_row {
    const std::int8_t* q;
    const float* scale;
    const std::int32_t* sum;
};

// Inputs per activation block for K inputs of format Fmt.
template <class Fmt> constexpr std::size_t q8_block(std::size_t K) {
    constexpr std::size_t cap = Fmt::group && Fmt::group < 32 ? Fmt::group : 32;
    std::size_t b = cap;
    while (K % b) b /= 2;
    return b;
}

namespace detail {
// max |x[0..n)|, or NaN when some x is NaN or inf (Σ x·0 is then NaN); and q[j] = x[j]·inv
// rounded to nearest (even): vectors where n is whole vectors.
inline float abs_max(const float* x, std::size_t n) {
    float m = 0, z = 0;
    std::size_t k = 0;
#if CTFORMER_XSIMD
    if constexpr (simd::vectorized<float>) {
        if (n % simd::width<float> == 0) {
            simd::vec<float> v(0.f), zv(0.f);
            for (; k < n; k += simd::width<float>) {
                const simd::vec<float> xk = simd::load(x + k);
                v = xsimd::max(v, xsimd::abs(xk));
                zv = zv + xk * simd::vec<float>(0.f);
            }
            m = simd::hmax<float>(v);
            z = simd::hsum<float>(zv);
        }
    }
#endif
    for (; k < n; ++k) {
        m = std::fabs(x[k]) > m ? std::fabs(x[k]) : m;
        z += x[k] * 0.f;
    }
    return z == 0.f ? m : std::numeric_limits<float>::quiet_NaN();
}
inline void round_scaled(const float* x, std::size_t n, float inv, std::int32_t* q) {
    std::size_t k = 0;
#if CTFORMER_XSIMD
    if constexpr (simd::vectorized<float>) {
        if (n % simd::width<float> == 0)
            for (; k < n; k += simd::width<float>)
                xsimd::nearbyint_as_int(simd::load(x + k) * simd::vec<float>(inv)).store_unaligned(q + k);
    }
#endif
    for (; k < n; ++k) q[k] = static_cast<std::int32_t>(std::nearbyint(x[k] * inv));
}
}  // namespace detail

namespace detail {
// q[0..B) <- qi, straight or each 8 inputs evens first (the int4 formats' byte order)
template <bool EvensFirst> inline void store_q8(const std::int32_t* qi, std::size_t B, std::int8_t* q) {
    for (std::size_t j = 0; j < B; ++j) {
        const std::size_t i = j % 8;
        q[EvensFirst ? j - i + (i % 2) * 4 + i / 2 : j] = static_cast<std::int8_t>(qi[j]);
    }
}
#if CTFORMER_XSIMD
// quantize_row_q8's values for blocks of B = 32 or 16 (whole vectors), a vector's width of blocks at a time:
// their maxima reduced together (one butterfly for all), their sums likewise; no block's chain
// waits for another's. false (nothing meaningful written) where
// the row holds NaN or inf, whose blocks the one-block-at-a-time path handles.
template <class Fmt, std::size_t B>
inline bool quantize_row_q8_blocks(const float* x, std::size_t K, std::int8_t* q, float* scale, std::int32_t* sum) {
    using vt = simd::vec<float>;
    constexpr std::size_t W = simd::width<float>, NV = B / W;
    constexpr bool shuffled = Fmt::per_word == 8 && simd::lane_shuffle8;  // (int4's order by a lane shuffle)
    constexpr bool reorder = Fmt::per_word == 8 && !shuffled;            // (... or through memory)
    const std::size_t blocks = K / B;
    alignas(64) float inv[W], step[W], total[W];
    alignas(64) std::int32_t qi[B];
    for (std::size_t b0 = 0; b0 < blocks; b0 += W) {
        const std::size_t n = blocks - b0 < W ? blocks - b0 : W;
        vt m[W];
        auto finite = vt(0.f) <= vt(0.f);
#pragma GCC unroll 16
        for (std::size_t j = 0; j < W; ++j) {
            m[j] = vt(0.f);
            if (j < n)
#pragma GCC unroll 8
                for (std::size_t i = 0; i < NV; ++i) {
                    const vt a = xsimd::abs(simd::load(x + (b0 + j) * B + i * W));
                    m[j] = xsimd::max(m[j], a);
                    finite = finite && a <= vt(std::numeric_limits<float>::max());
                }
        }
        if (!xsimd::all(finite)) return false;
        alignas(64) float mx[W];
        simd::hmax_lanes<float>(m).store_aligned(mx);
        for (std::size_t j = 0; j < n; ++j)  // (scalar divisions: IEEE's wherever vectors' are not)
            inv[j] = mx[j] > 0 ? 127.f / mx[j] : 0.f, step[j] = mx[j] / 127.f;
        vt t[W];
#pragma GCC unroll 16
        for (std::size_t j = 0; j < W; ++j) {
            simd::ivec tj(0);
            if (j < n) {
#pragma GCC unroll 8
                for (std::size_t i = 0; i < NV; ++i) {
                    simd::ivec r = xsimd::nearbyint_as_int(simd::load(x + (b0 + j) * B + i * W) * vt(inv[j]));
                    tj = tj + r;
                    if constexpr (shuffled) r = simd::evens_first8(r);
                    if constexpr (reorder) r.store_aligned(qi + i * W);
                    else simd::store_low_bytes(r, q + (b0 + j) * B + i * W);
                }
                if constexpr (reorder) store_q8<true>(qi, B, q + (b0 + j) * B);
            }
            t[j] = xsimd::to_float(tj);  // (|Σ| <= B · 127: exact)
        }
        simd::hsum_lanes<float>(t).store_aligned(total);
        for (std::size_t j = 0; j < n; ++j) scale[b0 + j] = step[j], sum[b0 + j] = static_cast<std::int32_t>(total[j]);
    }
    return true;
}
#endif
}  // namespace detail

// x: K floats (finite) -> q, scale, sum as q8_row describes, blocks of B (<= 32). |x · 127/m| <= 127
// rounds to at most 127: no clamp.
template <class Fmt> inline void quantize_row_q8(const float* x, std::size_t K, std::size_t B, std::int8_t* q, float* scale,
                                                 std::int32_t* sum) {
#if CTFORMER_XSIMD
    if constexpr (simd::vectorized<float> && 16 % simd::width<float> == 0) {
        if (B == 32 && detail::quantize_row_q8_blocks<Fmt, 32>(x, K, q, scale, sum)) return;
        if (B == 16 && detail::quantize_row_q8_blocks<Fmt, 16>(x, K, q, scale, sum)) return;
    }
#endif
    alignas(64) std::int32_t qi[32];
    for (std::size_t k0 = 0, blk = 0; k0 < K; k0 += B, ++blk) {
        const float m = detail::abs_max(x + k0, B);
        if (m != m) {  // NaN or inf in the block: q = 0, scale NaN
            for (std::size_t j = 0; j < B; ++j) qi[j] = 0;
        } else {
            detail::round_scaled(x + k0, B, m > 0 ? 127.f / m : 0.f, qi);
        }
        std::int32_t total = 0;
        for (std::size_t j = 0; j < B; ++j) total += qi[j];
        detail::store_q8<Fmt::per_word == 8>(qi, B, q + k0);
        scale[blk] = m / 127.f;
        sum[blk] = total;
    }
}

namespace detail {

// The panels of one weight seen from K-chunk [k0, k0 + kc): the tile's K is the chunk's, the
// panels' stride the whole K's.
template <class Fmt> struct q8_panels {
    quant_panels<Fmt> w;
    std::size_t K, k0;
};

// (I: simd::ivec, a template parameter so that the branch for the other kind is discarded)
template <class I = simd::ivec> inline I load_ivec(const std::uint32_t* p) {
    if constexpr (std::is_same_v<I, std::int32_t>) return std::bit_cast<std::int32_t>(*p);
#if CTFORMER_XSIMD
    else return I::load_unaligned(reinterpret_cast<const std::int32_t*>(p));
#endif
}
inline simd::ivec splat_word(const std::int8_t* p) {  // 4 bytes, in every lane
    std::int32_t w;
    std::memcpy(&w, p, 4);
    return simd::ivec(w);
}
template <class I = simd::ivec> inline simd::vec<float> to_float(const I& x) {
    if constexpr (std::is_same_v<I, std::int32_t>) return static_cast<float>(x);
#if CTFORMER_XSIMD
    else return xsimd::to_float(x);
#endif
}

// int6: the top two bits of word row kw's fields (core/quant.hpp's high plane) onto the bytes of
// its low nibbles (evens) and high nibbles (odds), as unsigned levels (two's complement: + 32).
template <class Fmt, class I = simd::ivec> inline void join_top_bits(I& lo, I& hi, const std::uint32_t* high, std::size_t kw) {
    I h = load_ivec<I>(high + kw / 2 * gemm_tile<float>::NR);
    if constexpr (!unsigned_levels<Fmt>) h = h ^ I(std::int32_t(0xaaaaaaaau));  // (bit 5 of each field)
    const I m = I(0x30303030);
    if (kw % 2) lo = lo | (h & m), hi = hi | (I(h >> 2) & m);  // (>> 2 arithmetic: the bits it brings in are masked)
    else lo = lo | (I(h << 4) & m), hi = hi | (I(h << 2) & m);
}

// How far ahead of its reads an int4 GEMV requests its weights.
inline constexpr std::size_t gemv_ahead_bytes = 2048;

// c: (R, Q·NR) at ldc (+)= a: R quantized rows (K inputs) · Q panels + bias, then act.
template <class Fmt, std::size_t R, std::size_t Q, class Act>
inline void gemv_int8_tile(std::size_t K, const q8_row* a, std::size_t lda, const q8_panels<Fmt>& b, float* c,
                           std::size_t ldc, const float* bias, const Act& act, bool accumulate) {
    using tile = gemm_tile<float>;
    using vt = simd::vec<float>;
    using iv = simd::ivec;
    constexpr std::size_t W = tile::W, NV = tile::NV, NR = tile::NR, P = Fmt::per_word, G = Fmt::group;
    const std::size_t B = q8_block<Fmt>(b.K), pw = b.K / P * NR, ps = (G ? b.K / G : 1) * NR;
    const std::uint32_t* words = b.w.words + b.k0 / P * NR;
    [[maybe_unused]] const std::uint32_t* high = b.w.high ? b.w.high + b.k0 / 16 * NR : nullptr;  // (int6: the top bits)
    [[maybe_unused]] const std::size_t ph = b.K / 16 * NR;
    constexpr bool six = has_high_plane<Fmt>;
    // int4 GEMVs outrun the hardware prefetchers: each block requests its panels' lines a few blocks
    // ahead (measured: scripts/performance_log.md)
    constexpr bool streams_ahead = P == 8 && R <= 2 && !tile::compact;
    [[maybe_unused]] const std::size_t block_bytes = B / P * NR * sizeof(std::uint32_t);
    [[maybe_unused]] const std::size_t ahead = (gemv_ahead_bytes + block_bytes - 1) / block_bytes * block_bytes;
    vt acc[R][Q][NV];
#pragma GCC unroll 4
    for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
            for (std::size_t v = 0; v < NV; ++v) acc[r][q][v] = vt(0.f);
    for (std::size_t blk = 0; blk < K / B; ++blk) {
        if constexpr (streams_ahead)
            for (std::size_t q = 0; q < Q; ++q) {
                // (an address, not a pointer into the array: it may lie past the weights' end)
                const std::uintptr_t next = reinterpret_cast<std::uintptr_t>(words + q * pw + blk * (B / P) * NR) + ahead;
                for (std::size_t l = 0; l < block_bytes; l += line_bytes) prefetch_l1(reinterpret_cast<const char*>(next + l));
            }
        iv isum[R][Q][NV];
#pragma GCC unroll 4
        for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                for (std::size_t v = 0; v < NV; ++v) isum[r][q][v] = iv(0);
        for (std::size_t kw = blk * B / P; kw < (blk + 1) * B / P; ++kw) {
            iv w[Q][NV];
#pragma GCC unroll 4
            for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                for (std::size_t v = 0; v < NV; ++v) w[q][v] = load_ivec(words + q * pw + kw * NR + v * W);
            if constexpr (P == 4) {  // int8: word kw holds inputs 4kw .. 4kw+3
                if constexpr (simd::exact_u8_dot) {  // w + 128, one dpbusd a product; 128·Σ q_a comes off below
#pragma GCC unroll 4
                    for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                        for (std::size_t v = 0; v < NV; ++v) w[q][v] = w[q][v] ^ iv(std::int32_t(0x80808080u));
                }
                // without: |w| formed once a weight vector for the pass's rows, the sign moved onto x
                // (dot_i8's roles swapped; abs_i8 is w itself where dot_i8 forms no |x|: NEON, scalar)
                [[maybe_unused]] iv wa[Q][NV];
                if constexpr (!simd::exact_u8_dot)
                    for (std::size_t q = 0; q < Q; ++q)
                        for (std::size_t v = 0; v < NV; ++v) wa[q][v] = simd::abs_i8(w[q][v]);
#pragma GCC unroll 4
                for (std::size_t r = 0; r < R; ++r) {
                    const iv x = splat_word(a[r * lda].q + 4 * kw);
#pragma GCC unroll 4
                    for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                        for (std::size_t v = 0; v < NV; ++v) {
                            if constexpr (simd::exact_u8_dot) isum[r][q][v] = simd::dot_u8_full(isum[r][q][v], w[q][v], x);
                            else isum[r][q][v] = simd::dot_i8(isum[r][q][v], x, w[q][v], wa[q][v]);
                        }
                }
            } else {  // int4: each nibble + 8 (flip its top bit: unsigned; unsigned levels as they are),
                      // evens against the low nibbles, odds against the high ones; Σ q_a · 8 comes off below.
                      // int6: the top bits joined to the nibbles' bytes, + 32 (flip bit 5); Σ q_a · 32 comes off
                iv lo[Q][NV], hi[Q][NV];
#pragma GCC unroll 4
                for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                    for (std::size_t v = 0; v < NV; ++v) {
                        const iv u = unsigned_levels<Fmt> || six ? w[q][v] : w[q][v] ^ iv(std::int32_t(0x88888888u));
                        lo[q][v] = u & iv(0x0f0f0f0f), hi[q][v] = iv(u >> 4) & iv(0x0f0f0f0f);
                        if constexpr (six) join_top_bits<Fmt>(lo[q][v], hi[q][v], high + q * ph + v * W, kw);
                    }
#pragma GCC unroll 4
                for (std::size_t r = 0; r < R; ++r) {
                    const iv xe = splat_word(a[r * lda].q + 8 * kw), xo = splat_word(a[r * lda].q + 8 * kw + 4);
#pragma GCC unroll 4
                    for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                        for (std::size_t v = 0; v < NV; ++v)
                            isum[r][q][v] = six ? simd::dot_u8(simd::dot_u8(isum[r][q][v], lo[q][v], xe), hi[q][v], xo)
                                                : simd::dot_u4x2(isum[r][q][v], lo[q][v], xe, hi[q][v], xo);  // (partial)
                }
            }
        }
        if constexpr (P == 4 && simd::exact_u8_dot)
#pragma GCC unroll 4
            for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
                for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                    for (std::size_t v = 0; v < NV; ++v) isum[r][q][v] = isum[r][q][v] - iv(128 * a[r * lda].sum[blk]);
        [[maybe_unused]] float sa_sum[R];  // (a minimum per group: s_a · Σ q_a of the block)
        if constexpr (has_min<Fmt>)
            for (std::size_t r = 0; r < R; ++r) sa_sum[r] = a[r * lda].scale[blk] * static_cast<float>(a[r * lda].sum[blk]);
#pragma GCC unroll 4
        for (std::size_t r = 0; r < R; ++r) {
            const vt sa = vt(a[r * lda].scale[blk]);
#pragma GCC unroll 4
            for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                for (std::size_t v = 0; v < NV; ++v) {
                    if constexpr (G) {  // a block lies in one group (B <= G)
                        const std::size_t at = q * ps + (b.k0 + blk * B) / G * NR + v * W;
                        const vt sw = group_scale(b.w, at);
                        iv exact = isum[r][q][v];
                        if constexpr (P == 8) {  // (a block is at most 4 words of int4: dot_u4x2's bound)
                            if constexpr (!six) exact = simd::partial_sum(exact);
                            if constexpr (!unsigned_levels<Fmt>) exact = exact - iv((six ? 32 : 8) * a[r * lda].sum[blk]);
                        }
                        acc[r][q][v] = simd::fma<float>(to_float(exact), sa * sw, acc[r][q][v]);
                        if constexpr (has_min<Fmt>)  // - m · s_a · Σ q_a of the block
                            acc[r][q][v] = simd::fma<float>(group_min(b.w, at), vt(-sa_sum[r]), acc[r][q][v]);
                    } else {
                        acc[r][q][v] = simd::fma<float>(to_float(isum[r][q][v]), sa, acc[r][q][v]);
                    }
                }
        }
    }
    store_scaled_tile<R, Q>(acc, b.w.row_scales(), ps, c, ldc, bias, act, accumulate);
}

template <class Fmt> struct panel_source<q8_panels<Fmt>> {
    // One row: two panels side by side, but nibble words (int4, int6) on 16-register tiles (MR 6:
    // AVX2, SSE, NEON) one — two streams' nibble planes and sums spill there, and the requests made
    // ahead (streams_ahead) keep one stream's loads in flight
    static constexpr std::size_t streams(std::size_t R) {
        if (gemm_tile<float>::compact || R > 1) return 1;
        return Fmt::per_word == 8 && gemm_tile<float>::MR < 12 ? 1 : 2;
    }
    // Four rows a pass where their integer sums take at most 8 vectors (AVX2, AVX-512), else two:
    // more spill them, and a spilled sum's store and reload chain each word's step
    static constexpr std::size_t pass_rows(std::size_t R) { return R * gemm_tile<float>::NV <= 8 ? R : 2; }
    static q8_panels<Fmt> at(const q8_panels<Fmt>& b, std::size_t p, std::size_t) { return {b.w.panel(p, b.K), b.K, b.k0}; }
    template <std::size_t R, std::size_t Q, class Act>
    static void tile(std::size_t K, const q8_row* a, std::size_t lda, const q8_panels<Fmt>& b, float* c, std::size_t ldc,
                     const float* bias, const Act& act, bool accumulate) {
        gemv_int8_tile<Fmt, R, Q>(K, a, lda, b, c, ldc, bias, act, accumulate);
    }
};

#if CTFORMER_AMX
// Sixteen rows at a time on AMX tiles (Intel's TMUL: a 16-row tile product per instruction): each
// activation block's integer sums for 16 rows × 16 outputs in one tile product (signed × signed: no
// offset). A section of blocks' products and stores first, then their sums taken into the float
// sums exactly as gemv_int8_tile takes its register sums (the same operations in the same order:
// the same bits); a panel's two halves of 16 outputs one after the other, a half's float sums in
// registers (tile loads and stores share the load and store ports with the vector code: spilled
// sums doubled that traffic). int4 weights: each block's half panel unpacked to int8 words first.
template <class Fmt> struct amx_panels {
    q8_panels<Fmt> p;
    std::size_t a_stride, s_stride;  // bytes between the quantized rows; elements between their scales (and sums)
};
inline constexpr std::size_t amx_rows = 16, amx_section = 16;  // blocks whose products are issued together
inline constexpr std::size_t amx_chunk = 1024, amx_max_rows = 4 * amx_rows;  // inputs and rows quantized at a time
// The tile shapes for blocks of B inputs: A (tiles 0, 3) 16 rows × B bytes, the weights' half
// panel (tiles 1, 2) B/4 word rows × 64 bytes, the sums (tiles 4, 5) 16 rows × 16 int32.
inline void amx_configure(std::size_t B) {
    struct alignas(64) config {
        std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
        std::uint16_t colsb[16] = {};
        std::uint8_t rows[16] = {};
    } c;
    for (int t : {0, 3}) c.colsb[t] = static_cast<std::uint16_t>(B), c.rows[t] = amx_rows;
    for (int t : {1, 2}) c.colsb[t] = 64, c.rows[t] = static_cast<std::uint8_t>(B / 4);
    for (int t : {4, 5}) c.colsb[t] = 64, c.rows[t] = amx_rows;
    asm volatile("ldtilecfg %0" : : "m"(c));  // (GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes)
}
// One block's product on tile set 0 (tiles 0, 1 -> 4) or 1 (3, 2 -> 5), its sums out into (16, 16)
// int32. (The intrinsics take the tile numbers as literals.)
template <int Set>
inline void amx_block(const std::int8_t* a, std::size_t a_stride, const std::uint32_t* w, long w_stride, std::int32_t* sums) {
    const long stride = static_cast<long>(a_stride);
    if constexpr (Set == 0) {
        _tile_loadd(0, a, stride);
        _tile_loadd(1, w, w_stride);
        _tile_zero(4);
        _tile_dpbssd(4, 0, 1);
        _tile_stored(4, sums, 64);
    } else {
        _tile_loadd(3, a, stride);
        _tile_loadd(2, w, w_stride);
        _tile_zero(5);
        _tile_dpbssd(5, 3, 2);
        _tile_stored(5, sums, 64);
    }
}
// One block's int4 half panel (B/8 word rows of 16 outputs, 8 levels a word) as int8 words for the
// tile: word row j's low nibbles (the block's inputs 8j, 8j+2, .., as the quantized activations
// order them) in row 2j, its high nibbles in row 2j + 1; signed levels (u = level + 8) as u − 8
// (bytewise: u + 120, then the sign bit flipped), so the tile product is the register kernel's
// exact sum. int6: the top bits joined first (high: the block's high words), u − 32 as u + 96, flipped.
template <class Fmt>
inline void amx_unpack_bytes(const std::uint32_t* w, [[maybe_unused]] const std::uint32_t* high, std::size_t B, std::uint32_t* out) {
    using iv = simd::ivec;
    constexpr bool six = has_high_plane<Fmt>;
    const iv bias(six ? 0x60606060 : 0x78787878);
    for (std::size_t j = 0; j < B / 8; ++j) {
        iv u = iv::load_unaligned(reinterpret_cast<const std::int32_t*>(w + j * 32));
        if constexpr (!unsigned_levels<Fmt> && !six) u = u ^ iv(std::int32_t(0x88888888u));  // (two's complement nibbles: u = level + 8)
        iv lo = u & iv(0x0f0f0f0f), hi = iv(u >> 4) & iv(0x0f0f0f0f);
        if constexpr (six) join_top_bits<Fmt>(lo, hi, high, j);
        if constexpr (!unsigned_levels<Fmt>) {
            lo = (lo + bias) ^ iv(std::int32_t(0x80808080u));
            hi = (hi + bias) ^ iv(std::int32_t(0x80808080u));
        }
        lo.store_aligned(reinterpret_cast<std::int32_t*>(out + 2 * j * 16));
        hi.store_aligned(reinterpret_cast<std::int32_t*>(out + (2 * j + 1) * 16));
    }
}
template <class Fmt> struct panel_source<amx_panels<Fmt>> {
    static constexpr std::size_t streams(std::size_t) { return 1; }
    static constexpr std::size_t pass_rows(std::size_t R) { return R; }
    static amx_panels<Fmt> at(const amx_panels<Fmt>& b, std::size_t p, std::size_t K) {
        return {panel_source<q8_panels<Fmt>>::at(b.p, p, K), b.a_stride, b.s_stride};
    }
    // R rows: R / 16 groups of sixteen, one after another over the same weights (int4: unpacked
    // once for all of them, a panel half at a time).
    template <std::size_t R, std::size_t Q, class Act>
    static void tile(std::size_t K, const q8_row* a, std::size_t, const amx_panels<Fmt>& b, float* c, std::size_t ldc,
                     const float* bias, const Act& act, bool accumulate) {
        static_assert(R % amx_rows == 0 && Q == 1 && gemm_tile<float>::NR == 32 && gemm_tile<float>::W == 16);
        constexpr std::size_t P = Fmt::per_word, NR = 32, W = 16;
        const std::size_t B = q8_block<Fmt>(b.p.K), blocks = K / B;
        const std::uint32_t* words = b.p.w.words + b.p.k0 / P * NR;
        [[maybe_unused]] const std::uint32_t* high = b.p.w.high ? b.p.w.high + b.p.k0 / 16 * NR : nullptr;
        [[maybe_unused]] alignas(64) std::uint32_t unpacked[P == 8 ? amx_chunk / 4 * W : 1];  // (int4: the half panel's words)
        for (std::size_t v = 0; v < 2; ++v) {
            amx_half h{words + v * W, NR * 4, B, blocks, v};
            if constexpr (P == 8) {
                for (std::size_t blk = 0; blk < blocks; ++blk)
                    amx_unpack_bytes<Fmt>(words + blk * (B / P) * NR + v * W, high ? high + blk * (B / 16) * NR + v * W : nullptr, B,
                                         unpacked + blk * (B / 4) * W);
                h.w = unpacked, h.w_stride = W * 4;
            }
            for (std::size_t g = 0; g < R / amx_rows; ++g) {
                const std::size_t r0 = g * amx_rows;
                const q8_row rows{a[0].q + r0 * b.a_stride, a[0].scale + r0 * b.s_stride, a[0].sum + r0 * b.s_stride};
                amx_group(h, rows, b, c + r0 * ldc, ldc, bias, act, accumulate);
            }
        }
    }
    // One panel half (16 outputs) of the weights as the tiles read them: int8 words, B/4 word rows a
    // block, w_stride bytes apart.
    struct amx_half {
        const std::uint32_t* w;
        long w_stride;
        std::size_t B, blocks, v;
    };
    // 16 rows' outputs of one panel half: a section of blocks' products and stores, then their sums
    // scaled into the float sums in registers.
    template <class Act>
    static void amx_group(const amx_half& h, const q8_row& a, const amx_panels<Fmt>& b, float* c, std::size_t ldc,
                          const float* bias, const Act& act, bool accumulate) {
        using vt = simd::vec<float>;
        constexpr std::size_t R = amx_rows, W = 16, NR = 32, G = Fmt::group;
        const std::size_t ss = b.s_stride, bw = h.B / 4 * static_cast<std::size_t>(h.w_stride) / 4;  // (a block's words)
        alignas(64) std::int32_t sums[amx_section][R][W];  // (block of the section, row, output)
        vt acc[R];
#pragma GCC unroll 16
        for (std::size_t r = 0; r < R; ++r) acc[r] = vt(0.f);
        for (std::size_t b0 = 0; b0 < h.blocks; b0 += amx_section) {
            const std::size_t b1 = b0 + amx_section < h.blocks ? b0 + amx_section : h.blocks;
            for (std::size_t blk = b0; blk < b1; ++blk) {
                if (blk % 2 == 0) amx_block<0>(a.q + blk * h.B, b.a_stride, h.w + blk * bw, h.w_stride, sums[blk - b0][0]);
                else amx_block<1>(a.q + blk * h.B, b.a_stride, h.w + blk * bw, h.w_stride, sums[blk - b0][0]);
            }
            for (std::size_t blk = b0; blk < b1; ++blk) {
                const std::size_t at = (b.p.k0 + blk * h.B) / (G ? G : 1) * NR + h.v * W;
                const vt sw = G ? group_scale(b.p.w, at) : vt(1.f);
#pragma GCC unroll 16
                for (std::size_t r = 0; r < R; ++r) {
                    const vt isum = xsimd::to_float(simd::ivec::load_aligned(sums[blk - b0][r]));
                    const float sr = a.scale[r * ss + blk];
                    if constexpr (G) {
                        acc[r] = simd::fma<float>(isum, vt(sr) * sw, acc[r]);
                        if constexpr (has_min<Fmt>)
                            acc[r] = simd::fma<float>(group_min(b.p.w, at), vt(-(sr * static_cast<float>(a.sum[r * ss + blk]))), acc[r]);
                    } else {
                        acc[r] = simd::fma<float>(isum, vt(sr), acc[r]);
                    }
                }
            }
        }
#pragma GCC unroll 16
        for (std::size_t r = 0; r < R; ++r) {
            vt y = acc[r];
            if (!G && b.p.w.scales) y = y * load_scale(b.p.w.scales + h.v * W);
            if (accumulate) y = y + simd::load(c + r * ldc + h.v * W);
            if (bias) y = y + simd::load(bias + h.v * W);
            simd::store(c + r * ldc + h.v * W, apply_vec<float>(act, y));
        }
    }
};
// Whether this process may use AMX tiles (Linux grants them on request, once).
inline bool amx_ready() {
    static const bool ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
    return ok;
}
#endif

}  // namespace detail

// gemm_panels' contract for the int8-activation formats (any M: four rows at a time).
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
template <class Fmt, class Act>
inline void gemm_panels_int8(std::size_t M, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                             const quant_panels<Fmt>& b, float* c, std::size_t ldc, const float* bias, const Act& act,
                             bool accumulate) {
    constexpr std::size_t chunk = gemm_tile<float>::compact ? 256 : 1024;  // inputs quantized at a time
    constexpr std::size_t rows = small_m_rows;
    // More rows: parts of whole groups of four rows over the current executor, each quantizing its own
    if (schedule::split_row_groups(M, N, K, rows, [&](std::size_t g0, std::size_t g1) {
            const std::size_t m0 = g0 * rows, m1 = g1 * rows < M ? g1 * rows : M;
            gemm_panels_int8(m1 - m0, N, K, a + m0 * lda, lda, b, c + m0 * ldc, ldc, bias, act, accumulate);
        }))
        return;
    const std::size_t B = q8_block<Fmt>(K);
    std::size_t m_amx = 0;  // rows done on AMX tiles: whole groups of sixteen
#if CTFORMER_AMX
    constexpr std::size_t R = detail::amx_rows;
    if constexpr (Fmt::per_word == 4 || Fmt::per_word == 8) m_amx = M >= R && B >= 16 && detail::amx_ready() ? M / R * R : 0;
    if (m_amx) {  // (up to four groups of sixteen rows a pass: int4 weights unpacked once for them)
        static_assert(chunk == detail::amx_chunk);
        constexpr std::size_t RM = detail::amx_max_rows;
        alignas(64) std::int8_t q[RM][chunk];
        alignas(64) float scale[RM][chunk / 16];  // (blocks of 16 inputs or more)
        alignas(64) std::int32_t sum[RM][chunk / 16];
        const q8_row view{q[0], scale[0], sum[0]};
        detail::amx_configure(B);
        for (std::size_t m0 = 0; m0 < m_amx;) {
            const std::size_t mr = m_amx - m0 >= RM ? RM : m_amx - m0 >= 2 * R ? 2 * R : R;
            for (std::size_t k0 = 0; k0 < K; k0 += chunk) {
                const std::size_t kc = K - k0 < chunk ? K - k0 : chunk;
                for (std::size_t r = 0; r < mr; ++r) quantize_row_q8<Fmt>(a + (m0 + r) * lda + k0, kc, B, q[r], scale[r], sum[r]);
                const detail::amx_panels<Fmt> src{{b, K, k0}, chunk, chunk / 16};
                const bool first = k0 == 0, last = k0 + kc == K;
                const float* bk = first ? bias : nullptr;
                const bool acc = accumulate || !first;
                float* cm = c + m0 * ldc;
                const auto run = [&]<std::size_t Rows>(const auto& op) {
                    detail::gemv_panels<float, Rows>(N, kc, &view, 1, src, cm, ldc, bk, op, acc);
                };
                if (mr == RM) last ? run.template operator()<RM>(act) : run.template operator()<RM>(identity_op{});
                else if (mr == 2 * R) last ? run.template operator()<2 * R>(act) : run.template operator()<2 * R>(identity_op{});
                else last ? run.template operator()<R>(act) : run.template operator()<R>(identity_op{});
            }
            m0 += mr;
        }
        _tile_release();
    }
#endif
    alignas(64) std::int8_t q[rows][chunk];
    alignas(64) float scale[rows][chunk / 4];
    alignas(64) std::int32_t sum[rows][chunk / 4];
    q8_row view[rows];
    for (std::size_t m0 = m_amx; m0 < M; m0 += rows) {
        const std::size_t mr = M - m0 < rows ? M - m0 : rows;
        for (std::size_t k0 = 0; k0 < K; k0 += chunk) {
            const std::size_t kc = K - k0 < chunk ? K - k0 : chunk;
            for (std::size_t r = 0; r < mr; ++r) {
                quantize_row_q8<Fmt>(a + (m0 + r) * lda + k0, kc, B, q[r], scale[r], sum[r]);
                view[r] = {q[r], scale[r], sum[r]};
            }
            const detail::q8_panels<Fmt> src{b, K, k0};
            const bool first = k0 == 0, last = k0 + kc == K;
            float* cm = c + m0 * ldc;
            if (last)
                detail::gemv_rows(mr, N, kc, view, 1, src, cm, ldc, first ? bias : nullptr, act, accumulate || !first);
            else
                detail::gemv_rows(mr, N, kc, view, 1, src, cm, ldc, first ? bias : nullptr, identity_op{}, accumulate || !first);
        }
    }
}

}  // namespace ctformer::kernels
