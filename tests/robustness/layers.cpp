// Defined behaviour for bad and non-finite input. Every row of docs/robustness.md names the test
// case that proves it: here, in models.cpp (the same suite), in test_safetensors.cpp, in compile_fail/,
// or the fuzzers.
#include <cmath>
#include <cstring>
#include <limits>

#include "common.hpp"
#include "reference.hpp"

namespace {
template <bool Pre, bool Check = false>
using Layer = ct::DecoderLayer<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<32>, ct::norm_first<Pre>,
                               ct::check_finite<Check>>;
constexpr std::size_t B = 2, T = 20, S = 7, D = 16;  // T > 16: two attention row blocks
constexpr float nan_f = std::numeric_limits<float>::quiet_NaN(), inf_f = std::numeric_limits<float>::infinity();

template <class L> struct Rig {
    static inline typename L::Params p;
    static inline typename L::template Workspace<B, T, S> ws;
    static inline typename L::template KVCache<B, T> cache;
    static inline typename L::template CrossKVCache<B, S> cc;
    static inline typename L::template StepWorkspace<B, 1> sws;
    static inline ct::Tensor<float, B, T, D> tgt, out, stepped;
    static inline ct::Tensor<float, B, S, D> mem;
    static inline ct::Tensor<float, B, 1, D> x, y;
    Rig() {
        ref::randomize(p, 7);
        ref::randomize_tensor(tgt, 8);
        ref::randomize_tensor(mem, 9);
    }
    // The layer token by token through the caches, into stepped.
    template <class SM, class CM> ct::status steps(const SM& sm, const CM& cm) {
        cache.reset();
        L::fill_cross_cache(p, sws, cc, mem);
        for (std::size_t t = 0; t < T; ++t) {
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t d = 0; d < D; ++d) x(b, 0, d) = tgt(b, t, d);
            if (ct::status st = L::step(p, sws, cache, cc, x, y, sm, cm); !st) return st;
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t d = 0; d < D; ++d) stepped(b, t, d) = y(b, 0, d);
        }
        return {};
    }
};

bool row_finite(const float* r) {
    for (std::size_t d = 0; d < D; ++d)
        if (!std::isfinite(r[d])) return false;
    return true;
}
bool row_all_nonfinite(const float* r) {
    for (std::size_t d = 0; d < D; ++d)
        if (std::isfinite(r[d])) return false;
    return true;
}
template <class X> std::vector<unsigned char> bytes_of(const X& x) {
    std::vector<unsigned char> v(sizeof x);
    std::memcpy(v.data(), &x, sizeof x);
    return v;
}
}  // namespace

TEST_CASE("robustness: NaN/inf in tgt at position j reaches only rows >= j of its batch row, in forward and step") {
    for (const float bad : {nan_f, inf_f, -inf_f}) {
        Rig<Layer<false>> r;
        static ct::Tensor<float, B, T, D> clean;
        REQUIRE(Layer<false>::forward(r.p, r.ws, r.tgt, r.mem, clean, ct::causal{}).ok());
        const std::size_t j = 9;  // inside the first 16-row block: rows 0..8 share its tiles
        r.tgt(0, j, 3) = bad;
        REQUIRE(Layer<false>::forward(r.p, r.ws, r.tgt, r.mem, r.out, ct::causal{}).ok());
        REQUIRE(r.steps(ct::causal{}, ct::no_mask{}).ok());
        for (std::size_t i = 0; i < T; ++i) {
            INFO("bad value " << bad << ", row " << i);
            if (i < j) {
                CHECK(row_finite(&r.out(0, i, 0)));
                CHECK_CLOSE("rows before the bad position", &r.out(0, i, 0), &clean(0, i, 0), D, test::ref_tol<float>);
                CHECK_CLOSE("step rows before the bad position", &r.stepped(0, i, 0), &clean(0, i, 0), D,
                            test::ref_tol<float>);
            } else {
                CHECK(row_all_nonfinite(&r.out(0, i, 0)));
                CHECK(row_all_nonfinite(&r.stepped(0, i, 0)));
            }
        }
        CHECK(std::memcmp(&r.out(1, 0, 0), &clean(1, 0, 0), T * D * sizeof(float)) == 0);  // other batch row
    }
}

