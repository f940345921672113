// ctformer/modules/norm.hpp — normalization over rows of d_model values: the policies a user picks
// (ct::norm<layer_norm | rms_norm | YourNorm>, with their parameters) and the layer's norm module
// over the configured one, forward and backward side by side.
#pragma once
#include <boost/hana/define_struct.hpp>
#include <cstddef>
#include <type_traits>

#include "../core/schedule.hpp"
#include "../core/tensor.hpp"
#include "../kernels/gemm.hpp"
#include "../kernels/norm.hpp"

namespace ctformer {

// ---- Normalizations. A norm policy has
//   template <class T, size_t D, bool Bias> using params = ...;   (reflected; no_params if none)
//   template <size_t D, class P, class T> static void apply(const P&, const T* x, T* y, T eps);
// which normalizes one row x: (D) into y: (D); y may alias x; optionally
//   template <size_t D, class P, class T> static void apply_rows(const P&, const T* x, T* y, size_t rows, T eps);
// the same for rows (rows, D) at once (the built-in norms: the statistics of a vector's width of
// rows together), each row's result independent of the rows beside it (a threaded forward may
// hand it any group of rows); and, for training,
//   template <size_t D, class P, class T> static void backward(const P& p, P& grad, const T* x,
//       const T* dy, T* dx, T eps, bool accumulate);
// which, from the forward's input row x and the output's gradient dy, adds the parameters'
// gradients to grad and writes dx (adds to it when accumulate); optionally, to run backward over
// many rows in parallel, the same split in two (the built-in norms have them):
//   template <size_t D, class P, class T> static void backward_params(const P& p, P& grad,
//       const T* x, const T* dy, size_t rows, size_t c0, size_t c1, T eps);   (columns [c0, c1))
//   template <size_t D, class P, class T> static void backward_input(const P& p, const T* x,
//       const T* dy, T* dx, T eps, bool accumulate);                          (one row's dx)
// each adding exactly what backward does. ----
struct no_params {
    BOOST_HANA_DEFINE_STRUCT(no_params);
};

template <class T, std::size_t D, bool Bias> struct LayerNormParams;
template <class T, std::size_t D> struct LayerNormParams<T, D, true> {
    using vec_t = Tensor<T, D>;
    BOOST_HANA_DEFINE_STRUCT(LayerNormParams, (vec_t, weight), (vec_t, bias));
};
template <class T, std::size_t D> struct LayerNormParams<T, D, false> {
    using vec_t = Tensor<T, D>;
    BOOST_HANA_DEFINE_STRUCT(LayerNormParams, (vec_t, weight));
};
template <class T, std::size_t D> struct RMSNormParams {
    using vec_t = Tensor<T, D>;
    BOOST_HANA_DEFINE_STRUCT(RMSNormParams, (vec_t, weight));
};

// PyTorch LayerNorm: (x - mean) / sqrt(biased_var + eps) · weight + bias.
struct layer_norm {
    static constexpr const char* name = "layer_norm";
    template <class T, std::size_t D, bool Bias> using params = LayerNormParams<T, D, Bias>;
    template <std::size_t D, class T, bool Bias>
    static constexpr void apply(const LayerNormParams<T, D, Bias>& p, const T* x, T* y, T eps) {
        const T* beta = nullptr;
        if constexpr (Bias) beta = p.bias.data();
        kernels::layer_norm_row(x, y, D, eps, p.weight.data(), beta);
    }
    template <std::size_t D, class T, bool Bias>
    static constexpr void apply_rows(const LayerNormParams<T, D, Bias>& p, const T* x, T* y, std::size_t rows, T eps) {
        const T* beta = nullptr;
        if constexpr (Bias) beta = p.bias.data();
        kernels::layer_norm_rows(x, y, rows, D, eps, p.weight.data(), beta);
    }
    template <std::size_t D, class T, bool Bias>
    static void backward(const LayerNormParams<T, D, Bias>& p, LayerNormParams<T, D, Bias>& g, const T* x,
                         const T* dy, T* dx, T eps, bool accumulate) {
        T* dbeta = nullptr;
        if constexpr (Bias) dbeta = g.bias.data();
        kernels::layer_norm_row_backward(x, dy, dx, D, eps, p.weight.data(), g.weight.data(), dbeta, accumulate);
    }
    template <std::size_t D, class T, bool Bias>
    static void backward_params(const LayerNormParams<T, D, Bias>&, LayerNormParams<T, D, Bias>& g, const T* x,
                                const T* dy, std::size_t rows, std::size_t c0, std::size_t c1, T eps) {
        T* dbeta = nullptr;
        if constexpr (Bias) dbeta = g.bias.data();
        kernels::norm_rows_param_grads(x, dy, rows, D, eps, true, c0, c1, g.weight.data(), dbeta);
    }
    template <std::size_t D, class T, bool Bias>
    static void backward_input(const LayerNormParams<T, D, Bias>& p, const T* x, const T* dy, T* dx, T eps,
                               bool accumulate) {
        kernels::layer_norm_row_backward(x, dy, dx, D, eps, p.weight.data(), static_cast<T*>(nullptr),
                                         static_cast<T*>(nullptr), accumulate);
    }
};
// RMSNorm: x / sqrt(mean(x²) + eps) · weight (no bias, no centering).
struct rms_norm {
    static constexpr const char* name = "rms_norm";
    template <class T, std::size_t D, bool Bias> using params = RMSNormParams<T, D>;
    template <std::size_t D, class T>
    static constexpr void apply(const RMSNormParams<T, D>& p, const T* x, T* y, T eps) {
        kernels::rms_norm_row(x, y, D, eps, p.weight.data());
    }
    template <std::size_t D, class T>
    static constexpr void apply_rows(const RMSNormParams<T, D>& p, const T* x, T* y, std::size_t rows, T eps) {
        kernels::rms_norm_rows(x, y, rows, D, eps, p.weight.data());
    }
    template <std::size_t D, class T>
    static void backward(const RMSNormParams<T, D>& p, RMSNormParams<T, D>& g, const T* x, const T* dy, T* dx, T eps,
                         bool accumulate) {
        kernels::rms_norm_row_backward(x, dy, dx, D, eps, p.weight.data(), g.weight.data(), accumulate);
    }
    template <std::size_t D, class T>
    static void backward_params(const RMSNormParams<T, D>&, RMSNormParams<T, D>& g, const T* x, const T* dy,
                                std::size_t rows, std::size_t c0, std::size_t c1, T eps) {
        kernels::norm_rows_param_grads(x, dy, rows, D, eps, false, c0, c1, g.weight.data(), static_cast<T*>(nullptr));
    }
    template <std::size_t D, class T>
    static void backward_input(const RMSNormParams<T, D>& p, const T* x, const T* dy, T* dx, T eps, bool accumulate) {
        kernels::rms_norm_row_backward(x, dy, dx, D, eps, p.weight.data(), static_cast<T*>(nullptr), accumulate);
    }
};

// Whether a norm policy can be trained through (it has backward).
template <class N, std::size_t D, class P, class T> concept differentiable_norm =
    requires(const P& p, P& g, const T* x, T* dx) { N::template backward<D>(p, g, x, x, dx, T(0), false); };

}  // namespace ctformer

