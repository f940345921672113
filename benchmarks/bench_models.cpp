// Whole-model benchmarks: the char GPT of examples/train_char_gpt.cpp (vocab 64, context 64,
// 4 pre-norm GELU blocks, d_model 128, 4 heads, ffn 512), 1 thread, in one run.
//   gpt/train/*     one optimizer step on a (16, 64) batch: forward, cross-entropy, backward, AdamW
//   gpt/generate/*  63 tokens after a 1-token prompt, greedy: ctformer and Eigen through KV caches,
//                   libtorch recomputing the prefix each token (what its nn modules offer)
// Counter tokens/s (training: tokens of the batch; generation: tokens generated). The peers
// (libtorch on the BLAS it resolves at run time — install libopenblas0-pthread and set
// OPENBLAS_NUM_THREADS=1 —, Eigen) are compiled in with CTFORMER_BENCH_PEERS.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include <ctformer/ctformer.hpp>

#include "bench_main.hpp"
#include "probes.hpp"
#include "shapes.hpp"

#ifdef CTFORMER_HAVE_EIGEN
#include "eigen_gpt.hpp"
#endif
#ifdef CTFORMER_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

constexpr std::size_t V = 64, Ctx = 64, D = 128, H = 4, F = 512, N = 4, B = 16, T = Ctx, Gen = 63;
using Block = ct::DecoderOnlyBlock<ct::d_model<D>, ct::heads<H>, ct::ffn_dim<F>, ct::norm_first<true>,
                                   ct::activation<ct::gelu>>;
using Model = ct::GPT<V, Ctx, N, Block>;

void init(Model::Params& p) {
    unsigned s = 17;
    ct::for_each_tensor(p, [&](std::string_view name, auto& t) {
        const bool gamma = name.find("norm") != std::string_view::npos && name.ends_with("weight");
        for (std::size_t i = 0; i < t.size; ++i) {
            s = s * 1103515245u + 12345u;
            t.set(i, gamma ? 1.0f : (float((s >> 9) & 0xffff) / 65536.0f - 0.5f) * 0.04f);
        }
    });
}
void tokens_counter(benchmark::State& st, double tokens) {
    st.counters["tokens"] = tokens;  // per iteration; the report derives rates from the best time
    st.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
}
// A training step's FLOPs: 3x the forward's (N blocks as layer_flops counts them, + the LM head).
constexpr double train_flops() {
    constexpr shape s{"gpt", B, T, T, D, H, F, false};
    return 3 * (N * layer_flops(s) + 2.0 * B * T * D * V);
}
void train_counters(benchmark::State& st) {
    tokens_counter(st, B * T);
    st.counters["flops"] = train_flops();
    st.counters["GFLOP/s"] = benchmark::Counter(train_flops() / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    st.counters["%peak"] = benchmark::Counter(100.0 * train_flops() / probes::peak_flops(),
                                              benchmark::Counter::kIsIterationInvariantRate);
}
void BM_peak_fma_probe(benchmark::State& st) {  // measured afresh in every repetition
    double flops = 0;
    for (auto _ : st) flops = probes::measure_peak_flops(2);
    st.counters["peak_GFLOP/s"] = flops / 1e9;
}

template <std::size_t Threads = 1> void BM_ctformer_train(benchmark::State& st) {
    using Opt = ct::AdamW<Model::Params>;
    using Ws = Model::TrainWorkspace<B, T>;
    using Acts = Model::Activations<B, T>;
    // (storage as docs/api.md recommends: bench::advise_huge)
    alignas(ct::huge_page_alignment<Model::Params>) static Model::Params p;
    alignas(ct::huge_page_alignment<Model::Grads>) static Model::Grads g;
    alignas(ct::huge_page_alignment<Opt>) static Opt opt;
    alignas(ct::huge_page_alignment<Ws>) static Ws ws;
    alignas(ct::huge_page_alignment<Acts>) static Acts acts;
    static ct::Tensor<ct::token, B, T> tok, tgt;
    static const bool advised [[maybe_unused]] = bench::advise_huge(p, g, opt, ws, acts);
    init(p);
    for (std::size_t i = 0; i < tok.size; ++i) tok.storage[i] = ct::token(i * 7 % V), tgt.storage[i] = ct::token(i * 11 % V);
    const ct::use_executor on(bench::executor(Threads));
    for (auto _ : st) {
        ct::zero_grad(g);
        float loss = 0;
        (void)Model::forward_train(p, ws, acts, tok, tgt, loss);
        (void)Model::backward(p, acts, ws, g);
        (void)opt.step(p, g);
        benchmark::DoNotOptimize(loss);
    }
    train_counters(st);
}

template <std::size_t Threads = 1> void BM_ctformer_generate(benchmark::State& st) {
    using Cache = Model::KVCache<1, Ctx>;
    alignas(ct::huge_page_alignment<Model::Params>) static Model::Params p;
    alignas(ct::huge_page_alignment<Cache>) static Cache cache;
    static Model::GenerateWorkspace<8> gws;
    static const bool advised [[maybe_unused]] = bench::advise_huge(p, cache);
    init(p);
    const ct::use_executor on(bench::executor(Threads));
    const ct::token prompt[1] = {1};
    for (auto _ : st) {
        cache.reset();
        std::size_t n = 0;
        (void)Model::generate(p, gws, cache, prompt, 1, Gen, ct::sampling{.temperature = 0}, [&](ct::token t) {
            benchmark::DoNotOptimize(t);
            return ++n > 0;
        });
    }
    tokens_counter(st, Gen);
}

#ifdef CTFORMER_HAVE_EIGEN
void BM_eigen_generate(benchmark::State& st) {
    eigen_peer::GPT m{int(V), int(Ctx), int(D), int(H), int(F), int(N)};
    for (auto _ : st) {
        m.reset();
        int t = 1;
        for (std::size_t i = 0; i < Gen; ++i) {
            Eigen::Index best;
            m.step(t).maxCoeff(&best);
            t = int(best);
        }
        benchmark::DoNotOptimize(t);
    }
    tokens_counter(st, Gen);
}
#endif

#ifdef CTFORMER_HAVE_TORCH
// The same GPT from libtorch's C++ modules (1.13: MultiheadAttention is sequence-first).
struct TorchBlockImpl : torch::nn::Module {
    torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
    torch::nn::MultiheadAttention attn{nullptr};
    torch::nn::Linear fc1{nullptr}, fc2{nullptr};
    TorchBlockImpl() {
        ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({int64_t(D)})));
        ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({int64_t(D)})));
        attn = register_module("attn", torch::nn::MultiheadAttention(int64_t(D), int64_t(H)));
        fc1 = register_module("fc1", torch::nn::Linear(int64_t(D), int64_t(F)));
        fc2 = register_module("fc2", torch::nn::Linear(int64_t(F), int64_t(D)));
    }
    torch::Tensor forward(torch::Tensor x, const torch::Tensor& mask) {  // (T, B, D)
        auto h = ln1(x);
        x = x + std::get<0>(attn->forward(h, h, h, torch::Tensor(), false, mask));
        return x + fc2(torch::gelu(fc1(ln2(x))));
    }
};
TORCH_MODULE(TorchBlock);
struct TorchGPTImpl : torch::nn::Module {
    torch::nn::Embedding wte{nullptr}, wpe{nullptr};
    std::vector<TorchBlock> blocks;
    torch::nn::LayerNorm lnf{nullptr};
    torch::nn::Linear head{nullptr};
    TorchGPTImpl() {
        wte = register_module("wte", torch::nn::Embedding(int64_t(V), int64_t(D)));
        wpe = register_module("wpe", torch::nn::Embedding(int64_t(Ctx), int64_t(D)));
        for (std::size_t i = 0; i < N; ++i) blocks.push_back(register_module("h" + std::to_string(i), TorchBlock()));
        lnf = register_module("lnf", torch::nn::LayerNorm(torch::nn::LayerNormOptions({int64_t(D)})));
        head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(int64_t(D), int64_t(V)).bias(false)));
    }
    torch::Tensor forward(const torch::Tensor& tokens) {  // (T, B) -> logits (T, B, V)
        const int64_t t = tokens.size(0);
        auto x = wte(tokens) + wpe(torch::arange(t)).unsqueeze(1);
        auto mask = torch::full({t, t}, -std::numeric_limits<float>::infinity()).triu(1);
        for (auto& b : blocks) x = b->forward(x, mask);
        return head(lnf(x));
    }
};
TORCH_MODULE(TorchGPT);

