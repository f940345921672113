// ctformer/modules/attention_sources.hpp — where one (batch row, head)'s keys and values come from.
// The full forward reads its projections where they are; the step appends them to a KVCache and
// reads the cache (keys transposed). The attention module's pipeline (attention.hpp) is the same
// for every source: a source is the one thing the forward and the cached step do differently.
#pragma once
#include <array>
#include <cstddef>

#include "../core/reflect.hpp"
#include "../kernels/attention.hpp"

namespace ctformer::modules::sources {

// One head's keys and values as the score kernels read them. (E: what they are stored as: the
// model's T, or a bf16 cache's bits)
template <class E> struct kv_view {
    kernels::keys_ref<E> k;
    kernels::strided<const E> v;  // values: (keys, Dh)
    std::size_t keys;             // number of keys visible to this call
    std::size_t rows;             // query rows of batch row b in this call
    std::size_t qpos0;            // absolute position of the first query row
};

// Sources of self-attention give key/value head kh's view to each of its query heads, and say
// where batch row b's rows start (first_pos) and how many are fed, for RoPE; a source with a cache
// stores the new rows first, once per (b, kh).

// Forward, self-attention: keys of the Tq rows themselves.
template <class T> struct transient_self {
    std::size_t Tq;
    constexpr kv_view<T> operator()(std::size_t, std::size_t, const T* k, const T* v, std::size_t ld) const {
        return {{k, ld, false}, {v, ld}, Tq, Tq, 0};
    }
    constexpr std::size_t keys(std::size_t) const { return Tq; }
    constexpr std::size_t first_pos(std::size_t) const { return 0; }
    constexpr std::size_t fed(std::size_t) const { return Tq; }
};

// Forward, cross-attention: keys/values of the memory rows, projected once per call after the
// self-attention's heads (in a Workspace they take the dead self q|k|v's place: layer/roles.hpp).
// Attn: the attention module (its shapes and project_memory).
template <class Attn> struct transient_cross {
    using T = typename Attn::T;
    const T* mem;  // (rows, D) the memory, rows = B*S
    T* kv_mem;     // (rows, 2D) at stride kv_ld: k | v per memory row
    std::size_t rows, S, Tq;
    // memory rows [m0, m1) -> their k|v (the whole forward projects rows [0, memory_rows())), with
    // the cross-attention's adapters ad (null: none)
    constexpr std::size_t memory_rows() const { return rows; }
    template <class Ad = absent>
    constexpr void project(const typename Attn::Params& p, std::size_t m0, std::size_t m1, T* pack, const Ad* ad = nullptr) const {
        Attn::project_memory(p, mem + m0 * Attn::D, m1 - m0, kv_mem + m0 * Attn::kv_ld, Attn::kv_ld, pack, ad);
    }
    constexpr kv_view<T> operator()(std::size_t b, std::size_t h) const {
        const T* kv = kv_mem + b * S * Attn::kv_ld + h * Attn::Dh;
        return {{kv, Attn::kv_ld, false}, {kv + Attn::D, Attn::kv_ld}, S, Tq, 0};
    }
    constexpr std::size_t keys(std::size_t) const { return S; }
};

// Step, self-attention: append the new rows' keys/values, attend over the whole cache row.
template <class T, std::size_t Dh, class Cache> struct cached_self {
    Cache& cache;
    const std::array<std::size_t, Cache::batch>& pos0;
    const std::array<std::size_t, Cache::batch>& count;
    constexpr void store(std::size_t b, std::size_t kh, const T* k, const T* v, std::size_t ld) const {
        cache.put_rows(b, kh, pos0[b], count[b], k, v, ld);
    }
    constexpr kv_view<typename Cache::element_type> operator()(std::size_t b, std::size_t kh, const T*, const T*,
                                                               std::size_t) const {
        return {{cache.keys_t(b, kh), Cache::capacity, true}, {cache.values(b, kh), Dh}, pos0[b] + count[b],
                count[b], pos0[b]};
    }
    constexpr std::size_t first_pos(std::size_t b) const { return pos0[b]; }
    constexpr std::size_t fed(std::size_t b) const { return count[b]; }
    constexpr std::size_t keys(std::size_t b) const { return pos0[b] + count[b]; }
};

// Step, cross-attention: the memory's keys/values, computed once by fill_cross_cache.
template <std::size_t Dh, class Cache, std::size_t B> struct cached_cross {
    const Cache& cache;
    const std::array<std::size_t, B>& pos0;
    const std::array<std::size_t, B>& count;
    static constexpr std::size_t memory_rows() { return 0; }  // (projected by fill_cross_cache)
    template <class P, class T, class Ad = absent> constexpr void project(const P&, std::size_t, std::size_t, T*, const Ad* = nullptr) const {}
    constexpr kv_view<typename Cache::element_type> operator()(std::size_t b, std::size_t h) const {
        return {{cache.keys_t(b, h), Cache::capacity, true}, {cache.values(b, h), Dh}, Cache::capacity, count[b],
                pos0[b]};
    }
    constexpr std::size_t keys(std::size_t) const { return Cache::capacity; }
};

// No cross-attention in this layer.
struct no_source {};

}  // namespace ctformer::modules::sources
