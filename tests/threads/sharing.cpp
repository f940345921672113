// Params are immutable and shared across threads: several threads run forward and step on one
// Params object at the same time, each with its own Workspace and caches, and get exactly the
// single-threaded results; and a small training step handed a pool stays on the calling thread.
// .ci/run also builds this test with ThreadSanitizer.
#include <array>
#include <cstring>
#include <thread>

#include <ctformer/core/thread_pool.hpp>

#include "common.hpp"
#include "reference.hpp"

namespace {
using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::norm_first<true>>;
constexpr std::size_t B = 2, T = 9, S = 6, D = 32, N = 4;  // N threads

const L::Params& shared_params() {
    static L::Params p;
    static const bool once = (ref::randomize(p, 11), true);
    (void)once;
    return p;
}

struct PerThread {
    L::Workspace<B, T, S> ws;
    L::KVCache<B, T> cache;
    L::CrossKVCache<B, S> cc;
    L::StepWorkspace<B, 1> sws;
    ct::Tensor<float, B, T, D> tgt, out, stepped;
    ct::Tensor<float, B, S, D> mem;
    ct::Tensor<float, B, 1, D> x, y;
    bool ok = true;

    void run(std::uint64_t seed, const L::Params& p) {
        ref::randomize_tensor(tgt, seed);
        ref::randomize_tensor(mem, seed + 1);
        ok = L::forward(p, ws, tgt, mem, out, ct::causal{}).ok();
        cache.reset();
        L::fill_cross_cache(p, sws, cc, mem);
        for (std::size_t t = 0; t < T; ++t) {
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t d = 0; d < D; ++d) x(b, 0, d) = tgt(b, t, d);
            ok = ok && L::step(p, sws, cache, cc, x, y, ct::causal{}).ok();
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t d = 0; d < D; ++d) stepped(b, t, d) = y(b, 0, d);
        }
    }
};
}  // namespace

TEST_CASE("threads: one shared Params, forward and step in parallel equal the serial results") {
    static std::array<PerThread, N> serial, parallel;
    const L::Params& p = shared_params();
    for (std::size_t i = 0; i < N; ++i) serial[i].run(100 + i, p);
    for (int round = 0; round < 3; ++round) {
        std::array<std::thread, N> threads;
        for (std::size_t i = 0; i < N; ++i) threads[i] = std::thread([&, i] { parallel[i].run(100 + i, p); });
        for (auto& t : threads) t.join();
        for (std::size_t i = 0; i < N; ++i) {
            INFO("round " << round << ", thread " << i);
            CHECK(parallel[i].ok);
            CHECK(std::memcmp(parallel[i].out.data(), serial[i].out.data(), sizeof serial[i].out) == 0);
            CHECK(std::memcmp(parallel[i].stepped.data(), serial[i].stepped.data(), sizeof serial[i].stepped) == 0);
        }
    }
}

// A pool that counts its parallel regions.
struct counting {
    ct::thread_pool pool{2};
    std::size_t runs = 0;
    std::size_t concurrency() const { return pool.concurrency(); }
    void run(std::size_t n, ct::part_task task, void* ctx) { ++runs, pool.run(n, task, ctx); }
};

TEST_CASE("threads: a training step over fewer rows than a weight gradient splits runs on the caller alone") {
    // (B * T = 18 rows < schedule::min_grad_rows: its backward would not split, so its forward
    // does not either; the inference forward of the same shape does)
    static_assert(ct::schedule::train_alone(B * T));
    static counting ex;
    static L::Grads g1, g2;
    static L::TrainWorkspace<B, T, S> ws;
    static L::Activations<B, T, S> acts;
    static ct::Tensor<float, B, T, D> tgt, out1, out2, d_out, d_tgt1, d_tgt2;
    static ct::Tensor<float, B, S, D> mem, d_mem1, d_mem2;
    const L::Params& p = shared_params();
    ref::randomize_tensor(tgt, 21), ref::randomize_tensor(mem, 22), ref::randomize_tensor(d_out, 23);
    auto train = [&](L::Grads& g, ct::Tensor<float, B, T, D>& out, ct::Tensor<float, B, T, D>& d_tgt,
                     ct::Tensor<float, B, S, D>& d_mem) {
        REQUIRE(L::forward_train(p, ws, acts, tgt, mem, out, ct::dropout_config{}, ct::causal{}).ok());
        REQUIRE(L::backward(p, acts, ws, d_out, g, d_tgt, d_mem, ct::causal{}).ok());
    };
    train(g1, out1, d_tgt1, d_mem1);
    const ct::use_executor on(ex);
    train(g2, out2, d_tgt2, d_mem2);
    CHECK(ex.runs == 0);
    CHECK(std::memcmp(out1.data(), out2.data(), sizeof out1) == 0);
    CHECK(std::memcmp(d_tgt1.data(), d_tgt2.data(), sizeof d_tgt1) == 0);
    CHECK(std::memcmp(d_mem1.data(), d_mem2.data(), sizeof d_mem1) == 0);
    CHECK(std::memcmp(&g1, &g2, sizeof g1) == 0);
    REQUIRE(L::forward(p, ws, tgt, mem, out2, ct::causal{}).ok());
    CHECK(ex.runs > 0);
}
