// Incremental decoding: for every causal PyTorch fixture, feeding tgt one token at a time and in
// chunks of 3 through the KV caches reproduces the fixture's output rows (including rows whose
// keys are padded); ragged batches, rewind-and-regenerate, and capacity overflow.
#include <cstring>

#include "fixture.hpp"
#include "reference.hpp"

namespace {

// Runs the fixture through step() in chunks of Chunk positions; returns the assembled output.
template <class L, std::size_t B, std::size_t T, std::size_t S, std::size_t Chunk, class SM, class CM>
void check_steps(test::Fixture<L, B, T, S>& f, const char* what, const SM& sm, const CM& cm,
                 std::array<std::size_t, B> per_row_chunk = {}) {
    using V = typename L::T;
    constexpr std::size_t D = L::D;
    static typename L::template KVCache<B, T> cache;
    static typename L::template CrossKVCache<B, S> cross_cache;
    static typename L::template StepWorkspace<B, Chunk> sws;
    static ct::Tensor<V, B, Chunk, D> x, y;
    static ct::Tensor<V, B, T, D> out;
    for (auto& v : per_row_chunk) v = v ? v : Chunk;
    cache.reset();
    if constexpr (L::cross) L::fill_cross_cache(f.params, sws, cross_cache, f.mem);
    for (auto& v : out.storage) v = std::numeric_limits<V>::quiet_NaN();
    std::array<std::size_t, B> done{};
    while (true) {
        std::array<std::size_t, B> count{};
        bool any = false;
        for (std::size_t b = 0; b < B; ++b) {
            count[b] = std::min(per_row_chunk[b], T - done[b]);
            any = any || count[b] > 0;
            for (std::size_t i = 0; i < count[b]; ++i)
                for (std::size_t d = 0; d < D; ++d) x(b, i, d) = f.tgt(b, done[b] + i, d);
        }
        if (!any) break;
        ct::status st;
        if constexpr (L::cross) st = L::step_ragged(f.params, sws, cache, cross_cache, x, y, count, sm, cm);
        else st = L::step_ragged(f.params, sws, cache, x, y, count, sm);
        REQUIRE(st.ok());
        for (std::size_t b = 0; b < B; ++b) {
            for (std::size_t i = 0; i < count[b]; ++i)
                for (std::size_t d = 0; d < D; ++d) out(b, done[b] + i, d) = y(b, i, d);
            done[b] += count[b];
            CHECK(cache.length(b) == done[b]);
        }
    }
    const test::errors e = test::compare(out.data(), f.expected.data(), out.size);
    std::printf("  %-26s %-34s max abs %.3g  max rel %.3g\n", f.name.c_str(), what, e.max_abs, e.max_rel);
    CHECK_CLOSE(f.name << " [" << what << "]", out.data(), f.expected.data(), out.size, test::golden_tol<V>);
}

template <class L, std::size_t B, std::size_t T, std::size_t S, class SM, class CM = ct::no_mask>
void check_all_chunkings(const char* name, const SM& sm, const CM& cm = {}) {
    test::Fixture<L, B, T, S> f(name);
    check_steps<L, B, T, S, 1>(f, "token by token", sm, cm);
    check_steps<L, B, T, S, 3>(f, "chunks of 3", sm, cm);
    if constexpr (B == 2) check_steps<L, B, T, S, 3>(f, "ragged: row0 by 1, row1 by 3", sm, cm, {1, 3});
}

using Small = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
}  // namespace

TEST_CASE("step: post_relu_causal_mempad (memory padding)") {
    check_all_chunkings<Small, 2, 5, 7>("post_relu_causal_mempad", ct::causal{}, ct::key_lengths{7, 4});
}

