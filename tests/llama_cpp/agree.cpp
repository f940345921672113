// ctformer against llama.cpp on the same GGUF files (scripts/gguf_agreement): each file of
// write_agreement.py loaded by ct::load_gguf into one dense Llama type (the file's values as ggml
// decodes them), then for each of llama.cpp's greedy runs (agree.mjs: prompt, 64 tokens or up to
// its end-of-sequence token):
//   free-running  ctformer's greedy tokens from the same prompt, equal to llama.cpp's (all of them)
//   forced        ctformer's argmax at each position of llama.cpp's sequence (prompt + its tokens,
//                 and its stop: end-of-sequence where it stopped early) equal to llama.cpp's token
// The files ctformer's quantized weights hold as stored (all-Q4_0: int4_group<32, ct::f16>; Q8_0:
// int8_group<32, ct::f16> — the file's halves as the scales —; Q6_K: int6_group<16> and int8_group<16>; the k-quant mixes Q4_K_M and Q5_K_M:
// int8_group_min<16>, and per tensor as the exporter prints them; Q4_0 with its Q6_K head, per tensor) also run that way: weight-only (the dense model's logits
// to float rounding) and with int8 activations (llama.cpp's block-times-Q8 arithmetic; "vs dense
// logits" is the measured difference).
// Pass: float files (F32, F16, BF16): every position agrees or is a near-tie, ctformer's logit of
// llama.cpp's token within tie(format) of its top logit (the logits are ~20 here): F32 1e-3 (the
// order of float sums), F16 1e-2 and BF16 0.1 (llama.cpp rounds the activations to the weights'
// type before its dot products: 2^-11 and 2^-8 relative); block formats: forced agreement >= 95%
// for #60's files (Q8_0, Q4_0, Q4_K_M; >= 93% for Q5_K_M and Q6_K)
// (llama.cpp multiplies them with activations quantized to Q8_0/Q8_K blocks, ctformer here with
// float activations: the difference is llama.cpp's rounding).
// tools/gguf_write.py's files (agree_ct_*): its Q4_K_M file holds the bytes of llama.cpp's own
// (write_agreement.py checks), so llama.cpp's runs on the two must be equal, every token; its runs
// on the F32 file of the same values dequantized are reported beside them (where llama.cpp's Q8_K
// rounding of the activations first moves a token), and ctformer's rows for both files pass as the
// others do (Q4_K_M: >= 95%; the F32 file: near-ties only).
// Usage: gguf_agreement DIR LLAMA_CPP.txt [PROMPTS]   (the first few prompts of each file only;
// built with CTFORMER_AGREE_POSITIONS=n, the first n of llama.cpp's 64 tokens only: sanitizer
// builds, where a run takes ~50x as long)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <ctformer/ctformer.hpp>
#include <ctformer/io/file.hpp>
#include <ctformer/io/gguf_load.hpp>
#include <ctformer/io/state_dict.hpp>

namespace ct = ctformer;

using Model = ct::Llama<512, 128, 2, ct::d_model<256>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<768>, ct::norm_eps<1, 100000>>;
constexpr ct::token eos = 2;
#ifndef CTFORMER_AGREE_POSITIONS
#define CTFORMER_AGREE_POSITIONS 64
#endif
constexpr std::size_t positions = CTFORMER_AGREE_POSITIONS;  // llama.cpp's tokens compared per run
static_assert(positions >= 1 && positions <= 64);
constexpr std::size_t max_len = 8 + positions + 1;  // (a prompt of up to 8 tokens)

static Model::Params params, exported;
// Llama.cpp's Q4_0 file also into ctformer's int4 weights (as stored), weight-only and with int8 activations
using Int4 = ct::Llama<512, 128, 2, ct::d_model<256>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<768>, ct::norm_eps<1, 100000>,
                       ct::weights<ct::int4_group<32, ct::f16>>>;
using Int4A8 = ct::Llama<512, 128, 2, ct::d_model<256>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<768>, ct::norm_eps<1, 100000>,
                         ct::weights<ct::int4_group<32, ct::f16>, ct::int8_activations>>;
