// Machine probes measured by the benchmark binary itself, so ratios come from the same run:
// the peak FMA rate of one core (independent FMA chains on the compiled vector width) and the
// read bandwidth of a buffer the size of the base layer's weights.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdio>

#include <ctformer/simd.hpp>

namespace probes {

// FLOP/s of one core issuing only FMAs (2 FLOP per lane): 12 independent accumulators cover
// the FMA latency x pipes of current x86 cores.
inline double peak_flops() {
    static const double peak = [] {
        using V = ct::simd::vec<float>;
        constexpr std::size_t W = ct::simd::width<float>, C = 12;
        V acc[C];
        for (std::size_t i = 0; i < C; ++i) acc[i] = V(0.001f * float(i));
        const V a(0.999999f), b(1e-7f);
        double best = 0;
        for (int rep = 0; rep < 5; ++rep) {
            const std::size_t iters = 20'000'000;
            const auto t0 = std::chrono::steady_clock::now();
            for (std::size_t it = 0; it < iters; ++it)
                for (std::size_t i = 0; i < C; ++i) acc[i] = ct::simd::fma<float>(acc[i], a, b);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            best = std::max(best, double(iters) * C * W * 2 / s);
        }
        V sum(0.0f);
        for (std::size_t i = 0; i < C; ++i) sum += acc[i];
        volatile float sink = ct::simd::hsum<float>(sum);
        (void)sink;
        return best;
    }();
    return peak;
}

// Bytes/s reading a buffer of `bytes` repeatedly (vector loads, summed so nothing is elided).
inline double read_bandwidth(std::size_t bytes) {
    static float* buf = nullptr;
    static std::size_t have = 0;
    const std::size_t n = bytes / sizeof(float);
    if (have < n) {
        delete[] buf;
        buf = new float[n];
        for (std::size_t i = 0; i < n; ++i) buf[i] = 1e-6f * float(i % 1000);
        have = n;
    }
    constexpr std::size_t W = ct::simd::width<float>;
    double best = 0;
    for (int rep = 0; rep < 20; ++rep) {
        ct::simd::vec<float> a0(0.f), a1(0.f), a2(0.f), a3(0.f);
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i + 4 * W <= n; i += 4 * W) {
            a0 += ct::simd::load(buf + i);
            a1 += ct::simd::load(buf + i + W);
            a2 += ct::simd::load(buf + i + 2 * W);
            a3 += ct::simd::load(buf + i + 3 * W);
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        volatile float sink = ct::simd::hsum<float>(a0 + a1 + a2 + a3);
        (void)sink;
        best = std::max(best, double(n * sizeof(float)) / s);
    }
    return best;
}

}  // namespace probes
