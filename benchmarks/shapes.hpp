// The benchmark shapes (performance issue): causal post-norm ReLU decoder layers, plus a GPT block.
#pragma once
#include <cstddef>

struct shape {
    const char* name;
    std::size_t B, T, S, D, H, F;
    bool cross = true;
    bool llama = false;  // a Llama block: RMSNorm, RoPE, SwiGLU (three D x F matrices), no biases
};
inline constexpr shape tiny{"tiny", 1, 16, 16, 64, 4, 256};
inline constexpr shape small{"small", 1, 32, 32, 128, 4, 512};
inline constexpr shape base{"base", 1, 128, 128, 512, 8, 2048};
inline constexpr shape batched{"batched", 8, 32, 32, 128, 4, 512};
inline constexpr shape gpt{"gpt", 1, 64, 64, 256, 4, 1024, false};
inline constexpr shape llama{"llama", 1, 64, 64, 256, 4, 1024, false, true};
// A decoding step deep into a long context: the base layer with 2048 cached positions (8 MB of
// fp32 keys and values, more than its int4 weights)
inline constexpr shape long_ctx{"long", 1, 2048, 128, 512, 8, 2048};

// Dense FLOPs of one forward (2 per multiply-add; attention counted as if unmasked).
constexpr double layer_flops(const shape& s) {
    const double B = s.B, T = s.T, S = s.S, D = s.D, F = s.F;
    double f = 2 * B * T * D * 3 * D + 2 * B * T * D * D + 2 * 2 * B * T * T * D + (s.llama ? 3 : 2) * 2 * B * T * D * F;
    if (s.cross) f += 2 * B * T * D * D + 2 * B * S * D * 2 * D + 2 * B * T * D * D + 2 * 2 * B * T * S * D;
    return f;
}
