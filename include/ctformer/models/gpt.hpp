// ctformer/models/gpt.hpp — a GPT as one type: token (+ position) embeddings, a stack of
// decoder-only blocks with a final norm, an LM head; cross-entropy training and generation
// through static KV caches. No heap anywhere.
//
//   using Block = ct::DecoderOnlyBlock<ct::d_model<128>, ct::heads<4>, ct::ffn_dim<512>, ct::norm_first<true>,
//                                      ct::activation<ct::gelu>>;
//   using Model = ct::GPT<65, 128, 4, Block>;                  // vocab, context, layers, block
//   static Model::Params params;  static Model::TrainWorkspace<8, 128> ws;  static Model::Activations<8, 128> acts;
//   float loss;
//   Model::forward_train(params, ws, acts, tokens, targets, loss);   // tokens, targets: (8, 128) ct::token
//   Model::backward(params, acts, ws, grads);
//
// state_dict (what an equivalent PyTorch module built from torch.nn parts has; docs/models.md):
//   wte.weight (V, D)  wpe.weight (Ctx, D)  transformer.layers.{i}.<block>  transformer.norm.*
//   lm_head.weight (V, D)       [no wpe with positions<sinusoidal>, no lm_head with tied_embeddings<true>]
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../layer/config.hpp"
#include "../modules/cross_entropy.hpp"
#include "../modules/embedding.hpp"
#include "../modules/linear.hpp"
#include "../core/reflect.hpp"
#include "../core/schedule.hpp"
#include "stack.hpp"
#include "sampling.hpp"

