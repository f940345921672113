// Gradients against the scalar reference backward (tests/reference.hpp: plain loops, dense
// probabilities). This file: fully blocked rows, single query rows, decoder-only; policies and bias:
// test_gradcheck.cpp; dropout and blocking: test_gradcheck_dropout.cpp; finite differences:
// test_finite_diff.cpp.
#include "grad_rig.hpp"

using namespace test;

TEST_CASE("backward vs scalar reference: fully blocked rows, single query row, decoder-only") {
    const ct::dropout_config none{0, 0, 0, 0, 0};
    // batch row 1 has no memory keys at all: its cross-attention output is zero, no gradient flows
    ref::config c{2, 5, 7, 16, 4, 32};
    ref::vec cross(2 * 4 * 5 * 7, 0.0);
    for (std::size_t h = 0; h < 4; ++h)
        for (std::size_t i = 0; i < 5; ++i)
            for (std::size_t j = 0; j < 7; ++j) cross[((1 * 4 + h) * 5 + i) * 7 + j] = ref::NEG_INF;
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>, 2, 5, 7>(
        "key_lengths{7, 0}", c, relu_grad, none, ct::no_mask{}, ct::key_lengths{7, 0}, {}, cross);
    // a bool mask that blocks every key of query 2
    static ct::Tensor<bool, 5, 7> m;
    for (std::size_t j = 0; j < 7; ++j) m(2, j) = true;
    m(0, 3) = true;
    ref::vec dense(2 * 4 * 5 * 7, 0.0);
    for (std::size_t x = 0; x < dense.size(); ++x)
        if (m.storage[x % 35]) dense[x] = ref::NEG_INF;
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>>, 2, 5, 7>(
        "bool mask with a fully blocked row", [&] { auto d = c; d.pre_norm = true; return d; }(), relu_grad, none,
        ct::no_mask{}, ct::mask_from(m), {}, dense);
    // one query row: attention takes the one-query path, which saves the log-sum-exp too
    ref::config one{3, 1, 4, 16, 2, 24};
    check_vs_reference<ct::DecoderLayer<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<24>>, 3, 1, 4>(
        "tgt_len 1", one, relu_grad, none);
    ref::config g{2, 9, 9, 24, 3, 40};
    g.cross = false;
    g.pre_norm = true;
    g.act = gelu_ref;
    ref::vec causal(2 * 3 * 9 * 9);
    for (std::size_t x = 0; x < causal.size(); ++x) causal[x] = (x % 9) > (x / 9) % 9 ? ref::NEG_INF : 0.0;
    check_vs_reference<ct::DecoderOnlyBlock<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<40>, ct::norm_first<true>,
                                            ct::activation<ct::gelu>>, 2, 9, 9>(
        "decoder-only, causal", g, gelu_grad, none, ct::causal{}, ct::no_mask{}, causal);
}
