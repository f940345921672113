// expect: target it as PEFT does with ct::lora_mha
#include <ctformer/ctformer.hpp>
// nn.MultiheadAttention's packed in-projection has no q_proj to adapt
using L = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::lora<4, 8, ct::lora_q>>;
L::Params p;
