// Tokenizer throughput: ctformer's encode (tables read in place, no heap) against SentencePiece's
// C++ library (libsentencepiece-dev) on the same model and text, in one binary: the repository's
// README and docs (~250 KB) encoded whole, and line by line (the prompt case). MB/s of input text,
// one thread. Models: tests/data/text's BPE (nmt_nfkc, byte fallback) and unigram (nmt_nfkc),
// examples/data/docs_bpe (identity normalization), and with CTFORMER_TEXT_PEER (a directory with
// benchmarks/llama_cpp/write_tokenizer.py's llama2_sp.model exported to llama2_sp.safetensors)
// Llama-2's 32,000 pieces, llama.cpp's peer (bench_tokenize.mjs). Decode: ids back to text.
#include <benchmark/benchmark.h>

#include <algorithm>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ctformer/io/file.hpp>
#include <ctformer/text/load.hpp>

#ifdef CTFORMER_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace ct = ctformer;

namespace {
const std::string& corpus() {
    static const std::string text = [] {
        std::string t;
        for (const char* name : {"README.md", "docs/design.md", "docs/api.md", "docs/models.md", "docs/training.md",
                                 "docs/threads.md", "docs/embedded.md", "docs/robustness.md", "docs/weights.md",
                                 "docs/quantization.md", "docs/masks.md", "docs/text.md"}) {
            std::ifstream in(std::string(CTFORMER_SOURCE_DIR) + "/" + name, std::ios::binary);
            t.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        }
        return t;
    }();
    return text;
}
std::vector<std::string> lines() {
    std::vector<std::string> out;
    std::string cur;
    for (const char c : corpus()) {
        if (c == '\n') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    return out;
}

struct model {
    ct::mapped_file file;
    ct::safetensors::file<32> index;
    ct::tokenizer tok;
    explicit model(const std::string& name) {
        const std::string path = (name.find('/') == std::string::npos ? std::string(CTFORMER_TEXT_TABLES) + "/" : "") + name +
                                 ".safetensors";
        ct::status s = file.open(path.c_str());
        if (s) s = index.parse(file.bytes());
        if (s) s = ct::load_tokenizer(index, tok);
        if (!s) std::fprintf(stderr, "%s: %s\n", path.c_str(), ct::to_string(s.code)), std::abort();
    }
};
model& tables(const std::string& name) {
    static model bpe("sp_bpe"), uni("sp_unigram"), docs("docs_bpe");
    if (name == "llama2") {  // (CTFORMER_TEXT_PEER: llama.cpp's peer vocabulary, scripts/bench_report)
        static model llama2(std::string(std::getenv("CTFORMER_TEXT_PEER")) + "/llama2_sp");
        return llama2;
    }
    return name == "sp_bpe" ? bpe : name == "sp_unigram" ? uni : docs;
}
#ifdef CTFORMER_HAVE_SENTENCEPIECE
std::string source(const std::string& name) {
    if (name == "llama2") return std::string(std::getenv("CTFORMER_TEXT_PEER")) + "/llama2_sp.model";
    return name == "docs_bpe" ? std::string(CTFORMER_SOURCE_DIR) + "/examples/data/docs_bpe.model"
                              : std::string(CTFORMER_SOURCE_DIR) + "/tests/data/text/" + name + ".model";
}
#endif

ct::tokenizer::Workspace<1 << 21> ws;
ct::token ids[1 << 21];

void ctformer_encode(benchmark::State& st, const std::string& name, bool by_line) {
    const ct::tokenizer& tok = tables(name).tok;
    const std::vector<std::string> ls = lines();
    std::size_t n = 0, bytes = 0, count = 0;
    for (auto _ : st) {
        if (by_line) {
            for (const std::string& l : ls) {
                if (!tok.encode(l, ids, n, ws)) st.SkipWithError("encode failed");
                count += n, bytes += l.size();
            }
        } else {
            if (!tok.encode(corpus(), ids, n, ws)) st.SkipWithError("encode failed");
            count += n, bytes += corpus().size();
        }
        benchmark::DoNotOptimize(ids[0]);
    }
    st.SetBytesProcessed(static_cast<std::int64_t>(bytes));
    st.counters["tokens"] = benchmark::Counter(static_cast<double>(count), benchmark::Counter::kIsRate);
}
void ctformer_decode(benchmark::State& st, const std::string& name) {
    const ct::tokenizer& tok = tables(name).tok;
    std::size_t n = 0;
    if (!tok.encode(corpus(), ids, n, ws)) std::abort();
    std::size_t bytes = 0;
    for (auto _ : st) {
        ct::text_decoder dec(tok);
        std::size_t out = 0;
        for (std::size_t i = 0; i < n; ++i) (void)dec.push(ids[i], [&](std::string_view s) { out += s.size(); });
        dec.finish([&](std::string_view s) { out += s.size(); });
        benchmark::DoNotOptimize(out);
        bytes += corpus().size();
    }
    st.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}

#ifdef CTFORMER_HAVE_SENTENCEPIECE
void sentencepiece_encode(benchmark::State& st, const std::string& name, bool by_line) {
    sentencepiece::SentencePieceProcessor sp;
    if (!sp.Load(source(name)).ok()) std::abort();
    const std::vector<std::string> ls = lines();
    std::vector<int> out;
    std::size_t bytes = 0, count = 0;
    for (auto _ : st) {
        if (by_line) {
            for (const std::string& l : ls) {
                (void)sp.Encode(l, &out);
                count += out.size(), bytes += l.size();
            }
        } else {
            (void)sp.Encode(corpus(), &out);
            count += out.size(), bytes += corpus().size();
        }
        benchmark::DoNotOptimize(out.data());
    }
    st.SetBytesProcessed(static_cast<std::int64_t>(bytes));
    st.counters["tokens"] = benchmark::Counter(static_cast<double>(count), benchmark::Counter::kIsRate);
}
void sentencepiece_decode(benchmark::State& st, const std::string& name) {
    sentencepiece::SentencePieceProcessor sp;
    if (!sp.Load(source(name)).ok()) std::abort();
    std::vector<int> v;
    (void)sp.Encode(corpus(), &v);
    std::string text;
    std::size_t bytes = 0;
    for (auto _ : st) {
        (void)sp.Decode(v, &text);
        benchmark::DoNotOptimize(text.data());
        bytes += corpus().size();
    }
    st.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
#endif

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

int reg = [] {
    std::vector<std::string> names = {"sp_bpe", "sp_unigram", "docs_bpe"};
    if (std::getenv("CTFORMER_TEXT_PEER")) names.emplace_back("llama2");
    for (const std::string& m : names) {
        const std::string name = m;
        benchmark::RegisterBenchmark(("text/encode/" + name + "/ctformer").c_str(), ctformer_encode, name, false)->ComputeStatistics("min", min_of);
        benchmark::RegisterBenchmark(("text/encode_lines/" + name + "/ctformer").c_str(), ctformer_encode, name, true)->ComputeStatistics("min", min_of);
        benchmark::RegisterBenchmark(("text/decode/" + name + "/ctformer").c_str(), ctformer_decode, name)->ComputeStatistics("min", min_of);
#ifdef CTFORMER_HAVE_SENTENCEPIECE
        benchmark::RegisterBenchmark(("text/encode/" + name + "/sentencepiece").c_str(), sentencepiece_encode, name, false)->ComputeStatistics("min", min_of);
        benchmark::RegisterBenchmark(("text/encode_lines/" + name + "/sentencepiece").c_str(), sentencepiece_encode, name, true)->ComputeStatistics("min", min_of);
        benchmark::RegisterBenchmark(("text/decode/" + name + "/sentencepiece").c_str(), sentencepiece_decode, name)->ComputeStatistics("min", min_of);
#endif
    }
    return 0;
}();
}  // namespace

BENCHMARK_MAIN();
