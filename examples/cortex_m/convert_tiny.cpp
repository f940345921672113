// The tiny Llama's flash converter (host, scalar panel layout): its checkpoint -> an image of
// tiny::int8::Params (or, -DTINY_INT4, tiny::int4::Params; -DTINY_LORA, the fine-tune's
// tiny::lora_int8::Params), quantized at load (tools/flash_image.hpp).
#include "tools/flash_image.hpp"
#include "tiny_llama.hpp"

#if defined(TINY_LORA)
static tiny::lora_int8::Params p;
int main(int argc, char** argv) { return ctformer::tools::flash_convert(p, "tiny::lora_int8::Params", argc, argv); }
#elif defined(TINY_INT4)
static tiny::int4::Params p;
int main(int argc, char** argv) { return ctformer::tools::flash_convert(p, "tiny::int4::Params", argc, argv); }
#else
static tiny::int8::Params p;
int main(int argc, char** argv) { return ctformer::tools::flash_convert(p, "tiny::int8::Params", argc, argv); }
#endif
