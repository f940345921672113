// What a GGUF file holds and the C++ type that loads it: the header, the llama architecture's
// configuration, the tokenizer's kind and size, each tensor's format (a Q4_K_M file mixes them),
// and the ct::Llama alias ct::load_gguf checks the file against — dense, and with each weight
// matrix's format as stored (a per-tensor ct::weights<...>). With --tensors, every tensor.
//
//   gguf_info model.gguf [--tensors]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include <ctformer/io/file.hpp>
#include <ctformer/io/ggml_blocks.hpp>
#include <ctformer/io/gguf.hpp>

namespace ct = ctformer;
namespace gg = ctformer::gguf;

static ct::mapped_file mapped;
static gg::file<256, 4096> g;  // (llama.cpp files of the largest models hold ~40 keys and ~1,000 tensors)

static std::uint64_t number(std::string_view key, std::uint64_t fallback) {
    std::uint64_t v = fallback;
    if (const gg::kv* e = g.find(key)) e->v.get(v);
    return v;
}
static double real(std::string_view key, double fallback) {
    double v = fallback;
    if (const gg::kv* e = g.find(key)) e->v.get(v);
    return v;
}
static std::string text(std::string_view key) {
    std::string_view v;
    if (const gg::kv* e = g.find(key); !e || !e->v.get(v)) return "";
    return std::string(v);
}

// eps as ct::norm_eps<N, 10^k>: the smallest power of ten that writes it as a whole number (the
// file stores a float: 1e-5 is 9.99999975e-06)
static std::string eps_option(double eps) {
    long long den = 1;
    for (int k = 0; k < 12; ++k, den *= 10) {
        const double n = std::nearbyint(eps * static_cast<double>(den));
        if (n >= 1 && std::fabs(n / static_cast<double>(den) - eps) <= 1e-6 * eps)
            return "ct::norm_eps<" + std::to_string(static_cast<long long>(n)) + ", " + std::to_string(den) + ">";
    }
    return "ct::norm_eps<?> (eps " + std::to_string(eps) + ")";
}

// ct::weights<...> keeping every weight matrix's tensors as stored (gguf::stored_formats): the
// format most matrices take, and an override for each other one; "" when all are dense floats.
static std::string weights_option() {
    const char* f[8];
    gg::stored_formats(g, f);
    for (const char* x : f)
        if (!x) return "";  // (a format ct::load_gguf does not read)
    std::size_t best = 0, best_n = 0;
    for (std::size_t i = 0; i < 8; ++i) {
        std::size_t n = 0;
        for (const char* y : f) n += std::strcmp(y, f[i]) == 0;
        if (n > best_n) best = i, best_n = n;
    }
    std::string o = std::string("ct::weights<") + f[best];
    for (std::size_t i = 0; i < 8; ++i)
        if (std::strcmp(f[i], f[best]) != 0) o += std::string(", ct::") + gg::matrix_names[i] + "_weights<" + f[i] + ">";
    return best_n == 8 && std::strcmp(f[best], "ct::dense") == 0 ? "" : o + ">";
}

