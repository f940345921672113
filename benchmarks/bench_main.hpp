// The benchmark programs' main: Google Benchmark's, plus the BLAS every peer resolved at run time
// (from /proc/self/maps) in the JSON context ("blas"), so a report can name it and refuse the
// reference BLAS (Debian's default for libtorch-dev, ~25x slower than OpenBLAS: not a peer).
#pragma once
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

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

inline int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::AddCustomContext("blas", resolved_blas());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}

}  // namespace bench
