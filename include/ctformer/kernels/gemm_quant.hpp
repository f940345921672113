// ctformer/kernels/gemm_quant.hpp — the GEMM and GEMV over quantized weights (core/quant.hpp),
// weight-only: activations and accumulation in float, each weight widened in registers from its
// packed word (shifts and a conversion; bf16: a shift or a mask), never copied out whole.
//
//   c: (M, N) (+)= a: (M, K) · W: (K, N) quantized panels + bias, then act.
//
// Few rows (a decoding step): the GEMV streams the words once (panel_source below). More rows
// (a prefill): each (KC x NR) block of a panel is dequantized into the GEMM's scratch, where the
// dense micro-kernel multiplies it with all M rows (the block is reused M times).
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "../core/quant.hpp"
#include "gemm.hpp"
#include "gemv_int8.hpp"

namespace ctformer::kernels {

namespace detail {

// W packed words as a vector of int32 (a scalar where floats have no vectors).
#if CTFORMER_XSIMD
using qword = std::conditional_t<simd::vectorized<float>, xsimd::batch<std::int32_t, simd::arch>, std::int32_t>;
#else
using qword = std::int32_t;
#endif
static_assert(sizeof(qword) == sizeof(simd::vec<float>), "ctformer: a word vector matches a float vector");

// (Q: qword, a template parameter so that the branch for the other kind is discarded)
template <class Q = qword> inline Q load_words(const std::uint32_t* p) {
    if constexpr (std::is_same_v<Q, std::int32_t>) return std::bit_cast<std::int32_t>(*p);
    else return Q::load_unaligned(reinterpret_cast<const std::int32_t*>(p));
}

// Field S of each word, widened to float: sign-extended integers (shift the field to the top,
// arithmetic shift down), unsigned levels (down and masked), or bf16 (the upper half of a float).
template <class Fmt, std::size_t S, class Q = qword> inline simd::vec<float> decode(const Q& x) {
    if constexpr (std::is_same_v<Q, std::int32_t>) {
        return quant::decode<Fmt>(std::bit_cast<std::uint32_t>(x), S);
    }
#if CTFORMER_XSIMD
    else if constexpr (std::is_same_v<Fmt, bf16>) {
        return xsimd::bitwise_cast<simd::vec<float>>(S == 0 ? Q(x << 16) : Q(x & Q(std::int32_t(0xffff0000u))));
    } else if constexpr (unsigned_levels<Fmt>) {  // (shift the field down, keep its bits)
        constexpr int bits = 32 / int(Fmt::per_word);
        return xsimd::to_float(Q((S ? Q(x >> (bits * int(S))) : x) & Q((1 << bits) - 1)));
    } else {
        constexpr int bits = 32 / int(Fmt::per_word), up = 32 - bits * int(S + 1);
        return xsimd::to_float(up ? Q(Q(x << up) >> (32 - bits)) : Q(x >> (32 - bits)));
    }
#endif
}

// Six-bit formats: slot S's field from its word w and its high word hs (already shifted down by 4
// for an odd word row: core/quant.hpp's layout), sign-extended (unsigned levels: as is).
template <class Fmt, std::size_t S, class Q = qword> inline simd::vec<float> decode6(const Q& w, const Q& hs) {
    constexpr int hb = 8 * int(S / 2) + 2 * int(S % 2);
    if constexpr (std::is_same_v<Q, std::int32_t>) {
        return quant::decode6<Fmt>(std::bit_cast<std::uint32_t>(w) >> (4 * S), std::bit_cast<std::uint32_t>(hs) >> hb);
    }
#if CTFORMER_XSIMD
    else {
        const Q low = (S ? Q(w >> (4 * int(S))) : w) & Q(15), top = (hb ? Q(hs >> hb) : hs) & Q(3);
        const Q u = low | Q(top << 4);
        if constexpr (unsigned_levels<Fmt>) return xsimd::to_float(u);
        else return xsimd::to_float(Q(Q(u << 26) >> 26));
    }
#endif
}
// The high words of word row kw as decode6 takes them: row kw / 2, shifted by 4 for an odd row
// (a logical shift: the bits that come down are never read).
template <class Q = qword> inline Q high_row(const std::uint32_t* high, std::size_t kw) {
    const Q h = load_words<Q>(high + kw / 2 * gemm_tile<float>::NR);
    if constexpr (std::is_same_v<Q, std::int32_t>) return kw % 2 ? std::bit_cast<std::int32_t>(std::bit_cast<std::uint32_t>(h) >> 4) : h;
#if CTFORMER_XSIMD
    else return kw % 2 ? xsimd::bitwise_cast<Q>(xsimd::bitwise_cast<xsimd::batch<std::uint32_t, simd::arch>>(h) >> 4) : h;
#endif
}
// Slot S of word w (and its high word hs where the format has a high plane), widened to float.
template <class Fmt, std::size_t S, class Q = qword> inline simd::vec<float> decode_slot(const Q& w, [[maybe_unused]] const Q& hs) {
    if constexpr (has_high_plane<Fmt>) return decode6<Fmt, S>(w, hs);
    else return decode<Fmt, S>(w);
}

template <std::size_t... S, class F> inline void for_slots(std::index_sequence<S...>, F&& f) {
    (f(std::integral_constant<std::size_t, S>{}), ...);
}

// c: (R, Q·NR) at ldc (+)= a: (R, K) · Q quantized panels + bias (Q·NR, padded; or null). Per word
// row, each field is widened once and used by the R rows; int4 sums a group in `part` and adds
// it times the group's scales; int8 scales the sums at the end (s · Σ a·q).
template <class Fmt, std::size_t R, std::size_t Q, class Act>
inline void gemv_quant_tile(std::size_t K, const float* a, std::size_t lda, const quant_panels<Fmt>& b, float* c,
                            std::size_t ldc, const float* bias, const Act& act, bool accumulate) {
    using tile = gemm_tile<float>;
    using vt = simd::vec<float>;
    constexpr std::size_t W = tile::W, NV = tile::NV, NR = tile::NR, S = Fmt::per_word;
    constexpr bool grouped = Fmt::group > 0;
    const std::size_t rows = K / S, group_rows = grouped ? Fmt::group / S : rows;
    const std::size_t pw = rows * NR, ps = (grouped ? K / Fmt::group : 1) * NR;  // words and scales per panel
    [[maybe_unused]] const std::size_t ph = K / 16 * NR;                          // (and high words)
    vt acc[R][Q][NV], part[R][Q][NV];
    auto zero = [](vt(&x)[R][Q][NV]) {
#pragma GCC unroll 4
        for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                for (std::size_t v = 0; v < NV; ++v) x[r][q][v] = vt(0.f);
    };
    zero(acc);
    for (std::size_t g0 = 0; g0 < rows; g0 += group_rows) {
        vt(&sum)[R][Q][NV] = grouped ? part : acc;
        if constexpr (grouped) zero(part);
        for (std::size_t kw = g0; kw < g0 + group_rows; ++kw) {
            qword w[Q][NV], hs[Q][NV];
#pragma GCC unroll 4
            for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                for (std::size_t v = 0; v < NV; ++v) {
                    w[q][v] = load_words(b.words + q * pw + kw * NR + v * W);
                    if constexpr (has_high_plane<Fmt>) hs[q][v] = high_row(b.high + q * ph + v * W, kw);
                    else hs[q][v] = w[q][v];
                }
            for_slots(std::make_index_sequence<S>{}, [&](auto slot) {
                vt ar[R];
#pragma GCC unroll 4
                for (std::size_t r = 0; r < R; ++r) ar[r] = vt(a[r * lda + kw * S + slot]);
#pragma GCC unroll 4
                for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                    for (std::size_t v = 0; v < NV; ++v) {
                        const vt x = decode_slot<Fmt, decltype(slot)::value>(w[q][v], hs[q][v]);
#pragma GCC unroll 4
                        for (std::size_t r = 0; r < R; ++r) sum[r][q][v] = simd::fma<float>(ar[r], x, sum[r][q][v]);
                    }
            });
        }
        if constexpr (grouped) {
            [[maybe_unused]] vt neg_asum[R];  // (a minimum per group: - Σ a over the group, times it)
            if constexpr (has_min<Fmt>)
                for (std::size_t r = 0; r < R; ++r) {
                    float t = 0;
                    for (std::size_t k = g0 * S; k < (g0 + group_rows) * S; ++k) t += a[r * lda + k];
                    neg_asum[r] = vt(-t);
                }
#pragma GCC unroll 4
            for (std::size_t q = 0; q < Q; ++q)
#pragma GCC unroll 4
                for (std::size_t v = 0; v < NV; ++v) {
                    const vt s = group_scale(b, q * ps + g0 / group_rows * NR + v * W);
#pragma GCC unroll 4
                    for (std::size_t r = 0; r < R; ++r) acc[r][q][v] = simd::fma<float>(s, part[r][q][v], acc[r][q][v]);
                    if constexpr (has_min<Fmt>) {
                        const vt m = group_min(b, q * ps + g0 / group_rows * NR + v * W);
#pragma GCC unroll 4
                        for (std::size_t r = 0; r < R; ++r) acc[r][q][v] = simd::fma<float>(m, neg_asum[r], acc[r][q][v]);
                    }
                }
        }
    }
    store_scaled_tile<R, Q>(acc, b.row_scales(), ps, c, ldc, bias, act, accumulate);
}

// ((K / S) x NR) words and (groups x NR) scales a panel; rows k0 .. k0 + kc of panel b dequantized
// into out: (kc x NR) k-major, the values get() returns (s · q, one rounding).
template <class Fmt>
inline void dequantize_block(const quant_panels<Fmt>& b, std::size_t K, std::size_t k0, std::size_t kc, float* out) {
    using tile = gemm_tile<float>;
    constexpr std::size_t W = tile::W, NV = tile::NV, NR = tile::NR, S = Fmt::per_word;
    using vt = simd::vec<float>;
    for (std::size_t kw = k0 / S; kw < (k0 + kc) / S; ++kw)
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) {
            const qword w = load_words(b.words + kw * NR + v * W);
            qword hs = w;
            if constexpr (has_high_plane<Fmt>) hs = high_row(b.high + v * W, kw);
            vt s(1.f), m(0.f);
            if constexpr (Fmt::group > 0) s = group_scale(b, (kw * S / Fmt::group) * NR + v * W);
            else if constexpr (Fmt::scaled) s = load_scale(b.scales + v * W);
            if constexpr (has_min<Fmt>) m = group_min(b, (kw * S / Fmt::group) * NR + v * W);
            for_slots(std::make_index_sequence<S>{}, [&](auto slot) {
                const vt x = decode_slot<Fmt, decltype(slot)::value>(w, hs);
                simd::store(out + (kw * S + slot - k0) * NR + v * W, has_min<Fmt> ? s * x - m : Fmt::scaled ? s * x : x);
            });
        }
    (void)K;
}

}  // namespace detail

