// Zero heap allocations in forward (eval and training), backward, and steps, in every
// configuration and mask kind.
// This binary replaces operator new and malloc to count (tests/alloc_counter.hpp). A sanitizer
// replaces them too, so under one this test only says it is skipped (the plain builds run it).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CT_ALLOC_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define CT_ALLOC_SANITIZED 1
#endif
#endif

#ifdef CT_ALLOC_SANITIZED
#include <doctest/doctest.h>
TEST_CASE("no heap allocation (skipped: a sanitizer owns malloc in this build)") {
    MESSAGE("test_alloc skipped under a sanitizer: it replaces malloc/operator new itself; "
            "the g++, SSE4.2 and scalar builds run it");
}
#else
#include "alloc_counter.hpp"
#include "common.hpp"
#include "reference.hpp"

namespace {
template <class L, std::size_t B, std::size_t T, std::size_t S> struct Rig {
    using V = typename L::T;
    static inline typename L::Params params;
    static inline typename L::template Workspace<B, T, S> ws;
    static inline ct::Tensor<V, B, T, L::D> tgt, out;
    static inline ct::Tensor<V, B, S, L::D> mem;
    static inline ct::Tensor<bool, B, S> pad;
    static inline ct::Tensor<V, L::H * B, T, T> add;
    static inline ct::Tensor<bool, T, S> bm;
    static inline typename L::template TrainWorkspace<B, T, S> tws;
    static inline typename L::template Activations<B, T, S> acts;
    static inline typename L::Grads grads;
    static inline ct::Tensor<V, B, T, L::D> d_tgt;
    static inline ct::Tensor<V, B, S, L::D> d_mem;
    Rig() {
        ref::randomize(params, 3);
        ref::randomize_tensor(tgt, 4);
        ref::randomize_tensor(mem, 5);
        pad(0, S - 1) = true;
    }
    void all() {
        bool ok = true;
        const std::size_t n = alloc_counter::during([&] {
            if constexpr (L::cross) {
                L::forward(params, ws, tgt, mem, out);
                L::forward(params, ws, tgt, mem, out, ct::causal{} && ct::mask_from(add), ct::key_padding(pad) && ct::mask_from(bm));
                L::forward(params, ws, tgt, mem, out, ct::key_lengths<B>{}, ct::causal{});
                L::forward_train(params, ws, tgt, mem, out, ct::dropout_config{0.1f, 0.2f, 0.3f, 1, 2}, ct::causal{});
                L::forward_train(params, tws, acts, tgt, mem, out, ct::dropout_config{0.1f, 0.2f, 0.3f, 1, 2}, ct::causal{},
                                 ct::key_padding(pad));
                ok = ok && L::backward(params, acts, tws, out, grads, d_tgt, d_mem, ct::causal{}, ct::key_padding(pad)).ok();
            } else {
                L::forward(params, ws, tgt, out, ct::causal{});
                L::forward(params, ws, tgt, out, ct::causal{} && ct::mask_from(add));
                L::forward_train(params, ws, tgt, out, ct::dropout_config{0.1f, -1, -1, 1, 2}, ct::causal{});
                L::forward_train(params, tws, acts, tgt, out, ct::dropout_config{0.1f, -1, -1, 1, 2}, ct::causal{});
                ok = ok && L::backward(params, acts, tws, out, grads, d_tgt, ct::causal{}).ok();
            }
        });
        CHECK(ok);
        CHECK(n == 0);
        for (std::size_t i = 0; i < out.size; ++i) REQUIRE(std::isfinite(static_cast<double>(out.storage[i])));
    }
};
}  // namespace

TEST_CASE("no heap allocation in forward / forward_train / backward") {
    // the counter works
    CHECK(alloc_counter::during([] {
        int* volatile p = new int(3);
        delete p;
    }) == 1);
    CHECK(alloc_counter::during([] {
        void* volatile p = std::malloc(8);
        std::free(p);
    }) == 1);
    Rig<ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>, 2, 5, 7>{}.all();
    Rig<ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::norm_first<true>, ct::activation<ct::gelu>, ct::dtype<double>>, 2, 9, 4>{}.all();
    Rig<ct::DecoderLayer<ct::d_model<24>, ct::heads<3>, ct::ffn_dim<40>, ct::norm<ct::rms_norm>, ct::bias<false>, ct::activation<ct::silu>>, 1, 17, 19>{}.all();
    Rig<ct::DecoderOnlyBlock<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<256>, ct::norm_first<true>, ct::activation<ct::gelu_tanh>>, 2, 12, 12>{}.all();
    Rig<ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<48>, ct::dtype<double>>, 1, 9, 9>{}.all();
}

TEST_CASE("no heap allocation in fill_cross_cache, step, step_ragged, truncate") {
    using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::norm_first<true>>;
    using G = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<2>, ct::ffn_dim<48>, ct::dtype<double>>;
    static L::Params p;
    static G::Params g;
    static L::KVCache<2, 16> cache;
    static L::CrossKVCache<2, 9> cc;
    static L::StepWorkspace<2, 3> ws;
    static G::KVCache<1, 16> gcache;
    static G::StepWorkspace<1, 1> gws;
    static ct::Tensor<float, 2, 9, 32> mem;
    static ct::Tensor<float, 2, 3, 32> x, y;
    static ct::Tensor<double, 1, 1, 32> gx, gy;
    ref::randomize(p, 1);
    ref::randomize(g, 2);
    ref::randomize_tensor(mem, 3);
    ref::randomize_tensor(x, 4);
    ref::randomize_tensor(gx, 5);
    bool ok = true;
    const std::size_t n = alloc_counter::during([&] {
        L::fill_cross_cache(p, ws, cc, mem);
        for (int i = 0; i < 4; ++i) ok = ok && L::step(p, ws, cache, cc, x, y, ct::causal{}, ct::key_lengths{9, 5}).ok();
        ok = ok && L::step_ragged(p, ws, cache, cc, x, y, std::array<std::size_t, 2>{1, 3}, ct::causal{}).ok();
        ok = ok && cache.truncate_all(2).ok();
        for (int i = 0; i < 16; ++i) ok = ok && G::step(g, gws, gcache, gx, gy, ct::causal{}).ok();
        ok = ok && G::step(g, gws, gcache, gx, gy, ct::causal{}).code == ct::errc::cache_full;
    });
    CHECK(ok);
    CHECK(n == 0);
}

TEST_CASE("no heap allocation in stacks, the GPT (train, step, generate), optimizers and checkpoints") {
    using L = ct::DecoderLayer<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>>;
    using S = ct::DecoderStack<L, 2>;
    using Blk = ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::norm_first<true>>;
    using M = ct::GPT<13, 8, Blk, 2>;
    using MT = ct::GPT<13, 8, Blk, 2, ct::tied_embeddings<true>, ct::positions<ct::sinusoidal>>;
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
        adam.step(mp, mg, ct::cosine_warmup{1e-3, 2, 10});
        sgd.step(mp, mg);
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
#endif  // CT_ALLOC_SANITIZED
