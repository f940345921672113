// ctformer/layer/kv_cache.hpp — key/value caches for incremental decoding (the KV-cache memory role).
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

#include "../core/quant.hpp"
#include "../core/role_size.hpp"
#include "../core/status.hpp"

namespace ctformer {

namespace detail {
struct cache_access;  // the layer's (and stacks') way to advance a cache's lengths

// Keys transposed per head, kt: (Dh, Capacity), and values (Capacity, Dh), per (b, h), as E (T,
// or bf16 bits: core/quant.hpp's cache_element_t). Zero-initialized: a step reads whole vectors of
// keys past a row's length (and ignores them).
template <class E, std::size_t B, std::size_t H, std::size_t Dh, std::size_t Capacity> struct kv_storage {
    alignas(64) E kt[B * H * Dh * Capacity]{};
    alignas(64) E v[B * H * Capacity * Dh]{};

    E* keys_t(std::size_t b, std::size_t h) { return kt + (b * H + h) * Dh * Capacity; }
    const E* keys_t(std::size_t b, std::size_t h) const { return kt + (b * H + h) * Dh * Capacity; }
    E* values(std::size_t b, std::size_t h) { return v + (b * H + h) * Capacity * Dh; }
    const E* values(std::size_t b, std::size_t h) const { return v + (b * H + h) * Capacity * Dh; }
    // Stores key/value rows k: (Dh), v: (Dh) of position pos for (b, h) (rounded, for bf16).
    template <class T> void put(std::size_t b, std::size_t h, std::size_t pos, const T* k, const T* vv) {
        put_rows(b, h, pos, 1, k, vv, 0);
    }
    // n positions from pos, their rows at stride ld: the transposed keys a column at a time, each a
    // run of n consecutive slots (a prompt's rows, one write stream per column, not one per element).
    template <class T>
    void put_rows(std::size_t b, std::size_t h, std::size_t pos, std::size_t n, const T* k, const T* vv, std::size_t ld) {
        E* kt_h = keys_t(b, h) + pos;
        for (std::size_t d = 0; d < Dh; ++d)
            for (std::size_t i = 0; i < n; ++i) kt_h[d * Capacity + i] = to_cache<E>(k[i * ld + d]);
        E* v_h = values(b, h) + pos * Dh;
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t d = 0; d < Dh; ++d) v_h[i * Dh + d] = to_cache<E>(vv[i * ld + d]);
    }
};
}  // namespace detail

// Self-attention keys/values of up to Capacity positions per batch row. The lengths are private:
// only a step advances them (never past Capacity), and reset/truncate rewind them.
// E: what it stores (T, or bf16 bits: ct::kv_cache<ct::bf16>).
template <class T, std::size_t B, std::size_t H, std::size_t Dh, std::size_t Capacity, class E = T>
class KVCache : public detail::kv_storage<E, B, H, Dh, Capacity>, public sized_role<KVCache<T, B, H, Dh, Capacity, E>> {
    static_assert(B > 0 && Capacity > 0, "ctformer: a KV cache needs a non-zero batch and capacity");
    std::array<std::size_t, B> len_{};  // cached positions per batch row, each <= Capacity
    friend struct detail::cache_access;

  public:
    using value_type = T;
    using element_type = E;
    static constexpr std::size_t batch = B, heads = H, head_dim = Dh, capacity = Capacity;

    // Positions cached for batch row b (0 for b >= batch).
    std::size_t length(std::size_t b) const { return b < B ? len_[b] : 0; }
    const std::array<std::size_t, B>& lengths() const { return len_; }
    void reset() { len_.fill(0); }
    // Rewind row b to its first n positions (beam search, speculative decoding). b >= batch or
    // n > length is errc::out_of_range and changes nothing.
    status truncate(std::size_t b, std::size_t n) {
        if (b >= B || n > len_[b]) return status::error(errc::out_of_range);
        len_[b] = n;
        return {};
    }
    status truncate_all(std::size_t n) {
        for (std::size_t b = 0; b < B; ++b)
            if (n > len_[b]) return status::error(errc::out_of_range);
        len_.fill(n);
        return {};
    }
};

// Cross-attention keys/values of the S memory positions: filled by fill_cross_cache, then only
// read. Its own state is a flag and the adapters that projected the memory (none: the base's;
// a step through others returns errc::cache_mismatch): reset() empties it (a step then returns
// errc::cache_empty); it has no per-row lengths to truncate.
template <class T, std::size_t B, std::size_t H, std::size_t Dh, std::size_t S, class E = T>
class CrossKVCache : public detail::kv_storage<E, B, H, Dh, S>, public sized_role<CrossKVCache<T, B, H, Dh, S, E>> {
    static_assert(B > 0 && S > 0, "ctformer: a cross KV cache needs a non-zero batch and source length");
    bool filled_ = false;
    const void* adapters_ = nullptr;  // (the cross-attention adapters fill_cross_cache ran, by address)
    friend struct detail::cache_access;

  public:
    using value_type = T;
    using element_type = E;
    static constexpr std::size_t batch = B, heads = H, head_dim = Dh, capacity = S, src_len = S;

    bool filled() const { return filled_; }
    void reset() { filled_ = false, adapters_ = nullptr; }
};

namespace detail {
struct cache_access {
    template <class C> static auto& lengths(C& c) { return c.len_; }
    template <class C> static void set_filled(C& c, bool f, const void* adapters = nullptr) {
        c.filled_ = f, c.adapters_ = adapters;
    }
    template <class C> static const void* adapters(const C& c) { return c.adapters_; }
};
}  // namespace detail

}  // namespace ctformer
