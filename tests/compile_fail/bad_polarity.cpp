// expect: a bool mask's polarity must be ct::blocked_if_true or ct::kept_if_true
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
L::Params p;
L::Workspace<2, 5, 7> ws;
ct::Tensor<float, 2, 5, 16> tgt, out;
ct::Tensor<float, 2, 7, 16> mem;
ct::Tensor<bool, 2, 7> pad;
void f() { L::forward(p, ws, tgt, mem, out, ct::no_mask{}, ct::key_padding(pad, 1)); }
