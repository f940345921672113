// expect: quantized weights (ct::weights<...>) run float layers
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::dtype<double>, ct::weights<ct::bf16>>;
L::Params p;
