// A GPT-style decoder-only block (pre-norm, GELU, causal self-attention, no cross-attention),
// in double precision, with a training-mode forward (dropout reproducible from seed and step) and
// a few steps of plain SGD through the backward pass, fitting the block's output to a target.
#include <cstdint>
#include <cstdio>
#include <type_traits>

#include <ctformer/ctformer.hpp>

using Block = ct::DecoderOnlyBlock<ct::d_model<96>, ct::heads<6>, ct::ffn_dim<384>, ct::norm_first<true>,
                                   ct::activation<ct::gelu>, ct::dtype<double>>;
constexpr std::size_t B = 1, T = 16;

static Block::Params params;
static Block::Workspace<B, T> ws;
static ct::Tensor<double, B, T, 96> x, y_eval, y_train, target, d_out, d_x;
static Block::Grads grads;
static Block::TrainWorkspace<B, T> tws;
static Block::Activations<B, T> acts;

// One SGD step on loss = ½‖y - target‖² / n; returns the loss before the step.
double sgd_step(double lr, std::uint32_t step) {
    if (!Block::forward_train(params, tws, acts, x, y_train, ct::dropout_config{.p = 0.1f, .seed = 42, .step = step},
                              ct::causal{}))
        return -1;
    double loss = 0;
    for (std::size_t i = 0; i < y_train.size; ++i) {
        const double e = y_train.storage[i] - target.storage[i];
        loss += 0.5 * e * e / y_train.size;
        d_out.storage[i] = e / y_train.size;
    }
    ct::zero_params(grads);
    if (!Block::backward(params, acts, tws, d_out, grads, d_x, ct::causal{})) return -1;
    ct::for_each_tensor(params, [&](std::string_view name, auto& w) {
        ct::for_each_tensor(grads, [&](std::string_view gname, const auto& g) {
            if constexpr (std::is_same_v<std::remove_cvref_t<decltype(g)>, std::remove_cvref_t<decltype(w)>>)
                if (gname == name)
                    for (std::size_t i = 0; i < w.size; ++i) w.set(i, w.get(i) - lr * g.get(i));
        });
    });
    return loss;
}

int main() {
    unsigned s = 7;
    auto rnd = [&s] { return static_cast<double>((s = s * 1103515245u + 12345u) >> 9 & 0xffff) / 65536.0 - 0.5; };
    ct::for_each_tensor(params, [&](std::string_view name, auto& t) {
        const bool gamma = name.starts_with("norm") && name.ends_with("weight");
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, gamma ? 1.0 : 0.1 * rnd());
    });
    for (auto& v : x.storage) v = rnd();
    for (auto& v : target.storage) v = rnd();

    if (!Block::forward(params, ws, x, y_eval, ct::causal{}) ||
        !Block::forward_train(params, ws, x, y_train, ct::dropout_config{.p = 0.1f, .seed = 42, .step = 0}, ct::causal{}))
        return 1;

    std::printf("GPT block: %zu params (%zu KiB), workspace %zu KiB\n", ct::parameter_count<Block::Params>(),
                sizeof(Block::Params) / 1024, Block::Workspace<B, T>::bytes / 1024);
    std::printf("last position, eval : %+.5f %+.5f %+.5f\n", y_eval(0, T - 1, 0), y_eval(0, T - 1, 1), y_eval(0, T - 1, 2));
    std::printf("last position, train: %+.5f %+.5f %+.5f (dropout 0.1, seed 42)\n", y_train(0, T - 1, 0),
                y_train(0, T - 1, 1), y_train(0, T - 1, 2));
    std::printf("training, Activations %zu KiB, TrainWorkspace %zu KiB:", Block::Activations<B, T>::bytes / 1024,
                Block::TrainWorkspace<B, T>::bytes / 1024);
    for (std::uint32_t it = 0; it < 30; ++it) {
        const double loss = sgd_step(0.5, it);
        if (loss < 0) return 1;
        if (it % 5 == 0 || it == 29) std::printf(" %s%.4f", it ? "→ " : "loss ", loss);
    }
    std::printf("\n");
    return 0;
}
