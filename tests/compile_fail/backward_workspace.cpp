// expect: backward needs Layer::TrainWorkspace
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
L::Params p;
L::Grads g;
L::Workspace<1, 4> ws;  // the forward's scratch is not enough for backward
L::Activations<1, 4> acts;
ct::Tensor<float, 1, 4, 16> x, y, dy, dx;
void f() {
    L::forward_train(p, ws, acts, x, y, ct::dropout_config{});
    (void)L::backward(p, acts, ws, dy, g, dx);
}
