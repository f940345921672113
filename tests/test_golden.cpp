// Every PyTorch fixture in tests/data (made by tests/data/gen.py, PyTorch 1.13): load the params,
// inputs and masks from the file, run forward, compare with PyTorch's output.
#include <cstdio>
#include <string>

#include "common.hpp"

namespace {

template <class Layer, std::size_t B, std::size_t Tq, std::size_t S> struct Fixture {
    using T = typename Layer::T;
    static constexpr std::size_t D = Layer::D, H = Layer::H;
    static inline typename Layer::Params params;
    static inline typename Layer::template Workspace<B, Tq, S> ws;
    static inline ct::Tensor<T, B, Tq, D> tgt, out, expected;
    static inline ct::Tensor<T, B, S, D> mem;
    std::vector<std::byte> bytes;
    ct::safetensors::file<128> file;
    std::string name;

    explicit Fixture(const std::string& n) : bytes(test::read_file(n + ".safetensors")), name(n) {
        REQUIRE(file.parse(bytes).ok());
        const ct::status st = ct::load_state_dict(params, file, "params.");
        INFO("load_state_dict: " << ct::to_string(st.code) << " " << st.tensor_name());
        REQUIRE(st.ok());
        REQUIRE(ct::read_tensor(file, "input.tgt", tgt).ok());
        REQUIRE(ct::read_tensor(file, "output", expected).ok());
        if constexpr (Layer::cross) REQUIRE(ct::read_tensor(file, "input.memory", mem).ok());
        // The compile-time configuration must be the one PyTorch ran.
        CHECK(meta("d_model") == std::to_string(D));
        CHECK(meta("heads") == std::to_string(H));
        CHECK(meta("ffn") == std::to_string(Layer::F));
        CHECK(meta("norm_first") == (Layer::pre_norm ? "true" : "false"));
        CHECK(meta("kind") == (Layer::cross ? "decoder" : "decoder_only"));
        CHECK(meta("dtype") == (std::is_same_v<T, float> ? "f32" : "f64"));
        CHECK(meta("batch") == std::to_string(B));
        CHECK(meta("tgt_len") == std::to_string(Tq));
    }
    std::string meta(const char* k) const { return std::string(file.metadata(k)); }
    template <class X> X& input(const char* n, X& x) {
        REQUIRE_MESSAGE(ct::read_tensor(file, n, x).ok(), n);
        return x;
    }
    template <class... M> void run(const char* variant, const M&... masks) {
        for (auto& v : out.storage) v = T(0);
        if constexpr (Layer::cross) Layer::forward(params, ws, tgt, mem, out, masks...);
        else Layer::forward(params, ws, tgt, out, masks...);
        const test::errors e = test::compare(out.data(), expected.data(), out.size);
        std::printf("  %-26s %-28s max abs %.3g  max rel %.3g\n", name.c_str(), variant, e.max_abs, e.max_rel);
        CHECK_CLOSE(name << " [" << variant << "]", out.data(), expected.data(), out.size, test::golden_tol<T>);
    }
};

template <class T, std::size_t A, std::size_t Bd> using Bool2 = ct::Tensor<bool, A, Bd>;

}  // namespace

TEST_CASE("golden: post_relu_nomask") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    Fixture<L, 2, 5, 7> f("post_relu_nomask");
    f.run("no masks");
}

TEST_CASE("golden: post_relu_causal_mempad") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    Fixture<L, 2, 5, 7> f("post_relu_causal_mempad");
    static ct::Tensor<bool, 5, 5> tgt_mask;
    static ct::Tensor<bool, 2, 7> mem_pad;
    f.input("input.tgt_mask", tgt_mask);
    f.input("input.memory_key_padding_mask", mem_pad);
    f.run("bool tensors", ct::mask_from(tgt_mask), ct::key_padding(mem_pad));
    f.run("causal type + lengths", ct::causal{}, ct::key_lengths{7, 4});
}

