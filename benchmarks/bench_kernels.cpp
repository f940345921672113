// Kernel benchmarks: the GEMM micro-kernel with warm caches, GEMMs at the layer's shapes, and the
// row kernels. GFLOP/s and % of the peak-FMA probe measured by this binary.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <vector>

#include <ctformer/ctformer.hpp>
#include <ctformer/core/thread_pool.hpp>

#include "probes.hpp"

#ifdef CTFORMER_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef CTFORMER_HAVE_ONEDNN
#include "onednn_gemm.hpp"
#endif

namespace {
// Per-iteration flops (the report derives GFLOP/s and % of peak from the best repetition's time;
// Google Benchmark's "min" of a rate counter would be the worst repetition), plus live rates.
void report_flops(benchmark::State& st, double flops) {
    st.counters["flops"] = flops;
    st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    st.counters["%peak"] = benchmark::Counter(100.0 * flops / probes::peak_flops(), benchmark::Counter::kIsIterationInvariantRate);
}
// Best of the repetitions: on a shared machine the minimum is the least disturbed measurement.
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
// panels: b is a weight in panel layout (the layer's linear layers); else row-major (attention).
// copies > 1: that many weights in turn (out of cache, as in a layer).
void gemm_bench(benchmark::State& st, std::size_t M, std::size_t N, std::size_t K, bool panels, std::size_t copies = 1) {
    const std::size_t be = ct::kernels::panel_elems<float>(K, N);
    std::vector<float> a(M * K, 0.5f), b(be * copies, 0.25f), c(M * N), bias(N, 0.1f);
    static float pack[ct::kernels::gemm_pack_elems<float>(256)];  // (the largest M below), as a workspace provides
    std::size_t i = 0;
    for (auto _ : st) {
        if (panels)
            ct::kernels::gemm_panels(M, N, K, a.data(), K, b.data() + (i++ % copies) * be, c.data(), N, bias.data(),
                                     ct::kernels::identity_op{}, pack);
        else
            ct::kernels::gemm(M, N, K, a.data(), K, b.data(), N, c.data(), N, bias.data(), ct::kernels::identity_op{},
                              pack);
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    const double flops = 2.0 * double(M) * double(N) * double(K);
    report_flops(st, flops);
}
using tile = ct::kernels::gemm_tile<float>;

// The register tile alone on packed panels that stay in L1 (MR x KC of a, KC x NR of b).
void BM_gemm_microkernel(benchmark::State& st) {
    std::vector<float> ap(tile::MR * tile::KC, 0.5f), bp(tile::KC * tile::NR, 0.25f), c(tile::MR * tile::NR);
    for (auto _ : st) {
        ct::kernels::detail::micro_tile<float, tile::MR, tile::NV, ct::kernels::detail::a_layout::packed, true>(
            tile::KC, ap.data(), 0, bp.data(), 0, c.data(), tile::NR, nullptr, false);
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    const double flops = 2.0 * tile::MR * tile::NR * tile::KC;
    report_flops(st, flops);
}
// The kernels with 2 threads: a ct::thread_pool(2) as the current executor for the benchmark.
ct::executor_ref two_threads() {
    static ct::thread_pool pool(2);
    return pool;
}
void BM_gemm(benchmark::State& st) {
    gemm_bench(st, std::size_t(st.range(0)), std::size_t(st.range(1)), std::size_t(st.range(2)), true);
}
// One fork-join of the 2-thread pool over two empty parts: the synchronization a parallel region
// costs by itself (both threads awake: back-to-back regions, as in a layer's).
void BM_fork_join(benchmark::State& st) {
    const ct::executor_ref ex = two_threads();
    std::size_t sink = 0;
    for (auto _ : st) {
        ex.for_each(2, [&](std::size_t i) { benchmark::DoNotOptimize(i); });
        benchmark::DoNotOptimize(++sink);
    }
}
void BM_gemm_t2(benchmark::State& st) {
    const ct::use_executor on(two_threads());
    gemm_bench(st, std::size_t(st.range(0)), std::size_t(st.range(1)), std::size_t(st.range(2)), true);
}
void BM_gemm_cold(benchmark::State& st) {
    gemm_bench(st, std::size_t(st.range(0)), std::size_t(st.range(1)), std::size_t(st.range(2)), true, 16);
}
// The backward's two shapes, (M, N, K) as the kernels name them. tn: a weight's gradient,
// dWᵀ: (In, Out) panels += Xᵀ · dY over K = rows; nt: an input's gradient, dX: (rows, In) = dY · W.
void BM_gemm_tn(benchmark::State& st) {
    const ct::use_executor on(st.range(4) > 1 ? two_threads() : ct::executor_ref{});
    const auto M = std::size_t(st.range(0)), N = std::size_t(st.range(1)), K = std::size_t(st.range(2));
    const std::size_t copies = st.range(3) ? 16 : 1, ge = ct::kernels::panel_elems<float>(M, N);
    std::vector<float> x(K * M, 0.5f), dy(K * N * copies, 0.25f), g(ge * copies);
    static float pack[ct::kernels::gemm_train_pack_elems<float>(2048, 2048, 2048)];
    std::size_t i = 0;
    for (auto _ : st) {
        const std::size_t c = i++ % copies;
        ct::kernels::gemm_tn_panels(M, N, K, x.data(), M, dy.data() + c * K * N, N, g.data() + c * ge, pack);
        benchmark::DoNotOptimize(g.data());
        benchmark::ClobberMemory();
    }
    report_flops(st, 2.0 * double(M) * double(N) * double(K));
}
void BM_gemm_nt(benchmark::State& st) {
    const ct::use_executor on(st.range(4) > 1 ? two_threads() : ct::executor_ref{});
    const auto M = std::size_t(st.range(0)), N = std::size_t(st.range(1)), K = std::size_t(st.range(2));
    const std::size_t copies = st.range(3) ? 16 : 1, we = ct::kernels::panel_elems<float>(N, K);
    std::vector<float> dy(M * K, 0.5f), w(we * copies, 0.25f), dx(M * N);
    static float pack[ct::kernels::gemm_train_pack_elems<float>(2048, 2048, 2048)];
    std::size_t i = 0;
    for (auto _ : st) {
        ct::kernels::gemm_nt_panels(M, N, K, dy.data(), K, w.data() + (i++ % copies) * we, dx.data(), N, pack, false);
        benchmark::DoNotOptimize(dx.data());
        benchmark::ClobberMemory();
    }
    report_flops(st, 2.0 * double(M) * double(N) * double(K));
}
void BM_gemm_rowmajor(benchmark::State& st) {
    gemm_bench(st, std::size_t(st.range(0)), std::size_t(st.range(1)), std::size_t(st.range(2)), false);
}

#ifdef CTFORMER_HAVE_CBLAS
// The peer: OpenBLAS's sgemm at the same (M, N, K), as a layer over BLAS calls it for a Linear:
// C = A · Wᵀ with W (N, K) row-major (PyTorch's layout), beta = 0 (no bias: in BLAS's favour).
void BM_sgemm_openblas(benchmark::State& st) {
    const auto M = int(st.range(0)), N = int(st.range(1)), K = int(st.range(2));
    std::vector<float> a(std::size_t(M) * K, 0.5f), w(std::size_t(N) * K, 0.25f), c(std::size_t(M) * N);
    for (auto _ : st) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a.data(), K, w.data(), K, 0.0f, c.data(), N);
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    report_flops(st, 2.0 * double(M) * double(N) * double(K));
}
#endif
#ifdef CTFORMER_HAVE_ONEDNN
// The peer: oneDNN's matmul primitive at the same (M, N, K), created once (as the oneDNN layer
// peer does), weight in PyTorch's (N, K) layout, bias added as ctformer's GEMM adds it.
void BM_matmul_onednn(benchmark::State& st) {
    const auto M = int(st.range(0)), N = int(st.range(1)), K = int(st.range(2));
    std::vector<float> a(std::size_t(M) * K, 0.5f), w(std::size_t(N) * K, 0.25f), c(std::size_t(M) * N), bias(N, 0.1f);
    blas_peer::OneDnn dnn;
    for (auto _ : st) {
        dnn.linear(M, N, K, a.data(), w.data(), bias.data(), c.data(), N, false, blas_peer::act::none);
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    report_flops(st, 2.0 * double(M) * double(N) * double(K));
}
#endif

// (M, N, K) of the layers' weight GEMMs: base (M = 128) QKV, out_proj, FFN up, FFN down; tiny
// (M = 16) QKV, FFN up, FFN down; small (M = 32) and batched (M = 256) QKV and FFN down; decoding
// steps (M = 1, 3: the GEMV over weight panels).
void layer_gemm_shapes(benchmark::internal::Benchmark* b) {
    for (auto [M, N, K] : {std::array{128, 1536, 512}, {128, 512, 512}, {128, 2048, 512}, {128, 512, 2048},
                           {16, 192, 64}, {16, 256, 64}, {16, 64, 256}, {32, 384, 128}, {32, 128, 512},
                           {256, 384, 128}, {256, 128, 512}, {1, 1536, 512}, {1, 2048, 512}, {1, 512, 2048},
                           {3, 2048, 512}, {1, 2048, 2048}})
        b->Args({M, N, K});
}

void BM_softmax(benchmark::State& st) {
    std::vector<float> x(std::size_t(st.range(0)));
    for (auto _ : st) {
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) * 0.1f;
        ct::kernels::softmax_inplace(x.data(), x.size());
        benchmark::DoNotOptimize(x.data());
    }
    st.SetItemsProcessed(st.iterations() * st.range(0));
    st.counters["items"] = double(st.range(0));
}
void BM_layer_norm(benchmark::State& st) {
    std::vector<float> x(std::size_t(st.range(0)), 0.3f), g(x.size(), 1.0f), b(x.size(), 0.0f), y(x.size());
    for (auto _ : st) {
        ct::kernels::layer_norm_row(x.data(), y.data(), x.size(), 1e-5f, g.data(), b.data());
        benchmark::DoNotOptimize(y.data());
    }
    st.SetItemsProcessed(st.iterations() * st.range(0));
    st.counters["items"] = double(st.range(0));
}
// rows of n LayerNorm'd: arg 2 = 1 through layer_norm_rows (a vector's width of rows' statistics
// at once), 0 row by row through layer_norm_row (the same arithmetic, each row's chain alone)
void BM_layer_norm_rows(benchmark::State& st) {
    const std::size_t rows = std::size_t(st.range(0)), n = std::size_t(st.range(1));
    std::vector<float> x(rows * n), g(n, 1.0f), b(n, 0.0f), y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 23) * 0.1f - 1.0f;
    for (auto _ : st) {
        if (st.range(2))
            ct::kernels::layer_norm_rows(x.data(), y.data(), rows, n, 1e-5f, g.data(), b.data());
        else
            for (std::size_t r = 0; r < rows; ++r)
                ct::kernels::layer_norm_row(x.data() + r * n, y.data() + r * n, n, 1e-5f, g.data(), b.data());
        benchmark::DoNotOptimize(y.data());
    }
    st.SetItemsProcessed(st.iterations() * std::int64_t(rows * n));
}
template <class F> void BM_activation(benchmark::State& st) {
    std::vector<float> x(4096);
    for (auto _ : st) {
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 100) * 0.05f - 2.5f;
        ct::kernels::map_inplace(x.data(), x.size(), F{});
        benchmark::DoNotOptimize(x.data());
    }
    st.SetItemsProcessed(st.iterations() * 4096);
    st.counters["items"] = 4096;
}
}  // namespace

