// expect: or train LoRA adapters over them
#include <ctformer/ctformer.hpp>
// quantized weights train only through adapters: backward with the base's own gradients does not compile
using L = ct::LlamaBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::max_positions<8>, ct::lora<4, 8>,
                         ct::weights<ct::int8_per_channel>>;
L::Params p;
L::Grads g;
L::TrainWorkspace<1, 4> ws;
L::Activations<1, 4> acts;
ct::Tensor<float, 1, 4, 16> x, y, dy, dx;
void f() {
    (void)L::forward_train(p, ws, acts, x, y, ct::dropout_config{});
    (void)L::backward(p, acts, ws, dy, g, dx);
}
