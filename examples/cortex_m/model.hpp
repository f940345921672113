// The example's layer, shared by the firmware (main.cpp) and the host-side converter (convert.cpp):
// a post-norm decoder layer with cross-attention, d_model 32, 4 heads, FFN 64, ReLU; its weights
// are the cortex_m_d32 fixture's (tests/data/gen.py, PyTorch).
#pragma once
#include <ctformer/ctformer.hpp>

namespace firmware {
using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>>;
inline constexpr std::size_t T = 8, S = 8;  // target and memory lengths of the fixture
}  // namespace firmware
