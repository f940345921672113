// ctformer/text/merge.hpp — byte-pair merging, one engine for both rules: SentencePiece's (the
// adjacent pair whose concatenation is a piece with the highest score merges first) and the
// merge-rank rule of GPT-2 and Hugging Face (the pair with the lowest rank in the merges list).
// Ties go to the leftmost pair. Symbols live at their first byte's position in the text, a binary
// heap in caller scratch holds the candidate pairs (llama.cpp's and SentencePiece's agenda), so a
// text of n bytes costs O(n log n) and no heap memory.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>

#include "tables.hpp"

namespace ctformer::text {

struct merge_candidate {
    std::uint32_t key;   // smaller merges first: the rank, or the score mapped to an order
    std::uint32_t left;  // the left symbol's position
    std::uint32_t size;  // the pair's bytes when it was a candidate (stale if they changed)
    std::uint32_t id;    // the merged piece
};

// Scratch of a text of up to N bytes.
struct merge_scratch {
    std::uint32_t* len;     // (N) each symbol's bytes at its first position (0: merged away); frozen bit
    std::int32_t* prev;     // (N) the previous symbol's position, -1 at the start
    std::uint32_t* id;      // (N) the symbol's id (no_id: not looked up yet)
    merge_candidate* heap;  // (3N) candidates
};

namespace detail {
inline constexpr std::uint32_t frozen = 0x80000000u;  // never merges (SentencePiece's user-defined pieces)

// A float's order as an unsigned key, higher scores first (smaller keys).
constexpr std::uint32_t score_key(float s) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(s == 0.0f ? 0.0f : s);  // (-0 and +0 tie, as floats do)
    const std::uint32_t ordered = b & 0x80000000u ? ~b : b | 0x80000000u;  // ascending with s
    return ~ordered;
}

constexpr bool before(const merge_candidate& a, const merge_candidate& b) {
    return a.key < b.key || (a.key == b.key && a.left < b.left);
}
constexpr void heap_push(merge_candidate* h, std::size_t& n, merge_candidate c) {
    std::size_t i = n++;
    while (i > 0 && before(c, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}
constexpr merge_candidate heap_pop(merge_candidate* h, std::size_t& n) {
    const merge_candidate top = h[0], last = h[--n];
    std::size_t i = 0;
    for (;;) {
        std::size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(h[c + 1], h[c])) ++c;
        if (!before(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = last;
    return top;
}
}  // namespace detail

// Merges the symbols of s[0..n) (len/prev/id set by the caller: one symbol per position with
// len > 0, each following the previous) until no pair merges; a merged symbol's id is its piece's.
// ranked: the merge-rank rule over the symbols' ids; otherwise SentencePiece's rule over the
// pieces' bytes and scores (the initial symbols' ids may be no_id).
constexpr void merge_symbols(const tables& t, const char* s, std::size_t n, const merge_scratch& w, bool ranked) {
    using detail::frozen;
    auto L = [&](std::uint32_t p) { return w.len[p] & ~frozen; };
    std::size_t heap_n = 0;
    auto consider = [&](std::int32_t l) {
        if (l < 0) return;
        const std::uint32_t r = static_cast<std::uint32_t>(l) + L(static_cast<std::uint32_t>(l));
        if (r >= n || (w.len[l] & frozen) || (w.len[r] & frozen)) return;
        const std::uint32_t size = L(static_cast<std::uint32_t>(l)) + L(r);
        std::uint32_t key, id;
        if (ranked) {
            const auto m = t.merge(w.id[l], w.id[r]);
            if (m.rank == no_id) return;
            key = m.rank, id = m.result;
        } else {
            id = t.find(s + l, size);
            if (id == no_id) return;
            key = detail::score_key(t.score(id));
        }
        detail::heap_push(w.heap, heap_n, {key, static_cast<std::uint32_t>(l), size, id});
    };
    for (std::size_t p = 0; p < n && p + L(static_cast<std::uint32_t>(p)) < n; p += L(static_cast<std::uint32_t>(p)))
        consider(static_cast<std::int32_t>(p));
    while (heap_n) {
        const merge_candidate c = detail::heap_pop(w.heap, heap_n);
        const std::uint32_t l = c.left, ll = L(l);
        if (ll == 0 || l + ll >= n) continue;
        const std::uint32_t r = l + ll, rl = L(r);
        if (rl == 0 || ll + rl != c.size) continue;  // stale: a side merged since
        w.id[l] = c.id;
        w.len[l] = ll + rl;
        w.len[r] = 0;
        if (r + rl < n) w.prev[r + rl] = static_cast<std::int32_t>(l);
        consider(w.prev[l]);
        consider(static_cast<std::int32_t>(l));
    }
}

}  // namespace ctformer::text
