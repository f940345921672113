// ctformer/text/memory_map.hpp — what text generation needs, every byte known at compile time, and
// whether it fits a part: the weights and the tokenizer's tables in flash (read in place), the KV
// cache, the generation workspace (sampler scratch included) and the prompt's encoding in RAM.
//
//   using namespace ct::literals;
//   using Map = ct::generation_memory<Model, 256, 128, my_tokenizer_table_bytes>;  // cache, prompt bytes, tables
//   static_assert(ct::fits<Map, ct::board<256_KiB, 1_MiB>>, "the model does not fit the part");
//   Model::KVCache<1, 256> cache;                                   // Map::cache bytes
//   Model::GenerateWorkspace<Map::chunk, Map::window> gen;           // Map::workspace bytes
//
// Code is not counted (the compiler decides it; embedded.md reports it per part).
#pragma once
#include <cstddef>

#include "../core/role_size.hpp"  // (ct::board, ct::fits, the _KiB literals)
#include "tokenizer.hpp"

namespace ctformer {

namespace detail {
template <std::size_t N> constexpr std::size_t encoding_bytes() {  // the workspace and the ids (+ bos, eos)
    if constexpr (N == 0) return 0;
    else return tokenizer::Workspace<N>::bytes + (N + 2) * sizeof(token);
}
}  // namespace detail

// Generating with Model from a cache of Ctx positions, prompts of up to PromptBytes bytes encoded
// on the device (0: token ids given), tokenizer tables of TableBytes in flash (0: none), prefill
// chunks of C tokens, repetition penalties over the last W.
template <class Model, std::size_t Ctx, std::size_t PromptBytes = 0, std::size_t TableBytes = 0, std::size_t C = 8,
          std::size_t W = 64>
struct generation_memory {
    static constexpr std::size_t chunk = C, window = W, context = Ctx, prompt_bytes = PromptBytes;
    // flash (or any read-only memory)
    static constexpr std::size_t params = sizeof(typename Model::Params);
    static constexpr std::size_t tables = TableBytes;
    // RAM
    static constexpr std::size_t cache = Model::template KVCache<1, Ctx>::bytes;
    static constexpr std::size_t workspace = Model::template GenerateWorkspace<C, W>::bytes;
    static constexpr std::size_t encoding = detail::encoding_bytes<PromptBytes>();

    static constexpr std::size_t flash = params + tables;
    static constexpr std::size_t ram = cache + workspace + encoding;
};

}  // namespace ctformer
