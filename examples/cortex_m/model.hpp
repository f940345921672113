// The example's layer, shared by the firmware (main.cpp) and the host-side converter (convert.cpp):
// a post-norm decoder layer with cross-attention, d_model 32, 4 heads, FFN 64, ReLU; its weights
// are the cortex_m_d32 fixture's (tests/data/gen.py, PyTorch). Built with -DCM_INT8: the same layer
// with int8 weights (one scale per output channel), quantized by the converter on the host.
#pragma once
#include <ctformer/ctformer.hpp>

namespace firmware {
#ifdef CM_INT8
using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::int8_per_channel>>;
#else
using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>>;
#endif
inline constexpr std::size_t T = 8, S = 8;  // target and memory lengths of the fixture
}  // namespace firmware
