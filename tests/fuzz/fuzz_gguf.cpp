// libFuzzer target for the GGUF reader (io/gguf.hpp) and the loader (io/gguf_load.hpp): any byte
// string parses or returns an error leaving the index empty; a parsed file's every key, value,
// array element and tensor byte is read without leaving the buffer; a parsed file loads into a
// small Llama (dense, int4, and six-bit levels: every block format but Q8_0 as stored) or returns an error having written nothing (ASan + UBSan in CI;
// seeds in tests/fuzz/corpus_gguf: tiny_llama_*.gguf are that Llama in F32, Q8_0 and Q4_0, written
// by benchmarks/llama_cpp/write_models.py's write_gguf).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include <cstring>

#include <ctformer/io/gguf.hpp>
#include <ctformer/io/gguf_load.hpp>
#include <ctformer/models/llama.hpp>

namespace {
ctformer::gguf::file<64, 64> g;
using Dense = ctformer::Llama<16, 8, 1, ctformer::d_model<32>, ctformer::heads<4>, ctformer::kv_heads<2>, ctformer::ffn_dim<64>,
                              ctformer::norm_eps<1, 100000>>;
using Int4 = ctformer::Llama<16, 8, 1, ctformer::d_model<32>, ctformer::heads<4>, ctformer::kv_heads<2>, ctformer::ffn_dim<64>,
                             ctformer::norm_eps<1, 100000>, ctformer::weights<ctformer::int4_group<32>>>;
using Int6 = ctformer::Llama<16, 8, 1, ctformer::d_model<32>, ctformer::heads<4>, ctformer::kv_heads<2>, ctformer::ffn_dim<64>,
                             ctformer::norm_eps<1, 100000>, ctformer::weights<ctformer::int6_group_min<16>>>;
Dense::Params dense;
Int4::Params int4;
Int6::Params int6;

// load_gguf into p: on an error, p's bytes are as they were (a pattern set before)
template <class P> unsigned load_all_or_nothing(P& p) {
    std::memset(static_cast<void*>(&p), 0x5a, sizeof p);
    ctformer::safetensors::load_options opt;
    opt.reject_non_finite = true;
    if (ctformer::load_gguf(p, g, opt)) return 1;
    const auto* raw = reinterpret_cast<const unsigned char*>(&p);
    for (std::size_t i = 0; i < sizeof p; ++i)
        if (raw[i] != 0x5a) std::abort();
    return 0;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace gg = ctformer::gguf;
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    if (!g.parse(bytes)) {
        if (g.keys() || g.tensors()) std::abort();  // an error leaves the index empty
        return 0;
    }
    unsigned sum = 0;
    for (std::size_t i = 0; i < g.keys(); ++i) {
        const gg::value& v = g.key(i).v;
        std::uint64_t u;
        double d;
        std::string_view s;
        sum += v.get(u) + v.get(d) + v.get(s);
        for (std::uint64_t k = 0; k < v.count && k < 64; ++k) sum += v.number_at(k, d);
        v.for_each_string([&](std::uint64_t, std::string_view t) { sum += t.empty() ? 0u : static_cast<unsigned char>(t[0]); });
        if (g.find(g.key(i).key) != &g.key(i)) std::abort();
    }
    for (std::size_t i = 0; i < g.tensors(); ++i) {
        const gg::tensor_info& t = g.tensor(i);
        if (t.bytes) sum += static_cast<unsigned>(g.data(t)[0]) + static_cast<unsigned>(g.data(t)[t.bytes - 1]);
    }
    sum += load_all_or_nothing(dense) + load_all_or_nothing(int4) + load_all_or_nothing(int6);
    return sum == 0xFFFFFFFFu;  // (keeps the reads)
}
