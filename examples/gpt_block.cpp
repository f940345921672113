// A GPT-style decoder-only block (pre-norm, GELU, causal self-attention, no cross-attention),
// in double precision, with a training-mode forward (dropout reproducible from seed and step).
#include <cstdio>

#include <ctformer/ctformer.hpp>

using Block = ct::DecoderOnlyBlock<ct::d_model<96>, ct::heads<6>, ct::ffn_dim<384>, ct::norm_first<true>,
                                   ct::activation<ct::gelu>, ct::dtype<double>>;
constexpr std::size_t B = 1, T = 16;

static Block::Params params;
static Block::Workspace<B, T> ws;
static ct::Tensor<double, B, T, 96> x, y_eval, y_train;

int main() {
    unsigned s = 7;
    auto rnd = [&s] { return static_cast<double>((s = s * 1103515245u + 12345u) >> 9 & 0xffff) / 65536.0 - 0.5; };
    ct::for_each_tensor(params, [&](std::string_view name, auto& t) {
        const bool gamma = name.starts_with("norm") && name.ends_with("weight");
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, gamma ? 1.0 : 0.1 * rnd());
    });
    for (auto& v : x.storage) v = rnd();

    Block::forward(params, ws, x, y_eval, ct::causal{});
    Block::forward_train(params, ws, x, y_train, ct::dropout_config{.p = 0.1f, .seed = 42, .step = 0}, ct::causal{});

    std::printf("GPT block: %zu params (%zu KiB), workspace %zu KiB\n", ct::parameter_count<Block::Params>(),
                sizeof(Block::Params) / 1024, Block::Workspace<B, T>::bytes / 1024);
    std::printf("last position, eval : %+.5f %+.5f %+.5f\n", y_eval(0, T - 1, 0), y_eval(0, T - 1, 1), y_eval(0, T - 1, 2));
    std::printf("last position, train: %+.5f %+.5f %+.5f (dropout 0.1, seed 42)\n", y_train(0, T - 1, 0),
                y_train(0, T - 1, 1), y_train(0, T - 1, 2));
    return 0;
}
