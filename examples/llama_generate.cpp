// A Llama-family model as a type: stories15M's shape (dim 288, 6 layers, 6 heads, hidden 768, vocab
// 32000, context 256) and its grouped-query variant (2 key/value heads: a 3x smaller KV cache).
// Loads a Hugging Face LlamaForCausalLM state_dict (safetensors, names as they are) when given one
// — examples/make_llama_weights.py writes one with PyTorch, with PyTorch's greedy tokens to check
// against — else a seeded random init; then generates greedily through the KV cache.
//
//   ./llama_generate                         # both shapes, random weights
//   ./llama_generate stories15M.safetensors  # the weights of make_llama_weights.py (MHA shape)
//   ./llama_generate stories15M_gqa.safetensors --gqa
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <ctformer/ctformer.hpp>

namespace ct = ctformer;

template <std::size_t KV>
using Stories15M = ct::Llama<32000, 256, 6, ct::d_model<288>, ct::heads<6>, ct::kv_heads<KV>, ct::ffn_dim<768>,
                             ct::norm_eps<1, 100000>>;

template <class M> struct Storage {  // static: 60 MB of weights do not belong on a stack
    static inline typename M::Params params;
    static inline typename M::template KVCache<1, 256> cache;
    static inline typename M::template GenerateWorkspace<16> ws;
};

template <std::size_t KV> int run(const char* path) {
    using M = Stories15M<KV>;
    using S = Storage<M>;
    std::printf("stories15M, %zu kv heads: %zu parameters, Params %.1f MB, KV cache (256 positions) %.2f MB\n", KV,
                ct::parameter_count<typename M::Params>(), M::Params::bytes / 1e6,
                M::template KVCache<1, 256>::bytes / 1e6);
    std::vector<ct::token> expected;
    ct::mapped_file file;  // (io/file.hpp: mapped read-only, no heap)
    if (path) {
        static ct::safetensors::file<128> f;
        ct::status st = file.open(path);
        if (st) st = f.parse(file.bytes());
        if (st) st = ct::load_state_dict(S::params, f);
        if (!st) {
            std::fprintf(stderr, "%s: %s %s\n", path, ct::to_string(st.code), std::string(st.tensor_name()).c_str());
            return 1;
        }
        // PyTorch's greedy tokens, if the file has them: "t0,t1,..." in its metadata
        const std::string want(f.metadata("expected_tokens"));
        for (const char* c = want.c_str(); *c;) {
            char* end = nullptr;
            expected.push_back(static_cast<ct::token>(std::strtol(c, &end, 10)));
            c = *end == ',' ? end + 1 : end;
        }
    } else {
        unsigned s = 1;
        ct::for_each_tensor(S::params, [&](std::string_view n, auto& t) {
            const bool gamma = n.ends_with("norm.weight") || n.ends_with("layernorm.weight");
            for (std::size_t i = 0; i < t.size; ++i) {
                s = s * 1664525u + 1013904223u;
                t.set(i, gamma ? 1.0f : (float(s >> 8) / 16777216.0f - 0.5f) * 0.1f);
            }
        });
    }
    const ct::token prompt[4] = {1, 450, 4123, 338};
    std::vector<ct::token> out;
    out.reserve(16);
    const auto t0 = std::chrono::steady_clock::now();
    const ct::status st = M::generate(S::params, S::ws, S::cache, prompt, 4, 16, ct::sampling{.temperature = 0},
                                      [&](ct::token t) {
                                          out.push_back(t);
                                          return true;
                                      });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!st) {
        std::fprintf(stderr, "generate: %s\n", ct::to_string(st.code));
        return 1;
    }
    std::printf("  greedy:");
    for (ct::token t : out) std::printf(" %d", t);
    std::printf("\n  %zu tokens (4 prompt + 16 generated) in %.2f ms\n", out.size() + 4, s * 1e3);
    if (!expected.empty()) {
        const bool same = expected == out;
        std::printf("  PyTorch's greedy tokens: %s\n", same ? "identical" : "DIFFERENT");
        return same ? 0 : 1;
    }
    return 0;
}

int main(int argc, char** argv) {
    const char* path = argc > 1 && std::strcmp(argv[1], "--gqa") != 0 ? argv[1] : nullptr;
    const bool gqa = argc > 1 && std::strcmp(argv[argc - 1], "--gqa") == 0;
    if (path) return gqa ? run<2>(path) : run<6>(path);
    return run<6>(nullptr) | run<2>(nullptr);
}
