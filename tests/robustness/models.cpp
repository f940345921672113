// The model surfaces under bad input (docs/robustness.md, "Models" and "Options"): every
// multi-layer call is all-or-nothing, every option is validated, sampling is defined on any
// logits, capacity checks cannot wrap. One regression case per defect found, then a property test that drives a stack and a GPT with random valid and invalid calls.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common.hpp"
#include "reference.hpp"

namespace {

constexpr float nan_f = std::numeric_limits<float>::quiet_NaN(), inf_f = std::numeric_limits<float>::infinity();
constexpr std::size_t D = 16;

// Post-norm blocks with check_finite: a 1e25 input is finite, but the first layer's attention
// scores overflow (docs/robustness.md: post-norm is finite up to ~1e19), so layer 1 sees NaN/inf.
using CheckedBlock = ct::DecoderOnlyBlock<ct::d_model<D>, ct::heads<2>, ct::ffn_dim<32>, ct::check_finite<true>>;
using CheckedStack = ct::DecoderStack<CheckedBlock, 3>;
using CheckedDec = ct::DecoderLayer<ct::d_model<D>, ct::heads<2>, ct::ffn_dim<32>, ct::check_finite<true>>;
using CheckedDecStack = ct::DecoderStack<CheckedDec, 2>;
using Block = ct::DecoderOnlyBlock<ct::d_model<D>, ct::heads<2>, ct::ffn_dim<32>, ct::norm_first<true>,
                                   ct::activation<ct::gelu>>;
using Gpt = ct::GPT<11, 12, 2, Block>;
using CheckedGpt = ct::GPT<11, 12, 2, CheckedBlock>;

template <class X> std::vector<unsigned char> bytes_of(const X& x) {
    std::vector<unsigned char> v(sizeof x);
    std::memcpy(v.data(), &x, sizeof x);
    return v;
}
template <class X> void fill(X& x, float v) {
    for (auto& e : x.storage) e = v;
}
template <class Cache, std::size_t N> bool lengths_agree(const Cache& c, std::size_t b) {
    for (std::size_t i = 1; i < N; ++i)
        if (c.layer(i).length(b) != c.layer(0).length(b)) return false;
    return true;
}

}  // namespace

// ---- 1. a stack call that fails after its first layer: nothing observable changes ----
TEST_CASE("model robustness: a stack step failing in a later layer changes no cache and no output, and names the layer") {
    static CheckedStack::Params p;
    static CheckedStack::KVCache<1, 8> cache;
    static CheckedStack::StepWorkspace<1, 1> ws;
    static ct::Tensor<float, 1, 1, D> x, y;
    ref::randomize(p, 3);
    ref::randomize_tensor(x, 4);
    REQUIRE(CheckedStack::step(p, ws, cache, x, y).ok());
    fill(x, 1e25f);  // finite: the call's input passes; layer 0's output does not
    fill(y, 42.0f);
    const ct::status st = CheckedStack::step(p, ws, cache, x, y);
    CHECK(st.code == ct::errc::non_finite);
    CHECK(st.tensor_name() == "layers.0 output");
    for (float v : y.storage) REQUIRE(v == 42.0f);
    for (std::size_t i = 0; i < 3; ++i) CHECK(cache.layer(i).length(0) == 1);
    // x aliasing y (the stack runs in place): the same
    y = x;
    CHECK(CheckedStack::step(p, ws, cache, y, y).code == ct::errc::non_finite);
    for (float v : y.storage) REQUIRE(v == 1e25f);
    for (std::size_t i = 0; i < 3; ++i) CHECK(cache.layer(i).length(0) == 1);
    // and the cache still works: the next good step continues from length 1 in every layer
    ref::randomize_tensor(x, 5);
    REQUIRE(CheckedStack::step(p, ws, cache, x, y).ok());
    for (std::size_t i = 0; i < 3; ++i) CHECK(cache.layer(i).length(0) == 2);
}

