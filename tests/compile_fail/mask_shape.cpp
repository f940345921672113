// expect: self-attention mask does not fit
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
L::Params p;
L::Workspace<2, 5, 7> ws;
ct::Tensor<float, 2, 5, 16> tgt, out;
ct::Tensor<float, 2, 7, 16> mem;
ct::Tensor<bool, 5, 7> wrong;  // (tgt_len, src_len) given where (tgt_len, tgt_len) is needed
void f() { L::forward(p, ws, tgt, mem, out, ct::mask_from(wrong)); }
