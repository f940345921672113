// ctformer/params.hpp — parameter structs with PyTorch's names and layouts, and the one generic
// visitor that walks them as "dotted.name -> tensor" (loading, saving, counting, zeroing).
//
// Params are the immutable role: loaded once, then only read by forward/step/backward, so one
// params object can be shared by any number of threads, each with its own workspace and caches.
#pragma once
#include <boost/hana/accessors.hpp>
#include <boost/hana/define_struct.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/unpack.hpp>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tensor.hpp"

namespace ctformer {

// torch.nn.Linear: y = x·Wᵀ + b, weight (Out, In), bias (Out).
template <class T, std::size_t Out, std::size_t In, bool Bias> struct LinearParams;
template <class T, std::size_t Out, std::size_t In> struct LinearParams<T, Out, In, true> {
    using weight_t = PackedWeight<T, Out, In>;
    using bias_t = Tensor<T, Out>;
    static constexpr bool has_bias = true;
    BOOST_HANA_DEFINE_STRUCT(LinearParams, (weight_t, weight), (bias_t, bias));
    constexpr const T* bias_data() const { return bias.data(); }
    constexpr T* bias_data() { return bias.data(); }
};
template <class T, std::size_t Out, std::size_t In> struct LinearParams<T, Out, In, false> {
    using weight_t = PackedWeight<T, Out, In>;
    static constexpr bool has_bias = false;
    BOOST_HANA_DEFINE_STRUCT(LinearParams, (weight_t, weight));
    constexpr const T* bias_data() const { return nullptr; }
    constexpr T* bias_data() { return nullptr; }
};

// torch.nn.MultiheadAttention with packed in-projection: in_proj_weight (3D, D) = rows Wq; Wk; Wv
// (three segments: cross-attention uses Wq alone and Wk|Wv on the memory).
template <class T, std::size_t D, bool Bias> struct MultiheadAttentionParams;
template <class T, std::size_t D> struct MultiheadAttentionParams<T, D, true> {
    using in_w_t = PackedWeight<T, 3 * D, D, D>;
    using in_b_t = Tensor<T, 3 * D>;
    using out_t = LinearParams<T, D, D, true>;
    BOOST_HANA_DEFINE_STRUCT(MultiheadAttentionParams, (in_w_t, in_proj_weight), (in_b_t, in_proj_bias),
                             (out_t, out_proj));
    constexpr const T* in_bias_data() const { return in_proj_bias.data(); }
    constexpr T* in_bias_data() { return in_proj_bias.data(); }
};
template <class T, std::size_t D> struct MultiheadAttentionParams<T, D, false> {
    using in_w_t = PackedWeight<T, 3 * D, D, D>;
    using out_t = LinearParams<T, D, D, false>;
    BOOST_HANA_DEFINE_STRUCT(MultiheadAttentionParams, (in_w_t, in_proj_weight), (out_t, out_proj));
    constexpr const T* in_bias_data() const { return nullptr; }
    constexpr T* in_bias_data() { return nullptr; }
};

// The whole layer: torch.nn.TransformerDecoderLayer's state_dict (Cross), or the decoder-only
// block's (TransformerEncoderLayer's names: no multihead_attn, no norm3).
template <class Cfg, bool Cross = Cfg::cross_attention> struct LayerParams;
template <class Cfg> struct LayerParams<Cfg, true> {
    using T = typename Cfg::value_type;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim;
    using attn_t = MultiheadAttentionParams<T, D, Cfg::attn_bias>;
    using lin1_t = LinearParams<T, F, D, Cfg::ffn_bias>;
    using lin2_t = LinearParams<T, D, F, Cfg::ffn_bias>;
    using norm_t = typename Cfg::norm_type::template params<T, D, Cfg::norm_bias>;
    BOOST_HANA_DEFINE_STRUCT(LayerParams, (attn_t, self_attn), (attn_t, multihead_attn), (lin1_t, linear1),
                             (lin2_t, linear2), (norm_t, norm1), (norm_t, norm2), (norm_t, norm3));
};
template <class Cfg> struct LayerParams<Cfg, false> {
    using T = typename Cfg::value_type;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim;
    using attn_t = MultiheadAttentionParams<T, D, Cfg::attn_bias>;
    using lin1_t = LinearParams<T, F, D, Cfg::ffn_bias>;
    using lin2_t = LinearParams<T, D, F, Cfg::ffn_bias>;
    using norm_t = typename Cfg::norm_type::template params<T, D, Cfg::norm_bias>;
    BOOST_HANA_DEFINE_STRUCT(LayerParams, (attn_t, self_attn), (lin1_t, linear1), (lin2_t, linear2),
                             (norm_t, norm1), (norm_t, norm2));
};

// N modules of one type, reflected as "0.", "1.", ... (nn.ModuleList): a stack's `layers`, a GPT's `h`.
template <class P, std::size_t N> struct ModuleList {
    static_assert(N > 0, "ctformer: a module list (stack) needs at least one layer");
    static constexpr std::size_t count = N;
    P items[N];
    P& operator[](std::size_t i) { return items[i]; }
    const P& operator[](std::size_t i) const { return items[i]; }
    P* begin() { return items; }
    P* end() { return items + N; }
    const P* begin() const { return items; }
    const P* end() const { return items + N; }
};
// The Params role of a layer, stack or model: the reflected struct P plus its byte size, like every
// other role's `bytes` (P's members are the whole object: bytes == sizeof).
template <class P> struct params_role : P {
    static constexpr std::size_t bytes = sizeof(P);
};

// A member a configuration leaves out (a tied LM head, sinusoidal positions): no tensors, no name.
struct absent {};

// torch.nn.Embedding: weight (V, D). Packed: stored in panel layout (an embedding tied to the LM
// head, which reads it as a Linear weight).
template <class T, std::size_t V, std::size_t D, bool Packed> struct EmbeddingParams {
    using weight_t = std::conditional_t<Packed, PackedWeight<T, V, D>, Tensor<T, V, D>>;
    BOOST_HANA_DEFINE_STRUCT(EmbeddingParams, (weight_t, weight));
};

template <class X> struct is_module_list : std::false_type {};
template <class P, std::size_t N> struct is_module_list<ModuleList<P, N>> : std::true_type {};

// ---- Reflection ----
namespace detail {
template <class P, class Pair> using member_t =
    std::remove_cvref_t<decltype(boost::hana::second(std::declval<Pair>())(std::declval<P&>()))>;

inline constexpr std::size_t max_name = 160;

template <class P, class F> constexpr void visit(P& p, char* name, std::size_t len, F& f) {
    if constexpr (std::is_same_v<std::remove_const_t<P>, absent>) {
        (void)name, (void)len, (void)f;
    } else if constexpr (is_tensor_storage_v<P>) {
        f(std::string_view(name, len), p);
    } else if constexpr (is_module_list<std::remove_const_t<P>>::value) {
        for (std::size_t i = 0; i < P::count; ++i) {
            std::size_t n = len;
            if (n) name[n++] = '.';
            char digits[20];
            std::size_t k = 0, v = i;
            do digits[k++] = static_cast<char>('0' + v % 10); while ((v /= 10) != 0);
            while (k) name[n++] = digits[--k];
            visit(p.items[i], name, n, f);
        }
    } else {
        boost::hana::for_each(boost::hana::accessors<std::remove_const_t<P>>(), [&](auto pair) {
            constexpr const char* member = boost::hana::to<const char*>(boost::hana::first(pair));
            const std::size_t mlen = std::char_traits<char>::length(member);
            std::size_t n = len;
            if (n) name[n++] = '.';
            for (std::size_t i = 0; i < mlen; ++i) name[n + i] = member[i];
            visit(boost::hana::second(pair)(p), name, n + mlen, f);
        });
    }
}
}  // namespace detail

// Calls f(std::string_view dotted_name, tensor&) for every tensor of p, in declaration order
// (PyTorch's state_dict order). Works on const params too, and in constant expressions.
template <class P, class F> constexpr void for_each_tensor(P& p, F&& f) {
    char name[detail::max_name]{};
    detail::visit(p, name, 0, f);
}

namespace detail {
template <class F, class P, class... Q> void zip(F& f, P& p, Q&... q) {
    if constexpr (std::is_same_v<std::remove_const_t<P>, absent>) {
        (void)f, (void)p, ((void)q, ...);
    } else if constexpr (is_tensor_storage_v<P>) {
        f(sizeof(p.storage) / sizeof(p.storage[0]), p.storage, q.storage...);
    } else if constexpr (is_module_list<std::remove_const_t<P>>::value) {
        for (std::size_t i = 0; i < P::count; ++i) zip(f, p.items[i], q.items[i]...);
    } else {
        boost::hana::for_each(boost::hana::accessors<std::remove_const_t<P>>(), [&](auto pair) {
            zip(f, boost::hana::second(pair)(p), boost::hana::second(pair)(q)...);
        });
    }
}
}  // namespace detail

// Walks objects of one params type in lockstep: f(n, a, b, ...) with each tensor's raw storage
// (n elements, panel padding included: zero in params and gradients, and kept zero by every
// elementwise update). What optimizers and gradient norms run on.
template <class F, class P, class... Q> void zip_storage(F&& f, P& p, Q&... q) {
    detail::zip(f, p, q...);
}

// Number of scalar parameters, at compile time.
template <class P> constexpr std::size_t parameter_count() {
    if constexpr (std::is_same_v<P, absent>) {
        return 0;
    } else if constexpr (is_tensor_storage_v<P>) {
        return P::size;
    } else if constexpr (is_module_list<P>::value) {
        return P::count * parameter_count<std::remove_cvref_t<decltype(std::declval<P&>().items[0])>>();
    } else {
        return boost::hana::unpack(boost::hana::accessors<P>(), [](auto... pairs) {
            return (std::size_t{0} + ... + parameter_count<detail::member_t<P, decltype(pairs)>>());
        });
    }
}

template <class P> void zero_params(P& p) {
    zip_storage([](std::size_t n, auto* x) {
        for (std::size_t i = 0; i < n; ++i) x[i] = 0;
    }, p);
}

}  // namespace ctformer
