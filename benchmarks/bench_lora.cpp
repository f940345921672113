// LoRA (modules/lora.hpp) at the shape of examples/finetune_lora.cpp — the tiny Llama (vocab 512,
// 5 layers, d_model 64, 4 heads / 2 kv, ffn 192, tied) with rank-8 adapters (α 16) on every
// projection, batch 8 x 128 — 1 thread, in one run:
//   lora/train/*   one adapter training step: forward, cross-entropy, backward (the base frozen),
//                  AdamW over the adapters; ctformer over fp32 and int4 bases, libtorch's plain LoRA
//                  (PEFT's formulas over frozen nn weights, OpenBLAS) over fp32
//   lora/decode/*  64 tokens after a 1-token prompt, greedy, through the KV cache: the base alone
//                  and with the adapters (the adapters' cost per decoding step); also at
//                  stories15M's shape with adapters on q and v (PEFT's default targets) and on
//                  all seven projections
// Counter tokens/s. The libtorch peer is compiled in with CTFORMER_BENCH_PEERS.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <ctformer/ctformer.hpp>

#include "bench_main.hpp"
#include "probes.hpp"

#ifdef CTFORMER_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

constexpr std::size_t V = 512, Ctx = 256, N = 5, D = 64, H = 4, KH = 2, F = 192, R = 8, Alpha = 16, B = 8, T = 128, Gen = 64;
template <class... O>
using Tiny = ct::Llama<V, Ctx, N, ct::d_model<D>, ct::heads<H>, ct::kv_heads<KH>, ct::ffn_dim<F>, ct::tied_embeddings<true>,
                       ct::lora<R, Alpha, ct::lora_all>, O...>;
using Fp32 = Tiny<>;
using Int4 = Tiny<ct::weights<ct::int4_group<32>>>;

// Norm weights 1, every other value uniform in ±scale/2 (an LCG from seed).
template <class P> void randomize(P& p, unsigned s, float scale) {
    ct::for_each_tensor(p, [&](std::string_view name, auto& t) {
        const bool gamma = name.find("norm") != std::string_view::npos;
        for (std::size_t i = 0; i < t.size; ++i) {
            s = s * 1103515245u + 12345u;
            t.set(i, gamma ? 1.0f : (float((s >> 9) & 0xffff) / 65536.0f - 0.5f) * scale);
        }
    });
}
template <class M> typename M::Params& base() {  // the same random fp32 weights, quantized at load for int4
    static typename M::Params p;
    static bool done = false;
    if (!done) {
        static Fp32::Params f;
        randomize(f, 17, 0.1f);
        static std::byte buf[sizeof(Fp32::Params) + 65536];
        const ct::save_result r = ct::save_state_dict(f, buf);
        if (!r.st || !ct::load_state_dict(p, std::span<const std::byte>(buf, r.bytes))) std::abort();
        done = true;
    }
    return p;
}
void tokens_counter(benchmark::State& st, double tokens) {
    st.counters["tokens"] = tokens;
    st.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_peak_fma_probe(benchmark::State& st) {  // measured afresh in every repetition
    double flops = 0;
    for (auto _ : st) flops = probes::measure_peak_flops(2);
    st.counters["peak_GFLOP/s"] = flops / 1e9;
}

template <class M> void BM_ctformer_train(benchmark::State& st) {
    static typename M::Adapters ad, g;
    static ct::AdamW<typename M::Adapters> opt;
    static typename M::template TrainWorkspace<B, T> ws;
    static typename M::template Activations<B, T> acts;
    static ct::Tensor<ct::token, B, T> tok, tgt;
    for (std::size_t i = 0; i < tok.size; ++i) tok.storage[i] = ct::token(i * 7 % V), tgt.storage[i] = ct::token(i * 13 % V);
    ct::init_adapters(ad, 1);
    const auto pa = ct::with_adapters(base<M>(), ad);
    for (auto _ : st) {
        float loss;
        ct::zero_grad(g);
        if (!M::forward_train(pa, ws, acts, tok, tgt, loss) || !M::backward(pa, acts, ws, g) || !opt.step(ad, g))
            st.SkipWithError("step failed");
        benchmark::DoNotOptimize(loss);
    }
    tokens_counter(st, B * T);
}

template <class M, bool Adapters> void BM_ctformer_decode(benchmark::State& st) {
    static typename M::Adapters ad;
    static typename M::template GenerateWorkspace<1> gws;
    static typename M::template KVCache<1, Ctx> cache;
    ct::init_adapters(ad, 1);
    ct::for_each_tensor(ad, [](std::string_view, auto& t) {  // (B non-zero: the adapters change the logits)
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, t.get(i) + 0.01f);
    });
    const ct::token prompt[1] = {1};
    for (auto _ : st) {
        cache.reset();
        std::size_t n = 0;
        const auto on = [&](ct::token) { return ++n, true; };
        const ct::sampling greedy{.temperature = 0, .stop = -1};
        const ct::status s = Adapters ? M::generate(ct::with_adapters(base<M>(), ad), gws, cache, prompt, 1, Gen, greedy, on)
                                      : M::generate(base<M>(), gws, cache, prompt, 1, Gen, greedy, on);
        if (!s || n != Gen) st.SkipWithError("generate failed");
    }
    tokens_counter(st, Gen);
}

