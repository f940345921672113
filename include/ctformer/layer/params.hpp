// ctformer/layer/params.hpp — a layer's parameters, composed of its modules' own (each module
// declares its struct with PyTorch's names): the state_dict of torch.nn.TransformerDecoderLayer,
// or of the decoder-only block (TransformerEncoderLayer's names: no multihead_attn, no norm3), or
// with param_names<hugging_face> of Hugging Face's LlamaDecoderLayer. The feed-forward's linear1 /
// linear2 are named at the layer's level, as PyTorch names them.
#pragma once
#include <boost/hana/define_struct.hpp>
#include <cstddef>

#include "../modules/attention.hpp"
#include "../modules/feed_forward.hpp"
#include "../modules/norm.hpp"

namespace ctformer {

// What every layer's params say about their configuration (io/config.hpp checks it at load).
template <class Cfg> struct described_layer {
    static constexpr const char* kind = Cfg::cross_attention ? "decoder_layer" : "decoder_block";
    template <class F> static constexpr void describe(F&& field) { Cfg::describe(field); }
};

// The whole layer: torch.nn.TransformerDecoderLayer's state_dict (Cross), or the decoder-only
// block's (TransformerEncoderLayer's names: no multihead_attn, no norm3).
template <class Cfg, bool Cross = Cfg::cross_attention, bool HF = Cfg::hf_names> struct LayerParams;
template <class Cfg> struct LayerParams<Cfg, true, false> : described_layer<Cfg> {
    using T = typename Cfg::value_type;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim;
    using attn_t = typename modules::attention<Cfg>::Params;
    using ffn_t = typename modules::feed_forward<Cfg>::Params;
    using norm_t = typename Cfg::norm_type::template params<T, D, Cfg::norm_bias>;
    BOOST_HANA_DEFINE_STRUCT(LayerParams, (attn_t, self_attn), (attn_t, multihead_attn), (ffn_t, ffn), (norm_t, norm1),
                             (norm_t, norm2), (norm_t, norm3));
};
template <class Cfg> struct LayerParams<Cfg, false, false> : described_layer<Cfg> {
    using T = typename Cfg::value_type;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim;
    using attn_t = typename modules::attention<Cfg>::Params;
    using ffn_t = typename modules::feed_forward<Cfg>::Params;
    using norm_t = typename Cfg::norm_type::template params<T, D, Cfg::norm_bias>;
    BOOST_HANA_DEFINE_STRUCT(LayerParams, (attn_t, self_attn), (ffn_t, ffn), (norm_t, norm1), (norm_t, norm2));
};
// Hugging Face's LlamaDecoderLayer: self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, the norms
// before the attention (input_layernorm) and before the MLP (post_attention_layernorm).
template <class Cfg> struct LayerParams<Cfg, false, true> : described_layer<Cfg> {
    using T = typename Cfg::value_type;
    static constexpr std::size_t D = Cfg::d_model;
    using attn_t = typename modules::attention<Cfg>::Params;
    using ffn_t = typename modules::feed_forward<Cfg>::Params;
    using norm_t = typename Cfg::norm_type::template params<T, D, Cfg::norm_bias>;
    BOOST_HANA_DEFINE_STRUCT(LayerParams, (attn_t, self_attn), (ffn_t, mlp), (norm_t, input_layernorm),
                             (norm_t, post_attention_layernorm));
};

}  // namespace ctformer
