// ctformer/modules/attention_params.hpp — the attention module's parameters (packed as
// nn.MultiheadAttention's, or separate q/k/v/o projections) and its score-scale policies.
#pragma once
#include <cstddef>

#include <boost/hana/define_struct.hpp>

#include "../core/quant.hpp"
#include "../core/reflect.hpp"
#include "../core/tensor.hpp"
#include "../simd/math.hpp"
#include "linear.hpp"

namespace ctformer {

// torch.nn.MultiheadAttention with packed in-projection: in_proj_weight (3D, D) = rows Wq; Wk; Wv
// (three segments: cross-attention uses Wq alone and Wk|Wv on the memory). Fmt: a weight format
// or a per_tensor map (core/quant.hpp: q's format is the in-projection's, o's out_proj's).
template <class T, std::size_t D, bool Bias, class Fmt = dense> struct MultiheadAttentionParams;
template <class T, std::size_t D, class Fmt> struct MultiheadAttentionParams<T, D, true, Fmt> {
    using role = role::attention;
    using in_w_t = weight_storage_t<role_format_t<Fmt, proj::q>, T, 3 * D, D, D>;
    using in_b_t = Tensor<T, 3 * D>;
    using out_t = LinearParams<T, D, D, true, role_format_t<Fmt, proj::o>>;
    BOOST_HANA_DEFINE_STRUCT(MultiheadAttentionParams, (in_w_t, in_proj_weight), (in_b_t, in_proj_bias),
                             (out_t, out_proj));
    constexpr const T* in_bias_data() const { return in_proj_bias.data(); }
    constexpr T* in_bias_data() { return in_proj_bias.data(); }
};
template <class T, std::size_t D, class Fmt> struct MultiheadAttentionParams<T, D, false, Fmt> {
    using role = role::attention;
    using in_w_t = weight_storage_t<role_format_t<Fmt, proj::q>, T, 3 * D, D, D>;
    using out_t = LinearParams<T, D, D, false, role_format_t<Fmt, proj::o>>;
    BOOST_HANA_DEFINE_STRUCT(MultiheadAttentionParams, (in_w_t, in_proj_weight), (out_t, out_proj));
    constexpr const T* in_bias_data() const { return nullptr; }
    constexpr T* in_bias_data() { return nullptr; }
};

// Separate projections (Hugging Face's LlamaAttention): q_proj (D, D), k_proj and v_proj (Dkv, D)
// for Dkv = kv_heads · head_dim, o_proj (D, D).
template <class T, std::size_t D, std::size_t Dkv, bool Bias, class Fmt = dense> struct SeparateAttentionParams {
    using role = role::attention;
    using q_t = LinearParams<T, D, D, Bias, role_format_t<Fmt, proj::q>>;
    using k_t = LinearParams<T, Dkv, D, Bias, role_format_t<Fmt, proj::k>>;
    using v_t = LinearParams<T, Dkv, D, Bias, role_format_t<Fmt, proj::v>>;
    using o_t = LinearParams<T, D, D, Bias, role_format_t<Fmt, proj::o>>;
    BOOST_HANA_DEFINE_STRUCT(SeparateAttentionParams, (q_t, q_proj), (k_t, k_proj), (v_t, v_proj), (o_t, o_proj));
};

// ---- Attention score scale: scores = q·kᵀ · scale. ----
struct inv_sqrt_head_dim {
    template <class T> static constexpr T value(std::size_t head_dim) { return T(1) / simd::vsqrt(static_cast<T>(head_dim)); }
};
struct no_scale {
    template <class T> static constexpr T value(std::size_t) { return T(1); }
};
template <long long Num, long long Den = 1> struct scale_ratio {
    static_assert(Den != 0, "ctformer: scale_ratio denominator is zero");
    template <class T> static constexpr T value(std::size_t) { return static_cast<T>(Num) / static_cast<T>(Den); }
};

}  // namespace ctformer

