// ctformer/core/executor.hpp — who runs a parallel loop: the calling thread alone (the default:
// no thread, no atomic) or an executor the user hands over (core/thread_pool.hpp, OpenMP, an
// RTOS's tasks: anything with run() and concurrency()).
//
// Work is cut by part_begin() into contiguous parts; a kernel gives each output element to exactly
// one part and computes it with the same operations in the same order whatever the part, so
// results are bit-identical for any executor and thread count.
//
// Workspaces carry an executor_ref (`ws.executor = pool;`); an entry point makes it the calling
// thread's current executor for the call (executor_scope), and the kernels ask split_parts().
// One thread-local pointer instead of an executor argument through every module and kernel; a
// task runs on a thread whose current executor is sequential, so work never nests.
#pragma once
#include <concepts>
#include <cstddef>
#include <type_traits>

namespace ctformer {

// Where part i of [0, n) cut into `parts` near-equal contiguous pieces begins (part `parts`: n).
constexpr std::size_t part_begin(std::size_t n, std::size_t parts, std::size_t i) { return n * i / parts; }

// task(ctx, i) for every i in [0, parts), each exactly once, in any order and on any thread the
// executor owns; run() returns when all have returned. Tasks never throw (the library's code has
// no exceptions).
using part_task = void (*)(void* ctx, std::size_t part);
template <class E> concept executor = requires(E& e, std::size_t parts, part_task task, void* ctx) {
    { e.concurrency() } -> std::convertible_to<std::size_t>;  // threads that run parts at once
    e.run(parts, task, ctx);
};

// The calling thread, part after part.
struct sequential {
    static constexpr std::size_t concurrency() { return 1; }
    static void run(std::size_t parts, part_task task, void* ctx) {
        for (std::size_t i = 0; i < parts; ++i) task(ctx, i);
    }
};

// A reference to an executor (or to none: sequential): two pointers and a count, what entry points
// and workspaces carry. The referenced executor must outlive its use.
class executor_ref {
    using run_fn = void (*)(void* self, std::size_t parts, part_task task, void* ctx);
    void* self_ = nullptr;
    run_fn run_ = nullptr;
    std::size_t concurrency_ = 1;

  public:
    constexpr executor_ref() = default;
    template <executor E>
        requires(!std::is_same_v<std::remove_cv_t<E>, executor_ref>)
    constexpr executor_ref(E& e)  // NOLINT: implicit, so that `pool` converts where an executor_ref is expected
        : self_(&e), run_([](void* s, std::size_t n, part_task t, void* c) { static_cast<E*>(s)->run(n, t, c); }),
          concurrency_(e.concurrency() > 0 ? e.concurrency() : 1) {}

    constexpr std::size_t concurrency() const { return concurrency_; }
    constexpr bool parallel() const { return run_ != nullptr && concurrency_ > 1; }

