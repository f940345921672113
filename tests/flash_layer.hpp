// The layer of the cortex_m_d32 fixture (tests/data/gen.py): d_model 32, 4 heads, FFN 64, post-norm
// ReLU, B1 T8 S8 causal. Shared by the converter and the test.
#pragma once
#include <ctformer/ctformer.hpp>

namespace test_flash {
using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>>;
}
