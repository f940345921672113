// ctformer/stack.hpp — N layers of one type and an optional final norm, as
// torch.nn.TransformerDecoder computes them (the decoder-only block's stack is TransformerEncoder).
//
//   using Stack = ct::DecoderStack<Layer, 6>;           // layers.{0..5}.*, norm.*
//   static Stack::Params params;                        // one object for every layer's weights
//   Stack::forward(params, ws, tgt, memory, out, ct::causal{});
//
// Every layer runs in place in `out` (a layer's output may alias its input), so the stack needs no
// more scratch than one layer: Workspace and StepWorkspace are the layer's. Training keeps one
// Activations per layer (+ the final norm's input) and two gradient rows buffers; decoding keeps
// one KV cache per layer in one stack cache whose lengths move together.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "layer.hpp"
#include "params.hpp"

namespace ctformer {

// torch.nn.TransformerDecoder's state_dict: layers.{i}.<layer names>, then norm.* (if any).
template <class LP, std::size_t N, class NormP, bool Final> struct StackParams;
template <class LP, std::size_t N, class NormP> struct StackParams<LP, N, NormP, true> {
    using list_t = ModuleList<LP, N>;
    BOOST_HANA_DEFINE_STRUCT(StackParams, (list_t, layers), (NormP, norm));
};
template <class LP, std::size_t N, class NormP> struct StackParams<LP, N, NormP, false> {
    using list_t = ModuleList<LP, N>;
    BOOST_HANA_DEFINE_STRUCT(StackParams, (list_t, layers));
};

template <class L, std::size_t N, bool FinalNorm = true> struct DecoderStack {
    static_assert(N > 0, "ctformer: a stack needs at least one layer");
    using layer_type = L;
    using T = typename L::T;
    using config = typename L::config;
    static constexpr std::size_t layers = N, D = L::D;
    static constexpr bool cross = L::cross, final_norm = FinalNorm;
    using NormM = typename L::NormM;
    using Params = params_role<StackParams<typename L::Params, N, typename L::Params::norm_t, FinalNorm>>;
    using Grads = Params;

    // ---- Memory roles ----
    template <std::size_t B, std::size_t Tq, std::size_t S = Tq> using Workspace = typename L::template Workspace<B, Tq, S>;
    template <std::size_t B, std::size_t C> using StepWorkspace = typename L::template StepWorkspace<B, C>;
    template <std::size_t B, std::size_t Tq, std::size_t S = Tq>
    struct TrainWorkspace : L::template TrainWorkspace<B, Tq, S>, sized_role<TrainWorkspace<B, Tq, S>> {
        alignas(64) T grad_rows[2][B * Tq * D];  // the gradient between layers (ping-pong)
        using sized_role<TrainWorkspace>::bytes;
    };
    template <std::size_t B, std::size_t Tq, std::size_t S = Tq> struct Activations : sized_role<Activations<B, Tq, S>> {
        static constexpr std::size_t batch = B, tgt_len = Tq, src_len = S;
        typename L::template Activations<B, Tq, S> layer[N];
        alignas(64) T final_in[FinalNorm ? B * Tq * D : 1];  // the final norm's input
        bool filled = false;
    };
    // One self-attention cache per layer; every operation moves all of them together, so their
    // lengths always agree.
    template <std::size_t B, std::size_t Cap> class KVCache : public sized_role<KVCache<B, Cap>> {
        using layer_cache = typename L::template KVCache<B, Cap>;
        layer_cache c_[N];
        friend struct DecoderStack;

      public:
        using value_type = T;
        static constexpr std::size_t batch = B, capacity = Cap;
        const layer_cache& layer(std::size_t i) const { return c_[i]; }
        std::size_t length(std::size_t b) const { return c_[0].length(b); }
        const std::array<std::size_t, B>& lengths() const { return c_[0].lengths(); }
        void reset() {
            for (auto& c : c_) c.reset();
        }
        // Rewind batch row b to its first n positions in every layer (errc::out_of_range if b >= B
        // or n > length; nothing changes).
        status truncate(std::size_t b, std::size_t n) {
            if (b >= B || n > length(b)) return status::error(errc::out_of_range);
            for (auto& c : c_) (void)c.truncate(b, n);
            return {};
        }
        status truncate_all(std::size_t n) {
            for (std::size_t b = 0; b < B; ++b)
                if (n > length(b)) return status::error(errc::out_of_range);
            for (auto& c : c_) (void)c.truncate_all(n);
            return {};
        }
    };
    template <std::size_t B, std::size_t S> class CrossKVCache : public sized_role<CrossKVCache<B, S>> {
        using layer_cache = typename L::template CrossKVCache<B, S>;
        layer_cache c_[N];
        friend struct DecoderStack;

      public:
        const layer_cache& layer(std::size_t i) const { return c_[i]; }
        bool filled() const { return c_[0].filled(); }
        void reset() {
            for (auto& c : c_) c.reset();
        }
    };

    // ---- Inference: each layer in place in out, then the final norm ----
    template <class Tgt, class Mem, class Out, class WS, class SM = no_mask, class CM = no_mask>
        requires cross
    static status forward(const Params& p, WS& ws, const Tgt& tgt, const Mem& mem, Out& out, const SM& sm = {},
                          const CM& cm = {}) {
        return chain(p, out, nullptr, [&](std::size_t i) {
            return i == 0 ? L::forward(p.layers[0], ws, tgt, mem, out, sm, cm)
                          : L::forward(p.layers[i], ws, out, mem, out, sm, cm);
        });
    }
    template <class Tgt, class Out, class WS, class SM = no_mask>
        requires(!cross)
    static status forward(const Params& p, WS& ws, const Tgt& tgt, Out& out, const SM& sm = {}) {
        return chain(p, out, nullptr, [&](std::size_t i) {
            return i == 0 ? L::forward(p.layers[0], ws, tgt, out, sm) : L::forward(p.layers[i], ws, out, out, sm);
        });
    }

    // ---- Training: layer i draws its dropout from layer_dropout(dc, i) ----
    static dropout_config layer_dropout(dropout_config dc, std::size_t i) {
        dc.seed += 0x9E3779B97F4A7C15ull * i;
        return dc;
    }
    template <class Acts, class Tgt, class Mem, class Out, class WS, class SM = no_mask, class CM = no_mask>
        requires cross
    static status forward_train(const Params& p, WS& ws, Acts& acts, const Tgt& tgt, const Mem& mem, Out& out,
                                const dropout_config& dc, const SM& sm = {}, const CM& cm = {}) {
        acts.filled = false;
        return chain(p, out, &acts, [&](std::size_t i) {
            const dropout_config di = layer_dropout(dc, i);
            return i == 0 ? L::forward_train(p.layers[0], ws, acts.layer[0], tgt, mem, out, di, sm, cm)
                          : L::forward_train(p.layers[i], ws, acts.layer[i], out, mem, out, di, sm, cm);
        });
    }
    template <class Acts, class Tgt, class Out, class WS, class SM = no_mask>
        requires(!cross)
    static status forward_train(const Params& p, WS& ws, Acts& acts, const Tgt& tgt, Out& out,
                                const dropout_config& dc, const SM& sm = {}) {
        acts.filled = false;
        return chain(p, out, &acts, [&](std::size_t i) {
            const dropout_config di = layer_dropout(dc, i);
            return i == 0 ? L::forward_train(p.layers[0], ws, acts.layer[0], tgt, out, di, sm)
                          : L::forward_train(p.layers[i], ws, acts.layer[i], out, out, di, sm);
        });
    }

    // Adds every layer's and the final norm's gradients to g, tgt's to d_tgt and memory's to
    // d_memory (all layers' cross-attentions add into it). Checks masks and d_out before writing.
    template <class Acts, class WS, class DOut, class DTgt, class DMem, class SM = no_mask, class CM = no_mask>
        requires cross
    static status backward(const Params& p, const Acts& acts, WS& ws, const DOut& d_out, Grads& g, DTgt& d_tgt,
                           DMem& d_memory, const SM& sm = {}, const CM& cm = {}) {
        if (status st = L::template check_inputs<DOut, void>(sm, Acts::tgt_len, cm, Acts::src_len, d_out.data(),
                                                             "d_out", nullptr);
            !st)
            return st;
        return backward_chain(p, acts, ws, d_out, g, d_tgt, [&](std::size_t i, const auto& dy, auto& dx) {
            return L::backward(p.layers[i], acts.layer[i], ws, dy, g.layers[i], dx, d_memory, sm, cm);
        });
    }
    template <class Acts, class WS, class DOut, class DTgt, class SM = no_mask>
        requires(!cross)
    static status backward(const Params& p, const Acts& acts, WS& ws, const DOut& d_out, Grads& g, DTgt& d_tgt,
                           const SM& sm = {}) {
        if (status st = L::template check_inputs<DOut, void>(sm, Acts::tgt_len, no_mask{}, 0, d_out.data(), "d_out",
                                                             nullptr);
            !st)
            return st;
        return backward_chain(p, acts, ws, d_out, g, d_tgt, [&](std::size_t i, const auto& dy, auto& dx) {
            return L::backward(p.layers[i], acts.layer[i], ws, dy, g.layers[i], dx, sm);
        });
    }

    // ---- Incremental decoding through one cache per layer ----
    template <class Mem, std::size_t B, std::size_t S, std::size_t C>
        requires cross
    static void fill_cross_cache(const Params& p, StepWorkspace<B, C>& ws, CrossKVCache<B, S>& cc, const Mem& mem) {
        for (std::size_t i = 0; i < N; ++i) L::fill_cross_cache(p.layers[i], ws, cc.c_[i], mem);
    }
    template <class X, class Y, class SWS, std::size_t B, std::size_t Cap, std::size_t S, class SM = no_mask,
              class CM = no_mask>
        requires cross
    static status step(const Params& p, SWS& ws, KVCache<B, Cap>& cache, const CrossKVCache<B, S>& cc, const X& x,
                       Y& y, const SM& sm = {}, const CM& cm = {}) {
        return step_ragged(p, ws, cache, cc, x, y, full_count<B, X::shape[1]>(), sm, cm);
    }
    template <class X, class Y, class SWS, std::size_t B, std::size_t Cap, std::size_t S, class SM = no_mask,
              class CM = no_mask>
        requires cross
    static status step_ragged(const Params& p, SWS& ws, KVCache<B, Cap>& cache, const CrossKVCache<B, S>& cc,
                              const X& x, Y& y, const std::array<std::size_t, B>& count, const SM& sm = {},
                              const CM& cm = {}) {
        return step_chain(p, y, count, [&](std::size_t i) {
            return i == 0 ? L::step_ragged(p.layers[0], ws, cache.c_[0], cc.c_[0], x, y, count, sm, cm)
                          : L::step_ragged(p.layers[i], ws, cache.c_[i], cc.c_[i], y, y, count, sm, cm);
        });
    }
    template <class X, class Y, class SWS, std::size_t B, std::size_t Cap, class SM = no_mask>
        requires(!cross)
    static status step(const Params& p, SWS& ws, KVCache<B, Cap>& cache, const X& x, Y& y, const SM& sm = {}) {
        return step_ragged(p, ws, cache, x, y, full_count<B, X::shape[1]>(), sm);
    }
    template <class X, class Y, class SWS, std::size_t B, std::size_t Cap, class SM = no_mask>
        requires(!cross)
    static status step_ragged(const Params& p, SWS& ws, KVCache<B, Cap>& cache, const X& x, Y& y,
                              const std::array<std::size_t, B>& count, const SM& sm = {}) {
        return step_chain(p, y, count, [&](std::size_t i) {
            return i == 0 ? L::step_ragged(p.layers[0], ws, cache.c_[0], x, y, count, sm)
                          : L::step_ragged(p.layers[i], ws, cache.c_[i], y, y, count, sm);
        });
    }

  private:
    template <std::size_t B, std::size_t C> static std::array<std::size_t, B> full_count() {
        std::array<std::size_t, B> n;
        n.fill(C);
        return n;
    }
    // Layer 0 checks the call's inputs and writes out; layers 1.. run in place on out. The masks
    // are the same for every layer, so once layer 0 accepted them no later layer rejects them.
    template <class Out, class ActsPtr, class F> static status chain(const Params& p, Out& out, ActsPtr acts, F&& layer) {
        for (std::size_t i = 0; i < N; ++i)
            if (status st = layer(i); !st) return st;
        if constexpr (FinalNorm) {
            constexpr std::size_t M = Out::size / D;
            if constexpr (!std::is_same_v<ActsPtr, std::nullptr_t>)
                for (std::size_t k = 0; k < M * D; ++k) acts->final_in[k] = out.data()[k];
            NormM::forward(p.norm, out.data(), out.data(), M);
        }
        if constexpr (!std::is_same_v<ActsPtr, std::nullptr_t>) acts->filled = true;
        (void)acts;
        return {};
    }
    // The gradient walks down the layers through two row buffers; the last (layer 0) adds into d_tgt.
    template <class Acts, class WS, class DOut, class DTgt, class F>
    static status backward_chain(const Params& p, const Acts& acts, WS& ws, const DOut& d_out, Grads& g, DTgt& d_tgt,
                                 F&& layer) {
        constexpr std::size_t B = Acts::batch, Tq = Acts::tgt_len, M = B * Tq;
        if (!acts.filled) return status::error(errc::no_activations);
        T* cur = ws.grad_rows[0];
        if constexpr (FinalNorm) NormM::backward(p.norm, g.norm, acts.final_in, d_out.data(), cur, M, false);
        else
            for (std::size_t k = 0; k < M * D; ++k) cur[k] = d_out.data()[k];
        for (std::size_t i = N; i-- > 0;) {
            const auto dy = view<B, Tq, D>(static_cast<const T*>(cur));
            status st;
            if (i == 0) {
                st = layer(i, dy, d_tgt);
            } else {
                T* next = cur == ws.grad_rows[0] ? ws.grad_rows[1] : ws.grad_rows[0];
                for (std::size_t k = 0; k < M * D; ++k) next[k] = T(0);
                auto dx = view<B, Tq, D>(next);
                st = layer(i, dy, dx);
                cur = next;
            }
            if (!st) return st;
        }
        return {};
    }
    // The final norm over the rows each batch row fed (the rows past count stay zero).
    template <class Y, std::size_t B, class F>
    static status step_chain(const Params& p, Y& y, const std::array<std::size_t, B>& count, F&& layer) {
        for (std::size_t i = 0; i < N; ++i)
            if (status st = layer(i); !st) return st;
        if constexpr (FinalNorm) {
            constexpr std::size_t C = Y::shape[1];
            for (std::size_t b = 0; b < B; ++b) NormM::forward(p.norm, y.data() + b * C * D, y.data() + b * C * D, count[b]);
        }
        return {};
    }
};

}  // namespace ctformer
