// Every PyTorch fixture in tests/data (made by tests/data/gen.py, PyTorch 1.13): load the params,
// inputs and masks from the file, run forward, compare with PyTorch's output; then
// forward_train + backward with the same masks, compare every grad.* with PyTorch's autograd.
// This file: the float decoder-layer fixtures; test_golden2.cpp the rest (split for compile time).
#include <cstdio>
#include <string>

#include "grad_fixture.hpp"

TEST_CASE("golden: post_relu_nomask") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    test::GradFixture<L, 2, 5, 7> f("post_relu_nomask");
    f.run("no masks");
    f.run_backward("no masks");
}

TEST_CASE("golden: post_relu_causal_mempad") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    test::GradFixture<L, 2, 5, 7> f("post_relu_causal_mempad");
    static ct::Tensor<bool, 5, 5> tgt_mask;
    static ct::Tensor<bool, 2, 7> mem_pad;
    f.input("input.tgt_mask", tgt_mask);
    f.input("input.memory_key_padding_mask", mem_pad);
    f.run("bool tensors", ct::mask_from(tgt_mask), ct::key_padding(mem_pad));
    f.run_backward("bool tensors", ct::mask_from(tgt_mask), ct::key_padding(mem_pad));
    f.run("causal type + lengths", ct::causal{}, ct::key_lengths{7, 4});
    f.run_backward("causal type + lengths", ct::causal{}, ct::key_lengths{7, 4});
}

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

TEST_CASE("golden: post_float_masks") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    test::GradFixture<L, 2, 5, 7> f("post_float_masks");
    static ct::Tensor<float, 5, 5> tgt_mask;
    static ct::Tensor<bool, 5, 7> mem_mask;
    f.input("input.tgt_mask", tgt_mask);
    f.input("input.memory_mask", mem_mask);
    f.run("additive + bool", ct::mask_from(tgt_mask), ct::mask_from(mem_mask));
    f.run_backward("additive + bool", ct::mask_from(tgt_mask), ct::mask_from(mem_mask));
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

TEST_CASE("golden: post_nobias") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::bias<false>>;
    test::GradFixture<L, 2, 5, 7> f("post_nobias");
    f.run("causal", ct::causal{});
    f.run_backward("causal", ct::causal{});
}

TEST_CASE("golden: pre_nobias_gelu") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::bias<false>, ct::norm_first<true>,
                               ct::activation<ct::gelu>>;
    test::GradFixture<L, 2, 5, 7> f("pre_nobias_gelu");
    f.run("causal", ct::causal{});
    f.run_backward("causal", ct::causal{});
}
