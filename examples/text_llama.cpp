// Text in, text out: trains a small Llama-family model (RoPE, grouped-query attention, SwiGLU,
// RMSNorm) from scratch on this repository's README and docs, tokenized by a SentencePiece BPE
// vocabulary of 1024 pieces (examples/data/docs_bpe.model, exported at build time to tables read
// in place), then generates text from a prompt, streamed as it is decoded, with a repetition
// penalty and a stop string. Every buffer is static.
//
//   text_llama [--seconds S] [--steps N] [--max-loss X] [--prompt TEXT] [--tokens N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include <ctformer/text/generate.hpp>

#include "tiny_text.hpp"

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

int main(int argc, char** argv) {
    const tiny_text::options args{argc, argv, {"--seconds", "--steps", "--max-loss", "--prompt", "--tokens"}};
    if (const char* k = args.unknown()) return std::fprintf(stderr, "unknown option %s\n", k), 2;
    const double seconds = args.number("--seconds", 30), max_loss = args.number("--max-loss", 0);
    const std::size_t max_steps = args.count("--steps", 1000000), n_new = args.count("--tokens", 80);
    const std::string prompt = args.get("--prompt", "The tokenizer");
    std::size_t tokenizer_bytes = 0;
    ct::status st = tiny_text::open_tokenizer(CTFORMER_EXAMPLE_TOKENIZER, tok, &tokenizer_bytes);
    if (st) st = ct::check_tokenizer<Model>(tok);
    if (!st) return std::fprintf(stderr, "tokenizer: %s %s\n", ct::to_string(st.code), st.tensor_name().data()), 1;

    std::string text;  // the repository's README and docs
    if (!tiny_text::read_files(CTFORMER_EXAMPLE_TEXT, tiny_text::docs, text)) return 1;
    std::size_t n = 0;
    if (!(st = tok.encode(text, corpus, n, encode_ws))) return std::fprintf(stderr, "encode: %s\n", ct::to_string(st.code)), 1;
    const std::size_t split = n * 9 / 10;
    std::printf("text Llama: %zu layers, d_model 128, 4 heads (2 kv), vocab %zu, context %zu: %zu parameters\n"
                "data: %zu bytes of README and docs -> %zu tokens (%.2f bytes/token); static memory: params %zu KB, "
                "tokenizer tables read in place (%zu bytes of file)\n",
                Model::layers, V, Ctx, ct::parameter_count<Model::Params>(), text.size(), n, double(text.size()) / double(n),
                sizeof(params) >> 10, tokenizer_bytes);

    tiny_text::rng r{0x5eed58ull};
    tiny_text::init_normal(params, r);
    auto batch = [&](std::size_t lo, std::size_t hi) { tiny_text::sample_batch(r, corpus, lo, hi, tokens, targets); };
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
