// expect-success: the same snippets with correct shapes compile (guards against a broken harness)
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
L::Params p;
L::Workspace<2, 5, 7> ws;
ct::Tensor<float, 2, 5, 16> tgt, out;
ct::Tensor<float, 2, 7, 16> mem;
ct::Tensor<bool, 2, 7> pad;
ct::Tensor<bool, 5, 5> m;
void f() { L::forward(p, ws, tgt, mem, out, ct::mask_from(m), ct::key_padding(pad, ct::kept_if_true{})); }
