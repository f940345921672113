// Every PyTorch fixture in tests/data (made by tests/data/gen.py, PyTorch 1.13): load the params,
// inputs and masks from the file, run forward, compare with PyTorch's output; then
// forward_train + backward with the same masks, compare every grad.* with PyTorch's autograd.
// One suite (test_golden), three files for compile time: this one the pre-norm float fixtures;
// post_norm.cpp; f64.cpp.
#include <cstdio>
#include <string>

#include "grad_fixture.hpp"

TEST_CASE("golden: pre_gelu_causal_tgtpad") {
    using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<8>, ct::ffn_dim<64>, ct::norm_first<true>,
                               ct::activation<ct::gelu>>;
    test::GradFixture<L, 2, 6, 4> f("pre_gelu_causal_tgtpad");
    static ct::Tensor<bool, 2, 6> tgt_pad;
    f.input("input.tgt_key_padding_mask", tgt_pad);
    f.run("causal && key_padding", ct::causal{} && ct::key_padding(tgt_pad));
    f.run_backward("causal && key_padding", ct::causal{} && ct::key_padding(tgt_pad));
    f.run("causal && key_lengths", ct::causal{} && ct::key_lengths{6, 3});
    f.run_backward("causal && key_lengths", ct::causal{} && ct::key_lengths{6, 3});
}

TEST_CASE("golden: pre_per_head_masks") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>>;
    test::GradFixture<L, 2, 5, 7> f("pre_per_head_masks");
    REQUIRE(f.meta("mask_per_head") == "true");
    static ct::Tensor<bool, 8, 5, 5> tgt_mask;
    static ct::Tensor<bool, 8, 5, 7> mem_mask;
    f.input("input.tgt_mask", tgt_mask);
    f.input("input.memory_mask", mem_mask);
    f.run("per-head (B*H,T,S)", ct::mask_from(tgt_mask), ct::mask_from(mem_mask));
    f.run_backward("per-head (B*H,T,S)", ct::mask_from(tgt_mask), ct::mask_from(mem_mask));
    // The same bytes viewed as (B, H, T, S).
    auto tm4 = ct::view<2, 4, 5, 5>(tgt_mask.data());
    auto mm4 = ct::view<2, 4, 5, 7>(mem_mask.data());
    f.run("per-head (B,H,T,S)", ct::mask_from(tm4), ct::mask_from(mm4));
    f.run_backward("per-head (B,H,T,S)", ct::mask_from(tm4), ct::mask_from(mm4));
}

TEST_CASE("golden: pre_nobias_gelu") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::bias<false>, ct::norm_first<true>,
                               ct::activation<ct::gelu>>;
    test::GradFixture<L, 2, 5, 7> f("pre_nobias_gelu");
    f.run("causal", ct::causal{});
    f.run_backward("causal", ct::causal{});
}

TEST_CASE("golden: pre_eps_1e-3") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>,
                               ct::layer_norm_eps<1, 1000>>;
    test::GradFixture<L, 2, 5, 7> f("pre_eps_1e-3");
    f.run("causal", ct::causal{});
    f.run_backward("causal", ct::causal{});
}
