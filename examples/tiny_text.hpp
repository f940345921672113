// What the text examples (text_llama, train_tiny_llama, finetune_lora) share: their options, the
// tokenizer file, the training text, a seeded generator, and the held-out loss over a corpus.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>

#include <ctformer/ctformer.hpp>
#include <ctformer/io/file.hpp>
#include <ctformer/text/load.hpp>

namespace tiny_text {
namespace ct = ctformer;

// "--name value" pairs: each name one of `known`, looked up by get (the default where absent).
struct options {
    int argc;
    char** argv;
    std::initializer_list<std::string_view> known;
    // The first unknown name, or null.
    const char* unknown() const {
        for (int i = 1; i < argc; i += 2) {
            bool found = false;
            for (std::string_view k : known) found |= k == argv[i];
            if (!found || i + 1 >= argc) return argv[i];
        }
        return nullptr;
    }
    std::string get(std::string_view name, std::string fallback) const {
        for (int i = 1; i + 1 < argc; i += 2)
            if (name == argv[i]) return argv[i + 1];
        return fallback;
    }
    double number(std::string_view name, double fallback) const { return std::atof(get(name, std::to_string(fallback)).c_str()); }
    std::size_t count(std::string_view name, std::size_t fallback) const {
        return std::strtoull(get(name, std::to_string(fallback)).c_str(), nullptr, 10);
    }
};

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

// B random windows of T+1 tokens of corpus [lo, hi): inputs and next-token targets.
template <std::size_t B, std::size_t T>
void sample_batch(rng& r, const ct::token* corpus, std::size_t lo, std::size_t hi, ct::Tensor<ct::token, B, T>& tokens,
                  ct::Tensor<ct::token, B, T>& targets) {
    for (std::size_t b = 0; b < B; ++b) {
        const std::size_t o = lo + r.next() % (hi - lo - T - 1);
        for (std::size_t t = 0; t < T; ++t) tokens(b, t) = corpus[o + t], targets(b, t) = corpus[o + t + 1];
    }
}

// GPT-2's initialization: norms' weights 1, everything else N(0, 0.02²).
template <class P> void init_normal(P& params, rng& r) {
    ct::for_each_tensor(params, [&](std::string_view name, auto& t) {
        const bool norm = name.find("norm") != std::string_view::npos;
        for (std::size_t i = 0; i < t.size; ++i) t.set(i, norm ? 1.0f : 0.02f * float(r.normal()));
    });
}

// A tokenizer's tables from its exported file, read in place (the file stays mapped; file_bytes:
// its size).
inline ct::status open_tokenizer(const char* path, ct::tokenizer& tok, std::size_t* file_bytes = nullptr) {
    static ct::mapped_file file;
    static ct::safetensors::file<32> index;
    ct::status st = file.open(path);
    if (st) st = index.parse(file.bytes());
    if (st) st = ct::load_tokenizer(index, tok);
    if (file_bytes) *file_bytes = file.bytes().size();
    return st;
}

// The repository's README and docs: the text the tiny models learn.
inline constexpr std::initializer_list<const char*> docs = {
    "README.md",          "docs/design.md",      "docs/api.md",         "docs/models.md",
    "docs/training.md",   "docs/threads.md",     "docs/embedded.md",    "docs/robustness.md",
    "docs/weights.md",    "docs/quantization.md", "docs/masks.md",      "docs/text.md"};

// text += the files dir/name; false (having said which) where one cannot be read.
inline bool read_files(const std::string& dir, std::initializer_list<const char*> names, std::string& text) {
    for (const char* name : names) {
        std::ifstream in(dir + "/" + name, std::ios::binary);
        if (!in) return std::fprintf(stderr, "cannot read %s/%s\n", dir.c_str(), name), false;
        text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return true;
}

// The mean loss over every whole window of T+1 tokens of corpus [lo, hi), B windows a batch: the
// params alone or with adapters (pa), in eval mode. NaN where no window fits or a call fails.
template <class M, std::size_t B, std::size_t T, class PA>
double held_out_loss(const PA& pa, const ct::token* corpus, std::size_t lo, std::size_t hi) {
    static typename M::template Workspace<B, T> ws;
    static ct::Tensor<float, B, T, M::vocab> logits;
    static ct::Tensor<ct::token, B, T> tokens, targets;
    double sum = 0;
    std::size_t batches = 0;
    for (std::size_t o = lo; o + B * T + 1 <= hi; o += B * T, ++batches) {
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t t = 0; t < T; ++t) tokens(b, t) = corpus[o + b * T + t], targets(b, t) = corpus[o + b * T + t + 1];
        float loss;
        if (!M::evaluate(pa, ws, tokens, targets, logits, loss)) return NAN;
        sum += loss;
    }
    return batches ? sum / double(batches) : NAN;
}

}  // namespace tiny_text