TEST_CASE("robustness: a blocked memory position never contributes, even NaN (every mask kind, forward and step)") {
    using L = Layer<true>;
    Rig<L> r;
    static ct::Tensor<float, B, T, D> clean;
    static ct::Tensor<bool, B, S> pad;
    static ct::Tensor<bool, T, S> bool_mask;
    static ct::Tensor<float, T, S> additive;
    for (std::size_t s = 5; s < S; ++s) pad(1, s) = true;
    for (std::size_t t = 0; t < T; ++t) bool_mask(t, S - 1) = true, additive(t, S - 1) = -inf_f;
    const ct::key_lengths lengths{7, 5};
    REQUIRE(L::forward(r.p, r.ws, r.tgt, r.mem, clean, ct::causal{}, lengths).ok());
    for (std::size_t d = 0; d < D; ++d) r.mem(1, S - 1, d) = nan_f, r.mem(1, S - 2, d) = inf_f;
    auto check = [&](const char* what, const auto& cm) {
        for (auto& v : r.out.storage) v = 0;
        REQUIRE(L::forward(r.p, r.ws, r.tgt, r.mem, r.out, ct::causal{}, cm).ok());
        REQUIRE(r.steps(ct::causal{}, cm).ok());
        CHECK_CLOSE(what, &r.out(1, 0, 0), &clean(1, 0, 0), T * D, test::ref_tol<float>);
        CHECK_CLOSE(what, &r.stepped(1, 0, 0), &clean(1, 0, 0), T * D, test::ref_tol<float>);
    };
    check("key_lengths", lengths);
    check("key_padding", ct::key_padding(pad));
    for (std::size_t d = 0; d < D; ++d) r.mem(1, S - 2, d) = 0.5f;  // only the last key is blocked below
    REQUIRE(L::forward(r.p, r.ws, r.tgt, r.mem, clean, ct::causal{}, ct::mask_from(bool_mask)).ok());
    for (std::size_t i = 0; i < clean.size / 2; ++i) clean.storage[i] = 0;  // compare batch row 1 only
    check("bool (T, S) mask", ct::mask_from(bool_mask));
    check("additive -inf", ct::mask_from(additive));
}

TEST_CASE("robustness: mask values are checked: key lengths above the key count are errors, nothing written") {
    using L = Layer<false>;
    Rig<L> r;
    static L::TrainWorkspace<B, T, S> tws;
    static L::Activations<B, T, S> acts;
    static L::Grads g;
    static ct::Tensor<float, B, T, D> d_tgt;
    static ct::Tensor<float, B, S, D> d_mem;
    for (auto& v : r.out.storage) v = 42.0f;
    ct::status st = L::forward(r.p, r.ws, r.tgt, r.mem, r.out, ct::causal{}, ct::key_lengths{7, 8});
    CHECK(st.code == ct::errc::out_of_range);
    CHECK(st.tensor_name() == "cross-attention mask");
    st = L::forward(r.p, r.ws, r.tgt, r.mem, r.out, ct::causal{} && ct::key_lengths{21, 3});
    CHECK(st.code == ct::errc::out_of_range);
    CHECK(st.tensor_name() == "self-attention mask");
    st = L::forward_train(r.p, tws, acts, r.tgt, r.mem, r.out, {}, ct::key_lengths{21, 3});
    CHECK(st.code == ct::errc::out_of_range);
    CHECK_FALSE(acts.filled);
    for (float v : r.out.storage) REQUIRE(v == 42.0f);
    REQUIRE(L::forward_train(r.p, tws, acts, r.tgt, r.mem, r.out, {}, ct::causal{}).ok());
    const auto before = bytes_of(g);
    st = L::backward(r.p, acts, tws, r.out, g, d_tgt, d_mem, ct::causal{}, ct::key_lengths{7, 8});
    CHECK(st.code == ct::errc::out_of_range);
    CHECK(bytes_of(g) == before);
    // step: self masks are sized by the cache capacity (20), cross masks by src_len (7)
    CHECK(r.steps(ct::key_lengths{20, 21}, ct::no_mask{}).code == ct::errc::out_of_range);
    CHECK(r.cache.length(0) == 0);
    CHECK(r.steps(ct::causal{}, ct::key_lengths{8, 1}).code == ct::errc::out_of_range);
    CHECK(r.steps(ct::key_lengths{20, 20}, ct::key_lengths{7, 0}).ok());
    // lengths are unsigned: a size_t converts, a negative literal does not compile (compile_fail/)
    const std::size_t n = 3;
    CHECK(ct::key_lengths{n, 4u}.len[0] == 3);
}

