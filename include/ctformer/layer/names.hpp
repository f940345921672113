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
#include <span>
#include <string_view>
#include <type_traits>

#include "../core/reflect.hpp"

namespace ctformer {

// A naming table's data: for each role, (canonical, family) pairs in a static array named after
// the role (model, stack, layer, attention, ffn); members not listed, and roles without an array,
// keep their canonical names. A table derives from naming_table<Itself> and has a label.
struct rename_pair {
    std::string_view canonical, family;
};
template <class Table> struct naming_table {
    template <class Role> static constexpr std::string_view rename(std::string_view member) {
        for (const rename_pair& p : pairs<Role>())
            if (p.canonical == member) return p.family;
        return member;
    }

  private:
    template <class Role> static constexpr std::span<const rename_pair> pairs() {
        if constexpr (std::is_same_v<Role, role::model> && requires { Table::model; }) return Table::model;
        else if constexpr (std::is_same_v<Role, role::stack> && requires { Table::stack; }) return Table::stack;
        else if constexpr (std::is_same_v<Role, role::layer> && requires { Table::layer; }) return Table::layer;
        else if constexpr (std::is_same_v<Role, role::attention> && requires { Table::attention; }) return Table::attention;
        else if constexpr (std::is_same_v<Role, role::ffn> && requires { Table::ffn; }) return Table::ffn;
        else return {};
    }
};

struct pytorch : naming_table<pytorch> {
    static constexpr const char* label = "pytorch";
    static constexpr rename_pair model[] = {{"tok_embeddings", "wte"}, {"pos_embeddings", "wpe"}, {"stack", "transformer"}};
    static constexpr rename_pair layer[] = {{"ffn", ""}};  // linear1, linear2 at the layer's level
    static constexpr rename_pair attention[] = {{"o_proj", "out_proj"}};
    static constexpr rename_pair ffn[] = {{"up_proj", "linear1"}, {"gate_proj", "linear_gate"}, {"down_proj", "linear2"}};
};

struct hugging_face : naming_table<hugging_face> {
    static constexpr const char* label = "hugging_face";
    static constexpr rename_pair model[] = {
        {"tok_embeddings", "model.embed_tokens"}, {"pos_embeddings", "model.embed_positions"}, {"stack", "model"}};
    static constexpr rename_pair layer[] = {{"ffn", "mlp"},
                                            {"multihead_attn", "encoder_attn"},
                                            {"norm1", "input_layernorm"},
                                            {"norm2", "post_attention_layernorm"},
                                            {"norm3", "final_layernorm"}};
    static constexpr rename_pair attention[] = {{"out_proj", "o_proj"}};
    static constexpr rename_pair ffn[] = {{"linear1", "up_proj"}, {"linear2", "down_proj"}};
};

struct gpt2 : naming_table<gpt2> {
    static constexpr const char* label = "gpt2";
    static constexpr rename_pair model[] = {
        {"tok_embeddings", "transformer.wte"}, {"pos_embeddings", "transformer.wpe"}, {"stack", "transformer"}};
    static constexpr rename_pair stack[] = {{"layers", "h"}, {"norm", "ln_f"}};
    static constexpr rename_pair layer[] = {{"self_attn", "attn"}, {"multihead_attn", "crossattention"}, {"ffn", "mlp"},
                                            {"norm1", "ln_1"},     {"norm2", "ln_2"},                    {"norm3", "ln_cross_attn"}};
    static constexpr rename_pair attention[] = {
        {"in_proj_weight", "c_attn.weight"}, {"in_proj_bias", "c_attn.bias"}, {"out_proj", "c_proj"}, {"o_proj", "c_proj"}};
    static constexpr rename_pair ffn[] = {
        {"linear1", "c_fc"}, {"linear2", "c_proj"}, {"up_proj", "c_fc"}, {"gate_proj", "c_gate"}, {"down_proj", "c_proj"}};
};

struct llama_cpp : naming_table<llama_cpp> {
    static constexpr const char* label = "llama_cpp";
    static constexpr rename_pair model[] = {
        {"tok_embeddings", "token_embd"}, {"pos_embeddings", "position_embd"}, {"stack", ""}, {"lm_head", "output"}};
    static constexpr rename_pair stack[] = {{"layers", "blk"}, {"norm", "output_norm"}};
    static constexpr rename_pair layer[] = {{"self_attn", ""}, {"ffn", ""}, {"norm1", "attn_norm"}, {"norm2", "ffn_norm"}};
    static constexpr rename_pair attention[] = {
        {"q_proj", "attn_q"}, {"k_proj", "attn_k"}, {"v_proj", "attn_v"}, {"o_proj", "attn_output"}, {"out_proj", "attn_output"}};
    static constexpr rename_pair ffn[] = {{"gate_proj", "ffn_gate"}, {"up_proj", "ffn_up"},   {"down_proj", "ffn_down"},
                                          {"linear1", "ffn_up"},     {"linear2", "ffn_down"}};
};

}  // namespace ctformer
