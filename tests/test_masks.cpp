// Every mask kind and combination against the scalar reference with the equivalent dense mask.
#include "common.hpp"
#include "reference.hpp"

namespace {

constexpr std::size_t B = 2, T = 5, S = 7, D = 16, H = 4, F = 32;
using L = ct::DecoderLayer<ct::d_model<D>, ct::heads<H>, ct::ffn_dim<F>>;

struct Setup {
    static inline L::Params params;
    static inline L::Workspace<B, T, S> ws;
    static inline ct::Tensor<float, B, T, D> tgt, out;
    static inline ct::Tensor<float, B, S, D> mem;
    ref::config cfg{B, T, S, D, H, F};
    ref::params rp;
    Setup() {
        ref::randomize(params, 11);
        ref::randomize_tensor(tgt, 12);
        ref::randomize_tensor(mem, 13);
        rp = ref::read_params(params);
    }
    // Dense additive mask (B, H, Tq, Sk) from f(b, h, i, j) -> additive value.
    template <class Fn> static ref::vec dense(std::size_t Tq, std::size_t Sk, Fn f) {
        ref::vec m(B * H * Tq * Sk);
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t h = 0; h < H; ++h)
                for (std::size_t i = 0; i < Tq; ++i)
                    for (std::size_t j = 0; j < Sk; ++j) m[((b * H + h) * Tq + i) * Sk + j] = f(b, h, i, j);
        return m;
    }
    template <class SM, class CM> void check(const char* what, const SM& sm, const CM& cm, const ref::vec& sd,
                                             const ref::vec& cd) {
        L::forward(params, ws, tgt, mem, out, sm, cm);
        const ref::vec want = ref::forward(cfg, rp, ref::to_vec(tgt), ref::to_vec(mem), sd, cd);
        for (float v : out.storage) REQUIRE_MESSAGE(std::isfinite(v), what << ": non-finite output");
        CHECK_CLOSE(what, out.data(), want.data(), out.size, test::ref_tol<float>);
    }
};
const double INF = std::numeric_limits<double>::infinity();
double blk(bool blocked) { return blocked ? -INF : 0.0; }

}  // namespace

TEST_CASE("masks: none, causal, memory-causal") {
    Setup s;
    s.check("no masks", ct::no_mask{}, ct::no_mask{}, {}, {});
    s.check("causal", ct::causal{}, ct::no_mask{}, Setup::dense(T, T, [](auto, auto, auto i, auto j) { return blk(j > i); }), {});
    s.check("memory causal", ct::no_mask{}, ct::causal{}, {},
            Setup::dense(T, S, [](auto, auto, auto i, auto j) { return blk(j > i); }));
}

TEST_CASE("masks: key padding from lengths and from bool tensors, both polarities") {
    Setup s;
    const std::size_t lt[B] = {5, 2}, ls[B] = {3, 7};
    auto sd = Setup::dense(T, T, [&](auto b, auto, auto, auto j) { return blk(j >= lt[b]); });
    auto cd = Setup::dense(T, S, [&](auto b, auto, auto, auto j) { return blk(j >= ls[b]); });
    s.check("key_lengths", ct::key_lengths{5, 2}, ct::key_lengths{3, 7}, sd, cd);

    static ct::Tensor<bool, B, T> tp, tp_keep;
    static ct::Tensor<bool, B, S> sp, sp_keep;
    for (std::size_t b = 0; b < B; ++b) {
        for (std::size_t j = 0; j < T; ++j) tp_keep(b, j) = !(tp(b, j) = j >= lt[b]);
        for (std::size_t j = 0; j < S; ++j) sp_keep(b, j) = !(sp(b, j) = j >= ls[b]);
    }
    s.check("key_padding blocked_if_true", ct::key_padding(tp), ct::key_padding(sp), sd, cd);
    s.check("key_padding kept_if_true", ct::key_padding(tp_keep, ct::kept_if_true{}),
            ct::key_padding(sp_keep, ct::kept_if_true{}), sd, cd);
}

