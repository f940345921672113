// Every core (core/executor.hpp): each entry point run with ct::thread_pool executors of 1, 2, 3 and
// 7 threads (more threads than work items in the small shapes) gives bit-for-bit the sequential
// results — forward, backward, the decoding step, the cross cache's fill, the GPT's training step
// (optimizers included) and generation, Llama with quantized weights (weight-only and int8 activations) and bf16 caches.
// Every product and elementwise pass is split here, however small (CTFORMER_SPLIT_EVERYTHING:
// core/schedule.hpp's thresholds at 1, passes over rows in blocks of 2), so the split paths run on
// these shapes: partial panels, row groups, (batch, head) pairs, norms' and embeddings' column
// blocks, residual, activation, dropout and loss rows. Layers with weights up to 512 KB run their
// row stages in row parts; the 200-row block (590 KB) takes the path where each product splits its
// columns. .ci/run also builds this test with ThreadSanitizer.
#define CTFORMER_SPLIT_EVERYTHING
#include <cstring>
#include <vector>

#include <ctformer/core/thread_pool.hpp>

#include "common.hpp"
#include "model_fixture.hpp"
#include "reference.hpp"

namespace {

using bytes = std::vector<unsigned char>;
template <class X> void append(bytes& out, const X& x) {
    const auto* p = reinterpret_cast<const unsigned char*>(x.data());
    out.insert(out.end(), p, p + sizeof(typename X::value_type) * X::size);
}
template <class P> void append_params(bytes& out, const P& p) {
    ct::for_each_tensor(p, [&](std::string_view, const auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) {
            const double v = double(t.get(i));
            const auto* b = reinterpret_cast<const unsigned char*>(&v);
            out.insert(out.end(), b, b + sizeof v);
        }
    });
}

// A pool that counts its runs (the parallel paths were taken) and parts.
struct counting_pool {
    ct::thread_pool pool;
    std::size_t runs = 0, parts = 0;
    explicit counting_pool(std::size_t threads) : pool(threads) {}
    std::size_t concurrency() const { return pool.concurrency(); }
    void run(std::size_t n, ct::part_task task, void* ctx) {
        ++runs, parts += n;  // (called by the thread that forks: never concurrently here)
        pool.run(n, task, ctx);
    }
};

// run(out) appends everything the calls produced, inside a ct::use_executor scope of each
// executor; each thread count must reproduce the sequential bytes exactly.
template <class F> void same_for_every_thread_count(const char* what, F&& run) {
    bytes want;
    {
        const ct::use_executor on(ct::sequential{});
        run(want);
    }
    REQUIRE(!want.empty());
    for (std::size_t threads : {1u, 2u, 3u, 7u}) {
        counting_pool pool(threads);
        bytes got;
        {
            const ct::use_executor on(pool);  // the one door: every call in run() splits over the pool
            run(got);
        }
        INFO(std::string(what) << " with " << threads << " threads: " << pool.runs << " parallel regions, " << pool.parts << " parts");
        CHECK((threads == 1) == (pool.runs == 0));
        std::size_t first = 0;
        while (first < want.size() && first < got.size() && want[first] == got[first]) ++first;
        INFO(std::string(what) << " with " << threads << " threads: " << got.size() << " bytes against " << want.size()
                  << ", first difference at byte " << first);
        CHECK(got == want);
    }
}

