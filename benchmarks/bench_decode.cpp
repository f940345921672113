// Token-by-token decoding of the models llama.cpp is compared on (benchmarks/llama_cpp/
// write_models.py writes them for both), batch 1, 1 thread, greedy:
//   decode/<model>/generate   63 tokens after a 1-token prompt through the KV cache (tokens/s)
//   decode/<model>/prefill    a 64-token prompt into an empty cache, to its first token (µs)
// Models: stories15M (Llama: dim 288, 6 layers, 6 heads, hidden 768, vocab 32000, context 256),
// stories15M_gqa (2 kv heads), gpt2_d256 (GPT: d 256, 4 layers, 4 heads, ffn 1024, vocab 50257),
// stories15M_bf16 / _int8 / _int4 (stories15M's weights as ct::weights<bf16 | int8_per_channel |
// int4_group<32, ct::f16>>, the tied-free LM head included).
// With CTFORMER_PEER_MODELS=<dir> the weights are write_models.py's (identical to llama.cpp's);
// otherwise a seeded init of the same shapes (the time does not depend on the values).
// Every generate case reports the weights' bytes read per token (weight_bytes: the params but the
// embedding table, of which a token reads one row), weightGB/s and %probeBW, that rate as a share
// of this binary's read-bandwidth probe over as many bytes. llama335M_* (d_model 1024, 24 layers,
// 16 heads, ffn 2816: 335M parameters, 350 MB as int8 groups) exceeds the last-level caches seen
// (300 MB on the AVX-512 Xeon) as int8 groups: the GEMVs' rate from memory (seeded weights only);
// llama630M_q4_0_a8 (48 such layers: 380 MB as int4) likewise for int4, whose llama335M fits.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ctformer/ctformer.hpp>
#include <ctformer/io/file.hpp>
#include <ctformer/io/gguf_load.hpp>

#include "bench_main.hpp"
#include "probes.hpp"

