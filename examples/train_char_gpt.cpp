// Trains a character-level GPT on the Book of Genesis (King James Version, public domain; see
// examples/data/README.md) on one core, saves a checkpoint, loads it back and generates text
// through the KV caches; then evaluates the checkpoint with bf16, int8 and int4 weights. Every
// buffer is static: nothing in the library touches the heap.
//
//   train_char_gpt [--seconds S] [--steps N] [--max-loss X] [--data FILE] [--checkpoint FILE]
//
// --seconds bounds the training time (default 40), --steps the step count; --max-loss makes the
// program fail (exit 1) if the held-out loss ends above X (the test suite's check).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include <ctformer/ctformer.hpp>

#ifndef CTFORMER_EXAMPLE_DATA
#define CTFORMER_EXAMPLE_DATA "examples/data"
#endif

constexpr std::size_t V = 64, Ctx = 64, D = 128, H = 4, F = 512, N = 4, B = 16, T = Ctx;
using Block = ct::DecoderOnlyBlock<ct::d_model<D>, ct::heads<H>, ct::ffn_dim<F>, ct::norm_first<true>,
                                   ct::activation<ct::gelu>>;
using Model = ct::GPT<V, Ctx, N, Block>;
// The trained checkpoint evaluated with quantized weights (ct::weights<Fmt>: inference only)
template <class Fmt>
using QuantModel = ct::GPT<V, Ctx, N, ct::DecoderOnlyBlock<ct::d_model<D>, ct::heads<H>, ct::ffn_dim<F>, ct::norm_first<true>,
                                                        ct::activation<ct::gelu>, ct::weights<Fmt>>>;

// The multi-megabyte roles start on 2 MB boundaries so that, advised before their first write
// (main), the kernel can back them with huge pages (ct::advise_huge_pages; docs/api.md).
using Opt = ct::AdamW<Model::Params>;
using Ws = Model::TrainWorkspace<B, T>;
using Acts = Model::Activations<B, T>;
alignas(ct::huge_page_alignment<Model::Params>) static Model::Params params, loaded;
alignas(ct::huge_page_alignment<Model::Grads>) static Model::Grads grads;
alignas(ct::huge_page_alignment<Opt>) static Opt opt, loaded_opt;
alignas(ct::huge_page_alignment<Ws>) static Ws ws;
alignas(ct::huge_page_alignment<Acts>) static Acts acts;
static ct::Tensor<ct::token, B, T> tokens, targets;
static Model::KVCache<1, Ctx> cache;
static Model::GenerateWorkspace<16> gen_ws;
static ct::safetensors::file<512> ckpt_index;
constexpr std::size_t checkpoint_capacity = 3 * sizeof(Model::Params) + (1 << 16);
static std::byte checkpoint[checkpoint_capacity];

struct rng {  // xorshift64*, for initialization and batch offsets
    std::uint64_t s;
    std::uint64_t next() {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        return s * 0x2545F4914F6CDD1Dull;
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
    double normal() { return std::sqrt(-2 * std::log(uniform() + 1e-300)) * std::cos(6.283185307179586 * uniform()); }
};

// GPT-2's initialization: weights N(0, 0.02), biases 0, norm weights 1.
static void init(Model::Params& p, rng& r) {
    ct::for_each_tensor(p, [&](std::string_view name, auto& t) {
        const bool norm = name.find("norm") != std::string_view::npos;
        const bool bias = name.ends_with("bias");
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, norm && !bias ? 1.0f : bias ? 0.0f : 0.02f * float(r.normal()));
    });
}

