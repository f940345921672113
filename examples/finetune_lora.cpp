// Fine-tunes the repository's trained tiny Llama (examples/data/tiny_llama.safetensors: trained by
// train_tiny_llama on the README and docs) on a new text — this library's module headers, C++ —
// with LoRA adapters over its int4 weights (quantized at load, frozen): only the adapters, their
// gradients and AdamW's state are trained. Prints the held-out loss on the new text before and
// after, the text the model writes from a prompt before and after, and the RAM of each role; then
// writes the adapters as PEFT does (adapter_model.safetensors, adapter_config.json).
//
//   finetune_lora [--steps N] [--out DIR] [--max-loss X] [--text DIR]
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
#ifndef CTFORMER_EXAMPLE_CHECKPOINT
#define CTFORMER_EXAMPLE_CHECKPOINT "tiny_llama.safetensors"
#endif

namespace ct = ctformer;
// The tiny Llama over int4 weights with rank-8 adapters (α 16) on every projection.
using Model = tiny::tiny_llama<ct::weights<ct::int4_group<32>>, ct::lora<8, 16, ct::lora_all>>;
constexpr std::size_t B = 8, T = 128;
static Model::Params base;
static Model::Adapters adapters, grads;
static ct::AdamW<Model::Adapters> opt;
static Model::TrainWorkspace<B, T> ws;
static Model::Activations<B, T> acts;
static ct::Tensor<ct::token, B, T> tokens, targets;
static ct::tokenizer tok;
static ct::tokenizer::Workspace<1 << 18> encode_ws;
static ct::token corpus[1 << 18];
static std::byte out_buf[1 << 20];

// The held-out loss on the new text: the base alone or with the adapters.
template <class PA> double held_out(const PA& p, std::size_t lo, std::size_t hi) {
    return tiny_text::held_out_loss<Model, B, T>(p, corpus, lo, hi);
}

// Greedy text from a prompt, printed as it is decoded.
template <class PA> void write_from(const PA& p, const char* label, std::string_view prompt) {
    static Model::GenerateWorkspace<16> gws;
    static Model::KVCache<1, tiny::context> cache;
    cache.reset();
    ct::token ids[64];
    std::size_t n = 0;
    if (!tok.encode(prompt, ids, n, encode_ws)) return;
    ct::text_decoder dec(tok);
    const auto print = [](std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); };
    std::printf("  %s: \"%.*s", label, int(prompt.size()), prompt.data());
    (void)Model::generate(p, gws, cache, ids, n, 48, ct::sampling{.temperature = 0, .repetition_penalty = 1.3f}, [&](ct::token t) {
        return dec.push(t, print).ok();
    });
    dec.finish(print);
    std::printf("\"\n");
}

