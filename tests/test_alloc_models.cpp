// Zero heap allocations in the stacks, the GPT (training, steps, generation), the optimizers and
// checkpoints, also with a thread pool as their executor (every product split here, however
// small). This binary replaces operator new and malloc to count (tests/alloc_counter.hpp).
#define CTFORMER_SPLIT_EVERYTHING
#include "alloc_counter.hpp"
#ifndef CT_ALLOC_SANITIZED
#include <ctformer/core/thread_pool.hpp>
#include <ctformer/io/gguf_load.hpp>

#include "common.hpp"
#if defined(__GNUC__) && !defined(__clang__)  // (GCC 12 pairs the counting operator delete with the GGUF
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // writer's inlined std::vector new: a false positive)
#endif
#include "gguf/writer.hpp"
#include "reference.hpp"

TEST_CASE("no heap allocation in stacks, the GPT (train, step, generate), optimizers and checkpoints") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    using S = ct::DecoderStack<L, 2>;
    using Blk = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>>;
    using M = ct::GPT<13, 8, 2, Blk>;
    using MT = ct::GPT<13, 8, 2, Blk, ct::tied_embeddings<true>, ct::positions<ct::sinusoidal>>;
    static S::Params sp;
    static S::Grads sg;
    static S::TrainWorkspace<2, 5, 7> sws;
    static S::Activations<2, 5, 7> sacts;
    static S::KVCache<2, 5> scache;
    static S::CrossKVCache<2, 7> scc;
    static S::StepWorkspace<2, 1> sstep;
    static ct::Tensor<float, 2, 5, 16> tgt, out, d_tgt;
    static ct::Tensor<float, 2, 7, 16> mem, d_mem;
    static ct::Tensor<float, 2, 1, 16> x1, y1;
    static M::Params mp;
    static M::Grads mg;
    static M::TrainWorkspace<2, 6> mws;
    static M::Activations<2, 6> macts;
    static M::Workspace<2, 6> mis;
    static M::KVCache<1, 8> mcache;
    static M::GenerateWorkspace<4> gen;
    static MT::Params tp;
    static MT::Grads tg;
    static MT::TrainWorkspace<2, 6> tws;
    static MT::Activations<2, 6> tacts;
    static ct::Tensor<ct::token, 2, 6> tok, tar;
    static ct::Tensor<float, 2, 6, 13> logits;
    static ct::AdamW<M::Params> adam;
    static ct::SGD<M::Params> sgd;
    static std::byte buf[1 << 20];
    static ct::safetensors::file<512> f;
    // a check_finite stack (its layers staged, caches rolled back on a late error) and sampling
    using CB = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::check_finite<true>>;
    using CS = ct::DecoderStack<CB, 2>;
    static CS::Params cp;
    static CS::Workspace<2, 5> cws;
    static CS::StepWorkspace<2, 1> cstep;
    static CS::KVCache<2, 5> ccache;
    static ct::Tensor<float, 2, 5, 16> big;
    static ct::sampler_scratch<float, 13> scratch;
    ref::randomize(cp, 6);
    for (auto& v : big.storage) v = 1e25f;
    ref::randomize(sp, 1);
    ref::randomize(mp, 2);
    ref::randomize(tp, 3);
    ref::randomize_tensor(tgt, 4);
    ref::randomize_tensor(mem, 5);
    for (std::size_t i = 0; i < tok.size; ++i) tok.storage[i] = static_cast<ct::token>(i % 13), tar.storage[i] = static_cast<ct::token>((i * 5) % 13);
    const ct::token prompt[3] = {1, 2, 3};
    bool ok = true;
    const std::size_t n = alloc_counter::during([&] {
        const ct::dropout_config dc{0.1f, -1, -1, 3, 4};
        ok = ok && S::forward(sp, sws, tgt, mem, out, ct::causal{}).ok();
        ok = ok && S::forward_train(sp, sws, sacts, tgt, mem, out, dc, ct::causal{}).ok();
        ok = ok && S::backward(sp, sacts, sws, out, sg, d_tgt, d_mem, ct::causal{}).ok();
        S::fill_cross_cache(sp, sstep, scc, mem);
        ok = ok && S::step(sp, sstep, scache, scc, x1, y1, ct::causal{}).ok() && scache.truncate_all(0).ok();
        float loss = 0;
        ok = ok && M::forward(mp, mis, tok, logits).ok();
        ok = ok && M::forward_train(mp, mws, macts, tok, tar, loss, dc).ok();
        ok = ok && M::backward(mp, macts, mws, mg).ok();
        ok = ok && MT::forward_train(tp, tws, tacts, tok, tar, loss).ok() && MT::backward(tp, tacts, tws, tg).ok();
        ct::clip_grad_norm(mg, 1.0);
        ok = ok && adam.step(mp, mg, ct::cosine_warmup{1e-3, 2, 10}).ok() && sgd.step(mp, mg).ok();
        adam.options.lr = -1;
        ok = ok && adam.step(mp, mg).code == ct::errc::invalid_option;
        adam.options.lr = 1e-3;
        ok = ok && CS::forward(cp, cws, tgt, out, ct::causal{}).ok();
        ok = ok && CS::forward(cp, cws, big, out, ct::causal{}).code == ct::errc::non_finite;
        ok = ok && CS::step(cp, cstep, ccache, x1, y1).ok();
        for (auto& v : x1.storage) v = 1e25f;
        ok = ok && CS::step(cp, cstep, ccache, x1, y1).code == ct::errc::non_finite && ccache.layer(1).length(0) == 1;
        ct::token next = 0;
        ok = ok && ct::sample(logits.storage, ct::sampling{.top_k = 4, .top_p = 0.8f}, 3, scratch, next).ok();
        ct::zero_grad(mg);
        ok = ok && M::generate(mp, gen, mcache, prompt, 3, 4, ct::sampling{.top_k = 5, .top_p = 0.9f}, [](ct::token) {
            return true;
        }).ok();
        const ct::save_result r = ct::save_checkpoint(std::span<std::byte>(buf), mp, adam);
        ok = ok && r.st.ok() && f.parse(std::span<const std::byte>(buf, r.bytes)).ok() && ct::load_checkpoint(f, mp, adam).ok();
    });
    CHECK(ok);
    CHECK(n == 0);
}

