// expect: every template argument of a layer must be a ctformer option
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, float>;
L::Params p;