TEST_CASE("step: pre_gelu_causal_tgtpad (rows whose keys are padded)") {
    using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<8>, ct::ffn_dim<64>, ct::norm_first<true>, ct::activation<ct::gelu>>;
    check_all_chunkings<L, 2, 6, 4>("pre_gelu_causal_tgtpad", ct::causal{} && ct::key_lengths{6, 3});
    // The same with the fixture's own (batch, tgt_len) bool padding tensor.
    static ct::Tensor<bool, 2, 6> pad;
    test::Fixture<L, 2, 6, 4> f("pre_gelu_causal_tgtpad");
    f.input("input.tgt_key_padding_mask", pad);
    check_steps<L, 2, 6, 4, 1>(f, "token by token, bool padding", ct::causal{} && ct::key_padding(pad), ct::no_mask{});
}

TEST_CASE("step: post_nobias, pre_nobias_gelu, pre_eps_1e-3") {
    check_all_chunkings<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::bias<false>>, 2, 5, 7>(
        "post_nobias", ct::causal{});
    check_all_chunkings<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::bias<false>,
                                         ct::norm_first<true>, ct::activation<ct::gelu>>, 2, 5, 7>("pre_nobias_gelu", ct::causal{});
    check_all_chunkings<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>,
                                         ct::layer_norm_eps<1, 1000>>, 2, 5, 7>("pre_eps_1e-3", ct::causal{});
}

TEST_CASE("step: post_f64_all_masks (double, tgt padding, memory mask and padding)") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::dtype<double>>;
    static ct::Tensor<bool, 5, 7> mem_mask;
    test::Fixture<L, 2, 5, 7> f("post_f64_all_masks");
    f.input("input.memory_mask", mem_mask);
    check_all_chunkings<L, 2, 5, 7>("post_f64_all_masks", ct::causal{} && ct::key_lengths{5, 2},
                                    ct::mask_from(mem_mask) && ct::key_lengths{6, 7});
}

TEST_CASE("step: medium_pre_gelu, gpt_block, gpt_block_f64_post") {
    check_all_chunkings<ct::DecoderLayer<ct::d_model<128>, ct::heads<8>, ct::ffn_dim<512>, ct::norm_first<true>,
                                         ct::activation<ct::gelu>>, 1, 32, 48>("medium_pre_gelu", ct::causal{});
    check_all_chunkings<ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<256>, ct::norm_first<true>,
                                             ct::activation<ct::gelu>>, 2, 12, 12>("gpt_block", ct::causal{});
    check_all_chunkings<ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<48>, ct::dtype<double>>, 1, 9, 9>(
        "gpt_block_f64_post", ct::causal{});
}

TEST_CASE("step: rewind and regenerate gives identical outputs; overflow is an error, not corruption") {
    using L = ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<256>, ct::norm_first<true>, ct::activation<ct::gelu>>;
    test::Fixture<L, 2, 12, 12> f("gpt_block");
    static L::KVCache<2, 12> cache, snapshot;
    static L::StepWorkspace<2, 1> sws;
    static ct::Tensor<float, 2, 1, 64> x, y;
    static ct::Tensor<float, 2, 12, 64> first, second;
    auto feed = [&](std::size_t t, ct::Tensor<float, 2, 12, 64>& out) {
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t d = 0; d < 64; ++d) x(b, 0, d) = f.tgt(b, t, d);
        REQUIRE(L::step(f.params, sws, cache, x, y, ct::causal{}).ok());
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t d = 0; d < 64; ++d) out(b, t, d) = y(b, 0, d);
    };
    cache.reset();
    for (std::size_t t = 0; t < 12; ++t) feed(t, first);
    CHECK_CLOSE("first pass vs PyTorch", first.data(), f.expected.data(), first.size, test::golden_tol<float>);
    // Rewind both rows to 5 positions and regenerate: bit-identical.
    REQUIRE(cache.truncate_all(5).ok());
    for (std::size_t t = 5; t < 12; ++t) feed(t, second);
    CHECK(std::memcmp(first.storage + 5 * 64, second.storage + 5 * 64, 7 * 64 * sizeof(float)) == 0);
    CHECK(std::memcmp(first.storage + 17 * 64, second.storage + 17 * 64, 7 * 64 * sizeof(float)) == 0);
    // Rewind one row only (per-row lengths), truncating beyond the length is an error.
    CHECK(cache.truncate(1, 13).code == ct::errc::out_of_range);
    REQUIRE(cache.truncate(1, 4).ok());
    CHECK(cache.length(0) == 12);
    CHECK(cache.length(1) == 4);
    // Full cache: the step fails with cache_full and changes neither cache nor output.
    REQUIRE(cache.truncate(1, 12).code == ct::errc::out_of_range);
    std::memcpy(&snapshot, &cache, sizeof cache);
    for (auto& v : y.storage) v = 123.0f;
    const ct::status st = L::step(f.params, sws, cache, x, y, ct::causal{});
    CHECK(st.code == ct::errc::cache_full);
    CHECK(std::memcmp(&snapshot, &cache, sizeof cache) == 0);
    CHECK(y.storage[0] == 123.0f);
}

