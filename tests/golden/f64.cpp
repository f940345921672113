// Every PyTorch fixture in tests/data (made by tests/data/gen.py, PyTorch 1.13): load the params,
// inputs and masks from the file, run forward, compare with PyTorch's output; then
// forward_train + backward with the same masks, compare every grad.* with PyTorch's autograd.
// One suite (test_golden), three files for compile time: this one f64, the medium shape and the
// decoder-only blocks; post_norm.cpp; pre_norm.cpp.
#include <cstdio>
#include <string>

#include "grad_fixture.hpp"

TEST_CASE("golden: post_f64_all_masks") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::dtype<double>>;
    test::GradFixture<L, 2, 5, 7> f("post_f64_all_masks");
    static ct::Tensor<bool, 5, 5> tgt_mask;
    static ct::Tensor<bool, 2, 5> tgt_pad;
    static ct::Tensor<bool, 5, 7> mem_mask;
    static ct::Tensor<bool, 2, 7> mem_pad;
    f.input("input.tgt_mask", tgt_mask);
    f.input("input.tgt_key_padding_mask", tgt_pad);
    f.input("input.memory_mask", mem_mask);
    f.input("input.memory_key_padding_mask", mem_pad);
    f.run("all bool tensors", ct::mask_from(tgt_mask) && ct::key_padding(tgt_pad),
          ct::mask_from(mem_mask) && ct::key_padding(mem_pad));
    f.run_backward("all bool tensors", ct::mask_from(tgt_mask) && ct::key_padding(tgt_pad),
          ct::mask_from(mem_mask) && ct::key_padding(mem_pad));
    f.run("causal && lengths", ct::causal{} && ct::key_lengths{5, 2},
          ct::mask_from(mem_mask) && ct::key_lengths{6, 7});
    f.run_backward("causal && lengths", ct::causal{} && ct::key_lengths{5, 2},
          ct::mask_from(mem_mask) && ct::key_lengths{6, 7});
}

TEST_CASE("golden: medium_pre_gelu") {
    using L = ct::DecoderLayer<ct::d_model<128>, ct::heads<8>, ct::ffn_dim<512>, ct::norm_first<true>,
                               ct::activation<ct::gelu>>;
    test::GradFixture<L, 1, 32, 48> f("medium_pre_gelu");
    f.run("causal", ct::causal{});
    f.run_backward("causal", ct::causal{});
}

TEST_CASE("golden: gpt_block") {
    using L = ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<256>, ct::norm_first<true>,
                                   ct::activation<ct::gelu>>;
    test::GradFixture<L, 2, 12, 12> f("gpt_block");
    f.run("causal", ct::causal{});
    f.run_backward("causal", ct::causal{});
}

TEST_CASE("golden: gpt_block_f64_post") {
    using L = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<48>, ct::dtype<double>>;
    test::GradFixture<L, 1, 9, 9> f("gpt_block_f64_post");
    f.run("causal", ct::causal{});
    f.run_backward("causal", ct::causal{});
}
