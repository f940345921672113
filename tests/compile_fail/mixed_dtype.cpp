// expect: mixed dtypes
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
L::Params p;
L::Workspace<2, 5, 7> ws;
ct::Tensor<double, 2, 5, 16> tgt, out;
ct::Tensor<double, 2, 7, 16> mem;
void f() { L::forward(p, ws, tgt, mem, out); }
