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
    // d_model 256, ffn_dim 512 in double: the memory's k|v rows (2D = 512 doubles, 4 KB) and the
    // FFN's hidden rows are stored one cache line longer (kernels::padded_row_stride); forward,
    // backward, dropout and the weight gradients read them at that stride.
    using Wide = ct::DecoderLayer<ct::d_model<256>, ct::heads<2>, ct::ffn_dim<512>, ct::dtype<double>>;
    static_assert(Wide::Attn::kv_ld == 2 * 256 + 8 && Wide::FFN::ldh == 512 + 8,
                  "the padded strides are what this case exercises");
    ref::config w{2, 3, 4, 256, 2, 512};
    check_vs_reference<Wide, 2, 3, 4>("D256 double, padded k|v rows", w, relu_grad, none, ct::causal{}, ct::no_mask{},
                                      causal_dense(2, 2, 3));
    ref::vec short_memory(2 * 2 * 3 * 4, 0.0);  // batch row 1 sees 3 of its 4 memory rows
    for (std::size_t x = 0; x < short_memory.size(); ++x)
        if (x / (2 * 3 * 4) == 1 && x % 4 == 3) short_memory[x] = ref::NEG_INF;
    check_vs_reference<Wide, 2, 3, 4>("D256 double, padded k|v rows, key_lengths{4, 3}", w, relu_grad, none,
                                      ct::causal{}, ct::key_lengths{4, 3}, causal_dense(2, 2, 3), short_memory);
    check_vs_reference<Wide, 2, 3, 4>("D256 double, padded rows, dropout", w, relu_grad,
                                      ct::dropout_config{0.2f, 0.3f, 0.25f, 7, 2}, ct::causal{}, ct::no_mask{},
                                      causal_dense(2, 2, 3));
    // d_model 512 in double: the self-attention's q|k|v rows (3D = 1536 doubles, 12 KB) padded too
    using Wider = ct::DecoderLayer<ct::d_model<512>, ct::heads<4>, ct::ffn_dim<8>, ct::dtype<double>>;
    static_assert(Wider::Attn::qkv_ld == 3 * 512 + 8, "the padded stride is what this case exercises");
    ref::config v{1, 3, 2, 512, 4, 8};
    check_vs_reference<Wider, 1, 3, 2>("D512 double, padded q|k|v rows", v, relu_grad, none, ct::causal{},
                                       ct::no_mask{}, causal_dense(1, 4, 3));
}
