// Helpers of the GGUF loading suites (tests/gguf/load.cpp, tests/gguf/kscale.cpp): a small Llama,
// random weights, and a file read into a weight format as stored against dense weights.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <ctformer/io/gguf_load.hpp>

#include "gguf/writer.hpp"
#include "model_fixture.hpp"

namespace gguf_test {
namespace gg = ctformer::gguf;
template <class... O> using Wide = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<64>, O...>;
template <class P> void fill_random(P& p, unsigned seed) {
    std::uint32_t x = seed;
    ct::for_each_tensor(p, [&](std::string_view, auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) {
            x = x * 1664525u + 1013904223u;
            t.set(i, static_cast<float>(static_cast<int>(x >> 9) - (1 << 22)) / float(1 << 24));
        }
    });
}

// A block-format file into the weight format that holds it as stored and into dense weights: the
// same values (Q4_0: scale d, integers n - 8; Q8_0: d, q).
// load_gguf(p, g) is wrong_dtype naming `what`, and p's bytes are as they were (a pattern set before).
template <class P, class G> void refused_untouched(P& p, const G& g, std::string_view what) {
    std::memset(static_cast<void*>(&p), 0x5a, sizeof p);
    const ct::status st = ct::load_gguf(p, g);
    CHECK(st.code == ct::errc::wrong_dtype);
    CHECK(std::string(st.tensor_name()) == what);
    const auto* raw = reinterpret_cast<const unsigned char*>(&p);
    std::size_t touched = 0;
    for (std::size_t i = 0; i < sizeof p; ++i) touched += raw[i] != 0x5a;
    CHECK(touched == 0);
}
template <class Q, class D = Wide<>> void as_stored_equals_dense(const std::vector<std::byte>& bytes, typename D::Params&) {
    static typename D::Params dense;
    static typename Q::Params q;
    static gg::file<32, 64> g;
    REQUIRE(g.parse(bytes).ok());
    REQUIRE(ct::load_gguf(dense, g).ok());
    REQUIRE(ct::load_gguf(q, g).ok());
    std::size_t off = 0, n = 0;
    ct::for_each_tensor(dense, [&](std::string_view name, const auto& d) {
        ct::for_each_tensor(q, [&](std::string_view name2, const auto& x) {
            if (name != name2) return;
            for (std::size_t i = 0; i < d.size; ++i, ++n) off += static_cast<float>(d.get(i)) != static_cast<float>(x.get(i));
        });
    });
    CHECK(n == ct::parameter_count<typename D::Params>());
    CHECK(off == 0);
}
template <class Q, class D = Wide<>> void as_stored_equals_dense(test::gguf_store store, gg::ggml_type type, typename D::Params& src) {
    const std::vector<std::byte> bytes = test::llama_gguf<D>(src, store).bytes();
    static gg::file<32, 64> g;
    REQUIRE(g.parse(bytes).ok());
    REQUIRE(g.find_tensor("blk.0.attn_q.weight")->type == type);
    as_stored_equals_dense<Q, D>(bytes, src);
}
// Weight-only logits of Q (its matrices as stored) on 8 tokens (i · mul + add) against the dense
// model D's: the same numbers, so equal to float rounding.
template <class D, class Q> void same_logits(const typename D::Params& dense, const typename Q::Params& q, std::size_t mul, std::size_t add) {
    static typename D::template Workspace<1, 8> dws;
    static typename Q::template Workspace<1, 8> qws;
    static ct::Tensor<ct::token, 1, 8> tok;
    static ct::Tensor<float, 1, 8, 37> a, b;
    for (std::size_t i = 0; i < 8; ++i) tok.data()[i] = static_cast<ct::token>((i * mul + add) % 37);
    REQUIRE(D::forward(dense, dws, tok, a).ok());
    REQUIRE(Q::forward(q, qws, tok, b).ok());
    double worst = 0, top = 0;
    for (std::size_t i = 0; i < a.size; ++i)
        worst = std::max(worst, std::fabs(double(a.data()[i]) - double(b.data()[i]))), top = std::max(top, std::fabs(double(a.data()[i])));
    INFO("max abs " << worst << " of logits up to " << top);
    CHECK(worst <= 1e-5 * std::max(1.0, top));
}
}  // namespace gguf_test
