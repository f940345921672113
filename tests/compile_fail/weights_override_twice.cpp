// expect: a weight matrix's format is given twice
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<64>,
                               ct::weights<ct::int8_group<32>, ct::down_weights<ct::bf16>, ct::down_weights<ct::int4_group<32>>>>;
L::Params p;
