// ctformer/simd/simd.hpp — the vector layer the kernels are written in: the arch chosen at compile
// time (arch.hpp), lane operations (lanes.hpp), elementwise math (math.hpp) and halves (half.hpp).
#pragma once
#include "arch.hpp"
#include "half.hpp"
#include "lanes.hpp"
#include "math.hpp"
