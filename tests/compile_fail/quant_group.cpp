// expect: the int4 group size must divide the input features
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<48>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::int4_group<32>>>;
L::Params p;
