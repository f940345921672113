// expect: the rank R must be positive
#include <ctformer/ctformer.hpp>
using L = ct::LlamaBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::max_positions<8>, ct::lora<0, 8>>;
L::Params p;
