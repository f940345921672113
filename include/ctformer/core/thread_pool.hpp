// ctformer/core/thread_pool.hpp — ct::thread_pool: a fixed set of worker threads, started once, that
// run an executor's parts (core/executor.hpp) with a fork-join barrier.
//
//   ct::thread_pool pool(2);                 // the caller + 1 worker: the only allocation is here
//   ct::use_executor on(pool);               // this thread's ctformer calls split over it, until on ends
//
// Part i of a run goes to thread i % concurrency() (the caller is thread 0), a static schedule:
// no queue, no lock, no allocation per run. Waiting spins briefly (a decoding step's parallel
// regions are microseconds apart), then sleeps on the atomic (C++20 wait/notify: a futex on
// Linux). One run at a time: a run() called while another is in progress — from a task (nested)
// or from a second thread — runs its parts on its own thread, in order (same results, no deadlock).
// Not for bare-metal builds (std::thread): core/executor.hpp alone is what they include.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "executor.hpp"

namespace ctformer {

class thread_pool {
  public:
    // threads: how many run parts at once, the caller included (0 or 1: no worker).
    explicit thread_pool(std::size_t threads) : n_(threads > 1 ? threads : 1) {
        workers_.reserve(n_ - 1);
        for (std::size_t id = 1; id < n_; ++id) workers_.emplace_back([this, id] { work(id); });
    }
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;
    ~thread_pool() {
        job_.stop = true;
        publish();
        for (auto& w : workers_) w.join();
    }

    std::size_t concurrency() const { return n_; }

    void run(std::size_t parts, part_task task, void* ctx) {
        if (n_ == 1 || parts <= 1 || busy_.exchange(true, std::memory_order_acquire)) {
            for (std::size_t i = 0; i < parts; ++i) task(ctx, i);
            return;
        }
        job_.task = task, job_.ctx = ctx, job_.parts = parts;
        pending_.store(n_ - 1, std::memory_order_relaxed);
        publish();
        run_share(0);
        for (std::size_t spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
            if (spin < spin_limit) {
                relax(spin);
                continue;
            }
            const std::uint32_t left = pending_.load(std::memory_order_acquire);
            if (left != 0) pending_.wait(left, std::memory_order_acquire);
        }
        busy_.store(false, std::memory_order_release);
    }

  private:
    static constexpr std::size_t spin_limit = 1 << 14;  // polls before sleeping (a fraction of a millisecond)
    // A poll pauses the core (the spinning thread leaves its SMT sibling's pipeline alone); polls
    // after the first 2K also yield: where threads outnumber free cores, the thread being waited
    // for gets the core (yielding more rarely starved it: scripts/performance_log.md).
    static void relax(std::size_t spin) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
        asm volatile("yield");
#endif
        if (spin >= spin_limit / 8) std::this_thread::yield();
    }

    // Bumps the generation: a store, not a read-modify-write (only this thread writes it), so the
    // caller goes on to its own share while the line travels to the workers.
    void publish() {
        job_.generation.store(job_.generation.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        job_.generation.notify_all();
    }
    void run_share(std::size_t id) {
        for (std::size_t i = id; i < job_.parts; i += n_) job_.task(job_.ctx, i);
    }
    void work(std::size_t id) {
        std::uint32_t seen = 0;
        while (true) {
            std::uint32_t g = job_.generation.load(std::memory_order_acquire);
            for (std::size_t spin = 0; g == seen; ++spin) {
                if (spin >= spin_limit) job_.generation.wait(seen, std::memory_order_acquire);
                else relax(spin);
                g = job_.generation.load(std::memory_order_acquire);
            }
            seen = g;
            if (job_.stop) return;
            run_share(id);
            if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
        }
    }

    std::size_t n_;
    std::vector<std::thread> workers_;
    // The current run, written before the generation is bumped and read after it is seen: one cache
    // line, so a worker finds the job in the line that told it there is one (one transfer between
    // cores instead of two: a fork-join is a few such transfers).
    struct alignas(64) job_line {
        std::atomic<std::uint32_t> generation{0};
        bool stop = false;
        part_task task = nullptr;
        void* ctx = nullptr;
        std::size_t parts = 0;
    } job_;
    alignas(64) std::atomic<std::uint32_t> pending_{0};  // workers still running their share
    alignas(64) std::atomic<bool> busy_{false};           // the caller's alone
};
static_assert(executor<thread_pool> && executor<sequential>);

}  // namespace ctformer