namespace ctformer {

namespace tag {
struct tied_embeddings; struct positions;
}  // namespace tag
// tied_embeddings<true>: the LM head is wte (GPT-2's weight tying); no lm_head.weight.
template <bool B> struct tied_embeddings { using option_tag = tag::tied_embeddings; static constexpr bool value = B; };
struct learned {};     // positions from wpe.weight (Ctx, D), trained
struct sinusoidal {};  // fixed sin/cos table, no parameters
struct rotary {};      // no position embedding: the blocks' RoPE (ct::rope) places the tokens
template <class P> struct positions {
    static_assert(std::is_same_v<P, learned> || std::is_same_v<P, sinusoidal> || std::is_same_v<P, rotary>,
                  "ctformer: positions<learned>, positions<sinusoidal> or positions<rotary>");
    using option_tag = tag::positions;
    using type = P;
};

// PyTorch's cross_entropy default: targets equal to it add no loss and no gradient.
inline constexpr token ignore_index = -100;

template <class StackP, std::size_t V, std::size_t Ctx, class Positions, bool Tied> struct described_model {
    template <class F> static constexpr void describe(F&& field) {
        StackP::describe(field);
        field("vocab", V);
        field("context", Ctx);
        field("positions", std::is_same_v<Positions, learned>      ? "learned"
                           : std::is_same_v<Positions, sinusoidal> ? "sinusoidal"
                                                                    : "rotary");
        field("tied", Tied);
    }
};

// The model by structure: token embeddings, learned positions (or none), the stack, the LM head
// (none when tied), named by the table Names (layer/names.hpp): this library's GPT names (wte,
// wpe, transformer.*, lm_head), Hugging Face Llama's (model.embed_tokens, model.layers.{i},
// model.norm, lm_head), GPT-2's. Fmt: the weights' format (the blocks'), the LM head's too (tied:
// the embedding's; a per_tensor map: its head role's).
template <class T, std::size_t V, std::size_t Ctx, std::size_t D, class StackP, bool Tied, class Positions, class Fmt,
          class Names>
struct ModelParams : described_model<StackP, V, Ctx, Positions, Tied> {
    static constexpr const char* kind = std::is_same_v<Names, hugging_face> ? "llama" : "gpt";
    using role = role::model;
    using names = Names;
    using tok_t = EmbeddingParams<T, V, D, Tied, role_format_t<Fmt, proj::head>>;
    using pos_t = std::conditional_t<std::is_same_v<Positions, learned>, EmbeddingParams<T, Ctx, D, false>, absent>;
    using head_t = std::conditional_t<Tied, absent, LinearParams<T, V, D, false, role_format_t<Fmt, proj::head>>>;
    BOOST_HANA_DEFINE_STRUCT(ModelParams, (tok_t, tok_embeddings), (pos_t, pos_embeddings), (StackP, stack),
                             (head_t, lm_head));
};

// The model's adapters (ct::lora on its blocks): the stack's, under the model's names (Hugging
// Face's: model.layers.{i}.self_attn.q_proj.lora_A.weight; PEFT's files prefix base_model.model.).
template <class StackA, class Names> struct ModelAdapters : adapter_config_of<StackA> {
    using role = role::model;
    using names = Names;
    BOOST_HANA_DEFINE_STRUCT(ModelAdapters, (StackA, stack));
};

// One argument order for every model: vocab, context, layers, then the block (a type here; Llama's
// block options inline, models/llama.hpp), then the model's options.
template <std::size_t V, std::size_t Ctx, std::size_t N, class Block, class... Opts> struct GPT {
    static_assert(!Block::cross, "ctformer: a GPT is built from decoder-only blocks (ct::DecoderOnlyBlock)");
    static_assert(V > 0 && Ctx > 0, "ctformer: vocab and context must be non-zero");
    static_assert(V <= 0x7fffffff, "ctformer: token ids are 32-bit");
    static_assert((detail::option<Opts> && ...), "ctformer: GPT options are ct::tied_embeddings<B>, ct::positions<P>");
    using T = typename Block::T;
    static constexpr std::size_t vocab = V, context = Ctx, layers = N, D = Block::D;
    static constexpr bool tied = detail::pick<tag::tied_embeddings, tied_embeddings<false>, Opts...>::value;
    using position_kind = typename detail::pick<tag::positions, positions<learned>, Opts...>::type;
    static constexpr bool learned_positions = std::is_same_v<position_kind, learned>;
    using names_type = typename detail::pick<tag::param_names, param_names<pytorch>, Opts...>::type;
    static_assert(!std::is_same_v<position_kind, rotary> || Block::config::rope,
                  "ctformer: positions<rotary> needs blocks with RoPE (ct::rope)");
    static_assert(!Block::config::rope || Block::config::max_positions >= Ctx,
                  "ctformer: the blocks' RoPE table (max_positions) is shorter than the context");
    using Stack = DecoderStack<Block, N, true>;
    using weight_format = typename Block::config::weight_format;
    static constexpr bool quantized = Block::config::quantized;
    using Params = params_role<ModelParams<T, V, Ctx, D, typename Stack::Params, tied, position_kind, weight_format, names_type>>;
    using Grads = Params;
    // Adapters (ct::lora on the blocks): entry points take Params or ct::with_adapters(params,
    // adapters); backward then adds the adapters' gradients only (embeddings, norms, LM head and
    // the blocks' weights frozen: they may be quantized or in flash).
    using Adapters = params_role<ModelAdapters<typename Stack::Adapters, names_type>>;
    template <class PA> using grads_of = std::conditional_t<std::is_same_v<PA, Params>, Grads, Adapters>;

    // ---- Memory roles ----
    template <std::size_t B, std::size_t Tq> struct Workspace : Stack::template Workspace<B, Tq>, sized_role<Workspace<B, Tq>> {
        alignas(64) T x[B * Tq * D];  // the residual stream
        using sized_role<Workspace>::bytes;
    };
    template <std::size_t B, std::size_t Tq>
    struct TrainWorkspace : Stack::template TrainWorkspace<B, Tq>, sized_role<TrainWorkspace<B, Tq>> {
        alignas(64) T x[B * Tq * D], dx[B * Tq * D], dhidden[B * Tq * D];
        alignas(64) T dlogits[B * Tq * V];
        // the LM head's backward: inner dimensions B·Tq (its weight gradient) and V (dhidden)
        alignas(64) T head_pack[kernels::gemm_train_pack_elems<T>(B * Tq, B * Tq > V ? B * Tq : V, D, B * Tq)];
        using sized_role<TrainWorkspace>::bytes;
    };
    template <std::size_t B, std::size_t Tq> struct Activations : sized_role<Activations<B, Tq>> {
        static constexpr std::size_t batch = B, tgt_len = Tq;
        typename Stack::template Activations<B, Tq> stack;
        alignas(64) T hidden[B * Tq * D];  // the final norm's output, the LM head's input
        alignas(64) T probs[B * Tq * V];   // softmax of the logits
        token tokens[B * Tq], targets[B * Tq];
        std::size_t count = 0;  // targets that are not ignore_index
        bool filled = false;
    };
    template <std::size_t B, std::size_t Cap> using KVCache = typename Stack::template KVCache<B, Cap>;
    template <std::size_t B, std::size_t C>
    struct StepWorkspace : Stack::template StepWorkspace<B, C>, sized_role<StepWorkspace<B, C>> {
        alignas(64) T x[B * C * D];
        using sized_role<StepWorkspace>::bytes;
    };

    // ---- Inference: logits (B, Tq, V) of tokens (B, Tq) ----
    // errc::out_of_range (nothing written) if a token is not in [0, V).
    template <params_or_adapted<Params, Adapters> PA, class Tok, class Logits, std::size_t B, std::size_t Tq>
    static status forward(const PA& p, Workspace<B, Tq>& ws, const Tok& tokens, Logits& logits) {
        check_tokens<Tok, B, Tq>();
        static_assert(std::is_same_v<typename Logits::value_type, T> && Logits::rank == 3 && Logits::shape[0] == B &&
                          Logits::shape[1] == Tq && Logits::shape[2] == V,
                      "ctformer: logits must be (batch, len, vocab) of the model's dtype");
        if (status st = embed<B>(base_of(p), tokens.data(), Tq, nullptr, nullptr, ws.x); !st) return st;
        auto x = view<B, Tq, D>(ws.x);
        if (status st = Stack::forward(stack_arg(p), ws, x, x, causal{}); !st) return st;
        modules::linear::forward(head(base_of(p)), 0, 1, ws.x, B * Tq, static_cast<const T*>(nullptr), logits.data(), V, ws.pack);
        return {};
    }

    // ---- Training ----
    // loss = mean over the positions whose target is not ignore_index of cross_entropy(logits, target)
    // (NaN when every target is ignored, as in PyTorch). Saves what backward needs into acts.
    // errc::out_of_range (nothing written) for a token outside [0, V) or a target outside [0, V)
    // that is not ignore_index.
    template <params_or_adapted<Params, Adapters> PA, class Tok, class Tgt, std::size_t B, std::size_t Tq>
    static status forward_train(const PA& p, TrainWorkspace<B, Tq>& ws, Activations<B, Tq>& acts, const Tok& tokens,
                                const Tgt& targets, T& loss, const dropout_config& dc = {0.0f, 0.0f, 0.0f, 0, 0}) {
        check_tokens<Tok, B, Tq>();
        check_tokens<Tgt, B, Tq>();
        constexpr std::size_t M = B * Tq;
        if (status st = dc.validate(); !st) return st;
        if (status st = check_targets(targets.data(), M); !st) return st;
        if (status st = embed<B>(base_of(p), tokens.data(), Tq, nullptr, nullptr, ws.x); !st) return st;
        acts.filled = false;
        const auto x = view<B, Tq, D>(static_cast<const T*>(ws.x));
        auto hidden = view<B, Tq, D>(acts.hidden);
        if (status st = Stack::forward_train(stack_arg(p), ws, acts.stack, x, hidden, dc, causal{}); !st) return st;
        modules::linear::forward(head(base_of(p)), 0, 1, acts.hidden, M, static_cast<const T*>(nullptr), acts.probs, V, ws.pack);
        for (std::size_t m = 0; m < M; ++m) acts.tokens[m] = tokens.data()[m], acts.targets[m] = targets.data()[m];
        loss = mean_cross_entropy(acts.probs, acts.targets, M, acts.count, ws.dlogits);  // (dlogits: backward's)
        acts.filled = true;
        return {};
    }

    // ---- Evaluation: the training loss of forward's logits, nothing saved (quantized weights too) ----
    // logits: (B, Tq, V) scratch, left holding each row's softmax. Errors as forward_train's.
    template <params_or_adapted<Params, Adapters> PA, class Tok, class Tgt, class Logits, std::size_t B, std::size_t Tq>
    static status evaluate(const PA& p, Workspace<B, Tq>& ws, const Tok& tokens, const Tgt& targets, Logits& logits,
                           T& loss) {
        check_tokens<Tgt, B, Tq>();
        if (status st = check_targets(targets.data(), B * Tq); !st) return st;
        if (status st = forward(p, ws, tokens, logits); !st) return st;
        std::size_t count = 0;
        loss = mean_cross_entropy(logits.data(), targets.data(), B * Tq, count, ws.x);  // (x: read by the head)
        return {};
    }
    // Adds d(loss · loss_scale)/dθ to grads (+=: zero them first; micro-batches add up — give each
    // micro-batch loss_scale = 1 / micro-batches for the mean over them). errc::no_activations if
    // acts were never filled.
    template <params_or_adapted<Params, Adapters> PA, std::size_t B, std::size_t Tq>
    static status backward(const PA& p, const Activations<B, Tq>& acts, TrainWorkspace<B, Tq>& ws, grads_of<PA>& g,
                           T loss_scale = T(1)) {
        constexpr std::size_t M = B * Tq;
        if (!acts.filled) return status::error(errc::no_activations);
        const T scale = acts.count ? loss_scale / static_cast<T>(acts.count) : T(0);
        schedule::for_each_row(M, V, [&](std::size_t m) {  // each row alone
            T* dl = ws.dlogits + m * V;
            if (acts.targets[m] == ignore_index)
                for (std::size_t j = 0; j < V; ++j) dl[j] = T(0);
            else
                modules::cross_entropy::backward_row(acts.probs + m * V, dl, V, static_cast<std::size_t>(acts.targets[m]),
                                                     scale);
        });
        constexpr bool frozen = !std::is_same_v<PA, Params>;
        if constexpr (frozen)
            modules::linear::input_grad(head(p.params), 0, 1, ws.dlogits, V, M, ws.dhidden, D, false, ws.head_pack);
        else
            modules::linear::backward(head(p), head(g), 0, 1, acts.hidden, M, ws.dlogits, V, static_cast<T*>(nullptr),
                                      ws.dhidden, false, ws.head_pack);
        schedule::for_each_row(M, D, [&](std::size_t r) {
            for (std::size_t k = r * D; k < (r + 1) * D; ++k) ws.dx[k] = T(0);
        });
        const auto dh = view<B, Tq, D>(static_cast<const T*>(ws.dhidden));
        auto dx = view<B, Tq, D>(ws.dx);
        if (status st = Stack::backward(stack_arg(p), acts.stack, ws, dh, stack(g), dx, causal{}); !st) return st;
        // the embeddings' gradients by 16-column blocks, rows in order in each (repeated tokens add
        // up in the same order on any executor)
        if constexpr (!frozen)
            schedule::split_columns(M, D, [&](std::size_t d0, std::size_t d1) {
                for (std::size_t m = 0; m < M; ++m) {
                    modules::embedding::backward(wte(g), static_cast<std::size_t>(acts.tokens[m]), ws.dx + m * D, d0, d1);
                    if constexpr (learned_positions)
                        modules::embedding::backward(g.pos_embeddings.weight, m % Tq, ws.dx + m * D, d0, d1);
                }
            });
        return {};
    }

    // ---- Incremental decoding ----
    // Feeds count[b] <= C tokens of row b at positions cache.length(b)..; writes their logits
    // (B, C, V) (rows past count[b]: zero; their tokens are padding, never read). errc::cache_full
    // if a row would pass the capacity, errc::out_of_range for a count above C or a bad token fed;
    // nothing changes on an error (the stack is all or nothing).
    template <params_or_adapted<Params, Adapters> PA, class Tok, class Logits, std::size_t B, std::size_t C, std::size_t Cap>
    static status step_ragged(const PA& p, StepWorkspace<B, C>& ws, KVCache<B, Cap>& cache, const Tok& tokens,
                              Logits& logits, const std::array<std::size_t, B>& count) {
        static_assert(std::is_same_v<typename Logits::value_type, T> && Logits::rank == 3 && Logits::shape[0] == B &&
                          Logits::shape[1] == C && Logits::shape[2] == V,
                      "ctformer: step logits must be (batch, chunk, vocab) of the model's dtype");
        if (status st = advance(p, ws, cache, tokens, count); !st) return st;
        // one batch row: the head reads only its fed rows (the rest are zero below)
        modules::linear::forward(head(base_of(p)), 0, 1, ws.x, B == 1 && count[0] < C ? count[0] : B * C, static_cast<const T*>(nullptr),
                                 logits.data(), V, ws.pack);
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t i = count[b]; i < C; ++i)
                for (std::size_t j = 0; j < V; ++j) logits.data()[(b * C + i) * V + j] = T(0);
        return {};
    }
    template <params_or_adapted<Params, Adapters> PA, class Tok, class Logits, std::size_t B, std::size_t C, std::size_t Cap>
    static status step(const PA& p, StepWorkspace<B, C>& ws, KVCache<B, Cap>& cache, const Tok& tokens,
                       Logits& logits) {
        std::array<std::size_t, B> count;
        count.fill(C);
        return step_ragged(p, ws, cache, tokens, logits, count);
    }

