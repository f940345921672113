// ctformer/models/stack.hpp — N layers of one type and an optional final norm, as
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
//
// Every call is all or nothing: either every layer runs, every cache advances and the output is
// written, or the call returns an error and nothing observable changed (docs/robustness.md). The
// first layer checks the call's inputs before anything is written; only check_finite<true> lets
// a later layer fail (an earlier layer's output overflowed): such stacks run their layers in a
// staging buffer of the workspace, copied to the output once every layer succeeded, and a step
// rolls the earlier layers' cache lengths back.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "../layer/layer.hpp"
#include "../core/reflect.hpp"
#include "../core/schedule.hpp"

namespace ctformer {

// torch.nn.TransformerDecoder's state_dict: layers.{i}.<layer names>, then norm.* (if any).
template <class LP, std::size_t N, bool Final> struct described_stack {
    static constexpr const char* kind = "decoder_stack";
    using role = role::stack;
    using names = typename LP::names;
    template <class F> static constexpr void describe(F&& field) {
        LP::describe(field);
        field("layers", N);
        field("final_norm", Final);
    }
};
template <class LP, std::size_t N, class NormP, bool Final> struct StackParams;
template <class LP, std::size_t N, class NormP> struct StackParams<LP, N, NormP, true> : described_stack<LP, N, true> {
    using list_t = ModuleList<LP, N>;
    BOOST_HANA_DEFINE_STRUCT(StackParams, (list_t, layers), (NormP, norm));
};
template <class LP, std::size_t N, class NormP> struct StackParams<LP, N, NormP, false> : described_stack<LP, N, false> {
    using list_t = ModuleList<LP, N>;
    BOOST_HANA_DEFINE_STRUCT(StackParams, (list_t, layers));
};

// The layers' adapters (ct::lora): layers.{i}.<the layer's adapter names>.
template <class LA, std::size_t N, class Names> struct StackAdapters : adapter_config_of<LA> {
    static constexpr std::size_t lora_layers = N;
    using role = role::stack;
    using names = Names;
    using list_t = ModuleList<LA, N>;
    BOOST_HANA_DEFINE_STRUCT(StackAdapters, (list_t, layers));
};

template <class L, std::size_t N, bool FinalNorm = true> struct DecoderStack {
    static_assert(N > 0, "ctformer: a stack needs at least one layer");
    using layer_type = L;
    using T = typename L::T;
    using config = typename L::config;
    static constexpr std::size_t layers = N, D = L::D;
    static constexpr bool cross = L::cross, final_norm = FinalNorm;
    // Whether a layer after the first can reject its input (then the layers run in a staging buffer).
    static constexpr bool staged = config::check_finite && N > 1;
    using NormM = typename L::NormM;
    using Params = params_role<StackParams<typename L::Params, N, typename L::Params::norm_t, FinalNorm>>;
    // Adapters (ct::lora): entry points take Params or ct::with_adapters(params, adapters), as a layer's.
    using Adapters = params_role<StackAdapters<typename L::Adapters, N, typename config::names_type>>;
    template <class PA> using grads_of = std::conditional_t<std::is_same_v<PA, Params>, Params, Adapters>;
    static constexpr const Params& base_of(const Params& p) { return p; }
    static constexpr const Params& base_of(const adapted<Params, Adapters>& p) { return p.params; }
    // Layer i's argument: its params, or its params with its adapters.
    static constexpr const typename L::Params& layer_arg(const Params& p, std::size_t i) { return p.layers[i]; }
    static constexpr auto layer_arg(const adapted<Params, Adapters>& p, std::size_t i) {
        return adapted<typename L::Params, typename L::Adapters>{p.params.layers[i], p.adapters.layers[i]};
    }
    using Grads = Params;

  private:
    template <class Base, std::size_t Rows> struct with_stream : Base, sized_role<with_stream<Base, Rows>> {
        using layer_workspace = Base;
        alignas(64) T stream[Rows * D];  // the staging buffer (staged stacks only)
        using sized_role<with_stream>::bytes;
    };
    template <class Base, std::size_t Rows> using staged_role = std::conditional_t<staged, with_stream<Base, Rows>, Base>;

  public:
    // ---- Memory roles ----
    template <std::size_t B, std::size_t Tq, std::size_t S = Tq>
    using Workspace = staged_role<typename L::template Workspace<B, Tq, S>, B * Tq>;
    template <std::size_t B, std::size_t C> using StepWorkspace = staged_role<typename L::template StepWorkspace<B, C>, B * C>;
    template <std::size_t B, std::size_t Tq, std::size_t S = Tq>
    struct TrainWorkspace : L::template TrainWorkspace<B, Tq, S>, sized_role<TrainWorkspace<B, Tq, S>> {
        alignas(64) T grad_rows[2][B * Tq * D];  // the gradient between layers (ping-pong); forward_train's staging
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

    // One set of entry points for both kinds of layer, as the layer's: mem / d_memory / cc are the
    // memory tensor and the CrossKVCache, or ct::no_memory for a stack of decoder-only blocks (which
    // also has the layer's short forms, at the end of each group).
    template <class M> static constexpr bool memory_arg = L::template memory_arg<M>;

    // ---- Inference: each layer in place in out, then the final norm ----
    template <params_or_adapted<Params, Adapters> PA, class Tgt, class Mem, class Out, class WS, class SM = no_mask, class CM = no_mask>
        requires memory_arg<Mem>
    static status forward(const PA& p, WS& ws, const Tgt& tgt, const Mem& mem, Out& out, const SM& sm = {},
                          const CM& cm = {}) {
        if (status st = check_out(out, tgt, mem); !st) return st;
        return chain(base_of(p), tgt, out, stream<Out>(ws), nullptr, [&](std::size_t i, const auto& x, auto& y) {
            return L::forward(layer_arg(p, i), ws, x, mem, y, sm, cm);
        });
    }
    template <params_or_adapted<Params, Adapters> PA, class Tgt, class Out, class WS, class SM = no_mask>
        requires(!cross && tensor_like<Out>)
    static status forward(const PA& p, WS& ws, const Tgt& tgt, Out& out, const SM& sm = {}) {
        return forward(p, ws, tgt, no_memory{}, out, sm);
    }

    // ---- Training: layer i draws its dropout from layer_dropout(dc, i) ----
    static dropout_config layer_dropout(dropout_config dc, std::size_t i) {
        dc.seed += 0x9E3779B97F4A7C15ull * i;
        return dc;
    }
    // On an error acts are left unfilled (backward then returns errc::no_activations); out is untouched.
    template <params_or_adapted<Params, Adapters> PA, class Acts, class Tgt, class Mem, class Out, class WS, class SM = no_mask, class CM = no_mask>
        requires memory_arg<Mem>
    static status forward_train(const PA& p, WS& ws, Acts& acts, const Tgt& tgt, const Mem& mem, Out& out,
                                const dropout_config& dc, const SM& sm = {}, const CM& cm = {}) {
        if (status st = check_out(out, tgt, mem); !st) return st;
        acts.filled = false;
        return chain(base_of(p), tgt, out, staged ? ws.grad_rows[0] : nullptr, &acts, [&](std::size_t i, const auto& x, auto& y) {
            return L::forward_train(layer_arg(p, i), ws, acts.layer[i], x, mem, y, layer_dropout(dc, i), sm, cm);
        });
    }
    template <params_or_adapted<Params, Adapters> PA, class Acts, class Tgt, class Out, class WS, class SM = no_mask>
        requires(!cross && tensor_like<Out>)
    static status forward_train(const PA& p, WS& ws, Acts& acts, const Tgt& tgt, Out& out,
                                const dropout_config& dc, const SM& sm = {}) {
        return forward_train(p, ws, acts, tgt, no_memory{}, out, dc, sm);
    }

    // Adds every layer's and the final norm's gradients to g, tgt's to d_tgt and memory's to
    // d_memory (all layers' cross-attentions add into it). Checks acts, masks and d_out before
    // writing; the layers below then take the gradient as computed (like a layer's own
    // intermediate values, it is not checked again), so backward never stops half way.
    template <params_or_adapted<Params, Adapters> PA, class Acts, class WS, class DOut, class DTgt, class DMem, class SM = no_mask, class CM = no_mask>
        requires memory_arg<DMem>
    static status backward(const PA& p, const Acts& acts, WS& ws, const DOut& d_out, grads_of<PA>& g, DTgt& d_tgt,
                           DMem& d_memory, const SM& sm = {}, const CM& cm = {}) {
        if (status st = L::template check_inputs<DOut, void>(sm, Acts::tgt_len, cm, cross ? Acts::src_len : 0,
                                                             d_out.data(), "d_out", nullptr);
            !st)
            return st;
        using LW = typename L::template Workspace<Acts::batch, Acts::tgt_len, Acts::src_len>;
        L::template check_shapes<DOut, typename L::template memory_t<DMem, DOut>, DTgt, LW, SM, CM>();
        constexpr bool frozen = !std::is_same_v<PA, Params>;  // adapters train: the base's gradients are not computed
        typename L::Params::norm_t* g_norm = nullptr;
        if constexpr (!frozen && FinalNorm) g_norm = &g.norm;
        return backward_chain(base_of(p), g_norm, acts, ws, d_out, d_tgt, [&](std::size_t i, const auto& dy, auto& dx) {
            const dropout_rng drop(acts.layer[i].dropout);
            if constexpr (frozen)
                L::backward_rows(p.params.layers[i], nullptr, {&p.adapters.layers[i], &g.layers[i]}, acts.layer[i], ws,
                                 dy.data(), dx.data(), L::data_of(d_memory), sm, cm, drop);
            else
                L::backward_rows(p.layers[i], &g.layers[i], {}, acts.layer[i], ws, dy.data(), dx.data(), L::data_of(d_memory),
                                 sm, cm, drop);
        });
    }
    template <params_or_adapted<Params, Adapters> PA, class Acts, class WS, class DOut, class DTgt, class SM = no_mask>
        requires(!cross && !std::is_same_v<SM, no_memory>)
    static status backward(const PA& p, const Acts& acts, WS& ws, const DOut& d_out, grads_of<PA>& g, DTgt& d_tgt,
                           const SM& sm = {}) {
        no_memory none;
        return backward(p, acts, ws, d_out, g, d_tgt, none, sm);
    }

    // ---- Incremental decoding through one cache per layer ----
    // (p: Params, or ct::with_adapters(params, adapters): each layer's cross-attention adapters project the memory too)
    template <params_or_adapted<Params, Adapters> PA, class Mem, class SWS, std::size_t B, std::size_t S>
        requires cross
    static void fill_cross_cache(const PA& p, SWS& ws, CrossKVCache<B, S>& cc, const Mem& mem) {
        for (std::size_t i = 0; i < N; ++i) L::fill_cross_cache(layer_arg(p, i), layer_ws(ws), cc.c_[i], mem);
    }
    template <params_or_adapted<Params, Adapters> PA, class X, class Y, class SWS, std::size_t B, std::size_t Cap, class CC, class SM = no_mask,
              class CM = no_mask>
        requires memory_arg<CC>
    static status step(const PA& p, SWS& ws, KVCache<B, Cap>& cache, const CC& cc, const X& x, Y& y,
                       const SM& sm = {}, const CM& cm = {}) {
        return step_ragged(p, ws, cache, cc, x, y, full_count<B, X::shape[1]>(), sm, cm);
    }
    template <params_or_adapted<Params, Adapters> PA, class X, class Y, class SWS, std::size_t B, std::size_t Cap, class CC, class SM = no_mask,
              class CM = no_mask>
        requires memory_arg<CC>
    static status step_ragged(const PA& p, SWS& ws, KVCache<B, Cap>& cache, const CC& cc, const X& x, Y& y,
                              const std::array<std::size_t, B>& count, const SM& sm = {}, const CM& cm = {}) {
        if constexpr (cross)  // (every layer's before any runs: all or nothing)
            for (std::size_t i = 0; i < N; ++i)
                if (status st = L::check_cross_cache(layer_arg(p, i), cc.c_[i]); !st)
                    return status::error(st.code, "layers.", decimal(i).view(), st.code == errc::cache_mismatch ? ".multihead_attn" : "");
        return step_chain(base_of(p), ws, cache, x, y, count, [&](std::size_t i, const auto& xi, auto& yi) {
            return L::step_ragged(layer_arg(p, i), layer_ws(ws), cache.c_[i], layer_cache(cc, i), xi, yi, count, sm, cm);
        });
    }
    template <params_or_adapted<Params, Adapters> PA, class X, class Y, class SWS, std::size_t B, std::size_t Cap, class SM = no_mask>
        requires(!cross && tensor_like<X>)
    static status step(const PA& p, SWS& ws, KVCache<B, Cap>& cache, const X& x, Y& y, const SM& sm = {}) {
        return step(p, ws, cache, no_memory{}, x, y, sm);
    }
    template <params_or_adapted<Params, Adapters> PA, class X, class Y, class SWS, std::size_t B, std::size_t Cap, class SM = no_mask>
        requires(!cross && tensor_like<X>)
    static status step_ragged(const PA& p, SWS& ws, KVCache<B, Cap>& cache, const X& x, Y& y,
                              const std::array<std::size_t, B>& count, const SM& sm = {}) {
        return step_ragged(p, ws, cache, no_memory{}, x, y, count, sm);
    }

  private:
    template <std::size_t B, std::size_t C> static std::array<std::size_t, B> full_count() {
        std::array<std::size_t, B> n;
        n.fill(C);
        return n;
    }
    // The staging buffer of a staged stack's workspace (null otherwise: the layers run in out).
    template <class Out, class WS> static T* stream(WS& ws) {
        if constexpr (staged) {
            static_assert(requires { ws.stream; }, "ctformer: a stack with check_finite<true> needs the stack's own "
                                                   "Workspace / StepWorkspace (Stack::Workspace<...>): they hold its "
                                                   "staging buffer");
            return ws.stream;
        } else {
            return nullptr;
        }
    }
    // out may alias tgt exactly, never the memory (the layers check the rest: stack.hpp's header).
    template <class Out, class Tgt, class Mem> static status check_out(const Out& out, const Tgt& tgt, const Mem& mem) {
        std::size_t n_mem = 0;
        if constexpr (!std::is_same_v<Mem, no_memory>) n_mem = Mem::size;
        return L::check_aliasing(out.data(), Out::size, tgt.data(), Tgt::size, "tgt", L::data_of(mem), n_mem);
    }
    // Layer i's cross cache, or no_memory.
    template <class CC> static const auto& layer_cache(const CC& cc, std::size_t i) {
        if constexpr (std::is_same_v<CC, no_memory>) return (void)i, cc;
        else return cc.c_[i];
    }
    // The layer's own step workspace inside the stack's (the layer requires its exact type).
    template <class SWS> static auto& layer_ws(SWS& ws) {
        using X = std::remove_cvref_t<SWS>;
        if constexpr (requires { typename X::layer_workspace; }) return static_cast<typename X::layer_workspace&>(ws);
        else return ws;
    }
    // An error of layer i > 0 concerns its input, layer i-1's output: "layers.{i-1} output".
    static status at_layer(status st, std::size_t i) {
        if (i == 0 || st.code != errc::non_finite) return st;
        return status::error(st.code, "layers.", decimal(i - 1).view(), " output");
    }
    struct decimal {  // k in decimal digits
        char digits[24];
        std::size_t n = sizeof digits;
        explicit decimal(std::size_t k) {
            for (; n == sizeof digits || k > 0; k /= 10) digits[--n] = static_cast<char>('0' + k % 10);
        }
        std::string_view view() const { return std::string_view(digits + n, sizeof digits - n); }
    };
    // Layer 0 reads x and writes the rows y, layers 1.. run in place on y, then the final norm; y
    // is out itself, or (staged) the staging buffer, copied to out only once every layer succeeded.
    template <class X, class Out, class ActsPtr, class F>
    static status chain(const Params& p, const X& x, Out& out, T* staging, ActsPtr acts, F&& layer) {
        constexpr std::size_t M = Out::size / D;
        auto y = view<Out::shape[0], Out::shape[1], D>(staged ? staging : out.data());
        for (std::size_t i = 0; i < N; ++i)
            if (status st = i == 0 ? layer(0, x, y) : layer(i, y, y); !st) return at_layer(st, i);
        if constexpr (FinalNorm) {
            if constexpr (!std::is_same_v<ActsPtr, std::nullptr_t>)
                for (std::size_t k = 0; k < M * D; ++k) acts->final_in[k] = y.data()[k];
            NormM::forward(p.norm, y.data(), y.data(), M);
        }
        if (y.data() != out.data())
            for (std::size_t k = 0; k < M * D; ++k) out.data()[k] = y.data()[k];
        if constexpr (!std::is_same_v<ActsPtr, std::nullptr_t>) acts->filled = true;
        (void)acts;
        return {};
    }
    // The gradient walks down the layers through two row buffers; the last (layer 0) adds into d_tgt.
    // (g_norm: the final norm's gradients, null where it is frozen or absent)
    template <class Acts, class WS, class DOut, class DTgt, class NG, class F>
    static status backward_chain(const Params& p, NG* g_norm, const Acts& acts, WS& ws, const DOut& d_out, DTgt& d_tgt,
                                 F&& layer) {
        constexpr std::size_t B = Acts::batch, Tq = Acts::tgt_len, M = B * Tq;
        if (!acts.filled) return status::error(errc::no_activations);
        T* cur = ws.grad_rows[0];
        if constexpr (FinalNorm) {
            if (g_norm) NormM::backward(p.norm, *g_norm, acts.final_in, d_out.data(), cur, M, false);
            else NormM::backward_input(p.norm, acts.final_in, d_out.data(), cur, M, false);
        } else {
            L::copy_rows(d_out.data(), cur, M);
        }
        (void)g_norm;
        for (std::size_t i = N; i-- > 0;) {
            const auto dy = view<B, Tq, D>(static_cast<const T*>(cur));
            if (i == 0) {
                layer(i, dy, d_tgt);
            } else {
                T* next = cur == ws.grad_rows[0] ? ws.grad_rows[1] : ws.grad_rows[0];
                schedule::for_each_row(M, D, [&](std::size_t r) {
                    for (std::size_t k = r * D; k < (r + 1) * D; ++k) next[k] = T(0);
                });
                auto dx = view<B, Tq, D>(next);
                layer(i, dy, dx);
                cur = next;
            }
        }
        return {};
    }
    // As chain, for a step: a layer that fails after layer 0 ran rolls the caches of the layers
    // before it back to their lengths at the call. The final norm covers the rows each batch row
    // fed (the rows past count stay zero).
    template <class SWS, class Cache, class X, class Y, std::size_t B, class F>
    static status step_chain(const Params& p, SWS& ws, Cache& cache, const X& x, Y& y,
                             const std::array<std::size_t, B>& count, F&& layer) {
        constexpr std::size_t C = Y::shape[1];
        static_assert(std::is_base_of_v<StepWorkspace<B, C>, SWS>,
                      "ctformer: step workspace shape differs: use Stack::StepWorkspace<batch, chunk>");
        const std::array<std::size_t, B> start = cache.lengths();
        auto out = view<B, C, D>(staged ? stream<Y>(ws) : y.data());
        for (std::size_t i = 0; i < N; ++i)
            if (status st = i == 0 ? layer(0, x, out) : layer(i, out, out); !st) {
                for (std::size_t j = 0; j < i; ++j) detail::cache_access::lengths(cache.c_[j]) = start;
                return at_layer(st, i);
            }
        if constexpr (FinalNorm)
            for (std::size_t b = 0; b < B; ++b)
                NormM::forward(p.norm, out.data() + b * C * D, out.data() + b * C * D, count[b]);
        if (out.data() != y.data())
            for (std::size_t k = 0; k < B * C * D; ++k) y.data()[k] = out.data()[k];
        return {};
    }
};

}  // namespace ctformer