static Int4::Params int4;
static Int4A8::Params int4_a8;
// ... and its Q8_0 and Q6_K files into int8_group<32, ct::f16> and int8_group<16> weights (as stored)
template <class... W> using Agree = ct::Llama<512, 128, 2, ct::d_model<256>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<768>,
                                              ct::norm_eps<1, 100000>, ct::weights<W...>>;
using Int8G32 = Agree<ct::int8_group<32, ct::f16>>;
using Int8G32A8 = Agree<ct::int8_group<32, ct::f16>, ct::int8_activations>;
using Int8G16 = Agree<ct::int8_group<16>>;
using Int8G16A8 = Agree<ct::int8_group<16>, ct::int8_activations>;
static Int8G32::Params int8g32;
static Int8G32A8::Params int8g32_a8;
static Int8G16::Params int8g16;
static Int8G16A8::Params int8g16_a8;
using Int6 = Agree<ct::int6_group<16>>;
using Int6A8 = Agree<ct::int6_group<16>, ct::int8_activations>;
static Int6::Params int6;
static Int6A8::Params int6_a8;
// ... and the files that mix formats (Q4_K_M: Q4_K and Q6_K) into int8_group_min<16>: every block format as stored
using Int8GM = Agree<ct::int8_group_min<16>>;
using Int8GMA8 = Agree<ct::int8_group_min<16>, ct::int8_activations>;
static Int8GM::Params int8gm;
static Int8GMA8::Params int8gm_a8;
// ... and each matrix in its own format, as tools/export.py and gguf_info print them for the k-quant
// mixes — their own two levels, ct::kscale (Q4_K in int4_group_min<32>, Q5_K in int6_group_min<32>,
// v and down — Q6_K in some layers — in int6_group_min<16>, the Q6_K head in int6_group<16>) — and
// for llama.cpp's Q4_0 file (its Q6_K head)
using K = ct::kscale;
template <class F, class... A> using KMix = Agree<F, A..., ct::v_weights<ct::int6_group_min<16, K>>, ct::down_weights<ct::int6_group_min<16, K>>,
                                                  ct::head_weights<ct::int6_group<16, K>>>;
using PerTensor = KMix<ct::int4_group_min<32, K>>;
using PerTensorA8 = KMix<ct::int4_group_min<32, K>, ct::int8_activations>;
using PerTensor5 = KMix<ct::int6_group_min<32, K>>;
using PerTensor5A8 = KMix<ct::int6_group_min<32, K>, ct::int8_activations>;
static PerTensor5::Params per_tensor5;
static PerTensor5A8::Params per_tensor5_a8;
using Q40Mix = Agree<ct::int4_group<32, ct::f16>, ct::head_weights<ct::int6_group<16, K>>>;
using Q40MixA8 = Agree<ct::int4_group<32, ct::f16>, ct::int8_activations, ct::head_weights<ct::int6_group<16, K>>>;
static PerTensor::Params per_tensor;
static PerTensorA8::Params per_tensor_a8;
static Q40Mix::Params q40_mix;
static Q40MixA8::Params q40_mix_a8;
template <class M> struct rig {
    static inline typename M::template KVCache<1, 128> cache;
    static inline typename M::template GenerateWorkspace<4> gws;
    static inline typename M::template Workspace<1, max_len> fws;
    static inline ct::Tensor<float, 1, max_len, 512> logits;
};
static ct::Tensor<ct::token, 1, max_len> seq;
static ct::Tensor<float, 1, max_len, 512> dense_logits;  // the dense model's, for the quantized variants' difference
static ct::gguf::file<32, 64> gguf_index;
static ct::mapped_file mapped;

struct tally {
    std::size_t runs = 0, equal_runs = 0, positions = 0, forced_equal = 0;
    double logit_diff = -1;  // quantized variants: max |logit - the dense model's| over the forced positions (-1: dense)
    double worst_gap = 0;  // the largest logit gap (ctformer's top minus llama.cpp's token) where they differ
};

