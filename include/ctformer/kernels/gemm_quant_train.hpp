// ctformer/kernels/gemm_quant_train.hpp — the input gradient through a frozen quantized weight
// (adapters train over quantized bases: modules/lora.hpp): dX (+)= dY · W with W in its quantized
// panels (core/quant.hpp), read as the forward reads them. Blocks of several panels' outputs × some
// inputs are dequantized once each (the values get() returns) and multiplied by the dense
// input-gradient GEMM: as many outputs a block as fit, so that the GEMM sums long runs of them.
#pragma once
#include <cstddef>

#include "../core/quant.hpp"
#include "gemm_quant.hpp"
#include "gemm_train.hpp"

namespace ctformer::kernels {

// Scratch of gemm_nt_quant beside gemm_nt_panels' own (gemm_train_pack_elems): one dequantized
// block of nt_quant_rows inputs (compact kernels: 64, a 1 KB block on a microcontroller's stack).
inline constexpr std::size_t nt_quant_rows = gemm_tile<float>::compact ? 64 : gemm_tile<float>::KC;
inline constexpr std::size_t nt_quant_block_elems = nt_quant_rows * gemm_tile<float>::NR;

// c: (M, N) (+)= a: (M, K) · W, W: (K, N) in quantized panels (K outputs in panels of NR, N inputs):
// dX = dY · W for a weight (Out = K, In = N). block: nt_quant_block_elems floats; pack: gemm_nt_panels'.
// (BLAS's parameters: each matrix a pointer and its leading dimension, then the scratch.)
template <class Fmt>
inline void gemm_nt_quant(std::size_t M, std::size_t N, std::size_t K, const float* a, std::size_t lda,
                          const quant_panels<Fmt>& w, float* c, std::size_t ldc, float* block, float* pack, bool accumulate) {
    if constexpr (Fmt::integer_dot) {  // (int8 activations: the same panels as the weight format's)
        using F = typename Fmt::weight_format;
        gemm_nt_quant<F>(M, N, K, a, lda, quant_panels<F>{w.words, w.scales, w.mins, w.high, w.supers}, c, ldc, block,
                         pack, accumulate);
    } else {
        using tile = gemm_tile<float>;
        constexpr std::size_t NR = tile::NR, KC = nt_quant_rows;
        if (M == 0 || N == 0) return;
        if (K == 0) {
            if (!accumulate)
                for (std::size_t m = 0; m < M; ++m)
                    for (std::size_t n = 0; n < N; ++n) c[m * ldc + n] = 0;
            return;
        }
        using src = detail::panel_source<quant_panels<Fmt>>;
        // a block: P panels (P·NR outputs, a's columns) × nc inputs, in the panel layout of that
        // (P·NR, nc) weight; all of K's panels where nc can be whole tiles of the GEMM's columns
        // (whole words), else — and with compact kernels, which have no tiles to fill — one panel × KC inputs
        constexpr std::size_t unit = NR % Fmt::per_word == 0 ? NR : Fmt::per_word;
        const std::size_t all = (K + NR - 1) / NR;
        std::size_t nc_max = tile::compact ? 0 : nt_quant_block_elems / (all * NR) / unit * unit, P = all;
        if (nc_max == 0) nc_max = KC, P = 1;
        for (std::size_t n0 = 0; n0 < N; n0 += nc_max) {  // inputs n0 .. n0 + nc
            const std::size_t nc = N - n0 < nc_max ? N - n0 : nc_max;
            for (std::size_t p0 = 0; p0 < K; p0 += P * NR) {  // outputs p0 .. p0 + outs
                const std::size_t outs = K - p0 < P * NR ? K - p0 : P * NR;
                for (std::size_t q = 0; q * NR < outs; ++q) detail::dequantize_block(src::at(w, p0 / NR + q, N), N, n0, nc, block + q * nc * NR);
                gemm_nt_panels(M, nc, outs, a + p0, lda, block, c + n0, ldc, pack, accumulate || p0 > 0);
            }
        }
    }
}

// The scalar reference: c (+)= a · W from get() (element (o, i) of W, dequantized), in double.
template <class QW>
void gemm_nt_quant_reference(std::size_t M, const float* a, std::size_t lda, const QW& w, float* c, std::size_t ldc,
                             bool accumulate) {
    constexpr std::size_t Out = QW::out_features, In = QW::in_features;
    for (std::size_t m = 0; m < M; ++m)
        for (std::size_t i = 0; i < In; ++i) {
            double s = accumulate ? c[m * ldc + i] : 0.0;
            for (std::size_t o = 0; o < Out; ++o) s += static_cast<double>(a[m * lda + o]) * w.get(o * In + i);
            c[m * ldc + i] = static_cast<float>(s);
        }
}

}  // namespace ctformer::kernels
