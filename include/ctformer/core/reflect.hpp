// ctformer/core/reflect.hpp — the one generic visitor that walks parameter structs (each module
// declares its own with PyTorch's names: BOOST_HANA_DEFINE_STRUCT) as "dotted.name -> tensor"
// (loading, saving, counting, zeroing), module lists, and the Params role.
//
// Params are the immutable role: loaded once, then only read by forward/step/backward, so one
// params object can be shared by any number of threads, each with its own workspace and caches.
#pragma once
#include <boost/hana/accessors.hpp>
#include <boost/hana/define_struct.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/unpack.hpp>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>

#include "schedule.hpp"
#include "tensor.hpp"

namespace ctformer {

// N modules of one type, reflected as "0.", "1.", ... (nn.ModuleList): a stack's `layers`, a GPT's `h`.
template <class P, std::size_t N> struct ModuleList {
    static_assert(N > 0, "ctformer: a module list (stack) needs at least one layer");
    static constexpr std::size_t count = N;
    P items[N];
    P& operator[](std::size_t i) { return items[i]; }
    const P& operator[](std::size_t i) const { return items[i]; }
    P* begin() { return items; }
    P* end() { return items + N; }
    const P* begin() const { return items; }
    const P* end() const { return items + N; }
};
// The Params role of a layer, stack or model: the reflected struct P plus its byte size, like every
// other role's `bytes` (P's members are the whole object: bytes == sizeof).
template <class P> struct params_role : P {
    static constexpr std::size_t bytes = sizeof(P);
};

// A member a configuration leaves out (a tied LM head, sinusoidal positions): no tensors, no name.
struct absent {};

// Names apart from structure: a params struct's members carry structural (canonical) names; a
// struct that declares `using role = role::X;` has them renamed, as its tensors are visited, by
// the naming table in force: the nearest enclosing struct's `using names = Table;` (none: the
// canonical names). Table::rename<Role>(member) gives the family's name for the member — several
// dotted parts if the family nests it deeper, "" to name its tensors at the owner's level (as
// TransformerDecoderLayer names its feed-forward's linear1 and linear2).
// (layer/names.hpp: the PyTorch nn, Hugging Face and GPT-2 tables.)
namespace role {
struct attention; struct ffn; struct layer; struct stack; struct model;
}  // namespace role
struct canonical_names {
    template <class Role> static constexpr std::string_view rename(std::string_view member) { return member; }
};

template <class X> struct is_module_list : std::false_type {};
template <class P, std::size_t N> struct is_module_list<ModuleList<P, N>> : std::true_type {};

// ---- Reflection ----
namespace detail {
template <class P, class Pair> using member_t =
    std::remove_cvref_t<decltype(boost::hana::second(std::declval<Pair>())(std::declval<P&>()))>;

inline constexpr std::size_t max_name = 160;

// A table that overrides the structs' own (for_each_tensor_as): a file format's names.
template <class Table> struct forced_names : Table {};
template <class X> inline constexpr bool is_forced_names = false;
template <class Table> inline constexpr bool is_forced_names<forced_names<Table>> = true;

template <class P, class Names> struct names_in_force { using type = Names; };
template <class P, class Names> requires(requires { typename P::names; } && !is_forced_names<Names>) struct names_in_force<P, Names> {
    using type = typename P::names;
};
// member's name under Names in a struct of P's role (its canonical name where P has no role)
template <class P, class Names> constexpr std::string_view member_name(std::string_view member) {
    if constexpr (requires { typename P::role; }) return Names::template rename<typename P::role>(member);
    else return member;
}

template <class Names, class P, class F> [[gnu::cold]] constexpr void visit(P& p, char* name, std::size_t len, F& f) {
    if constexpr (std::is_same_v<std::remove_const_t<P>, absent>) {
        (void)name, (void)len, (void)f;
    } else if constexpr (is_tensor_storage_v<P>) {
        f(std::string_view(name, len), p);
    } else if constexpr (is_module_list<std::remove_const_t<P>>::value) {
        for (std::size_t i = 0; i < P::count; ++i) {
            std::size_t n = len;
            if (n) name[n++] = '.';
            char digits[20];
            std::size_t k = 0, v = i;
            do digits[k++] = static_cast<char>('0' + v % 10); while ((v /= 10) != 0);
            while (k) name[n++] = digits[--k];
            visit<Names>(p.items[i], name, n, f);
        }
    } else {
        using S = std::remove_const_t<P>;
        using N = typename names_in_force<S, Names>::type;
        boost::hana::for_each(boost::hana::accessors<S>(), [&](auto pair) {
            auto& m = boost::hana::second(pair)(p);
            constexpr std::string_view member = member_name<S, N>(boost::hana::to<const char*>(boost::hana::first(pair)));
            if constexpr (member.empty()) {
                visit<N>(m, name, len, f);
            } else {
                std::size_t n = len;
                if (n) name[n++] = '.';
                for (std::size_t i = 0; i < member.size(); ++i) name[n + i] = member[i];
                visit<N>(m, name, n + member.size(), f);
            }
        });
    }
}
}  // namespace detail

// Calls f(std::string_view dotted_name, tensor&) for every tensor of p, in declaration order
// (PyTorch's state_dict order). Works on const params too, and in constant expressions. Cold:
// walks load, save and initialise, never run in a step; GCC compiles them (and f) for size.
template <class P, class F> [[gnu::cold]] constexpr void for_each_tensor(P& p, F&& f) {
    char name[detail::max_name]{};
    detail::visit<canonical_names>(p, name, 0, f);
}
// The same walk under naming table Table whatever names p's type carries (a file format's names:
// io/gguf_load.hpp visits a Llama by llama.cpp's tensor names).
template <class Table, class P, class F> constexpr void for_each_tensor_as(P& p, F&& f) {
    char name[detail::max_name]{};
    detail::visit<detail::forced_names<Table>>(p, name, 0, f);
}

namespace detail {
template <class F, class P, class... Q> void zip(F& f, P& p, Q&... q) {
    if constexpr (std::is_same_v<std::remove_const_t<P>, absent>) {
        (void)f, (void)p, ((void)q, ...);
    } else if constexpr (is_tensor_storage_v<P>) {
        f(sizeof(p.storage) / sizeof(p.storage[0]), p.storage, q.storage...);
    } else if constexpr (is_module_list<std::remove_const_t<P>>::value) {
        for (std::size_t i = 0; i < P::count; ++i) zip(f, p.items[i], q.items[i]...);
    } else {
        boost::hana::for_each(boost::hana::accessors<std::remove_const_t<P>>(), [&](auto pair) {
            zip(f, boost::hana::second(pair)(p), boost::hana::second(pair)(q)...);
        });
    }
}
}  // namespace detail

// Walks objects of one params type in lockstep: f(n, a, b, ...) with each tensor's raw storage
// (n elements, panel padding included: zero in params and gradients, and kept zero by every
// elementwise update). What optimizers and gradient norms run on.
template <class F, class P, class... Q> void zip_storage(F&& f, P& p, Q&... q) {
    detail::zip(f, p, q...);
}

// Number of scalar parameters, at compile time.
template <class P> constexpr std::size_t parameter_count() {
    if constexpr (std::is_same_v<P, absent>) {
        return 0;
    } else if constexpr (is_tensor_storage_v<P>) {
        return P::size;
    } else if constexpr (is_module_list<P>::value) {
        return P::count * parameter_count<std::remove_cvref_t<decltype(std::declval<P&>().items[0])>>();
    } else {
        return boost::hana::unpack(boost::hana::accessors<P>(), [](auto... pairs) {
            return (std::size_t{0} + ... + parameter_count<detail::member_t<P, decltype(pairs)>>());
        });
    }
}

// Whether every tensor of P stores its values in its dtype (no quantized weight, core/quant.hpp):
// what training and the optimizers need.
template <class P> constexpr bool all_dense() {
    if constexpr (std::is_same_v<P, absent>) {
        return true;
    } else if constexpr (is_tensor_storage_v<P>) {
        return std::is_same_v<std::remove_cvref_t<decltype(std::declval<P&>().storage[0])>, typename P::value_type>;
    } else if constexpr (is_module_list<P>::value) {
        return all_dense<std::remove_cvref_t<decltype(std::declval<P&>().items[0])>>();
    } else {
        return boost::hana::unpack(boost::hana::accessors<P>(), [](auto... pairs) {
            return (true && ... && all_dense<detail::member_t<P, decltype(pairs)>>());
        });
    }
}
// Every element of every tensor to zero, each tensor in parts of the calling thread's executor
// where it is large enough.
template <class P> void zero_params(P& p) {
    zip_storage([](std::size_t n, auto* x) {
        schedule::split_elements(n, [&](std::size_t i0, std::size_t i1) {
            for (std::size_t i = i0; i < i1; ++i) x[i] = 0;
        });
    }, p);
}

}  // namespace ctformer
