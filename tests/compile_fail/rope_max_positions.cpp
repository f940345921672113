// expect: RoPE needs ct::max_positions<N>
#include <ctformer/ctformer.hpp>
using L = ct::LlamaBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>>;
L::Params p;
