// expect: self-attention mask does not fit (batch, heads, tgt_len, tgt_len) or dtype
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
L::Params p;
L::Workspace<2, 5, 7> ws;
ct::Tensor<float, 2, 5, 16> tgt, out;
ct::Tensor<float, 2, 7, 16> mem;
ct::Tensor<double, 5, 5> additive;  // a double mask for a float layer
void f() { L::forward(p, ws, tgt, mem, out, ct::mask_from(additive)); }
