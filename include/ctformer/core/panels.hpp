// ctformer/core/panels.hpp — the GEMM's register tile and the panel layout of its weights.
//
// The micro-kernel multiplies MR rows of a by NR = NV·W columns of b. Weights are stored once, at
// load time, in the order it reads them: b: (K, N) cut into column panels of NR, each panel k-major
//
//   element (k, n) at  ((n / NR) · K + k) · NR + n % NR        (the last panel zero-padded)
//
// so every panel is one contiguous stream of K·NR values: the tiled GEMM reads its (KC x NR)
// blocks without repacking, and a decoding step (a GEMV) reads the weights front to back.
#pragma once
#include <cstddef>

#include "../simd/simd.hpp"

namespace ctformer::panels {

template <class T> struct gemm_tile {
    static constexpr std::size_t W = simd::width<T>;
    // AVX-512 has 32 registers: 12x2 accumulators; AVX2/SSE/NEON 16: 6x2; scalar: 4x4.
    static constexpr std::size_t NV = W == 1 ? 4 : 2;
    static constexpr std::size_t MR = W == 1 ? 4 : (W * sizeof(T) >= 64 ? 12 : 6);
    static constexpr std::size_t NR = NV * W;
    static constexpr std::size_t KC = 256;
    // The K block where neither operand is packed (weights in panel layout against rows of a read
    // in place): nothing in the scratch depends on it. With 512-bit vectors a (KC x NR) block of b
    // is 32 KB, all of L1 on its own, so the row tiles read it from L2 whatever its length; 4·KC
    // (128 KB) loads and stores c's register tile a quarter as often. Narrower vectors keep KC:
    // their 16 KB block stays in L1 beside a's rows (scripts/performance_log.md).
    static constexpr std::size_t KC_in_place = W * sizeof(T) >= 64 ? 4 * KC : KC;
    // Scalar kernels (microcontrollers: code size counts, no caches to hide) compile fewer tile
    // variants: row remainders run one row at a time, the GEMV reads one panel at a time.
    static constexpr bool compact = W == 1;
};

// Row stride (elements) for a row-major buffer of n columns whose rows a GEMM reads side by side
// (a register tile's MR rows in place): n, padded by one cache line when n elements are a multiple
// of 4 KB, where every row would map to the same L1 set and MR > 8 rows evict each other.
template <class T> constexpr std::size_t padded_row_stride(std::size_t n) {
    return n * sizeof(T) % 4096 == 0 ? n + 64 / sizeof(T) : n;
}

// Panels covering n columns, and the elements of a (k, n) matrix in panel layout.
template <class T> constexpr std::size_t panel_count(std::size_t n) {
    return (n + gemm_tile<T>::NR - 1) / gemm_tile<T>::NR;
}
template <class T> constexpr std::size_t panel_elems(std::size_t k, std::size_t n) {
    return panel_count<T>(n) * k * gemm_tile<T>::NR;
}
// Index of element (k, n) of a (K, ·) matrix in panel layout.
template <class T> constexpr std::size_t panel_index(std::size_t K, std::size_t k, std::size_t n) {
    constexpr std::size_t NR = gemm_tile<T>::NR;
    return ((n / NR) * K + k) * NR + n % NR;
}

}  // namespace ctformer::panels

namespace ctformer::kernels {
// The kernels read the layout they compute with by its kernel-side names.
using panels::gemm_tile;
using panels::padded_row_stride;
using panels::panel_count;
using panels::panel_elems;
using panels::panel_index;
}  // namespace ctformer::kernels
