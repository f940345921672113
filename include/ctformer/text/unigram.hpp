// ctformer/text/unigram.hpp — SentencePiece's unigram segmentation: the Viterbi path over every
// piece that matches at each character (its optimized encoder, unigram_model.cc): the best score
// ending at each byte, one pass left to right, then back from the end. An unknown character
// scores min_score - 10; a user-defined piece length·max_score - 0.1; ties keep the first found,
// and the arithmetic is SentencePiece's to the rounding (a candidate in double, a best in float).
#pragma once
#include <cstddef>
#include <cstdint>

#include "tables.hpp"
#include "utf8.hpp"

namespace ctformer::text {

struct unigram_scratch {
    float* best;            // (N + 1) the best score of a path ending at each byte
    std::int32_t* start;    // (N + 1) where that path's last piece starts (-1: none yet)
    std::uint32_t* id;      // (N + 1) its last piece (no_id: an unknown character)
};

// The pieces of s[0..n) (normalized), first to last, into out (at most n ids); returns how many.
// An unknown character is no_id, its bytes s[from..to) recoverable from the returned starts.
constexpr std::size_t unigram_segment(const tables& t, const char* s, std::size_t n, const unigram_scratch& w,
                                      std::uint32_t* out, std::uint32_t* out_start) {
    const float unk_score = t.min_score() - 10.0f;
    for (std::size_t i = 0; i <= n; ++i) w.best[i] = 0.0f, w.start[i] = -1, w.id[i] = no_id;
    for (std::size_t from = 0; from < n;) {
        const float here = w.best[from];
        const std::size_t one = utf8::announced_length(s + from, n - from);
        bool single = false;
        std::uint32_t h = 0x811C9DC5u;
        for (std::size_t to = from; to < n;) {
            h = (h ^ static_cast<std::uint8_t>(s[to])) * 0x01000193u;
            ++to;
            const std::size_t length = to - from;
            const unsigned bits = t.prefix_bits(h);
            const std::uint32_t id = bits & 2 ? t.find_hashed(h, s + from, length) : no_id;
            const bool more = length < t.max_piece() && (bits & 1);
            if (id == no_id || t.kind(id) == piece_kind::unused) {
                if (!more) break;
                continue;
            }
            const double score = t.kind(id) == piece_kind::user_defined
                                     ? static_cast<double>(static_cast<float>(length) * t.max_score()) - 0.1
                                     : static_cast<double>(t.score(id));
            const double candidate = score + here;
            if (w.start[to] == -1 || candidate > w.best[to]) {
                w.best[to] = static_cast<float>(candidate);
                w.start[to] = static_cast<std::int32_t>(from);
                w.id[to] = id;
            }
            single = single || length == one;
            if (!more) break;
        }
        if (!single) {
            const float candidate = unk_score + here;
            if (w.start[from + one] == -1 || candidate > w.best[from + one]) {
                w.best[from + one] = candidate;
                w.start[from + one] = static_cast<std::int32_t>(from);
                w.id[from + one] = no_id;
            }
        }
        from += one;
    }
    std::size_t k = 0;
    for (std::size_t end = n; end > 0; end = static_cast<std::size_t>(w.start[end])) {
        out[k] = w.id[end];
        out_start[k++] = static_cast<std::uint32_t>(w.start[end]);
    }
    for (std::size_t i = 0; i < k / 2; ++i) {
        const std::uint32_t a = out[i], b = out_start[i];
        out[i] = out[k - 1 - i], out_start[i] = out_start[k - 1 - i];
        out[k - 1 - i] = a, out_start[k - 1 - i] = b;
    }
    return k;
}

}  // namespace ctformer::text