TEST_CASE("model robustness: stack forward and forward_train failing in a later layer leave out untouched") {
    static CheckedStack::Params p;
    static CheckedStack::Workspace<1, 4> ws;
    static CheckedStack::TrainWorkspace<1, 4> tws;
    static CheckedStack::Activations<1, 4> acts;
    static ct::Tensor<float, 1, 4, D> x, out;
    ref::randomize(p, 3);
    fill(x, 1e25f);
    fill(out, 42.0f);
    ct::status st = CheckedStack::forward(p, ws, x, out, ct::causal{});
    CHECK(st.code == ct::errc::non_finite);
    CHECK(st.tensor_name() == "layers.0 output");
    for (float v : out.storage) REQUIRE(v == 42.0f);
    st = CheckedStack::forward_train(p, tws, acts, x, out, ct::dropout_config{0.0f, 0.0f, 0.0f, 0, 0}, ct::causal{});
    CHECK(st.code == ct::errc::non_finite);
    CHECK(st.tensor_name() == "layers.0 output");
    CHECK_FALSE(acts.filled);
    for (float v : out.storage) REQUIRE(v == 42.0f);
    // in place (out = tgt): tgt keeps its values
    CHECK(CheckedStack::forward(p, ws, x, x, ct::causal{}).code == ct::errc::non_finite);
    for (float v : x.storage) REQUIRE(v == 1e25f);
    // a good call still works, in place too
    ref::randomize_tensor(x, 6);
    REQUIRE(CheckedStack::forward(p, ws, x, out, ct::causal{}).ok());
    REQUIRE(CheckedStack::forward(p, ws, x, x, ct::causal{}).ok());
    CHECK(std::memcmp(x.storage, out.storage, sizeof out.storage) == 0);
}

TEST_CASE("model robustness: GPT::generate rolls back a prompt that fails in a later layer") {
    static CheckedGpt::Params p;
    static CheckedGpt::KVCache<1, 12> cache;
    static CheckedGpt::GenerateWorkspace<2> gws;
    ref::randomize(p, 8);
    for (auto& w : p.tok_embeddings.weight.storage) w = 1e25f;  // finite embeddings that overflow layer 0
    const ct::token prompt[3] = {1, 2, 3};
    std::size_t calls = 0;
    const ct::status st = CheckedGpt::generate(p, gws, cache, prompt, 3, 4, ct::sampling{.temperature = 0},
                                               [&](ct::token) { return ++calls > 0; });
    CHECK(st.code == ct::errc::non_finite);
    CHECK(st.tensor_name() == "layers.0 output");
    CHECK(calls == 0);
    CHECK(cache.length(0) == 0);
    CHECK(lengths_agree<CheckedGpt::KVCache<1, 12>, 2>(cache, 0));
}

// ---- 2. generate with a bad id in a later prompt chunk ----
TEST_CASE("model robustness: generate checks the whole prompt before feeding any of it") {
    static Gpt::Params p;
    static Gpt::KVCache<1, 12> cache;
    static Gpt::GenerateWorkspace<2> gws;
    ref::randomize(p, 9);
    const ct::token prompt[5] = {1, 2, 3, 4, 11};  // 11 = vocab: bad, in the third chunk
    const ct::status st = Gpt::generate(p, gws, cache, prompt, 5, 2, ct::sampling{}, [](ct::token) { return true; });
    CHECK(st.code == ct::errc::out_of_range);
    CHECK(st.tensor_name() == "prompt");
    CHECK(cache.length(0) == 0);
}

// ---- 8. capacity checks that cannot wrap ----
TEST_CASE("model robustness: generate with n_prompt near SIZE_MAX is cache_full, nothing fed") {
    static Gpt::Params p;
    static Gpt::KVCache<1, 12> cache;
    static Gpt::GenerateWorkspace<2> gws;
    ref::randomize(p, 9);
    const ct::token prompt[3] = {1, 2, 3};
    REQUIRE(Gpt::generate(p, gws, cache, prompt, 3, 1, ct::sampling{.temperature = 0}, [](ct::token) { return true; }).ok());
    REQUIRE(cache.length(0) == 3);
    for (std::size_t n : {SIZE_MAX, SIZE_MAX - 2, SIZE_MAX - 3}) {
        const ct::status st = Gpt::generate(p, gws, cache, prompt, n, 1, ct::sampling{}, [](ct::token) { return true; });
        CHECK(st.code == ct::errc::cache_full);
        CHECK(cache.length(0) == 3);
    }
}

