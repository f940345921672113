// expect: which a plain feed-forward lacks
#include <ctformer/ctformer.hpp>
// a target the model lacks: gate_proj on a GPT block's plain feed-forward
using L = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::separate_qkv<true>,
                               ct::lora<4, 8, ct::lora_q | ct::lora_gate>>;
L::Params p;
