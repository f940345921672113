// ctformer/core/executor.hpp — who runs a parallel loop: the calling thread alone (the default:
// no thread, no atomic) or an executor the user hands over (core/thread_pool.hpp, OpenMP, an
// RTOS's tasks: anything with run() and concurrency()).
//
// Work is cut by part_begin() into contiguous parts fixed by the work's size and the number of
// parts alone; a kernel gives each output element to exactly one part and computes it with the
// same code whatever the part, so results are bit-identical for any executor and thread count.
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
    // more than one part, else here, in order.
    template <class F> void for_each(std::size_t parts, F&& f) const {
        using Fn = std::remove_reference_t<F>;
        if (!parallel() || parts <= 1) {
            for (std::size_t i = 0; i < parts; ++i) f(i);
            return;
        }
        run_(self_, parts, [](void* c, std::size_t i) { (*static_cast<Fn*>(c))(i); },
             const_cast<void*>(static_cast<const void*>(&f)));
    }
};

}  // namespace ctformer