TEST_CASE("no heap allocation in a Llama model (RoPE, grouped-query attention, SwiGLU): train, step, generate") {
    using M = ct::Llama<13, 8, 2, ct::d_model<16>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<24>>;
    using Blk = M::Stack::layer_type;
    static M::Params p;
    static M::Grads g;
    static M::TrainWorkspace<2, 6> tws;
    static M::Activations<2, 6> acts;
    static M::Workspace<2, 6> ws;
    static M::KVCache<2, 8> cache;
    static M::StepWorkspace<2, 3> sws;
    static M::GenerateWorkspace<4> gen;
    static M::KVCache<1, 8> gcache;
    static ct::AdamW<M::Params> adam;
    static Blk::StepWorkspace<1, 1> bws;
    static Blk::KVCache<1, 8> bcache;
    static ct::Tensor<ct::token, 2, 6> tok, tar;
    static ct::Tensor<ct::token, 2, 3> chunk;
    static ct::Tensor<float, 2, 6, 13> logits;
    static ct::Tensor<float, 2, 3, 13> step_logits;
    static ct::Tensor<float, 1, 1, 16> x, y;
    ref::randomize(p, 7);
    for (std::size_t i = 0; i < tok.size; ++i) tok.storage[i] = static_cast<ct::token>(i % 13), tar.storage[i] = static_cast<ct::token>((i * 5) % 13);
    for (std::size_t i = 0; i < chunk.size; ++i) chunk.storage[i] = static_cast<ct::token>(i % 13);
    const ct::token prompt[3] = {1, 2, 3};
    bool ok = true;
    const std::size_t n = alloc_counter::during([&] {
        float loss = 0;
        ok = ok && M::forward(p, ws, tok, logits).ok();
        ok = ok && M::forward_train(p, tws, acts, tok, tar, loss).ok() && M::backward(p, acts, tws, g).ok();
        ok = ok && adam.step(p, g).ok();
        ok = ok && M::step_ragged(p, sws, cache, chunk, step_logits, {3, 2}).ok();
        ok = ok && M::generate(p, gen, gcache, prompt, 3, 4, ct::sampling{.temperature = 0}, [](ct::token) {
            return true;
        }).ok();
        ok = ok && Blk::step(p.stack.layers[0], bws, bcache, x, y, ct::causal{}).ok();
    });
    CHECK(ok);
    CHECK(n == 0);
}

