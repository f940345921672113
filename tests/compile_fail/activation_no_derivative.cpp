// expect: the activation has no derivative
#include <ctformer/ctformer.hpp>
struct square {  // a user activation with no derivative(x): forward works, training does not compile
    template <class V> V operator()(const V& x) const { return x * x; }
};
using L = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::activation<square>>;
L::Params p;
L::Grads g;
L::TrainWorkspace<1, 4> ws;
L::Activations<1, 4> acts;
ct::Tensor<float, 1, 4, 16> x, y, dy, dx;
void f() {
    L::forward_train(p, ws, acts, x, y, ct::dropout_config{});
    (void)L::backward(p, acts, ws, dy, g, dx);
}
