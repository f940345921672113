// expect: grouped-query attention (kv_heads < heads) has separate q/k/v projections
#include <ctformer/ctformer.hpp>
using L = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::separate_qkv<false>>;
L::Params p;
