// libFuzzer target for the GGUF reader (io/gguf.hpp): any byte string parses or returns an error
// leaving the index empty; a parsed file's every key, value, array element and tensor byte is
// read without leaving the buffer (ASan + UBSan in CI; seeds in tests/fuzz/corpus_gguf).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include <ctformer/io/gguf.hpp>

namespace {
ctformer::gguf::file<64, 64> g;
}

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
    return sum == 0xFFFFFFFFu;  // (keeps the reads)
}
