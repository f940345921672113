// Every core: the same decoder layer and GPT run on three executors — ct::thread_pool, an OpenMP
// adapter, and an adapter over worker tasks the application created itself (the pattern an RTOS
// port follows: tasks started once, a semaphore to start each, one to report back) — and each
// gives bit for bit the single-threaded results. Exits non-zero on any difference.
//
//   ./executors [threads]        (default 2)
//
// An executor is anything with concurrency() and run(parts, task, ctx) (core/executor.hpp):
// run calls task(ctx, i) once for every part i, on any of its threads, and returns when all have
// returned. `ct::use_executor on(pool);` makes one the calling thread's executor; nothing else changes.
#include <ctformer/ctformer.hpp>
#include <ctformer/core/thread_pool.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <semaphore>
#include <thread>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace ct = ctformer;

#ifdef _OPENMP
// OpenMP: a parallel loop over the parts, statically scheduled, on `threads` of its threads.
struct openmp_executor {
    int threads;
    std::size_t concurrency() const { return std::size_t(threads); }
    void run(std::size_t parts, ct::part_task task, void* ctx) const {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long i = 0; i < long(parts); ++i) task(ctx, std::size_t(i));
    }
};
#endif

// Tasks the application owns (on an RTOS: xTaskCreate'd once at start-up, the semaphores from
// its kernel). The caller is thread 0; worker w runs parts w, w + n, w + 2n, ... .
class task_executor {
  public:
    explicit task_executor(std::size_t threads) : n_(threads > 1 ? threads : 1), done_(0) {
        for (std::size_t w = 0; w < n_; ++w) go_.push_back(std::make_unique<std::binary_semaphore>(0));
        for (std::size_t w = 1; w < n_; ++w) tasks_.emplace_back([this, w] { loop(w); });
    }
    ~task_executor() {
        stop_ = true;
        for (std::size_t w = 1; w < n_; ++w) go_[w]->release();
        for (auto& t : tasks_) t.join();
    }
    std::size_t concurrency() const { return n_; }
    void run(std::size_t parts, ct::part_task task, void* ctx) {
        task_ = task, ctx_ = ctx, parts_ = parts;
        for (std::size_t w = 1; w < n_; ++w) go_[w]->release();  // (a release publishes the job)
        share(0);
        for (std::size_t w = 1; w < n_; ++w) done_.acquire();
    }

  private:
    void share(std::size_t w) {
        for (std::size_t i = w; i < parts_; i += n_) task_(ctx_, i);
    }
    void loop(std::size_t w) {
        while (true) {
            go_[w]->acquire();
            if (stop_) return;
            share(w);
            done_.release();
        }
    }
    std::size_t n_;
    std::vector<std::unique_ptr<std::binary_semaphore>> go_;
    std::counting_semaphore<64> done_;
    std::vector<std::thread> tasks_;
    ct::part_task task_ = nullptr;
    void* ctx_ = nullptr;
    std::size_t parts_ = 0;
    bool stop_ = false;
};

using Layer = ct::DecoderLayer<ct::d_model<256>, ct::heads<4>, ct::ffn_dim<1024>>;
using Block = ct::DecoderOnlyBlock<ct::d_model<128>, ct::heads<4>, ct::ffn_dim<512>, ct::norm_first<true>>;
using Model = ct::GPT<256, 64, 2, Block>;
constexpr std::size_t T = 64;

static Layer::Params lp;
static Layer::Workspace<1, T> lws;
static ct::Tensor<float, 1, T, 256> tgt, mem, out;
static Model::Params mp;
static Model::GenerateWorkspace<8> gws;
static Model::KVCache<1, 64> cache;

// The layer's output and 32 sampled tokens on executor ex; the layer's best time of 20 runs.
static std::vector<float> run_on(ct::executor_ref ex, double& layer_us) {
    const ct::use_executor on(ex);  // every ctformer call of this thread, until `on` ends
    layer_us = 1e30;
    for (int r = 0; r < 20; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        if (!Layer::forward(lp, lws, tgt, mem, out, ct::causal{})) std::exit(2);
        layer_us = std::min(layer_us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::vector<float> result(out.data(), out.data() + out.size);
    cache.reset();
    const ct::token prompt[2] = {1, 2};
    if (!Model::generate(mp, gws, cache, prompt, 2, 32, ct::sampling{.temperature = 0.8f, .seed = 7}, [&](ct::token t) {
            result.push_back(float(t));
            return true;
        }))
        std::exit(2);
    return result;
}

int main(int argc, char** argv) {
    const std::size_t threads = argc > 1 ? std::size_t(std::atoi(argv[1])) : 2;
    unsigned s = 1;
    auto next = [&] { return (s = s * 1103515245u + 12345u, float((s >> 9) & 0xffff) / 65536.0f - 0.5f); };
    ct::for_each_tensor(lp, [&](std::string_view, auto& t) { for (std::size_t i = 0; i < t.size; ++i) t.set(i, 0.2f * next()); });
    ct::for_each_tensor(mp, [&](std::string_view, auto& t) { for (std::size_t i = 0; i < t.size; ++i) t.set(i, 0.2f * next()); });
    for (auto& v : tgt.storage) v = next();
    for (auto& v : mem.storage) v = next();

    double us = 0;
    const std::vector<float> want = run_on({}, us);
    std::printf("sequential          layer %8.1f µs\n", us);
    int failures = 0;
    auto check = [&](const char* name, ct::executor_ref ex) {
        double t = 0;
        const bool same = run_on(ex, t) == want;
        std::printf("%-19s layer %8.1f µs  %s\n", name, t, same ? "bit-identical" : "DIFFERENT");
        failures += !same;
    };
    ct::thread_pool pool(threads);
    check("ct::thread_pool", pool);
    task_executor tasks(threads);
    check("application tasks", tasks);
#ifdef _OPENMP
    openmp_executor omp{int(threads)};
    check("OpenMP", omp);
#else
    std::printf("OpenMP              (not compiled with -fopenmp)\n");
#endif
    return failures ? 1 : 0;
}