// ---- 3. sampling: options checked, non-finite logits defined ----
TEST_CASE("model robustness: sampling options are validated") {
    const float bad_t[] = {nan_f, inf_f, -inf_f};
    for (float t : bad_t) CHECK(ct::sampling{.temperature = t}.validate().code == ct::errc::invalid_option);
    const float bad_p[] = {nan_f, -0.1f, 1.5f, inf_f};
    for (float tp : bad_p) {
        const ct::status st = ct::sampling{.top_p = tp}.validate();
        CHECK(st.code == ct::errc::invalid_option);
        CHECK(st.tensor_name() == "top_p");
    }
    CHECK(ct::sampling{.temperature = nan_f}.validate().tensor_name() == "temperature");
    CHECK(ct::sampling{}.validate().ok());
    CHECK(ct::sampling{.temperature = 0, .top_k = 3, .top_p = 0}.validate().ok());
    // through generate: an error before anything is fed
    static Gpt::Params p;
    static Gpt::KVCache<1, 12> cache;
    static Gpt::GenerateWorkspace<2> gws;
    ref::randomize(p, 9);
    const ct::token prompt[2] = {1, 2};
    std::size_t calls = 0;
    CHECK(Gpt::generate(p, gws, cache, prompt, 2, 3, ct::sampling{.temperature = nan_f, .top_k = 3},
                        [&](ct::token) { return ++calls > 0; })
              .code == ct::errc::invalid_option);
    CHECK(calls == 0);
    CHECK(cache.length(0) == 0);
}

TEST_CASE("model robustness: sampling over NaN or +inf logits is non_finite; -inf logits are never chosen") {
    static ct::sampler_scratch<float, 6> sc;
    float logits[6] = {0.5f, 2.0f, -1.0f, 0.0f, 1.0f, -3.0f};
    const ct::sampling greedy{.temperature = 0}, hot{.temperature = 1.0f, .seed = 3},
        filtered{.temperature = 0.7f, .top_k = 3, .top_p = 0.9f, .seed = 3};
    for (const ct::sampling& s : {greedy, hot, filtered}) {
        ct::token t = -7;
        REQUIRE(ct::sample(logits, s, 0, sc, t).ok());
        CHECK(t >= 0);
        CHECK(t < 6);
        for (float bad : {nan_f, inf_f}) {
            float l[6];
            std::memcpy(l, logits, sizeof l);
            l[2] = bad;
            t = -7;
            const ct::status st = ct::sample(l, s, 0, sc, t);
            CHECK(st.code == ct::errc::non_finite);
            CHECK(st.tensor_name() == "logits");
            CHECK(t == -7);  // untouched
        }
        // -inf is a blocked token: never drawn, whatever the draw
        float l[6] = {-inf_f, -inf_f, 0.0f, -inf_f, 0.1f, -inf_f};
        for (std::uint64_t c = 0; c < 200; ++c) {
            REQUIRE(ct::sample(l, s, c, sc, t).ok());
            CHECK((t == 2 || t == 4));
        }
        float none[6] = {-inf_f, -inf_f, -inf_f, -inf_f, -inf_f, -inf_f};
        CHECK(ct::sample(none, s, 0, sc, t).code == ct::errc::non_finite);
    }
    // bad options through sample itself
    ct::token t = -7;
    CHECK(ct::sample(logits, ct::sampling{.temperature = nan_f}, 0, sc, t).code == ct::errc::invalid_option);
    CHECK(t == -7);
    // a bias that overflows the logits' type to +inf is non_finite, as a +inf logit is
    const float huge[6] = {3e38f, 0.f, 0.f, 0.f, 0.f, 0.f};
    const ct::logit_bias push[] = {{0, 3e38f}};
    for (const float temperature : {0.f, 0.8f}) {
        const ct::status st = ct::sample(huge, ct::sampling{.temperature = temperature, .bias = push}, 0, sc, t);
        CHECK(st.code == ct::errc::non_finite);
        CHECK(t == -7);
    }
    // a tiny temperature over large double logits does not overflow to NaN: it is (nearly) greedy
    static ct::sampler_scratch<double, 3> scd;
    const double big[3] = {1e300, -1e300, 9e299};
    REQUIRE(ct::sample(big, ct::sampling{.temperature = 1e-30f, .seed = 1}, 0, scd, t).ok());
    CHECK(t == 0);
}

