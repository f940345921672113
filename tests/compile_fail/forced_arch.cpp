// expect: CTFORMER_ARCH names a vector arch this compiler is not targeting
// (compiled without -march flags: the default x86-64 target has no AVX-512)
#define CTFORMER_ARCH xsimd::avx512bw
#include <ctformer/ctformer.hpp>
