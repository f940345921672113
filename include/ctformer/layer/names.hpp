// ctformer/layer/names.hpp — the naming tables: what a family calls each member of the params
// structs (core/reflect.hpp: names apart from structure). The structure (packed or separate q/k/v,
// a gated feed-forward, key/value heads, biases, norms) is chosen by the layer's options alone; a
// table only names it, so any structure can carry any table, and a new family is a table.
//
// Canonical (structural) members, by role:
//   model      tok_embeddings, pos_embeddings, stack, lm_head
//   stack      layers, norm
//   layer      self_attn, multihead_attn, ffn, norm1, norm2, norm3
//   attention  packed: in_proj_weight, in_proj_bias, out_proj; separate: q_proj, k_proj, v_proj, o_proj
//   ffn        plain: linear1, linear2; gated: gate_proj, up_proj, down_proj
//
//   param_names<pytorch>       torch.nn's (TransformerDecoderLayer: linear1/linear2 at the layer's
//                              level) and this library's GPT (wte, wpe, transformer.layers, lm_head);
//                              what nn has no name for: o_proj is out_proj, a gated FFN's up/gate/down
//                              are linear1, linear_gate, linear2
//   param_names<hugging_face>  Hugging Face Llama's (model.embed_tokens, model.layers.{i}.self_attn.
//                              {q,k,v,o}_proj, mlp.{gate,up,down}_proj, input_layernorm,
//                              post_attention_layernorm, model.norm, lm_head); a plain FFN's up_proj
//                              and down_proj, a packed attention's o_proj, cross-attention encoder_attn
//   param_names<gpt2>          Hugging Face GPT-2's module names (transformer.wte, transformer.wpe,
//                              transformer.h.{i}.attn.c_attn / c_proj, ln_1, mlp.c_fc / c_proj, ln_2,
//                              transformer.ln_f, lm_head). Names only: GPT-2's Conv1D checkpoints store
//                              their weights transposed (in, out), this library as nn.Linear (out, in).
#pragma once
#include <string_view>
#include <type_traits>

#include "../core/reflect.hpp"

namespace ctformer {

namespace detail {
// The name of `member` in a list of (canonical, family) pairs, else the member's own.
template <std::size_t N>
constexpr std::string_view renamed(std::string_view member, const std::string_view (&pairs)[N][2]) {
    for (const auto& p : pairs)
        if (p[0] == member) return p[1];
    return member;
}
}  // namespace detail

struct pytorch {
    static constexpr const char* label = "pytorch";
    template <class Role> static constexpr std::string_view rename(std::string_view m) {
        if constexpr (std::is_same_v<Role, role::model>) {
            constexpr std::string_view t[][2] = {{"tok_embeddings", "wte"}, {"pos_embeddings", "wpe"}, {"stack", "transformer"}};
            return detail::renamed(m, t);
        } else if constexpr (std::is_same_v<Role, role::layer>) {
            return m == "ffn" ? std::string_view{} : m;  // linear1, linear2 at the layer's level
        } else if constexpr (std::is_same_v<Role, role::attention>) {
            return m == "o_proj" ? std::string_view{"out_proj"} : m;
        } else if constexpr (std::is_same_v<Role, role::ffn>) {
            constexpr std::string_view t[][2] = {{"up_proj", "linear1"}, {"gate_proj", "linear_gate"}, {"down_proj", "linear2"}};
            return detail::renamed(m, t);
        } else {
            return m;
        }
    }
};

struct hugging_face {
    static constexpr const char* label = "hugging_face";
    template <class Role> static constexpr std::string_view rename(std::string_view m) {
        if constexpr (std::is_same_v<Role, role::model>) {
            constexpr std::string_view t[][2] = {
                {"tok_embeddings", "model.embed_tokens"}, {"pos_embeddings", "model.embed_positions"}, {"stack", "model"}};
            return detail::renamed(m, t);
        } else if constexpr (std::is_same_v<Role, role::layer>) {
            constexpr std::string_view t[][2] = {{"ffn", "mlp"},
                                                 {"multihead_attn", "encoder_attn"},
                                                 {"norm1", "input_layernorm"},
                                                 {"norm2", "post_attention_layernorm"},
                                                 {"norm3", "final_layernorm"}};
            return detail::renamed(m, t);
        } else if constexpr (std::is_same_v<Role, role::attention>) {
            return m == "out_proj" ? std::string_view{"o_proj"} : m;
        } else if constexpr (std::is_same_v<Role, role::ffn>) {
            constexpr std::string_view t[][2] = {{"linear1", "up_proj"}, {"linear2", "down_proj"}};
            return detail::renamed(m, t);
        } else {
            return m;
        }
    }
};

struct gpt2 {
    static constexpr const char* label = "gpt2";
    template <class Role> static constexpr std::string_view rename(std::string_view m) {
        if constexpr (std::is_same_v<Role, role::model>) {
            constexpr std::string_view t[][2] = {
                {"tok_embeddings", "transformer.wte"}, {"pos_embeddings", "transformer.wpe"}, {"stack", "transformer"}};
            return detail::renamed(m, t);
        } else if constexpr (std::is_same_v<Role, role::stack>) {
            constexpr std::string_view t[][2] = {{"layers", "h"}, {"norm", "ln_f"}};
            return detail::renamed(m, t);
        } else if constexpr (std::is_same_v<Role, role::layer>) {
            constexpr std::string_view t[][2] = {{"self_attn", "attn"},     {"multihead_attn", "crossattention"},
                                                 {"ffn", "mlp"},           {"norm1", "ln_1"},
                                                 {"norm2", "ln_2"},        {"norm3", "ln_cross_attn"}};
            return detail::renamed(m, t);
        } else if constexpr (std::is_same_v<Role, role::attention>) {
            constexpr std::string_view t[][2] = {
                {"in_proj_weight", "c_attn.weight"}, {"in_proj_bias", "c_attn.bias"}, {"out_proj", "c_proj"}, {"o_proj", "c_proj"}};
            return detail::renamed(m, t);
        } else if constexpr (std::is_same_v<Role, role::ffn>) {
            constexpr std::string_view t[][2] = {
                {"linear1", "c_fc"}, {"linear2", "c_proj"}, {"up_proj", "c_fc"}, {"gate_proj", "c_gate"}, {"down_proj", "c_proj"}};
            return detail::renamed(m, t);
        } else {
            return m;
        }
    }
};

}  // namespace ctformer
