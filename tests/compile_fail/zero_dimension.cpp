// expect: a tensor dimension is zero
#include <ctformer/ctformer.hpp>
ct::Tensor<float, 2, 0, 16> t;
