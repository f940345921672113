// Every PyTorch fixture in tests/data (made by tests/data/gen.py, PyTorch 1.13): load the params,
// inputs and masks from the file, run forward, compare with PyTorch's output; then
// forward_train + backward with the same masks, compare every grad.* with PyTorch's autograd.
// One suite (test_golden), three files for compile time: this one the post-norm float fixtures;
// pre_norm.cpp; f64.cpp (f64, the medium shape, the decoder-only blocks).
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

TEST_CASE("golden: post_nobias") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::bias<false>>;
    test::GradFixture<L, 2, 5, 7> f("post_nobias");
    f.run("causal", ct::causal{});
    f.run_backward("causal", ct::causal{});
}
