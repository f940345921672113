// expect: an option is given twice
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::heads<2>>;
L::Params p;
