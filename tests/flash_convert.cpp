// The flash converter for tests/test_flash.cpp: the cortex_m_d32 fixture's layer, built with the
// test suite's own ISA flags (so the image has this build's panel layout).
#include "../tools/flash_image.hpp"

#include "flash_layer.hpp"

static test_flash::L::Params params;
int main(int argc, char** argv) { return ct::tools::flash_convert(params, "test_flash::L::Params", argc, argv); }