TEST_CASE("no heap allocation with LoRA adapters over int4 weights: train, AdamW, step, generate, files, merge") {
    using Q = ct::Llama<13, 8, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<64>, ct::lora<4, 8, ct::lora_all>,
                        ct::weights<ct::int4_group<32>>>;
    using D = ct::Llama<13, 8, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<64>, ct::lora<4, 8, ct::lora_all>>;
    static D::Params dp;
    static Q::Params p;
    static Q::Adapters ad, g;
    static Q::TrainWorkspace<2, 6> tws;
    static Q::Activations<2, 6> acts;
    static Q::StepWorkspace<2, 3> sws;
    static Q::KVCache<2, 8> cache;
    static Q::GenerateWorkspace<4> gen;
    static Q::KVCache<1, 8> gcache;
    static ct::AdamW<Q::Adapters> adam;
    static ct::Tensor<ct::token, 2, 6> tok, tar;
    static ct::Tensor<ct::token, 2, 3> chunk;
    static ct::Tensor<float, 2, 3, 13> step_logits;
    static std::byte buf[1 << 16];
    static ct::safetensors::file<512> f;
    static char json[512];
    ref::randomize(dp, 8);
    std::vector<std::byte> bytes(ct::save_state_dict(dp, {}).bytes);
    REQUIRE(ct::save_state_dict(dp, bytes).st.ok());
    REQUIRE(ct::load_state_dict(p, std::span<const std::byte>(bytes)).ok());
    for (std::size_t i = 0; i < tok.size; ++i) tok.storage[i] = static_cast<ct::token>(i % 13), tar.storage[i] = static_cast<ct::token>((i * 5) % 13);
    for (std::size_t i = 0; i < chunk.size; ++i) chunk.storage[i] = static_cast<ct::token>(i % 13);
    const ct::token prompt[3] = {1, 2, 3};
    bool ok = true;
    const std::size_t n = alloc_counter::during([&] {
        float loss = 0;
        ct::init_adapters(ad, 5);
        const auto pa = ct::with_adapters(p, ad);
        ct::dropout_config dc{0.0f, 0.0f, 0.0f, 1, 1};
        dc.lora_p = 0.1f;
        ok = ok && Q::forward_train(pa, tws, acts, tok, tar, loss, dc).ok() && Q::backward(pa, acts, tws, g).ok();
        ok = ok && adam.step(ad, g).ok();
        ok = ok && Q::step_ragged(pa, sws, cache, chunk, step_logits, {3, 2}).ok();
        ok = ok && Q::generate(pa, gen, gcache, prompt, 3, 4, ct::sampling{.temperature = 0}, [](ct::token) {
            return true;
        }).ok();
        const ct::save_result saved = ct::save_adapters(ad, buf);
        const std::size_t chars = ct::write_adapter_config<Q::Adapters>(json);
        ok = ok && saved.st.ok() && f.parse(std::span<const std::byte>(buf, saved.bytes)).ok() &&
             ct::load_adapters(ad, f, std::string_view(json, chars)).ok();
        ok = ok && ct::merge_adapters(dp, ad).ok() && ct::merge_adapters(dp, ad, -1).ok();
    });
    CHECK(ok);
    CHECK(n == 0);
}