TEST_CASE("robustness: check_finite<true> rejects NaN/inf inputs with non_finite, nothing written") {
    using L = Layer<true, true>;
    Rig<L> r;
    static L::TrainWorkspace<B, T, S> tws;
    static L::Activations<B, T, S> acts;
    static L::Grads g;
    static ct::Tensor<float, B, T, D> d_out, d_tgt;
    static ct::Tensor<float, B, S, D> d_mem;
    REQUIRE(L::forward(r.p, r.ws, r.tgt, r.mem, r.out).ok());
    for (auto& v : r.out.storage) v = 42.0f;
    r.tgt(1, 19, 15) = nan_f;
    ct::status st = L::forward(r.p, r.ws, r.tgt, r.mem, r.out);
    CHECK(st.code == ct::errc::non_finite);
    CHECK(st.tensor_name() == "tgt");
    CHECK(L::forward_train(r.p, tws, acts, r.tgt, r.mem, r.out, {}).code == ct::errc::non_finite);
    CHECK_FALSE(acts.filled);
    r.tgt(1, 19, 15) = 0;
    r.mem(0, 0, 0) = inf_f;
    st = L::forward(r.p, r.ws, r.tgt, r.mem, r.out);
    CHECK(st.code == ct::errc::non_finite);
    CHECK(st.tensor_name() == "memory");
    for (float v : r.out.storage) REQUIRE(v == 42.0f);
    r.mem(0, 0, 0) = 0;
    REQUIRE(L::forward_train(r.p, tws, acts, r.tgt, r.mem, r.out, {}).ok());
    d_out(0, 0, 0) = -inf_f;
    const auto before = bytes_of(g);
    st = L::backward(r.p, acts, tws, d_out, g, d_tgt, d_mem);
    CHECK(st.code == ct::errc::non_finite);
    CHECK(st.tensor_name() == "d_out");
    CHECK(bytes_of(g) == before);
    r.tgt(0, 4, 2) = nan_f;
    st = r.steps(ct::causal{}, ct::no_mask{});
    CHECK(st.code == ct::errc::non_finite);
    CHECK(st.tensor_name() == "x");
    CHECK(r.cache.length(0) == 4);  // the four finite steps before it, not the bad one
}

TEST_CASE("robustness: caches keep their own state: a reset cross cache is empty; lengths only move by API") {
    using L = Layer<false>;
    Rig<L> r;
    REQUIRE(r.steps(ct::causal{}, ct::no_mask{}).ok());
    CHECK(r.cc.filled());
    r.cc.reset();
    CHECK_FALSE(r.cc.filled());
    r.cache.reset();
    CHECK(L::step(r.p, r.sws, r.cache, r.cc, r.x, r.y).code == ct::errc::cache_empty);
    CHECK(r.cache.length(0) == 0);
    CHECK(r.cache.truncate(2, 0).code == ct::errc::out_of_range);  // no batch row 2
    CHECK(r.cache.length(2) == 0);
    static_assert(L::CrossKVCache<B, S>::bytes == sizeof(L::CrossKVCache<B, S>));
    static_assert(L::CrossKVCache<B, S>::bytes >= 2 * B * S * D * sizeof(float) + sizeof(bool));
}

