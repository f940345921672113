// Shared test helpers: fixture files, error metrics with per-dtype tolerances.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
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

// A safetensors file written tensor by tensor (a loader test's hand-made or edited file): add a
// tensor's dtype, shape and bytes, or copy one from a parsed file under another dtype's bytes.
struct safetensors_writer {
    std::string header = "{", data;
    void add(std::string_view name, std::string_view dtype, const std::uint64_t* shape, std::size_t rank, std::string_view bytes) {
        header += (header.size() > 1 ? ",\"" : "\"") + std::string(name) + "\":{\"dtype\":\"" + std::string(dtype) + "\",\"shape\":[";
        for (std::size_t d = 0; d < rank; ++d) header += (d ? "," : "") + std::to_string(shape[d]);
        header += "],\"data_offsets\":[" + std::to_string(data.size()) + "," + std::to_string(data.size() + bytes.size()) + "]}";
        data += bytes;
    }
    template <class F> void copy(const F& f, const ct::safetensors::entry& e) {
        add(e.name, ct::safetensors::dtype_names[static_cast<std::size_t>(e.type)], e.shape.data(), e.rank,
            {reinterpret_cast<const char*>(f.data(e)), static_cast<std::size_t>(e.end - e.begin)});
    }
    std::vector<std::byte> bytes() const {
        const std::string h = header + "}";
        std::vector<std::byte> out(8 + h.size() + data.size());
        for (std::size_t i = 0; i < 8; ++i) out[i] = std::byte((h.size() >> (8 * i)) & 0xff);
        std::memcpy(out.data() + 8, h.data(), h.size());
        std::memcpy(out.data() + 8 + h.size(), data.data(), data.size());
        return out;
    }
};

}  // namespace test