BENCHMARK(BM_gemm_microkernel)->ComputeStatistics("min", min_of);
// b in panel layout, as the layer's weights; the peers on PyTorch-layout weights.
BENCHMARK(BM_gemm)->Apply(layer_gemm_shapes)->ComputeStatistics("min", min_of);
BENCHMARK(BM_fork_join)->ComputeStatistics("min", min_of);
BENCHMARK(BM_gemm_t2)->Apply(layer_gemm_shapes)->ComputeStatistics("min", min_of);
#ifdef CTFORMER_HAVE_CBLAS
BENCHMARK(BM_sgemm_openblas)->Apply(layer_gemm_shapes)->ComputeStatistics("min", min_of);
#endif
#ifdef CTFORMER_HAVE_ONEDNN
BENCHMARK(BM_matmul_onednn)->Apply(layer_gemm_shapes)->ComputeStatistics("min", min_of);
#endif
// The base layer's GEMMs with their weights out of cache (sixteen copies in turn), as in the layer.
BENCHMARK(BM_gemm_cold)->Args({128, 1536, 512})->Args({128, 2048, 512})->Args({128, 512, 2048})->ComputeStatistics("min", min_of);
// The base layer's backward: weight gradients (In, Out, rows) and input gradients (rows, In, Out).
// (a fourth argument 1: sixteen copies of the gradient / weight in turn, out of cache as in a layer)
BENCHMARK(BM_gemm_tn)->Args({512, 1536, 128, 0, 1})->Args({512, 512, 128, 0, 1})->Args({512, 2048, 128, 0, 1})->Args({2048, 512, 128, 0, 1})
    ->Args({512, 2048, 128, 1, 1})->Args({64, 192, 16, 0, 1})->Args({64, 256, 16, 0, 1})->Args({256, 64, 16, 0, 1})
    ->Args({512, 2048, 128, 0, 2})->Args({2048, 512, 128, 0, 2})->ComputeStatistics("min", min_of);
