// ctformer/io/adapters.hpp — LoRA adapters as PEFT saves them (save_pretrained): the tensors in
// adapter_model.safetensors under base_model.model.<the model's names>.lora_A.weight / lora_B.weight,
// and adapter_config.json, whose r, lora_alpha and target_modules are the adapters' configuration:
// checked against the C++ type at load (errc::config_mismatch naming the field), written beside
// the tensors at save.
//
//   ct::load_adapters(adapters, file, config_json);      // all or nothing
//   ct::save_adapters(adapters, out);  ct::write_adapter_config<Model::Adapters>(json_out);
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "../core/status.hpp"
#include "../layer/names.hpp"
#include "../modules/lora.hpp"
#include "config.hpp"
#include "json.hpp"
#include "state_dict.hpp"

namespace ctformer {

// PEFT's prefix of every adapter tensor (a PeftModel wraps the model as base_model.model).
inline constexpr std::string_view peft_prefix = "base_model.model.";

namespace detail {
// The last dotted part of a name (PEFT matches a target against a module name's tail).
constexpr std::string_view last_part(std::string_view s) {
    const std::size_t dot = s.rfind('.');
    return dot == std::string_view::npos ? s : std::string_view(s.data() + dot + 1, s.size() - dot - 1);
}
// The family's name of projection bit k (lora_q .. lora_down, lora_mha, lora_cross) under A's naming table.
template <class A> constexpr std::string_view lora_target_name(unsigned k) {
    using N = typename A::names;
    constexpr std::string_view attn[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    constexpr std::string_view gated[] = {"gate_proj", "up_proj", "down_proj"}, plain[] = {"", "linear1", "linear2"};
    if (k == 7) return last_part(N::template rename<role::layer>("self_attn"));  // (lora_mha: the module, as PEFT targets it)
    if (k == 8) return last_part(N::template rename<role::layer>("multihead_attn"));  // (lora_cross)
    if (k < 4) return N::template rename<role::attention>(attn[k]);
    return N::template rename<role::ffn>(A::lora_gated ? gated[k - 4] : plain[k - 4]);
}

// adapter_config.json's fields that matter here: r, lora_alpha, target_modules (a list of module
// names or "all-linear"), peft_type; the fields that change the arithmetic away from plain LoRA
// over every layer (use_dora, lora_bias, bias, fan_in_fan_out, rank_pattern, alpha_pattern,
// modules_to_save, layer_replication, layers_to_transform) must hold PEFT's defaults, use_rslora
// the type's scale; every other field is skipped.
struct adapter_config {
    std::uint64_t r = 0;
    double alpha = 0;
    unsigned targets = 0;
    bool has_r = false, has_alpha = false, has_targets = false;
    std::string_view unknown_target;  // a target the type's projections do not have (empty: none)
    std::string_view unsupported_key, unsupported_value;  // the first non-default such field (empty: none)
    bool rslora = false;  // use_rslora
};
// A JSON value's text, skipped (js.ok false if it is not one).
inline std::string_view json_raw(safetensors::detail::json& js);
// Whether a value's text is PEFT's default for a field that changes the arithmetic: false, null,
// {} or [] (whitespace aside), or "none" (bias).
constexpr bool json_default(std::string_view v, bool string_none) {
    char c[8] = {};
    std::size_t n = 0;
    for (char ch : v)
        if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') {
            if (n == sizeof c) return false;
            c[n++] = ch;
        }
    const std::string_view t(c, n);
    return t == "false" || t == "null" || t == "{}" || t == "[]" || (string_none && t == "\"none\"");
}

// A JSON number's text (sign, digits, fraction, exponent): its value, ok false if it is not one.
inline double json_number(safetensors::detail::json& js) {
    js.ws();
    const char* s = js.p;
    while (js.p < js.end && ((*js.p >= '0' && *js.p <= '9') || *js.p == '-' || *js.p == '+' || *js.p == '.' ||
                             *js.p == 'e' || *js.p == 'E'))
        ++js.p;
    double v = 0, frac = 0, scale = 1;
    bool digits = false, neg = false, in_frac = false;
    for (const char* q = s; q < js.p; ++q) {
        if (*q == '-' && q == s) neg = true;
        else if (*q == '.' && !in_frac) in_frac = true;
        else if (*q >= '0' && *q <= '9') {
            digits = true;
            if (in_frac) frac += (*q - '0') * (scale /= 10);
            else v = v * 10 + (*q - '0');
        } else {
            js.ok = false;  // (exponents: not written by PEFT for r or lora_alpha)
        }
    }
    if (!digits) js.ok = false;
    return neg ? -(v + frac) : v + frac;
}
// Skips one JSON value of any kind (no recursion: a depth count).
inline void json_skip(safetensors::detail::json& js);
inline std::string_view json_raw(safetensors::detail::json& js) {
    js.ws();
    const char* s = js.p;
    json_skip(js);
    return js.ok ? std::string_view(s, static_cast<std::size_t>(js.p - s)) : std::string_view{};
}
inline void json_skip(safetensors::detail::json& js) {
    std::size_t depth = 0;
    do {
        js.ws();
        if (js.p >= js.end) return void(js.ok = false);
        const char c = *js.p;
        if (c == '"') {
            (void)js.string();
        } else if (c == '{' || c == '[') {
            ++js.p, ++depth;
            continue;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return void(js.ok = false);
            ++js.p, --depth;
        } else if (c == ',' || c == ':') {
            if (depth == 0) return void(js.ok = false);
            ++js.p;
            continue;
        } else {
            const char* s = js.p;
            while (js.p < js.end && *js.p != ',' && *js.p != '}' && *js.p != ']' && *js.p != ' ' && *js.p != '\n' &&
                   *js.p != '\r' && *js.p != '\t')
                ++js.p;
            if (js.p == s) return void(js.ok = false);
        }
    } while (js.ok && depth > 0);
}

// Whether a layers_to_transform value (an index or a list of them) names each of n layers once.
inline bool every_layer(std::string_view v, std::size_t n) {
    std::uint64_t seen = 0, count = 0;  // (layers 0..63 tracked; more must be listed in order)
    std::size_t next = 0;
    bool in_order = true;
    for (std::size_t i = 0; i < v.size();) {
        if (v[i] < '0' || v[i] > '9') {
            if (v[i] != '[' && v[i] != ']' && v[i] != ',' && v[i] != ' ' && v[i] != '\n' && v[i] != '\r' && v[i] != '\t') return false;
            ++i;
            continue;
        }
        std::uint64_t k = 0;
        for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i)
            if ((k = k * 10 + static_cast<std::uint64_t>(v[i] - '0')) >= n) return false;
        if (k < 64) {
            if ((seen >> k) & 1u) return false;
            seen |= std::uint64_t(1) << k;
        }
        in_order = in_order && k == next++;
        ++count;
    }
    return count == n && (n <= 64 || in_order);
}

template <class A> status parse_adapter_config(std::string_view text, adapter_config& c) {
    safetensors::detail::json js{text.data(), text.data() + text.size()};
    const auto bad = [](std::string_view what) { return status::error(errc::malformed_header, "adapter_config.json: ", what); };
    if (!js.expect('{')) return bad("not a JSON object");
    if (js.eat('}')) return {};
    do {
        const std::string_view key = js.string();
        if (!js.ok || !js.expect(':')) return bad("a key");
        if (key == "r") {
            const double v = json_number(js);
            if (!js.ok || !(v >= 0 && v < 0x1p53) || v != static_cast<double>(static_cast<std::uint64_t>(v))) return bad("r is not an integer");
            c.r = static_cast<std::uint64_t>(v), c.has_r = true;
        } else if (key == "lora_alpha") {
            c.alpha = json_number(js), c.has_alpha = true;
            if (!js.ok) return bad("lora_alpha is not a number");
        } else if (key == "target_modules") {
            c.has_targets = true;
            js.ws();
            if (js.p < js.end && *js.p == '"') {  // a string: "all-linear" (a regular expression is not supported)
                const std::string_view v = js.string();
                if (v != "all-linear") return status::error(errc::config_mismatch, "target_modules: \"", v, "\" (a list or all-linear)");
                c.targets = lora_all & (A::lora_gated ? ~0u : ~unsigned{lora_gate});
            } else {
                if (!js.expect('[')) return bad("target_modules");
                if (!js.eat(']')) do {
                        const std::string_view t = last_part(js.string());
                        if (!js.ok) return bad("target_modules");
                        bool known = false;
                        for (unsigned k = 0; k < lora_target_count; ++k)
                            if (!lora_target_name<A>(k).empty() && lora_target_name<A>(k) == t) c.targets |= 1u << k, known = true;
                        if (!known && c.unknown_target.empty()) c.unknown_target = t;
                    } while (js.eat(','));
                if (!js.expect(']')) return bad("target_modules");
            }
        } else if (key == "peft_type") {
            const std::string_view v = js.string();
            if (js.ok && v != "LORA") return status::error(errc::config_mismatch, "peft_type: ", v, " (LORA)");
        } else if (key == "use_rslora") {
            const std::string_view v = json_raw(js);
            if (js.ok && !json_default(v, false)) {
                if (v == "true") c.rslora = true;
                else if (c.unsupported_key.empty()) c.unsupported_key = key, c.unsupported_value = v;
            } else {
                c.rslora = false;
            }
        } else if (key == "use_dora" || key == "lora_bias" || key == "bias" || key == "fan_in_fan_out" ||
                   key == "rank_pattern" || key == "alpha_pattern" || key == "modules_to_save" || key == "layer_replication") {
            const std::string_view v = json_raw(js);
            if (js.ok && !json_default(v, key == "bias") && c.unsupported_key.empty()) c.unsupported_key = key, c.unsupported_value = v;
        } else if (key == "layers_to_transform") {  // null, or every layer's index
            const std::string_view v = json_raw(js);
            if (js.ok && !json_default(v, false) && !every_layer(v, A::lora_layers) && c.unsupported_key.empty())
                c.unsupported_key = key, c.unsupported_value = v;
        } else {
            json_skip(js);
        }
        if (!js.ok) return bad(key);
    } while (js.eat(','));
    if (!js.expect('}')) return bad("an unterminated object");
    js.ws();
    if (js.p != js.end) return bad("text after the object");
    return {};
}
}  // namespace detail

