// Instructions per call, for callgrind (scripts/instruction_counts): not a timing. Runs `n` calls
// of one entry point on the calling thread; the script counts n = 10 and n = 30 and divides the
// difference by 20, so start-up and first-touch costs cancel.
//   instruction_counts tiny_forward|tiny_train|base_step|llama_step N
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <ctformer/ctformer.hpp>

namespace {
template <class P> void fill(P& p) {
    unsigned s = 17;
    ct::for_each_tensor(p, [&](std::string_view name, auto& t) {
        const bool gamma = name.ends_with("norm.weight") || name.starts_with("norm");
        for (std::size_t i = 0; i < t.size; ++i) {
            s = s * 1103515245u + 12345u;
            t.storage[i] = gamma ? 1.0f : (float((s >> 9) & 0xffff) / 65536.0f - 0.5f) * 0.1f;
        }
    });
}
template <class X> void fill_tensor(X& x) {
    for (std::size_t i = 0; i < x.size; ++i) x.storage[i] = float((i * 7919) % 1000) / 1000.0f - 0.5f;
}

using Tiny = ct::DecoderLayer<ct::d_model<64>, ct::heads<4>, ct::ffn_dim<256>>;
using Base = ct::DecoderLayer<ct::d_model<512>, ct::heads<8>, ct::ffn_dim<2048>>;
using Llama = ct::LlamaBlock<ct::d_model<256>, ct::heads<4>, ct::ffn_dim<1024>, ct::max_positions<64>>;

struct tiny_rig {
    static inline Tiny::Params p;
    static inline Tiny::Grads g;
    static inline Tiny::Workspace<1, 16, 16> ws;
    static inline Tiny::TrainWorkspace<1, 16, 16> tws;
    static inline Tiny::Activations<1, 16, 16> acts;
    static inline ct::Tensor<float, 1, 16, 64> tgt, out, d_out, d_tgt;
    static inline ct::Tensor<float, 1, 16, 64> mem, d_mem;
};

int run(const char* what, int n) {
    if (!std::strcmp(what, "tiny_forward") || !std::strcmp(what, "tiny_train")) {
        using R = tiny_rig;
        fill(R::p);
        fill_tensor(R::tgt);
        fill_tensor(R::mem);
        fill_tensor(R::d_out);
        const bool train = !std::strcmp(what, "tiny_train");
        const ct::dropout_config none{0.0f, 0.0f, 0.0f, 0, 0};
        for (int i = 0; i < n; ++i) {
            if (!train) {
                (void)Tiny::forward(R::p, R::ws, R::tgt, R::mem, R::out, ct::causal{});
            } else {
                Tiny::forward_train(R::p, R::tws, R::acts, R::tgt, R::mem, R::out, none, ct::causal{});
                if (!Tiny::backward(R::p, R::acts, R::tws, R::d_out, R::g, R::d_tgt, R::d_mem, ct::causal{})) return 1;
            }
        }
        std::printf("%g\n", double(R::out.storage[0]) + double(R::d_tgt.storage[0]));
        return 0;
    }
    if (!std::strcmp(what, "base_step")) {
        static Base::Params p;
        static Base::KVCache<1, 128> cache;
        static Base::CrossKVCache<1, 128> cc;
        static Base::StepWorkspace<1, 1> ws;
        static ct::Tensor<float, 1, 1, 512> x, y;
        static ct::Tensor<float, 1, 128, 512> mem;
        fill(p);
        fill_tensor(mem);
        fill_tensor(x);
        Base::fill_cross_cache(p, ws, cc, mem);
        for (std::size_t t = 0; t + 1 < 128; ++t) (void)Base::step(p, ws, cache, cc, x, y, ct::causal{});
        for (int i = 0; i < n; ++i) {
            (void)cache.truncate_all(127);
            if (!Base::step(p, ws, cache, cc, x, y, ct::causal{})) return 1;
        }
        std::printf("%g\n", double(y.storage[0]));
        return 0;
    }
    if (!std::strcmp(what, "llama_step")) {
        static Llama::Params p;
        static Llama::KVCache<1, 64> cache;
        static Llama::StepWorkspace<1, 1> ws;
        static ct::Tensor<float, 1, 1, 256> x, y;
        fill(p);
        fill_tensor(x);
        for (std::size_t t = 0; t + 1 < 64; ++t) (void)Llama::step(p, ws, cache, x, y, ct::causal{});
        for (int i = 0; i < n; ++i) {
            (void)cache.truncate_all(63);
            if (!Llama::step(p, ws, cache, x, y, ct::causal{})) return 1;
        }
        std::printf("%g\n", double(y.storage[0]));
        return 0;
    }
    std::fprintf(stderr, "usage: instruction_counts tiny_forward|tiny_train|base_step|llama_step N\n");
    return 2;
}
}  // namespace

int main(int argc, char** argv) { return argc == 3 ? run(argv[1], std::atoi(argv[2])) : run("", 0); }