int main(int argc, char** argv) {
    if (argc < 2) return std::fprintf(stderr, "usage: gguf_info model.gguf [--tensors]\n"), 2;
    const bool list = argc > 2 && std::strcmp(argv[2], "--tensors") == 0;
    ct::status st = mapped.open(argv[1]);
    if (st) st = g.parse(mapped.bytes());
    if (!st) return std::fprintf(stderr, "%s: %s %s\n", argv[1], ct::to_string(st.code), st.tensor_name().data()), 1;
    std::printf("%s: GGUF v%u, %zu bytes, %zu keys, %zu tensors, alignment %llu\n", argv[1], g.version(), mapped.bytes().size(),
                g.keys(), g.tensors(), static_cast<unsigned long long>(g.alignment()));
    const std::string arch = text("general.architecture"), name = text("general.name");
    std::printf("architecture %s%s%s\n", arch.c_str(), name.empty() ? "" : ", name ", name.c_str());

    // formats: how many tensors (and bytes) of each
    std::uint64_t count[64] = {}, bytes[64] = {};
    for (std::size_t i = 0; i < g.tensors(); ++i) {
        const gg::tensor_info& t = g.tensor(i);
        const auto k = static_cast<std::size_t>(t.type) % 64;
        ++count[k], bytes[k] += t.bytes;
        if (list) {
            std::printf("  %-32s %-5s (", std::string(t.name).c_str(), gg::type_name(t.type));
            for (std::uint32_t d = t.n_dims; d-- > 0;) std::printf("%llu%s", static_cast<unsigned long long>(t.dims[d]), d ? ", " : ")");
            std::printf("%s\n", gg::supported(t.type) ? "" : "  (not read by ct::load_gguf)");
        }
    }
    std::printf("formats:");
    for (std::size_t k = 0; k < 64; ++k)
        if (count[k])
            std::printf(" %s x%llu (%.2f MiB)", gg::type_name(static_cast<gg::ggml_type>(k)), static_cast<unsigned long long>(count[k]),
                        static_cast<double>(bytes[k]) / 1048576.0);
    std::printf("\n");
    if (const gg::kv* toks = g.find("tokenizer.ggml.tokens"))
        std::printf("tokenizer %s, %llu tokens\n", text("tokenizer.ggml.model").c_str(), static_cast<unsigned long long>(toks->v.count));
    if (arch != "llama") return std::printf("(ct::load_gguf reads the llama architecture)\n"), 0;

    const std::uint64_t d = number("llama.embedding_length", 0), layers = number("llama.block_count", 0),
                        heads = number("llama.attention.head_count", 0), kv = number("llama.attention.head_count_kv", heads),
                        ffn = number("llama.feed_forward_length", 0), ctx = number("llama.context_length", 0),
                        rot = number("llama.rope.dimension_count", heads ? d / heads : 0);
    std::uint64_t vocab = number("llama.vocab_size", 0);
    if (const gg::kv* toks = g.find("tokenizer.ggml.tokens"); !vocab && toks) vocab = toks->v.count;
    const double theta = real("llama.rope.freq_base", 10000), eps = real("llama.attention.layer_norm_rms_epsilon", 0);
    std::printf("d_model %llu, layers %llu, heads %llu (kv %llu), ffn %llu, context %llu, vocab %llu, rope theta %g over %llu dims, "
                "rms eps %g\n",
                static_cast<unsigned long long>(d), static_cast<unsigned long long>(layers), static_cast<unsigned long long>(heads),
                static_cast<unsigned long long>(kv), static_cast<unsigned long long>(ffn), static_cast<unsigned long long>(ctx),
                static_cast<unsigned long long>(vocab), theta, static_cast<unsigned long long>(rot), eps);

    std::string alias = "using Model = ct::Llama<" + std::to_string(vocab) + ", " + std::to_string(ctx) + ", " + std::to_string(layers) +
                        ", ct::d_model<" + std::to_string(d) + ">, ct::heads<" + std::to_string(heads) + ">";
    if (kv != heads) alias += ", ct::kv_heads<" + std::to_string(kv) + ">";
    alias += ", ct::ffn_dim<" + std::to_string(ffn) + ">, " + eps_option(eps);
    if (theta != 10000 || (heads && rot != d / heads)) {
        alias += ", ct::rope<ct::rotate_half, " + std::to_string(static_cast<long long>(theta));
        alias += heads && rot != d / heads ? ", " + std::to_string(rot) + ">" : std::string(">");
    }
    if (!g.find_tensor("output.weight")) alias += ", ct::tied_embeddings<true>";
    std::printf("\n%s>;\n", alias.c_str());
    std::printf("(dense floats, decoded as ggml decodes them; the context may be shorter than the file's %llu: the KV cache\n"
                " is what it sizes)\n",
                static_cast<unsigned long long>(ctx));
    const std::string stored = weights_option();
    if (!stored.empty())
        std::printf("\nAs stored (each weight matrix in the format that holds its tensors' blocks: the same values, fewer bytes%s):\n"
                    "%s, %s>;\n",
                    stored.starts_with("ct::weights<ct::int") ? ";\nadd ct::int8_activations after the first format to multiply as llama.cpp does" : "",
                    alias.c_str(), stored.c_str());
    return 0;
}
