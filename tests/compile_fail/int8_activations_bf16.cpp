// expect: int8 activations pair with int8_per_channel, int8_group<G>, int8_group_min<G> or int4_group<G> weights
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::bf16, ct::int8_activations>>;
L::Params p;
