// ctformer/core/executor.hpp — who runs a parallel loop: the calling thread alone (the default:
// no thread, no atomic) or an executor the user hands over (core/thread_pool.hpp, OpenMP, an
// RTOS's tasks: anything with run() and concurrency()).
//
// One door: `ct::use_executor on(pool);` makes pool the calling thread's executor for the scope's
// lifetime (OpenMP-like: every ctformer call the thread makes meanwhile may split over it; an
// inner scope, sequential included, wins until it ends). The scheduling room (core/schedule.hpp)
// asks current_executor() and cuts the work; a task runs with no current executor, so work never
// nests. An executor is a property of the calling thread's code, never of the memory a call uses.
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

// The calling thread's executor (sequential unless a use_executor scope set one).
inline executor_ref current_executor() { return detail::current_executor_v; }

// For its lifetime, `ex` is the calling thread's executor: the library's calls on this thread
// split over it; at its end the enclosing scope's comes back. `ct::use_executor on(ct::sequential{})`
// (or a default executor_ref) runs the scope on the calling thread alone, whatever encloses it.
// On bare metal (CTFORMER_THREADS 0) a scope sets nothing: no call splits.
class use_executor {
#if CTFORMER_THREADS
    executor_ref saved_{};
    bool set_ = false;
#endif

  public:
    constexpr explicit use_executor(executor_ref ex) : use_executor(ex, true) {}
    constexpr explicit use_executor(sequential) : use_executor(executor_ref{}, true) {}
    use_executor(const use_executor&) = delete;
    use_executor& operator=(const use_executor&) = delete;
    constexpr ~use_executor() {
#if CTFORMER_THREADS
        if (set_) detail::current_executor_v = saved_;
#endif
    }

  protected:
    // (set false: the scope changes nothing)
    constexpr use_executor(executor_ref ex, bool set) {
#if CTFORMER_THREADS
        if (std::is_constant_evaluated() || !set) return;
        saved_ = detail::current_executor_v;
        detail::current_executor_v = ex;
        set_ = true;
#else
        (void)ex, (void)set;
#endif
    }
};

namespace detail {
// For its lifetime the calling thread runs alone where `alone` holds (a call too small to split
// whose parts would only hand data between cores), else keeps its executor.
struct alone_scope : use_executor {
    constexpr explicit alone_scope(bool alone) : use_executor(executor_ref{}, alone) {}
};
}  // namespace detail

}  // namespace ctformer
