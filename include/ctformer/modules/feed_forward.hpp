// ctformer/modules/feed_forward.hpp — the position-wise feed-forward network
// linear2(dropout(act(linear1(x)))): forward and backward side by side. The output's dropout
// and the residual add belong to the layer.
#pragma once
#include <cstddef>
#include <type_traits>

#include <boost/hana/define_struct.hpp>

#include "../core/dropout.hpp"
#include "../core/reflect.hpp"
#include "../core/schedule.hpp"
#include "../kernels/elementwise.hpp"
#include "activations.hpp"
#include "linear.hpp"
#include "lora.hpp"

namespace ctformer {

// linear1 (F, D) and linear2 (D, F) (TransformerDecoderLayer's names, at its level: layer/names.hpp).
template <class T, std::size_t D, std::size_t F, bool Bias, class Fmt = dense> struct FeedForwardParams {
    using role = role::ffn;
    using lin1_t = LinearParams<T, F, D, Bias, role_format_t<Fmt, proj::up>>;  // (Fmt: a format or a per_tensor map)
    using lin2_t = LinearParams<T, D, F, Bias, role_format_t<Fmt, proj::down>>;
    BOOST_HANA_DEFINE_STRUCT(FeedForwardParams, (lin1_t, linear1), (lin2_t, linear2));
};

// The gated feed-forward down(act(gate(x)) ∘ up(x)) (Hugging Face's LlamaMLP): gate_proj, up_proj
// (F, D), down_proj (D, F).
template <class T, std::size_t D, std::size_t F, bool Bias, class Fmt = dense> struct GatedFeedForwardParams {
    using role = role::ffn;
    using gate_t = LinearParams<T, F, D, Bias, role_format_t<Fmt, proj::gate>>;  // (Fmt: a format or a per_tensor map)
    using up_t = LinearParams<T, F, D, Bias, role_format_t<Fmt, proj::up>>;
    using out_t = LinearParams<T, D, F, Bias, role_format_t<Fmt, proj::down>>;
    BOOST_HANA_DEFINE_STRUCT(GatedFeedForwardParams, (gate_t, gate_proj), (up_t, up_proj), (out_t, down_proj));
};

}  // namespace ctformer

