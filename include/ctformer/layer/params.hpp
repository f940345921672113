// ctformer/layer/params.hpp — a layer's parameters, composed of its modules' own: the structure
// its options choose, named by its naming table (layer/names.hpp): by default the state_dict of
// torch.nn.TransformerDecoderLayer, or of the decoder-only block (TransformerEncoderLayer's names:
// no multihead_attn, no norm3), or with param_names<hugging_face> Hugging Face's LlamaDecoderLayer.
#pragma once
#include <boost/hana/define_struct.hpp>
#include <cstddef>

#include "../modules/attention.hpp"
#include "../modules/feed_forward.hpp"
#include "../modules/lora.hpp"
#include "../modules/norm.hpp"

namespace ctformer {

// What every layer's params say about their configuration (io/config.hpp checks it at load).
template <class Cfg> struct described_layer {
    static constexpr const char* kind = Cfg::cross_attention ? "decoder_layer" : "decoder_block";
    template <class F> static constexpr void describe(F&& field) { Cfg::describe(field); }
};

// The whole layer, by structure: self-attention, [cross-attention,] feed-forward and a norm per
// sub-layer, under canonical names that the configuration's table renames (layer/names.hpp:
// TransformerDecoderLayer's, the decoder-only block's, Hugging Face Llama's, GPT-2's).
template <class Cfg, bool Cross = Cfg::cross_attention> struct LayerParams;
template <class Cfg> struct layer_parts : described_layer<Cfg> {
    using T = typename Cfg::value_type;
    using role = role::layer;
    using names = typename Cfg::names_type;
    using attn_t = typename modules::attention<Cfg>::Params;
    using ffn_t = typename modules::feed_forward<Cfg>::Params;
    using norm_t = typename Cfg::norm_type::template params<T, Cfg::d_model, Cfg::norm_bias>;
};
template <class Cfg> struct LayerParams<Cfg, true> : layer_parts<Cfg> {
    using P = layer_parts<Cfg>;
    using attn_t = typename P::attn_t;
    using ffn_t = typename P::ffn_t;
    using norm_t = typename P::norm_t;
    BOOST_HANA_DEFINE_STRUCT(LayerParams, (attn_t, self_attn), (attn_t, multihead_attn), (ffn_t, ffn), (norm_t, norm1),
                             (norm_t, norm2), (norm_t, norm3));
};
template <class Cfg> struct LayerParams<Cfg, false> : layer_parts<Cfg> {
    using P = layer_parts<Cfg>;
    using attn_t = typename P::attn_t;
    using ffn_t = typename P::ffn_t;
    using norm_t = typename P::norm_t;
    BOOST_HANA_DEFINE_STRUCT(LayerParams, (attn_t, self_attn), (ffn_t, ffn), (norm_t, norm1), (norm_t, norm2));
};

// A layer's adapters (ct::lora, modules/lora.hpp): the attention's and feed-forward's, under the
// layer's names (Hugging Face's: self_attn.q_proj.lora_A.weight, mlp.down_proj.lora_B.weight;
// a packed attention's as PEFT names nn.MultiheadAttention's: self_attn.lora_A.weight, and a
// cross-attention layer's multihead_attn.lora_A.weight). Without the option every member is absent.
template <class Cfg> struct layer_adapter_config {
    using role = role::layer;
    using names = typename Cfg::names_type;
    // the configuration an adapter file's adapter_config.json states (io/adapters.hpp checks it)
    static constexpr std::size_t lora_rank = Cfg::lora_rank;
    static constexpr long long lora_alpha = Cfg::lora_alpha;
    static constexpr unsigned lora_targets = Cfg::lora_targets;
    static constexpr bool lora_gated = Cfg::gated;
    static constexpr lora_scaling lora_scale = Cfg::lora_scale;
    static constexpr std::size_t lora_layers = 1;
    using attn_t = attention_adapters_t<Cfg>;
    using ffn_t = FeedForwardAdapters<Cfg>;
};
template <class Cfg, bool Cross = Cfg::cross_attention> struct LayerAdapters : layer_adapter_config<Cfg> {
    using attn_t = typename layer_adapter_config<Cfg>::attn_t;
    using ffn_t = typename layer_adapter_config<Cfg>::ffn_t;
    using cross_t = PackedAttentionAdapters<Cfg, lora_cross>;
    BOOST_HANA_DEFINE_STRUCT(LayerAdapters, (attn_t, self_attn), (cross_t, multihead_attn), (ffn_t, ffn));
};
template <class Cfg> struct LayerAdapters<Cfg, false> : layer_adapter_config<Cfg> {
    using attn_t = typename layer_adapter_config<Cfg>::attn_t;
    using ffn_t = typename layer_adapter_config<Cfg>::ffn_t;
    BOOST_HANA_DEFINE_STRUCT(LayerAdapters, (attn_t, self_attn), (ffn_t, ffn));
};
// A stack's or model's adapters state the configuration of the adapters they hold.
template <class Inner> struct adapter_config_of {
    static constexpr std::size_t lora_rank = Inner::lora_rank;
    static constexpr long long lora_alpha = Inner::lora_alpha;
    static constexpr unsigned lora_targets = Inner::lora_targets;
    static constexpr bool lora_gated = Inner::lora_gated;
    static constexpr std::size_t lora_layers = Inner::lora_layers;
    static constexpr lora_scaling lora_scale = Inner::lora_scale;
};

}  // namespace ctformer
