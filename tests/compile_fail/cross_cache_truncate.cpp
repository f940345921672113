// expect: no member named
#include <ctformer/ctformer.hpp>
using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
L::CrossKVCache<1, 4> cc;
// A cross cache has no per-row lengths to rewind: truncating it is a compile error, not a no-op.
auto f() { return cc.truncate_all(3); }
