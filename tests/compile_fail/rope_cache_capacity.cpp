// expect: the KV cache's capacity exceeds the RoPE table's max_positions
#include <ctformer/ctformer.hpp>
using L = ct::LlamaBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::max_positions<8>>;
L::Params p;
L::StepWorkspace<1, 1> ws;
L::KVCache<1, 16> cache;
ct::Tensor<float, 1, 1, 32> x, y;
void f() { (void)L::step(p, ws, cache, x, y); }
