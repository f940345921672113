// expect: kv_heads must divide heads
#include <ctformer/ctformer.hpp>
using L = ct::LlamaBlock<ct::d_model<48>, ct::heads<6>, ct::kv_heads<4>, ct::ffn_dim<64>, ct::max_positions<16>>;
L::Params p;
