// ctformer/layer/config.hpp — named compile-time options with PyTorch's defaults.
//
//   using Layer = ct::DecoderLayer<ct::d_model<512>, ct::heads<8>, ct::norm_first<true>>;
//
// Each option is a small type carrying a tag; config<Opts...> picks each option with a fold
// expression (no recursion, no hana::map), applies the defaults of torch.nn.TransformerDecoderLayer
// and rejects nonsense with static_asserts that name the problem.
#pragma once
#include <cstddef>
#include <type_traits>

#include "../modules/activations.hpp"
#include "../modules/attention.hpp"
#include "../modules/lora.hpp"
#include "../modules/norm.hpp"
#include "../kernels/rope.hpp"
#include "names.hpp"

namespace ctformer {

namespace tag {
struct d_model; struct heads; struct ffn_dim; struct dtype; struct activation; struct norm; struct norm_first;
struct eps; struct bias; struct attn_bias; struct ffn_bias; struct norm_bias; struct cross_attention;
struct score_scale; struct check_finite; struct kv_heads; struct rope; struct max_positions; struct gated;
struct param_names; struct weights; struct kv_cache; struct separate_qkv; struct lora;
}  // namespace tag

template <std::size_t N> struct d_model { using option_tag = tag::d_model; static constexpr std::size_t value = N; };
template <std::size_t N> struct heads { using option_tag = tag::heads; static constexpr std::size_t value = N; };
template <std::size_t N> struct ffn_dim { using option_tag = tag::ffn_dim; static constexpr std::size_t value = N; };
template <class T> struct dtype { using option_tag = tag::dtype; using type = T; };
template <class A> struct activation { using option_tag = tag::activation; using type = A; };
template <class N> struct norm { using option_tag = tag::norm; using type = N; };
template <class S> struct score_scale { using option_tag = tag::score_scale; using type = S; };
// LayerNorm eps as a ratio (clang 14 has no floating-point template arguments): eps<1, 1000> = 1e-3.
template <long long Num, long long Den = 1> struct layer_norm_eps {
    static_assert(Den != 0, "ctformer: layer_norm_eps denominator is zero");
    using option_tag = tag::eps;
    static constexpr double value = static_cast<double>(Num) / static_cast<double>(Den);
};
template <bool B> struct norm_first { using option_tag = tag::norm_first; static constexpr bool value = B; };
// bias<false> removes every bias (PyTorch's bias=False); the three below override it per module.
template <bool B> struct bias { using option_tag = tag::bias; static constexpr bool value = B; };
template <bool B> struct attn_bias { using option_tag = tag::attn_bias; static constexpr bool value = B; };
template <bool B> struct ffn_bias { using option_tag = tag::ffn_bias; static constexpr bool value = B; };
template <bool B> struct norm_bias { using option_tag = tag::norm_bias; static constexpr bool value = B; };
template <bool B> struct cross_attention { using option_tag = tag::cross_attention; static constexpr bool value = B; };
// check_finite<true>: forward, forward_train, backward and step first check their inputs (tgt,
// memory, d_out, step input) and return errc::non_finite, computing nothing, if any value is NaN or
// inf. Off by default (one extra pass over the inputs).
template <bool B> struct check_finite { using option_tag = tag::check_finite; static constexpr bool value = B; };

// ---- Modern decoders (Llama family) ----
// kv_heads<N>: grouped-query attention, N key/value heads shared by heads/N query heads each
// (N = 1: multi-query); the KV cache holds N heads. Default: heads (multi-head attention).
template <std::size_t N> struct kv_heads { using option_tag = tag::kv_heads; static constexpr std::size_t value = N; };
// rope<Layout, Theta, RotaryDim>: rotary position embeddings on the self-attention's queries and
// keys (Layout: ct::rotate_half, Hugging Face's; ct::interleaved, GPT-J's and Meta's original),
// base Theta (rope_theta), over the first RotaryDim dimensions of each head (0: all of them).
// Its table covers max_positions<N> positions (the longest sequence or KV cache capacity).
template <class Layout = rotate_half, long long Theta = 10000, std::size_t RotaryDim = 0> struct rope {
    using option_tag = tag::rope;
    using layout = Layout;
    static constexpr long long theta = Theta;
    static constexpr std::size_t rotary_dim = RotaryDim;
    static constexpr bool enabled = true;
};
struct no_rope {
    using option_tag = tag::rope;
    using layout = rotate_half;
    static constexpr long long theta = 1;
    static constexpr std::size_t rotary_dim = 0;
    static constexpr bool enabled = false;
};
template <std::size_t N> struct max_positions { using option_tag = tag::max_positions; static constexpr std::size_t value = N; };
// gated<true>: the feed-forward is down(act(gate(x)) * up(x)): SwiGLU with activation<silu>,
// GeGLU with activation<gelu> or activation<gelu_tanh>.
template <bool B> struct gated { using option_tag = tag::gated; static constexpr bool value = B; };
// param_names<Table>: what the params are called (layer/names.hpp): pytorch (default:
// TransformerDecoderLayer's), hugging_face (Llama's), gpt2, or a table of your own. Names only:
// the structure is the other options'.
template <class N> struct param_names { using option_tag = tag::param_names; using type = N; };
// separate_qkv<true>: q, k and v have their own projections (q_proj, k_proj, v_proj, o_proj);
// false: one packed in-projection (in_proj_weight, out_proj), as nn.MultiheadAttention. Default:
// separate with grouped-query attention (kv_heads < heads) or Hugging Face's names, else packed.
template <bool B> struct separate_qkv { using option_tag = tag::separate_qkv; static constexpr bool value = B; };
// A norm's eps under its generic name (RMSNorm's too).
template <long long Num, long long Den = 1> using norm_eps = layer_norm_eps<Num, Den>;

// The storage of every weight matrix (core/quant.hpp): dense (default), bf16, int8_per_channel,
// int4_group<G>. Weight-only: activations, norms, biases and embeddings gathered by id stay in
// the layer's dtype; quantized layers are for inference (forward, step, generate).
// weights<F, int8_activations> (F int8 or int4): each matrix product quantizes its input rows to
// int8 per block of 32 and multiplies integers (faster, a second rounding: docs/quantization.md).
// kv_cache<bf16>: the KV caches (self and cross) store keys and values as bf16 (rounded to nearest
// even): half the memory; attention widens them as it reads (float layers).
template <class F> struct kv_cache {
    static_assert(std::is_same_v<F, dense> || std::is_same_v<F, bf16>, "ctformer: ct::kv_cache<F>: F is ct::dense or ct::bf16");
    using option_tag = tag::kv_cache;
    using type = F;
};
// lora<R, Alpha, Targets>: low-rank adapters (PEFT's LoRA, modules/lora.hpp) of rank R and scale
// Alpha / R on the projections Targets (ct::lora_q | ct::lora_v, PEFT's default for Llama; any of
// lora_q, lora_k, lora_v, lora_o, lora_gate, lora_up, lora_down; lora_all; nn.MultiheadAttention's
// lora_mha (self_attn) and lora_cross (multihead_attn, cross-attention layers)). The layer gains an
// Adapters role; the base params stay as they are (any weight format, in flash too) and are frozen
// where adapters are trained (docs/lora.md).
// Scale: ct::lora_alpha_over_r (LoRA's α / r), or ct::rslora (α / √r: PEFT's use_rslora).
template <std::size_t R, long long Alpha, unsigned Targets = lora_q | lora_v, lora_scaling Scale = lora_alpha_over_r>
struct lora {
    using option_tag = tag::lora;
    static constexpr std::size_t rank = R;
    static constexpr long long alpha = Alpha;
    static constexpr unsigned targets = Targets;
    static constexpr lora_scaling scale = Scale;
};
struct no_lora {
    using option_tag = tag::lora;
    static constexpr std::size_t rank = 0;
    static constexpr long long alpha = 0;
    static constexpr unsigned targets = 0;
    static constexpr lora_scaling scale = lora_alpha_over_r;
};
struct float_activations {};
struct int8_activations {};
// Per-tensor overrides: ct::weights<F, ..., ct::down_weights<F2>, ct::head_weights<F3>> stores
// those matrices in their own format and every other one in F (a GGUF file's mix, as
// tools/export.py prints it; int8_activations applies to each integer format of the mix).
template <class F> struct q_weights : role_format<proj::q, F> {};
template <class F> struct k_weights : role_format<proj::k, F> {};
template <class F> struct v_weights : role_format<proj::v, F> {};
template <class F> struct o_weights : role_format<proj::o, F> {};
template <class F> struct gate_weights : role_format<proj::gate, F> {};
template <class F> struct up_weights : role_format<proj::up, F> {};    // (a plain FFN's linear1)
template <class F> struct down_weights : role_format<proj::down, F> {};  // (a plain FFN's linear2)
template <class F> struct head_weights : role_format<proj::head, F> {};  // the LM head (tied: the embedding)
namespace detail {
template <class X> concept role_override = requires { typename X::role; typename X::format; };
template <class X> concept activation_kind = std::is_same_v<X, float_activations> || std::is_same_v<X, int8_activations>;
template <bool A8, class F> struct with_activations { using type = F; };
template <class F>
    requires requires { F::scaled; }
struct with_activations<true, F> { using type = std::conditional_t<F::scaled, int8_dot<F>, F>; };
template <class R, class... O> inline constexpr std::size_t role_count = (std::size_t{0} + ... + std::is_same_v<typename O::role, R>);
template <class... E> struct entries {};
template <class... A, class... B> constexpr entries<A..., B...> operator+(entries<A...>, entries<B...>) { return {}; }
template <bool A8, class X> struct entry_of { using type = entries<>; };  // (the activations' marker)
template <bool A8, role_override X> struct entry_of<A8, X> {
    using type = entries<role_format<typename X::role, typename with_activations<A8, typename X::format>::type>>;
};
template <class D, class E> struct mix_with;
template <class D, class... E> struct mix_with<D, entries<E...>> { using type = per_tensor<D, E...>; };
}  // namespace detail
template <class F, class... More> struct weights {
    static_assert(requires { F::per_word; F::group; },
                  "ctformer: ct::weights<F, ...>: F is a weight format (ct::dense, ct::bf16, ct::int8_per_channel, "
                  "ct::int8_group<G>, ct::int4_group<G>, ...; ct::f16 and ct::kscale are scale types: ct::int8_group<32, ct::f16>)");
    static_assert(((detail::activation_kind<More> || detail::role_override<More>) && ...),
                  "ctformer: ct::weights<F, A, Overrides...>: A is ct::float_activations or ct::int8_activations, an "
                  "override is ct::q_weights<F2>, k_, v_, o_, gate_, up_, down_ or head_weights<F2>");
    static_assert((std::size_t{0} + ... + detail::activation_kind<More>) <= 1, "ctformer: ct::weights: the activations are given twice");
    using option_tag = tag::weights;
    static constexpr bool a8 = (std::is_same_v<More, int8_activations> || ...);
    static constexpr bool mixed = (detail::role_override<More> || ...);
    using mix = typename detail::mix_with<typename detail::with_activations<a8, F>::type,
                                          decltype((detail::entries<>{} + ... + typename detail::entry_of<a8, More>::type{}))>::type;
    // (no overrides: F, or int8_dot<F> — whose check names bf16 and dense as errors)
    using type = std::conditional_t<mixed, mix, std::conditional_t<a8, int8_dot<F>, F>>;
};

namespace detail {
template <class O> concept option = requires { typename O::option_tag; };

template <class Tag, class Current> struct picker { using type = Current; };
template <class Tag, class Current, class O> constexpr auto operator<<(picker<Tag, Current>, std::type_identity<O>) {
    if constexpr (std::is_same_v<typename O::option_tag, Tag>) return picker<Tag, O>{};
    else return picker<Tag, Current>{};
}
// The option with tag Tag among Opts, or Default.
template <class Tag, class Default, class... Opts>
using pick = typename decltype((picker<Tag, Default>{} << ... << std::type_identity<Opts>{}))::type;

template <class Tag, class... Opts> inline constexpr std::size_t count_tag =
    (std::size_t{0} + ... + std::size_t{std::is_same_v<typename Opts::option_tag, Tag>});
template <class T> inline constexpr bool is_dtype = std::is_same_v<T, float> || std::is_same_v<T, double>;
}  // namespace detail

template <class... Opts> struct config {
    static_assert((detail::option<Opts> && ...),
                  "ctformer: every template argument of a layer must be a ctformer option (ct::d_model<N>, ...)");

  private:
    template <class Tag> static constexpr bool unique = detail::count_tag<Tag, Opts...> <= 1;
    static_assert(unique<tag::d_model> && unique<tag::heads> && unique<tag::ffn_dim> && unique<tag::dtype> &&
                      unique<tag::activation> && unique<tag::norm> && unique<tag::norm_first> && unique<tag::eps> &&
                      unique<tag::bias> && unique<tag::attn_bias> && unique<tag::ffn_bias> &&
                      unique<tag::norm_bias> && unique<tag::cross_attention> && unique<tag::score_scale> &&
                      unique<tag::check_finite> && unique<tag::kv_heads> && unique<tag::rope> &&
                      unique<tag::max_positions> && unique<tag::gated> && unique<tag::param_names> && unique<tag::separate_qkv> &&
                      unique<tag::weights> && unique<tag::kv_cache> && unique<tag::lora>,
                  "ctformer: an option is given twice");
    static constexpr bool all_bias = detail::pick<tag::bias, bias<true>, Opts...>::value;

  public:
    using value_type = typename detail::pick<tag::dtype, dtype<float>, Opts...>::type;
    static constexpr std::size_t d_model = detail::pick<tag::d_model, ctformer::d_model<0>, Opts...>::value;
    static constexpr std::size_t heads = detail::pick<tag::heads, ctformer::heads<0>, Opts...>::value;
    static constexpr std::size_t ffn_dim = detail::pick<tag::ffn_dim, ctformer::ffn_dim<2048>, Opts...>::value;
    using activation_type = typename detail::pick<tag::activation, activation<relu>, Opts...>::type;
    using norm_type = typename detail::pick<tag::norm, norm<layer_norm>, Opts...>::type;
    using scale_type = typename detail::pick<tag::score_scale, score_scale<inv_sqrt_head_dim>, Opts...>::type;
    static constexpr bool norm_first = detail::pick<tag::norm_first, ctformer::norm_first<false>, Opts...>::value;
    static constexpr double eps = detail::pick<tag::eps, layer_norm_eps<1, 100000>, Opts...>::value;
    static constexpr bool attn_bias = detail::pick<tag::attn_bias, ctformer::attn_bias<all_bias>, Opts...>::value;
    static constexpr bool ffn_bias = detail::pick<tag::ffn_bias, ctformer::ffn_bias<all_bias>, Opts...>::value;
    static constexpr bool norm_bias = detail::pick<tag::norm_bias, ctformer::norm_bias<all_bias>, Opts...>::value;
    static constexpr bool cross_attention =
        detail::pick<tag::cross_attention, ctformer::cross_attention<true>, Opts...>::value;
    static constexpr bool check_finite = detail::pick<tag::check_finite, ctformer::check_finite<false>, Opts...>::value;

    static constexpr std::size_t kv_heads = detail::pick<tag::kv_heads, ctformer::kv_heads<heads>, Opts...>::value;
    using rope_type = typename detail::pick<tag::rope, no_rope, Opts...>;
    static constexpr bool rope = rope_type::enabled;
    static constexpr std::size_t max_positions = detail::pick<tag::max_positions, ctformer::max_positions<0>, Opts...>::value;
    static constexpr bool gated = detail::pick<tag::gated, ctformer::gated<false>, Opts...>::value;
    using names_type = typename detail::pick<tag::param_names, param_names<pytorch>, Opts...>::type;
    static constexpr bool separate_qkv = detail::pick<tag::separate_qkv,
        ctformer::separate_qkv<kv_heads != heads || std::is_same_v<names_type, hugging_face>>, Opts...>::value;
    using weight_format = typename detail::pick<tag::weights, weights<dense>, Opts...>::type;
    static constexpr bool quantized = is_quantized_format<weight_format>;
    // Weight matrix Role's format (ct::weights' per-tensor overrides, or the one format).
    template <class Role> using format_of = role_format_t<weight_format, Role>;
    using cache_format = typename detail::pick<tag::kv_cache, kv_cache<dense>, Opts...>::type;
    using cache_element = cache_element_t<value_type, cache_format>;  // what a KV cache stores
    using lora_type = typename detail::pick<tag::lora, no_lora, Opts...>;
    static constexpr std::size_t lora_rank = lora_type::rank;
    static constexpr long long lora_alpha = lora_type::alpha;
    static constexpr unsigned lora_targets = lora_type::targets;
    static constexpr lora_scaling lora_scale = lora_type::scale;
    static constexpr bool has_lora = detail::count_tag<tag::lora, Opts...> != 0;

    static_assert(detail::is_dtype<value_type>, "ctformer: dtype must be float or double");
    static_assert(d_model > 0, "ctformer: d_model is zero or missing (add ct::d_model<N>)");
    static_assert(heads > 0, "ctformer: heads is zero or missing (add ct::heads<N>)");
    static_assert(ffn_dim > 0, "ctformer: ffn_dim is zero");
    static_assert(heads == 0 || d_model % heads == 0, "ctformer: heads must divide d_model (d_model % heads != 0)");
    static_assert(eps > 0, "ctformer: layer_norm_eps must be positive");

    static constexpr std::size_t head_dim = heads == 0 ? 0 : d_model / heads;
    static_assert(kv_heads > 0 && heads % kv_heads == 0,
                  "ctformer: kv_heads must divide heads (each key/value head serves heads/kv_heads query heads)");
    static_assert(kv_heads == heads || separate_qkv,
                  "ctformer: grouped-query attention (kv_heads < heads) has separate q/k/v projections: drop "
                  "ct::separate_qkv<false>");
    static_assert(requires { names_type::label; },
                  "ctformer: param_names<Table>: a naming table has a label and rename<Role>(member) (layer/names.hpp)");
    static_assert(!rope || max_positions > 0,
                  "ctformer: RoPE needs ct::max_positions<N> (the longest sequence or KV cache capacity: its table's size)");
    static_assert(!rope || head_dim % 2 == 0, "ctformer: RoPE rotates pairs of dimensions: head_dim must be even");
    static constexpr std::size_t rotary_dim = rope && rope_type::rotary_dim ? rope_type::rotary_dim : head_dim;
    static_assert(!rope || (rotary_dim % 2 == 0 && rotary_dim <= head_dim),
                  "ctformer: RoPE's rotary dimension must be even and at most head_dim");
    static_assert(!rope || rope_type::theta > 0, "ctformer: rope_theta must be positive");
    static_assert(std::is_same_v<cache_format, dense> || std::is_same_v<value_type, float>,
                  "ctformer: bf16 KV caches (ct::kv_cache<ct::bf16>) are for float layers: drop ct::dtype<double>");
    static_assert(!quantized || std::is_same_v<value_type, float>,
                  "ctformer: quantized weights (ct::weights<...>) run float layers: drop ct::dtype<double>");
  private:
    using roles = detail::entries<proj::q, proj::k, proj::v, proj::o, proj::gate, proj::up, proj::down, proj::head>;
    template <class R> static constexpr std::size_t inputs_of = std::is_same_v<R, proj::down> ? ffn_dim : d_model;
    template <class... R> static constexpr bool words_fit(detail::entries<R...>) { return ((inputs_of<R> % format_of<R>::per_word == 0) && ...); }
    template <class... R> static constexpr bool groups_fit(detail::entries<R...>) {
        return ((format_of<R>::group == 0 || inputs_of<R> % format_of<R>::group == 0) && ...);
    }
    template <class X> static constexpr bool once_each(std::type_identity<X>) { return true; }
    template <class D, class... O> static constexpr bool once_each(std::type_identity<per_tensor<D, O...>>) {
        return ((detail::role_count<typename O::role, O...> == 1) && ...);
    }

  public:
    static_assert(words_fit(roles{}), "ctformer: quantized weights pack 32 bits of inputs per word: d_model and ffn_dim must be "
                                      "multiples of 2 (bf16), 4 (int8) or 8 (int4)");
    static_assert(groups_fit(roles{}), "ctformer: the int4 group size must divide the input features (d_model and ffn_dim)");
    static_assert(once_each(std::type_identity<weight_format>{}), "ctformer: ct::weights: a weight matrix's format is given twice");
    static_assert(separate_qkv || (std::is_same_v<format_of<proj::q>, format_of<proj::k>> && std::is_same_v<format_of<proj::q>, format_of<proj::v>>),
                  "ctformer: the packed in-projection (nn.MultiheadAttention's in_proj_weight) is one matrix: q, k and v "
                  "take one format (ct::separate_qkv<true> for three)");

    static_assert(!has_lora || lora_rank > 0, "ctformer: ct::lora<R, Alpha, Targets>: the rank R must be positive");
    static_assert(!has_lora || lora_alpha > 0, "ctformer: ct::lora<R, Alpha, Targets>: Alpha must be positive");
    static_assert(!has_lora || (lora_targets != 0 && (lora_targets & ~unsigned{lora_all | lora_mha | lora_cross}) == 0),
                  "ctformer: ct::lora<R, Alpha, Targets>: Targets is a non-empty or of ct::lora_q, lora_k, lora_v, lora_o, "
                  "lora_gate, lora_up, lora_down, lora_mha, lora_cross");
    static_assert(!has_lora || gated || (lora_targets & lora_gate) == 0,
                  "ctformer: ct::lora targets gate_proj (ct::lora_gate), which a plain feed-forward lacks (ct::gated<true> has it)");
    static_assert(!has_lora || separate_qkv || (lora_targets & (lora_q | lora_k | lora_v | lora_o)) == 0,
                  "ctformer: ct::lora: the packed in-projection (nn.MultiheadAttention) has no separate q/k/v/o projections: "
                  "target it as PEFT does with ct::lora_mha (one adapter over q|k|v and one over out_proj), or use "
                  "ct::separate_qkv<true>");
    static_assert(!has_lora || !separate_qkv || (lora_targets & lora_mha) == 0,
                  "ctformer: ct::lora_mha adapts nn.MultiheadAttention's packed in-projection: separate projections take "
                  "ct::lora_q, lora_k, lora_v, lora_o");
    static_assert(!has_lora || cross_attention || (lora_targets & lora_cross) == 0,
                  "ctformer: ct::lora_cross adapts the cross-attention (multihead_attn), which a decoder-only block lacks");

    // The configuration as named fields, field(name, value) with value a std::size_t, bool, double
    // or const char*: what the exporter writes into a file's metadata and load_state_dict checks
    // (io/config.hpp). A user activation or norm without a name is not described (not checked).
    template <class F> [[gnu::cold]] static constexpr void describe(F&& field) {
        field("d_model", d_model);
        field("heads", heads);
        field("kv_heads", kv_heads);
        field("ffn_dim", ffn_dim);
        if constexpr (requires { activation_type::name; }) field("activation", activation_type::name);
        field("gated", gated);
        if constexpr (requires { norm_type::name; }) field("norm", norm_type::name);
        field("norm_first", norm_first);
        field("eps", eps);
        field("attn_bias", attn_bias);
        field("ffn_bias", ffn_bias);
        field("norm_bias", norm_bias);
        field("rope", !rope ? "none" : std::is_same_v<typename rope_type::layout, interleaved> ? "interleaved" : "rotate_half");
        if constexpr (rope) {
            field("rope_theta", static_cast<std::size_t>(rope_type::theta));
            field("rotary_dim", rotary_dim);
        }
        field("param_names", names_type::label);
        field("weight_format", weight_format::name);  // (a dense file loads into any format: quantized at load)
        if constexpr (weight_format::group > 0) field("weight_group", weight_format::group);  // (per_tensor: its name only)
    }
};

namespace detail {
template <class... Ts> struct type_list {};
template <class... A, class... B> constexpr type_list<A..., B...> operator+(type_list<A...>, type_list<B...>) { return {}; }
template <class L> struct config_of;
template <class... O> struct config_of<type_list<O...>> { using type = config<O...>; };
// config<Opts..., each default whose option Opts does not give>
template <class Defaults, class... Opts> struct defaulted;
template <class... Ds, class... Opts> struct defaulted<type_list<Ds...>, Opts...> {
    using type = typename config_of<decltype((type_list<Opts...>{} + ... +
                                              std::conditional_t<count_tag<typename Ds::option_tag, Opts...> == 0,
                                                                 type_list<Ds>, type_list<>>{}))>::type;
};
}  // namespace detail

// The Llama family's block defaults (Hugging Face's LlamaConfig): RMSNorm (eps 1e-6) before each
// sub-layer, SwiGLU, no biases, RoPE (rotate-half, theta 10000), Hugging Face's names. Any option
// given overrides its default; max_positions has none (a model sets its context).
using llama_defaults = detail::type_list<cross_attention<false>, param_names<hugging_face>, gated<true>, activation<silu>,
                                         norm<rms_norm>, norm_first<true>, bias<false>, rope<rotate_half, 10000>,
                                         norm_eps<1, 1000000>>;
template <class... Opts> using llama_config = typename detail::defaulted<llama_defaults, Opts...>::type;

}  // namespace ctformer