// stories15M's shape (d_model 288, 6 layers, 6 heads, ffn 768, vocab 32000) with adapters at r 8
// on Targets (PEFT's default: q, v): the adapters' share of a decoding step at a real model's shape.
template <auto Targets>
using StoriesOf = ct::Llama<32000, 256, 6, ct::d_model<288>, ct::heads<6>, ct::ffn_dim<768>, ct::norm_eps<1, 100000>,
                            ct::lora<8, 16, Targets>>;
template <auto Targets, bool Adapters> void BM_stories_decode(benchmark::State& st) {
    using Stories = StoriesOf<Targets>;
    static typename Stories::Params p;
    static typename Stories::Adapters ad;
    static typename Stories::template GenerateWorkspace<1> gws;
    static typename Stories::template KVCache<1, 256> cache;
    static bool done = false;
    if (!done) {
        randomize(p, 5, 0.05f);
        ct::init_adapters(ad, 3);
        ct::for_each_tensor(ad, [](std::string_view, auto& t) {
            for (std::size_t i = 0; i < t.size; ++i) t.set(i, t.get(i) + 0.01f);
        });
        done = true;
    }
    const ct::token prompt[1] = {1};
    for (auto _ : st) {
        cache.reset();
        std::size_t n = 0;
        const auto on = [&](ct::token) { return ++n, true; };
        const ct::sampling greedy{.temperature = 0, .stop = -1};
        const ct::status s = Adapters ? Stories::generate(ct::with_adapters(p, ad), gws, cache, prompt, 1, Gen, greedy, on)
                                      : Stories::generate(p, gws, cache, prompt, 1, Gen, greedy, on);
        if (!s || n != Gen) st.SkipWithError("generate failed");
    }
    tokens_counter(st, Gen);
}

