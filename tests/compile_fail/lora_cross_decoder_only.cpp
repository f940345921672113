// expect: ct::lora_cross adapts the cross-attention (multihead_attn), which a decoder-only block lacks
#include <ctformer/ctformer.hpp>
// a GPT-style block has no multihead_attn to adapt
using L = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::lora<4, 8, ct::lora_mha | ct::lora_cross>>;
L::Params p;