TEST_CASE("robustness: large finite inputs (the thresholds docs/robustness.md gives)") {
    // Inputs ~U(-1, 1)·scale in tgt and memory, weights ~U(-0.3, 0.3): a post-norm layer's first
    // attention sees raw inputs, its scores (~|x|²) overflow float past ~1e19; a pre-norm layer
    // normalizes first and only its residual sum can overflow, near FLT_MAX.
    auto run = [](auto layer_tag, float scale) {
        using L = typename decltype(layer_tag)::type;
        Rig<L> r;
        for (auto& v : r.tgt.storage) v *= scale;
        for (auto& v : r.mem.storage) v *= scale;
        REQUIRE(L::forward(r.p, r.ws, r.tgt, r.mem, r.out, ct::causal{}).ok());
        bool finite = true;
        for (float v : r.out.storage) finite = finite && std::isfinite(v);
        return finite;
    };
    CHECK(run(std::type_identity<Layer<false>>{}, 1e19f));
    CHECK_FALSE(run(std::type_identity<Layer<false>>{}, 1e20f));
    CHECK(run(std::type_identity<Layer<true>>{}, 1e37f));
}

namespace {
// 4 MB starting on a huge-page boundary (whole pages; from its second byte on, an unaligned range).
alignas(ct::huge_page_bytes) unsigned char huge_buffer[2 * ct::huge_page_bytes];
struct SmallRole {
    float x[1000];
};
SmallRole small_role;
}  // namespace

TEST_CASE("robustness: advise_huge_pages advises only the whole 2 MB pages inside the object; bad ranges are errors") {
    // the arithmetic, at compile time: an aligned object gets every whole page, an unaligned one the
    // pages inside it, a small one none
    constexpr std::uintptr_t H = ct::huge_page_bytes;
    static_assert(ct::whole_huge_pages(4 * H, 2 * H).first == 4 * H && ct::whole_huge_pages(4 * H, 2 * H).end == 6 * H);
    static_assert(ct::whole_huge_pages(4 * H + 1, 3 * H).first == 5 * H && ct::whole_huge_pages(4 * H + 1, 3 * H).end == 7 * H);
    static_assert(ct::whole_huge_pages(4 * H + 1, 2 * H).end - ct::whole_huge_pages(4 * H + 1, 2 * H).first == H);
    static_assert(ct::whole_huge_pages(4 * H + 1, H).end == ct::whole_huge_pages(4 * H + 1, H).first);
    static_assert(ct::whole_huge_pages(4 * H, H - 1).end == ct::whole_huge_pages(4 * H, H - 1).first);
    const ct::huge_page_advice whole = ct::advise_huge_pages(huge_buffer);
#if defined(__linux__)
    // (a kernel without transparent huge pages refuses: not_supported, nothing advised)
    if (whole.st.ok()) CHECK(whole.bytes == 2 * ct::huge_page_bytes);
    else CHECK((whole.st.code == ct::errc::not_supported && whole.bytes == 0));
    MESSAGE("advise_huge_pages on a 4 MB aligned object: ", std::string(ct::to_string(whole.st.code)), ", ", whole.bytes, " bytes");
    const ct::huge_page_advice inner = ct::advise_huge_pages(huge_buffer + 1, sizeof huge_buffer - 1);
    CHECK(inner.bytes == (inner.st.ok() ? ct::huge_page_bytes : 0));
#else
    CHECK(whole.st.code == ct::errc::not_supported);
#endif
    const ct::huge_page_advice small = ct::advise_huge_pages(small_role);
    CHECK(small.st.ok());
    CHECK(small.bytes == 0);
    CHECK(ct::advise_huge_pages(nullptr, 16).st.code == ct::errc::out_of_range);
    CHECK(ct::advise_huge_pages(huge_buffer, std::numeric_limits<std::size_t>::max()).st.code == ct::errc::out_of_range);
    // the memory is the user's as before: written and read back whole
    for (std::size_t i = 0; i < sizeof huge_buffer; i += 4096) huge_buffer[i] = static_cast<unsigned char>(i / 4096);
    bool same = true;
    for (std::size_t i = 0; i < sizeof huge_buffer; i += 4096) same = same && huge_buffer[i] == static_cast<unsigned char>(i / 4096);
    CHECK(same);
}