// A layer: forward, training forward + backward (gradients of every parameter), the cross cache's
// fill and a step over three positions at a time then one.
template <class L, std::size_t B, std::size_t T, std::size_t S> void layer_case(const char* what) {
    constexpr std::size_t D = L::config::d_model;
    static typename L::Params p;
    static typename L::Grads g;
    static typename L::template TrainWorkspace<B, T, S> ws;
    static typename L::template Activations<B, T, S> acts;
    static typename L::template KVCache<B, T> cache;
    static typename L::template CrossKVCache<B, S> cc;
    static typename L::template StepWorkspace<B, 3> sws3;
    static typename L::template StepWorkspace<B, 1> sws1;
    static ct::Tensor<float, B, T, D> tgt, out, d_out, d_tgt;
    static ct::Tensor<float, B, S, D> mem, d_mem;
    static ct::Tensor<float, B, 3, D> x3, y3;
    static ct::Tensor<float, B, 1, D> x1, y1;
    ref::randomize(p, 3);
    ref::randomize_tensor(tgt, 4);
    ref::randomize_tensor(mem, 5);
    ref::randomize_tensor(d_out, 6);
    same_for_every_thread_count(what, [&](bytes& o) {
        REQUIRE(L::forward(p, ws, tgt, mem, out, ct::causal{}).ok());
        append(o, out);
        const ct::dropout_config dc{0.1f, -1, -1, 7, 8};
        ct::zero_grad(g);
        for (auto& v : d_tgt.storage) v = 0.f;
        for (auto& v : d_mem.storage) v = 0.f;
        REQUIRE(L::forward_train(p, ws, acts, tgt, mem, out, dc, ct::causal{}).ok());
        REQUIRE(L::backward(p, acts, ws, d_out, g, d_tgt, d_mem, ct::causal{}).ok());
        append(o, out), append(o, d_tgt), append(o, d_mem), append_params(o, g);
        L::fill_cross_cache(p, sws3, cc, mem);
        cache.reset();
        for (std::size_t t = 0; t + 3 <= T; t += 3) {
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t i = 0; i < 3 * D; ++i) x3.storage[b * 3 * D + i] = tgt.storage[(b * T + t) * D + i];
            REQUIRE(L::step(p, sws3, cache, cc, x3, y3, ct::causal{}).ok());
            append(o, y3);
        }
        for (std::size_t t = T / 3 * 3; t < T; ++t) {
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t i = 0; i < D; ++i) x1.storage[b * D + i] = tgt.storage[(b * T + t) * D + i];
            REQUIRE(L::step(p, sws1, cache, cc, x1, y1, ct::causal{}).ok());
            append(o, y1);
        }
    });
}

}  // namespace

TEST_CASE("parallel: decoder layer (post-norm, cross-attention): forward, backward, cross cache, steps") {
    layer_case<ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>>, 2, 10, 7>("post-norm D 32");
}

TEST_CASE("parallel: a step's cross-attention heads by key spans (3 heads over a 1100-row memory)") {
    // 3 heads on 2 or 7 threads: each head's 1100 keys in 2 spans, merged in order (kernels/attention.hpp)
    layer_case<ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<40>>, 1, 4, 1100>("cross key spans");
}

TEST_CASE("parallel: a small layer's forward runs its row-local work in three row regions") {
    // (weights of 33 KB: each core keeps a copy; the stages between the heads run over row parts)
    using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>>;
    static L::Params p;
    static L::Workspace<2, 10, 7> ws;
    static ct::Tensor<float, 2, 10, 32> tgt, out;
    static ct::Tensor<float, 2, 7, 32> mem;
    ref::randomize(p, 3);
    ref::randomize_tensor(tgt, 4);
    ref::randomize_tensor(mem, 5);
    counting_pool pool(2);
    const ct::use_executor on(pool);
    REQUIRE(L::forward(p, ws, tgt, mem, out, ct::causal{}).ok());
    // q|k|v; the self heads; its output, norm, cross queries and the memory's k|v; the cross heads;
    // the cross output, norm and FFN
    CHECK(pool.runs == 5);
    pool.runs = 0;  // with dropout too (a part's rows keep their numbers in the layer: layer_case's bytes)
    REQUIRE(L::forward_train(p, ws, tgt, mem, out, ct::dropout_config{0.1f, -1, -1, 7, 8}, ct::causal{}).ok());
    CHECK(pool.runs == 5);
}

TEST_CASE("parallel: decoder layer with partial panels (D 40, F 72, pre-norm, GELU), batch 3") {
    layer_case<ct::DecoderLayer<ct::d_model<40>, ct::heads<4>, ct::ffn_dim<72>, ct::norm_first<true>, ct::activation<ct::gelu>>,
               3, 8, 5>("pre-norm D 40");
}

