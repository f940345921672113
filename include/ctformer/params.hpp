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
    const T* bias_data() const { return bias.data(); }
    T* bias_data() { return bias.data(); }
};
template <class T, std::size_t Out, std::size_t In> struct LinearParams<T, Out, In, false> {
    using weight_t = PackedWeight<T, Out, In>;
    static constexpr bool has_bias = false;
    BOOST_HANA_DEFINE_STRUCT(LinearParams, (weight_t, weight));
    const T* bias_data() const { return nullptr; }
    T* bias_data() { return nullptr; }
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
    const T* in_bias_data() const { return in_proj_bias.data(); }
    T* in_bias_data() { return in_proj_bias.data(); }
};
template <class T, std::size_t D> struct MultiheadAttentionParams<T, D, false> {
    using in_w_t = PackedWeight<T, 3 * D, D, D>;
    using out_t = LinearParams<T, D, D, false>;
    BOOST_HANA_DEFINE_STRUCT(MultiheadAttentionParams, (in_w_t, in_proj_weight), (out_t, out_proj));
    const T* in_bias_data() const { return nullptr; }
    T* in_bias_data() { return nullptr; }
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

// ---- Reflection ----
namespace detail {
template <class P, class Pair> using member_t =
    std::remove_cvref_t<decltype(boost::hana::second(std::declval<Pair>())(std::declval<P&>()))>;

inline constexpr std::size_t max_name = 160;

template <class P, class F> void visit(P& p, char* name, std::size_t len, F& f) {
    if constexpr (is_tensor_storage_v<P>) {
        f(std::string_view(name, len), p);
    } else {
        boost::hana::for_each(boost::hana::accessors<std::remove_const_t<P>>(), [&](auto pair) {
            constexpr const char* member = boost::hana::to<const char*>(boost::hana::first(pair));
            const std::size_t mlen = std::char_traits<char>::length(member);
            std::size_t n = len;
            if (n) name[n++] = '.';
            std::memcpy(name + n, member, mlen);
            visit(boost::hana::second(pair)(p), name, n + mlen, f);
        });
    }
}
}  // namespace detail

// Calls f(std::string_view dotted_name, tensor&) for every tensor of p, in declaration order
// (PyTorch's state_dict order). Works on const params too.
template <class P, class F> void for_each_tensor(P& p, F&& f) {
    char name[detail::max_name];
    detail::visit(p, name, 0, f);
}

// Number of scalar parameters, at compile time.
template <class P> constexpr std::size_t parameter_count() {
    if constexpr (is_tensor_storage_v<P>) {
        return P::size;
    } else {
        return boost::hana::unpack(boost::hana::accessors<P>(), [](auto... pairs) {
            return (std::size_t{0} + ... + parameter_count<detail::member_t<P, decltype(pairs)>>());
        });
    }
}

template <class P> void zero_params(P& p) {
    for_each_tensor(p, [](std::string_view, auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, 0);
    });
}

}  // namespace ctformer
