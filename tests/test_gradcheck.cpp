// Gradients against the scalar reference backward (tests/reference.hpp: plain loops, dense
// probabilities). This file: policies and bias; masks: test_gradcheck_masks.cpp;
// dropout and blocking: test_gradcheck_dropout.cpp; finite differences: test_finite_diff.cpp.
#include "grad_rig.hpp"

using namespace test;

TEST_CASE("backward vs scalar reference: policies, bias, odd shapes") {
    using ct::dropout_config;
    const dropout_config none{0, 0, 0, 0, 0};
    ref::config c{2, 6, 5, 32, 2, 40};
    c.norm = ref::config::rms;
    c.pre_norm = true;
    c.act = silu_ref;
    check_vs_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<40>, ct::norm<ct::rms_norm>,
                                        ct::norm_first<true>, ct::activation<ct::silu>>, 2, 6, 5>(
        "RMSNorm, SiLU, pre-norm", c, silu_grad, none, ct::causal{}, ct::no_mask{}, causal_dense(2, 2, 6));
    check_vs_reference<ct::DecoderLayer<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<40>, ct::norm<ct::rms_norm>,
                                        ct::norm_first<true>, ct::activation<ct::silu>, ct::dtype<double>>, 2, 6, 5>(
        "RMSNorm, SiLU, pre-norm, double", c, silu_grad, none, ct::causal{}, ct::no_mask{}, causal_dense(2, 2, 6));
    ref::config d{2, 7, 5, 24, 3, 50};
    d.act = gelu_tanh_ref;
    d.scale = 0.125;
    check_vs_reference<ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<50>, ct::activation<ct::gelu_tanh>,
                                        ct::attn_bias<false>, ct::score_scale<ct::scale_ratio<1, 8>>>, 2, 7, 5>(
        "D24 (split weight segments), gelu_tanh, attention without bias, scale 1/8", d, gelu_tanh_grad, none);
    ref::config e{2, 7, 5, 24, 3, 50};
    check_vs_reference<ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<50>, ct::ffn_bias<false>,
                                        ct::norm_bias<false>, ct::dtype<double>>, 2, 7, 5>(
        "ffn and norm without bias, double", e, relu_grad, none, ct::causal{}, ct::no_mask{}, causal_dense(2, 3, 7));
}