    // ---- Generation (batch 1): prefill the prompt in chunks of C, then one token per step ----
    // W: the longest window of recent tokens the penalties may look at (sampling::penalty_last_n).
    template <std::size_t C, std::size_t W = 64> struct GenerateWorkspace : sized_role<GenerateWorkspace<C, W>> {
        StepWorkspace<1, C> prefill;
        StepWorkspace<1, 1> decode;
        Tensor<T, 1, 1, V> next_logits;  // the logits of the last token fed
        Tensor<token, 1, C> chunk;
        Tensor<token, 1, 1> one;
        sampler_scratch<T, V> scratch;
        std::array<token, W> recent;  // the sequence's last tokens (this call's prompt and output)
        std::size_t n_recent = 0;
        constexpr void remember(token t) {
            if constexpr (W > 0) {
                if (n_recent == W)
                    for (std::size_t i = 1; i < W; ++i) recent[i - 1] = recent[i];
                recent[n_recent < W ? n_recent++ : W - 1] = t;
            }
        }
    };
    // Continues the sequence in cache (reset() it for a new one) with prompt[0..n_prompt), then
    // samples up to max_new tokens (sampling.hpp: bias, penalties over this call's last W tokens,
    // greedy, temperature, top-k, top-p, min-p; draw i uses the Philox counter (seed, position)). on_token(token) is called for each new token and
    // returns false to stop; the stop token ends generation without being passed on. The cache
    // then holds the prompt and every token passed on but the last (it was never fed).
    // Errors before the first token is passed on leave the cache as it was: errc::invalid_option
    // (sampling options), errc::out_of_range (empty prompt, a bad token anywhere in it),
    // errc::cache_full (the prompt does not fit), a prefill step's error, non_finite logits.
    // Later errors (the cache fills up before max_new tokens, a step or a draw fails) keep what
    // was passed on in the cache, as above.
    template <params_or_adapted<Params, Adapters> PA, std::size_t C, std::size_t W, std::size_t Cap, class F>
    static status generate(const PA& p, GenerateWorkspace<C, W>& ws, KVCache<1, Cap>& cache, const token* prompt,
                           std::size_t n_prompt, std::size_t max_new, const sampling& s, F&& on_token) {
        if (status st = s.validate(); !st) return st;
        if (s.penalizes() && s.penalty_last_n > W) return status::error(errc::invalid_option, "penalty_last_n");
        for (const logit_bias& b : s.bias)
            if (static_cast<std::size_t>(b.id) >= V) return status::error(errc::invalid_option, "logit bias");
        if (n_prompt == 0) return status::error(errc::out_of_range, "prompt");
        if (n_prompt > Cap - cache.length(0)) return status::error(errc::cache_full);  // (no wrap)
        for (std::size_t i = 0; i < n_prompt; ++i)
            if (prompt[i] < 0 || static_cast<std::size_t>(prompt[i]) >= V) return status::error(errc::out_of_range, "prompt");
        const std::size_t start = cache.length(0);
        auto fail = [&](status st) {  // before any token was passed on: as if never called
            (void)cache.truncate(0, start);
            return st;
        };
        std::size_t n = 0;  // prompt tokens fed; only the last one's logits are computed
        while (n < n_prompt) {
            const std::size_t r = n_prompt - n < C ? n_prompt - n : C;
            for (std::size_t i = 0; i < C; ++i) ws.chunk.storage[i] = i < r ? prompt[n + i] : 0;
            const status st = n + r == n_prompt ? advance_last(p, ws.prefill, cache, ws.chunk, r, ws.next_logits.data())
                                                : advance(p, ws.prefill, cache, ws.chunk, std::array<std::size_t, 1>{r});
            if (!st) return fail(st);
            n += r;
        }
        const T* last = ws.next_logits.data();
        ws.n_recent = 0;
        for (std::size_t i = n_prompt > W ? n_prompt - W : 0; i < n_prompt; ++i) ws.remember(prompt[i]);
        for (std::size_t k = 0; k < max_new; ++k) {
            token next;
            const std::span<const token> recent(ws.recent.data(), ws.n_recent);
            if (status st = sample(last, s, cache.length(0), ws.scratch, next, recent); !st) return k == 0 ? fail(st) : st;
            if (next == s.stop || !on_token(next)) return {};
            ws.remember(next);
            if (k + 1 == max_new) return {};
            if (cache.length(0) == Cap) return status::error(errc::cache_full);
            ws.one.storage[0] = next;
            if (status st = advance_last(p, ws.decode, cache, ws.one, 1, ws.next_logits.data()); !st) return st;
        }
        return {};
    }

