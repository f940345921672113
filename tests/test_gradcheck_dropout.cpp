// Gradients against the scalar reference backward (tests/reference.hpp: plain loops, dense
// probabilities). This file: dropout at every site, row blocks, key tiles and GEMM
// blocks; the rest: test_gradcheck.cpp, test_gradcheck_masks.cpp, test_finite_diff.cpp.
#include "grad_rig.hpp"

using namespace test;

TEST_CASE("backward vs scalar reference: dropout at every site, same draws as the forward") {
    ref::config c{2, 6, 5, 16, 4, 32};
    const ct::dropout_config dc{0.2f, 0.3f, 0.25f, 1234, 7};
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>, 2, 6, 5>(
        "post-norm, dropout p 0.2 / attn 0.3 / act 0.25", c, relu_grad, dc);
    c.pre_norm = true;
    c.act = gelu_ref;
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>,
                                        ct::activation<ct::gelu>, ct::dtype<double>>, 2, 6, 5>(
        "pre-norm, double, dropout", c, gelu_grad, dc);
    ref::config g{1, 7, 7, 16, 2, 24};
    g.cross = false;
    ref::vec causal(2 * 7 * 7);
    for (std::size_t x = 0; x < causal.size(); ++x) causal[x] = (x % 7) > (x / 7) % 7 ? ref::NEG_INF : 0.0;
    check_vs_reference<ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<24>>, 1, 7, 7>(
        "decoder-only, dropout", g, relu_grad, ct::dropout_config{0.1f, -1, -1, 99, 3}, ct::causal{}, ct::no_mask{},
        causal);
}

TEST_CASE("backward vs scalar reference: several row blocks, key tiles and GEMM blocks") {
    // 260 rows (two K blocks of the weight-gradient GEMMs), F 300 (two K blocks of dX and several
    // row blocks of the transposed packing), T 130 (three key tiles, nine row blocks)
    ref::config c{2, 130, 20, 32, 2, 300};
    c.pre_norm = true;
    ref::vec causal(2 * 2 * 130 * 130);
    for (std::size_t x = 0; x < causal.size(); ++x) causal[x] = (x % 130) > (x / 130) % 130 ? ref::NEG_INF : 0.0;
    check_vs_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<300>, ct::norm_first<true>>, 2, 130,
                       20>("B2 T130 S20 D32 F300", c, relu_grad, ct::dropout_config{0, 0, 0, 0, 0}, ct::causal{},
                           ct::no_mask{}, causal);
}