// adapter_config.json's r, lora_alpha and target_modules against A (a layer's, stack's or model's
// Adapters): errc::config_mismatch naming the field and both values; a missing field is an error
// too (PEFT always writes them).
template <class A> status check_adapter_config(std::string_view json_text) {
    detail::adapter_config c;
    if (status st = detail::parse_adapter_config<A>(json_text, c); !st) return st;
    safetensors::detail::text t;
    if (!c.has_r || !c.has_alpha || !c.has_targets)
        return status::error(errc::config_mismatch, "adapter_config.json lacks ", !c.has_r ? "r" : !c.has_alpha ? "lora_alpha" : "target_modules");
    if (c.r != A::lora_rank) {
        t << "r: file " << static_cast<std::size_t>(c.r) << ", type " << A::lora_rank;
        return status::error(errc::config_mismatch, t.view());
    }
    if (c.alpha != static_cast<double>(A::lora_alpha)) {
        const bool whole = c.alpha >= 0 && c.alpha < 0x1p53 && c.alpha == static_cast<double>(static_cast<std::uint64_t>(c.alpha));
        t << "lora_alpha: file ";
        if (whole) t << static_cast<std::size_t>(c.alpha);
        else t << "not a whole number";
        t << ", type " << static_cast<std::size_t>(A::lora_alpha);
        return status::error(errc::config_mismatch, t.view());
    }
    if (!c.unsupported_key.empty()) {
        t << c.unsupported_key << ": " << c.unsupported_value.substr(0, 40);
        t << (c.unsupported_key == "layers_to_transform" ? " (the type adapts every layer)"
              : c.unsupported_key == "use_dora"            ? " (DoRA is not LoRA)"
                                                           : " (ctformer's adapters: plain LoRA, one rank and alpha)");
        return status::error(errc::config_mismatch, t.view());
    }
    if (c.rslora != (A::lora_scale == rslora))
        return status::error(errc::config_mismatch, c.rslora ? "use_rslora: file true, type false (ct::rslora scales by lora_alpha / sqrt(r))"
                                                             : "use_rslora: file false, type true (ct::rslora)");
    if (!c.unknown_target.empty()) return status::error(errc::config_mismatch, "target_modules: ", c.unknown_target, " (the type has no such projection)");
    for (unsigned k = 0; k < lora_target_count; ++k)
        if (((c.targets ^ A::lora_targets) >> k) & 1u)
            return status::error(errc::config_mismatch, "target_modules: ", detail::lora_target_name<A>(k),
                                 (c.targets >> k) & 1u ? " in the file, not the type" : " in the type, not the file");
    return {};
}

