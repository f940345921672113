#include <ctformer/ctformer.hpp>

using Layer = ct::DecoderOnlyBlock<ct::d_model<8>, ct::heads<2>, ct::ffn_dim<16>>;
static Layer::Params p;
static Layer::Workspace<1, 3> ws;
static ct::Tensor<float, 1, 3, 8> x, y;

#include <cstdio>
#include <cstring>

int main() {
    // the vector arch this consumer got (check_install.cmake checks it is not the SSE2 fallback)
    std::printf("ctformer arch: %s\n", ct::simd::arch_name());
    Layer::forward(p, ws, x, y, ct::causal{});
    // in_proj (24x8 + 24), out_proj (8x8 + 8), linear1 (16x8 + 16), linear2 (8x16 + 8), norm1/2 (4x8)
    return ct::parameter_count<Layer::Params>() == 600 && y(0, 2, 7) == y(0, 2, 7) ? 0 : 1;
}