namespace ctformer::modules {

template <class Cfg> struct feed_forward {
    using T = typename Cfg::value_type;
    using Act = typename Cfg::activation_type;
    static constexpr bool gated = Cfg::gated;
    using Fmt = typename Cfg::weight_format;
    using Params = std::conditional_t<gated, GatedFeedForwardParams<T, Cfg::d_model, Cfg::ffn_dim, Cfg::ffn_bias, Fmt>,
                                      FeedForwardParams<T, Cfg::d_model, Cfg::ffn_dim, Cfg::ffn_bias, Fmt>>;
    static constexpr std::size_t D = Cfg::d_model, F = Cfg::ffn_dim;
    // Row stride of the hidden activations (hidden, u; gated: gate | up, 2F columns): linear1's
    // register tiles write 12 rows at a time, which at a multiple of 4 KB apart share one L1 set.
    static constexpr std::size_t ldh = kernels::padded_row_stride<T>(gated ? 2 * F : F);
    // Scratch of a call over M rows (the hidden rows), and what a training forward saves: the
    // first linear's (gated: gate | up) output before the activation.
    static constexpr std::size_t hidden_elems(std::size_t M) { return M * ldh; }
    template <std::size_t M> struct saved {
        alignas(64) T u[M * ldh];
    };

    // out: (rows, D) = FF(x: (rows, D)), or out += FF(x) (accumulate: the residual add fused into
    // linear2's epilogue). hidden: (rows, F) at stride ldh, scratch. Training (u non-null) saves
    // linear1's output before the activation, u: (rows, F) at ldh, for backward; otherwise the
    // activation is linear1's epilogue. Dropout after the activation, the rows numbered by
    // dropout_row_id(first + r, Tq) (x holds the rows from row `first` of the layer's on).
    // (parameters: the sub-layer's input and output, its scratch, and dropout's row numbering.)
    // (lo: the layer's adapters, modules/lora.hpp)
    template <class Drop, class Lo = no_lora_pass>
    static constexpr void forward(const Params& p, const T* x, T* hidden, T* out, bool accumulate, std::size_t rows,
                        std::size_t Tq, const Drop& drop, T* pack, T* u = nullptr, std::size_t first = 0, Lo lo = {}) {
        if constexpr (gated) gated_forward(p, x, hidden, out, accumulate, rows, Tq, drop, pack, u, adapters_in<Lo>{lo, first});
        else dense_forward(p, x, hidden, out, accumulate, rows, Tq, drop, pack, u, adapters_in<Lo>{lo, first});
    }
    // g: the params' gradients (+=), or null (frozen: adapters train, lg: their gradients).
    template <class Drop, class Lg = no_lora_pass>
    static void backward(const Params& p, Params* g, const branch_grad<T>& bg, const T* u, T* hidden, std::size_t rows,
                         std::size_t Tq, const Drop& drop, T* pack, const Lg& lg = {}) {
        static_assert(differentiable_activation<Act, T>,
                      "ctformer: the activation has no derivative: training needs a member derivative(x) "
                      "(see modules/activations.hpp)");
        const adapter_grads<Lg, Drop> ag{lg, drop, Tq, pack};
        if constexpr (gated) gated_backward(p, g, bg, u, hidden, rows, Tq, drop, pack, ag);
        else dense_backward(p, g, bg, u, hidden, rows, Tq, drop, pack, ag);
    }

  private:
    // A call's adapters (none: each call is a no-op), by projection bit (modules/lora.hpp: a plain
    // FFN's linear1 is lora_up, linear2 lora_down). first: the numbering of x's first row (dropout).
    template <class Lo> struct adapters_in {  // (passed by value: no_lora_pass is empty)
        Lo lo;
        std::size_t first;
        constexpr bool on() const {
            if constexpr (passes_adapters<Lo>) return lo.ad != nullptr;
            else return false;
        }
        // y: (rows, Out) at ldy += the adapter of projection Bit on x: (rows, In) at ldx
        template <unsigned Bit>
        constexpr void operator()(const T* x, std::size_t ldx, std::size_t rows, T* y, std::size_t ldy, T* pack) const {
            if constexpr (passes_adapters<Lo>)
                if (lo.ad) {
                    using A = std::remove_cvref_t<decltype(*lo.ad)>;
                    lora::forward<Bit>(A::template slot<Bit>(*lo.ad), x, ldx, rows, y, ldy, pack, lo.drop, lo.Tq, first);
                }
        }
    };
    template <class Lg, class Drop> struct adapter_grads {
        const Lg& lg;
        const Drop& drop;
        std::size_t Tq;
        T* pack;
        // whether projection Bit has an adapter to train (its backward then reads its input)
        template <unsigned Bit> bool trains() const {
            if constexpr (passes_adapters<Lg>) {
                using A = std::remove_cvref_t<decltype(*lg.ad)>;
                return lg.ad && lora::adapter<decltype(A::template slot<Bit>(*lg.ad))>;
            } else {
                return false;
            }
        }
        // the adapter's gradients from its input x and its output's gradient dy
        template <unsigned Bit> void weights(const T* x, std::size_t ldx, std::size_t rows, const T* dy, std::size_t ldy) const {
            if constexpr (passes_adapters<Lg>)
                if (lg.ad) {
                    using A = std::remove_cvref_t<decltype(*lg.ad)>;
                    lora::weight_grads<Bit>(A::template slot<Bit>(*lg.ad), A::template slot<Bit>(*lg.g), x, ldx, rows, dy, ldy,
                                            pack, drop, Tq);
                }
        }
        // dx += the adapter's share of its input's gradient
        template <unsigned Bit> void input(const T* dy, std::size_t ldy, std::size_t rows, T* dx, std::size_t ldx) const {
            if constexpr (passes_adapters<Lg>)
                if (lg.ad) {
                    using A = std::remove_cvref_t<decltype(*lg.ad)>;
                    lora::input_grad<Bit>(A::template slot<Bit>(*lg.ad), dy, ldy, rows, dx, ldx, drop, Tq);
                }
        }
        // both, where x outlives the call (dx += the adapter's share; dx may not alias x)
        template <unsigned Bit>
        void both(const T* x, std::size_t ldx, std::size_t rows, const T* dy, std::size_t ldy, T* dx) const {
            if constexpr (passes_adapters<Lg>)
                if (lg.ad) {
                    using A = std::remove_cvref_t<decltype(*lg.ad)>;
                    lora::backward<Bit>(A::template slot<Bit>(*lg.ad), A::template slot<Bit>(*lg.g), x, ldx, rows, dy, ldy, dx,
                                        pack, drop, Tq);
                }
        }
    };

    // h: (rows, F) at ldh = act(u) (rows in parts: each row alone)
    static constexpr void activate_rows(const T* u, T* h, std::size_t rows) {
        schedule::for_each_row(rows, F, [&](std::size_t r) { kernels::map(u + r * ldh, h + r * ldh, F, Act{}); });
    }
    // (parameters: the sub-layer's input and output, its scratch, dropout's row numbering, adapters.)
    // With an adapter on linear1 its output is completed before the activation (no fused epilogue).
    template <class Drop, class Ad>
    static constexpr void dense_forward(const Params& p, const T* x, T* hidden, T* out, bool accumulate, std::size_t rows,
                        std::size_t Tq, const Drop& drop, T* pack, T* u, Ad ad) {
        if (u || ad.on()) {
            T* pre = u ? u : hidden;
            linear::forward(p.linear1.weight, 0, 1, x, rows, p.linear1.bias_data(), pre, ldh, pack);
            ad.template operator()<lora_up>(x, D, rows, pre, ldh, pack);
            activate_rows(pre, hidden, rows);
        } else {
            linear::forward(p.linear1.weight, 0, 1, x, rows, p.linear1.bias_data(), hidden, ldh, pack, Act{});
        }
        drop_rows(drop, hidden, rows, F, ldh, Tq, dropout_site::ffn_activation, ad.first);
        linear::forward(p.linear2.weight, 0, 1, hidden, rows, p.linear2.bias_data(), out, D, pack, kernels::identity_op{},
                        accumulate, ldh);
        ad.template operator()<lora_down>(hidden, ldh, rows, out, D, pack);
    }

    // From x: (rows, D) and u: (rows, F) (the forward's input and saved pre-activation) and
    // dy: (rows, D) (the FFN output's gradient): grads of linear1 and linear2 (+=; g null: frozen)
    // and of their adapters, and dx: (rows, D) (+)= the input's gradient. hidden: (rows, F) at
    // ldh, scratch.
    template <class Drop, class Ag>
    static void dense_backward(const Params& p, Params* g, const branch_grad<T>& bg, const T* u, T* hidden,
                               std::size_t rows, std::size_t Tq, const Drop& drop, T* pack, const Ag& ag) {
        const T *x = bg.x, *dy = bg.dy;
        // h = dropout(act(u)) again, for linear2's (and its adapter's) weight gradient (frozen
        // without one: not needed)
        if (g || ag.template trains<lora_down>()) {
            activate_rows(u, hidden, rows);
            drop_rows(drop, hidden, rows, F, ldh, Tq, dropout_site::ffn_activation);
        }
        linear::backward_of(p.linear2, g ? &g->linear2 : nullptr, hidden, rows, dy, D, static_cast<T*>(nullptr), false, pack, ldh);
        ag.template weights<lora_down>(hidden, ldh, rows, dy, D);
        // dh: (rows, F) = dy · W2 (+ the adapter's), through the dropout and the activation: du = dh ∘ act'(u)
        linear::input_grad(p.linear2.weight, 0, 1, dy, D, rows, hidden, ldh, false, pack);
        ag.template input<lora_down>(dy, D, rows, hidden, ldh);
        drop_rows(drop, hidden, rows, F, ldh, Tq, dropout_site::ffn_activation);
        schedule::for_each_row(rows, F, [&](std::size_t r) { kernels::mul_derivative(hidden + r * ldh, u + r * ldh, F, Act{}); });
        linear::backward_of(p.linear1, g ? &g->linear1 : nullptr, x, rows, hidden, ldh, bg.dx, bg.accumulate, pack);
        ag.template both<lora_up>(x, D, rows, hidden, ldh, bg.dx);
    }

    // Gated: hidden: (rows, 2F) at ldh holds gate | up; h = dropout(act(gate) ∘ up) in the gate's
    // columns, then out (+)= h · down_projᵀ. Training saves gate | up before the activation in u.
    // (parameters: the sub-layer's input and output, its scratch, dropout's row numbering, adapters.)
    template <class Drop, class Ad>
    static constexpr void gated_forward(const Params& p, const T* x, T* hidden, T* out, bool accumulate, std::size_t rows,
                                        std::size_t Tq, const Drop& drop, T* pack, T* u, Ad ad) {
        if (u || ad.on()) {
            T* pre = u ? u : hidden;
            linear::forward(p.gate_proj.weight, 0, 1, x, rows, p.gate_proj.bias_data(), pre, ldh, pack);
            linear::forward(p.up_proj.weight, 0, 1, x, rows, p.up_proj.bias_data(), pre + F, ldh, pack);
            ad.template operator()<lora_gate>(x, D, rows, pre, ldh, pack);
            ad.template operator()<lora_up>(x, D, rows, pre + F, ldh, pack);
            gate_rows(pre, hidden, rows);
        } else {
            linear::forward(p.gate_proj.weight, 0, 1, x, rows, p.gate_proj.bias_data(), hidden, ldh, pack, Act{});
            linear::forward(p.up_proj.weight, 0, 1, x, rows, p.up_proj.bias_data(), hidden + F, ldh, pack);
            schedule::for_each_row(rows, F, [&](std::size_t r) { kernels::mul_inplace(hidden + r * ldh, hidden + r * ldh + F, F); });
        }
        drop_rows(drop, hidden, rows, F, ldh, Tq, dropout_site::ffn_activation, ad.first);
        linear::forward(p.down_proj.weight, 0, 1, hidden, rows, p.down_proj.bias_data(), out, D, pack,
                        kernels::identity_op{}, accumulate, ldh);
        ad.template operator()<lora_down>(hidden, ldh, rows, out, D, pack);
    }
    // h: (rows, F) at ldh = act(u's gate) ∘ u's up (h may be u: each row's gate is read before it is written).
    // (Out of line: inlined, it grew the decoding step's frame on microcontrollers, which never run it.)
    [[gnu::noinline]] static constexpr void gate_rows(const T* u, T* h, std::size_t rows) {
        schedule::for_each_row(rows, F, [&](std::size_t r) { kernels::gated(u + r * ldh, u + r * ldh + F, h + r * ldh, F, Act{}); });
    }
    // From u = gate | up (saved): dh = dropout'(dy · W_down); d_up = dh ∘ act(gate),
    // d_gate = dh ∘ up ∘ act'(gate); then the projections' (g null: frozen) and adapters' gradients.
    template <class Drop, class Ag>
    static void gated_backward(const Params& p, Params* g, const branch_grad<T>& bg, const T* u, T* hidden,
                               std::size_t rows, std::size_t Tq, const Drop& drop, T* pack, const Ag& ag) {
        const T *x = bg.x, *dy = bg.dy;
        if (g || ag.template trains<lora_down>()) {  // h again, for down_proj's (or its adapter's) weight gradient
            gate_rows(u, hidden, rows);
            drop_rows(drop, hidden, rows, F, ldh, Tq, dropout_site::ffn_activation);
        }
        linear::backward_of(p.down_proj, g ? &g->down_proj : nullptr, hidden, rows, dy, D, static_cast<T*>(nullptr), false, pack,
                            ldh);
        ag.template weights<lora_down>(hidden, ldh, rows, dy, D);
        linear::input_grad(p.down_proj.weight, 0, 1, dy, D, rows, hidden, ldh, false, pack);
        ag.template input<lora_down>(dy, D, rows, hidden, ldh);
        drop_rows(drop, hidden, rows, F, ldh, Tq, dropout_site::ffn_activation);
        schedule::for_each_row(rows, F, [&](std::size_t r) {
            T* dh = hidden + r * ldh;  // -> d_gate
            kernels::gated_grad(u + r * ldh, u + r * ldh + F, dh, dh + F, F, Act{});
        });
        linear::backward_of(p.gate_proj, g ? &g->gate_proj : nullptr, x, rows, hidden, ldh, bg.dx, bg.accumulate, pack);
        linear::backward_of(p.up_proj, g ? &g->up_proj : nullptr, x, rows, hidden + F, ldh, bg.dx, true, pack);
        ag.template both<lora_gate>(x, D, rows, hidden, ldh, bg.dx);
        ag.template both<lora_up>(x, D, rows, hidden + F, ldh, bg.dx);
    }
};

}  // namespace ctformer::modules
