// Executors (core/executor.hpp, core/thread_pool.hpp): every part runs exactly once, on the
// executor's threads; runs back to back (the barrier), more threads than parts, a nested run and
// two callers at once (run on the caller's thread, no deadlock), a pool destroyed while idle;
// part_begin's partition; use_executor's scopes. .ci/run also builds this test with ThreadSanitizer.
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <ctformer/core/schedule.hpp>
#include <ctformer/core/thread_pool.hpp>
#include <doctest/doctest.h>

namespace ct = ctformer;

namespace {

// Runs `parts` parts through ex, each adding its index + 1 to its own slot; checks every slot once.
void check_all_parts_once(ct::executor_ref ex, std::size_t parts) {
    std::vector<std::atomic<int>> hits(parts);
    std::vector<std::size_t> values(parts, 0);
    ex.for_each(parts, [&](std::size_t i) {
        hits[i].fetch_add(1, std::memory_order_relaxed);
        values[i] += i + 1;
    });
    for (std::size_t i = 0; i < parts; ++i) {
        INFO("part " << i << " of " << parts << ", concurrency " << ex.concurrency());
        REQUIRE(hits[i].load() == 1);
        REQUIRE(values[i] == i + 1);
    }
}

}  // namespace

TEST_CASE("executor: part_begin cuts [0, n) into contiguous near-equal parts, fixed by (n, parts)") {
    for (std::size_t n : {0, 1, 5, 64, 1000})
        for (std::size_t parts : {1, 2, 3, 7, 64}) {
            CHECK(ct::part_begin(n, parts, 0) == 0);
            CHECK(ct::part_begin(n, parts, parts) == n);
            for (std::size_t i = 0; i < parts; ++i) {
                const std::size_t len = ct::part_begin(n, parts, i + 1) - ct::part_begin(n, parts, i);
                CHECK(len * parts <= n + parts);  // at most one more than n / parts
                CHECK(len * parts + parts >= n);  // at least n / parts
            }
        }
}

TEST_CASE("executor: the default (sequential) runs every part once, in order, on the caller") {
    ct::executor_ref none;
    CHECK(!none.parallel());
    CHECK(none.concurrency() == 1);
    std::vector<std::size_t> order;
    none.for_each(5, [&](std::size_t i) { order.push_back(i); });
    CHECK(order == std::vector<std::size_t>{0, 1, 2, 3, 4});
    ct::sequential seq;
    ct::executor_ref s = seq;
    check_all_parts_once(s, 9);
}

TEST_CASE("executor: thread_pool of 1, 2, 3 and 7 threads runs every part exactly once, on its threads") {
    for (std::size_t threads : {1, 2, 3, 7}) {
        ct::thread_pool pool(threads);
        CHECK(pool.concurrency() == threads);
        const ct::executor_ref ex = pool;
        for (std::size_t parts : {0, 1, 2, 3, 5, 7, 8, 64})  // more threads than parts included
            check_all_parts_once(ex, parts);
        // the parts of one run are spread over min(parts, threads) distinct threads
        std::mutex m;
        std::set<std::thread::id> ids;
        ex.for_each(4 * threads, [&](std::size_t) {
            std::lock_guard<std::mutex> lock(m);
            ids.insert(std::this_thread::get_id());
        });
        CHECK(ids.size() == threads);
    }
}

TEST_CASE("executor: thousands of runs back to back (the barrier), results as sequential") {
    ct::thread_pool pool(2);
    const ct::executor_ref ex = pool;
    std::vector<double> a(1000), b(1000);
    for (int run = 0; run < 3000; ++run) {
        const std::size_t parts = 1 + run % 9;
        ex.for_each(parts, [&](std::size_t p) {
            for (std::size_t i = ct::part_begin(a.size(), parts, p); i < ct::part_begin(a.size(), parts, p + 1); ++i)
                a[i] = a[i] * 0.5 + double(i + run);
        });
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = b[i] * 0.5 + double(i + run);
    }
    CHECK(a == b);
}

TEST_CASE("executor: a nested run and a second caller run on their own thread: no deadlock, same results") {
    ct::thread_pool pool(2);
    const ct::executor_ref ex = pool;
    std::atomic<int> inner{0};
    ex.for_each(4, [&](std::size_t) { ex.for_each(3, [&](std::size_t) { inner.fetch_add(1); }); });
    CHECK(inner.load() == 12);
    // two threads share the pool: each run completes, whichever gets the workers
    std::atomic<int> total{0};
    auto caller = [&] {
        for (int r = 0; r < 500; ++r) ex.for_each(5, [&](std::size_t i) { total.fetch_add(int(i)); });
    };
    std::thread t1(caller), t2(caller);
    t1.join(), t2.join();
    CHECK(total.load() == 2 * 500 * (0 + 1 + 2 + 3 + 4));
}

TEST_CASE("executor: pools created and destroyed while idle shut down cleanly") {
    for (int i = 0; i < 50; ++i) {
        ct::thread_pool pool(1 + i % 4);
        if (i % 2) check_all_parts_once(pool, 6);
    }
}

TEST_CASE("executor: the one door: use_executor scopes nest, a sequential one is honoured, each restores") {
    // (core/schedule.hpp's cuts read only the calling thread's executor)
    ct::thread_pool pool(2), other(3);
    auto parts = [] {  // how many parts a cut of 64 items takes on the calling thread
        std::atomic<std::size_t> n{0};
        if (!ct::schedule::split_parts(64, [&](std::size_t, std::size_t) { n.fetch_add(1); })) return std::size_t(1);
        return n.load();
    };
    CHECK(parts() == 1);  // no scope: the calling thread alone
    {
        const ct::use_executor on(pool);
        CHECK(parts() == 2);
        {
            const ct::use_executor alone(ct::sequential{});  // nested sequential: honoured
            CHECK(parts() == 1);
            {
                const ct::use_executor inner(other);
                CHECK(parts() == 3);
            }
            CHECK(parts() == 1);
        }
        CHECK(parts() == 2);
        // a part runs with no executor: work inside it never forks again
        std::atomic<std::size_t> nested{0};
        CHECK(ct::schedule::split_parts(2, [&](std::size_t, std::size_t) { nested.fetch_add(parts()); }));
        CHECK(nested.load() == 2);
        // another thread starts with none: a scope belongs to the thread that opened it
        std::size_t seen = 0;
        std::thread t([&] { seen = parts(); });
        t.join();
        CHECK(seen == 1);
    }
    CHECK(parts() == 1);
}