// tools/export.py's safetensors of the same file (where run.sh wrote one): loads with its
// configuration required and holds the values ct::load_gguf read, bit for bit.
struct status_or_skip {
    bool checked = false, same = false;
};
static status_or_skip same_as_exported(const std::string& gguf) {
    static ct::mapped_file f;
    static ct::safetensors::file<64> st;
    const std::string path = gguf.substr(0, gguf.size() - 5) + ".safetensors";
    if (!f.open(path.c_str()).ok()) return {};
    ct::safetensors::load_options opt;
    opt.require_config = true;
    ct::status s = st.parse(f.bytes());
    if (s) s = ct::load_state_dict(exported, st, {}, opt);
    if (!s) return std::fprintf(stderr, "%s: %s %s\n", path.c_str(), ct::to_string(s.code), s.tensor_name().data()), status_or_skip{true, false};
    std::size_t off = 0, n = 0;
    ct::for_each_tensor(exported, [&](std::string_view name, const auto& a) {
        ct::for_each_tensor(params, [&](std::string_view name2, const auto& b) {
            if (name != name2) return;
            for (std::size_t i = 0; i < a.size; ++i, ++n) off += a.get(i) != b.get(i);
        });
    });
    std::printf("%s (tools/export.py): %zu of %zu values differ from ct::load_gguf's\n", path.c_str(), off, n);
    return {true, off == 0 && n == ct::parameter_count<Model::Params>()};
}

static std::vector<ct::token> ids(const std::string& s) {
    std::istringstream in(s);
    std::vector<ct::token> v;
    for (ct::token t; in >> t;) v.push_back(t);
    return v;
}

// One of llama.cpp's runs against model M: free-running greedy tokens, then the argmax at every
// position of llama.cpp's sequence (its stop included when it stopped early).
template <class M>
static bool one_run(const typename M::Params& p, tally& t, const std::string& file, const std::string& line,
                    const std::vector<ct::token>& prompt, const std::vector<ct::token>& all) {
    using R = rig<M>;
    if (prompt.empty() || prompt.size() > 8) return std::fprintf(stderr, "%s: a prompt of %zu tokens (1 to 8)\n", file.c_str(), prompt.size()), false;
    // (llama.cpp's first `positions` tokens; its stop counts only where it stopped within them)
    const std::vector<ct::token> want(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), positions)));
    std::vector<ct::token> got;
    R::cache.reset();
    const ct::status st = M::generate(p, R::gws, R::cache, prompt.data(), prompt.size(), positions, ct::sampling{.temperature = 0},
                                      [&](ct::token tok) {
                                          if (tok == eos) return false;
                                          got.push_back(tok);
                                          return true;
                                      });
    if (!st) return std::fprintf(stderr, "generate: %s\n", ct::to_string(st.code)), false;
    ++t.runs;
    t.equal_runs += got == want;
    std::vector<ct::token> full = prompt;
    full.insert(full.end(), want.begin(), want.end());
    const std::size_t n = full.size(), targets = want.size() + (all.size() < positions);
    for (std::size_t i = 0; i < max_len; ++i) seq.storage[i] = i < n ? full[i] : 0;
    if (!M::forward(p, R::fws, seq, R::logits).ok()) return false;
    const bool dense = std::is_same_v<M, Model>;
    if (dense) dense_logits = R::logits;
    for (std::size_t k = 0; k < targets; ++k) {
        const std::size_t at = (prompt.size() - 1 + k) * 512;
        const float* row = R::logits.data() + at;
        std::size_t best = 0;
        for (std::size_t v = 0; v < 512; ++v) {
            if (row[v] > row[best]) best = v;
            if (!dense) t.logit_diff = std::max(t.logit_diff < 0 ? 0.0 : t.logit_diff, static_cast<double>(std::fabs(row[v] - dense_logits.data()[at + v])));
        }
        const ct::token expect = k < want.size() ? want[k] : eos;
        t.forced_equal += static_cast<ct::token>(best) == expect;
        if (static_cast<ct::token>(best) != expect) {  // how close the call was: ctformer's logits of both tokens
            const double gap = double(row[best]) - double(row[expect]);
            t.worst_gap = gap > t.worst_gap ? gap : t.worst_gap;
            std::printf("  %s prompt %s position %zu: ctformer %zu (%.5f), llama.cpp %d (%.5f), gap %.2g\n", file.c_str(),
                        line.substr(file.size() + 1, line.find(' ', file.size() + 1) - file.size() - 1).c_str(), k, best,
                        double(row[best]), int(expect), double(row[expect]), gap);
        }
        ++t.positions;
    }
    return true;
}

