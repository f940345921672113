// The benchmark programs' main: Google Benchmark's, plus the BLAS every peer resolved at run time
// (from /proc/self/maps) in the JSON context ("blas"), so a report can name it and refuse the
// reference BLAS (Debian's default for libtorch-dev, ~25x slower than OpenBLAS: not a peer), and
// oneDNN's version where its peer is built in ("onednn").
#pragma once
#include <benchmark/benchmark.h>

#include <fstream>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <ctformer/core/huge_pages.hpp>
#include <ctformer/core/thread_pool.hpp>
#include <ctformer/core/quant.hpp>

#ifdef CTFORMER_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace bench {

// The shared objects mapped into this process whose name says BLAS (OpenBLAS, reference BLAS,
// BLIS, MKL), comma-separated, or "none".
inline std::string resolved_blas() {
    std::ifstream maps("/proc/self/maps");
    std::string line, found;
    while (std::getline(maps, line)) {
        const auto slash = line.find('/');
        if (slash == std::string::npos) continue;
        const std::string path = line.substr(slash);
        const bool blas = path.find("blas") != std::string::npos || path.find("blis") != std::string::npos ||
                          path.find("mkl") != std::string::npos;
        if (blas && found.find(path) == std::string::npos) found += (found.empty() ? "" : ",") + path;
    }
    return found.empty() ? "none" : found;
}

// ctformer's storage as docs/api.md recommends: objects of 2 MB and more aligned to 2 MB
// (alignas(ct::huge_page_alignment<X>)) and advised huge pages before their first write.
// True where every object was advised (or held no whole huge page).
template <class... X> bool advise_huge(X&... x) { return (ctformer::advise_huge_pages(x).st.ok() && ...); }

// Sets every element of tensor t to next() in order (a quantized weight is quantized from them).
template <class X, class F> void set_all(X& t, F&& next) {
    if constexpr (ctformer::is_quantized_weight_v<X>) {
        std::vector<float> v(X::size);  // (quantize reads each value twice)
        for (auto& x : v) x = next();
        t.quantize([&](std::size_t i) { return v[i]; });
    } else {
        for (std::size_t i = 0; i < X::size; ++i) t.set(i, next());
    }
}

// ctformer's executor for `threads` threads (<= 8): one ct::thread_pool per count, started on first
// use and kept (its workers sleep between runs); 1: none (the calling thread alone).
inline ctformer::executor_ref executor(std::size_t threads) {
    static std::unique_ptr<ctformer::thread_pool> pools[9];
    if (threads <= 1 || threads > 8) return {};
    if (!pools[threads]) pools[threads] = std::make_unique<ctformer::thread_pool>(threads);
    return *pools[threads];
}

// The peers' threads for one benchmark: OpenBLAS's pool (openblas_set_num_threads) and the OpenMP
// runtime oneDNN and libtorch run on (omp_set_num_threads), where linked in; scripts/bench_report
// starts every program with one (OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=1). RAII: back to 1 after.
#ifdef CTFORMER_HAVE_CBLAS
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);  // the kernels OpenBLAS chose for this CPU
#endif
#ifdef CTFORMER_HAVE_OPENMP
extern "C" void omp_set_num_threads(int);
#endif
struct peer_threads {
    explicit peer_threads(int n) { set(n); }
    ~peer_threads() { set(1); }
    static void set([[maybe_unused]] int n) {
#ifdef CTFORMER_HAVE_CBLAS
        openblas_set_num_threads(n);
#endif
#ifdef CTFORMER_HAVE_OPENMP
        omp_set_num_threads(n);
#endif
    }
};

inline int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::AddCustomContext("blas", resolved_blas());
#ifdef CTFORMER_HAVE_CBLAS
    benchmark::AddCustomContext("blas_core", openblas_get_corename());
#endif
#ifdef CTFORMER_HAVE_ONEDNN
    const dnnl_version_t* v = dnnl_version();
    benchmark::AddCustomContext("onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                              std::to_string(v->patch));
#endif
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}

}  // namespace bench