// ---- 4. optimizer options ----
template <class Opt, class Set> void rejected(Set&& set, const char* field) {
    static Gpt::Params p, p0;
    static Gpt::Grads g;
    static Opt opt;
    ref::randomize(p, 1);
    ref::randomize(g, 2);
    p0 = p;
    opt = Opt{};
    set(opt.options);
    const auto state = bytes_of(opt);
    const ct::status st = opt.step(p, g);
    INFO(field);
    CHECK(st.code == ct::errc::invalid_option);
    CHECK(st.tensor_name() == field);
    CHECK(std::memcmp(&p, &p0, sizeof p) == 0);
    CHECK(bytes_of(opt) == state);
}

TEST_CASE("model robustness: AdamW and SGD options are validated before any write") {
    using A = ct::AdamW<Gpt::Params>;
    using S = ct::SGD<Gpt::Params>;
    constexpr double nan_d = std::numeric_limits<double>::quiet_NaN(), inf_d = std::numeric_limits<double>::infinity();
    for (double v : {nan_d, inf_d, -1e-3}) rejected<A>([v](auto& o) { o.lr = v; }, "lr");
    for (double v : {nan_d, 1.0, -0.1}) rejected<A>([v](auto& o) { o.beta1 = v; }, "beta1");
    for (double v : {nan_d, 1.0, 1.5}) rejected<A>([v](auto& o) { o.beta2 = v; }, "beta2");
    for (double v : {nan_d, 0.0, -1e-8, 1e-60}) rejected<A>([v](auto& o) { o.eps = v; }, "eps");  // 1e-60: 0 in float
    for (double v : {nan_d, -1e-2, inf_d}) rejected<A>([v](auto& o) { o.weight_decay = v; }, "weight_decay");
    rejected<A>([](auto& o) { o.lr = 1e300; }, "lr");  // finite, but lr / (1 - beta1) is inf in float
    for (double v : {nan_d, inf_d, -1.0}) rejected<S>([v](auto& o) { o.lr = v; }, "lr");
    for (double v : {nan_d, -0.5}) rejected<S>([v](auto& o) { o.momentum = v; }, "momentum");
    rejected<S>([](auto& o) { o.dampening = nan_d; }, "dampening");
    rejected<S>([](auto& o) { o.weight_decay = -1; }, "weight_decay");
    rejected<S>([](auto& o) { o.nesterov = true, o.momentum = 0; }, "nesterov");  // PyTorch: needs momentum, no dampening
    rejected<S>([](auto& o) { o.nesterov = true, o.momentum = 0.9, o.dampening = 0.1; }, "nesterov");
    // a schedule that yields NaN is the same error
    static Gpt::Params p;
    static Gpt::Grads g;
    static A opt;
    CHECK(opt.step(p, g, [](std::size_t) { return std::numeric_limits<double>::quiet_NaN(); }).code ==
          ct::errc::invalid_option);
    CHECK(opt.steps() == 0);
    // valid options: every parameter finite after a step, the packed weights' padding still zero
    ref::randomize(p, 1);
    ref::randomize(g, 2);
    opt.options.eps = 1e-30;  // tiny but representable
    REQUIRE(opt.step(p, g).ok());
    bool finite = true;
    ct::zip_storage([&](std::size_t n, const float* x) {
        for (std::size_t i = 0; i < n; ++i) finite = finite && std::isfinite(x[i]);
    }, static_cast<const Gpt::Params&>(p));
    CHECK(finite);
}