int main(int argc, char** argv) {
    double seconds = 40, max_loss = 0;
    std::size_t max_steps = 1000000;
    std::string data = std::string(CTFORMER_EXAMPLE_DATA) + "/genesis.txt", ckpt_path = "char_gpt.safetensors";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--seconds") seconds = std::atof(v.c_str());
        else if (k == "--steps") max_steps = std::strtoull(v.c_str(), nullptr, 10);
        else if (k == "--max-loss") max_loss = std::atof(v.c_str());
        else if (k == "--data") data = v;
        else if (k == "--checkpoint") ckpt_path = v;
        else return std::fprintf(stderr, "unknown option %s\n", k.c_str()), 2;
    }
    // a hint, before the first write: where the OS has no transparent huge pages, 4 KB pages serve
    std::size_t huge = 0;
    for (const ct::huge_page_advice& a : {ct::advise_huge_pages(params), ct::advise_huge_pages(grads), ct::advise_huge_pages(opt),
                                         ct::advise_huge_pages(ws), ct::advise_huge_pages(acts)})
        huge += a.bytes;
    std::ifstream in(data, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.size() < 10 * T) return std::fprintf(stderr, "cannot read %s\n", data.c_str()), 2;
    // the vocabulary: every byte that occurs, in order
    bool seen[256] = {};
    for (unsigned char c : text) seen[c] = true;
    char chars[V];
    ct::token id_of[256] = {};
    std::size_t vocab = 0;
    for (int c = 0; c < 256; ++c)
        if (seen[c]) {
            if (vocab == V) return std::fprintf(stderr, "more than %zu distinct characters\n", V), 2;
            chars[vocab] = static_cast<char>(c), id_of[c] = static_cast<ct::token>(vocab++);
        }
    const std::size_t split = text.size() * 9 / 10;  // last 10%: held out
    std::printf("ctformer char GPT: %zu layers, d_model %zu, %zu heads, context %zu, vocab %zu (%zu used); "
                "%zu parameters\n", N, D, H, Ctx, V, vocab, ct::parameter_count<Model::Params>());
    std::printf("data: %s, %zu characters (%zu for training)\n", data.c_str(), text.size(), split);
    std::printf("memory (static): params %zu KB, grads %zu KB, AdamW state %zu KB, workspace %zu KB, activations %zu KB"
                " (%zu MB of it advised 2 MB pages)\n",
                sizeof(params) >> 10, sizeof(grads) >> 10, (sizeof(opt) >> 10), Model::TrainWorkspace<B, T>::bytes >> 10,
                Model::Activations<B, T>::bytes >> 10, huge >> 20);

    rng r{0x5eed1234abcdull};
    init(params, r);
    auto batch = [&](std::size_t lo, std::size_t hi) {
        for (std::size_t b = 0; b < B; ++b) {
            const std::size_t o = lo + r.next() % (hi - lo - T - 1);
            for (std::size_t t = 0; t < T; ++t) {
                tokens(b, t) = id_of[static_cast<unsigned char>(text[o + t])];
                targets(b, t) = id_of[static_cast<unsigned char>(text[o + t + 1])];
            }
        }
    };
    auto eval = [&](const Model::Params& p) {
        double sum = 0;
        for (int k = 0; k < 8; ++k) {
            batch(split, text.size());
            float loss;
            if (!Model::forward_train(p, ws, acts, tokens, targets, loss)) return double(NAN);
            sum += loss;
        }
        return sum / 8;
    };

    opt.options.weight_decay = 0.01;
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    std::size_t total = max_steps;  // the schedule's length, fixed once the step time is known
    double smooth = 0, elapsed = 0, warm = 0;
    std::size_t step = 0;
    for (; step < total; ++step) {
        batch(0, split);
        ct::zero_grad(grads);
        float loss;
        if (ct::status st = Model::forward_train(params, ws, acts, tokens, targets, loss); !st)
            return std::printf("forward_train: %s\n", ct::to_string(st.code)), 1;
        if (ct::status st = Model::backward(params, acts, ws, grads); !st)
            return std::printf("backward: %s\n", ct::to_string(st.code)), 1;
        if (const double norm = ct::clip_grad_norm(grads, 1.0); !std::isfinite(norm))
            return std::printf("step %zu: gradient norm %g, stopping\n", step, norm), 1;
        if (ct::status st = opt.step(params, grads, ct::cosine_warmup{2e-3, 30, double(total), 2e-4}); !st)
            return std::printf("optimizer: %s (%s)\n", ct::to_string(st.code), st.tensor.data()), 1;
        smooth = step == 0 ? loss : 0.9 * smooth + 0.1 * loss;
        elapsed = std::chrono::duration<double>(clock::now() - t0).count();
        if (step == 4) warm = elapsed;
        if (step == 14 && total == max_steps) {  // budget: as many steps as fit in `seconds`
            const double per_step = (elapsed - warm) / 10;
            total = std::min<std::size_t>(max_steps, static_cast<std::size_t>((seconds - warm) / per_step) + 5);
            total = std::max<std::size_t>(total, 16);
        }
        if (step % 50 == 0 || step + 1 == total)
            std::printf("step %5zu/%zu  loss %.3f  %7.0f tokens/s  %5.1f s\n", step, total, smooth,
                        double((step + 1) * B * T) / elapsed, elapsed);
    }
    const double val = eval(params);
    std::printf("trained %zu steps (%zu tokens) in %.1f s: %.0f tokens/s; held-out loss %.3f (uniform: %.3f)\n", step,
                step * B * T, elapsed, double(step * B * T) / elapsed, val, std::log(double(vocab)));

    // checkpoint: params + AdamW state, to a file, then back into fresh objects
    const ct::save_result saved = ct::save_checkpoint(std::span<std::byte>(checkpoint), params, opt);
    if (!saved.st) return std::printf("save_checkpoint: %s\n", ct::to_string(saved.st.code)), 1;
    std::ofstream(ckpt_path, std::ios::binary).write(reinterpret_cast<const char*>(checkpoint), std::streamsize(saved.bytes));
    std::vector<char> file_bytes;
    {
        std::ifstream f(ckpt_path, std::ios::binary);
        file_bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(file_bytes.data()), file_bytes.size());
    if (ct::status st = ckpt_index.parse(bytes); !st) return std::printf("parse: %s\n", ct::to_string(st.code)), 1;
    if (ct::status st = ct::load_checkpoint(ckpt_index, loaded, loaded_opt); !st)
        return std::printf("load_checkpoint: %s\n", ct::to_string(st.code)), 1;
    std::printf("checkpoint: %s, %zu KB, step %zu; reloaded\n", ckpt_path.c_str(), saved.bytes >> 10, loaded_opt.steps());

    // the checkpoint's params with fp32 / bf16 / int8 / int4 weights (quantized at load): held-out
    // loss on the same 8 batches, and the weights' bytes
    auto held_out = [&]<class M>(std::type_identity<M>, const char* name) {
        alignas(ct::huge_page_alignment<typename M::Params>) static typename M::Params q;
        static typename M::template Workspace<B, T> qws;
        static ct::Tensor<float, B, T, V> logits;
        if (ct::status st = ct::load_state_dict(q, ckpt_index, "model."); !st)
            return std::printf("load %s: %s\n", name, ct::to_string(st.code)), false;
        const std::uint64_t keep = r.s;
        r.s = 0x0e7a1u;  // the same batches for every format
        double sum = 0;
        for (int k = 0; k < 8; ++k) {
            batch(split, text.size());
            float loss;
            if (!M::evaluate(q, qws, tokens, targets, logits, loss)) return false;
            sum += loss;
        }
        r.s = keep;
        std::printf("  %-5s weights: params %5zu KB, held-out loss %.4f\n", name, sizeof(q) >> 10, sum / 8);
        return true;
    };
    std::printf("held-out loss of the checkpoint by weight format:\n");
    if (!held_out(std::type_identity<Model>{}, "fp32") || !held_out(std::type_identity<QuantModel<ct::bf16>>{}, "bf16") ||
        !held_out(std::type_identity<QuantModel<ct::int8_per_channel>>{}, "int8") ||
        !held_out(std::type_identity<QuantModel<ct::int4_group<32>>>{}, "int4"))
        return 1;

    // generation from the reloaded params through the KV caches; when the context is full, the
    // last half of it becomes the next prompt (a fresh cache)
    const char* prompt_text = "And God said";
    ct::token window[Ctx];
    std::size_t n = 0;
    for (const char* c = prompt_text; *c; ++c) window[n++] = id_of[static_cast<unsigned char>(*c)];
    std::printf("\n%s", prompt_text);
    const auto g0 = clock::now();
    std::size_t generated = 0;
    ct::status st;
    for (std::uint64_t round = 0; generated < 400 && st; ++round) {
        const ct::sampling s{.temperature = 0.8f, .top_k = 20, .top_p = 0.95f, .seed = 2026 + round, .stop = -1};
        cache.reset();
        std::size_t len = n;
        st = Model::generate(loaded, gen_ws, cache, window, n, Ctx - n, s, [&](ct::token t) {
            std::putchar(chars[t]);
            window[len++] = t;
            return ++generated < 400;
        });
        if (st.code == ct::errc::cache_full) st = {};  // the window is full: slide it
        std::memmove(window, window + len - Ctx / 2, Ctx / 2 * sizeof(ct::token));
        n = Ctx / 2;
    }
    const double gen_s = std::chrono::duration<double>(clock::now() - g0).count();
    std::printf("\n\ngenerated %zu characters in %.1f ms (%.0f tokens/s, batch 1, KV caches): %s\n", generated,
                gen_s * 1e3, double(generated) / gen_s, st ? "ok" : ct::to_string(st.code));
    if (max_loss > 0 && !(val <= max_loss)) return std::printf("held-out loss %.3f above %.3f\n", val, max_loss), 1;
    return st ? 0 : 1;
}
