// ctformer/models/sampling.hpp — choosing the next token from one row of logits: greedy,
// temperature, top-k and top-p (nucleus), reproducible from a counter-based RNG. No heap.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../dropout.hpp"

namespace ctformer {

using token = std::int32_t;  // a token id (negative only as ignore_index in targets)

struct sampling {
    float temperature = 1.0f;  // <= 0: greedy (argmax; ties go to the lowest id)
    std::size_t top_k = 0;     // > 0: keep the k most likely tokens
    float top_p = 1.0f;        // < 1: keep the fewest most likely tokens whose probability reaches top_p
    std::uint64_t seed = 0;    // the draw for position n is Philox(seed, n): reproducible, order-free
    token stop = -1;           // generating it ends generation (it is not passed to the callback)
};

template <class T, std::size_t V> struct sampler_scratch {
    struct candidate {
        double value;  // logit / temperature, then probability
        token id;
    };
    candidate c[V];
};

// A uniform double in [0, 1) from (seed, counter): Philox-4x32-10, 53 bits.
inline double uniform01(std::uint64_t seed, std::uint64_t counter) {
    const auto r = philox4x32({static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32), 0x5eed, 0},
                              {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
    const std::uint64_t bits = (std::uint64_t{r[0]} << 21) ^ (r[1] >> 11);
    return static_cast<double>(bits & ((std::uint64_t{1} << 53) - 1)) * 0x1p-53;
}

// The next token from logits: (V). counter: the draw's index (the position being generated).
template <class T, std::size_t V>
token sample(const T* logits, const sampling& s, std::uint64_t counter, sampler_scratch<T, V>& scratch) {
    auto* c = scratch.c;
    if (s.temperature <= 0.0f || s.top_k == 1) {
        std::size_t best = 0;
        for (std::size_t j = 1; j < V; ++j)
            if (logits[j] > logits[best]) best = j;
        return static_cast<token>(best);
    }
    for (std::size_t j = 0; j < V; ++j) c[j] = {static_cast<double>(logits[j]) / s.temperature, static_cast<token>(j)};
    std::size_t n = V;
    const bool filter = (s.top_k > 0 && s.top_k < V) || s.top_p < 1.0f;
    if (filter) {  // most likely first (ties: lower id first)
        const std::size_t k = s.top_k > 0 && s.top_k < V ? s.top_k : V;
        std::partial_sort(c, c + k, c + V, [](const auto& a, const auto& b) {
            return a.value > b.value || (a.value == b.value && a.id < b.id);
        });
        n = k;
    }
    double m = -INFINITY, total = 0;
    for (std::size_t j = 0; j < n; ++j) m = std::fmax(m, c[j].value);
    for (std::size_t j = 0; j < n; ++j) total += (c[j].value = std::exp(c[j].value - m));
    if (s.top_p < 1.0f) {  // the nucleus: the shortest prefix reaching top_p of the mass
        double cum = 0;
        std::size_t keep = 0;
        while (keep < n && cum < static_cast<double>(s.top_p) * total) cum += c[keep++].value;
        n = keep > 0 ? keep : 1;
        total = 0;
        for (std::size_t j = 0; j < n; ++j) total += c[j].value;
    }
    double u = uniform01(s.seed, counter) * total;
    for (std::size_t j = 0; j < n; ++j) {
        if (u < c[j].value) return c[j].id;
        u -= c[j].value;
    }
    return c[n - 1].id;  // rounding at the very end of the mass
}

}  // namespace ctformer
