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
#include "../modules/norm.hpp"

namespace ctformer {

namespace tag {
struct d_model; struct heads; struct ffn_dim; struct dtype; struct activation; struct norm; struct norm_first;
struct eps; struct bias; struct attn_bias; struct ffn_bias; struct norm_bias; struct cross_attention;
struct score_scale; struct check_finite;
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
                      unique<tag::check_finite>,
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

    static_assert(detail::is_dtype<value_type>, "ctformer: dtype must be float or double");
    static_assert(d_model > 0, "ctformer: d_model is zero or missing (add ct::d_model<N>)");
    static_assert(heads > 0, "ctformer: heads is zero or missing (add ct::heads<N>)");
    static_assert(ffn_dim > 0, "ctformer: ffn_dim is zero");
    static_assert(heads == 0 || d_model % heads == 0, "ctformer: heads must divide d_model (d_model % heads != 0)");
    static_assert(eps > 0, "ctformer: layer_norm_eps must be positive");

    static constexpr std::size_t head_dim = heads == 0 ? 0 : d_model / heads;
};

}  // namespace ctformer