TEST_CASE("parallel: a long sequence (the GEMMs' row blocks and packed rows: 200 rows, F 1024), forward and backward") {
    // 200 rows of a 1024-wide hidden layer: linear2 and its input gradient pack their input's rows
    // (4 KB apart), in blocks of 96 on another thread's stack
    using L = ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<2>, ct::ffn_dim<1024>>;
    static L::Params p;
    static L::Grads g;
    static L::TrainWorkspace<1, 200> ws;
    static L::Activations<1, 200> acts;
    static ct::Tensor<float, 1, 200, 64> x, y, dy, dx;
    ref::randomize(p, 9);
    ref::randomize_tensor(x, 10);
    ref::randomize_tensor(dy, 11);
    same_for_every_thread_count("200 rows", [&](bytes& o) {
        REQUIRE(L::forward(p, ws, x, y, ct::causal{}).ok());
        append(o, y);
        ct::zero_grad(g);
        for (auto& v : dx.storage) v = 0.f;
        REQUIRE(L::forward_train(p, ws, acts, x, y, ct::dropout_config{}, ct::causal{}).ok());
        REQUIRE(L::backward(p, acts, ws, dy, g, dx, ct::causal{}).ok());
        append(o, dx), append_params(o, g);
    });
    // its weights (590 KB) exceed this file's row-region bound: one region per product, not three a layer
    counting_pool pool(2);
    const ct::use_executor on(pool);
    REQUIRE(L::forward(p, ws, x, y, ct::causal{}).ok());
    CHECK(pool.runs > 3);
}

TEST_CASE("parallel: attention heads cut into parts of their query rows (heads that do not share evenly)") {
    // One query head per part where the heads divide among the threads; else each head's rows in
    // 2 parts per thread, of whole row blocks, the first paired with the last (a causal mask's
    // later rows cost more)
    using A = ct::modules::attention<ct::DecoderOnlyBlock<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<48>>::config>;
    constexpr std::size_t R = ct::kernels::attention_row_block;
    const auto head_cuts = [](std::size_t n, std::size_t Tq, std::size_t P) {  // (core/schedule.hpp)
        return ct::schedule::plan_heads(n, Tq, ct::schedule::min_macs, (Tq + R - 1) / R, 0, P).cuts;
    };
    CHECK(head_cuts(6, 10 * R, 2) == 1);
    CHECK(head_cuts(3, 10 * R, 2) == 4);
    CHECK(head_cuts(3, 10 * R, 7) == 10);  // (no more parts than row blocks)
    CHECK(head_cuts(1, R, 2) == 1);
    CHECK(ct::schedule::plan_heads(3, 1, ct::schedule::min_macs, 1, 3, 2).spans == 3);  // a step: key spans
    CHECK(!ct::schedule::plan_heads(3, 10 * R, ct::schedule::min_macs, 10, 0, 1).split);  // one thread
    for (std::size_t c : {1u, 2u, 4u, 5u, 10u}) {
        std::vector<int> seen(10 * R);
        std::size_t cost[2] = {0, 0};  // a row's keys under a causal mask, by part of c / 2 cuts
        for (std::size_t j = 0; j < c; ++j) {
            const ct::kernels::query_rows q = A::head_rows(j, c, 10 * R - 3);
            CHECK(q.i0 % R == 0);
            for (std::size_t i = q.i0; i < q.i1 && i < 10 * R - 3; ++i) ++seen[i], cost[j < c / 2 ? 0 : 1] += i + 1;
        }
        for (std::size_t i = 0; i < 10 * R - 3; ++i) CHECK(seen[i] == 1);
        if (c % 4 == 0) CHECK(double(cost[0]) / double(cost[1]) > 0.8);  // (1/3 without the pairing)
    }
}

