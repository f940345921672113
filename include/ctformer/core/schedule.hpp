// ctformer/core/schedule.hpp — the scheduling room: every decision of how a call's work is cut
// over the calling thread's executor (core/executor.hpp), and the thresholds behind them. Kernels,
// modules and the layer ask here and run what they are given; nothing else reads the executor.
//
// The room's rules:
// - Every cut is of contiguous parts (part_begin), each output element computed by one part with
//   the same operations in the same order whatever the part: results are bit-identical for any
//   executor and thread count.
// - A pool never makes a call slower than one thread: work below a cut's threshold stays on the
//   calling thread (scripts/performance_log.md has the measurements behind each threshold).
// - A task runs with no current executor: work inside a part never forks again.
#pragma once
#include <cstddef>
#include <type_traits>

#include "executor.hpp"

namespace ctformer::schedule {

// ---- Thresholds ----
// CTFORMER_SPLIT_EVERYTHING (tests only: test_parallel, test_alloc_models) takes every cut however small,
// and row regions only up to 512 KB of weights so that the per-product path runs too.
#ifdef CTFORMER_SPLIT_EVERYTHING
inline constexpr bool split_everything = true;
#else
inline constexpr bool split_everything = false;
#endif
// Multiply-adds below which a product runs on the caller (a fork-join costs about this much work).
inline constexpr std::size_t min_macs = split_everything ? 1 : std::size_t(1) << 17;
// Weights (N x K) from which a GEMV (1..4 rows) splits: it streams its weights once, bound by
// where they come from, so two cores halve it at a quarter of a product's threshold.
inline constexpr std::size_t min_gemv_weights = min_macs / 4;
// Batch rows (a weight gradient's inner dimension) below which a weight gradient, and a layer's
// training calls, stay on the caller: each gradient element takes few multiply-adds against rows
// another core would have to fetch.
inline constexpr std::size_t min_grad_rows = split_everything ? 1 : 64;
// Elements below which an elementwise pass runs on the caller.
inline constexpr std::size_t min_elems = split_everything ? 1 : std::size_t(1) << 14;
// Rows per block of a layer's row regions' cuts.
inline constexpr std::size_t row_block = split_everything ? 2 : 64;
// Bytes of weights up to which a layer's row-local work runs in row regions: each core then reads
// every weight, from its cache or the one they share, where splitting each product's columns
// hands every row's activations between the cores.
inline constexpr std::size_t row_weight_bytes = split_everything ? std::size_t(512) << 10 : std::size_t(8) << 20;
// Rows per block of those row regions (never more than row_block).
inline constexpr std::size_t row_part_block = row_block < 4 ? row_block : 4;
// Stack bytes a row region's part may use for its own scratch.
inline constexpr std::size_t row_part_stack_bytes = 256 * 1024;

// ---- Cuts ----
// f(i0, i1) for contiguous parts [i0, i1) of [0, items), one per thread of the current executor;
// false (nothing done: the caller runs the whole range itself) where it has one thread or there
// is one item.
template <class F> inline bool split_parts(std::size_t items, F&& f) {
    if constexpr (!CTFORMER_THREADS) {
        return false;
    } else {
        const executor_ref ex = current_executor();
        if (!ex.parallel() || items < 2) return false;
        const std::size_t parts = ex.concurrency() < items ? ex.concurrency() : items;
        ex.for_each(parts, [&](std::size_t i) { f(part_begin(items, parts, i), part_begin(items, parts, i + 1)); });
        return true;
    }
}

// f(i0, i1) over [0, n) for elementwise work (each element computed alone: any split gives the
// same values): parts of whole blocks (64 elements unless said) where n is at least `least`,
// else f(0, n) here.
template <std::size_t block = 64, class F> constexpr void split_elements(std::size_t n, std::size_t least, F&& f) {
    if (n >= least && split_parts((n + block - 1) / block, [&](std::size_t b0, std::size_t b1) {
            f(b0 * block, b1 * block < n ? b1 * block : n);
        }))
        return;
    f(std::size_t(0), n);
}
// An elementwise pass over n elements: split from min_elems.
template <class F> constexpr void split_elements(std::size_t n, F&& f) { split_elements(n, min_elems, f); }

// f(r0, r1) over rows [0, rows) of `cols` elements each, each row computed alone: parts of whole
// rows where the pass has min_elems elements (a prompt's 64 rows too), else here.
template <class F> constexpr void split_rows(std::size_t rows, std::size_t cols, F&& f) {
    bool many = !std::is_constant_evaluated() && rows * cols >= min_elems;  // (not const: clang's
    split_elements<1>(rows, many ? 0 : rows + 1, f);                        // -Wconstant-evaluated)
}
// f(r) for each row r in [0, rows), in split_rows' parts.
template <class F> constexpr void for_each_row(std::size_t rows, std::size_t cols, F&& f) {
    split_rows(rows, cols, [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) f(r);
    });
}
// f(c0, c1) over columns [0, cols) of a (rows x cols) pass whose columns are each computed alone
// (a reduction down the rows): parts of whole 16-column blocks where the pass has min_elems elements.
template <class F> constexpr void split_columns(std::size_t rows, std::size_t cols, F&& f) {
    split_elements<16>(cols, rows * cols >= min_elems ? 0 : cols + 1, f);
}

