// ctformer/modules/norm.hpp — the layer's normalization over rows of d_model values, with the
// configured policy (LayerNorm, RMSNorm or a user type): forward and backward side by side.
#pragma once
#include <cstddef>

#include "../policies.hpp"

namespace ctformer::modules {

template <class Cfg> struct norm {
    using T = typename Cfg::value_type;
    using Policy = typename Cfg::norm_type;
    static constexpr std::size_t D = Cfg::d_model;
    static constexpr T eps() { return static_cast<T>(Cfg::eps); }

    // y: (rows, D) = norm(x: (rows, D)); y may alias x.
    template <class NP> static constexpr void forward(const NP& np, const T* x, T* y, std::size_t rows) {
        if constexpr (requires { Policy::template apply_rows<D>(np, x, y, rows, eps()); })
            Policy::template apply_rows<D>(np, x, y, rows, eps());
        else
            for (std::size_t r = 0; r < rows; ++r) Policy::template apply<D>(np, x + r * D, y + r * D, eps());
    }
    // From x: (rows, D) (the forward's input) and dy: (rows, D): grads of the norm's parameters
    // (+=) and dx: (rows, D) (written, or added to when accumulate; dx may alias dy).
    template <class NP> static void backward(const NP& np, NP& g, const T* x, const T* dy, T* dx, std::size_t rows,
                                             bool accumulate) {
        static_assert(differentiable_norm<Policy, D, NP, T>,
                      "ctformer: the norm policy has no backward: training needs static void backward<D>(params, "
                      "grads, x, dy, dx, eps, accumulate) (see policies.hpp)");
        for (std::size_t r = 0; r < rows; ++r)
            Policy::template backward<D>(np, g, x + r * D, dy + r * D, dx + r * D, eps(), accumulate);
    }
};

}  // namespace ctformer::modules
