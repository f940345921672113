// Host-side converter: the fixture's safetensors -> a flash image of firmware::L::Params, in the
// scalar build's panel layout (compiled with -DCTFORMER_SCALAR, like the firmware).
#include "../../tools/flash_image.hpp"

#include "model.hpp"

static firmware::L::Params params;
int main(int argc, char** argv) { return ct::tools::flash_convert(params, "firmware::L::Params", argc, argv); }
