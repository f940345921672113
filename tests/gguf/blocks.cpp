// ggml's block formats decoded (io/ggml_blocks.hpp) against ggml itself: tests/data/gguf/blocks.gguf
// holds, for every format the loader reads, rows quantized by llama.cpp's quantizer and rows of
// random bytes (every bit pattern of the packed 6-bit scales and high bits), with the values
// ggml's to_float gives (gen_blocks.py, from the library node-llama-cpp ships). Bit for bit.
#include <cstring>
#include <string>
#include <vector>

#include <ctformer/io/ggml_blocks.hpp>

#include "common.hpp"

namespace gg = ctformer::gguf;

TEST_CASE("ggml blocks: every element of every format equals ggml's to_float, bit for bit") {
    const std::vector<std::byte> bytes = test::read_file("gguf/blocks.gguf");
    static gg::file<4, 64> g;
    REQUIRE(g.parse(bytes).ok());
    std::size_t rows = 0, formats_seen = 0;
    for (gg::ggml_type t : {gg::ggml_type::f16, gg::ggml_type::bf16, gg::ggml_type::q8_0, gg::ggml_type::q4_0, gg::ggml_type::q4_1,
                            gg::ggml_type::q5_0, gg::ggml_type::q5_1, gg::ggml_type::q4_k, gg::ggml_type::q5_k, gg::ggml_type::q6_k}) {
        bool seen = false;
        for (std::size_t i = 0; i < g.tensors(); ++i) {
            const gg::tensor_info& blocks = g.tensor(i);
            if (blocks.type != t) continue;
            const std::string values_name = std::string(blocks.name) + ".values";
            const gg::tensor_info* values = g.find_tensor(values_name);
            REQUIRE(values != nullptr);
            REQUIRE(values->elements() == blocks.elements());
            std::size_t off = 0;
            double worst = 0;
            for (std::uint64_t e = 0; e < blocks.elements(); ++e) {
                const float got = gg::element(t, g.data(blocks), e), want = gg::element(gg::ggml_type::f32, g.data(*values), e);
                off += std::memcmp(&got, &want, sizeof got) != 0;
                worst = std::max(worst, static_cast<double>(std::fabs(got - want)));
            }
            INFO(std::string(blocks.name) << ": " << off << " of " << blocks.elements() << " elements differ, max abs " << worst);
            CHECK(off == 0);
            ++rows, seen = true;
        }
        CHECK_MESSAGE(seen, gg::type_name(t));
        formats_seen += seen;
    }
    CHECK(formats_seen == 10);
    CHECK(rows == 18);
}