// ---- 5. the checkpoint's step counter ----
TEST_CASE("model robustness: a checkpoint's step counter must be a non-negative integer in range; nothing written otherwise") {
    static Gpt::Params p, fresh_p, zero_p;
    static ct::AdamW<Gpt::Params> opt, fresh_opt;
    static std::byte buf[1 << 19];
    static ct::safetensors::file<256> f;
    ref::randomize(p, 1);
    for (double bad : {-1.0, 0.5, 1e300, 18446744073709551616.0, std::numeric_limits<double>::quiet_NaN()}) {
        opt.step_count.storage[0] = bad;
        const ct::save_result saved = ct::save_checkpoint(std::span<std::byte>(buf), p, opt);
        REQUIRE(saved.st.ok());
        REQUIRE(f.parse(std::span<const std::byte>(buf, saved.bytes)).ok());
        const ct::status st = ct::load_checkpoint(f, fresh_p, fresh_opt);
        INFO("step_count " << bad);
        CHECK(!st.ok());
        CHECK((st.code == ct::errc::value_out_of_range || st.code == ct::errc::non_finite));  // NaN: the loader's own check
        CHECK(st.tensor_name().ends_with("step_count"));
        CHECK(std::memcmp(&fresh_p, &zero_p, sizeof p) == 0);
        CHECK(fresh_opt.steps() == 0);
    }
    // a negative second moment (sqrt of it is NaN) is refused the same way
    opt.step_count.storage[0] = 2;
    opt.exp_avg_sq.tok_embeddings.weight.storage[5] = -1.0f;
    const ct::save_result saved = ct::save_checkpoint(std::span<std::byte>(buf), p, opt);
    REQUIRE(f.parse(std::span<const std::byte>(buf, saved.bytes)).ok());
    const ct::status st = ct::load_checkpoint(f, fresh_p, fresh_opt);
    CHECK(st.code == ct::errc::value_out_of_range);
    CHECK(st.tensor_name() == "optimizer.exp_avg_sq.wte.weight");
    CHECK(std::memcmp(&fresh_p, &zero_p, sizeof p) == 0);
    // the same moment stored as BF16 or F16 (a checkpoint converted by other tools): refused too
    for (const char* type : {"BF16", "F16"}) {
        ct::safetensors::file<256> g;
        REQUIRE(g.parse(std::span<const std::byte>(buf, saved.bytes)).ok());
        test::safetensors_writer w;
        for (std::size_t i = 0; i < g.size(); ++i) {
            const auto& e = g[i];
            if (e.name != "optimizer.exp_avg_sq.wte.weight") {
                w.copy(g, e);
                continue;
            }
            std::string narrow;  // float -> BF16 (upper half) or F16 (the values are small: 0, -1 or 1)
            for (std::size_t k = 0; k < (e.end - e.begin) / 4; ++k) {
                float v;
                std::memcpy(&v, g.data(e) + 4 * k, 4);
                std::uint32_t u;
                std::memcpy(&u, &v, 4);
                std::uint16_t x = static_cast<std::uint16_t>(u >> 16);
                if (std::string_view(type) == "F16") x = v == 0 ? 0 : v == -1.0f ? 0xBC00 : 0x3C00;
                narrow.append(reinterpret_cast<const char*>(&x), 2);
            }
            w.add(e.name, type, e.shape.data(), e.rank, narrow);
        }
        static std::vector<std::byte> rebuilt;
        rebuilt = w.bytes();
        REQUIRE(g.parse(rebuilt).ok());
        const ct::status sn = ct::load_checkpoint(g, fresh_p, fresh_opt);
        INFO("exp_avg_sq as " << type);
        CHECK(sn.code == ct::errc::value_out_of_range);
        CHECK(sn.tensor_name() == "optimizer.exp_avg_sq.wte.weight");
        CHECK(std::memcmp(&fresh_p, &zero_p, sizeof p) == 0);
    }
    // and a step counter set by hand is checked by step: nothing written
    opt.exp_avg_sq.tok_embeddings.weight.storage[5] = 0;
    static Gpt::Grads g;
    opt.step_count.storage[0] = -1;
    const Gpt::Params before = p;
    CHECK(opt.step(p, g).code == ct::errc::value_out_of_range);
    CHECK(std::memcmp(&p, &before, sizeof p) == 0);
}

