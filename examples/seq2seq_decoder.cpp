// A seq2seq decoder layer with cross-attention over padded encoder memory:
// a batch of two target sequences (causal self-attention, the second one padded after 3 tokens)
// attending to encoder outputs of lengths 10 and 6 (memory key padding from runtime lengths).
#include <cstdio>

#include <ctformer/ctformer.hpp>

using Layer = ct::DecoderLayer<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<256>>;  // post-norm ReLU, PyTorch defaults
constexpr std::size_t B = 2, T = 8, S = 10;

static Layer::Params params;
static Layer::Workspace<B, T, S> ws;
static ct::Tensor<float, B, T, 64> tgt, out;
static ct::Tensor<float, B, S, 64> memory;

int main() {
    // Weights would come from ct::load_state_dict(params, bytes) of a PyTorch state_dict; here a
    // deterministic fill keeps the example self-contained.
    unsigned s = 1;
    auto rnd = [&s] { return static_cast<float>((s = s * 1103515245u + 12345u) >> 9 & 0xffff) / 65536.0f - 0.5f; };
    ct::for_each_tensor(params, [&](std::string_view name, auto& t) {
        const bool gamma = name.starts_with("norm") && name.ends_with("weight");
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, gamma ? 1.0f : 0.2f * rnd());
    });
    for (auto& v : tgt.storage) v = rnd();
    for (auto& v : memory.storage) v = rnd();

    static_assert(Layer::Workspace<B, T, S>::bytes < 256 * 1024, "workspace fits the budget");
    const auto self_mask = ct::causal{} && ct::key_lengths{8, 3};  // causal, tgt row 1 padded after 3
    const auto cross_mask = ct::key_lengths{10, 6};                 // memory row 1 padded after 6
    if (ct::status st = Layer::forward(params, ws, tgt, memory, out, self_mask, cross_mask); !st)
        return std::fprintf(stderr, "forward failed: %s (%s)\n", ct::to_string(st.code), st.tensor.data()), 1;

    std::printf("seq2seq decoder layer: %zu params, workspace %zu bytes\n", ct::parameter_count<Layer::Params>(),
                Layer::Workspace<B, T, S>::bytes);
    for (std::size_t b = 0; b < B; ++b)
        std::printf("batch %zu, position 0: out[0..3] = %+.4f %+.4f %+.4f %+.4f\n", b, out(b, 0, 0), out(b, 0, 1),
                    out(b, 0, 2), out(b, 0, 3));
    return 0;
}
