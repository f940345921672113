// expect: ct::lora_mha adapts nn.MultiheadAttention's packed in-projection
#include <ctformer/ctformer.hpp>
// a Llama block's separate q/k/v/o take lora_q .. lora_o, not PEFT's nn.MultiheadAttention target
using L = ct::LlamaBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::max_positions<8>, ct::lora<4, 8, ct::lora_mha>>;
L::Params p;
