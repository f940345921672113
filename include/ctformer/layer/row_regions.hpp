// ctformer/layer/row_regions.hpp — how the layer's row stages (everything but the attention heads:
// projections, norms, residual adds, the FFN) run over a call's rows: as one parallel region over
// parts of the rows, or over all rows at once. The layer's sub-layer sequence (layer.hpp, run_rows)
// is written once against over_rows; whether it runs in parts is decided here and in
// core/schedule.hpp.
#pragma once
#include <cstddef>
#include <type_traits>

#include "../core/schedule.hpp"
#include "../kernels/elementwise.hpp"
#include "../kernels/gemm.hpp"
#include "../modules/feed_forward.hpp"
#include "params.hpp"

namespace ctformer::detail {

template <class Cfg> struct row_regions {
    using T = typename Cfg::value_type;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim;
    using FFN = modules::feed_forward<Cfg>;

    // Where the layer's weights are a few MB at most (schedule::row_weight_bytes) and a part's
    // scratch fits its stack, a forward runs each row stage as one parallel region over parts of
    // the rows (in chunks of part_rows, with their own scratch on the part's stack): a row's
    // activations then stay on one core from a stage's first product to its last, where
    // per-product column splits moved them between cores once per product, and each core reads
    // every weight instead (scripts/performance_log.md). Otherwise a stage runs over all rows
    // at once and each product splits its columns. Rows give the same bits however they are
    // grouped (the GEMM computes each output element alone: kernels/gemm.hpp).
    struct row_scratch {
        T* pack;    // the GEMMs' packing scratch
        T* hidden;  // the FFN's hidden rows of the stage's first row on (at FFN::ldh)
    };
    static constexpr std::size_t part_rows = 32;
    static constexpr std::size_t part_pack_elems = kernels::gemm_pack_elems<T>(part_rows, D > F ? D : F);
    static constexpr bool row_parts_fit =
        !Cfg::quantized && schedule::row_regions_fit(sizeof(LayerParams<Cfg>), (part_pack_elems + part_rows * FFN::ldh) * sizeof(T));
    static constexpr bool in_row_parts(std::size_t M) {
        if constexpr (!row_parts_fit) return false;
        else return !std::is_constant_evaluated() && schedule::in_row_regions(M);
    }
    // stage(r0, r1, scratch) over rows [0, n): in row regions (core/schedule.hpp), on one thread in
    // parts of schedule::local_rows in the whole call's scratch, or here at once. (Only where rows
    // give the same bits however grouped: float weights; a quantized product's kernel depends on
    // its row count.)
    template <class Stage> static constexpr void over_rows(bool parts, std::size_t n, const row_scratch& whole, Stage&& stage) {
        if constexpr (row_parts_fit) {
            constexpr std::size_t rb = schedule::row_part_block;
            if (parts && schedule::split_row_regions(n, [&](std::size_t b0, std::size_t b1) {
                    alignas(64) T pack[part_pack_elems], hidden[part_rows * FFN::ldh];
                    const std::size_t end = b1 * rb < n ? b1 * rb : n;
                    for (std::size_t r = b0 * rb; r < end; r += part_rows)
                        stage(r, end - r < part_rows ? end : r + part_rows, row_scratch{pack, hidden});
                }))
                return;
            if (!std::is_constant_evaluated() && schedule::in_local_parts(n)) {  // (one thread: in parts, one after another)
                constexpr std::size_t step = schedule::local_rows;
                for (std::size_t r = 0; r < n; r += step) stage(r, n - r < step ? n : r + step, whole);
                return;
            }
        }
        stage(std::size_t(0), n, whole);
    }
    // y: (rows, D) = x, and y = a + b (y may alias a): rows in parts
    static constexpr void copy_rows(const T* x, T* y, std::size_t rows) {
        schedule::split_rows(rows, D, [&](std::size_t r0, std::size_t r1) {
            for (std::size_t i = r0 * D; i < r1 * D; ++i) y[i] = x[i];
        });
    }
    static constexpr void add_rows(T* y, const T* a, const T* b, std::size_t rows) {
        schedule::split_rows(rows, D, [&](std::size_t r0, std::size_t r1) {
            kernels::add(y + r0 * D, a + r0 * D, b + r0 * D, (r1 - r0) * D);
        });
    }
};

}  // namespace ctformer::detail
