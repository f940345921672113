// ctformer/models/sampling.hpp — choosing the next token from one row of logits, reproducible from
// a counter-based RNG, no heap. The chain, in this order (Hugging Face's generate applies its
// processors and warpers so; llama.cpp's default chain also penalizes first):
//   logit bias -> repetition penalty -> frequency and presence penalties   (over recent tokens)
//   -> greedy (temperature <= 0) | temperature -> top-k -> top-p -> min-p -> the draw
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "../core/dropout.hpp"
#include "../core/status.hpp"
#include "../kernels/elementwise.hpp"
#include "../kernels/sampling.hpp"

namespace ctformer {

using token = std::int32_t;  // a token id (negative only as ignore_index in targets)

// A bias added to one token's logit (-inf: the token is never chosen).
struct logit_bias {
    token id;
    float bias;
};

struct sampling {
    float temperature = 1.0f;  // <= 0: greedy (argmax; ties go to the lowest id); finite
    std::size_t top_k = 0;     // > 0: keep the k most likely tokens
    float top_p = 1.0f;        // < 1: keep the fewest most likely tokens whose probability reaches top_p; in [0, 1]
    float min_p = 0.0f;        // > 0: drop tokens less likely than min_p times the most likely one; in [0, 1]
    // Over the last penalty_last_n tokens of the sequence (prompt included): a token that occurs
    // there has its logit divided by repetition_penalty if positive, multiplied if negative (CTRL,
    // Hugging Face, llama.cpp), then lowered by count·frequency_penalty + presence_penalty
    // (OpenAI's definition). repetition_penalty > 0; 1 and 0, 0: off.
    float repetition_penalty = 1.0f;
    float frequency_penalty = 0.0f;
    float presence_penalty = 0.0f;
    std::size_t penalty_last_n = 64;
    std::span<const logit_bias> bias = {};  // added first; ids in the vocabulary, biases finite or -inf
    std::uint64_t seed = 0;    // the draw for position n is Philox(seed, n): reproducible, order-free
    token stop = -1;           // generating it ends generation (it is not passed to the callback)