// ---- 6. dropout probabilities ----
TEST_CASE("model robustness: dropout probabilities outside [0, 1] or NaN are invalid_option; nothing written") {
    using L = ct::DecoderOnlyBlock<ct::d_model<D>, ct::heads<2>, ct::ffn_dim<32>>;
    static L::Params p;
    static L::TrainWorkspace<1, 4> ws;
    static L::Activations<1, 4> acts;
    static ct::Tensor<float, 1, 4, D> x, out;
    ref::randomize(p, 1);
    ref::randomize_tensor(x, 2);
    fill(out, 42.0f);
    struct bad {
        ct::dropout_config dc;
        const char* field;
    };
    const bad cases[] = {{{nan_f, 0, 0, 1, 0}, "dropout p"},     {{1.5f, 0, 0, 1, 0}, "dropout p"},
                         {{-0.1f, 0, 0, 1, 0}, "dropout p"},     {{inf_f, 0, 0, 1, 0}, "dropout p"},
                         {{0.1f, nan_f, 0, 1, 0}, "dropout attn_p"}, {{0.1f, 2.0f, 0, 1, 0}, "dropout attn_p"},
                         {{0.1f, 0, nan_f, 1, 0}, "dropout act_p"}};
    for (const bad& c : cases) {
        CHECK(c.dc.validate().code == ct::errc::invalid_option);
        const ct::status st = L::forward_train(p, ws, acts, x, out, c.dc);
        CHECK(st.code == ct::errc::invalid_option);
        CHECK(st.tensor_name() == c.field);
        CHECK_FALSE(acts.filled);
        for (float v : out.storage) REQUIRE(v == 42.0f);
    }
    // negative attn_p / act_p mean "same as p" (the documented default); p = 0 and p = 1 are valid
    CHECK(ct::dropout_config{0.1f, -1.0f, -1.0f, 0, 0}.validate().ok());
    CHECK(ct::dropout_config{1.0f, 0.0f, 1.0f, 0, 0}.validate().ok());
    // through a stack and a GPT
    using GS = ct::DecoderStack<L, 2>;
    static GS::Params gp;
    static GS::TrainWorkspace<1, 4> gws;
    static GS::Activations<1, 4> gacts;
    CHECK(GS::forward_train(gp, gws, gacts, x, out, ct::dropout_config{nan_f, 0, 0, 1, 0}).code ==
          ct::errc::invalid_option);
    static Gpt::Params mp;
    static Gpt::TrainWorkspace<1, 4> mws;
    static Gpt::Activations<1, 4> macts;
    static ct::Tensor<ct::token, 1, 4> tok{}, tgt{};
    float loss = 7;
    CHECK(Gpt::forward_train(mp, mws, macts, tok, tgt, loss, ct::dropout_config{0.5f, 1.5f, 0, 1, 0}).code ==
          ct::errc::invalid_option);
    CHECK(loss == 7);
}

// ---- 7. aliasing ----
TEST_CASE("model robustness: an output overlapping the memory (or part of tgt) is an error; out = tgt is allowed") {
    using L = ct::DecoderLayer<ct::d_model<D>, ct::heads<2>, ct::ffn_dim<32>>;
    static L::Params p;
    static L::Workspace<1, 4, 4> ws;
    static L::TrainWorkspace<1, 4, 4> tws;
    static L::Activations<1, 4, 4> acts;
    static ct::Tensor<float, 1, 4, D> x, mem, want;
    static ct::Tensor<float, 1, 8, D> wide;
    ref::randomize(p, 1);
    ref::randomize_tensor(x, 2);
    ref::randomize_tensor(mem, 3);
    REQUIRE(L::forward(p, ws, x, mem, want).ok());
    static ct::Tensor<float, 1, 4, D> x2 = x;
    ct::status st = L::forward(p, ws, x2, x2, x2);
    CHECK(st.code == ct::errc::aliased_output);
    CHECK(st.tensor_name() == "memory");
    CHECK(std::memcmp(x2.storage, x.storage, sizeof x.storage) == 0);
    st = L::forward_train(p, tws, acts, x2, x2, x2, ct::dropout_config{0.0f, 0.0f, 0.0f, 0, 0});
    CHECK(st.code == ct::errc::aliased_output);
    CHECK_FALSE(acts.filled);
    // out overlapping only part of the memory, or part of tgt
    for (std::size_t i = 0; i < x.size; ++i) wide.storage[i] = x.storage[i], wide.storage[x.size + i] = mem.storage[i];
    auto tgt_v = ct::view<1, 4, D>(wide.storage);
    auto mem_v = ct::view<1, 4, D>(wide.storage + 4 * D);
    auto mid = ct::view<1, 4, D>(wide.storage + 2 * D);
    CHECK(L::forward(p, ws, tgt_v, mem_v, mid).code == ct::errc::aliased_output);
    CHECK(L::forward(p, ws, mid, mem, tgt_v).code == ct::errc::aliased_output);  // partial overlap with tgt
    // exactly out = tgt: allowed, and equal to the separate output
    REQUIRE(L::forward(p, ws, tgt_v, mem, tgt_v).ok());
    CHECK(std::memcmp(tgt_v.data(), want.storage, sizeof want.storage) == 0);
    // a stack checks it too
    using St = ct::DecoderStack<L, 2>;
    static St::Params sp;
    static St::Workspace<1, 4, 4> sws;
    static ct::Tensor<float, 1, 4, D> m2 = mem;
    CHECK(St::forward(sp, sws, x, m2, m2).code == ct::errc::aliased_output);
    CHECK(std::memcmp(m2.storage, mem.storage, sizeof mem.storage) == 0);
}

