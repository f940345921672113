// expect: int8 activations pair with the int8, int6 and int4 weight formats
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::bf16, ct::int8_activations>>;
L::Params p;
