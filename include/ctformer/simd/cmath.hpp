// ctformer/simd/cmath.hpp — exp, log, sqrt, erf and tanh usable in constant expressions.
//
// <cmath> is not constexpr in C++20, and xsimd's kernels are not either: a layer evaluated inside
// a constant expression (docs/api.md, "constexpr evaluation") takes its scalar path and these
// functions. They compute in double (nothing here is ever emitted as code: the kernels call them
// only under std::is_constant_evaluated()) and round once to the caller's type.
// Accuracy against glibc's libm (tests/test_constexpr.cpp measures it over sweeps of 20,001 points,
// and fails past these bounds; measured in parentheses):
//   float results:  exp, log, erf <= 1 ulp (1), sqrt <= 1 (0), tanh <= 2 (2), sin, cos <= 1 (1);
//   double results: exp, log <= 4 ulp (4), sqrt <= 1 (0), erf <= 12 (10), tanh <= 8 (6), sin, cos <= 4 (4).
// Special values follow IEEE: exp(-inf) = 0, exp(inf) = inf, log(0) = -inf, log(x < 0) = NaN,
// NaN in, NaN out.
#pragma once
#include <bit>
#include <cstdint>
#include <limits>

namespace ctformer::cmath {

namespace detail {
inline constexpr double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
inline constexpr double inf = std::numeric_limits<double>::infinity();
constexpr bool is_nan(double x) { return x != x; }
// 2^k as a double, k in [-1022, 1023].
constexpr double pow2(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }
// x · 2^k for any k (two steps, so a subnormal result is rounded once).
constexpr double ldexp(double x, int k) {
    while (k > 1000) x *= pow2(1000), k -= 1000;
    if (k < -1000) {
        x *= pow2(-1000);
        k += 1000;
        if (k < -1000) return x * pow2(-1000);
    }
    return x * pow2(k);
}
// round to nearest integer (|x| < 2^31)
constexpr int round_int(double x) { return static_cast<int>(x < 0 ? x - 0.5 : x + 0.5); }

constexpr double exp(double x) {
    if (is_nan(x)) return x;
    if (x > 709.8) return inf;
    if (x < -745.2) return 0.0;
    // x = k·ln2 + r, |r| <= ln2/2; e^r by its Taylor series to r^17/17! (< 2^-60 relative)
    const int k = round_int(x / 0.69314718055994530942);
    const double r = (x - k * ln2_hi) - k * ln2_lo;
    double term = 1.0, sum = 1.0;
    for (int n = 1; n <= 17; ++n) {
        term *= r / n;
        sum += term;
    }
    return ldexp(sum, k);
}

constexpr double log(double x) {
    if (is_nan(x) || x < 0) return std::numeric_limits<double>::quiet_NaN();
    if (x == 0) return -inf;
    if (x == inf) return inf;
    int e = 0;
    if (x < 0x1p-1000) x *= 0x1p100, e -= 100;  // subnormals: into the normal range first
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
    e += static_cast<int>((bits >> 52) & 0x7ff) - 1023;
    double m = std::bit_cast<double>((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
    if (m > 1.41421356237309504880) m *= 0.5, ++e;                                                // [0.707, 1.414)
    // log m = 2·atanh(s), s = (m - 1)/(m + 1), |s| <= 0.1716: the odd series to s^41
    const double s = (m - 1) / (m + 1), s2 = s * s;
    double term = s, sum = s;
    for (int n = 3; n <= 41; n += 2) {
        term *= s2;
        sum += term / n;
    }
    return e * ln2_hi + (e * ln2_lo + 2 * sum);
}

constexpr double sqrt(double x) {
    if (is_nan(x) || x < 0) return std::numeric_limits<double>::quiet_NaN();
    if (x == 0 || x == inf) return x;
    // Newton from an estimate that halves the exponent, then one correction to the nearer neighbour
    double r = std::bit_cast<double>((std::bit_cast<std::uint64_t>(x) >> 1) + (0x3ff0000000000000ull >> 1));
    for (int i = 0; i < 8; ++i) r = 0.5 * (r + x / r);
    for (int i = 0; i < 2; ++i) {
        const double up = std::bit_cast<double>(std::bit_cast<std::uint64_t>(r) + 1),
                     dn = std::bit_cast<double>(std::bit_cast<std::uint64_t>(r) - 1);
        const double e0 = r * r - x, eu = up * up - x, ed = dn * dn - x;
        const double a0 = e0 < 0 ? -e0 : e0, au = eu < 0 ? -eu : eu, ad = ed < 0 ? -ed : ed;
        r = au < a0 ? up : (ad < a0 ? dn : r);
    }
    return r;
}

// erf: below 2, 2/√π · e^{-x²} · Σ 2^n x^{2n+1} / (2n+1)!! (every term positive, no
// cancellation); above, 1 - erfc with erfc's continued fraction
// e^{-x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated from depth 120 backwards.
constexpr double erf(double x) {
    if (is_nan(x)) return x;
    const double ax = x < 0 ? -x : x;
    double y = 1.0;
    if (ax < 2.0) {
        const double x2 = ax * ax;
        double term = ax, sum = ax;
        for (int n = 1; n < 100 && term > sum * 1e-18; ++n) {
            term *= 2 * x2 / (2 * n + 1);
            sum += term;
        }
        y = 1.12837916709551257390 * exp(-x2) * sum;
    } else if (ax < 6.0) {  // erfc(6) < 2^-56
        double f = ax;
        for (int k = 120; k >= 1; --k) f = ax + (0.5 * k) / f;
        y = 1.0 - exp(-ax * ax) / (1.77245385090551602730 * f);
    }
    return x < 0 ? -y : y;
}

// tanh: sinh/cosh by their series below 1, (1 - e^{-2|x|}) / (1 + e^{-2|x|}) above.
constexpr double tanh(double x) {
    if (is_nan(x)) return x;
    const double ax = x < 0 ? -x : x;
    double y = 1.0;
    if (ax < 1.0) {
        double sh = 0.0, ch = 1.0, term = 1.0;
        for (int n = 1; n <= 24; ++n) {
            term *= ax / n;
            if (n % 2) sh += term; else ch += term;
        }
        y = sh / ch;
    } else if (ax < 40.0) {
        const double t = exp(-2 * ax);
        y = (1 - t) / (1 + t);
    }
    return x < 0 ? -y : y;
}

// sin and cos: x = k·π/2 + r (π/2 in three parts, exact for |x| < 2^20: RoPE's angles are
// positions times frequencies <= 1), then the Taylor series of sin or cos of |r| <= π/4 to r^21.
inline constexpr double pio2_1 = 1.57079632673412561417e+00, pio2_2 = 6.07710050630396597660e-11,
                        pio2_3 = 2.02226624871116645580e-21;
constexpr double sin_poly(double r) {
    double term = r, sum = r;
    for (int n = 2; n <= 20; n += 2) sum += (term *= -r * r / (n * (n + 1)));
    return sum;
}
constexpr double cos_poly(double r) {
    double term = 1.0, sum = 1.0;
    for (int n = 1; n <= 19; n += 2) sum += (term *= -r * r / (n * (n + 1)));
    return sum;
}
// quadrant q in 0..3 of x and the remainder r
constexpr double reduce_pio2(double x, int& q) {
    const double k = static_cast<double>(static_cast<long long>(x / 1.57079632679489661923 + (x < 0 ? -0.5 : 0.5)));
    q = static_cast<int>(static_cast<long long>(k) & 3);
    return ((x - k * pio2_1) - k * pio2_2) - k * pio2_3;
}
constexpr double sin(double x) {
    if (is_nan(x) || x == inf || x == -inf) return std::numeric_limits<double>::quiet_NaN();
    int q = 0;
    const double r = reduce_pio2(x, q);
    return q == 0 ? sin_poly(r) : q == 1 ? cos_poly(r) : q == 2 ? -sin_poly(r) : -cos_poly(r);
}
constexpr double cos(double x) {
    if (is_nan(x) || x == inf || x == -inf) return std::numeric_limits<double>::quiet_NaN();
    int q = 0;
    const double r = reduce_pio2(x, q);
    return q == 0 ? cos_poly(r) : q == 1 ? -sin_poly(r) : q == 2 ? -cos_poly(r) : sin_poly(r);
}
// x^y for x > 0 (RoPE's theta^e)
constexpr double pow(double x, double y) { return exp(y * log(x)); }
}  // namespace detail

// The functions, for float and double: computed in double, rounded once.
template <class T> constexpr T exp(T x) { return static_cast<T>(detail::exp(static_cast<double>(x))); }
template <class T> constexpr T log(T x) { return static_cast<T>(detail::log(static_cast<double>(x))); }
template <class T> constexpr T sqrt(T x) { return static_cast<T>(detail::sqrt(static_cast<double>(x))); }
template <class T> constexpr T erf(T x) { return static_cast<T>(detail::erf(static_cast<double>(x))); }
template <class T> constexpr T tanh(T x) { return static_cast<T>(detail::tanh(static_cast<double>(x))); }
template <class T> constexpr T sin(T x) { return static_cast<T>(detail::sin(static_cast<double>(x))); }
template <class T> constexpr T cos(T x) { return static_cast<T>(detail::cos(static_cast<double>(x))); }

}  // namespace ctformer::cmath