TEST_CASE("masks: explicit bool / additive, shared and per head") {
    Setup s;
    ref::lcg g{99};
    static ct::Tensor<bool, T, T> sb, sb_keep;
    static ct::Tensor<float, T, S> ca;
    static ct::Tensor<bool, B * H, T, S> ch;
    static ct::Tensor<float, B, H, T, T> sh4;
    for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j < T; ++j) sb_keep(i, j) = !(sb(i, j) = j > 0 && g.next() < -0.3);
    for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j < S; ++j) ca(i, j) = g.next() < -0.5 ? -INFINITY : static_cast<float>(0.5 * g.next());
    for (std::size_t x = 0; x < ch.size; ++x) ch.storage[x] = g.next() < -0.4;
    for (std::size_t x = 0; x < sh4.size; ++x) sh4.storage[x] = static_cast<float>(g.next());

    auto sd = Setup::dense(T, T, [&](auto, auto, auto i, auto j) { return blk(sb(i, j)); });
    auto cd = Setup::dense(T, S, [&](auto, auto, auto i, auto j) { return static_cast<double>(ca(i, j)); });
    s.check("bool (T,T) + additive (T,S)", ct::mask_from(sb), ct::mask_from(ca), sd, cd);
    s.check("bool kept_if_true", ct::mask_from(sb_keep, ct::kept_if_true{}), ct::mask_from(ca), sd, cd);

    auto sd4 = Setup::dense(T, T, [&](auto b, auto h, auto i, auto j) { return static_cast<double>(sh4(b, h, i, j)); });
    auto cdh = Setup::dense(T, S, [&](auto b, auto h, auto i, auto j) { return blk(ch(b * H + h, i, j)); });
    s.check("additive (B,H,T,T) + bool (B*H,T,S)", ct::mask_from(sh4), ct::mask_from(ch), sd4, cdh);
}

TEST_CASE("masks: combinations and fully blocked rows give zeros, never NaN") {
    Setup s;
    static ct::Tensor<float, T, T> add;
    ref::lcg g{5};
    for (auto& v : add.storage) v = static_cast<float>(g.next());
    auto sd = Setup::dense(T, T, [&](auto b, auto, auto i, auto j) {
        const std::size_t len[B] = {4, 3};
        return (j > i || j >= len[b]) ? -INF : static_cast<double>(add(i, j));
    });
    // Batch row 1 of memory is entirely padded: its cross-attention outputs are zero.
    auto cd = Setup::dense(T, S, [&](auto b, auto, auto i, auto j) { return blk(b == 1 || j > i + 1); });
    static ct::Tensor<bool, T, S> diag_plus_one;
    for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j < S; ++j) diag_plus_one(i, j) = j > i + 1;
    s.check("causal && lengths && additive, lengths(0) && bool", ct::causal{} && ct::key_lengths{4, 3} && ct::mask_from(add),
            ct::key_lengths{7, 0} && ct::mask_from(diag_plus_one), sd, cd);
}

TEST_CASE("masks: shapes are checked at compile time") {
    // Positive compile-time checks; the negative ones are the compile-fail tests.
    static_assert(ct::causal::fits<float, 2, 4, 5, 5>);
    static_assert(ct::key_lengths<2>::fits<float, 2, 4, 5, 7>);
    static_assert(!ct::key_lengths<3>::fits<float, 2, 4, 5, 7>);
    static_assert(decltype(ct::mask_from(std::declval<ct::Tensor<bool, 5, 7>&>()))::fits<float, 2, 4, 5, 7>);
    static_assert(!decltype(ct::mask_from(std::declval<ct::Tensor<bool, 5, 7>&>()))::fits<float, 2, 4, 5, 5>);
    static_assert(!decltype(ct::mask_from(std::declval<ct::Tensor<double, 5, 7>&>()))::fits<float, 2, 4, 5, 7>);
    static_assert(!decltype(ct::mask_from(std::declval<ct::Tensor<bool, 6, 5, 7>&>()))::fits<float, 2, 4, 5, 7>);
    static_assert(decltype(ct::mask_from(std::declval<ct::Tensor<bool, 2, 4, 5, 7>&>()))::fits<float, 2, 4, 5, 7>);
    static_assert(!decltype(ct::mask_from(std::declval<ct::Tensor<bool, 4, 2, 5, 7>&>()))::fits<float, 2, 4, 5, 7>);
    CHECK(true);
}
