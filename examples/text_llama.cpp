// Text in, text out: trains a small Llama-family model (RoPE, grouped-query attention, SwiGLU,
// RMSNorm) from scratch on this repository's README and docs, tokenized by a SentencePiece BPE
// vocabulary of 1024 pieces (examples/data/docs_bpe.model, exported at build time to tables read
// in place), then generates text from a prompt, streamed as it is decoded, with a repetition
// penalty and a stop string. Every buffer is static.
//
//   text_llama [--seconds S] [--steps N] [--max-loss X] [--prompt TEXT] [--tokens N]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ctformer/ctformer.hpp>
#include <ctformer/io/file.hpp>
#include <ctformer/text/generate.hpp>
#include <ctformer/text/load.hpp>

#ifndef CTFORMER_EXAMPLE_TOKENIZER
#define CTFORMER_EXAMPLE_TOKENIZER "docs_bpe.safetensors"
#endif
#ifndef CTFORMER_EXAMPLE_TEXT
#define CTFORMER_EXAMPLE_TEXT "."
#endif

namespace ct = ctformer;

constexpr std::size_t V = 1024, Ctx = 128, B = 8, T = Ctx;
using Model = ct::Llama<V, Ctx, 4, ct::d_model<128>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<352>,
                       ct::tied_embeddings<true>>;
using Opt = ct::AdamW<Model::Params>;
static Model::Params params;
static Model::Grads grads;
static Opt opt;
static Model::TrainWorkspace<B, T> ws;
static Model::Activations<B, T> acts;
static ct::Tensor<ct::token, B, T> tokens, targets;
static Model::KVCache<1, Ctx> cache;
static ct::TextWorkspace<Model, 1024> tws;
static ct::tokenizer tok;
static ct::tokenizer::Workspace<1 << 20> encode_ws;  // the training text, normalized
static ct::token corpus[1 << 20];

struct rng {  // xorshift64*
    std::uint64_t s;
    std::uint64_t next() {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        return s * 0x2545F4914F6CDD1Dull;
    }
    double normal() {
        const double u = (double(next() >> 11) + 0.5) * 0x1p-53, v = double(next() >> 11) * 0x1p-53;
        return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
    }
};

int main(int argc, char** argv) {
    double seconds = 30, max_loss = 0;
    std::size_t max_steps = 1000000, n_new = 80;
    std::string prompt = "The tokenizer";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--seconds") seconds = std::atof(v.c_str());
        else if (k == "--steps") max_steps = std::strtoull(v.c_str(), nullptr, 10);
        else if (k == "--max-loss") max_loss = std::atof(v.c_str());
        else if (k == "--prompt") prompt = v;
        else if (k == "--tokens") n_new = std::strtoull(v.c_str(), nullptr, 10);
        else return std::fprintf(stderr, "unknown option %s\n", k.c_str()), 2;
    }
    static ct::mapped_file file;
    static ct::safetensors::file<32> index;
    ct::status st = file.open(CTFORMER_EXAMPLE_TOKENIZER);
    if (st) st = index.parse(file.bytes());
    if (st) st = ct::load_tokenizer(index, tok);
    if (st) st = ct::check_tokenizer<Model>(tok);
    if (!st) return std::fprintf(stderr, "tokenizer: %s %s\n", ct::to_string(st.code), st.tensor_name().data()), 1;

    std::string text;  // the repository's README and docs
    for (const char* name : {"README.md", "docs/design.md", "docs/api.md", "docs/models.md", "docs/training.md",
                             "docs/threads.md", "docs/embedded.md", "docs/robustness.md", "docs/weights.md",
                             "docs/quantization.md", "docs/masks.md", "docs/text.md"}) {
        std::ifstream in(std::string(CTFORMER_EXAMPLE_TEXT) + "/" + name, std::ios::binary);
        text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::size_t n = 0;
    if (!(st = tok.encode(text, corpus, n, encode_ws))) return std::fprintf(stderr, "encode: %s\n", ct::to_string(st.code)), 1;
    const std::size_t split = n * 9 / 10;
    std::printf("text Llama: %zu layers, d_model 128, 4 heads (2 kv), vocab %zu, context %zu: %zu parameters\n"
                "data: %zu bytes of README and docs -> %zu tokens (%.2f bytes/token); static memory: params %zu KB, "
                "tokenizer tables read in place (%zu bytes of file)\n",
                Model::layers, V, Ctx, ct::parameter_count<Model::Params>(), text.size(), n, double(text.size()) / double(n),
                sizeof(params) >> 10, file.bytes().size());

    rng r{0x5eed58ull};
    ct::for_each_tensor(params, [&](std::string_view name, auto& t) {
        const bool norm = name.find("norm") != std::string_view::npos;
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, norm ? 1.0f : 0.02f * float(r.normal()));
    });
    auto batch = [&](std::size_t lo, std::size_t hi) {
        for (std::size_t b = 0; b < B; ++b) {
            const std::size_t o = lo + r.next() % (hi - lo - T - 1);
            for (std::size_t t = 0; t < T; ++t) tokens(b, t) = corpus[o + t], targets(b, t) = corpus[o + t + 1];
        }
    };
    opt.options.weight_decay = 0.01;
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    std::size_t total = max_steps, step = 0;
    double smooth = 0, elapsed = 0;
    for (; step < total; ++step) {
        batch(0, split);
        ct::zero_grad(grads);
        float loss;
        if (!(st = Model::forward_train(params, ws, acts, tokens, targets, loss))) return 1;
        if (!(st = Model::backward(params, acts, ws, grads))) return 1;
        ct::clip_grad_norm(grads, 1.0);
        if (!(st = opt.step(params, grads, ct::cosine_warmup{3e-3, 20, double(total), 3e-4}))) return 1;
        smooth = step == 0 ? loss : 0.9 * smooth + 0.1 * loss;
        elapsed = std::chrono::duration<double>(clock::now() - t0).count();
        if (step == 9 && total == max_steps)  // as many steps as fit in `seconds`
            total = std::max<std::size_t>(16, std::min<std::size_t>(max_steps, std::size_t(seconds / (elapsed / 10))));
        if (step % 50 == 0 || step + 1 == total)
            std::printf("step %4zu/%zu  loss %.3f  %6.0f tokens/s  %5.1f s\n", step, total, smooth,
                        double((step + 1) * B * T) / elapsed, elapsed);
    }
    double held = 0;
    for (int k = 0; k < 8; ++k) {
        batch(split, n);
        float loss;
        if (!Model::forward_train(params, ws, acts, tokens, targets, loss)) return 1;
        held += loss / 8;
    }
    std::printf("held-out loss %.3f (uniform: %.3f)\n\n%s", held, std::log(double(V)), prompt.c_str());
    const std::string_view stops[] = {"\n\n"};
    st = ct::generate_text(params, tws, cache, tok, prompt,
                           {.max_new = n_new,
                            .sample = {.temperature = 0.7f, .top_k = 40, .min_p = 0.05f, .repetition_penalty = 1.15f, .seed = 5},
                            .stop = stops},
                           [](std::string_view s) {
                               std::fwrite(s.data(), 1, s.size(), stdout);
                               std::fflush(stdout);
                               return true;
                           });
    std::printf("\n");
    if (!st) return std::fprintf(stderr, "generate: %s\n", ct::to_string(st.code)), 1;
    if (max_loss > 0 && !(held <= max_loss)) return std::fprintf(stderr, "held-out loss %.3f above %.3f\n", held, max_loss), 1;
    return 0;
}
