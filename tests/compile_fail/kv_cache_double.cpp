// expect: bf16 KV caches (ct::kv_cache<ct::bf16>) are for float layers
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::dtype<double>, ct::kv_cache<ct::bf16>>;
L::KVCache<1, 8> c;
