// expect: private
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
L::KVCache<1, 4> cache;
// Lengths move only through step, reset and truncate (a length past capacity was a buffer overrun).
void f() { cache.len_[0] = 99; }
