// Machine probes measured by the benchmark binary itself, so ratios come from the same run:
// the peak FMA rate of one core (independent FMA chains on the compiled vector width) and the
// best read bandwidth (over 1-8 concurrent streams) of a buffer the size of a layer's weights
// (in huge pages, as ctformer's weights are in the benchmarks).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <new>
#include <utility>

#include <ctformer/core/huge_pages.hpp>
#include <ctformer/simd/simd.hpp>

namespace probes {

// FLOP/s of one core issuing only FMAs (2 FLOP per lane): 12 independent accumulators cover
// the FMA latency x pipes of current x86 cores. The chains are unrolled at compile time (left
// rolled, GCC 12 may keep acc in memory, each FMA behind a store-to-load forward: 46 GFLOP/s on
// a Zen 4 core whose GEMM micro-kernel runs at 115).
// measure_peak_flops(reps): the best of reps fresh measurements (~70 ms each). peak_flops(): the
// first call's best of 5, kept (each benchmark's %peak counter). The report uses the probe
// benchmark's own repetitions, each measured afresh and interleaved with the others, so that one
// disturbed measurement cannot set every percentage (a run on Zen 4 read 47 where 116 is usual).
inline double measure_peak_flops(int reps) {
    using V = ct::simd::vec<float>;
    constexpr std::size_t W = ct::simd::width<float>, C = 12;
    V acc[C];
    for (std::size_t i = 0; i < C; ++i) acc[i] = V(0.001f * float(i));
    const V a(0.999999f), b(1e-7f);
    double best = 0;
    for (int rep = 0; rep < reps; ++rep) {
        const std::size_t iters = 20'000'000;
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t it = 0; it < iters; ++it)  // unrolled, so that acc lives in registers
            [&]<std::size_t... I>(std::index_sequence<I...>) {
                ((acc[I] = ct::simd::fma<float>(acc[I], a, b)), ...);
            }(std::make_index_sequence<C>{});
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, double(iters) * C * W * 2 / s);
    }
    V sum(0.0f);
    for (std::size_t i = 0; i < C; ++i) sum += acc[i];
    volatile float sink = ct::simd::hsum<float>(sum);
    (void)sink;
    return best;
}
inline double peak_flops() {
    static const double peak = measure_peak_flops(5);
    return peak;
}

// Bytes/s reading `bytes` with P sequential streams side by side (vector loads, summed so nothing
// is elided). One stream under-reports what a core can pull from L3: here 1 stream gives
// ~52 GB/s, 4 streams ~74 GB/s, and the GEMV of a decoding step reads 4 weight panels at once.
template <std::size_t P> double read_streams(const float* buf, std::size_t n) {
    constexpr std::size_t W = ct::simd::width<float>;
    const std::size_t part = n / P / (2 * W) * (2 * W);
    double best = 0;
    for (int rep = 0; rep < 20; ++rep) {
        ct::simd::vec<float> acc[P][2];
        for (auto& a : acc) a[0] = a[1] = ct::simd::vec<float>(0.f);
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < part; i += 2 * W)
            for (std::size_t p = 0; p < P; ++p) {
                acc[p][0] += ct::simd::load(buf + p * part + i);
                acc[p][1] += ct::simd::load(buf + p * part + i + W);
            }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ct::simd::vec<float> sum(0.f);
        for (auto& a : acc) sum += a[0] + a[1];
        volatile float sink = ct::simd::hsum<float>(sum);
        (void)sink;
        best = std::max(best, double(part * P * sizeof(float)) / s);
    }
    return best;
}

// The best read bandwidth over 1, 2, 4 and 8 streams of a buffer of `bytes`.
inline double read_bandwidth(std::size_t bytes) {
    static float* buf = nullptr;
    static std::size_t have = 0;
    const std::size_t n = bytes / sizeof(float);
    if (have < n) {  // (in huge pages, as the layer's weights are: bench_layer.cpp's storage)
        constexpr std::align_val_t huge{ctformer::huge_page_bytes};
        ::operator delete[](buf, huge);
        buf = static_cast<float*>(::operator new[](n * sizeof(float), huge));
        (void)ctformer::advise_huge_pages(buf, n * sizeof(float));
        for (std::size_t i = 0; i < n; ++i) buf[i] = 1e-6f * float(i % 1000);
        have = n;
    }
    return std::max(std::max(read_streams<1>(buf, n), read_streams<2>(buf, n)),
                    std::max(read_streams<4>(buf, n), read_streams<8>(buf, n)));
}

}  // namespace probes