TEST_CASE("step: cross cache must be filled first; sizes are compile-time constants") {
    static Small::Params p;
    static Small::KVCache<1, 8> cache;
    static Small::CrossKVCache<1, 4> cc;
    static Small::StepWorkspace<1, 1> sws;
    static ct::Tensor<float, 1, 1, 16> x, y;
    CHECK(Small::step(p, sws, cache, cc, x, y).code == ct::errc::cache_empty);
    CHECK(cache.length(0) == 0);
    static_assert(Small::KVCache<1, 8>::bytes == sizeof(Small::KVCache<1, 8>));
    static_assert(Small::KVCache<1, 8>::bytes >= 2 * 16 * 8 * sizeof(float) + sizeof(std::size_t));
    static_assert(Small::StepWorkspace<1, 1>::bytes == sizeof(Small::StepWorkspace<1, 1>));
}

TEST_CASE("step equals forward: memory-causal, tensor masks, RMSNorm, SiLU, pre-norm, double") {
    using L = ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<40>, ct::norm<ct::rms_norm>,
                               ct::activation<ct::silu>, ct::norm_first<true>, ct::dtype<double>>;
    constexpr std::size_t B = 2, T = 7, S = 5;
    static L::Params p;
    static L::Workspace<B, T, S> ws;
    static L::KVCache<B, T> cache;
    static L::CrossKVCache<B, S> cc;
    static L::StepWorkspace<B, 2> sws;
    static ct::Tensor<double, B, T, 24> tgt, full, stepped;
    static ct::Tensor<double, B, S, 24> mem;
    static ct::Tensor<double, T, T> additive;
    static ct::Tensor<bool, B, 3, T, S> per_head;
    static ct::Tensor<double, B, 2, 24> x, y;
    ref::randomize(p, 41);
    ref::randomize_tensor(tgt, 42);
    ref::randomize_tensor(mem, 43);
    ref::randomize_tensor(additive, 44);
    for (std::size_t i = 0; i < per_head.size; ++i) per_head.storage[i] = (i * 2654435761u) % 7 == 0;
    const auto sm = ct::causal{} && ct::mask_from(additive) && ct::key_lengths{7, 6};
    const auto cm = ct::causal{} && ct::mask_from(per_head);  // memory-causal and per-head
    L::forward(p, ws, tgt, mem, full, sm, cm);
    L::fill_cross_cache(p, sws, cc, mem);
    for (std::size_t t0 = 0; t0 < T; t0 += 2) {
        const std::size_t n = std::min<std::size_t>(2, T - t0);
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t d = 0; d < 24; ++d) x(b, i, d) = tgt(b, t0 + i, d);
        REQUIRE(L::step_ragged(p, sws, cache, cc, x, y, std::array<std::size_t, B>{n, n}, sm, cm).ok());
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t d = 0; d < 24; ++d) stepped(b, t0 + i, d) = y(b, i, d);
    }
    CHECK_CLOSE("step vs forward", stepped.data(), full.data(), full.size, test::golden_tol<double>);
}