int main(int argc, char** argv) {
    if (argc != 3 && argc != 4) return std::fprintf(stderr, "usage: gguf_agreement DIR LLAMA_CPP.txt [PROMPTS]\n"), 2;
    const long prompts = argc == 4 ? std::atol(argv[3]) : 8;
    std::ifstream in(argv[2]);
    std::map<std::string, tally> by_file;
    std::map<std::string, std::map<std::string, std::vector<ct::token>>> llama_runs;  // file -> prompt -> llama.cpp's tokens
    std::vector<std::string> order;
    std::string line, loaded;
    while (std::getline(in, line)) {
        const std::size_t a = line.find(" : "), b = line.find(" : ", a + 3);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string file = line.substr(0, line.find(' '));
        if (std::atol(line.substr(file.size() + 1).c_str()) >= prompts) continue;  // (its prompt index)
        const std::vector<ct::token> prompt = ids(line.substr(a + 3, b - a - 3)), want = ids(line.substr(b + 3));
        llama_runs[file][line.substr(a + 3, b - a - 3)] = want;
        if (file != loaded) {
            ct::status st = mapped.open((std::string(argv[1]) + "/" + file).c_str());
            if (st) st = gguf_index.parse(mapped.bytes());
            if (st) st = ct::load_gguf(params, gguf_index);
            if (!st) return std::fprintf(stderr, "%s: %s %s\n", file.c_str(), ct::to_string(st.code), st.tensor_name().data()), 1;
            loaded = file;
            order.push_back(file);
            if (const status_or_skip e = same_as_exported(std::string(argv[1]) + "/" + file); e.checked && !e.same) return 1;
        }
        if (!one_run<Model>(params, by_file[file], file, line, prompt, want)) return 1;
        // the files ctformer's quantized weights hold as stored: weight-only, and with int8 activations
        auto stored = [&](auto& p, auto& p_a8, const char* label, auto model, auto model_a8) {
            using M = typename decltype(model)::type;
            using MA8 = typename decltype(model_a8)::type;
            const std::string a = file + " " + label, b = a + "_a8";
            if (by_file.count(a) == 0) {
                ct::status s = ct::load_gguf(p, gguf_index);
                if (s) s = ct::load_gguf(p_a8, gguf_index);
                if (!s) return std::fprintf(stderr, "%s: %s %s\n", a.c_str(), ct::to_string(s.code), s.tensor_name().data()), false;
                order.push_back(a), order.push_back(b);
            }
            return one_run<M>(p, by_file[a], file, line, prompt, want) && one_run<MA8>(p_a8, by_file[b], file, line, prompt, want);
        };
        bool ok = true;
        if (file == "agree_q4_0_pure.gguf") ok = stored(int4, int4_a8, "int4", std::type_identity<Int4>{}, std::type_identity<Int4A8>{});
        if (file == "agree_q8_0.gguf")
            ok = stored(int8g32, int8g32_a8, "int8_group<32, f16>", std::type_identity<Int8G32>{}, std::type_identity<Int8G32A8>{});
        if (file == "agree_q6_k.gguf")
            ok = stored(int8g16, int8g16_a8, "int8_group<16>", std::type_identity<Int8G16>{}, std::type_identity<Int8G16A8>{}) &&
                 stored(int6, int6_a8, "int6_group<16>", std::type_identity<Int6>{}, std::type_identity<Int6A8>{});
        if (file == "agree_q4_k_m.gguf" || file == "agree_q5_k_m.gguf")
            ok = stored(int8gm, int8gm_a8, "int8_group_min<16>", std::type_identity<Int8GM>{}, std::type_identity<Int8GMA8>{});
        if (ok && (file == "agree_q4_k_m.gguf" || file == "agree_ct_q4_k_m.gguf"))
            ok = stored(per_tensor, per_tensor_a8, "per-tensor", std::type_identity<PerTensor>{}, std::type_identity<PerTensorA8>{});
        if (ok && file == "agree_q5_k_m.gguf")
            ok = stored(per_tensor5, per_tensor5_a8, "per-tensor", std::type_identity<PerTensor5>{}, std::type_identity<PerTensor5A8>{});
        if (file == "agree_q4_0.gguf")
            ok = stored(q40_mix, q40_mix_a8, "per-tensor", std::type_identity<Q40Mix>{}, std::type_identity<Q40MixA8>{});
        if (!ok) return 1;
    }
    bool pass = !order.empty();
    std::printf("%-42s %14s %20s %12s %14s\n", "file", "equal runs", "forced agreement", "largest gap", "vs dense logits");
    for (const std::string& f : order) {
        const tally& t = by_file[f];
        // (the dequantized Q4_K_M values in F32: 2.5e-3, 1e-4 of its logits of ~25 — measured 0.0017 once)
        const double tie = f == "agree.gguf" ? 1e-3 : f == "agree_ct_q4_k_m_f32.gguf" ? 2.5e-3 : f == "agree_f16.gguf" ? 1e-2
                         : f == "agree_bf16.gguf" ? 0.1 : 0;
        const double forced = double(t.forced_equal) / double(t.positions);
        // (#60's bar, 95 %, for its files: Q8_0, Q4_0, Q4_K_M; the other block formats' rows are reported
        // with a floor of 93 %: on this random model, where a few near-ties decide, ISAs may move a position)
        const bool issue_file = f.rfind("agree_q8_0", 0) == 0 || f.rfind("agree_q4_0", 0) == 0 || f.rfind("agree_q4_k_m", 0) == 0 ||
                                f.rfind("agree_ct_q4_k_m", 0) == 0;
        // (a subset — sanitizer builds: one prompt, 16 positions — checks the paths, not the statistics:
        // 64 positions where four near-ties move 6%; a broken path agrees nowhere; floor 85 %)
        const bool subset = prompts < 8 || positions < 64;
        const double bar = subset ? 0.85 : issue_file ? 0.95 : 0.93;
        const bool ok = tie > 0 ? t.worst_gap <= tie : forced >= bar;
        pass = pass && ok;
        char diff[32] = "-";
        if (t.logit_diff >= 0) std::snprintf(diff, sizeof diff, "%.2g", t.logit_diff);
        std::printf("%-42s %9zu / %zu %12zu / %zu (%.1f%%) %10.2g %14s  %s\n", f.c_str(), t.equal_runs, t.runs, t.forced_equal,
                    t.positions, 100 * forced, t.worst_gap, diff,
                    ok ? "ok" : tie > 0 ? "FAIL (a difference beyond a near-tie)" : subset ? "FAIL (< 85%)" : issue_file ? "FAIL (< 95%)" : "FAIL (< 93%)");
    }
    // llama.cpp on tools/gguf_write.py's Q4_K_M file: against its own quantizer's file (equal) and
    // against the F32 file of the same values (tokens equal until the first difference, reported)
    const auto compare = [&](const char* x, const char* y, bool must_equal) {
        if (!llama_runs.count(x) || !llama_runs.count(y)) return;
        std::size_t runs = 0, equal = 0, tokens = 0, prefix = 0;
        for (const auto& [prompt, a] : llama_runs[x]) {
            const std::vector<ct::token>& b = llama_runs[y][prompt];
            std::size_t k = 0;
            while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
            ++runs, equal += a == b, tokens += a.size(), prefix += k;
        }
        const bool ok = !must_equal || equal == runs;
        pass = pass && ok;
        std::printf("llama.cpp on %s vs on %s: %zu / %zu runs equal, %zu / %zu tokens before the first difference  %s\n", x, y,
                    equal, runs, prefix, tokens, ok ? (must_equal ? "ok" : "(reported)") : "FAIL (must be equal)");
    };
    compare("agree_ct_q4_k_m.gguf", "agree_q4_k_m.gguf", true);
    compare("agree_ct_q4_k_m.gguf", "agree_ct_q4_k_m_f32.gguf", false);
    return pass ? 0 : 1;
}