template <int Threads = 1> void BM_libtorch_train(benchmark::State& st) {
    const bench::peer_threads threads(Threads);
    torch::set_num_threads(Threads);
    TorchGPT m;
    m->train();
    torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-3));
    auto tok = torch::randint(int64_t(V), {int64_t(T), int64_t(B)});
    auto tgt = torch::randint(int64_t(V), {int64_t(T), int64_t(B)});
    for (auto _ : st) {
        opt.zero_grad();
        auto loss = torch::nn::functional::cross_entropy(m->forward(tok).reshape({-1, int64_t(V)}), tgt.reshape({-1}));
        loss.backward();
        opt.step();
        benchmark::DoNotOptimize(loss.data_ptr());
    }
    train_counters(st);
    torch::set_num_threads(1);
}

void BM_libtorch_generate(benchmark::State& st) {
    torch::set_num_threads(1);
    torch::NoGradGuard no_grad;
    TorchGPT m;
    m->eval();
    for (auto _ : st) {
        std::vector<int64_t> seq{1};
        for (std::size_t i = 0; i < Gen; ++i) {
            auto logits = m->forward(torch::tensor(seq).unsqueeze(1));
            seq.push_back(logits[int64_t(seq.size()) - 1][0].argmax().item<int64_t>());
        }
        benchmark::DoNotOptimize(seq.back());
    }
    tokens_counter(st, Gen);
}
#endif

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
#define CT_BENCH(fn, name) BENCHMARK(fn)->Name(name)->ComputeStatistics("min", min_of)->Unit(benchmark::kMicrosecond)

}  // namespace

BENCHMARK(BM_peak_fma_probe)->Iterations(1);
CT_BENCH(BM_ctformer_train<>, "gpt/train/ctformer");
CT_BENCH(BM_ctformer_generate<>, "gpt/generate/ctformer");
CT_BENCH(BM_ctformer_train<2>, "gpt/train/ctformer_t2");
CT_BENCH(BM_ctformer_generate<2>, "gpt/generate/ctformer_t2");
#ifdef CTFORMER_HAVE_EIGEN
CT_BENCH(BM_eigen_generate, "gpt/generate/eigen");
#endif
#ifdef CTFORMER_HAVE_TORCH
CT_BENCH(BM_libtorch_train<>, "gpt/train/libtorch");
CT_BENCH(BM_libtorch_train<2>, "gpt/train/libtorch_t2");
CT_BENCH(BM_libtorch_generate, "gpt/generate/libtorch");
#endif
int main(int argc, char** argv) { return bench::main(argc, argv); }
