// expect: optimizers update dense weights
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::int4_group<32>>>;
ct::AdamW<L::Params> opt;
