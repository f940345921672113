// A fixture file of the model tests (tests/data/gen.py's model and Llama cases), read whole, and
// every tensor of a params-shaped object compared against the file's tensors under a prefix.
#pragma once
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "grad_fixture.hpp"

namespace test {

struct File {
    std::vector<std::byte> bytes;
    ct::safetensors::file<512> f;
    explicit File(const std::string& name) : bytes(test::read_file(name + ".safetensors")) {
        REQUIRE(f.parse(bytes).ok());
    }
    template <class X> void read(const std::string& n, X& x) {
        const ct::status st = ct::read_tensor(f, n, x);
        REQUIRE_MESSAGE(st.ok(), n << ": " << ct::to_string(st.code));
    }
    template <class P> void load(P& p, const std::string& prefix) {
        const ct::status st = ct::load_state_dict(p, f, prefix);
        REQUIRE_MESSAGE(st.ok(), prefix << ": " << ct::to_string(st.code) << " " << st.tensor_name());
    }
};

// Every tensor of got against the file's prefix.<name>, within rel x the tensor's max magnitude.
// rel = 0: bit for bit.
template <class P> double check_all(File& file, const P& got, const std::string& prefix, double rel) {
    double worst = 0;
    std::size_t n = 0;
    ct::for_each_tensor(got, [&](std::string_view name, const auto& t) {
        static std::remove_cvref_t<decltype(t)> want;
        file.read(prefix + std::string(name), want);
        const double scale = std::max(test::max_magnitude(want), 1e-30);
        const double err = test::compare_tensors(t, want).max_abs;
        INFO(prefix << name << ": max abs err " << err << " (" << err / scale << " of max " << scale << ")");
        CHECK(err <= rel * scale);
        worst = std::max(worst, err / scale);
        ++n;
    });
    CHECK(n > 0);
    return worst;
}

// A model's params loaded from a fixture (params.*), its input tokens and targets, and the roles a
// test needs (tests/test_models.cpp, tests/test_llama.cpp).
template <class Model, std::size_t B, std::size_t T> struct ModelRig {
    using V = typename Model::T;
    static inline typename Model::Params params;
    static inline typename Model::Grads grads;
    static inline typename Model::template TrainWorkspace<B, T> ws;
    static inline typename Model::template Activations<B, T> acts;
    static inline typename Model::template Workspace<B, T> iws;
    static inline ct::Tensor<ct::token, B, T> tokens, targets;
    static inline ct::Tensor<V, B, T, Model::vocab> logits;
    File file;
    explicit ModelRig(const std::string& name) : file(name) {
        file.load(params, "params.");
        static ct::Tensor<double, B, T> ids;
        file.read("input.tokens", ids);
        for (std::size_t i = 0; i < ids.size; ++i) tokens.storage[i] = static_cast<ct::token>(ids.storage[i]);
        file.read("input.targets", ids);
        for (std::size_t i = 0; i < ids.size; ++i) targets.storage[i] = static_cast<ct::token>(ids.storage[i]);
    }
    V loss() {
        V l = 0;
        REQUIRE(Model::forward_train(params, ws, acts, tokens, targets, l).ok());
        return l;
    }
};

}  // namespace test
