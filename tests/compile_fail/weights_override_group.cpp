// expect: the int4 group size must divide the input features
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<48>, ct::weights<ct::int8_group<16>, ct::down_weights<ct::int4_group<32>>>>;
L::Params p;