int main(int argc, char** argv) {
    const tiny_text::options args{argc, argv, {"--steps", "--out", "--max-loss", "--text"}};
    if (const char* k = args.unknown()) return std::fprintf(stderr, "unknown option %s\n", k), 2;
    const std::size_t steps = args.count("--steps", 300);
    const double max_loss = args.number("--max-loss", 0);
    const std::string out = args.get("--out", "."), dir = args.get("--text", CTFORMER_EXAMPLE_TEXT);
    static ct::mapped_file ckpt;
    static ct::safetensors::file<128> index;
    ct::status st = tiny_text::open_tokenizer(CTFORMER_EXAMPLE_TOKENIZER, tok);
    if (st) st = ckpt.open(CTFORMER_EXAMPLE_CHECKPOINT);
    if (st) st = index.parse(ckpt.bytes());
    if (st) st = ct::load_state_dict(base, index);  // fp32 checkpoint -> int4 at load
    if (!st) return std::fprintf(stderr, "load: %s %s\n", ct::to_string(st.code), st.tensor_name().data()), 1;

    std::string text;  // the new text: the module headers (C++), which the model never saw
    if (!tiny_text::read_files(dir + "/include/ctformer/modules",
                               {"attention.hpp", "attention_params.hpp", "attention_sources.hpp", "feed_forward.hpp", "linear.hpp",
                                "norm.hpp", "embedding.hpp", "activations.hpp", "lora.hpp", "cross_entropy.hpp"},
                               text))
        return 1;
    std::size_t n = 0;
    if (!(st = tok.encode(text, corpus, n, encode_ws))) return std::fprintf(stderr, "encode: %s\n", ct::to_string(st.code)), 1;
    const std::size_t split = n * 9 / 10;
    std::printf("tiny Llama over int4 weights (%zu KB, frozen) + LoRA r %zu, alpha %lld on every projection\n"
                "new text: the module headers, %zu bytes -> %zu tokens, %zu held out\n",
                sizeof(base) >> 10, Model::Adapters::lora_rank, Model::Adapters::lora_alpha, text.size(), n, n - split);
    std::printf("RAM to train (batch %zu x %zu): adapters %zu B, their gradients %zu B, AdamW state %zu B, "
                "activations %zu KB, workspace %zu KB\n",
                B, T, Model::Adapters::bytes, Model::Adapters::bytes, 2 * Model::Adapters::bytes, Model::Activations<B, T>::bytes >> 10,
                Model::TrainWorkspace<B, T>::bytes >> 10);
    std::printf("  (full fine-tuning of the fp32 model: params, gradients and AdamW state %zu KB more)\n",
                4 * sizeof(tiny::fp32::Params) >> 10);

    ct::init_adapters(adapters, 7);  // B = 0: the adapted model starts as the base
    const auto tuned = ct::with_adapters(base, adapters);
    const double before = held_out(base, split, n);
    std::printf("held-out loss on the new text: base %.4f\n", before);
    write_from(base, "base   ", "template <class");

    opt.options.lr = 3e-3;
    tiny_text::rng r{0x10a5};
    const auto t0 = std::chrono::steady_clock::now();
    double smooth = 0;
    for (std::size_t step = 0; step < steps; ++step) {
        tiny_text::sample_batch(r, corpus, 0, split, tokens, targets);
        ct::zero_grad(grads);
        float loss;
        ct::dropout_config dc{0.0f, 0.0f, 0.0f, 11, static_cast<std::uint32_t>(step)};
        dc.lora_p = 0.05f;  // PEFT's usual lora_dropout
        if (!(st = Model::forward_train(tuned, ws, acts, tokens, targets, loss, dc))) break;
        if (!(st = Model::backward(tuned, acts, ws, grads))) break;
        if (!(st = opt.step(adapters, grads, ct::cosine_warmup{3e-3, 20, double(steps), 3e-4}))) break;
        smooth = step == 0 ? loss : 0.9 * smooth + 0.1 * loss;
        if (step % 50 == 0 || step + 1 == steps)
            std::printf("step %4zu/%zu  loss %.3f  %.1f s\n", step, steps, smooth,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (!st) return std::fprintf(stderr, "training: %s\n", ct::to_string(st.code)), 1;
    const double after = held_out(tuned, split, n);
    std::printf("held-out loss on the new text: base %.4f -> with adapters %.4f (%+.1f%%); the base is unchanged\n", before,
                after, 100 * (after / before - 1));
    write_from(base, "base   ", "template <class");
    write_from(tuned, "adapted", "template <class");

    // The adapters as PEFT saves them
    const ct::save_result saved = ct::save_adapters(adapters, out_buf);
    char config[512];
    const std::size_t chars = ct::write_adapter_config<Model::Adapters>(config, 0.05f);
    if (!saved.st || chars > sizeof config) return std::fprintf(stderr, "save: %s\n", ct::to_string(saved.st.code)), 1;
    std::ofstream(out + "/adapter_model.safetensors", std::ios::binary)
        .write(reinterpret_cast<const char*>(out_buf), std::streamsize(saved.bytes));
    std::ofstream(out + "/adapter_config.json", std::ios::binary).write(config, std::streamsize(chars));
    std::printf("wrote %s/adapter_model.safetensors (%zu bytes) and adapter_config.json\n", out.c_str(), saved.bytes);
    if (max_loss > 0 && !(after <= max_loss)) return std::fprintf(stderr, "held-out loss %.3f above %.3f\n", after, max_loss), 1;
    return 0;
}
