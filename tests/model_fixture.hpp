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

}  // namespace test