// Loads adapters from an adapter_model.safetensors (tensors under prefix, PEFT's by default),
// first checking adapter_config.json's text when given: all or nothing, as load_state_dict.
template <class A, std::size_t Cap>
status load_adapters(A& adapters, const safetensors::file<Cap>& f, std::string_view config_json = {},
                     std::string_view prefix = peft_prefix, const safetensors::load_options& opt = {}) {
    if (!config_json.empty())
        if (status st = check_adapter_config<A>(config_json); !st) return st;
    return load_state_dict(adapters, f, prefix, opt);
}

// Writes adapters as adapter_model.safetensors (PEFT's names); an empty out measures.
template <class A> save_result save_adapters(const A& adapters, std::span<std::byte> out, std::string_view prefix = peft_prefix) {
    return save_state_dict(adapters, out, prefix);
}

// adapter_config.json for A into out (PEFT's fields: peft_type, r, lora_alpha, target_modules,
// lora_dropout, bias, task_type); returns the characters needed (written when they fit).
template <class A> std::size_t write_adapter_config(std::span<char> out, float lora_dropout = 0.0f) {
    std::size_t n = 0;
    const auto put = [&](std::string_view s) {
        for (char c : s) {
            if (n < out.size()) out[n] = c;
            ++n;
        }
    };
    const auto num = [&](std::size_t v) {
        char d[20];
        std::size_t k = 0;
        do d[k++] = static_cast<char>('0' + v % 10); while ((v /= 10) != 0);
        while (k) put(std::string_view(&d[--k], 1));
    };
    put("{\"peft_type\": \"LORA\", \"task_type\": \"CAUSAL_LM\", \"r\": ");
    num(A::lora_rank);
    put(", \"lora_alpha\": ");
    num(static_cast<std::size_t>(A::lora_alpha));
    put(A::lora_scale == rslora ? ", \"use_rslora\": true" : ", \"use_rslora\": false");
    put(", \"bias\": \"none\", \"lora_dropout\": ");
    const std::size_t thousandths = static_cast<std::size_t>(lora_dropout * 1000.0f + 0.5f);
    num(thousandths / 1000);
    put(".");
    const char digits[] = {static_cast<char>('0' + thousandths / 100 % 10), static_cast<char>('0' + thousandths / 10 % 10),
                           static_cast<char>('0' + thousandths % 10)};
    put(std::string_view(digits, 3));
    put(", \"target_modules\": [");
    bool first = true;
    for (unsigned k = 0; k < lora_target_count; ++k)
        if ((A::lora_targets >> k) & 1u) {
            put(first ? "\"" : ", \"");
            put(detail::lora_target_name<A>(k));
            put("\"");
            first = false;
        }
    put("]}\n");
    return n;
}

}  // namespace ctformer