template <class Fmt> struct detail::panel_source<quant_panels<Fmt>> {
    // Two streams for one row, one for more (int4 keeps a group's sums beside the totals: twice the
    // accumulators), at most two rows a pass.
    static constexpr std::size_t streams(std::size_t R) { return gemm_tile<float>::compact || R > 1 ? 1 : 2; }
    static constexpr std::size_t pass_rows(std::size_t R) { return R > 2 ? 2 : R; }
    static quant_panels<Fmt> at(const quant_panels<Fmt>& b, std::size_t p, std::size_t K) { return b.panel(p, K); }
    template <std::size_t R, std::size_t Q, class Act>
    static void tile(std::size_t K, const float* a, std::size_t lda, const quant_panels<Fmt>& b, float* c, std::size_t ldc,
                     const float* bias, const Act& act, bool accumulate) {
        gemv_quant_tile<Fmt, R, Q>(K, a, lda, b, c, ldc, bias, act, accumulate);
    }
};

// gemm_panels over quantized panels (same contract as the dense one; K a multiple of the format's
// fields per word, and of its group). pack: gemm_pack_elems<float>(M, K) elements (the dequantized
// block and, where the dense path would pack it, a's block).
template <class Fmt, class Act = identity_op>
    requires(!Fmt::integer_dot)
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
inline void gemm_panels(std::size_t M, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                        const quant_panels<Fmt>& b, float* c, std::size_t ldc, const float* bias, const Act& act,
                        float* pack, bool accumulate = false) {
    using tile = gemm_tile<float>;
    using src = detail::panel_source<quant_panels<Fmt>>;
    constexpr std::size_t NR = tile::NR, KC = tile::KC;
    if (M == 0 || N == 0) return;
    if constexpr (tile::compact) {  // no scratch, no caches: the GEMV, four rows a call (one at a time inside)
        for (std::size_t m0 = 0; m0 < M; m0 += small_m_rows)
            detail::gemv_rows(M - m0 < small_m_rows ? M - m0 : small_m_rows, N, K, a + m0 * lda, lda, b, c + m0 * ldc, ldc,
                              bias, act, accumulate);
    } else {
        if (detail::gemv_rows(M, N, K, a, lda, b, c, ldc, bias, act, accumulate)) return;
        // panels p0.. (columns n0.., ncols of them), K block by K block: the block dequantized into
        // pk, the dense packed path over it (its a block, if it packs one, after the block); act
        // on the last block only. rows: M, or fewer at a time.
        const auto columns = [&](std::size_t n0, std::size_t ncols_all, float* pk, std::size_t rows) {
            for (std::size_t j = 0; j < ncols_all; j += NR) {
                const quant_panels<Fmt> panel = src::at(b, (n0 + j) / NR, K);
                const std::size_t ncols = ncols_all - j < NR ? ncols_all - j : NR;
                for (std::size_t k0 = 0; k0 < K; k0 += KC) {
                    const std::size_t kc = K - k0 < KC ? K - k0 : KC;
                    detail::dequantize_block(panel, K, k0, kc, pk);
                    const float* bias_n = bias && k0 == 0 ? bias + n0 + j : nullptr;
                    const bool from_c = accumulate || k0 > 0;
                    constexpr auto in_rows = detail::a_layout::rows;
                    constexpr auto panels = detail::b_layout::panels;
                    for (std::size_t m0 = 0; m0 < M; m0 += rows) {
                        const std::size_t mr = M - m0 < rows ? M - m0 : rows;
                        float* cm = c + m0 * ldc + n0 + j;
                        const float* am = a + m0 * lda + k0;
                        if (k0 + kc == K)
                            detail::gemm_packed<float, in_rows, panels, detail::c_layout::rows>(mr, ncols, kc, am, lda, pk, 0, cm,
                                                                                                ldc, bias_n, act, pk, from_c);
                        else
                            detail::gemm_packed<float, in_rows, panels, detail::c_layout::rows>(
                                mr, ncols, kc, am, lda, pk, 0, cm, ldc, bias_n, identity_op{}, pk, from_c);
                    }
                }
            }
        };
        const auto part = [&](std::size_t n0, std::size_t ncols) {  // on another thread: its own scratch
            alignas(64) float task_pack[detail::task_pack_elems<float>];
            columns(n0, ncols, task_pack, detail::task_row_block<float>(M, K, lda));
        };
        if (!detail::split_panels<float>(M, N, K, part)) columns(0, N, pack, M);
    }
}

// The int8-activation formats: their own path for every row count (gemv_int8.hpp; pack unused).
template <class Fmt, class Act = identity_op>
    requires(Fmt::integer_dot)
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the epilogue's.)
inline void gemm_panels(std::size_t M, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                        const quant_panels<Fmt>& b, float* c, std::size_t ldc, const float* bias, const Act& act,
                        float*, bool accumulate = false) {
    if (M == 0 || N == 0) return;
    gemm_panels_int8(M, N, K, a, lda, b, c, ldc, bias, act, accumulate);
}

}  // namespace ctformer::kernels