TEST_CASE("no heap allocation with PEFT's nn.MultiheadAttention adapters (a GPT): train, step, generate, merge") {
    using Blk = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>,
                                     ct::lora<4, 8, ct::lora_mha | ct::lora_up | ct::lora_down>>;
    using G = ct::GPT<13, 8, 2, Blk>;
    static G::Params p;
    static G::Adapters ad, g;
    static G::TrainWorkspace<2, 6> tws;
    static G::Activations<2, 6> acts;
    static G::GenerateWorkspace<4> gen;
    static G::KVCache<1, 8> gcache;
    static ct::Tensor<ct::token, 2, 6> tok, tar;
    ref::randomize(p, 10);
    for (std::size_t i = 0; i < tok.size; ++i) tok.storage[i] = static_cast<ct::token>(i % 13), tar.storage[i] = static_cast<ct::token>((i * 5) % 13);
    const ct::token prompt[3] = {1, 2, 3};
    bool ok = true;
    const std::size_t n = alloc_counter::during([&] {
        float loss = 0;
        ct::init_adapters(ad, 5);
        const auto pa = ct::with_adapters(p, ad);
        ok = ok && G::forward_train(pa, tws, acts, tok, tar, loss, ct::dropout_config{0.0f, 0.0f, 0.0f, 1, 1}).ok() &&
             G::backward(pa, acts, tws, g).ok();
        ok = ok && G::generate(pa, gen, gcache, prompt, 3, 4, ct::sampling{.temperature = 0}, [](ct::token) { return true; }).ok();
        ok = ok && ct::merge_adapters(p, ad).ok() && ct::merge_adapters(p, ad, -1).ok();
    });
    CHECK(ok);
    CHECK(n == 0);
}

TEST_CASE("no heap allocation with adapters on a cross-attention stack: train, fill_cross_cache, step, merge") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>,
                               ct::lora<4, 8, ct::lora_mha | ct::lora_cross | ct::lora_up | ct::lora_down>>;
    using S = ct::DecoderStack<L, 2>;
    static S::Params p;
    static S::Adapters ad, g;
    static S::TrainWorkspace<2, 5, 7> ws;
    static S::Activations<2, 5, 7> acts;
    static S::KVCache<2, 5> cache;
    static S::CrossKVCache<2, 7> cc;
    static S::StepWorkspace<2, 1> step;
    static ct::Tensor<float, 2, 5, 16> tgt, out, d_tgt;
    static ct::Tensor<float, 2, 7, 16> mem, d_mem;
    static ct::Tensor<float, 2, 1, 16> x1, y1;
    ref::randomize(p, 11);
    ref::randomize_tensor(tgt, 12);
    ref::randomize_tensor(mem, 13);
    bool ok = true;
    const std::size_t n = alloc_counter::during([&] {
        ct::init_adapters(ad, 5);
        const auto pa = ct::with_adapters(p, ad);
        ct::dropout_config dc{0.1f, -1, -1, 3, 4};
        dc.lora_p = 0.1f;
        ok = ok && S::forward_train(pa, ws, acts, tgt, mem, out, dc, ct::causal{}).ok() &&
             S::backward(pa, acts, ws, out, g, d_tgt, d_mem, ct::causal{}).ok();
        S::fill_cross_cache(pa, step, cc, mem);
        ok = ok && S::step(pa, step, cache, cc, x1, y1, ct::causal{}).ok() && cache.truncate_all(0).ok();
        ok = ok && ct::merge_adapters(p, ad).ok() && ct::merge_adapters(p, ad, -1).ok();
    });
    CHECK(ok);
    CHECK(n == 0);
}

TEST_CASE("no heap allocation loading a Llama from GGUF: parse, configuration, names, every block format; six-bit weights and f16 scales run") {
    using M = ct::Llama<13, 8, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<64>>;
    using Q = ct::Llama<13, 8, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<64>, ct::weights<ct::int4_group<32, ct::f16>>>;
    static M::Params p, back;
    static Q::Params q;
    using Mixed = ct::Llama<13, 8, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<64>,
                            ct::weights<ct::int4_group_min<32>, ct::int8_activations, ct::head_weights<ct::int8_group<32, ct::f16>>>>;
    static Mixed::Params mixed;
    // (six-bit weights: Q4_0 as levels with a minimum, its head as int6; then a forward and a generate on them)
    using Six = ct::Llama<13, 8, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<64>,
                          ct::weights<ct::int6_group_min<16>, ct::int8_activations, ct::head_weights<ct::int6_group<16>>>>;
    static Six::Params six;
    static Six::Workspace<2, 8> six_ws;
    static Six::GenerateWorkspace<4> six_gen;
    static Six::KVCache<1, 8> six_cache;
    static ct::Tensor<ct::token, 2, 8> six_tok;
    static ct::Tensor<float, 2, 8, 13> six_logits;
    for (std::size_t i = 0; i < six_tok.size; ++i) six_tok.storage[i] = static_cast<ct::token>(i * 3 % 13);
    const ct::token prompt[3] = {1, 2, 3};
    ref::randomize(p, 9);
    // p as llama.cpp's GGUF, F32 (quantized to int4 at load) and Q4_0 (into int4 as stored): written before counting
    const std::vector<std::byte> file = test::llama_gguf<M>(p).bytes(), q4 = test::llama_gguf<M>(p, test::gguf_store::q4_0).bytes();
    static ct::gguf::file<32, 32> g4;
    static ct::gguf::file<32, 32> g;
    bool ok = true;
    const std::size_t n = alloc_counter::during([&] {
        ok = ok && g.parse(file).ok();
        ok = ok && ct::load_gguf(back, g).ok();
        ok = ok && ct::load_gguf(q, g).ok();
        ok = ok && g4.parse(q4).ok() && ct::load_gguf(q, g4).ok() && ct::load_gguf(back, g4).ok();
        ok = ok && ct::load_gguf(mixed, g4).ok();  // (per-tensor formats: 4-bit levels with minimums, int8 groups)
        ok = ok && ct::load_gguf(six, g4).ok() && Six::forward(six, six_ws, six_tok, six_logits).ok();
        ok = ok && Six::generate(six, six_gen, six_cache, prompt, 3, 4, ct::sampling{.temperature = 0}, [](ct::token) { return true; }).ok();
    });
    CHECK(ok);
    CHECK(n == 0);
}

