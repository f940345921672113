// Constant evaluation: whole decoder layers run their forward inside a constant expression (the
// scalar path every kernel takes under std::is_constant_evaluated(), with ctformer::cmath), and the
// results are static_asserted against PyTorch's. The same functions then run at run time (vector
// kernels) and are compared with the constant results; cmath's accuracy is measured against libm.
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <string_view>

#include "common.hpp"
#include "data/constexpr_fixtures.hpp"

namespace fx = ctformer_fixtures;

namespace {

// Params from PyTorch-named arrays (no file can be read in a constant expression): true when every
// tensor of p was found with its size and every array was used.
template <class P, class T, std::size_t N> constexpr bool fill(P& p, const fx::named_tensor<T> (&src)[N]) {
    bool ok = true;
    std::size_t found = 0;
    ct::for_each_tensor(p, [&](std::string_view name, auto& t) {
        using X = std::remove_cvref_t<decltype(t)>;
        for (const auto& s : src)
            if (s.name == name) {
                ok = ok && s.size == X::size;
                for (std::size_t i = 0; ok && i < s.size; ++i) t.set(i, s.data[i]);
                ++found;
                return;
            }
        ok = false;
    });
    return ok && found == N;
}

template <class T, std::size_t N> struct result {
    bool loaded = false;
    ct::errc code = ct::errc::ok;
    std::array<T, N> out{};
};

template <class X, class T> constexpr void copy_in(X& x, const T* src) {
    for (std::size_t i = 0; i < X::size; ++i) x.set(i, src[i]);
}

template <class T, std::size_t N> constexpr double max_abs_diff(const std::array<T, N>& a, const T* b) {
    double m = 0;
    for (std::size_t i = 0; i < N; ++i) {
        const double d = a[i] > b[i] ? double(a[i]) - double(b[i]) : double(b[i]) - double(a[i]);
        m = d > m || d != d ? d : m;
    }
    return m;
}

// ---- Case 1: TransformerDecoderLayer, float, post-norm, GELU (erf), causal self mask and a
// memory key padding of 2 of 3 keys. ----
using L8 = ct::DecoderLayer<ct::d_model<8>, ct::heads<2>, ct::ffn_dim<16>, ct::activation<ct::gelu>>;
constexpr result<float, 32> forward_d8() {
    namespace c = fx::constexpr_d8;
    result<float, 32> r;
    L8::Params p{};
    r.loaded = fill(p, c::params);
    L8::Workspace<1, 4, 3> ws{};
    ct::Tensor<float, 1, 4, 8> tgt{}, out{};
    ct::Tensor<float, 1, 3, 8> mem{};
    copy_in(tgt, c::input_tgt);
    copy_in(mem, c::input_memory);
    r.code = L8::forward(p, ws, tgt, mem, out, ct::causal{}, ct::key_lengths{2}).code;
    for (std::size_t i = 0; i < out.size; ++i) r.out[i] = out.get(i);
    return r;
}

// ---- Case 2: the decoder-only block (TransformerEncoderLayer), double, pre-norm, ReLU, causal. ----
using B8 = ct::DecoderOnlyBlock<ct::d_model<8>, ct::heads<2>, ct::ffn_dim<16>, ct::norm_first<true>,
                                ct::dtype<double>>;
constexpr result<double, 32> forward_b8() {
    namespace c = fx::constexpr_d8_f64_pre;
    result<double, 32> r;
    B8::Params p{};
    r.loaded = fill(p, c::params);
    B8::Workspace<1, 4> ws{};
    ct::Tensor<double, 1, 4, 8> tgt{}, out{};
    copy_in(tgt, c::input_tgt);
    r.code = B8::forward(p, ws, tgt, out, ct::causal{}).code;
    for (std::size_t i = 0; i < out.size; ++i) r.out[i] = out.get(i);
    return r;
}

// The tolerances of the PyTorch fixtures (tests/common.hpp: golden_tol): float 2e-5, double 1e-11.
constexpr auto d8 = forward_d8();
static_assert(d8.loaded, "every PyTorch tensor found, with its size");
static_assert(d8.code == ct::errc::ok);
static_assert(max_abs_diff(d8.out, fx::constexpr_d8::output) <= 2e-5,
              "constexpr forward (float) differs from PyTorch's output by more than 2e-5");

constexpr auto b8 = forward_b8();
static_assert(b8.loaded && b8.code == ct::errc::ok);
static_assert(max_abs_diff(b8.out, fx::constexpr_d8_f64_pre::output) <= 1e-11,
              "constexpr forward (double) differs from PyTorch's output by more than 1e-11");

// A bad mask is an error value in a constant expression too, and nothing is written.
constexpr bool rejects_long_key_length() {
    L8::Params p{};
    L8::Workspace<1, 4, 3> ws{};
    ct::Tensor<float, 1, 4, 8> tgt{}, out{};
    ct::Tensor<float, 1, 3, 8> mem{};
    out.set(0, 7.0f);
    const ct::status st = L8::forward(p, ws, tgt, mem, out, ct::causal{}, ct::key_lengths{4});
    return st.code == ct::errc::out_of_range && st.tensor_name() == "cross-attention mask" && out.get(0) == 7.0f;
}
static_assert(rejects_long_key_length());

// cmath's special values.
static_assert(ct::cmath::exp(0.0) == 1.0 && ct::cmath::exp(-std::numeric_limits<double>::infinity()) == 0.0);
static_assert(ct::cmath::exp(1000.0) == std::numeric_limits<double>::infinity());
static_assert(ct::cmath::log(1.0) == 0.0 && ct::cmath::log(0.0) == -std::numeric_limits<double>::infinity());
static_assert(ct::cmath::sqrt(4.0) == 2.0 && ct::cmath::sqrt(2.0f) == 1.41421356f);
static_assert(ct::cmath::erf(0.0) == 0.0 && ct::cmath::erf(7.0) == 1.0 && ct::cmath::erf(-7.0) == -1.0);
static_assert(ct::cmath::tanh(0.0) == 0.0 && ct::cmath::tanh(50.0) == 1.0);
static_assert(ct::cmath::sin(0.0) == 0.0 && ct::cmath::cos(0.0) == 1.0);

// Distance in units in the last place (same sign, finite).
template <class T> std::int64_t ulps(T a, T b) {
    using I = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
    auto key = [](T x) {
        const I i = std::bit_cast<I>(x);
        return i < 0 ? std::int64_t(std::numeric_limits<I>::min()) - i : std::int64_t(i);
    };
    const std::int64_t d = key(a) - key(b);
    return d < 0 ? -d : d;
}

template <class T, class F, class G> std::int64_t max_ulps(F f, G libm, double lo, double hi, int n) {
    std::int64_t worst = 0;
    for (int i = 0; i <= n; ++i) {
        const T x = static_cast<T>(lo + (hi - lo) * i / n);
        const std::int64_t u = ulps<T>(f(x), libm(x));
        worst = u > worst ? u : worst;
    }
    return worst;
}

// Bounds (cmath.hpp documents them): exp and log, erf, tanh.
template <class T>
void check_cmath(std::int64_t exp_log_ulps, std::int64_t erf_ulps, std::int64_t tanh_ulps, std::int64_t trig_ulps) {
    // (the functions run at run time here: the same constexpr code, called outside a constant expression)
    const auto e = max_ulps<T>([](T x) { return ct::cmath::exp(x); }, [](T x) { return std::exp(x); }, -80, 80, 20000);
    const auto l = max_ulps<T>([](T x) { return ct::cmath::log(x); }, [](T x) { return std::log(x); }, 1e-30, 1e6, 20000);
    const auto ls = max_ulps<T>([](T x) { return ct::cmath::log(x); }, [](T x) { return std::log(x); }, 0.5, 2, 20000);
    const auto s = max_ulps<T>([](T x) { return ct::cmath::sqrt(x); }, [](T x) { return std::sqrt(x); }, 0, 1e6, 20000);
    const auto r = max_ulps<T>([](T x) { return ct::cmath::erf(x); }, [](T x) { return std::erf(x); }, -6, 6, 20000);
    const auto t = max_ulps<T>([](T x) { return ct::cmath::tanh(x); }, [](T x) { return std::tanh(x); }, -20, 20, 20000);
    // sin and cos over RoPE's angles (positions up to 4096 times frequencies up to 1)
    const auto sn = max_ulps<T>([](T x) { return ct::cmath::sin(x); }, [](T x) { return std::sin(x); }, -4096, 4096, 20000);
    const auto cs = max_ulps<T>([](T x) { return ct::cmath::cos(x); }, [](T x) { return std::cos(x); }, -4096, 4096, 20000);
    MESSAGE(std::string(sizeof(T) == 4 ? "float" : "double") << " cmath vs libm, max ulps: exp " << e << ", log " << (l > ls ? l : ls) << ", sqrt " << s
                          << ", erf " << r << ", tanh " << t << ", sin " << sn << ", cos " << cs);
    CHECK(sn <= trig_ulps);
    CHECK(cs <= trig_ulps);
    CHECK(e <= exp_log_ulps);
    CHECK(l <= exp_log_ulps);
    CHECK(ls <= exp_log_ulps);
    CHECK(s <= 1);
    CHECK(r <= erf_ulps);
    CHECK(t <= tanh_ulps);
}

template <class T, std::size_t N, class Fixture> void check_runtime(const result<T, N>& constant, const Fixture* want) {
    const result<T, N> run = []() {
        if constexpr (std::is_same_v<T, float>) return forward_d8();
        else return forward_b8();
    }();
    REQUIRE(run.loaded);
    REQUIRE(run.code == ct::errc::ok);
    const auto vs_torch = test::compare(run.out.data(), want, N);
    const auto vs_constant = test::compare(run.out.data(), constant.out.data(), N);
    MESSAGE("run time vs PyTorch: max abs " << vs_torch.max_abs << "; run time vs constant evaluation: max abs "
                                            << vs_constant.max_abs << " (" << std::string(ct::simd::arch_name()) << ")");
    CHECK(vs_torch.max_abs <= test::golden_tol<T>);
    CHECK(vs_constant.max_abs <= test::golden_tol<T>);
}

}  // namespace

TEST_CASE("constexpr: the float decoder layer's constant result equals the run-time (vector) result") {
    check_runtime(d8, fx::constexpr_d8::output);
}

TEST_CASE("constexpr: the double decoder-only block's constant result equals the run-time result") {
    check_runtime(b8, fx::constexpr_d8_f64_pre::output);
}

TEST_CASE("constexpr: cmath accuracy against libm") {
    check_cmath<float>(1, 1, 2, 1);
    check_cmath<double>(4, 12, 8, 4);
}
