// expect: training needs dense weights
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::int8_per_channel>>;
L::Params p;
L::TrainWorkspace<1, 4> ws;
L::Activations<1, 4> acts;
ct::Tensor<float, 1, 4, 32> x, y;
void f() { (void)L::forward_train(p, ws, acts, x, y, ct::dropout_config{}); }