namespace ctformer::modules {

template <class Cfg> struct norm {
    using T = typename Cfg::value_type;
    using Policy = typename Cfg::norm_type;
    static constexpr std::size_t D = Cfg::d_model;
    static constexpr T eps() { return static_cast<T>(Cfg::eps); }

    // y: (rows, D) = norm(x: (rows, D)); y may alias x. Rows in parts (core/schedule.hpp; a
    // row's result does not depend on its part or its place in the vector path's group).
    template <class NP> static constexpr void forward(const NP& np, const T* x, T* y, std::size_t rows) {
        schedule::split_rows(rows, D, [&](std::size_t r0, std::size_t r1) { rows_here(np, x + r0 * D, y + r0 * D, r1 - r0); });
    }
    template <class NP> static constexpr void rows_here(const NP& np, const T* x, T* y, std::size_t rows) {
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
                      "grads, x, dy, dx, eps, accumulate) (see modules/norm.hpp)");
        if constexpr (requires(T* v) {
                          Policy::template backward_params<D>(np, g, x, dy, rows, rows, rows, eps());
                          Policy::template backward_input<D>(np, x, dy, v, eps(), accumulate);
                      }) {
            // Many rows on several threads: the parameters' gradients by 16-column blocks (each
            // summing the rows in order, as the row loop below does), then dx by rows.
            constexpr std::size_t cb = 16;
            if (rows * D >= schedule::min_elems && schedule::split_parts((D + cb - 1) / cb, [&](std::size_t b0, std::size_t b1) {
                    Policy::template backward_params<D>(np, g, x, dy, rows, b0 * cb, b1 * cb < D ? b1 * cb : D, eps());
                })) {
                schedule::for_each_row(rows, D, [&](std::size_t r) {
                    Policy::template backward_input<D>(np, x + r * D, dy + r * D, dx + r * D, eps(), accumulate);
                });
                return;
            }
        }
        for (std::size_t r = 0; r < rows; ++r)
            Policy::template backward<D>(np, g, x + r * D, dy + r * D, dx + r * D, eps(), accumulate);
    }
    // A frozen norm's backward (its params are not trained: adapters are): dx alone.
    template <class NP> static void backward_input(const NP& np, const T* x, const T* dy, T* dx, std::size_t rows, bool accumulate) {
        static_assert(requires(T* v) { Policy::template backward_input<D>(np, x, dy, v, eps(), accumulate); },
                      "ctformer: the norm policy has no backward_input<D>(params, x, dy, dx, eps, accumulate): training "
                      "adapters through it needs one (see modules/norm.hpp)");
        schedule::for_each_row(rows, D, [&](std::size_t r) {
            Policy::template backward_input<D>(np, x + r * D, dy + r * D, dx + r * D, eps(), accumulate);
        });
    }
};

}  // namespace ctformer::modules
