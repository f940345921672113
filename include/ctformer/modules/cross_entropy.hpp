// ctformer/modules/cross_entropy.hpp — torch.nn.functional.cross_entropy over rows of logits
// (mean over the rows whose target is not ignore_index): forward and backward side by side.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../kernels/softmax.hpp"

namespace ctformer::modules {

struct cross_entropy {
    // One row of V logits, in place: returns lse(x) - x[target] and leaves softmax(x) in x (what the
    // backward needs). In T (a float model does no double arithmetic), through the vectorized
    // softmax; lse = max + log(sum) is read back as max - log(p[argmax]), and p[argmax] >= 1/V
    // cannot underflow.
    template <class T> static T forward_row(T* x, std::size_t V, std::size_t target) {
        std::size_t arg = 0;
        for (std::size_t j = 1; j < V; ++j)
            if (x[j] > x[arg]) arg = j;
        const T m = x[arg], xt = x[target];
        kernels::softmax_inplace(x, V);
        return m - std::log(x[arg]) - xt;
    }
    // d(loss · scale) / dx for one row from its probabilities p: (p - onehot(target)) · scale,
    // where scale = loss_scale / (non-ignored rows) for the mean.
    template <class T> static void backward_row(const T* p, T* dx, std::size_t V, std::size_t target, T scale) {
        for (std::size_t j = 0; j < V; ++j) dx[j] = (p[j] - (j == target ? T(1) : T(0))) * scale;
    }
};

}  // namespace ctformer::modules