BENCHMARK(BM_gemm_nt)->Args({128, 512, 1536, 0, 1})->Args({128, 512, 512, 0, 1})->Args({128, 512, 2048, 0, 1})->Args({128, 2048, 512, 0, 1})
    ->Args({128, 512, 2048, 1, 1})->Args({16, 64, 192, 0, 1})->Args({16, 64, 256, 0, 1})->Args({16, 256, 64, 0, 1})
    ->Args({16, 512, 2048, 1, 1})->Args({128, 512, 2048, 0, 2})->Args({128, 2048, 512, 0, 2})->ComputeStatistics("min", min_of);
// b row-major (attention's keys and values): the same kernel with b packed per call.
BENCHMARK(BM_gemm_rowmajor)->Args({128, 512, 512})->Args({16, 192, 64})->ComputeStatistics("min", min_of);
BENCHMARK(BM_softmax)->Arg(16)->Arg(128)->Arg(1000)->ComputeStatistics("min", min_of);
BENCHMARK(BM_layer_norm)->Arg(64)->Arg(512)->ComputeStatistics("min", min_of);
BENCHMARK(BM_layer_norm_rows)->ArgsProduct({{16, 128}, {64, 512}, {0, 1}})->ComputeStatistics("min", min_of);
BENCHMARK(BM_activation<ct::relu>)->Name("BM_activation/relu")->ComputeStatistics("min", min_of);
BENCHMARK(BM_activation<ct::gelu>)->Name("BM_activation/gelu")->ComputeStatistics("min", min_of);
BENCHMARK(BM_activation<ct::gelu_tanh>)->Name("BM_activation/gelu_tanh")->ComputeStatistics("min", min_of);
BENCHMARK(BM_activation<ct::silu>)->Name("BM_activation/silu")->ComputeStatistics("min", min_of);
BENCHMARK_MAIN();