  private:
    // A step without the LM head: checks, embeds the fed tokens, runs the stack through the cache;
    // the last layer's normed rows are left in ws.x.
    template <params_or_adapted<Params, Adapters> PA, class Tok, std::size_t B, std::size_t C, std::size_t Cap>
    static status advance(const PA& p, StepWorkspace<B, C>& ws, KVCache<B, Cap>& cache, const Tok& tokens,
                          const std::array<std::size_t, B>& count) {
        static_assert(Cap <= Ctx, "ctformer: a GPT's KV cache capacity cannot exceed its context");
        check_tokens<Tok, B, C>();
        for (std::size_t b = 0; b < B; ++b) {
            if (count[b] > C) return status::error(errc::out_of_range, "count");
            if (count[b] > Cap - cache.length(b)) return status::error(errc::cache_full);  // (no wrap)
        }
        if (status st = embed<B>(base_of(p), tokens.data(), C, cache.lengths().data(), count.data(), ws.x); !st) return st;
        auto x = view<B, C, D>(ws.x);
        auto& sws = static_cast<typename Stack::template StepWorkspace<B, C>&>(ws);
        return Stack::step_ragged(stack_arg(p), sws, cache, x, x, count, causal{});
    }
    // advance, then the logits of the last fed row only (what generation samples from): next (V).
    template <params_or_adapted<Params, Adapters> PA, std::size_t C, std::size_t Cap>
    static status advance_last(const PA& p, StepWorkspace<1, C>& ws, KVCache<1, Cap>& cache,
                               const Tensor<token, 1, C>& tokens, std::size_t count, T* next) {
        if (status st = advance(p, ws, cache, tokens, std::array<std::size_t, 1>{count}); !st) return st;
        modules::linear::forward(head(base_of(p)), 0, 1, ws.x + (count - 1) * D, 1, static_cast<const T*>(nullptr), next, V,
                                 ws.pack);
        return {};
    }
    template <class Tok, std::size_t B, std::size_t Tq> static constexpr void check_tokens() {
        static_assert(tensor_like<Tok> && std::is_integral_v<typename Tok::value_type> && Tok::rank == 2 &&
                          Tok::shape[0] == B && Tok::shape[1] == Tq,
                      "ctformer: tokens and targets are (batch, len) tensors of integer ids (ct::token)");
        static_assert(Tq <= Ctx, "ctformer: sequence longer than the model's context");
    }
    static status check_targets(const token* targets, std::size_t M) {
        for (std::size_t m = 0; m < M; ++m)
            if (const auto t = targets[m]; t != ignore_index && (t < 0 || static_cast<std::size_t>(t) >= V))
                return status::error(errc::out_of_range, "targets");
        return {};
    }
    // Mean cross-entropy of M rows of logits (each left as its softmax) over the targets that are not
    // ignore_index (count of them); NaN when every target is ignored, as in PyTorch. Each row's
    // loss alone (rows in parts of the current executor) into row_loss: (M) scratch, then their sum
    // in row order.
    static T mean_cross_entropy(T* logits, const token* targets, std::size_t M, std::size_t& count, T* row_loss) {
        schedule::for_each_row(M, V, [&](std::size_t m) {
            if (targets[m] != ignore_index)
                row_loss[m] = modules::cross_entropy::forward_row(logits + m * V, V, static_cast<std::size_t>(targets[m]));
        });
        T sum = 0;
        count = 0;
        for (std::size_t m = 0; m < M; ++m)
            if (targets[m] != ignore_index) sum += row_loss[m], ++count;
        return count ? sum / static_cast<T>(count) : std::numeric_limits<T>::quiet_NaN();
    }
    static constexpr const Params& base_of(const Params& p) { return p; }
    static constexpr const Params& base_of(const adapted<Params, Adapters>& p) { return p.params; }
    static constexpr const typename Stack::Params& stack_arg(const Params& p) { return p.stack; }
    static constexpr auto stack_arg(const adapted<Params, Adapters>& p) {
        return adapted<typename Stack::Params, typename Stack::Adapters>{p.params.stack, p.adapters.stack};
    }
    template <class P> static auto& head(P& p) {
        if constexpr (tied) return wte(p);
        else return p.lm_head.weight;
    }
    template <class P> static auto& wte(P& p) { return p.tok_embeddings.weight; }
    template <class P> static auto& stack(P& p) { return p.stack; }
    // x: (B, Tq, D) = wte[tokens] + positions (row b starts at pos0[b], or 0). With count, row b
    // feeds its first count[b] tokens: the rest are padding, never read (their rows are zero).
    template <std::size_t B, class Tok>
    static status embed(const Params& p, const Tok* tokens, std::size_t Tq, const std::size_t* pos0,
                        const std::size_t* count, T* x) {
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t t = 0; t < (count ? count[b] : Tq); ++t)
                if (const auto id = tokens[b * Tq + t]; id < 0 || static_cast<std::size_t>(id) >= V)
                    return status::error(errc::out_of_range, "tokens");
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t t = 0; t < Tq; ++t) {
                const std::size_t m = b * Tq + t, pos = (pos0 ? pos0[b] : 0) + t;
                if (count && t >= count[b]) {
                    for (std::size_t d = 0; d < D; ++d) x[m * D + d] = T(0);
                    continue;
                }
                modules::embedding::forward(wte(p), static_cast<std::size_t>(tokens[m]), x + m * D, false);
                if (pos >= Ctx) continue;  // (a position past the context is never fed: Cap <= Ctx)
                if constexpr (learned_positions) modules::embedding::forward(p.pos_embeddings.weight, pos, x + m * D, true);
                else if constexpr (std::is_same_v<position_kind, sinusoidal>) modules::embedding::sinusoidal_add<D>(pos, x + m * D);
            }
        return {};
    }
};

}  // namespace ctformer
