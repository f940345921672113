// Greedy token-by-token generation through a decoder-only stack (ct::DecoderStack of 2 GPT-style
// blocks, no final norm) with an embedding table and an LM head written out by hand, and the
// stack's KV caches. Each step's hidden state is checked against the stack's full forward over the
// whole generated sequence: incremental decoding gives the same rows. (ct::GPT packages all of
// this, with training and sampling: examples/train_char_gpt.cpp.)
#include <cmath>
#include <cstdio>

#include <ctformer/ctformer.hpp>

constexpr std::size_t D = 64, H = 4, F = 256, Vocab = 50, Steps = 24, Layers = 2;
using Block = ct::DecoderOnlyBlock<ct::d_model<D>, ct::heads<H>, ct::ffn_dim<F>, ct::norm_first<true>,
                                   ct::activation<ct::gelu>>;
using Stack = ct::DecoderStack<Block, Layers, false>;

static Stack::Params blocks;
static Stack::KVCache<1, Steps> caches;  // one cache per layer
static Stack::StepWorkspace<1, 1> step_ws;
static Stack::Workspace<1, Steps> full_ws;
static float embedding[Vocab][D], lm_head[Vocab][D], positions[Steps][D];
static ct::Tensor<float, 1, 1, D> x, y;
static ct::Tensor<float, 1, Steps, D> seq_in, seq_out, stepped;

int main() {
    unsigned s = 3;
    auto rnd = [&s] { return static_cast<float>((s = s * 1103515245u + 12345u) >> 9 & 0xffff) / 65536.0f - 0.5f; };
    ct::for_each_tensor(blocks, [&](std::string_view name, auto& t) {
        const bool gamma = name.find("norm") != std::string_view::npos && name.ends_with("weight");
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, gamma ? 1.0f : 0.15f * rnd());
    });
    for (auto& e : embedding) for (auto& v : e) v = rnd();
    for (auto& e : lm_head) for (auto& v : e) v = rnd();
    for (auto& p : positions) for (auto& v : p) v = 0.1f * rnd();

    std::size_t token = 1;
    std::printf("generated:");
    for (std::size_t t = 0; t < Steps; ++t) {
        for (std::size_t d = 0; d < D; ++d) seq_in(0, t, d) = x(0, 0, d) = embedding[token][d] + positions[t][d];
        if (ct::status st = Stack::step(blocks, step_ws, caches, x, y, ct::causal{}); !st)
            return std::printf("\nstep failed: %s\n", ct::to_string(st.code)), 1;
        x = y;
        for (std::size_t d = 0; d < D; ++d) stepped(0, t, d) = x(0, 0, d);
        // next = argmax_v <x, lm_head[v]>
        float best = -INFINITY;
        for (std::size_t v = 0; v < Vocab; ++v) {
            float logit = 0;
            for (std::size_t d = 0; d < D; ++d) logit += x(0, 0, d) * lm_head[v][d];
            if (logit > best) best = logit, token = v;
        }
        std::printf(" %zu", token);
    }
    std::printf("\n");

    // The full forward over the same inputs.
    if (!Stack::forward(blocks, full_ws, seq_in, seq_out, ct::causal{})) return 1;
    double worst = 0;
    for (std::size_t t = 0; t < Steps; ++t) {
        double err = 0;
        for (std::size_t d = 0; d < D; ++d) err = std::fmax(err, std::fabs(stepped(0, t, d) - seq_out(0, t, d)));
        worst = std::fmax(worst, err);
        std::printf("step %2zu: max |step - full forward row| = %.2e %s\n", t, err, err <= 2e-5 ? "equal" : "DIFFERENT");
    }
    std::printf("KV caches: %zu bytes for %zu layers (capacity %zu)\n", Stack::KVCache<1, Steps>::bytes, Layers, Steps);
    return worst <= 2e-5 ? 0 : 1;
}
