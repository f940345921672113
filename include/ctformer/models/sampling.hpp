// ctformer/models/sampling.hpp — choosing the next token from one row of logits: greedy,
// temperature, top-k and top-p (nucleus), reproducible from a counter-based RNG. No heap.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "../core/dropout.hpp"
#include "../core/status.hpp"

namespace ctformer {

using token = std::int32_t;  // a token id (negative only as ignore_index in targets)

struct sampling {
    float temperature = 1.0f;  // <= 0: greedy (argmax; ties go to the lowest id); finite
    std::size_t top_k = 0;     // > 0: keep the k most likely tokens
    float top_p = 1.0f;        // < 1: keep the fewest most likely tokens whose probability reaches top_p; in [0, 1]
    std::uint64_t seed = 0;    // the draw for position n is Philox(seed, n): reproducible, order-free
    token stop = -1;           // generating it ends generation (it is not passed to the callback)

    // errc::invalid_option naming the field: a NaN or infinite temperature, top_p NaN or outside [0, 1].
    constexpr status validate() const {
        if (!(temperature - temperature == 0.0f)) return status::error(errc::invalid_option, "temperature");
        if (!(top_p >= 0.0f && top_p <= 1.0f)) return status::error(errc::invalid_option, "top_p");
        return {};
    }
};

template <class T, std::size_t V> struct sampler_scratch {
    struct candidate {
        double value;  // (logit - max logit) / temperature, then unnormalized probability
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

// Chooses the next token from logits: (V) into next. counter: the draw's index (the position being
// generated). A -inf logit is a blocked token: probability 0, never chosen. A NaN or +inf logit,
// or no logit above -inf, is errc::non_finite ("logits"): the model's output is broken and no
// choice would mean anything. Bad options are errc::invalid_option. next is written only on success.
template <class T, std::size_t V>
status sample(const T* logits, const sampling& s, std::uint64_t counter, sampler_scratch<T, V>& scratch, token& next) {
    if (status st = s.validate(); !st) return st;
    std::size_t best = V;  // the argmax (ties: the lowest id); V: none above -inf
    for (std::size_t j = 0; j < V; ++j) {
        const T l = logits[j];
        if (l != l || l == std::numeric_limits<T>::infinity()) return status::error(errc::non_finite, "logits");
        if (l != -std::numeric_limits<T>::infinity() && (best == V || l > logits[best])) best = j;
    }
    if (best == V) return status::error(errc::non_finite, "logits");
    if (s.temperature <= 0.0f || s.top_k == 1) {
        next = static_cast<token>(best);
        return {};
    }
    // (logit - max) / temperature <= 0: exp never overflows, however small the temperature
    auto* c = scratch.c;
    const double top = static_cast<double>(logits[best]);
    for (std::size_t j = 0; j < V; ++j) c[j] = {(static_cast<double>(logits[j]) - top) / s.temperature, static_cast<token>(j)};
    std::size_t n = V;
    if ((s.top_k > 0 && s.top_k < V) || s.top_p < 1.0f) {  // most likely first (ties: lower id first)
        const std::size_t k = s.top_k > 0 && s.top_k < V ? s.top_k : V;
        std::partial_sort(c, c + k, c + V, [](const auto& a, const auto& b) {
            return a.value > b.value || (a.value == b.value && a.id < b.id);
        });
        n = k;
    }
    double total = 0;
    for (std::size_t j = 0; j < n; ++j) total += (c[j].value = std::exp(c[j].value));
    if (s.top_p < 1.0f) {  // the nucleus: the shortest prefix reaching top_p of the mass
        double cum = 0;
        std::size_t keep = 0;
        while (keep < n && cum < static_cast<double>(s.top_p) * total) cum += c[keep++].value;
        n = keep > 0 ? keep : 1;
        total = 0;
        for (std::size_t j = 0; j < n; ++j) total += c[j].value;
    }
    double u = uniform01(s.seed, counter) * total;
    std::size_t last = 0;  // the last candidate with probability > 0 (the best one has 1)
    for (std::size_t j = 0; j < n; ++j) {
        if (c[j].value <= 0) continue;
        last = j;
        if (u < c[j].value) {
            next = c[j].id;
            return {};
        }
        u -= c[j].value;
    }
    next = c[last].id;  // rounding at the very end of the mass
    return {};
}

}  // namespace ctformer
