// Shared test helpers: fixture files, error metrics with per-dtype tolerances.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <ctformer/ctformer.hpp>

#ifndef CTFORMER_TEST_DATA
#error "CTFORMER_TEST_DATA must point at tests/data"
#endif

namespace test {

// Tolerances against PyTorch (outputs are LayerNorm-scale): float 2e-5, double 1e-11.
template <class T> constexpr double golden_tol = std::is_same_v<T, float> ? 2e-5 : 1e-11;
// Against ctformer's own scalar reference (double accumulation): a little looser for float.
template <class T> constexpr double ref_tol = std::is_same_v<T, float> ? 3e-5 : 1e-11;

inline std::vector<std::byte> read_file(const std::string& name) {
    std::ifstream f(std::string(CTFORMER_TEST_DATA) + "/" + name, std::ios::binary);
    REQUIRE_MESSAGE(f.good(), "cannot open test data " << name);
    std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::byte> b(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) b[i] = static_cast<std::byte>(c[i]);
    return b;
}

struct errors {
    double max_abs = 0, max_rel = 0;
};
template <class A, class B> errors compare(const A* got, const B* want, std::size_t n) {
    errors e;
    for (std::size_t i = 0; i < n; ++i) {
        const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
        const double a = std::fabs(g - w);
        if (!(a <= e.max_abs)) e.max_abs = std::isnan(a) ? INFINITY : a;
        const double r = a / (std::fabs(w) > 1e-3 ? std::fabs(w) : 1e-3);
        if (!(r <= e.max_rel)) e.max_rel = std::isnan(r) ? INFINITY : r;
    }
    return e;
}

// Checks got against want within tol and always reports the errors (printed on failure).
#define CHECK_CLOSE(what, got, want, n, tol)                                                           \
    do {                                                                                               \
        const ::test::errors e_ = ::test::compare((got), (want), (n));                                 \
        std::ostringstream what_; /* what: a string or a << chain; doctest prints a char* as a pointer */ \
        what_ << what;                                                                                 \
        INFO(what_.str() << ": max abs err " << e_.max_abs << ", max rel err " << e_.max_rel << " (tol " \
                         << (tol) << ")");                                                             \
        CHECK(e_.max_abs <= (tol));                                                                    \
    } while (0)

}  // namespace test