// ---- 9. clip_grad_norm with NaN; ragged steps check only what they feed ----
TEST_CASE("model robustness: clip_grad_norm with a NaN gradient makes every gradient NaN (PyTorch)") {
    static Gpt::Grads g;
    ref::randomize(g, 2);
    g.tok_embeddings.weight.storage[3] = nan_f;
    CHECK(std::isnan(ct::clip_grad_norm(g, 1.0)));
    bool all_nan = true;
    ct::for_each_tensor(g, [&](std::string_view, const auto& t) {
        for (std::size_t i = 0; i < t.size; ++i) all_nan = all_nan && std::isnan(t.get(i));
    });
    CHECK(all_nan);
}

TEST_CASE("model robustness: ragged steps check only the rows they feed") {
    using L = CheckedBlock;
    static L::Params p;
    static L::KVCache<2, 6> cache;
    static L::StepWorkspace<2, 2> ws;
    static ct::Tensor<float, 2, 2, D> x, y;
    ref::randomize(p, 1);
    ref::randomize_tensor(x, 2);
    x(1, 1, 3) = nan_f;  // row 1 feeds one position: its second is padding
    x(0, 1, 0) = nan_f;  // ... and row 0 none
    REQUIRE(L::step_ragged(p, ws, cache, x, y, {0, 1}).ok());
    CHECK(cache.length(0) == 0);
    CHECK(cache.length(1) == 1);
    x(1, 0, 3) = nan_f;  // a fed row: still an error
    CHECK(L::step_ragged(p, ws, cache, x, y, {0, 1}).code == ct::errc::non_finite);
    CHECK(cache.length(1) == 1);
    // a GPT's unfed tokens may be anything (padding ids)
    static Gpt::Params gp;
    static Gpt::KVCache<2, 12> gc;
    static Gpt::StepWorkspace<2, 3> gws;
    static ct::Tensor<ct::token, 2, 3> tok;
    static ct::Tensor<float, 2, 3, 11> logits;
    ref::randomize(gp, 3);
    tok(0, 0) = 1, tok(0, 1) = -1, tok(0, 2) = 99;
    tok(1, 0) = 2, tok(1, 1) = 3, tok(1, 2) = 4;
    REQUIRE(Gpt::step_ragged(gp, gws, gc, tok, logits, {1, 3}).ok());
    CHECK(gc.length(0) == 1);
    CHECK(gc.length(1) == 3);
    tok(1, 1) = 11;
    CHECK(Gpt::step_ragged(gp, gws, gc, tok, logits, {1, 3}).code == ct::errc::out_of_range);
    CHECK(gc.length(1) == 3);
    // a count above the chunk, or past the capacity (no wrap with a huge count)
    CHECK(Gpt::step_ragged(gp, gws, gc, tok, logits, {SIZE_MAX, 0}).code == ct::errc::out_of_range);
    CHECK(L::step_ragged(p, ws, cache, x, y, {SIZE_MAX, 0}).code == ct::errc::out_of_range);
}

