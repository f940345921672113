// ctformer/kv_cache.hpp — key/value caches for incremental decoding (the KV-cache memory role).
//
// KVCache holds one layer's self-attention keys and values for up to Capacity positions per
// batch row, with a runtime length per row (ragged batches). Keys are stored transposed per head,
// kt: (Dh, Capacity), so attention scores for a new query are a GEMV along the cache; values are
// (Capacity, Dh). CrossKVCache holds the projected keys/values of every memory position, filled
// once per source sequence (Paddle's StaticCache / gen_cache). Both are plain objects with a
// compile-time byte size: place them in static storage or memory you own.
#pragma once
#include <array>
#include <cstddef>

#include "status.hpp"

namespace ctformer {

template <class T, std::size_t B, std::size_t H, std::size_t Dh, std::size_t Capacity> struct KVCache {
    static_assert(B > 0 && Capacity > 0, "ctformer: a KV cache needs a non-zero batch and capacity");
    using value_type = T;
    static constexpr std::size_t batch = B, heads = H, head_dim = Dh, capacity = Capacity;

    // Zero-initialized: a step reads whole vectors of keys past a row's length (and ignores them).
    alignas(64) T kt[B * H * Dh * Capacity]{};  // per (b, h): keys transposed, (Dh, Capacity)
    alignas(64) T v[B * H * Capacity * Dh]{};   // per (b, h): values, (Capacity, Dh)
    std::array<std::size_t, B> len{};         // cached positions per batch row

    static constexpr std::size_t bytes = sizeof(T) * 2 * B * H * Dh * Capacity + sizeof(std::array<std::size_t, B>);

    T* keys_t(std::size_t b, std::size_t h) { return kt + (b * H + h) * Dh * Capacity; }
    const T* keys_t(std::size_t b, std::size_t h) const { return kt + (b * H + h) * Dh * Capacity; }
    T* values(std::size_t b, std::size_t h) { return v + (b * H + h) * Capacity * Dh; }
    const T* values(std::size_t b, std::size_t h) const { return v + (b * H + h) * Capacity * Dh; }

    std::size_t length(std::size_t b) const { return len[b]; }
    void reset() { len.fill(0); }
    // Rewind row b to its first n positions (beam search, speculative decoding). n > length is an
    // error and changes nothing.
    status truncate(std::size_t b, std::size_t n) {
        if (b >= B || n > len[b]) return status::error(errc::out_of_range);
        len[b] = n;
        return {};
    }
    status truncate_all(std::size_t n) {
        for (std::size_t b = 0; b < B; ++b)
            if (n > len[b]) return status::error(errc::out_of_range);
        len.fill(n);
        return {};
    }
    // Stores key/value rows k: (Dh), v: (Dh) of position pos for (b, h).
    void put(std::size_t b, std::size_t h, std::size_t pos, const T* k, const T* vv) {
        T* kt_h = keys_t(b, h);
        T* v_h = values(b, h) + pos * Dh;
        for (std::size_t d = 0; d < Dh; ++d) {
            kt_h[d * Capacity + pos] = k[d];
            v_h[d] = vv[d];
        }
    }
};

// Cross-attention keys/values of S memory positions: filled once, then only read.
template <class T, std::size_t B, std::size_t H, std::size_t Dh, std::size_t S>
struct CrossKVCache : KVCache<T, B, H, Dh, S> {
    static constexpr std::size_t src_len = S;
    bool filled = false;
};

}  // namespace ctformer
