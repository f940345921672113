// ctformer/modules/linear.hpp — torch.nn.Linear over a weight in panel layout: forward and
// backward side by side. A weight may be used a few output blocks at a time (segments:
// MultiheadAttention's Wq | Wk | Wv); each function takes the first block s0 and the count n.
#pragma once
#include <boost/hana/define_struct.hpp>
#include <cstddef>

#include "../core/reflect.hpp"
#include "../core/tensor.hpp"
#include "../core/quant.hpp"
#include "../kernels/gemm.hpp"
#include "../kernels/gemm_quant.hpp"
#include "../kernels/gemm_quant_train.hpp"
#include "../kernels/gemm_train.hpp"

namespace ctformer {

// torch.nn.Linear: y = x·Wᵀ + b, weight (Out, In) stored in format Fmt (core/quant.hpp), bias (Out).
template <class T, std::size_t Out, std::size_t In, bool Bias, class Fmt = dense> struct LinearParams;
template <class T, std::size_t Out, std::size_t In, class Fmt> struct LinearParams<T, Out, In, true, Fmt> {
    using weight_t = weight_storage_t<Fmt, T, Out, In>;
    using bias_t = Tensor<T, Out>;
    static constexpr bool has_bias = true;
    BOOST_HANA_DEFINE_STRUCT(LinearParams, (weight_t, weight), (bias_t, bias));
    constexpr const T* bias_data() const { return bias.data(); }
    constexpr T* bias_data() { return bias.data(); }
};
template <class T, std::size_t Out, std::size_t In, class Fmt> struct LinearParams<T, Out, In, false, Fmt> {
    using weight_t = weight_storage_t<Fmt, T, Out, In>;
    static constexpr bool has_bias = false;
    BOOST_HANA_DEFINE_STRUCT(LinearParams, (weight_t, weight));
    constexpr const T* bias_data() const { return nullptr; }
    constexpr T* bias_data() { return nullptr; }
};

}  // namespace ctformer

namespace ctformer::modules {

// What travels through every sub-layer's backward together: its input x (as the forward read it),
// its output's gradient dy, and where its input's gradient goes: dx (+)= (accumulate: +=).
template <class T> struct branch_grad {
    const T* x;
    const T* dy;
    T* dx;
    bool accumulate;
};

struct linear {
    // y: (rows, n·Seg) at ldy = x: (rows, In) · [blocks s0 .. s0+n of W]ᵀ + bias, then act. One GEMM
    // when the blocks abut in panel layout, else one per block (Seg not a multiple of the panel).
    // accumulate: y = act(y + x·Wᵀ + bias), the residual already in y. ldx: x's row stride (0: In).
    // (parameters: the GEMM's, kernels/gemm.hpp, over a weight's blocks s0 .. s0+n.)
    template <class Wt, class T, class Act = kernels::identity_op>
    static constexpr void forward(const Wt& w, std::size_t s0, std::size_t n, const T* x, std::size_t rows, const T* bias, T* y,
                        std::size_t ldy, T* pack, const Act& act = {}, bool accumulate = false, std::size_t ldx = 0) {
        constexpr std::size_t In = Wt::in_features, Seg = Wt::segment;
        const std::size_t lda = ldx ? ldx : In;
        if constexpr (Wt::segments_contiguous) {
            kernels::gemm_panels(rows, n * Seg, In, x, lda, w.panels(s0), y, ldy, bias, act, pack, accumulate);
        } else {
            for (std::size_t s = 0; s < n; ++s)
                kernels::gemm_panels(rows, Seg, In, x, lda, w.panels(s0 + s), y + s * Seg, ldy,
                                     bias ? bias + s * Seg : nullptr, act, pack, accumulate);
        }
    }

