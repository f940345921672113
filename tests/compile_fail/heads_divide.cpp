// expect: heads must divide d_model
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<10>, ct::heads<3>>;
L::Params p;
