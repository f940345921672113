// expect: heads is zero or missing
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>>;
L::Params p;
