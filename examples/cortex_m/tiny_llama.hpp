// The tiny Llama that runs on the microcontrollers (examples/cortex_m/text.cpp), trained on the
// build machine by examples/train_tiny_llama.cpp on this repository's README and docs: the shape
// of llama2.c's stories260K (d_model 64, 5 layers, grouped-query attention), context 256, a
// SentencePiece BPE vocabulary of 512 pieces (examples/data/docs_sp512.model), tied embeddings.
// tiny_llama<Opts...> adds options.
#pragma once
#include <ctformer/ctformer.hpp>

namespace tiny {
namespace ct = ::ctformer;
inline constexpr std::size_t vocab = 512, context = 256, layers = 5;
template <class... Opts>
using tiny_llama = ct::Llama<vocab, context, layers, ct::d_model<64>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<192>,
                             ct::tied_embeddings<true>, Opts...>;
using fp32 = tiny_llama<>;
// The boards' types: quantized weights and a bf16 KV cache (half the RAM; its decoding step reads
// the cache row by row, so the image has no code for the attention's multi-row block path).
using int8 = tiny_llama<ct::weights<ct::int8_per_channel>, ct::kv_cache<ct::bf16>>;
using int4 = tiny_llama<ct::weights<ct::int4_group<32>>, ct::kv_cache<ct::bf16>>;
// The on-board fine-tune's (finetune.cpp): the int8 weights frozen in flash, rank-4 adapters (α 8)
// on q and v in RAM.
using lora_int8 = tiny_llama<ct::weights<ct::int8_per_channel>, ct::lora<4, 8, ct::lora_q | ct::lora_v>>;
}  // namespace tiny
