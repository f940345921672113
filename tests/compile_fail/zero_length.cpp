// expect: batch, tgt_len and src_len must be non-zero
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
L::Workspace<1, 0, 4> ws;
