// A PyTorch fixture (tests/data/*.safetensors) loaded into a layer's params and tensors.
#pragma once
#include <cstdio>
#include <string>

#include "common.hpp"

namespace test {

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


}  // namespace test