// (the GPT: int8 weights with int8 activations and bf16 KV caches, the decoding options' paths)
TEST_CASE("no heap allocation with quantized weights: quantization at load, forward, evaluate, step, generate") {
    using Dense = ct::Llama<13, 8, 2, ct::d_model<16>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<24>>;
    using M = ct::Llama<13, 8, 2, ct::d_model<16>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<24>,
                        ct::weights<ct::int4_group<8>>>;
    using G = ct::GPT<13, 8,
                      2,
                      ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>,
                                           ct::weights<ct::int8_per_channel, ct::int8_activations>, ct::kv_cache<ct::bf16>>, ct::tied_embeddings<true>>;
    using GD = ct::GPT<13, 8, 2, ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>, ct::tied_embeddings<true>>;
    static Dense::Params dense;
    static GD::Params gdense;
    static M::Params p;
    static G::Params gp;
    static M::Workspace<2, 6> ws;
    static G::Workspace<2, 6> gws;
    static M::KVCache<2, 8> cache;
    static M::StepWorkspace<2, 3> sws;
    static M::GenerateWorkspace<4> gen;
    static M::KVCache<1, 8> gcache;
    static G::GenerateWorkspace<4> ggen;
    static G::KVCache<1, 8> ggcache;
    static ct::Tensor<ct::token, 2, 6> tok, tar;
    static ct::Tensor<ct::token, 2, 3> chunk;
    static ct::Tensor<float, 2, 6, 13> logits;
    static ct::Tensor<float, 2, 3, 13> step_logits;
    static std::byte buf[1 << 18], gbuf[1 << 18];
    ref::randomize(dense, 7);
    ref::randomize(gdense, 8);
    const ct::save_result saved = ct::save_state_dict(dense, buf), gsaved = ct::save_state_dict(gdense, gbuf);
    REQUIRE(saved.st.ok());
    REQUIRE(gsaved.st.ok());
    for (std::size_t i = 0; i < tok.size; ++i) tok.storage[i] = static_cast<ct::token>(i % 13), tar.storage[i] = static_cast<ct::token>((i * 5) % 13);
    for (std::size_t i = 0; i < chunk.size; ++i) chunk.storage[i] = static_cast<ct::token>(i % 13);
    const ct::token prompt[3] = {1, 2, 3};
    bool ok = true;
    const std::size_t n = alloc_counter::during([&] {
        float loss = 0;
        ok = ok && ct::load_state_dict(p, std::span<const std::byte>(buf, saved.bytes)).ok();
        ok = ok && ct::load_state_dict(gp, std::span<const std::byte>(gbuf, gsaved.bytes)).ok();
        ok = ok && M::forward(p, ws, tok, logits).ok() && M::evaluate(p, ws, tok, tar, logits, loss).ok();
        ok = ok && G::evaluate(gp, gws, tok, tar, logits, loss).ok();
        ok = ok && M::step_ragged(p, sws, cache, chunk, step_logits, {3, 2}).ok();
        ok = ok && M::generate(p, gen, gcache, prompt, 3, 4, ct::sampling{.temperature = 0}, [](ct::token) {
            return true;
        }).ok();
        ok = ok && G::generate(gp, ggen, ggcache, prompt, 3, 4, ct::sampling{.temperature = 0}, [](ct::token) {
            return true;
        }).ok();
    });
    CHECK(ok);
    CHECK(n == 0);
}
TEST_CASE("no heap allocation per call with a thread pool: layer, stack, GPT (train, AdamW, generate), Llama steps") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    using S = ct::DecoderStack<L, 2>;
    using Blk = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>>;
    using M = ct::GPT<13, 8, 2, Blk>;
    using LM = ct::Llama<13, 8, 2, ct::d_model<16>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<24>>;
    static S::Params sp;
    static S::Grads sg;
    static S::TrainWorkspace<2, 5, 7> sws;
    static S::Activations<2, 5, 7> sacts;
    static S::KVCache<2, 5> scache;
    static S::CrossKVCache<2, 7> scc;
    static S::StepWorkspace<2, 1> sstep;
    static ct::Tensor<float, 2, 5, 16> tgt, out, d_tgt;
    static ct::Tensor<float, 2, 7, 16> mem, d_mem;
    static ct::Tensor<float, 2, 1, 16> x1, y1;
    static M::Params mp;
    static M::Grads mg;
    static M::TrainWorkspace<2, 6> mws;
    static M::Activations<2, 6> macts;
    static M::KVCache<1, 8> mcache;
    static M::GenerateWorkspace<4> gen;
    static ct::AdamW<M::Params> adam;
    static LM::Params lp;
    static LM::StepWorkspace<2, 3> lsws;
    static LM::KVCache<2, 8> lcache;
    static ct::Tensor<ct::token, 2, 6> tok, tar;
    static ct::Tensor<ct::token, 2, 3> chunk;
    static ct::Tensor<float, 2, 3, 13> step_logits;
    ref::randomize(sp, 1);
    ref::randomize(mp, 2);
    ref::randomize(lp, 3);
    ref::randomize_tensor(tgt, 4);
    ref::randomize_tensor(mem, 5);
    for (std::size_t i = 0; i < tok.size; ++i) tok.storage[i] = static_cast<ct::token>(i % 13), tar.storage[i] = static_cast<ct::token>((i * 5) % 13);
    for (std::size_t i = 0; i < chunk.size; ++i) chunk.storage[i] = static_cast<ct::token>(i % 13);
    const ct::token prompt[3] = {1, 2, 3};
    for (std::size_t threads : {2u, 3u}) {
        ct::thread_pool pool(threads);  // (its workers: the only allocation, here)
        const ct::use_executor on(pool);
        bool ok = true;
        const std::size_t n = alloc_counter::during([&] {
            const ct::dropout_config dc{0.1f, -1, -1, 3, 4};
            ok = ok && S::forward(sp, sws, tgt, mem, out, ct::causal{}).ok();
            ok = ok && S::forward_train(sp, sws, sacts, tgt, mem, out, dc, ct::causal{}).ok();
            ok = ok && S::backward(sp, sacts, sws, out, sg, d_tgt, d_mem, ct::causal{}).ok();
            S::fill_cross_cache(sp, sstep, scc, mem);
            ok = ok && S::step(sp, sstep, scache, scc, x1, y1, ct::causal{}).ok() && scache.truncate_all(0).ok();
            float loss = 0;
            ct::zero_grad(mg);
            ok = ok && M::forward_train(mp, mws, macts, tok, tar, loss, dc).ok() && M::backward(mp, macts, mws, mg).ok();
            ok = ok && adam.step(mp, mg).ok();
            mcache.reset();
            ok = ok && M::generate(mp, gen, mcache, prompt, 3, 4, ct::sampling{.top_k = 5}, [](ct::token) { return true; }).ok();
            lcache.reset();
            ok = ok && LM::step_ragged(lp, lsws, lcache, chunk, step_logits, {3, 2}).ok();
        });
        INFO(threads << " threads");
        CHECK(ok);
        CHECK(n == 0);
    }
}
#endif  // CT_ALLOC_SANITIZED
