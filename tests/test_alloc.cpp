// Zero heap allocations in forward (eval and training), backward, and steps, in every
// configuration and mask kind (models, optimizers, checkpoints: test_alloc_models.cpp).
// This binary replaces operator new and malloc to count (tests/alloc_counter.hpp). A sanitizer
// replaces them too, so under one this test only says it is skipped (the plain builds run it).
#include "alloc_counter.hpp"
#ifndef CT_ALLOC_SANITIZED
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

TEST_CASE("no heap allocation in advise_huge_pages") {
    alignas(ct::huge_page_bytes) static unsigned char buffer[ct::huge_page_bytes];
    static float small[64];
    CHECK(alloc_counter::during([] {
        (void)ct::advise_huge_pages(buffer);
        (void)ct::advise_huge_pages(small);
        (void)ct::advise_huge_pages(nullptr, 1);
    }) == 0);
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
#endif  // CT_ALLOC_SANITIZED