#ifdef CTFORMER_HAVE_TORCH
// PEFT's LoRA in plain libtorch over a frozen Llama (Hugging Face's math): y = x Wᵀ + s·(x Aᵀ) Bᵀ.
namespace TF = torch::nn::functional;
struct TorchLlama {
    torch::Tensor emb;
    std::vector<std::vector<torch::Tensor>> w;        // per layer: q, k, v, o, gate, up, down (frozen)
    std::vector<std::vector<torch::Tensor>> a, bm;   // adapters (trained)
    std::vector<torch::Tensor> n1, n2;
    torch::Tensor nf, cos, sin;
    TorchLlama() {
        torch::manual_seed(1);
        const auto frozen = [](int64_t o, int64_t i) { return (torch::rand({o, i}) - 0.5) * 0.1; };
        emb = frozen(V, D);
        const int64_t dk = KH * (D / H);
        const int64_t d = D, f = F, shapes[7][2] = {{d, d}, {dk, d}, {dk, d}, {d, d}, {f, d}, {f, d}, {d, f}};
        for (std::size_t l = 0; l < N; ++l) {
            w.emplace_back(), a.emplace_back(), bm.emplace_back();
            for (auto& s : shapes) {
                w.back().push_back(frozen(s[0], s[1]));
                a.back().push_back(((torch::rand({int64_t(R), s[1]}) * 2 - 1) / std::sqrt(double(s[1]))).requires_grad_());
                bm.back().push_back(torch::zeros({s[0], int64_t(R)}).requires_grad_());
            }
            n1.push_back(torch::ones({int64_t(D)}));
            n2.push_back(torch::ones({int64_t(D)}));
        }
        nf = torch::ones({int64_t(D)});
        const auto inv = 1.0 / torch::pow(10000.0, torch::arange(0, int64_t(D / H), 2).to(torch::kFloat) / double(D / H));
        const auto ang = torch::arange(int64_t(T)).to(torch::kFloat).unsqueeze(1) * inv.unsqueeze(0);
        cos = torch::cat({ang.cos(), ang.cos()}, -1), sin = torch::cat({ang.sin(), ang.sin()}, -1);
    }
    std::vector<torch::Tensor> adapters() {
        std::vector<torch::Tensor> v;
        for (std::size_t l = 0; l < N; ++l)
            for (std::size_t k = 0; k < 7; ++k) v.push_back(a[l][k]), v.push_back(bm[l][k]);
        return v;
    }
    torch::Tensor lin(const torch::Tensor& x, std::size_t l, std::size_t k) {
        return TF::linear(x, w[l][k]) + TF::linear(TF::linear(x, a[l][k]), bm[l][k]) * (double(Alpha) / R);
    }
    static torch::Tensor rms(const torch::Tensor& x, const torch::Tensor& g) {
        return g * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-5));
    }
    torch::Tensor rope(const torch::Tensor& x) const {  // (B, heads, T, Dh), rotate-half
        const int64_t h = x.size(-1) / 2;
        return x * cos + torch::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1) * sin;
    }
    torch::Tensor forward(const torch::Tensor& tok) {  // (B, T) -> logits (B, T, V)
        const int64_t b = tok.size(0), t = tok.size(1), dh = D / H;
        auto x = TF::embedding(tok, emb);
        const auto mask = torch::full({t, t}, -INFINITY).triu(1);
        for (std::size_t l = 0; l < N; ++l) {
            auto h = rms(x, n1[l]);
            auto q = rope(lin(h, l, 0).view({b, t, int64_t(H), dh}).transpose(1, 2));
            auto k = rope(lin(h, l, 1).view({b, t, int64_t(KH), dh}).transpose(1, 2)).repeat_interleave(H / KH, 1);
            auto v = lin(h, l, 2).view({b, t, int64_t(KH), dh}).transpose(1, 2).repeat_interleave(H / KH, 1);
            auto att = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(dh)) + mask, -1);
            x = x + lin(torch::matmul(att, v).transpose(1, 2).reshape({b, t, int64_t(D)}), l, 3);
            h = rms(x, n2[l]);
            x = x + lin(TF::silu(lin(h, l, 4)) * lin(h, l, 5), l, 6);
        }
        return TF::linear(rms(x, nf), emb);
    }
};

void BM_libtorch_train(benchmark::State& st) {
    const bench::peer_threads threads(1);
    torch::set_num_threads(1);
    TorchLlama m;
    torch::optim::AdamW opt(m.adapters(), torch::optim::AdamWOptions(1e-3));
    auto tok = torch::randint(int64_t(V), {int64_t(B), int64_t(T)});
    auto tgt = torch::randint(int64_t(V), {int64_t(B), int64_t(T)});
    for (auto _ : st) {
        opt.zero_grad();
        auto loss = TF::cross_entropy(m.forward(tok).reshape({-1, int64_t(V)}), tgt.reshape({-1}));
        loss.backward();
        opt.step();
        benchmark::DoNotOptimize(loss.data_ptr());
    }
    tokens_counter(st, B * T);
}
#endif

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
#define CT_BENCH(fn, name) BENCHMARK(fn)->Name(name)->ComputeStatistics("min", min_of)->Unit(benchmark::kMicrosecond)

}  // namespace

BENCHMARK(BM_peak_fma_probe)->Iterations(1);
CT_BENCH(BM_ctformer_train<Fp32>, "lora/train/ctformer");
CT_BENCH(BM_ctformer_train<Int4>, "lora/train/ctformer_int4");
CT_BENCH((BM_ctformer_decode<Fp32, false>), "lora/decode/ctformer_base");
CT_BENCH((BM_ctformer_decode<Fp32, true>), "lora/decode/ctformer_adapters");
CT_BENCH((BM_ctformer_decode<Int4, false>), "lora/decode/ctformer_int4_base");
CT_BENCH((BM_ctformer_decode<Int4, true>), "lora/decode/ctformer_int4_adapters");
CT_BENCH((BM_stories_decode<ct::lora_q | ct::lora_v, false>), "lora/decode/stories15M_base");
CT_BENCH((BM_stories_decode<ct::lora_q | ct::lora_v, true>), "lora/decode/stories15M_adapters_qv");
CT_BENCH((BM_stories_decode<ct::lora_all, true>), "lora/decode/stories15M_adapters_all");
#ifdef CTFORMER_HAVE_TORCH
CT_BENCH(BM_libtorch_train, "lora/train/libtorch");
#endif
int main(int argc, char** argv) { return bench::main(argc, argv); }
