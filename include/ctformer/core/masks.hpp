// ctformer/core/masks.hpp — attention masks as types, composed at compile time, evaluated row by row
// inside the attention loop. Nothing here is materialized: causal and length masks are a bound on
// the key range (keys past it are never computed), tensor masks are read where they apply.
//
// A mask type M provides
//   template <class T, size_t B, size_t H, size_t Tq, size_t S> static constexpr bool fits;
//       whether it applies to B batch rows, H heads, query positions < Tq, keys < S, dtype T;
//   size_t key_end(size_t b, size_t qpos, size_t S) const;   keys >= this are blocked;
//   void apply(const mask_row& r, T* row, size_t key0, size_t n) const;
//       adds biases / -inf to row[0..n), the scores of keys key0..key0+n.
// Bool tensors carry their polarity in the type: blocked_if_true (PyTorch) or kept_if_true
// (Paddle), so a mask can never be silently read with the other convention.
#pragma once
#include <array>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <utility>

#include "tensor.hpp"

namespace ctformer {

struct blocked_if_true {};  // PyTorch: True = not allowed to attend
struct kept_if_true {};     // Paddle: True = allowed to attend

// Where the row being masked sits: batch row, head, head count, absolute query position.
struct mask_row {
    std::size_t b, h, heads, qpos;
};

namespace detail {
template <class Pol> constexpr bool blocks(bool v) {
    static_assert(std::is_same_v<Pol, blocked_if_true> || std::is_same_v<Pol, kept_if_true>,
                  "ctformer: a bool mask's polarity must be ct::blocked_if_true or ct::kept_if_true");
    return std::is_same_v<Pol, blocked_if_true> ? v : !v;
}
template <class T> constexpr T neg_inf = -std::numeric_limits<T>::infinity();
}  // namespace detail

struct mask_base {
    static constexpr bool has_apply = false;
    // Whether the runtime values fit S keys (key_lengths: every length <= S). A layer entry point
    // returns errc::out_of_range, naming the mask, and computes nothing when this is false.
    constexpr bool valid(std::size_t) const { return true; }
    constexpr std::size_t key_end(std::size_t, std::size_t, std::size_t S) const { return S; }
    template <class T> constexpr void apply(const mask_row&, T*, std::size_t, std::size_t) const {}
};

struct no_mask : mask_base {
    template <class T, std::size_t B, std::size_t H, std::size_t Tq, std::size_t S> static constexpr bool fits = true;
};

// Query at position i sees keys 0..i (PyTorch's triu(diagonal=1) / tgt_is_causal / memory_is_causal).
struct causal : mask_base {
    template <class T, std::size_t B, std::size_t H, std::size_t Tq, std::size_t S> static constexpr bool fits = true;
    constexpr std::size_t key_end(std::size_t, std::size_t qpos, std::size_t S) const { return qpos + 1 < S ? qpos + 1 : S; }
};

// One key length: any unsigned value, or an int literal checked at compile time (a negative
// literal does not compile; a signed runtime value must be converted by the caller, explicitly).
namespace detail {
void ctformer_error_a_key_length_cannot_be_negative();  // never defined: named by the compile error
template <std::size_t, class X> using repeat_t = X;
}
struct key_length {
    std::size_t value;
    template <class U>
        requires(std::is_integral_v<U> && std::is_unsigned_v<U> && !std::is_same_v<U, bool>)
    constexpr key_length(U v) : value(v) {}
    consteval key_length(int v) : value(static_cast<std::size_t>(v)) {
        if (v < 0) detail::ctformer_error_a_key_length_cannot_be_negative();
    }
};

// Key padding from runtime lengths: batch row b sees keys 0..len[b]-1. Lengths above the key
// count are rejected at run time (errc::out_of_range from the layer call).
template <std::size_t B, class = std::make_index_sequence<B>> struct key_lengths;
template <std::size_t B, std::size_t... I> struct key_lengths<B, std::index_sequence<I...>> : mask_base {
    std::array<std::size_t, B> len{};
    constexpr key_lengths() = default;
    constexpr explicit key_lengths(const std::array<std::size_t, B>& l) : len(l) {}
    constexpr key_lengths(detail::repeat_t<I, key_length>... l) : len{l.value...} {}
    template <class T, std::size_t Bq, std::size_t H, std::size_t Tq, std::size_t S>
    static constexpr bool fits = Bq == B;
    constexpr bool valid(std::size_t S) const {
        for (std::size_t l : len)
            if (l > S) return false;
        return true;
    }
    constexpr std::size_t key_end(std::size_t b, std::size_t, std::size_t S) const { return len[b] < S ? len[b] : S; }
};
template <class... L> key_lengths(L...) -> key_lengths<sizeof...(L)>;
template <std::size_t B> key_lengths(const std::array<std::size_t, B>&) -> key_lengths<B>;

// Key padding from a (batch, src_len) bool tensor.
template <class Pol, std::size_t B, std::size_t S> struct key_padding_mask : mask_base {
    static constexpr bool has_apply = true;
    const bool* data;
    template <class T, std::size_t Bq, std::size_t H, std::size_t Tq, std::size_t Sq>
    static constexpr bool fits = Bq == B && Sq == S;
    template <class T> constexpr void apply(const mask_row& r, T* row, std::size_t key0, std::size_t n) const {
        const bool* m = data + r.b * S + key0;
        for (std::size_t j = 0; j < n; ++j)
            if (detail::blocks<Pol>(m[j])) row[j] = detail::neg_inf<T>;
    }
};

// Explicit attention masks: (Tq, S), per head (B*H, Tq, S) or (B, H, Tq, S); bool (with polarity)
// or additive (value type V: added to the scores, -inf blocks).
enum class mask_layout { shared, per_head };
// Hm: the heads dimension of a (B, H, Tq, S) mask (0 for the (B*H, Tq, S) and (Tq, S) forms).
template <class V, class Pol, mask_layout L, std::size_t BH, std::size_t Tm, std::size_t Sm, std::size_t Hm = 0>
struct attn_mask : mask_base {
    static constexpr bool has_apply = true;
    static constexpr bool is_bool = std::is_same_v<V, bool>;
    const V* data;
    template <class T, std::size_t B, std::size_t H, std::size_t Tq, std::size_t S>
    static constexpr bool fits = (is_bool || std::is_same_v<V, T>) && Tq == Tm && S == Sm &&
                                 (L == mask_layout::shared || (BH == B * H && (Hm == 0 || Hm == H)));
    template <class T> constexpr void apply(const mask_row& r, T* row, std::size_t key0, std::size_t n) const {
        const std::size_t plane = L == mask_layout::shared ? 0 : r.b * r.heads + r.h;
        const V* m = data + (plane * Tm + r.qpos) * Sm + key0;
        for (std::size_t j = 0; j < n; ++j) {
            if constexpr (is_bool) {
                if (detail::blocks<Pol>(m[j])) row[j] = detail::neg_inf<T>;
            } else {
                row[j] = m[j] == detail::neg_inf<V> ? detail::neg_inf<T> : row[j] + m[j];  // -inf blocks, even a NaN score
            }
        }
    }
};

// Both masks apply: the key range is the smaller one, then each mask's per-element part.
template <class A, class B> struct mask_and : mask_base {
    static constexpr bool has_apply = A::has_apply || B::has_apply;
    A a;
    B b;
    template <class T, std::size_t Bt, std::size_t H, std::size_t Tq, std::size_t S>
    static constexpr bool fits = A::template fits<T, Bt, H, Tq, S> && B::template fits<T, Bt, H, Tq, S>;
    constexpr bool valid(std::size_t S) const { return a.valid(S) && b.valid(S); }
    constexpr std::size_t key_end(std::size_t bi, std::size_t qpos, std::size_t S) const {
        const std::size_t x = a.key_end(bi, qpos, S), y = b.key_end(bi, qpos, S);
        return x < y ? x : y;
    }
    template <class T> constexpr void apply(const mask_row& r, T* row, std::size_t key0, std::size_t n) const {
        a.apply(r, row, key0, n);
        b.apply(r, row, key0, n);
    }
};

template <class M> concept mask_type = std::is_base_of_v<mask_base, M>;
template <mask_type A, mask_type B> constexpr mask_and<A, B> operator&&(const A& a, const B& b) { return {{}, a, b}; }

// ---- Building masks from tensors (shapes deduced from the tensor type) ----
template <class Pol = blocked_if_true, class X> constexpr auto key_padding(const X& t, Pol = {}) {
    static_assert(X::rank == 2 && std::is_same_v<typename X::value_type, bool>,
                  "ctformer: a key padding mask is a (batch, src_len) bool tensor");
    return key_padding_mask<Pol, X::shape[0], X::shape[1]>{{}, t.data()};
}
// (Tq, S) -> shared; (B*H, Tq, S) or (B, H, Tq, S) -> per head. bool needs a polarity.
template <class Pol = blocked_if_true, class X> constexpr auto mask_from(const X& t, Pol = {}) {
    using V = typename X::value_type;
    static_assert(X::rank >= 2 && X::rank <= 4,
                  "ctformer: an attention mask is (tgt_len, src_len), (batch*heads, tgt_len, src_len) or "
                  "(batch, heads, tgt_len, src_len)");
    constexpr std::size_t r = X::rank;
    constexpr std::size_t bh = r == 2 ? 1 : (r == 3 ? X::shape[0] : X::shape[0] * X::shape[1]);
    constexpr mask_layout L = r == 2 ? mask_layout::shared : mask_layout::per_head;
    constexpr std::size_t hm = r == 4 ? X::shape[1] : 0;
    return attn_mask<V, Pol, L, bh, X::shape[r - 2], X::shape[r - 1], hm>{{}, t.data()};
}

}  // namespace ctformer