TEST_CASE("parallel: multi-query Llama (one key/value head, 3 query heads): 40-row training step and prefill") {
    // 3 heads on 2 or 7 threads: the heads' rows are cut (above), in the training forward and in
    // the prompt's one 40-row prefill step over the cache; the prompt's 40 keys are stored in the
    // cache by (batch row, key/value head) before any head reads them
    using M = ct::Llama<29, 48, 2, ct::d_model<24>, ct::heads<3>, ct::kv_heads<1>, ct::ffn_dim<40>>;
    static M::Params p;
    static M::Grads g;
    static M::TrainWorkspace<1, 40> tws;
    static M::Activations<1, 40> acts;
    static M::GenerateWorkspace<40> gen;
    static M::KVCache<1, M::context> cache;
    static ct::Tensor<ct::token, 1, 40> tok, tar;
    ref::randomize(p, 21);
    for (std::size_t i = 0; i < tok.size; ++i)
        tok.storage[i] = static_cast<ct::token>(i * 11 % 29), tar.storage[i] = static_cast<ct::token>((i * 3 + 2) % 29);
    same_for_every_thread_count("MQA Llama", [&](bytes& o) {
        float loss = 0;
        ct::zero_grad(g);
        REQUIRE(M::forward_train(p, tws, acts, tok, tar, loss).ok());
        REQUIRE(M::backward(p, acts, tws, g).ok());
        o.insert(o.end(), reinterpret_cast<unsigned char*>(&loss), reinterpret_cast<unsigned char*>(&loss) + 4);
        append_params(o, g);
        cache.reset();  // (filled with another prompt's keys first, on one thread: a store skipped would read those)
        {
            const ct::use_executor alone(ct::sequential{});  // (a nested sequential scope is honoured)
            REQUIRE(M::generate(p, gen, cache, tar.data(), 40, 1, ct::sampling{.temperature = 0}, [](ct::token) { return true; }).ok());
        }
        cache.reset();
        REQUIRE(M::generate(p, gen, cache, tok.data(), 40, 8, ct::sampling{.temperature = 0.8f, .top_k = 4, .seed = 9},
                            [&](ct::token t) {
                                o.insert(o.end(), reinterpret_cast<unsigned char*>(&t), reinterpret_cast<unsigned char*>(&t) + sizeof t);
                                return true;
                            }).ok());
    });
}

namespace {
// 3 heads on 2 or 7 threads: a step's heads over 1100 and more cached keys run by spans of their
// keys; the step's key is stored before any span reads it
template <class... O> void key_spans_case(const char* what) {
    using M = ct::Llama<29, 1300, 1, ct::d_model<24>, ct::heads<3>, ct::kv_heads<1>, ct::ffn_dim<40>, O...>;
    static typename M::Params p;
    static typename M::template GenerateWorkspace<64> gen;
    static typename M::template KVCache<1, M::context> cache, prefilled;
    static typename M::template StepWorkspace<1, 1> sws;
    static ct::Tensor<ct::token, 1, 1> tok;
    static ct::Tensor<float, 1, 1, 29> logits;
    static ct::token prompt[1110];
    ref::randomize(p, 23);
    for (std::size_t i = 0; i < 1110; ++i) prompt[i] = static_cast<ct::token>(i * 13 % 29);
    // the prompt prefilled once, on one thread (the steps below are what is compared); each run
    // starts from its copy, whose rows past the prompt are zero: a store skipped reads those
    REQUIRE(M::generate(p, gen, prefilled, prompt, 1100, 0, ct::sampling{.temperature = 0}, [](ct::token) { return true; }).ok());
    same_for_every_thread_count(what, [&](bytes& o) {
        cache = prefilled;
        for (std::size_t i = 1100; i < 1110; ++i) {
            tok.storage[0] = prompt[i];
            REQUIRE(M::step(p, sws, cache, tok, logits).ok());
            append(o, logits);
        }
    });
}
}  // namespace

TEST_CASE("parallel: a decoding step's heads by key spans (3 query heads, 1 key/value head, 1100 keys and more)") {
    key_spans_case<>("MQA Llama, long cache");
    key_spans_case<ct::kv_cache<ct::bf16>>("MQA Llama, long bf16 cache");
}

