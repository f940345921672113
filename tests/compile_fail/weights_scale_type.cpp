// expect: ct::f16 and ct::kscale are scale types
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::f16>>;
L::Params p;
