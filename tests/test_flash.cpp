// Weights in flash: the converter's image (tools/flash_image.hpp, run at build time on the
// cortex_m_d32 fixture) read in place through CTFORMER_FLASH_PARAMS gives bit for bit the outputs of
// the same weights loaded by load_state_dict, and PyTorch's within the float tolerance.
#include <doctest/doctest.h>

#include <cstring>

#include "common.hpp"
#include "flash_layer.hpp"
#include "cortex_m_d32_weights.hpp"  // generated: extern "C" const test_flash::L::Params cortex_m_d32_weights

using test_flash::L;

TEST_CASE("flash: the converted image is the loaded Params, read in place") {
    static L::Params loaded;
    static ct::safetensors::file<> f;
    static std::vector<std::byte> bytes = test::read_file("cortex_m_d32.safetensors");
    REQUIRE(f.parse(bytes).ok());
    REQUIRE(ct::load_state_dict(loaded, f, "params.").ok());
    const L::Params& flash = cortex_m_d32_weights;
    CHECK(std::memcmp(&flash, &loaded, sizeof(L::Params)) == 0);

    static ct::Tensor<float, 1, 8, 32> tgt, mem, out_flash, out_loaded, expected;
    REQUIRE(ct::read_tensor(f, "input.tgt", tgt).ok());
    REQUIRE(ct::read_tensor(f, "input.memory", mem).ok());
    REQUIRE(ct::read_tensor(f, "output", expected).ok());
    static L::Workspace<1, 8, 8> ws;
    REQUIRE(L::forward(flash, ws, tgt, mem, out_flash, ct::causal{}).ok());
    REQUIRE(L::forward(loaded, ws, tgt, mem, out_loaded, ct::causal{}).ok());
    CHECK(std::memcmp(&out_flash, &out_loaded, sizeof out_flash) == 0);
    CHECK_CLOSE("flash params vs PyTorch", out_flash.data(), expected.data(), out_flash.size, test::golden_tol<float>);
}
