// expect: k-quant scales (ct::kscale) need a multiple of 256 input features
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::int4_group_min<32, ct::kscale>>>;
L::Params p;