TEST_CASE("golden: pre_gelu_causal_tgtpad") {
    using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<8>, ct::ffn_dim<64>, ct::norm_first<true>,
                               ct::activation<ct::gelu>>;
    Fixture<L, 2, 6, 4> f("pre_gelu_causal_tgtpad");
    static ct::Tensor<bool, 2, 6> tgt_pad;
    f.input("input.tgt_key_padding_mask", tgt_pad);
    f.run("causal && key_padding", ct::causal{} && ct::key_padding(tgt_pad));
    f.run("causal && key_lengths", ct::causal{} && ct::key_lengths{6, 3});
}

TEST_CASE("golden: post_float_masks") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    Fixture<L, 2, 5, 7> f("post_float_masks");
    static ct::Tensor<float, 5, 5> tgt_mask;
    static ct::Tensor<bool, 5, 7> mem_mask;
    f.input("input.tgt_mask", tgt_mask);
    f.input("input.memory_mask", mem_mask);
    f.run("additive + bool", ct::mask_from(tgt_mask), ct::mask_from(mem_mask));
}

TEST_CASE("golden: pre_per_head_masks") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>>;
    Fixture<L, 2, 5, 7> f("pre_per_head_masks");
    REQUIRE(f.meta("mask_per_head") == "true");
    static ct::Tensor<bool, 8, 5, 5> tgt_mask;
    static ct::Tensor<bool, 8, 5, 7> mem_mask;
    f.input("input.tgt_mask", tgt_mask);
    f.input("input.memory_mask", mem_mask);
    f.run("per-head (B*H,T,S)", ct::mask_from(tgt_mask), ct::mask_from(mem_mask));
    // The same bytes viewed as (B, H, T, S).
    auto tm4 = ct::view<2, 4, 5, 5>(tgt_mask.data());
    auto mm4 = ct::view<2, 4, 5, 7>(mem_mask.data());
    f.run("per-head (B,H,T,S)", ct::mask_from(tm4), ct::mask_from(mm4));
}

TEST_CASE("golden: post_nobias") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::bias<false>>;
    Fixture<L, 2, 5, 7> f("post_nobias");
    f.run("causal", ct::causal{});
}

TEST_CASE("golden: pre_nobias_gelu") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::bias<false>, ct::norm_first<true>,
                               ct::activation<ct::gelu>>;
    Fixture<L, 2, 5, 7> f("pre_nobias_gelu");
    f.run("causal", ct::causal{});
}

TEST_CASE("golden: post_f64_all_masks") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::dtype<double>>;
    Fixture<L, 2, 5, 7> f("post_f64_all_masks");
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
    f.run("causal && lengths", ct::causal{} && ct::key_lengths{5, 2},
          ct::mask_from(mem_mask) && ct::key_lengths{6, 7});
}

TEST_CASE("golden: pre_eps_1e-3") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>,
                               ct::layer_norm_eps<1, 1000>>;
    Fixture<L, 2, 5, 7> f("pre_eps_1e-3");
    f.run("causal", ct::causal{});
}

TEST_CASE("golden: medium_pre_gelu") {
    using L = ct::DecoderLayer<ct::d_model<128>, ct::heads<8>, ct::ffn_dim<512>, ct::norm_first<true>,
                               ct::activation<ct::gelu>>;
    Fixture<L, 1, 32, 48> f("medium_pre_gelu");
    f.run("causal", ct::causal{});
}

TEST_CASE("golden: gpt_block") {
    using L = ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<256>, ct::norm_first<true>,
                                   ct::activation<ct::gelu>>;
    Fixture<L, 2, 12, 12> f("gpt_block");
    f.run("causal", ct::causal{});
}

TEST_CASE("golden: gpt_block_f64_post") {
    using L = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<48>, ct::dtype<double>>;
    Fixture<L, 1, 9, 9> f("gpt_block_f64_post");
    f.run("causal", ct::causal{});
}
