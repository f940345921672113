// ctformer/kernels/rope.hpp — rotary position embeddings (RoPE): the cos/sin table of one
// configuration, and the rotation of a head's vector by its position, forward and inverse
// (backward: the rotation is orthogonal, its transpose rotates back) side by side.
//
// Frequencies follow Hugging Face's LlamaRotaryEmbedding in the table's dtype:
//   inv_freq[i] = 1 / theta^(2i / R) (i < R/2, R the rotary dimension), angle = pos · inv_freq[i]
// each rounded to the dtype as PyTorch's float32 path rounds it, then cos/sin rounded once.
#pragma once
#include <cstddef>
#include <type_traits>

#include "../simd/cmath.hpp"

namespace ctformer {

struct rotate_half {};  // Hugging Face (Llama, Mistral, Qwen): pairs (i, i + R/2)
struct interleaved {};  // GPT-J, Meta's original Llama: pairs (2i, 2i + 1)

}  // namespace ctformer

namespace ctformer::kernels {

template <class T, std::size_t R, std::size_t MaxPos> struct rope_table {
    static constexpr std::size_t half = R / 2;
    T cos[MaxPos * half];
    T sin[MaxPos * half];

    static constexpr rope_table make(double theta) {
        rope_table t{};
        for (std::size_t i = 0; i < half; ++i) {
            const T e = static_cast<T>(2 * i) / static_cast<T>(R);
            const T inv_freq = T(1) / static_cast<T>(cmath::detail::pow(theta, static_cast<double>(e)));
            for (std::size_t pos = 0; pos < MaxPos; ++pos) {
                const T angle = static_cast<T>(pos) * inv_freq;
                t.cos[pos * half + i] = cmath::cos(angle);
                t.sin[pos * half + i] = cmath::sin(angle);
            }
        }
        return t;
    }
};
// One table per configuration, shared by every layer and call: constant-initialized when the
// compiler evaluates it (g++), otherwise computed once before main by the same code.
template <class T, std::size_t R, std::size_t MaxPos, long long Theta>
inline const rope_table<T, R, MaxPos> rope_table_v = rope_table<T, R, MaxPos>::make(static_cast<double>(Theta));

// Rotates v's first R dimensions by the angles of one position (c, s: its table row, R/2 each);
// Inverse rotates by the negative angles (the backward of the forward rotation).
template <class Layout, bool Inverse, class T>
constexpr void rope_rotate(T* v, const T* c, const T* s, std::size_t R) {
    const std::size_t half = R / 2;
    for (std::size_t i = 0; i < half; ++i) {
        const std::size_t a = std::is_same_v<Layout, interleaved> ? 2 * i : i;
        const std::size_t b = std::is_same_v<Layout, interleaved> ? 2 * i + 1 : i + half;
        const T x = v[a], y = v[b], sn = Inverse ? -s[i] : s[i];
        v[a] = x * c[i] - y * sn;
        v[b] = y * c[i] + x * sn;
    }
}

}  // namespace ctformer::kernels