    // errc::invalid_option naming the field: a NaN or infinite temperature, top_p or min_p NaN or
    // outside [0, 1], repetition_penalty not positive and finite, a penalty NaN or infinite, a
    // bias NaN or +inf. (A bias's id is checked against the vocabulary by sample.)
    constexpr status validate() const {
        if (!(temperature - temperature == 0.0f)) return status::error(errc::invalid_option, "temperature");
        if (!(top_p >= 0.0f && top_p <= 1.0f)) return status::error(errc::invalid_option, "top_p");
        if (!(min_p >= 0.0f && min_p <= 1.0f)) return status::error(errc::invalid_option, "min_p");
        if (!(repetition_penalty > 0.0f && repetition_penalty - repetition_penalty == 0.0f))
            return status::error(errc::invalid_option, "repetition_penalty");
        if (!(frequency_penalty - frequency_penalty == 0.0f)) return status::error(errc::invalid_option, "frequency_penalty");
        if (!(presence_penalty - presence_penalty == 0.0f)) return status::error(errc::invalid_option, "presence_penalty");
        for (const logit_bias& b : bias)
            if (b.bias != b.bias || b.bias == std::numeric_limits<float>::infinity() || b.id < 0)
                return status::error(errc::invalid_option, "logit bias");
        return {};
    }
    constexpr bool penalizes() const {
        return penalty_last_n > 0 && (repetition_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f);
    }
};

template <class T, std::size_t V> struct sampler_scratch {
    struct candidate {
        double value;  // an unnormalized probability (of the top-k, the nucleus, ..., or every token)
        token id;
    };
    candidate c[V];
    T w[V];  // the row being worked on: the biased logits, then (l - max) / temperature, then exp of that
};

// A uniform double in [0, 1) from (seed, counter): Philox-4x32-10, 53 bits.
inline double uniform01(std::uint64_t seed, std::uint64_t counter) {
    const auto r = philox4x32({static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32), 0x5eed, 0},
                              {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
    const std::uint64_t bits = (std::uint64_t{r[0]} << 21) ^ (r[1] >> 11);
    return static_cast<double>(bits & ((std::uint64_t{1} << 53) - 1)) * 0x1p-53;
}

namespace detail {
// w = the logits after the bias and the penalties over recent (its last penalty_last_n), in the
// logits' type (as Hugging Face computes them on the model's scores).
template <class T> void biased_logits(const T* logits, std::size_t V, const sampling& s, std::span<const token> recent, T* w) {
    std::copy(logits, logits + V, w);
    for (const logit_bias& b : s.bias) w[b.id] += static_cast<T>(b.bias);
    if (!s.penalizes()) return;
    if (recent.size() > s.penalty_last_n) recent = recent.subspan(recent.size() - s.penalty_last_n);
    for (std::size_t i = 0; i < recent.size(); ++i) {
        const token t = recent[i];
        if (t < 0 || static_cast<std::size_t>(t) >= V) continue;
        bool first = true;  // each distinct token once, with its count
        std::size_t count = 0;
        for (std::size_t k = 0; k < recent.size(); ++k) {
            first = first && !(k < i && recent[k] == t);
            count += recent[k] == t;
        }
        if (!first) continue;
        const T l = w[t], r = static_cast<T>(s.repetition_penalty);
        w[t] = (l < T(0) ? l * r : l / r) -
               static_cast<T>(static_cast<double>(count) * s.frequency_penalty + s.presence_penalty);
    }
}
// The k most likely of w (value descending, ties: the lower id) into c[0..k), in that order: a
// heap of the k best so far whose front is the worst kept; the row scanned by vectors for a value
// above it (after the first few hundred tokens almost none is).
template <class T, class Cand> void top_k(const T* w, std::size_t V, std::size_t k, Cand* c) {
    const auto better = [](const Cand& a, const Cand& b) { return a.value > b.value || (a.value == b.value && a.id < b.id); };
    for (std::size_t j = 0; j < k; ++j) c[j] = {static_cast<double>(w[j]), static_cast<token>(j)};
    std::make_heap(c, c + k, better);
    // (an equal value further on has a larger id: worse than the front, so only a greater one enters)
    for (std::size_t j = kernels::first_above(w, k, V, static_cast<T>(c[0].value)); j < V;
         j = kernels::first_above(w, j + 1, V, static_cast<T>(c[0].value))) {
        std::pop_heap(c, c + k, better);
        c[k - 1] = {static_cast<double>(w[j]), static_cast<token>(j)};
        std::push_heap(c, c + k, better);
    }
    std::sort_heap(c, c + k, better);
}
// The chain up to the draw (sampling_candidates' contract); dense: the candidates are every token
// in id order, their values left in w (n = V), not written to c.
template <class T, std::size_t V>
status prepare_draw(const T* logits, const sampling& s, sampler_scratch<T, V>& scratch, std::span<const token> recent,
                    std::size_t& n, double& total, bool& dense) {
    dense = false;
    if (status st = s.validate(); !st) return st;
    for (const logit_bias& b : s.bias)
        if (static_cast<std::size_t>(b.id) >= V) return status::error(errc::invalid_option, "logit bias");
    auto* c = scratch.c;
    if ((s.temperature <= 0.0f || s.top_k == 1) && s.bias.empty() && !s.penalizes()) {
        // greedy on the logits as they are: one pass, no candidates written (a decoding step's every token)
        // (all finite, the usual case: the vector maximum, then its first position; else one scalar
        // pass that sorts out NaN and ±inf, the best value in a register — a chain through
        // logits[best] would wait on a load per element)
        std::size_t best = 0;
        if (kernels::all_finite(logits, 1, V, V)) {
            const T top = kernels::max(logits, V);  // (its first position: the first value above the next float below)
            best = kernels::first_above(logits, 0, V, std::nextafter(top, -std::numeric_limits<T>::infinity()));
        } else {
            T top = logits[0];
            bool nan = false;
            for (std::size_t j = 1; j < V; ++j) {
                const T l = logits[j];
                nan |= l != l;
                if (l > top) top = l, best = j;
            }
            if (nan || top != top || top == std::numeric_limits<T>::infinity() || top == -std::numeric_limits<T>::infinity())
                return status::error(errc::non_finite, "logits");
        }
        c[0] = {1.0, static_cast<token>(best)};
        n = 1, total = 1.0;
        return {};
    }
    if (!kernels::all_finite(logits, 1, V, V))  // (one vector pass; -inf is allowed, so then the scan)
        for (std::size_t j = 0; j < V; ++j) {
            const T l = logits[j];
            if (l != l || l == std::numeric_limits<T>::infinity()) return status::error(errc::non_finite, "logits");
        }
    T* w = scratch.w;
    biased_logits(logits, V, s, recent, w);
    const T top = kernels::max(w, V);  // (+inf: a bias overflowed the logits' type, as a +inf logit is)
    if (!(top > -std::numeric_limits<T>::infinity()) || top == std::numeric_limits<T>::infinity())
        return status::error(errc::non_finite, "logits");
    if (s.temperature <= 0.0f || s.top_k == 1) {  // the argmax: ties go to the lowest id
        const std::size_t best = kernels::first_above(w, 0, V, std::nextafter(top, -std::numeric_limits<T>::infinity()));
        c[0] = {1.0, static_cast<token>(best)};
        n = 1, total = 1.0;
        return {};
    }
    // (logit - max) / temperature <= 0: exp never overflows, however small the temperature
    kernels::shift_divide(w, V, top, static_cast<T>(s.temperature));
    if (s.top_k > 0 && s.top_k < V) {
        n = s.top_k;
        top_k(w, V, n, c);
    } else if (s.top_p < 1.0f) {  // the nucleus over every token: all of them in order
        for (std::size_t j = 0; j < V; ++j) c[j] = {static_cast<double>(w[j]), static_cast<token>(j)};
        // (a heap sort: no recursion, so the stack has a static bound on a microcontroller)
        std::partial_sort(c, c + V, c + V, [](const auto& a, const auto& b) { return a.value > b.value || (a.value == b.value && a.id < b.id); });
        n = V;
    } else {  // every token, in id order: the values stay in w
        kernels::exp_shift_sum(w, V, T(0));
        if (s.min_p > 0.0f) kernels::zero_below(w, V, static_cast<T>(s.min_p));  // (the top token's value is exp(0) = 1)
        n = V, dense = true, total = kernels::block_total(w, V);
        return {};
    }
    total = 0;
    for (std::size_t j = 0; j < n; ++j) total += (c[j].value = static_cast<double>(simd::vexp_nonpositive(static_cast<T>(c[j].value))));
    if (s.top_p < 1.0f) {  // the nucleus: the shortest prefix reaching top_p of the mass
        double cum = 0;
        std::size_t keep = 0;
        while (keep < n && cum < static_cast<double>(s.top_p) * total) cum += c[keep++].value;
        n = keep > 0 ? keep : 1;
        total = 0;
        for (std::size_t j = 0; j < n; ++j) total += c[j].value;
    }
    if (s.min_p > 0.0f) {  // relative to the most likely token, whose value is exp(0) = 1
        total = 0;
        for (std::size_t j = 0; j < n; ++j) total += (c[j].value = c[j].value < static_cast<double>(s.min_p) ? 0.0 : c[j].value);
    }
    return {};
}
}  // namespace detail

// The chain up to the draw: the candidates c[0..n) with unnormalized probabilities (c[j].value)
// and their total; or, greedy, n = 1 with the argmax. Errors as sample's.
template <class T, std::size_t V>
status sampling_candidates(const T* logits, const sampling& s, sampler_scratch<T, V>& scratch, std::span<const token> recent,
                           std::size_t& n, double& total) {
    bool dense = false;
    if (status st = detail::prepare_draw(logits, s, scratch, recent, n, total, dense); !st) return st;
    if (dense)
        for (std::size_t j = 0; j < V; ++j) scratch.c[j] = {static_cast<double>(scratch.w[j]), static_cast<token>(j)};
    return {};
}

// Chooses the next token from logits: (V) into next. counter: the draw's index (the position being
// generated); recent: the sequence so far (its last penalty_last_n count for the penalties). A
// -inf logit is a blocked token: probability 0, never chosen. A NaN or +inf logit, or no logit
// above -inf after the bias, is errc::non_finite ("logits"): the model's output is broken and no
// choice would mean anything. Bad options are errc::invalid_option. next is written only on success.
template <class T, std::size_t V>
status sample(const T* logits, const sampling& s, std::uint64_t counter, sampler_scratch<T, V>& scratch, token& next,
              std::span<const token> recent = {}) {
    std::size_t n = 0;
    double total = 0;
    bool dense = false;
    if (status st = detail::prepare_draw(logits, s, scratch, recent, n, total, dense); !st) return st;
    const auto* c = scratch.c;
    if (dense) {
        const std::size_t j = kernels::block_draw(scratch.w, V, uniform01(s.seed, counter) * total);
        next = static_cast<token>(j < V ? j : 0);  // (the top token's value is 1: some j is)
        return {};
    }
    if (n == 1) {
        next = c[0].id;
        return {};
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