    // From x: (rows, In) (the forward's input) and dy: (rows, n·Seg) at ldy (the output's gradient):
    //   dW[blocks s0..s0+n] += dyᵀ · x     (g_w: the weight's gradient, same panel layout as w)
    //   d_bias += Σ_rows dy                 (g_bias: null when there is no bias)
    //   dx: (rows, In) (+)= dy · W[blocks]  (dx: null when the input needs no gradient)
    // ldx: the row stride of x and dx (0: In).
    // (parameters: the GEMM's, kernels/gemm.hpp, over a weight's blocks s0 .. s0+n.)
    template <class Wt, class T>
    static void backward(const Wt& w, Wt& g_w, std::size_t s0, std::size_t n, const T* x, std::size_t rows,
                         const T* dy, std::size_t ldy, T* g_bias, T* dx, bool accumulate, T* pack, std::size_t ldx = 0) {
        constexpr std::size_t In = Wt::in_features, Seg = Wt::segment;
        static_assert(!is_quantized_weight_v<Wt>,
                      "ctformer: training needs dense weights: quantized params (ct::weights<...>) are for inference "
                      "(train with dense weights, then load the checkpoint into the quantized type)");
        constexpr std::size_t blocks_per_call = Wt::segments_contiguous ? 0 : 1;  // 0: all n at once
        const std::size_t step = blocks_per_call ? blocks_per_call : n;
        for (std::size_t s = 0; s < n; s += step) {
            const T* dys = dy + s * Seg;
            // dWᵀ: (In, step·Seg) panels += xᵀ: (In, rows) · dy: (rows, step·Seg)
            kernels::gemm_tn_panels(In, step * Seg, rows, x, ldx ? ldx : In, dys, ldy, g_w.panels(s0 + s), pack);
            if (g_bias) kernels::add_column_sums(g_bias + s * Seg, dys, rows, step * Seg, ldy);
            // dx: (rows, In) (+)= dy: (rows, step·Seg) · W: (step·Seg, In)
            if (dx)
                kernels::gemm_nt_panels(rows, In, step * Seg, dys, ldy, w.panels(s0 + s), dx, ldx ? ldx : In, pack,
                                        accumulate || s > 0);
        }
    }

    // A frozen weight's backward (adapters train: modules/lora.hpp): dx: (rows, In) at ldx (0: In)
    // (+)= dy: (rows, n·Seg) at ldy · W[blocks s0 .. s0+n]; W dense or quantized (dequantized a block
    // at a time: kernels/gemm_quant_train.hpp).
    template <class Wt, class T>
    static void input_grad(const Wt& w, std::size_t s0, std::size_t n, const T* dy, std::size_t ldy, std::size_t rows, T* dx,
                           std::size_t ldx, bool accumulate, T* pack) {
        constexpr std::size_t In = Wt::in_features, Seg = Wt::segment;
        const std::size_t ld = ldx ? ldx : In;
        const std::size_t step = Wt::segments_contiguous ? n : 1;
        for (std::size_t s = 0; s < n; s += step) {
            if constexpr (is_quantized_weight_v<Wt>) {
                alignas(64) float block[kernels::nt_quant_block_elems];
                kernels::gemm_nt_quant(rows, In, step * Seg, dy + s * Seg, ldy, w.panels(s0 + s), dx, ld, block, pack,
                                       accumulate || s > 0);
            } else {
                kernels::gemm_nt_panels(rows, In, step * Seg, dy + s * Seg, ldy, w.panels(s0 + s), dx, ld, pack,
                                        accumulate || s > 0);
            }
        }
    }
    // backward where g_w is given and the weight can train, else input_grad (g_w null: frozen).
    template <class Wt, class T>
    static void backward_or_frozen(const Wt& w, Wt* g_w, std::size_t s0, std::size_t n, const T* x, std::size_t rows,
                                   const T* dy, std::size_t ldy, T* g_bias, T* dx, bool accumulate, T* pack,
                                   std::size_t ldx = 0) {
        if constexpr (!is_quantized_weight_v<Wt>)
            if (g_w) return backward(w, *g_w, s0, n, x, rows, dy, ldy, g_bias, dx, accumulate, pack, ldx);
        if (dx) input_grad(w, s0, n, dy, ldy, rows, dx, ldx, accumulate, pack);
    }
    // A LinearParams' backward: its gradients (+= into *g) and dx (null: none), or dx alone (g null).
    template <class LP, class T>
    static void backward_of(const LP& p, LP* g, const T* x, std::size_t rows, const T* dy, std::size_t ldy, T* dx,
                            bool accumulate, T* pack, std::size_t ldx = 0) {
        backward_or_frozen(p.weight, g ? &g->weight : nullptr, 0, 1, x, rows, dy, ldy, g ? g->bias_data() : nullptr, dx,
                           accumulate, pack, ldx);
    }
};

}  // namespace ctformer::modules