// ---- The all-or-nothing invariant under random call sequences ----
// A stack with check_finite and a GPT are driven by a seeded random mix of good steps, steps with
// bad tokens or non-finite input, chunks past the capacity, truncations and resets. After every
// call: every layer's cache has the same lengths; an error leaves the lengths and the output
// exactly as they were; a success advances each row by its count, and the GPT's logits equal the
// full forward's rows over the row's sequence so far (a shadow copy of the fed tokens).
TEST_CASE("model robustness: property: random valid and invalid call sequences keep stacks and GPTs all-or-nothing") {
    constexpr std::size_t B = 2, C = 3, Cap = 12, V = 11;
    static Gpt::Params gp;
    static Gpt::KVCache<B, Cap> gc;
    static Gpt::StepWorkspace<B, C> gws;
    static Gpt::Workspace<1, Cap> fws;
    static ct::Tensor<ct::token, B, C> tok;
    static ct::Tensor<float, B, C, V> logits, logits_before;
    static ct::Tensor<ct::token, 1, Cap> seq;
    static ct::Tensor<float, 1, Cap, V> full;
    static CheckedStack::Params sp;
    static CheckedStack::KVCache<B, Cap> sc;
    static CheckedStack::StepWorkspace<B, C> sws;
    static ct::Tensor<float, B, C, D> x, y, y_before;
    ref::randomize(gp, 11);
    ref::randomize(sp, 12);
    std::vector<ct::token> shadow[B];
    ref::lcg rng{2026};
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>((rng.next() * 0.5 + 0.5) * double(n)) % n; };
    std::size_t ok_calls = 0, errors = 0;
    for (int it = 0; it < 400; ++it) {
        std::array<std::size_t, B> count;
        for (auto& c : count) c = pick(C + 1);
        const std::size_t kind = pick(8);
        if (kind == 7) {  // rewind or reset
            const std::size_t b = pick(B), n = pick(Cap + 2);
            const bool ok = gc.truncate(b, n).ok();
            CHECK(ok == (n <= shadow[b].size()));
            if (ok) shadow[b].resize(n);
            (void)sc.truncate(b, n < sc.length(b) ? n : sc.length(b));
            if (pick(4) == 0) {
                gc.reset(), sc.reset();
                for (auto& s : shadow) s.clear();
            }
            continue;
        }
        if (kind == 6) count[pick(B)] = Cap;  // usually more than the chunk: out_of_range
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t i = 0; i < C; ++i) tok(b, i) = static_cast<ct::token>(pick(V));
        if (kind == 5) tok(pick(B), pick(C)) = pick(2) ? ct::token(V) : ct::token(-1);  // bad if fed
        ref::randomize_tensor(x, static_cast<std::uint64_t>(it) + 100);
        if (kind == 4) x(pick(B), pick(C), pick(D)) = pick(2) ? nan_f : 1e25f;  // an error if fed (1e25: in layer 1)
        // the GPT
        const auto lengths = gc.lengths();
        logits_before = logits;
        const ct::status st = Gpt::step_ragged(gp, gws, gc, tok, logits, count);
        REQUIRE(lengths_agree<Gpt::KVCache<B, Cap>, 2>(gc, 0));
        REQUIRE(lengths_agree<Gpt::KVCache<B, Cap>, 2>(gc, 1));
        if (!st) {
            ++errors;
            CHECK(gc.lengths() == lengths);
            CHECK(std::memcmp(logits.storage, logits_before.storage, sizeof logits.storage) == 0);
        } else {
            ++ok_calls;
            for (std::size_t b = 0; b < B; ++b) {
                REQUIRE(gc.length(b) == lengths[b] + count[b]);
                for (std::size_t i = 0; i < count[b]; ++i) shadow[b].push_back(tok(b, i));
                if (count[b] == 0) continue;
                for (std::size_t i = 0; i < Cap; ++i) seq(0, i) = i < shadow[b].size() ? shadow[b][i] : 0;
                REQUIRE(Gpt::forward(gp, fws, seq, full).ok());
                for (std::size_t i = 0; i < count[b]; ++i)
                    CHECK_CLOSE("step vs forward, row " << b << " pos " << lengths[b] + i, &logits(b, i, 0),
                                &full(0, lengths[b] + i, 0), V, 1e-4);
            }
        }
        // the checked stack on the same counts
        const auto slen = sc.lengths();
        fill(y, 42.0f);
        y_before = y;
        const ct::status ss = CheckedStack::step_ragged(sp, sws, sc, x, y, count);
        for (std::size_t b = 0; b < B; ++b) REQUIRE(lengths_agree<CheckedStack::KVCache<B, Cap>, 3>(sc, b));
        if (!ss) {
            ++errors;
            CHECK(sc.lengths() == slen);
            CHECK(std::memcmp(y.storage, y_before.storage, sizeof y.storage) == 0);
        } else {
            ++ok_calls;
            for (std::size_t b = 0; b < B; ++b) CHECK(sc.length(b) == slen[b] + count[b]);
        }
    }
    INFO("ok " << ok_calls << ", errors " << errors);
    CHECK(ok_calls > 100);
    CHECK(errors > 100);
}