namespace {
// A GPT: training steps (forward_train, backward, AdamW and SGD with momentum), evaluation and
// sampled generation.
template <class M> void gpt_case(const char* what) {
    constexpr std::size_t V = M::vocab;
    static typename M::Params p0, p;
    static typename M::Grads g;
    static typename M::template TrainWorkspace<2, 6> tws;
    static typename M::template Activations<2, 6> acts;
    static typename M::template Workspace<2, 6> ws;
    static typename M::template GenerateWorkspace<4> gen;
    static typename M::template KVCache<1, M::context> cache;
    static ct::Tensor<ct::token, 2, 6> tok, tar;
    static ct::Tensor<float, 2, 6, V> logits;
    ref::randomize(p0, 12);
    for (std::size_t i = 0; i < tok.size; ++i)
        tok.storage[i] = static_cast<ct::token>(i * 7 % V), tar.storage[i] = static_cast<ct::token>((i * 5 + 1) % V);
    same_for_every_thread_count(what, [&](bytes& o) {
        static ct::AdamW<typename M::Params> adam;
        static ct::SGD<typename M::Params> sgd;
        adam = ct::AdamW<typename M::Params>{};
        sgd = ct::SGD<typename M::Params>{};
        sgd.options.momentum = 0.9;
        p = p0;
        for (int s = 0; s < 2; ++s) {
            float loss = 0;
            ct::zero_grad(g);
            REQUIRE(M::forward_train(p, tws, acts, tok, tar, loss).ok());
            REQUIRE(M::backward(p, acts, tws, g).ok());
            REQUIRE(adam.step(p, g).ok());
            REQUIRE(sgd.step(p, g).ok());
            o.insert(o.end(), reinterpret_cast<unsigned char*>(&loss), reinterpret_cast<unsigned char*>(&loss) + 4);
        }
        append_params(o, p);
        float loss = 0;
        REQUIRE(M::evaluate(p, ws, tok, tar, logits, loss).ok());
        append(o, logits);
        cache.reset();
        const ct::token prompt[3] = {1, 2, 3};
        REQUIRE(M::generate(p, gen, cache, prompt, 3, M::context - 3, ct::sampling{.temperature = 0.9f, .top_k = 5, .seed = 4},
                            [&](ct::token t) {
                                o.insert(o.end(), reinterpret_cast<unsigned char*>(&t), reinterpret_cast<unsigned char*>(&t) + sizeof t);
                                return true;
                            }).ok());
    });
}
}  // namespace

TEST_CASE("parallel: GPT training steps, evaluation and generation") {
    using Blk = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::norm_first<true>>;
    gpt_case<ct::GPT<37, 12, 2, Blk>>("GPT");
}

TEST_CASE("parallel: Llama (RoPE, grouped-query attention, SwiGLU) training steps and generation") {
    gpt_case<ct::Llama<37, 12, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<48>>>("Llama");
}

namespace {
// A quantized Llama from the llama_gqa fixture: forward, steps (a chunk of 3, then single
// tokens), greedy generation.
template <class M> void quant_case(const char* what) {
    constexpr std::size_t B = 2, T = 7, V = M::vocab;
    static typename M::Params p;
    test::File file("llama_gqa");
    file.load(p, "params.");
    static ct::Tensor<double, B, T> ids;
    static ct::Tensor<ct::token, B, T> tokens;
    file.read("input.tokens", ids);
    for (std::size_t i = 0; i < ids.size; ++i) tokens.storage[i] = static_cast<ct::token>(ids.storage[i]);
    static typename M::template Workspace<B, T> ws;
    static typename M::template StepWorkspace<B, 1> sws;
    static typename M::template KVCache<B, T> cache;
    static typename M::template GenerateWorkspace<4> gen;
    static typename M::template KVCache<1, M::context> gcache;
    static ct::Tensor<float, B, T, V> logits;
    static ct::Tensor<ct::token, B, 1> one;
    static ct::Tensor<float, B, 1, V> step_logits;
    same_for_every_thread_count(what, [&](bytes& o) {
        REQUIRE(M::forward(p, ws, tokens, logits).ok());
        append(o, logits);
        cache.reset();
        for (std::size_t t = 0; t < T; ++t) {
            for (std::size_t b = 0; b < B; ++b) one.storage[b] = tokens.storage[b * T + t];
            REQUIRE(M::step(p, sws, cache, one, step_logits).ok());
            append(o, step_logits);
        }
        gcache.reset();
        REQUIRE(M::generate(p, gen, gcache, tokens.data(), 5, M::context - 5, ct::sampling{.temperature = 0}, [&](ct::token t) {
                    o.insert(o.end(), reinterpret_cast<unsigned char*>(&t), reinterpret_cast<unsigned char*>(&t) + sizeof t);
                    return true;
                }).ok());
    });
}
template <class... O>
using LlamaS = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::ffn_dim<48>, ct::norm_eps<1, 100000>, ct::kv_heads<2>, O...>;
}  // namespace

TEST_CASE("parallel: quantized Llama: int8 weights, int4 weights with int8 activations and bf16 caches") {
    quant_case<LlamaS<ct::weights<ct::int8_per_channel>>>("Llama int8");
    quant_case<LlamaS<ct::weights<ct::int4_group<16>, ct::int8_activations>, ct::kv_cache<ct::bf16>>>("Llama int4 + a8 + bf16 kv");
}