// f(n0, ncols) for parts of whole panels of NR columns of an M x N x K product, one part per
// thread, where it has at least `least` multiply-adds (default min_macs); false (nothing done)
// where it runs here alone.
template <std::size_t NR, class F>
inline bool split_panels(std::size_t M, std::size_t N, std::size_t K, F&& f, std::size_t least = min_macs) {
    return M * N * K >= least && split_parts((N + NR - 1) / NR, [&](std::size_t p0, std::size_t p1) {
               f(p0 * NR, (p1 * NR < N ? p1 * NR : N) - p0 * NR);
           });
}
// A GEMV of M (1..4) rows over N x K weights: split from M x min_gemv_weights multiply-adds.
template <std::size_t NR, class F> inline bool split_gemv(std::size_t M, std::size_t N, std::size_t K, F&& f) {
    return split_panels<NR>(M, N, K, f, M * min_gemv_weights);
}
// f(g0, g1) over groups of `rows` rows of an M-row product of M·N·K multiply-adds.
template <class F> inline bool split_row_groups(std::size_t M, std::size_t N, std::size_t K, std::size_t rows, F&& f) {
    return M > rows && M * N * K >= min_macs && split_parts((M + rows - 1) / rows, f);
}
// A weight gradient dWᵀ (M x N) += Xᵀ·dY over K batch rows: parts of whole `step`-row groups of
// the gradient, from min_grad_rows batch rows.
template <class F> inline bool split_grad_rows(std::size_t M, std::size_t N, std::size_t K, std::size_t step, F&& f) {
    return M * N * K >= min_macs && K >= min_grad_rows && split_parts((M + step - 1) / step, f);
}

// Threads of the calling thread's executor (1: it runs alone).
inline std::size_t threads() {
    if constexpr (!CTFORMER_THREADS) {
        return 1;
    } else {
        const executor_ref ex = current_executor();
        return ex.parallel() ? ex.concurrency() : 1;
    }
}

// Rows from which a call on one thread runs its row stages in parts of local_rows rows, one after
// another in the workspace's scratch: a part's activations then stay in the core's cache from a
// stage's first product to its last, where a stage over all rows streams them through the
// last-level cache once per product.
inline constexpr std::size_t min_local_rows = split_everything ? 2 : 256;
inline constexpr std::size_t local_rows = split_everything ? 1 : 32;
inline bool in_local_parts(std::size_t M) {
    if constexpr (!CTFORMER_THREADS) return false;  // (bare metal: code size first, and no cache levels to stay in)
    else return M >= min_local_rows && threads() == 1;
}

// ---- Calls ----
// A training call (forward_train, backward) over this many rows runs on the caller alone: its
// weight gradients would not split, so its parts would only hand rows between the cores.
constexpr bool train_alone(std::size_t rows) { return rows < min_grad_rows; }

// Row regions: whether a layer of `weight_bytes` whose parts need `part_stack_bytes` of scratch
// may run its row-local work in row parts at all, and whether a call over M rows does.
constexpr bool row_regions_fit(std::size_t weight_bytes, std::size_t part_stack_bytes) {
    return weight_bytes <= row_weight_bytes && part_stack_bytes <= row_part_stack_bytes;
}
inline bool in_row_regions(std::size_t M) {
    if constexpr (!CTFORMER_THREADS) return false;
    else return M >= 2 * row_part_block && current_executor().parallel();
}
// f(b0, b1) over whole row_part_block blocks of n rows (the layer's row regions).
template <class F> inline bool split_row_regions(std::size_t n, F&& f) {
    return split_parts((n + row_part_block - 1) / row_part_block, f);
}

// ---- Attention heads ----
// How n (batch row, query head) pairs of Tq query rows over `keys` keys run on P threads:
// `cuts` parts of each head's query rows (heads that do not share evenly: 2 per thread, of whole
// row blocks), or, for a decoding step (Tq = 1) whose heads do not share evenly and whose caller
// has room for span states, `spans` key spans per head (kernels/attention.hpp); `parts` tasks.
struct head_plan {
    std::size_t cuts = 1, spans = 1, parts = 1;
    bool split = false;  // whether to split at all (the work pays a fork-join)
};
// work: the multiply-adds of all heads; row_blocks: whole row blocks in Tq; key_spans: the spans
// a query over `keys` keys takes (0: the caller has no span states); P: threads (threads()).
constexpr head_plan plan_heads(std::size_t n, std::size_t Tq, std::size_t work, std::size_t row_blocks,
                               std::size_t key_spans, std::size_t P) {
    head_plan plan;
    if (P < 2 || work < min_macs) return plan;
    plan.split = true;
    plan.spans = key_spans > 1 && Tq == 1 && n % P != 0 ? key_spans : 1;
    plan.cuts = plan.spans > 1 || n % P == 0 ? 1 : (2 * P < row_blocks ? 2 * P : row_blocks);
    plan.parts = P < n * plan.cuts ? P : n * plan.cuts;
    return plan;
}
// Part j of c of a head's `blocks` row blocks, as [first, end) blocks: the first with the last,
// the second with the one before it, ... (under a causal mask a later row sees more keys: each
// pair costs about the same)
struct block_range {
    std::size_t first, end;
};
constexpr block_range head_row_blocks(std::size_t j, std::size_t c, std::size_t blocks) {
    const std::size_t k = j % 2 == 0 ? j / 2 : c - 1 - j / 2;
    return {k * blocks / c, (k + 1) * blocks / c};
}
// Whether the parts of a plan over n pairs keep every group of Gs heads in one part (a group's
// cache stores can then run in the part that runs it).
constexpr bool whole_groups(const head_plan& plan, std::size_t n, std::size_t Gs) {
    bool whole = plan.cuts == 1 && plan.spans == 1;
    for (std::size_t i = 1; i < plan.parts; ++i) whole = whole && part_begin(n, plan.parts, i) % Gs == 0;
    return whole;
}

}  // namespace ctformer::schedule