    // f(i) for i in [0, parts): on the executor where it has more than one thread and there is
    // more than one part, else here, in order. The parts run with no current executor (below):
    // work inside a part never forks again.
    template <class F> void for_each(std::size_t parts, F&& f) const;
};

// Whether calls split over an executor at all: yes where there are threads (hosted Linux, macOS,
// Windows: the current executor is thread-local); on bare metal no (executors are ignored, the
// split paths are not compiled, no TLS runtime is needed). An RTOS whose toolchain has
// thread_local defines CTFORMER_THREADS=1.
#ifndef CTFORMER_THREADS
#if defined(__linux__) || defined(__APPLE__) || defined(_WIN32) || defined(__unix__)
#define CTFORMER_THREADS 1
#else
#define CTFORMER_THREADS 0
#endif
#endif
namespace detail {
#if CTFORMER_THREADS
inline thread_local executor_ref current_executor_v{};
#else
inline executor_ref current_executor_v{};
#endif
}  // namespace detail

template <class F> void executor_ref::for_each(std::size_t parts, F&& f) const {
    using Fn = std::remove_reference_t<F>;
    if (!parallel() || parts <= 1) {
        for (std::size_t i = 0; i < parts; ++i) f(i);
        return;
    }
    const executor_ref outer = detail::current_executor_v;
    detail::current_executor_v = executor_ref{};  // (the caller runs parts too)
    run_(self_, parts, [](void* c, std::size_t i) { (*static_cast<Fn*>(c))(i); },
         const_cast<void*>(static_cast<const void*>(&f)));
    detail::current_executor_v = outer;
}

// The executor the kernels run on in this thread (sequential unless an entry point set one).
inline executor_ref current_executor() { return detail::current_executor_v; }

// f(i0, i1) for contiguous parts [i0, i1) of [0, items), one per thread of the current executor;
// false (nothing done: the caller runs the whole range itself) where it has one thread or there
// is one item.
template <class F> inline bool split_parts(std::size_t items, F&& f) {
    if constexpr (!CTFORMER_THREADS) {
        return false;
    } else {
        const executor_ref ex = detail::current_executor_v;
        if (!ex.parallel() || items < 2) return false;
        const std::size_t parts = ex.concurrency() < items ? ex.concurrency() : items;
        ex.for_each(parts, [&](std::size_t i) { f(part_begin(items, parts, i), part_begin(items, parts, i + 1)); });
        return true;
    }
}

// f(i0, i1) over [0, n) for elementwise work (each element computed alone: any split gives the
// same values): parts of whole blocks (64 elements unless said) over the current executor where n
// is at least min_elems, else f(0, n) here.
template <std::size_t block = 64, class F> constexpr void split_elements(std::size_t n, std::size_t min_elems, F&& f) {
    if (n >= min_elems && split_parts((n + block - 1) / block, [&](std::size_t b0, std::size_t b1) {
            f(b0 * block, b1 * block < n ? b1 * block : n);
        }))
        return;
    f(std::size_t(0), n);
}

// Elements below which an elementwise pass runs on the calling thread alone (a test may define
// CTFORMER_PARALLEL_MIN_ELEMS 1 to split every pass).
#ifndef CTFORMER_PARALLEL_MIN_ELEMS
#define CTFORMER_PARALLEL_MIN_ELEMS (std::size_t(1) << 14)
#endif
inline constexpr std::size_t parallel_min_elems = CTFORMER_PARALLEL_MIN_ELEMS;

// Rows per block of split_rows (a test may define CTFORMER_PARALLEL_ROW_BLOCK 2 to split a few rows).
#ifndef CTFORMER_PARALLEL_ROW_BLOCK
#define CTFORMER_PARALLEL_ROW_BLOCK 64
#endif

// Bytes of weights up to which a layer's row-local work runs in row parts (layer.hpp, "row
// regions"): each core then reads every weight, from its cache or the one they share, where
// splitting each product's columns hands every row's activations between the cores.
#ifndef CTFORMER_PARALLEL_ROW_WEIGHT_BYTES
#define CTFORMER_PARALLEL_ROW_WEIGHT_BYTES (std::size_t(8) << 20)
#endif
inline constexpr std::size_t parallel_row_weight_bytes = CTFORMER_PARALLEL_ROW_WEIGHT_BYTES;
// Rows per block of those row parts: small (a part's share evens out over a few dozen rows), and
// never more than split_rows' block (a test that shrinks that one to split a few rows shrinks both).
inline constexpr std::size_t parallel_row_part_block = CTFORMER_PARALLEL_ROW_BLOCK < 4 ? CTFORMER_PARALLEL_ROW_BLOCK : 4;

// f(r0, r1) over rows [0, rows) of `cols` elements each, for work where each row is computed
// alone: parts of whole blocks of rows where the pass has parallel_min_elems elements, else here.
template <class F> constexpr void split_rows(std::size_t rows, std::size_t cols, F&& f) {
    bool many = !std::is_constant_evaluated() && rows * cols >= parallel_min_elems;  // (not const: clang's
    split_elements<CTFORMER_PARALLEL_ROW_BLOCK>(rows, many ? 0 : rows + 1, f);       // -Wconstant-evaluated)
}

// f(r) for each row r in [0, rows) (rows of `cols` elements, each computed alone), in split_rows' parts.
template <class F> constexpr void for_each_row(std::size_t rows, std::size_t cols, F&& f) {
    split_rows(rows, cols, [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) f(r);
    });
}

// For its lifetime, ex is the calling thread's current executor (unless ex is sequential: then an
// enclosing call's stays, so a stack's layers run on the stack's executor); with `alone`, the
// calling thread runs alone, whatever ex or an enclosing call says.
#if CTFORMER_THREADS
class executor_scope {
    executor_ref saved_{};
    bool set_ = false;

  public:
    constexpr explicit executor_scope(executor_ref ex, bool alone = false) {
        if (std::is_constant_evaluated() || (!ex.parallel() && !alone)) return;
        saved_ = detail::current_executor_v;
        detail::current_executor_v = alone ? executor_ref{} : ex;
        set_ = true;
    }
    executor_scope(const executor_scope&) = delete;
    executor_scope& operator=(const executor_scope&) = delete;
    constexpr ~executor_scope() {
        if (set_) detail::current_executor_v = saved_;
    }
};
#else
struct executor_scope {  // (no splits on bare metal: nothing to set)
    constexpr explicit executor_scope(executor_ref, bool = false) {}
};
#endif

// What a workspace adds: the executor its calls run on (default: sequential, today's behaviour).
struct runs_on {
    executor_ref executor{};
};

}  // namespace ctformer
