// Whole-layer benchmarks: ctformer, and (when built with the peers) libtorch's
// torch::nn::TransformerDecoderLayer and a straightforward Eigen implementation, same shapes and
// masks (causal post-norm ReLU), 1 thread, in one run. Counters: GFLOP/s and % of the peak-FMA
// probe measured by this binary; for steps, effective weight bandwidth and % of a read probe.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <ctformer/ctformer.hpp>

#include "bench_main.hpp"
#include "probes.hpp"
#include "shapes.hpp"

#ifdef CTFORMER_HAVE_EIGEN
#include "eigen_decoder.hpp"
#endif
#ifdef CTFORMER_HAVE_TORCH
#include <torch/torch.h>
#endif
#if defined(CTFORMER_HAVE_CBLAS) || defined(CTFORMER_HAVE_ONEDNN)
#include "blas_decoder.hpp"
#endif
#ifdef CTFORMER_HAVE_ONEDNN
#include "onednn_gemm.hpp"
#endif

namespace {

template <class P> void fill(P& p) {
    unsigned s = 17;
    ct::for_each_tensor(p, [&](std::string_view name, auto& t) {
        const bool gamma = name.starts_with("norm") && name.ends_with("weight");
        bench::set_all(t, [&] {
            s = s * 1103515245u + 12345u;
            return gamma ? 1.0f : (float((s >> 9) & 0xffff) / 65536.0f - 0.5f) * 0.1f;
        });
    });
}
// Bytes of the weight matrices in P as stored (quantized: words and scales): what a step streams.
template <class P> double weight_matrix_bytes(const P& p) {
    double bytes = 0;
    ct::for_each_tensor(p, [&](std::string_view, const auto& t) {
        using X = std::remove_cvref_t<decltype(t)>;
        if constexpr (ct::is_quantized_weight_v<X>) bytes += sizeof(t);
        else if constexpr (X::rank == 2) bytes += X::size * sizeof(typename X::value_type);
    });
    return bytes;
}
template <class X> void fill_tensor(X& x) {
    for (std::size_t i = 0; i < x.size; ++i) x.storage[i] = float((i * 7919) % 1000) / 1000.0f - 0.5f;
}
void flop_counters(benchmark::State& st, double flops) {
    st.counters["flops"] = flops;  // per iteration; the report derives rates from the min time
    st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    st.counters["%peak"] = benchmark::Counter(100.0 * flops / probes::peak_flops(),
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// Fmt: the weights' format (ct::weights<Fmt>; dense: today's float weights).
template <const shape& s, class Fmt = ct::dense> struct layer_of {
    using W = ct::weights<Fmt>;
    using type = std::conditional_t<
        s.cross, ct::DecoderLayer<ct::d_model<s.D>, ct::heads<s.H>, ct::ffn_dim<s.F>, W>,
        std::conditional_t<s.llama, ct::LlamaBlock<ct::d_model<s.D>, ct::heads<s.H>, ct::ffn_dim<s.F>, ct::max_positions<s.T>, W>,
                           ct::DecoderOnlyBlock<ct::d_model<s.D>, ct::heads<s.H>, ct::ffn_dim<s.F>,
                                                ct::norm_first<true>, ct::activation<ct::gelu>, W>>>;
};

// ctformer's storage is placed as docs/api.md recommends: static, objects of 2 MB and more aligned
// to 2 MB (ct::huge_page_alignment) and advised huge pages before their first write
// (ct::advise_huge_pages; AVX-512 Zen 4: layer/base 2-3% faster, step/base 7-22%). pages::small:
// the same storage in 4 KB pages (layer/<shape>/ctformer_4k), for the comparison.
enum class pages { huge, small };
template <class X, pages P = pages::huge>
inline constexpr std::size_t storage_align = P == pages::huge ? ct::huge_page_alignment<X> : alignof(X);
using bench::advise_huge;

// One shape's ctformer layer with its weights and inputs filled (static storage, as users place
// them): what BM_ctformer times and what the OpenBLAS peer is checked against.
template <const shape& s, pages P = pages::huge, class Fmt = ct::dense> struct layer_rig {
    using L = typename layer_of<s, Fmt>::type;
    using Params = typename L::Params;
    using Ws = typename L::template Workspace<s.B, s.T, s.S>;
    using X = ct::Tensor<float, s.B, s.T, s.D>;
    using Mem = ct::Tensor<float, s.B, s.S, s.D>;
    alignas(storage_align<Params, P>) static inline Params p;
    alignas(storage_align<Ws, P>) static inline Ws ws;
    alignas(storage_align<X, P>) static inline X tgt, out;
    alignas(storage_align<Mem, P>) static inline Mem mem;
    static void fill_all() {
        if constexpr (P == pages::huge) static const bool advised [[maybe_unused]] = advise_huge(p, ws, tgt, out, mem);
        fill(p);
        fill_tensor(tgt);
        fill_tensor(mem);
    }
    static void forward() {
        if constexpr (s.cross) (void)L::forward(p, ws, tgt, mem, out, ct::causal{});
        else (void)L::forward(p, ws, tgt, out, ct::causal{});
    }
};

// N: threads (bench::executor).
template <const shape& s, pages P = pages::huge, class Fmt = ct::dense, std::size_t N = 1> void BM_ctformer(benchmark::State& st) {
    using R = layer_rig<s, P, Fmt>;
    R::fill_all();
    const ct::use_executor on(bench::executor(N));
    for (auto _ : st) {
        R::forward();
        benchmark::DoNotOptimize(R::out.storage[0]);
        benchmark::ClobberMemory();
    }
    flop_counters(st, layer_flops(s));
}

// A training step: forward_train (saving Activations, dropout p = 0) + backward, gradients
// accumulated into grads. FLOPs counted as 3x the forward's (the backward's two GEMMs per weight).
template <const shape& s, std::size_t N = 1> void BM_ctformer_train(benchmark::State& st) {
    using L = typename layer_of<s>::type;
    using Params = typename L::Params;
    using Grads = typename L::Grads;
    using Ws = typename L::template TrainWorkspace<s.B, s.T, s.S>;
    using Acts = typename L::template Activations<s.B, s.T, s.S>;
    alignas(storage_align<Params>) static Params p;
    alignas(storage_align<Grads>) static Grads g;
    alignas(storage_align<Ws>) static Ws ws;
    alignas(storage_align<Acts>) static Acts acts;
    static ct::Tensor<float, s.B, s.T, s.D> tgt, out, d_out, d_tgt;
    static ct::Tensor<float, s.B, s.S, s.D> mem, d_mem;
    static const bool advised [[maybe_unused]] = advise_huge(p, g, ws, acts);
    fill(p);
    fill_tensor(tgt);
    fill_tensor(mem);
    fill_tensor(d_out);
    const ct::use_executor on(bench::executor(N));
    const ct::dropout_config none{0.0f, 0.0f, 0.0f, 0, 0};
    for (auto _ : st) {
        if constexpr (s.cross) {
            L::forward_train(p, ws, acts, tgt, mem, out, none, ct::causal{});
            if (!L::backward(p, acts, ws, d_out, g, d_tgt, d_mem, ct::causal{})) st.SkipWithError("backward failed");
        } else {
            L::forward_train(p, ws, acts, tgt, out, none, ct::causal{});
            if (!L::backward(p, acts, ws, d_out, g, d_tgt, ct::causal{})) st.SkipWithError("backward failed");
        }
        benchmark::DoNotOptimize(d_tgt.storage[0]);
        benchmark::ClobberMemory();
    }
    flop_counters(st, 3 * layer_flops(s));
    st.counters["act_bytes"] = double(L::template Activations<s.B, s.T, s.S>::bytes);
    st.counters["ws_bytes"] = double(L::template Workspace<s.B, s.T, s.S>::bytes);
    st.counters["train_ws_bytes"] = double(L::template TrainWorkspace<s.B, s.T, s.S>::bytes);
}

// Weights a step reads: self in_proj + out_proj, cross q + out_proj, FFN (cross K/V are cached).
constexpr double step_weight_bytes(const shape& s) { return 4.0 * (6.0 * s.D * s.D + 2.0 * s.D * s.F); }

// The same weights as stored in P (quantized: words and scales, at the layer's average bytes per
// weight; the cross-attention's k|v rows of its in_proj, cached, are not read).
template <class P> double stored_step_bytes(const shape& s, const P& p) {
    return step_weight_bytes(s) * weight_matrix_bytes(p) / (4.0 * (8.0 * s.D * s.D + 2.0 * s.D * s.F));
}

// One token through the caches: self cache at `s.T` positions after the step, memory s.S.
// Fmt: the weights' format; weightGB/s counts the bytes as stored (quantized: words and scales).
// KV: the KV caches' format (ct::kv_cache<KV>: dense or bf16).
template <const shape& s, class Fmt = ct::dense, class KV = ct::dense, std::size_t N = 1>
void BM_ctformer_step(benchmark::State& st) {
    using L = ct::DecoderLayer<ct::d_model<s.D>, ct::heads<s.H>, ct::ffn_dim<s.F>, ct::weights<Fmt>, ct::kv_cache<KV>>;
    using Params = typename L::Params;
    using Cache = typename L::template KVCache<1, s.T>;
    using Cross = typename L::template CrossKVCache<1, s.S>;
    alignas(storage_align<Params>) static Params p;
    alignas(storage_align<Cache>) static Cache cache;
    alignas(storage_align<Cross>) static Cross cc;
    static typename L::template StepWorkspace<1, 1> ws;
    static ct::Tensor<float, 1, 1, s.D> x, y;
    static ct::Tensor<float, 1, s.S, s.D> mem;
    static const bool advised [[maybe_unused]] = advise_huge(p, cache, cc);
    fill(p);
    fill_tensor(mem);
    fill_tensor(x);
    const ct::use_executor on(bench::executor(N));
    L::fill_cross_cache(p, ws, cc, mem);
    cache.reset();
    for (std::size_t t = 0; t + 1 < s.T; ++t) (void)L::step(p, ws, cache, cc, x, y, ct::causal{});
    for (auto _ : st) {
        (void)cache.truncate_all(s.T - 1);
        if (!L::step(p, ws, cache, cc, x, y, ct::causal{})) st.SkipWithError("step failed");
        benchmark::DoNotOptimize(y.storage[0]);
        benchmark::ClobberMemory();
    }
    const double weight_bytes = stored_step_bytes(s, p);
    st.counters["weight_bytes"] = weight_bytes;
    st.counters["weightGB/s"] = benchmark::Counter(weight_bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    static const double probe = probes::read_bandwidth(static_cast<std::size_t>(weight_bytes));
    st.counters["%probeBW"] = benchmark::Counter(100.0 * weight_bytes / probe, benchmark::Counter::kIsIterationInvariantRate);
    st.counters["probeGB/s"] = probe / 1e9;
}

// The floor of a step on this machine: its six weight GEMVs alone, through the layer's own
// projections and buffers (the calls run_rows makes for one row), no attention, norms or cache
// writes.
template <const shape& s, class Fmt = ct::dense> void BM_step_gemvs(benchmark::State& st) {
    using L = ct::DecoderLayer<ct::d_model<s.D>, ct::heads<s.H>, ct::ffn_dim<s.F>, ct::weights<Fmt>>;
    alignas(storage_align<typename L::Params>) static typename L::Params p;
    static typename L::template StepWorkspace<1, 1> ws;
    static ct::Tensor<float, 1, 1, s.D> x, y;
    static const bool advised [[maybe_unused]] = advise_huge(p);
    fill(p);
    fill_tensor(x);
    const auto &sa = p.self_attn, &ca = p.multihead_attn;
    for (auto _ : st) {
        float* const out = y.data();
        for (std::size_t i = 0; i < s.D; ++i) out[i] = x.storage[i];  // the residual
        using lin = ct::modules::linear;
        using attn = typename L::Attn;
        lin::forward(sa.in_proj_weight, 0, 3, x.data(), 1, sa.in_bias_data(), ws.qkv(), attn::qkv_ld, ws.pack);
        attn::out_projection(sa, ws.qkv(), out, true, 1, ws.pack);
        lin::forward(ca.in_proj_weight, 0, 1, out, 1, ca.in_bias_data(), ws.qkv(), s.D, ws.pack);
        attn::out_projection(ca, ws.qkv(), out, true, 1, ws.pack);
        L::FFN::forward(p.ffn, out, ws.hidden(), out, true, 1, 1, ct::no_dropout{}, ws.pack);
        benchmark::DoNotOptimize(out[0]);
        benchmark::ClobberMemory();
    }
    const double weight_bytes = stored_step_bytes(s, p);
    st.counters["weight_bytes"] = weight_bytes;
    st.counters["weightGB/s"] = benchmark::Counter(weight_bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_peak_fma_probe(benchmark::State& st) {  // measured afresh in every repetition
    double flops = 0;
    for (auto _ : st) flops = probes::measure_peak_flops(2);
    st.counters["GFLOP/s"] = flops / 1e9;
}

#ifdef CTFORMER_HAVE_EIGEN
template <const shape& s> void BM_eigen(benchmark::State& st) {
    Eigen::setNbThreads(1);
    eigen_peer::Layer layer(int(s.D), int(s.H), int(s.F));
    std::vector<eigen_peer::Mat> tgt(s.B, eigen_peer::Mat::Random(int(s.T), int(s.D))),
        mem(s.B, eigen_peer::Mat::Random(int(s.S), int(s.D)));
    for (auto _ : st)
        for (std::size_t b = 0; b < s.B; ++b) benchmark::DoNotOptimize(layer.forward(tgt[b], mem[b]).data());
    flop_counters(st, layer_flops(s));
}

// One token through Eigen's caches (eigen_decoder.hpp: Layer::step), cache length s.T after the
// step, memory s.S. Checked once against the Eigen forward's last row.
template <const shape& s> void BM_eigen_step(benchmark::State& st) {
    Eigen::setNbThreads(1);
    eigen_peer::Layer layer(int(s.D), int(s.H), int(s.F));
    const eigen_peer::Mat tgt = eigen_peer::Mat::Random(int(s.T), int(s.D)), mem = eigen_peer::Mat::Random(int(s.S), int(s.D));
    auto cache = layer.make_cache(int(s.T), mem);
    eigen_peer::Vec y(int(s.D));
    for (int t = 0; t < int(s.T); ++t) layer.step(tgt.row(t), cache, y);
    const float err = (layer.forward(tgt, mem).row(int(s.T) - 1) - y).cwiseAbs().maxCoeff();
    if (!(err < 1e-3f)) st.SkipWithError("Eigen step differs from the Eigen forward");
    const eigen_peer::Vec x = tgt.row(int(s.T) - 1);
    for (auto _ : st) {
        cache.len = int(s.T) - 1;
        layer.step(x, cache, y);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
}
#endif

#if defined(CTFORMER_HAVE_CBLAS) || defined(CTFORMER_HAVE_ONEDNN)
// The layer written over a GEMM library (blas_decoder.hpp: OpenBLAS's cblas_sgemm, or oneDNN's
// matmul), ctformer's weights, checked against ctformer's output (max abs error reported; an
// error above 1e-3 skips the benchmark).
template <const shape& s, class Gemm, int Threads = 1> void BM_gemm_layer(benchmark::State& st) {
    const bench::peer_threads threads(Threads);
    using R = layer_rig<s>;
    R::fill_all();
    R::forward();
    blas_peer::Layer<Gemm> layer(R::p, int(s.B), int(s.T), int(s.S), int(s.D), int(s.H), int(s.F), s.cross);
    std::vector<float> x(R::tgt.storage, R::tgt.storage + R::tgt.size);
    layer.forward(x.data(), R::mem.storage);
    double err = 0;
    for (std::size_t i = 0; i < x.size(); ++i) err = std::max(err, double(std::abs(x[i] - R::out.storage[i])));
    if (!(err < 1e-3)) st.SkipWithError("the peer layer differs from ctformer's output");
    for (auto _ : st) {
        std::copy(R::tgt.storage, R::tgt.storage + R::tgt.size, x.begin());
        layer.forward(x.data(), R::mem.storage);
        benchmark::DoNotOptimize(x.data());
        benchmark::ClobberMemory();
    }
    flop_counters(st, layer_flops(s));
    st.counters["max_abs_err"] = err;
}
#endif

#ifdef CTFORMER_HAVE_TORCH
template <const shape& s, int Threads = 1> void BM_libtorch(benchmark::State& st) {
    const bench::peer_threads threads(Threads);
    torch::set_num_threads(Threads);
    torch::NoGradGuard no_grad;
    torch::nn::TransformerDecoderLayer layer(
        torch::nn::TransformerDecoderLayerOptions(int64_t(s.D), int64_t(s.H)).dim_feedforward(int64_t(s.F)).dropout(0.0));
    layer->eval();
    // libtorch 1.13's C++ layer is sequence-first: (T, B, D).
    auto tgt = torch::randn({int64_t(s.T), int64_t(s.B), int64_t(s.D)});
    auto mem = torch::randn({int64_t(s.S), int64_t(s.B), int64_t(s.D)});
    auto mask = torch::full({int64_t(s.T), int64_t(s.T)}, -std::numeric_limits<float>::infinity()).triu(1);
    for (auto _ : st) benchmark::DoNotOptimize(layer->forward(tgt, mem, mask).data_ptr());
    flop_counters(st, layer_flops(s));
    torch::set_num_threads(1);
}

// libtorch autograd: forward + backward of sum(out · d_out) (train mode, dropout 0), gradients
// accumulated into the parameters' .grad as PyTorch users do.
template <const shape& s, int Threads = 1> void BM_libtorch_train(benchmark::State& st) {
    const bench::peer_threads threads(Threads);
    torch::set_num_threads(Threads);
    torch::nn::TransformerDecoderLayer layer(
        torch::nn::TransformerDecoderLayerOptions(int64_t(s.D), int64_t(s.H)).dim_feedforward(int64_t(s.F)).dropout(0.0));
    layer->train();
    auto tgt = torch::randn({int64_t(s.T), int64_t(s.B), int64_t(s.D)}).requires_grad_(true);
    auto mem = torch::randn({int64_t(s.S), int64_t(s.B), int64_t(s.D)}).requires_grad_(true);
    auto d_out = torch::randn({int64_t(s.T), int64_t(s.B), int64_t(s.D)});
    auto mask = torch::full({int64_t(s.T), int64_t(s.T)}, -std::numeric_limits<float>::infinity()).triu(1);
    for (auto _ : st) {
        auto out = layer->forward(tgt, mem, mask);
        out.backward(d_out);
        benchmark::DoNotOptimize(tgt.grad().data_ptr());
    }
    flop_counters(st, 3 * layer_flops(s));
    torch::set_num_threads(1);
}
#endif

// Best of the repetitions: on a shared machine the minimum is the least disturbed measurement.
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
#define CT_BENCH(fn, name) BENCHMARK(fn)->Name(name)->ComputeStatistics("min", min_of)
// The layer over a GEMM library (blas_decoder.hpp) at every shape, as layer/<shape>/<name>.
#define CT_GEMM_LAYERS(Gemm, name)                                                   \
    CT_BENCH((BM_gemm_layer<tiny, Gemm>), "layer/tiny/" name);                       \
    CT_BENCH((BM_gemm_layer<small, Gemm>), "layer/small/" name);                     \
    CT_BENCH((BM_gemm_layer<base, Gemm>), "layer/base/" name);                       \
    CT_BENCH((BM_gemm_layer<batched, Gemm>), "layer/batched/" name);                 \
    CT_BENCH((BM_gemm_layer<gpt, Gemm>), "layer/gpt/" name);                         \
    CT_BENCH((BM_gemm_layer<tiny, Gemm, 2>), "layer/tiny/" name "_t2");              \
    CT_BENCH((BM_gemm_layer<small, Gemm, 2>), "layer/small/" name "_t2");            \
    CT_BENCH((BM_gemm_layer<base, Gemm, 2>), "layer/base/" name "_t2");              \
    CT_BENCH((BM_gemm_layer<batched, Gemm, 2>), "layer/batched/" name "_t2");        \
    CT_BENCH((BM_gemm_layer<gpt, Gemm, 2>), "layer/gpt/" name "_t2")

#include "layer_parts.hpp"

}  // namespace

BENCHMARK(BM_peak_fma_probe)->Iterations(1);
CT_BENCH(BM_ctformer<tiny>, "layer/tiny/ctformer");
CT_BENCH(BM_ctformer<small>, "layer/small/ctformer");
CT_BENCH(BM_ctformer<base>, "layer/base/ctformer");
CT_BENCH(BM_ctformer<batched>, "layer/batched/ctformer");
CT_BENCH(BM_ctformer<gpt>, "layer/gpt/ctformer");
CT_BENCH(BM_ctformer<llama>, "layer/llama/ctformer");
CT_BENCH((BM_ctformer<tiny, pages::small>), "layer/tiny/ctformer_4k");
CT_BENCH((BM_ctformer<small, pages::small>), "layer/small/ctformer_4k");
CT_BENCH((BM_ctformer<base, pages::small>), "layer/base/ctformer_4k");
CT_BENCH((BM_ctformer<batched, pages::small>), "layer/batched/ctformer_4k");
CT_BENCH((BM_ctformer<gpt, pages::small>), "layer/gpt/ctformer_4k");
CT_BENCH(BM_ctformer_step<tiny>, "step/tiny/ctformer");
CT_BENCH(BM_ctformer_step<base>, "step/base/ctformer");
// Quantized weights (#39): the same step and forward with bf16, int8 (per channel), int4 (groups of 32)
CT_BENCH((BM_ctformer_step<tiny, ct::bf16>), "step/tiny/ctformer_bf16");
CT_BENCH((BM_ctformer_step<tiny, ct::int8_per_channel>), "step/tiny/ctformer_int8");
CT_BENCH((BM_ctformer_step<tiny, ct::int4_group<32>>), "step/tiny/ctformer_int4");
CT_BENCH((BM_ctformer_step<base, ct::bf16>), "step/base/ctformer_bf16");
CT_BENCH((BM_ctformer_step<base, ct::int8_per_channel>), "step/base/ctformer_int8");
CT_BENCH((BM_ctformer_step<base, ct::int4_group<32>>), "step/base/ctformer_int4");
CT_BENCH((BM_step_gemvs<base, ct::bf16>), "step/base/gemvs_only_bf16");
CT_BENCH((BM_step_gemvs<base, ct::int8_per_channel>), "step/base/gemvs_only_int8");
CT_BENCH((BM_step_gemvs<base, ct::int4_group<32>>), "step/base/gemvs_only_int4");
CT_BENCH((BM_ctformer<base, pages::huge, ct::bf16>), "layer/base/ctformer_bf16");
CT_BENCH((BM_ctformer<base, pages::huge, ct::int8_per_channel>), "layer/base/ctformer_int8");
CT_BENCH((BM_ctformer<base, pages::huge, ct::int4_group<32>>), "layer/base/ctformer_int4");
// ... and with int8 activations (integer dot products; ct::weights<F, ct::int8_activations>)
CT_BENCH((BM_ctformer_step<tiny, ct::int8_dot<ct::int8_per_channel>>), "step/tiny/ctformer_int8_a8");
CT_BENCH((BM_ctformer_step<tiny, ct::int8_dot<ct::int4_group<32>>>), "step/tiny/ctformer_int4_a8");
CT_BENCH((BM_ctformer_step<base, ct::int8_dot<ct::int8_per_channel>>), "step/base/ctformer_int8_a8");
CT_BENCH((BM_ctformer_step<base, ct::int8_dot<ct::int4_group<32>>>), "step/base/ctformer_int4_a8");
CT_BENCH((BM_step_gemvs<base, ct::int8_dot<ct::int8_per_channel>>), "step/base/gemvs_only_int8_a8");
CT_BENCH((BM_step_gemvs<base, ct::int8_dot<ct::int4_group<32>>>), "step/base/gemvs_only_int4_a8");
CT_BENCH((BM_ctformer<base, pages::huge, ct::int8_dot<ct::int8_per_channel>>), "layer/base/ctformer_int8_a8");
CT_BENCH((BM_ctformer<base, pages::huge, ct::int8_dot<ct::int4_group<32>>>), "layer/base/ctformer_int4_a8");
// ... and with bf16 KV caches (self cache 128 positions, memory 128: 1 MB of fp32 keys and values a step)
CT_BENCH((BM_ctformer_step<base, ct::dense, ct::bf16>), "step/base/ctformer_bf16kv");
CT_BENCH((BM_ctformer_step<base, ct::int8_dot<ct::int4_group<32>>, ct::bf16>), "step/base/ctformer_int4_a8_bf16kv");
CT_BENCH((BM_ctformer_step<long_ctx>), "step/long/ctformer");
CT_BENCH((BM_ctformer_step<long_ctx, ct::dense, ct::bf16>), "step/long/ctformer_bf16kv");
CT_BENCH((BM_ctformer_step<long_ctx, ct::int8_dot<ct::int4_group<32>>>), "step/long/ctformer_int4_a8");
CT_BENCH((BM_ctformer_step<long_ctx, ct::int8_dot<ct::int4_group<32>>, ct::bf16>), "step/long/ctformer_int4_a8_bf16kv");
// Two threads (ct::thread_pool(2)): the same calls inside a ct::use_executor scope (#40)
CT_BENCH((BM_ctformer<tiny, pages::huge, ct::dense, 2>), "layer/tiny/ctformer_t2");
CT_BENCH((BM_ctformer<small, pages::huge, ct::dense, 2>), "layer/small/ctformer_t2");
CT_BENCH((BM_ctformer<base, pages::huge, ct::dense, 2>), "layer/base/ctformer_t2");
CT_BENCH((BM_ctformer<batched, pages::huge, ct::dense, 2>), "layer/batched/ctformer_t2");
CT_BENCH((BM_ctformer<gpt, pages::huge, ct::dense, 2>), "layer/gpt/ctformer_t2");
CT_BENCH((BM_ctformer<llama, pages::huge, ct::dense, 2>), "layer/llama/ctformer_t2");
CT_BENCH((BM_ctformer_step<tiny, ct::dense, ct::dense, 2>), "step/tiny/ctformer_t2");
CT_BENCH((BM_ctformer_step<base, ct::dense, ct::dense, 2>), "step/base/ctformer_t2");
CT_BENCH((BM_ctformer_step<base, ct::int8_dot<ct::int4_group<32>>, ct::dense, 2>), "step/base/ctformer_int4_a8_t2");
CT_BENCH((BM_ctformer_step<long_ctx, ct::dense, ct::dense, 2>), "step/long/ctformer_t2");
CT_BENCH((BM_ctformer_train<tiny, 2>), "train/tiny/ctformer_t2");
CT_BENCH((BM_ctformer_train<base, 2>), "train/base/ctformer_t2");
CT_BENCH((BM_ctformer_train<gpt, 2>), "train/gpt/ctformer_t2");
CT_BENCH(BM_ctformer_train<tiny>, "train/tiny/ctformer");
CT_BENCH(BM_ctformer_train<base>, "train/base/ctformer");
CT_BENCH(BM_ctformer_train<gpt>, "train/gpt/ctformer");
CT_BENCH(BM_ctformer_train<llama>, "train/llama/ctformer");
CT_BENCH(BM_step_gemvs<tiny>, "step/tiny/gemvs_only");
CT_BENCH(BM_step_gemvs<base>, "step/base/gemvs_only");
CT_PARTS_CROSS(tiny);
CT_PARTS_CROSS(small);
CT_PARTS_CROSS(base);
CT_PARTS_CROSS(batched);
CT_PARTS_SELF(gpt);
CT_SEQUENCE_SELF(gpt);
#ifdef CTFORMER_HAVE_EIGEN
CT_BENCH(BM_eigen<tiny>, "layer/tiny/eigen");
CT_BENCH(BM_eigen<small>, "layer/small/eigen");
CT_BENCH(BM_eigen<base>, "layer/base/eigen");
CT_BENCH(BM_eigen<batched>, "layer/batched/eigen");
CT_BENCH(BM_eigen_step<tiny>, "step/tiny/eigen");
CT_BENCH(BM_eigen_step<base>, "step/base/eigen");
#endif
#ifdef CTFORMER_HAVE_CBLAS
CT_GEMM_LAYERS(blas_peer::OpenBlas, "openblas");
#endif
#ifdef CTFORMER_HAVE_ONEDNN
CT_GEMM_LAYERS(blas_peer::OneDnn, "onednn");
#endif
#ifdef CTFORMER_HAVE_TORCH
CT_BENCH(BM_libtorch<tiny>, "layer/tiny/libtorch");
CT_BENCH(BM_libtorch<small>, "layer/small/libtorch");
CT_BENCH(BM_libtorch<base>, "layer/base/libtorch");
CT_BENCH(BM_libtorch<batched>, "layer/batched/libtorch");
CT_BENCH(BM_libtorch_train<tiny>, "train/tiny/libtorch");
CT_BENCH(BM_libtorch_train<base>, "train/base/libtorch");
CT_BENCH((BM_libtorch<tiny, 2>), "layer/tiny/libtorch_t2");
CT_BENCH((BM_libtorch<small, 2>), "layer/small/libtorch_t2");
CT_BENCH((BM_libtorch<base, 2>), "layer/base/libtorch_t2");
CT_BENCH((BM_libtorch<batched, 2>), "layer/batched/libtorch_t2");
CT_BENCH((BM_libtorch_train<tiny, 2>), "train/tiny/libtorch_t2");
CT_BENCH((BM_libtorch_train<base, 2>), "train/base/libtorch_t2");
#endif
int main(int argc, char** argv) { return bench::main(argc, argv); }
