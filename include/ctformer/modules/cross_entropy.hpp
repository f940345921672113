// ctformer/modules/cross_entropy.hpp — torch.nn.functional.cross_entropy over rows of logits
// (mean over the rows whose target is not ignore_index): forward and backward side by side.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace ctformer::modules {

struct cross_entropy {
    // One row of V logits, in place: returns lse(x) - x[target] and leaves softmax(x) in x (what the
    // backward needs). The log-sum-exp is accumulated in double.
    template <class T> static double forward_row(T* x, std::size_t V, std::size_t target) {
        double m = -INFINITY;
        for (std::size_t j = 0; j < V; ++j) m = std::fmax(m, static_cast<double>(x[j]));
        double s = 0;
        for (std::size_t j = 0; j < V; ++j) s += std::exp(static_cast<double>(x[j]) - m);
        const double lse = m + std::log(s), loss = lse - static_cast<double>(x[target]);
        for (std::size_t j = 0; j < V; ++j) x[j] = static_cast<T>(std::exp(static_cast<double>(x[j]) - lse));
        return loss;
    }
    // d(loss · scale) / dx for one row from its probabilities p: (p - onehot(target)) · scale,
    // where scale = loss_scale / (non-ignored rows) for the mean.
    template <class T> static void backward_row(const T* p, T* dx, std::size_t V, std::size_t target, T scale) {
        for (std::size_t j = 0; j < V; ++j) dx[j] = (p[j] - (j == target ? T(1) : T(0))) * scale;
    }
};

}  // namespace ctformer::modules
