// ctformer/io/state_dict.hpp — params <-> safetensors by their reflected names (PyTorch's): loading
// (every name, shape, dtype and value checked before the first write), reading one tensor, and
// writing objects (params, gradients, optimizer state) as one file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "../core/panels.hpp"
#include "../core/quant.hpp"
#include "../core/reflect.hpp"
#include "../core/status.hpp"
#include "config.hpp"
#include "quantized.hpp"
#include "safetensors.hpp"

namespace ctformer {

namespace safetensors {

// What a load accepts beyond names, shapes and dtypes. A finite F64 value too large for a float
// destination is always an error (errc::value_out_of_range), never a silent inf.
struct load_options {
    bool reject_non_finite = false;  // NaN or inf in the file: errc::non_finite
    double max_abs = 0;              // > 0: any |value| above it is errc::value_out_of_range
    bool require_config = false;     // a file without the exporter's configuration: errc::config_mismatch
};

namespace detail {
// A tensor as the loader sees it, whatever its C++ type: the loader is compiled once per element
// type, not once per tensor shape (code size on a microcontroller, compile time everywhere).
// Element i in PyTorch's row-major order is storage[index(i)].
template <class T> struct tensor_ref {
    T* storage;
    std::size_t rank, size;
    const std::size_t* shape;
    std::size_t in = 0, seg = 0, segment_elems = 0;  // a PackedWeight's panel layout (in == 0: plain)
    std::size_t index(std::size_t i) const {
        if (in == 0) return i;
        const std::size_t o = i / in, k = i % in;
        return o / seg * segment_elems + panels::panel_index<std::remove_const_t<T>>(in, k, o % seg);
    }
};
template <class X> auto ref_of(X& x) {
    using T = std::conditional_t<std::is_const_v<X>, const typename X::value_type, typename X::value_type>;
    tensor_ref<T> r{x.storage, X::rank, X::size, X::shape.data()};
    if constexpr (requires { X::segment_elems; }) r.in = X::in_features, r.seg = X::segment, r.segment_elems = X::segment_elems;
    return r;
}
// "(8, 12)"
template <class I> void append_shape(text& t, const I* shape, std::size_t rank) {
    t << "(";
    for (std::size_t i = 0; i < rank; ++i) (i ? t << ", " : t) << static_cast<std::size_t>(shape[i]);
    t << ")";
}
// Which dtypes fill a T tensor: floats from F32/F64/F16/BF16, integers from I32/I64, bool from BOOL.
template <class T> constexpr bool loads_into(dtype d) {
    if constexpr (std::is_same_v<T, bool>) return d == dtype::BOOL;
    else if constexpr (std::is_integral_v<T>) return d == dtype::I32 || d == dtype::I64;
    else return d == dtype::F32 || d == dtype::F64 || d == dtype::F16 || d == dtype::BF16;
}
// e's shape against (rank, shape): errc::wrong_shape naming t's text, expected and found.
[[gnu::cold]] inline status check_shape(text& t, const entry& e, std::size_t rank, const std::size_t* shape) {
    bool same = e.rank == rank;
    for (std::size_t i = 0; same && i < rank; ++i) same = e.shape[i] == shape[i];
    if (same) return {};
    t << ": expected ";
    append_shape(t, shape, rank);
    t << ", found ";
    append_shape(t, e.shape.data(), e.rank);
    return status::error(errc::wrong_shape, t.view());
}
// Checks that entry e can fill a T tensor of that shape (convertible dtype, every value acceptable).
// Errors name prefix + name, and say what was expected and found.
template <class T, std::size_t Cap>
[[gnu::cold]] status check_shaped(const file<Cap>& f, const entry* e, std::string_view prefix, std::string_view name,
                    std::size_t rank, const std::size_t* shape, std::size_t size, const load_options& opt) {
    text t;
    t << prefix << name;
    if (!e) return status::error(errc::missing_tensor, t.view());
    if (!loads_into<T>(e->type)) {
        t << ": " << dtype_names[static_cast<std::size_t>(e->type)] << " into "
          << (std::is_same_v<T, bool> ? "bool" : std::is_integral_v<T> ? "an integer" : "a float");
        return status::error(errc::wrong_dtype, t.view());
    }
    if (status st = check_shape(t, *e, rank, shape); !st) return st;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {  // I64 ids into 32 bits, negatives into unsigned
        const bool can_fail = std::is_unsigned_v<T> || sizeof(T) < dtype_size(e->type);
        for (std::size_t i = 0; can_fail && i < size; ++i) {
            const auto v = f.template element<std::int64_t>(*e, i);
            bool fits;
            if constexpr (std::is_unsigned_v<T>)
                fits = v >= 0 && static_cast<std::uint64_t>(v) <= std::numeric_limits<T>::max();
            else
                fits = v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
            if (!fits) return status::error(errc::value_out_of_range, t.view());
        }
    } else if constexpr (!std::is_same_v<T, bool>) {
        // values need a pass only when they could fail: F64 into float, or an option asks
        const bool fits_by_type = e->type != dtype::F64 || std::is_same_v<T, double>;
        if (!fits_by_type || opt.reject_non_finite || opt.max_abs > 0) {
            const double limit = std::is_same_v<T, float> ? double(std::numeric_limits<float>::max())
                                                          : std::numeric_limits<double>::max();
            for (std::size_t i = 0; i < size; ++i) {
                const double v = f.template element<double>(*e, i);
                const bool finite = v - v == 0;
                if (!finite && opt.reject_non_finite) return status::error(errc::non_finite, t.view());
                if (finite && (v > limit || v < -limit || (opt.max_abs > 0 && (v > opt.max_abs || v < -opt.max_abs))))
                    return status::error(errc::value_out_of_range, t.view());
            }
        }
    }
    return {};
}
// The tensor prefix + name of f into t, after the check accepted it. (This and check_named are
// kept out of line: one copy per element type, not one per tensor of a params struct.)
template <class T, std::size_t Cap>
[[gnu::noinline]] void write_named(const file<Cap>& f, std::string_view prefix, std::string_view name, const tensor_ref<T>& t) {
    const entry& e = *f.find(prefix, name);
    for (std::size_t i = 0; i < t.size; ++i) t.storage[t.index(i)] = f.template element<T>(e, i);
}
template <class T, std::size_t Cap>
[[gnu::noinline, gnu::cold]] status check_named(const file<Cap>& f, std::string_view prefix, std::string_view name,
                                     const tensor_ref<const T>& t, const load_options& opt) {
    return check_shaped<T>(f, f.find(prefix, name), prefix, name, t.rank, t.shape, t.size, opt);
}
// A pre-quantized weight (quantized.hpp): N in X's packed dtype and shape, N_scale F32 of its shape.
// Values as the float path checks them: int8 within [-127, 127] (the kernels' range); each scale
// finite and |scale|·max|q| a finite float (max|q|: 127, or 8 for int4); bf16 values and that bound
// against opt (reject_non_finite, max_abs).
// What check_prequantized needs of X's layout, as values: the check is compiled once per file
// type, not once per weight shape (code size on a microcontroller).
struct prequantized_layout {
    dtype packed;
    std::size_t packed_shape[2], packed_bytes, values;
    bool bf16, int4, scaled, with_min;
    std::size_t scale_rank, scale_shape[2], scale_size;
    dtype scale_dtype;       // (F32 formats read F16 scales too)
    int byte_min, byte_max;  // (a byte an integer: its range)
    double qmax;             // (max |q|)
    std::size_t supers;      // (two-level scales, I8: their halves a row; else 0)
};
template <class X> constexpr prequantized_layout prequantized_layout_of() {
    using Q = quant_layout<X>;
    return {Q::packed, {Q::packed_shape[0], Q::packed_shape[1]}, Q::packed_bytes, Q::Out * Q::In,
            std::is_same_v<typename X::format, bf16>, Q::int4, Q::scaled, Q::with_min,
            Q::scale_rank, {Q::scale_shape[0], Q::scale_shape[1]}, Q::scale_size, Q::scale_dtype, Q::byte_min, Q::byte_max, Q::qmax,
            Q::supers};
}
template <std::size_t Cap>
[[gnu::noinline, gnu::cold]] status check_prequantized(const file<Cap>& f, std::string_view prefix, std::string_view name,
                                            const prequantized_layout& q, const load_options& opt) {
    auto fail = [&](errc code, std::string_view n) {
        text t;
        t << prefix << n;
        return status::error(code, t.view());
    };
    // (also: a second dtype accepted, F16 scales for F32 ones: they widen exactly)
    auto check = [&](std::string_view n, dtype type, std::size_t rank, const std::size_t* shape, dtype also) {
        text t;
        t << prefix << n;
        const entry* e = f.find(prefix, n);
        if (!e) return status::error(errc::missing_tensor, t.view());
        if (e->type != type && e->type != also) {
            t << ": " << dtype_names[static_cast<std::size_t>(e->type)] << ", expected " << dtype_names[static_cast<std::size_t>(type)];
            return status::error(errc::wrong_dtype, t.view());
        }
        return check_shape(t, *e, rank, shape);
    };
    if (status st = check(name, q.packed, 2, q.packed_shape, q.packed); !st) return st;
    const entry& w = *f.find(prefix, name);
    if (q.bf16) {
        if (opt.reject_non_finite || opt.max_abs > 0)
            for (std::size_t i = 0; i < q.values; ++i) {
                const double v = f.template element<double>(w, i);
                if (v - v != 0 && opt.reject_non_finite) return fail(errc::non_finite, name);
                if (v - v == 0 && opt.max_abs > 0 && (v > opt.max_abs || v < -opt.max_abs))
                    return fail(errc::value_out_of_range, name);
            }
    } else if (!q.int4) {  // (int8: -128; int6: outside six bits)
        for (std::size_t i = 0; i < q.packed_bytes; ++i) {
            const int b = static_cast<std::int8_t>(std::to_integer<std::uint8_t>(f.data(w)[i]));
            if (b < q.byte_min || b > q.byte_max) return fail(errc::value_out_of_range, name);
        }
    }
    if (q.scaled) {
        const scale_name sn(name), mn(name, "_min"), sh(name, "_scale_super"), mh(name, "_min_super");
        const dtype also = q.scale_dtype == dtype::F32 ? dtype::F16 : q.scale_dtype;
        if (status st = check(sn.view(), q.scale_dtype, q.scale_rank, q.scale_shape, also); !st) return st;
        if (q.with_min)
            if (status st = check(mn.view(), q.scale_dtype, q.scale_rank, q.scale_shape, also); !st) return st;
        const std::size_t super_shape[2] = {q.scale_shape[0], q.supers}, per = q.supers ? q.scale_shape[1] / q.supers : 1;
        if (q.supers) {
            if (status st = check(sh.view(), dtype::F16, 2, super_shape, dtype::F16); !st) return st;
            if (q.with_min)
                if (status st = check(mh.view(), dtype::F16, 2, super_shape, dtype::F16); !st) return st;
        }
        const entry& e = *f.find(prefix, sn.view());
        const entry* me = q.with_min ? f.find(prefix, mn.view()) : nullptr;
        const entry* he = q.supers ? f.find(prefix, sh.view()) : nullptr;
        const entry* mhe = q.supers && q.with_min ? f.find(prefix, mh.view()) : nullptr;
        const double qmax = q.qmax;
        for (std::size_t i = 0; i < q.scale_size; ++i) {  // |w| <= |s|·max|q| (+ |m|): a finite float, within max_abs
            double v = f.template element<float>(e, i), m = me ? f.template element<float>(*me, i) : 0.0;
            if (he) {  // (two-level: the int8 times its half; a half inf or NaN is named)
                const double d = f.template element<float>(*he, i / per), dm = mhe ? f.template element<float>(*mhe, i / per) : 0.0;
                if (d - d != 0) return fail(errc::non_finite, sh.view());
                if (dm - dm != 0) return fail(errc::non_finite, mh.view());
                v *= d, m *= dm;
            }
            const double bound = (v < 0 ? -v : v) * qmax + (m < 0 ? -m : m);
            if (v - v != 0) return fail(errc::non_finite, sn.view());
            if (m - m != 0) return fail(errc::non_finite, mn.view());
            if (bound > double(std::numeric_limits<float>::max()) || (opt.max_abs > 0 && bound > opt.max_abs))
                return fail(errc::value_out_of_range, sn.view());
        }
    }
    return {};
}
template <class X, std::size_t Cap>
status check_prequantized(const file<Cap>& f, std::string_view prefix, std::string_view name, const load_options& opt) {
    static constexpr prequantized_layout q = prequantized_layout_of<X>();
    return check_prequantized(f, prefix, name, q, opt);
}
}  // namespace detail

// Checks that entry e can fill tensor X (same shape, convertible dtype, every value acceptable).
template <class X, std::size_t Cap>
status check_entry(const file<Cap>& f, const entry* e, std::string_view name, const load_options& opt = {}) {
    return detail::check_shaped<typename X::value_type>(f, e, {}, name, X::rank, X::shape.data(), X::size, opt);
}

}  // namespace safetensors

// Loads every tensor of params from f under prefix (e.g. "params." or "layers.3."). Checks all
// names, shapes, dtypes and values first: on any error nothing has been written. Tensors under the
// prefix that params do not have are an error (unexpected_tensor); tensors outside it are ignored.
namespace safetensors::detail {
// Nothing under the prefix: the missing tensor's name, and the prefixes the file has (their first
// dotted component) — the usual mistake is the prefix.
template <class P, std::size_t Cap>
[[gnu::cold]] status nothing_under(const P& params, const file<Cap>& f, std::string_view prefix) {
    text t;
    bool named = false;
    for_each_tensor(params, [&](std::string_view name, const auto&) {
        if (!named) t << prefix << name, named = true;  // (copied: the name's buffer is reused)
    });
    t << ": nothing under '" << prefix << "'; the file has";
    for (std::size_t i = 0; i < f.size(); ++i) {
        // (starts_with and a prefix by length, not substr: nothing here may throw, even unreachably)
        const std::string_view n = f[i].name, head(n.data(), n.find('.') == n.npos ? n.size() : n.find('.') + 1);
        bool seen = false;
        for (std::size_t j = 0; j < i && !seen; ++j) seen = f[j].name.starts_with(head);
        if (!seen) t << " '" << head << "'";
    }
    return status::error(errc::missing_tensor, t.view());
}
// (Cold, as everything here that runs once per load: compiled for size — a firmware's loader.)
template <class P, std::size_t Cap>
[[gnu::cold]] status check_state(const P& params, const file<Cap>& f, std::string_view prefix, const load_options& opt) {
    if (!prefix.empty()) {
        bool any = false;
        for (std::size_t i = 0; i < f.size() && !any; ++i) any = f.under(f[i], prefix);
        if (!any && parameter_count<P>() > 0) return nothing_under(params, f, prefix);
    }
    status result;
    std::uint32_t claimed[(Cap + 31) / 32] = {};  // the file's entries the params have taken
    auto claim = [&](std::string_view name) {
        if (const entry* e = f.find(prefix, name)) {
            const auto i = static_cast<std::size_t>(e - &f[0]);
            claimed[i / 32] |= std::uint32_t{1} << (i % 32);
        }
    };
    for_each_tensor(params, [&](std::string_view name, const auto& t) {
        if (!result) return;
        using X = std::remove_cvref_t<decltype(t)>;
        if constexpr (is_quantized_weight_v<X>) {
            if (prequantized<X>(f, prefix, name)) {  // read as stored (and its scales)
                result = check_prequantized<X>(f, prefix, name, opt);
                if (quant_layout<X>::scaled) claim(scale_name(name).view());
                if (quant_layout<X>::with_min) claim(scale_name(name, "_min").view());
                if (quant_layout<X>::two_level) claim(scale_name(name, "_scale_super").view());
                if (quant_layout<X>::two_level && quant_layout<X>::with_min) claim(scale_name(name, "_min_super").view());
            } else {  // quantized at load: from finite values only
                load_options strict = opt;
                strict.reject_non_finite = true;
                result = check_named(f, prefix, name, tensor_ref<const float>{nullptr, X::rank, X::size, X::shape.data()}, strict);
            }
        } else {
            result = check_named(f, prefix, name, ref_of(t), opt);
        }
        claim(name);
    });
    if (!result) return result;
    // Every entry under the prefix must be taken (a model's file may carry its tokenizer,
    // text/load.hpp: "tokenizer.*" is not the params').
    for (std::size_t i = 0; i < f.size(); ++i)
        if (f.under(f[i], prefix) && !(prefix.empty() && f.under(f[i], "tokenizer.")) && !(claimed[i / 32] >> (i % 32) & 1))
            return status::error(errc::unexpected_tensor, f[i].name);
    return {};
}
// After check_state accepted every tensor.
template <class P, std::size_t Cap> [[gnu::cold]] void write_state(P& params, const file<Cap>& f, std::string_view prefix) {
    for_each_tensor(params, [&](std::string_view name, auto& t) {
        using X = std::remove_cvref_t<decltype(t)>;
        if constexpr (is_quantized_weight_v<X>) {
            if (prequantized<X>(f, prefix, name)) {
                read_prequantized(t, f, prefix, name);
            } else {
                const entry& e = *f.find(prefix, name);
                t.quantize([&](std::size_t i) { return f.template element<double>(e, i); });
            }
        } else {
            write_named(f, prefix, name, ref_of(t));
        }
    });
}
}  // namespace safetensors::detail

template <class P, std::size_t Cap>
status load_state_dict(P& params, const safetensors::file<Cap>& f, std::string_view prefix = {},
                       const safetensors::load_options& opt = {}) {
    if (status st = safetensors::detail::check_config<P>(f, prefix, opt.require_config); !st) return st;
    if (status st = safetensors::detail::check_state(static_cast<const P&>(params), f, prefix, opt); !st) return st;
    safetensors::detail::write_state(params, f, prefix);
    return {};
}

// One object of a multi-object load.
template <class P> struct state_target {
    std::string_view prefix;
    P& object;
};
template <class P> state_target(std::string_view, P&) -> state_target<P>;

// Loads several objects from one file (a checkpoint: params and optimizer state), all or nothing:
// every object is checked as load_state_dict checks one before any is written.
template <std::size_t Cap, class... P>
status load_state_dicts(const safetensors::file<Cap>& f, const safetensors::load_options& opt,
                        const state_target<P>&... parts) {
    status st;
    ((st = st ? safetensors::detail::check_state(static_cast<const P&>(parts.object), f, parts.prefix, opt) : st), ...);
    if (!st) return st;
    (safetensors::detail::write_state(parts.object, f, parts.prefix), ...);
    return {};
}

// Parses bytes with an index on the stack (safetensors::file<128>: 13,352 bytes on 64-bit
// targets, checked by tests/test_safetensors.cpp) and loads params.
template <class P>
status load_state_dict(P& params, std::span<const std::byte> bytes, std::string_view prefix = {},
                       const safetensors::load_options& opt = {}) {
    safetensors::file<128> f;
    if (status st = f.parse(bytes); !st) return st;
    return load_state_dict(params, f, prefix, opt);
}

// Reads one tensor (an input, a mask) by full name into a statically shaped tensor; checked like
// a parameter (out holds its old values after an error).
template <class X, std::size_t Cap>
[[gnu::cold]] status read_tensor(const safetensors::file<Cap>& f, std::string_view name, X& out,
                   const safetensors::load_options& opt = {}) {
    const safetensors::entry* e = f.find(name);
    if (status st = safetensors::check_entry<X>(f, e, name, opt); !st) return st;
    for (std::size_t i = 0; i < X::size; ++i) out.set(i, f.template element<typename X::value_type>(*e, i));
    return {};
}

// ---- Writer ----
struct save_result {
    status st;
    std::size_t bytes = 0;  // bytes written (or needed, when the buffer was too small)
};

// One object of a multi-object file: its tensors are written under prefix.
template <class P> struct named_state {
    std::string_view prefix;
    const P& object;
};
template <class P> named_state(std::string_view, const P&) -> named_state<P>;

// Writes objects (params, gradients, optimizer state: anything for_each_tensor walks) as one
// safetensors file, each tensor named prefix + its dotted name, values in their dtype and
// PyTorch's layouts (quantized weights as stored, with their scales: io/quantized.hpp). With an
// empty out buffer it only computes the size needed.
template <class... P> save_result save_state_dicts(std::span<std::byte> out, const named_state<P>&... parts) {
    struct sink {
        std::span<std::byte> out;
        std::size_t n = 0;
        void put(const void* p, std::size_t len) {
            if (len && n + len <= out.size()) std::memcpy(out.data() + n, p, len);
            n += len;
        }
        void str(std::string_view s) { put(s.data(), s.size()); }
        void num(std::uint64_t v) {
            char buf[24];
            int k = 0;
            do buf[k++] = static_cast<char>('0' + v % 10); while ((v /= 10) != 0);
            while (k) put(&buf[--k], 1);
        }
    };
    // Header into out[8..], measured first so the data section can follow it.
    auto write_header = [&](sink& s) {
        std::uint64_t off = 0;
        bool first = true;
        s.str("{");
        auto one = [&](std::string_view prefix, std::string_view name, std::string_view suffix, safetensors::dtype type,
                       std::size_t rank, const std::size_t* shape, std::size_t bytes) {
            if (!first) s.str(",");
            first = false;
            s.str("\"");
            s.str(prefix);
            s.str(name);
            s.str(suffix);
            s.str("\":{\"dtype\":\"");
            s.str(safetensors::dtype_names[static_cast<std::size_t>(type)]);
            s.str("\",\"shape\":[");
            for (std::size_t i = 0; i < rank; ++i) {
                if (i) s.str(",");
                s.num(shape[i]);
            }
            s.str("],\"data_offsets\":[");
            s.num(off);
            s.str(",");
            off += bytes;
            s.num(off);
            s.str("]}");
        };
        auto entry = [&](std::string_view prefix, std::string_view name, const auto& t) {
            using X = std::remove_cvref_t<decltype(t)>;
            if constexpr (is_quantized_weight_v<X>) {  // as stored (io/quantized.hpp)
                safetensors::detail::emit_quantized(t, [&](std::string_view suffix, safetensors::dtype type, std::size_t rank,
                                                           const std::size_t* shape, std::size_t bytes, auto&&) {
                    one(prefix, name, suffix, type, rank, shape, bytes);
                });
            } else {
                using T = typename X::value_type;
                one(prefix, name, {}, safetensors::dtype_of<T>, X::rank, X::shape.data(), X::size * sizeof(T));
            }
        };
        (for_each_tensor(parts.object, [&](std::string_view name, const auto& t) { entry(parts.prefix, name, t); }), ...);
        s.str("}");
        while (s.n % 8) s.str(" ");
        return off;
    };
    sink measure{{}, 0};
    const std::uint64_t data_bytes = write_header(measure);
    const std::size_t header = measure.n, total = 8 + header + data_bytes;
    if (out.size() < total) return {status::error(errc::buffer_too_small), total};
    std::uint64_t hn = header;
    for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::byte>((hn >> (8 * i)) & 0xff);
    sink hs{out.subspan(8, header), 0};
    write_header(hs);
    sink ds{out.subspan(8 + header), 0};
    auto data = [&](std::string_view, const auto& t) {
        if constexpr (is_quantized_weight_v<std::remove_cvref_t<decltype(t)>>) {
            safetensors::detail::emit_quantized(t, [&](std::string_view, safetensors::dtype, std::size_t, const std::size_t*,
                                                       std::size_t, auto&& writer) {
                writer([&](const void* p, std::size_t n) { ds.put(p, n); });
            });
        } else {
            for (std::size_t i = 0; i < t.size; ++i) {
                const auto v = t.get(i);
                ds.put(&v, sizeof v);
            }
        }
    };
    (for_each_tensor(parts.object, data), ...);
    return {{}, total};
}

// One object (params, grads) under an optional prefix.
template <class P>
save_result save_state_dict(const P& params, std::span<std::byte> out, std::string_view prefix = {}) {
    return save_state_dicts(out, named_state<P>{prefix, params});
}

}  // namespace ctformer