namespace {

constexpr std::size_t Gen = 63, Prompt = 64, Ctx = 256;
template <std::size_t KV, class... O>
using Stories = ct::Llama<32000, Ctx, 6, ct::d_model<288>, ct::heads<6>, ct::kv_heads<KV>, ct::ffn_dim<768>,
                          ct::norm_eps<1, 100000>, O...>;
// Quantized weights (#39), from the same float file (quantized at load), against llama.cpp's Q8_0
// and Q4_0 files of the same weights (write_models.py: stories15M_q8_0, stories15M_q4_0); int4 reads
// llama.cpp's Q4_0 file itself (ct::load_gguf: Q4_0 into int4_group<32, ct::f16> as stored, its halves)
using StoriesBf16 = Stories<6, ct::weights<ct::bf16>>;
using StoriesInt8 = Stories<6, ct::weights<ct::int8_per_channel>>;
using StoriesInt4 = Stories<6, ct::weights<ct::int4_group<32, ct::f16>>>;
using StoriesInt8A8 = Stories<6, ct::weights<ct::int8_per_channel, ct::int8_activations>>;
using StoriesInt4A8 = Stories<6, ct::weights<ct::int4_group<32, ct::f16>, ct::int8_activations>>;
// llama.cpp's Q8_0 file as stored (ct::load_gguf: Q8_0 into int8_group<32, ct::f16>, as tools/export.py prints)
using StoriesQ8 = Stories<6, ct::weights<ct::int8_group<32, ct::f16>>>;
using StoriesQ8A8 = Stories<6, ct::weights<ct::int8_group<32, ct::f16>, ct::int8_activations>>;
// (the 38th session's alias: the same file with its scales widened to floats, 4 bytes a group instead of 2)
using StoriesQ8A8FloatScales = Stories<6, ct::weights<ct::int8_group<32>, ct::int8_activations>>;
// llama.cpp's Q4_K_M mix as stored, per tensor as tools/export.py prints it (stories15M: the Q5_0 matrices in
// int6_group<32, ct::f16>, the Q8_0 ones in int8_group<32, ct::f16>, the Q4_K/Q6_K down projections in
// int6_group_min<16, ct::kscale>: the k-quants' two levels)
template <class... A>
using StoriesQ4KMAs = Stories<6, ct::weights<ct::int6_group<32, ct::f16>, A..., ct::v_weights<ct::int8_group<32, ct::f16>>,
                                             ct::down_weights<ct::int6_group_min<16, ct::kscale>>,
                                             ct::head_weights<ct::int8_group<32, ct::f16>>>>;
using StoriesQ4KM = StoriesQ4KMAs<>;
using StoriesQ4KMA8 = StoriesQ4KMAs<ct::int8_activations>;
// (the 37th session's alias, before the six-bit formats: every matrix but down in int8_group<32>)
using StoriesQ4KMInt8A8 = Stories<6, ct::weights<ct::int8_group<32>, ct::int8_activations, ct::down_weights<ct::int8_group_min<16>>>>;
// (the file in one format that holds every tensor: the 33rd session's form, for the comparison)
using StoriesQ4KMOneA8 = Stories<6, ct::weights<ct::int8_group_min<16>, ct::int8_activations>>;
// A model whose quantized weights exceed the last-level cache: Q8_0 as stored, with int8 activations
using Llama335MQ8A8 = ct::Llama<32000, Ctx, 24, ct::d_model<1024>, ct::heads<16>, ct::ffn_dim<2816>, ct::norm_eps<1, 100000>,
                                ct::weights<ct::int8_group<32>, ct::int8_activations>>;
using Llama335MQ4A8 = ct::Llama<32000, Ctx, 24, ct::d_model<1024>, ct::heads<16>, ct::ffn_dim<2816>, ct::norm_eps<1, 100000>,
                                ct::weights<ct::int4_group<32>, ct::int8_activations>>;
// ... Q4_K as stored (two-level scales: 4.6 bits a weight), the Q4_K_M mix's v and down as one format holds them
using Llama335MQ4KA8 = ct::Llama<32000, Ctx, 24, ct::d_model<1024>, ct::heads<16>, ct::ffn_dim<2816>, ct::norm_eps<1, 100000>,
                                 ct::weights<ct::int4_group_min<32, ct::kscale>, ct::int8_activations,
                                             ct::v_weights<ct::int6_group_min<16, ct::kscale>>,
                                             ct::down_weights<ct::int6_group_min<16, ct::kscale>>>>;
using Llama630MQ4A8 = ct::Llama<32000, Ctx, 48, ct::d_model<1024>, ct::heads<16>, ct::ffn_dim<2816>, ct::norm_eps<1, 100000>,
                                ct::weights<ct::int4_group<32>, ct::int8_activations>>;
using Llama630MQ4HA8 = ct::Llama<32000, Ctx, 48, ct::d_model<1024>, ct::heads<16>, ct::ffn_dim<2816>, ct::norm_eps<1, 100000>,
                                 ct::weights<ct::int4_group<32, ct::f16>, ct::int8_activations>>;  // (Q4_0's halves)
using GPT2Block = ct::DecoderOnlyBlock<ct::d_model<256>, ct::heads<4>, ct::ffn_dim<1024>, ct::norm_first<true>,
                                       ct::activation<ct::gelu_tanh>>;
using GPT2 = ct::GPT<50257, Ctx, 4, GPT2Block>;

// The peer's weights when CTFORMER_PEER_MODELS is set, else a seeded init; aborts the benchmark on a
// file that does not load (a wrong model would time the wrong thing).
template <class P> bool load(P& p, const char* name, benchmark::State& st) {
    if (const char* dir = std::getenv("CTFORMER_PEER_MODELS"); dir && name) {  // (name null: seeded only)
        static ct::mapped_file file;
        static ct::safetensors::file<128> f;
        static ct::gguf::file<64, 128> g;
        const bool gguf = std::string_view(name).ends_with(".gguf");  // llama.cpp's own file, read as it is
        ct::status s = file.open((std::string(dir) + "/" + name + (gguf ? "" : ".safetensors")).c_str());
        if (s) s = gguf ? g.parse(file.bytes()) : f.parse(file.bytes());
        if (s) s = gguf ? ct::load_gguf(p, g) : ct::load_state_dict(p, f);
        if (!s) {
            st.SkipWithError((std::string(name) + ": " + ct::to_string(s.code) + " " + std::string(s.tensor_name())).c_str());
            return false;
        }
        st.SetLabel("peer weights");
        return true;
    }
    unsigned seed = 17;
    ct::for_each_tensor(p, [&](std::string_view n, auto& t) {
        const bool gamma = n.find("norm") != std::string_view::npos && n.ends_with("weight");
        bench::set_all(t, [&] {
            seed = seed * 1103515245u + 12345u;
            return gamma ? 1.0f : (float((seed >> 9) & 0xffff) / 65536.0f - 0.5f) * 0.04f;
        });
    });
    return true;
}

template <class M> struct Storage {
    alignas(ct::huge_page_alignment<typename M::Params>) static inline typename M::Params p;
    alignas(ct::huge_page_alignment<typename M::template KVCache<1, Ctx>>) static inline typename M::template KVCache<1, Ctx>
        cache;
    static inline typename M::template GenerateWorkspace<Prompt> gws;
};

// threads: ctformer's executor (bench::executor; 1: the calling thread alone).
template <class M> void BM_generate(benchmark::State& st, const char* name, std::size_t threads = 1) {
    using S = Storage<M>;
    static const bool advised [[maybe_unused]] = bench::advise_huge(S::p, S::cache);
    if (!load(S::p, name, st)) return;
    const ct::use_executor on(bench::executor(threads));
    const ct::token prompt[1] = {5};
    for (auto _ : st) {
        S::cache.reset();
        std::size_t n = 0;
        const ct::status s = M::generate(S::p, S::gws, S::cache, prompt, 1, Gen, ct::sampling{.temperature = 0},
                                         [&](ct::token) { return ++n < Gen; });
        if (!s) st.SkipWithError(ct::to_string(s.code));
        benchmark::DoNotOptimize(n);
    }
    st.counters["tokens"] = Gen;
    st.counters["tokens/s"] = benchmark::Counter(Gen, benchmark::Counter::kIsIterationInvariantRate);
    double bytes = 0;  // the weights a token reads: every tensor but the embedding table
    ct::for_each_tensor(S::p, [&](std::string_view n, const auto& t) {
        if (n.find("embed") == std::string_view::npos && n.find("wte") == std::string_view::npos) bytes += double(sizeof t);
    });
    st.counters["weight_bytes"] = bytes;
    st.counters["weightGB/s"] = benchmark::Counter(Gen * bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    static const double probe = probes::read_bandwidth(static_cast<std::size_t>(bytes));
    st.counters["%probeBW"] = benchmark::Counter(100.0 * Gen * bytes / probe, benchmark::Counter::kIsIterationInvariantRate);
}

// The prompt's time to its first token: generate with max_new = 1 (one 64-row step; the LM head
// only for the last row, as llama.cpp evaluates a prompt).
template <class M> void BM_prefill(benchmark::State& st, const char* name, std::size_t threads = 1) {
    using S = Storage<M>;
    static const bool advised [[maybe_unused]] = bench::advise_huge(S::p, S::cache);
    if (!load(S::p, name, st)) return;
    const ct::use_executor on(bench::executor(threads));
    ct::token prompt[Prompt];
    for (std::size_t i = 0; i < Prompt; ++i) prompt[i] = ct::token(300 + i);
    for (auto _ : st) {
        S::cache.reset();
        ct::token first = -1;
        const ct::status s = M::generate(S::p, S::gws, S::cache, prompt, Prompt, 1, ct::sampling{.temperature = 0},
                                         [&](ct::token t) { first = t; return true; });
        if (!s) st.SkipWithError(ct::to_string(s.code));
        benchmark::DoNotOptimize(first);
    }
    st.counters["tokens"] = Prompt;
    st.counters["tokens/s"] = benchmark::Counter(Prompt, benchmark::Counter::kIsIterationInvariantRate);
}

// One token drawn from 32000 logits (a decoding step's sampling, alone): greedy, temperature 0.8,
// and temperature with top-k 40 and top-p 0.95 (llama.cpp's defaults), a repetition penalty over
// the last 64 tokens.
void BM_sample(benchmark::State& st, ct::sampling s) {
    static ct::sampler_scratch<float, 32000> scratch;
    static std::vector<float> logits(32000);
    unsigned seed = 5;
    for (float& l : logits) l = float((seed = seed * 1103515245u + 12345u) >> 9 & 0xffff) / 4096.0f - 8.0f;
    ct::token recent[64];
    for (std::size_t i = 0; i < 64; ++i) recent[i] = ct::token(i * 97 % 32000);
    std::uint64_t n = 0;
    for (auto _ : st) {
        ct::token next = 0;
        if (!ct::sample(logits.data(), s, n++, scratch, next, recent)) st.SkipWithError("sample failed");
        benchmark::DoNotOptimize(next);
    }
}

void BM_peak_fma_probe(benchmark::State& st) {  // measured afresh in every repetition
    double flops = 0;
    for (auto _ : st) flops = probes::measure_peak_flops(2);
    st.counters["peak_GFLOP/s"] = flops / 1e9;
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
template <class F> void add(const char* bench_name, F f) {
    benchmark::RegisterBenchmark(bench_name, f)->ComputeStatistics("min", min_of)->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::RegisterBenchmark("peak_fma_probe", BM_peak_fma_probe)->Iterations(1);
    add("decode/stories15M/generate", [](benchmark::State& st) { BM_generate<Stories<6>>(st, "stories15M"); });
    add("decode/stories15M_gqa/generate", [](benchmark::State& st) { BM_generate<Stories<2>>(st, "stories15M_gqa"); });
    add("decode/gpt2_d256/generate", [](benchmark::State& st) { BM_generate<GPT2>(st, "gpt2_d256"); });
    add("decode/stories15M_bf16/generate", [](benchmark::State& st) { BM_generate<StoriesBf16>(st, "stories15M"); });
    add("decode/stories15M_int8/generate", [](benchmark::State& st) { BM_generate<StoriesInt8>(st, "stories15M"); });
    add("decode/stories15M_int4/generate", [](benchmark::State& st) { BM_generate<StoriesInt4>(st, "stories15M_q4_0.gguf"); });
    add("decode/stories15M_int8_a8/generate", [](benchmark::State& st) { BM_generate<StoriesInt8A8>(st, "stories15M"); });
    add("decode/stories15M_int4_a8/generate", [](benchmark::State& st) { BM_generate<StoriesInt4A8>(st, "stories15M_q4_0.gguf"); });
    add("decode/stories15M_q8_0/generate", [](benchmark::State& st) { BM_generate<StoriesQ8>(st, "stories15M_q8_0.gguf"); });
    add("decode/stories15M_q8_0_a8/generate", [](benchmark::State& st) { BM_generate<StoriesQ8A8>(st, "stories15M_q8_0.gguf"); });
    add("decode/stories15M_q8_0_f32_scales_a8/generate",
        [](benchmark::State& st) { BM_generate<StoriesQ8A8FloatScales>(st, "stories15M_q8_0.gguf"); });
    add("decode/stories15M_q4_k_m/generate", [](benchmark::State& st) { BM_generate<StoriesQ4KM>(st, "stories15M_q4_k_m.gguf"); });
    add("decode/stories15M_q4_k_m_a8/generate", [](benchmark::State& st) { BM_generate<StoriesQ4KMA8>(st, "stories15M_q4_k_m.gguf"); });
    add("decode/stories15M_q4_k_m_int8_a8/generate",
        [](benchmark::State& st) { BM_generate<StoriesQ4KMInt8A8>(st, "stories15M_q4_k_m.gguf"); });
    add("decode/stories15M_q4_k_m_one_format_a8/generate",
        [](benchmark::State& st) { BM_generate<StoriesQ4KMOneA8>(st, "stories15M_q4_k_m.gguf"); });
    add("decode/llama335M_q8_0_a8/generate", [](benchmark::State& st) { BM_generate<Llama335MQ8A8>(st, nullptr); });
    add("decode/llama335M_q4_0_a8/generate", [](benchmark::State& st) { BM_generate<Llama335MQ4A8>(st, nullptr); });
    add("decode/llama335M_q4_k_m_a8/generate", [](benchmark::State& st) { BM_generate<Llama335MQ4KA8>(st, nullptr); });
    add("decode/llama630M_q4_0_a8/generate", [](benchmark::State& st) { BM_generate<Llama630MQ4A8>(st, nullptr); });
    add("decode/llama630M_q4_0_f16_a8/generate", [](benchmark::State& st) { BM_generate<Llama630MQ4HA8>(st, nullptr); });
    add("sample/vocab32000/greedy", [](benchmark::State& st) { BM_sample(st, ct::sampling{.temperature = 0}); });
    add("sample/vocab32000/temperature", [](benchmark::State& st) { BM_sample(st, ct::sampling{.temperature = 0.8f}); });
    add("sample/vocab32000/top_k_top_p_penalty", [](benchmark::State& st) {
        BM_sample(st, ct::sampling{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .repetition_penalty = 1.1f});
    });
    // two threads (#40): ct::thread_pool(2) as the calling thread's executor (ct::use_executor)
    add("decode/stories15M_t2/generate", [](benchmark::State& st) { BM_generate<Stories<6>>(st, "stories15M", 2); });
    add("decode/stories15M_int8_t2/generate", [](benchmark::State& st) { BM_generate<StoriesInt8>(st, "stories15M", 2); });
    add("decode/stories15M_int4_t2/generate", [](benchmark::State& st) { BM_generate<StoriesInt4>(st, "stories15M_q4_0.gguf", 2); });
    add("decode/stories15M_int8_a8_t2/generate", [](benchmark::State& st) { BM_generate<StoriesInt8A8>(st, "stories15M", 2); });
    add("decode/stories15M_int4_a8_t2/generate", [](benchmark::State& st) { BM_generate<StoriesInt4A8>(st, "stories15M_q4_0.gguf", 2); });
    add("decode/stories15M_q8_0_a8_t2/generate", [](benchmark::State& st) { BM_generate<StoriesQ8A8>(st, "stories15M_q8_0.gguf", 2); });
    add("decode/stories15M_t2/prefill", [](benchmark::State& st) { BM_prefill<Stories<6>>(st, "stories15M", 2); });
    add("decode/stories15M/prefill", [](benchmark::State& st) { BM_prefill<Stories<6>>(st, "stories15M"); });
    add("decode/stories15M_gqa/prefill", [](benchmark::State& st) { BM_prefill<Stories<2>>(st, "stories15M_gqa"); });
    add("decode/gpt2_d256/prefill", [](benchmark::State& st) { BM_prefill<GPT2>(st, "gpt2_d256"); });
    add("decode/stories15M_int8/prefill", [](benchmark::State& st) { BM_prefill<StoriesInt8>(st, "stories15M"); });
    add("decode/stories15M_int4/prefill", [](benchmark::State& st) { BM_prefill<StoriesInt4>(st, "stories15M_q4_0.gguf"); });
    add("decode/stories15M_int8_a8/prefill", [](benchmark::State& st) { BM_prefill<StoriesInt8A8>(st, "stories15M"); });
    add("decode/stories15M_int4_a8/prefill", [](benchmark::State& st) { BM_prefill<StoriesInt4A8>(st, "stories15M_q4_0.gguf"); });
    add("decode/stories15M_q8_0/prefill", [](benchmark::State& st) { BM_prefill<StoriesQ8>(st, "stories15M_q8_0.gguf"); });
    add("decode/stories15M_q8_0_a8/prefill", [](benchmark::State& st) { BM_prefill<StoriesQ8A8>(st, "stories15M_q8_0.gguf"); });
    add("decode/stories15M_q8_0_f32_scales_a8/prefill",
        [](benchmark::State& st) { BM_prefill<StoriesQ8A8FloatScales>(st, "stories15M_q8_0.gguf"); });
    add("decode/stories15M_q4_k_m_a8/prefill", [](benchmark::State& st) { BM_prefill<StoriesQ4KMA8>(st, "stories15M_q4_k_m.gguf"); });
    add("decode/stories15M_q4_k_m_int8_a8/prefill", [](benchmark::State& st) { BM_prefill<StoriesQ4KMInt8A8>(st, "stories15M_q4_k_m.gguf"); });
    add("decode/stories15M_q4_k_m_a8_t2/generate", [](benchmark::State& st) { BM_generate<StoriesQ4KMA8>(st, "stories15M_q4_k_m.gguf", 2); });
    add("decode/stories15M_q8_0_a8_t2/prefill", [](benchmark::State& st) { BM_prefill<StoriesQ8A8>(st, "stories15M_q8_0.gguf", 2); });
    add("decode/stories15M_int4_a8_t2/prefill", [](benchmark::State& st) { BM_prefill<StoriesInt4A8>(st, "stories15M_q4_0.gguf", 2); });
    add("decode/stories15M_q4_k_m_a8_t2/prefill", [](benchmark::State& st) { BM_prefill<StoriesQ4KMA8>(st, "stories15M_q4_k_m.gguf", 2); });
    return bench::main(argc, argv);
}
