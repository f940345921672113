// ctformer/models/llama.hpp — a Llama-family model as one type: the GPT type with Llama blocks
// (layer/config.hpp: llama_config), no absolute positions (RoPE in every block) and Hugging Face's
// LlamaForCausalLM names (layer/names.hpp; ct::param_names<...> gives another table). Options are
// the blocks' (overriding llama_config's defaults) and the model's (ct::tied_embeddings<true>: no
// lm_head.weight, the head reads model.embed_tokens).
//
//   using Model = ct::Llama<32000, 256, 6, ct::d_model<288>, ct::heads<6>, ct::ffn_dim<768>,
//                           ct::norm_eps<1, 100000>>;            // stories15M's shape
//
// state_dict: model.embed_tokens.weight (V, D), model.layers.{i}.self_attn.{q,k,v,o}_proj.weight,
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight, model.layers.{i}.input_layernorm.weight,
//   model.layers.{i}.post_attention_layernorm.weight, model.norm.weight, lm_head.weight (V, D).
#pragma once
#include <cstddef>

#include "../layer/config.hpp"
#include "../layer/layer.hpp"
#include "gpt.hpp"

namespace ctformer {

template <std::size_t V, std::size_t Ctx, std::size_t N, class... Opts>
using Llama = GPT<V, Ctx, N,
                  Layer<typename detail::defaulted<decltype(llama_defaults{} + detail::type_list<max_positions<Ctx>>{}),
                                                   Opts...>::type>,
                  positions<rotary>, param_names<hugging_face>, Opts...>;

}  // namespace ctformer
