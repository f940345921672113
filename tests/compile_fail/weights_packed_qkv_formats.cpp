// expect: the packed in-projection (nn.MultiheadAttention's in_proj_weight) is one matrix
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::int8_group<32>, ct::v_weights<ct::bf16>>>;
L::Params p;
