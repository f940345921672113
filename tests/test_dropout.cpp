// Dropout: Philox known answers, statistics, reproducibility, eval identity, and the training
// forward against the scalar reference drawing the same documented stream.
#include "common.hpp"
#include "reference.hpp"

TEST_CASE("dropout: Philox-4x32-10 known-answer vectors (Random123)") {
    using A = std::array<std::uint32_t, 4>;
    CHECK(ct::philox4x32({0, 0, 0, 0}, {0, 0}) == A{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
    CHECK(ct::philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
          A{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
    CHECK(ct::philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
          A{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("dropout: drop rate, scaling and reproducibility") {
    for (float p : {0.1f, 0.5f, 0.9f}) {
        ct::dropout_rng rng(ct::dropout_config{p, -1, -1, 1234, 7});
        static std::vector<float> x;
        x.assign(100003, 1.0f);
        rng.apply(x.data(), x.size(), ct::dropout_site::ffn_out, 42);
        std::size_t zeros = 0, badly_scaled = 0;
        double sum = 0;
        for (float v : x) {
            zeros += v == 0.0f;
            badly_scaled += v != 0.0f && std::fabs(v - 1.0 / (1.0 - p)) > 1e-5;
            sum += v;
        }
        CHECK(badly_scaled == 0);
        const double rate = static_cast<double>(zeros) / static_cast<double>(x.size());
        INFO("p=" << p << " measured drop rate " << rate << " mean " << sum / x.size());
        // 5 sigma of a binomial with n = 100003
        CHECK(std::fabs(rate - p) < 5 * std::sqrt(p * (1 - p) / 100003.0));
        CHECK(std::fabs(sum / x.size() - 1.0) < 0.03);
        std::vector<float> y(x.size(), 1.0f);
        rng.apply(y.data(), y.size(), ct::dropout_site::ffn_out, 42);
        CHECK(x == y);  // same (seed, step, site, row): same mask
        std::vector<float> z(x.size(), 1.0f);
        ct::dropout_rng(ct::dropout_config{p, -1, -1, 1234, 8}).apply(z.data(), z.size(), ct::dropout_site::ffn_out, 42);
        CHECK(x != z);  // another step: another mask
    }
    // A prefix of a row draws the same numbers as the whole row (independent of length/width).
    ct::dropout_rng rng(ct::dropout_config{0.5f, -1, -1, 9, 0});
    std::vector<double> a(37, 1.0), b(13, 1.0);
    rng.apply(a.data(), a.size(), ct::dropout_site::self_attn_out, 3);
    rng.apply(b.data(), b.size(), ct::dropout_site::self_attn_out, 3);
    CHECK(std::equal(b.begin(), b.end(), a.begin()));
}

namespace {
constexpr std::size_t B = 2, T = 6, S = 5, D = 16, H = 2, F = 24;
template <class L> struct Train {
    using V = typename L::T;
    static inline typename L::Params params;
    static inline typename L::template Workspace<B, T, S> ws;
    static inline ct::Tensor<V, B, T, D> tgt, out, out2;
    static inline ct::Tensor<V, B, S, D> mem;
    Train() {
        ref::randomize(params, 31);
        ref::randomize_tensor(tgt, 32);
        ref::randomize_tensor(mem, 33);
    }
};
}  // namespace

TEST_CASE("dropout: training forward equals the reference at all six sites, pre and post norm") {
    using L = ct::DecoderLayer<ct::d_model<D>, ct::heads<H>, ct::ffn_dim<F>, ct::dtype<double>>;
    using LP = ct::DecoderLayer<ct::d_model<D>, ct::heads<H>, ct::ffn_dim<F>, ct::norm_first<true>>;
    const ct::dropout_config dc{0.2f, 0.3f, 0.4f, 77, 5};
    ref::config c{B, T, S, D, H, F};
    c.train = true;
    c.drop = dc;
    {
        Train<L> t;
        L::forward_train(t.params, t.ws, t.tgt, t.mem, t.out, dc, ct::causal{});
        ref::vec causal(B * H * T * T);
        for (std::size_t x = 0; x < causal.size(); ++x) causal[x] = x % T > (x / T) % T ? ref::NEG_INF : 0.0;
        const ref::vec want = ref::forward(c, ref::read_params(t.params), ref::to_vec(t.tgt), ref::to_vec(t.mem), causal, {});
        CHECK_CLOSE("train post-norm double", t.out.data(), want.data(), t.out.size, test::ref_tol<double>);
        // Reproducible; and different from eval.
        L::forward_train(t.params, t.ws, t.tgt, t.mem, t.out2, dc, ct::causal{});
        CHECK(std::equal(t.out.storage, t.out.storage + t.out.size, t.out2.storage));
        L::forward(t.params, t.ws, t.tgt, t.mem, t.out2, ct::causal{});
        CHECK(test::compare(t.out.data(), t.out2.data(), t.out.size).max_abs > 1e-3);
    }
    {
        Train<LP> t;
        c.pre_norm = true;
        LP::forward_train(t.params, t.ws, t.tgt, t.mem, t.out, dc);
        const ref::vec want = ref::forward(c, ref::read_params(t.params), ref::to_vec(t.tgt), ref::to_vec(t.mem), {}, {});
        CHECK_CLOSE("train pre-norm float", t.out.data(), want.data(), t.out.size, test::ref_tol<float>);
    }
}

TEST_CASE("dropout: p = 0 training forward is exactly the eval forward") {
    using L = ct::DecoderLayer<ct::d_model<D>, ct::heads<H>, ct::ffn_dim<F>>;
    Train<L> t;
    L::forward_train(t.params, t.ws, t.tgt, t.mem, t.out, ct::dropout_config{0.0f, 0.0f, 0.0f, 1, 1});
    L::forward(t.params, t.ws, t.tgt, t.mem, t.out2);
    CHECK(std::equal(t.out.storage, t.out.storage + t.out.size, t.out2.storage));
}
