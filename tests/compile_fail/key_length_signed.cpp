// expect: constant expression
#include <ctformer/ctformer.hpp>
// A signed runtime length must be converted explicitly (it could be negative).
auto f(int n) { return ct::key_lengths{n, 5}; }
