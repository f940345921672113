// Trains the microcontroller's tiny Llama (examples/cortex_m/tiny_llama.hpp: d_model 64, 5 layers,
// GQA, context 256, 512 SentencePiece pieces) from scratch on this repository's README and docs,
// reports the held-out loss of the trained weights as fp32, int8 and int4 (quantized at load, as
// the flash converter quantizes them), and writes the checkpoint (safetensors, Hugging Face names)
// that examples/cortex_m/run.sh converts into flash images. Deterministic: one thread, fixed seeds.
//
//   train_tiny_llama [--steps N] [--out FILE] [--max-loss X] [--text DIR]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "cortex_m/tiny_llama.hpp"
#include "tiny_text.hpp"

#ifndef CTFORMER_EXAMPLE_TOKENIZER
#define CTFORMER_EXAMPLE_TOKENIZER "docs_sp512.safetensors"
#endif
#ifndef CTFORMER_EXAMPLE_TEXT
#define CTFORMER_EXAMPLE_TEXT "."
#endif

namespace ct = ctformer;
using Model = tiny::fp32;
constexpr std::size_t V = tiny::vocab, B = 8, T = tiny::context;
using Opt = ct::AdamW<Model::Params>;
static Model::Params params;
static Model::Grads grads;
static Opt opt;
static Model::TrainWorkspace<B, T> ws;
static Model::Activations<B, T> acts;
static ct::Tensor<ct::token, B, T> tokens, targets;
static ct::tokenizer tok;
static ct::tokenizer::Workspace<1 << 20> encode_ws;
static ct::token corpus[1 << 20];
static std::byte out_buf[sizeof(Model::Params) + (1 << 16)];

// The held-out loss of M's params (fp32, or quantized at load) over corpus [lo, hi).
template <class M> double held_out_loss(const typename M::Params& p, std::size_t lo, std::size_t hi) {
    return tiny_text::held_out_loss<M, B, T>(p, corpus, lo, hi);
}

int main(int argc, char** argv) {
    const tiny_text::options args{argc, argv, {"--steps", "--out", "--max-loss", "--text"}};
    if (const char* k = args.unknown()) return std::fprintf(stderr, "unknown option %s\n", k), 2;
    const std::size_t steps = args.count("--steps", 600);
    const double max_loss = args.number("--max-loss", 0);
    const std::string out = args.get("--out", "tiny_llama.safetensors"), dir = args.get("--text", CTFORMER_EXAMPLE_TEXT);
    ct::status st = tiny_text::open_tokenizer(CTFORMER_EXAMPLE_TOKENIZER, tok);
    if (st) st = ct::check_tokenizer<Model>(tok);
    if (!st) return std::fprintf(stderr, "tokenizer: %s %s\n", ct::to_string(st.code), st.tensor_name().data()), 1;

    std::string text;  // the repository's README and docs
    if (!tiny_text::read_files(dir, tiny_text::docs, text)) return 1;
    std::size_t n = 0;
    if (!(st = tok.encode(text, corpus, n, encode_ws))) return std::fprintf(stderr, "encode: %s\n", ct::to_string(st.code)), 1;
    const std::size_t split = n * 9 / 10;  // the last 10%: held out
    std::printf("tiny Llama: %zu layers, d_model 64, 4 heads (2 kv), ffn 192, vocab %zu, context %zu: %zu parameters\n"
                "data: %zu bytes of README and docs -> %zu tokens (%.2f bytes/token), %zu held out\n",
                Model::layers, V, T, ct::parameter_count<Model::Params>(), text.size(), n, double(text.size()) / double(n),
                n - split);

    tiny_text::rng r{0x71e7ull};
    tiny_text::init_normal(params, r);
    opt.options.weight_decay = 0.1;
    const auto t0 = std::chrono::steady_clock::now();
    double smooth = 0;
    for (std::size_t step = 0; step < steps; ++step) {
        tiny_text::sample_batch(r, corpus, 0, split, tokens, targets);
        ct::zero_grad(grads);
        float loss;
        if (!(st = Model::forward_train(params, ws, acts, tokens, targets, loss))) break;
        if (!(st = Model::backward(params, acts, ws, grads))) break;
        ct::clip_grad_norm(grads, 1.0);
        if (!(st = opt.step(params, grads, ct::cosine_warmup{4e-3, 50, double(steps), 4e-4}))) break;
        smooth = step == 0 ? loss : 0.95 * smooth + 0.05 * loss;
        if (step % 100 == 0 || step + 1 == steps)
            std::printf("step %5zu/%zu  loss %.3f  %.1f s\n", step, steps, smooth,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (!st) return std::fprintf(stderr, "training: %s\n", ct::to_string(st.code)), 1;

    const ct::save_result saved = ct::save_state_dict(params, out_buf);
    if (!saved.st) return std::fprintf(stderr, "save: %s\n", ct::to_string(saved.st.code)), 1;
    std::ofstream(out, std::ios::binary).write(reinterpret_cast<const char*>(out_buf), std::streamsize(saved.bytes));
    std::printf("wrote %s (%zu bytes)\n", out.c_str(), saved.bytes);

    // The checkpoint's weights as the boards hold them: quantized at load from the saved file.
    static ct::safetensors::file<128> saved_index;
    if (!(st = saved_index.parse(std::span<const std::byte>(out_buf, saved.bytes))))
        return std::fprintf(stderr, "parse: %s\n", ct::to_string(st.code)), 1;
    static tiny::int8::Params q8;
    static tiny::int4::Params q4;
    if (!(st = ct::load_state_dict(q8, saved_index)) || !(st = ct::load_state_dict(q4, saved_index)))
        return std::fprintf(stderr, "load: %s %s\n", ct::to_string(st.code), st.tensor_name().data()), 1;
    const double f = held_out_loss<Model>(params, split, n), l8 = held_out_loss<tiny::int8>(q8, split, n),
                 l4 = held_out_loss<tiny::int4>(q4, split, n);
    std::printf("held-out loss (uniform %.3f): fp32 %.4f (%zu KB), int8 %.4f (%+.2f%%, %zu KB), int4 %.4f (%+.2f%%, %zu KB)\n",
                std::log(double(V)), f, sizeof(params) >> 10, l8, 100 * (l8 / f - 1), sizeof(q8) >> 10, l4, 100 * (l4 / f - 1),
                sizeof(q4) >> 10);
    if (max_loss > 0 && !(f <= max_loss)) return std::fprintf(stderr, "held-out loss %.3f above %.3f\n", f, max_loss), 1;
    return 0;
}
