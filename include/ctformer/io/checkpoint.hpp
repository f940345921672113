// ctformer/io/checkpoint.hpp — a training run's state in one safetensors file: the params under
// "model." and the optimizer's state (moments or momentum buffers, step count) under "optimizer.".
// A run saved, then loaded into fresh objects, continues bit for bit.
#pragma once
#include <cstddef>
#include <span>

#include "../train/optim.hpp"
#include "state_dict.hpp"

namespace ctformer {

// Writes params and opt's state; with an empty out only the size needed is returned.
template <class P, class Opt> save_result save_checkpoint(std::span<std::byte> out, const P& params, const Opt& opt) {
    return save_state_dicts(out, named_state<P>{"model.", params}, named_state<Opt>{"optimizer.", opt});
}
// Loads both, all or nothing (any missing, extra, misshapen or non-finite tensor: an error, and
// neither object changes). The optimizer's step counter must be a non-negative integer within
// range and AdamW's second moments non-negative (their square root is taken), else
// errc::value_out_of_range naming the tensor, nothing written. Cap: the index capacity (a
// checkpoint holds 3x the params' tensors).
template <std::size_t Cap, class P, class Opt>
status load_checkpoint(const safetensors::file<Cap>& f, P& params, Opt& opt) {
    const safetensors::load_options options{.reject_non_finite = true, .max_abs = 0};
    // (a step counter or moment the loader would refuse anyway, it reports below as usual)
    if (Tensor<double, 1> t; read_tensor(f, "optimizer.step_count", t, options).ok() && !detail::valid_step_count(t.storage[0]))
        return status::error(errc::value_out_of_range, "optimizer.step_count");
    if constexpr (requires { opt.exp_avg_sq; }) {
        status st;
        for_each_tensor(opt.exp_avg_sq, [&](std::string_view name, const auto&) {
            const safetensors::entry* e = st ? f.find("optimizer.exp_avg_sq.", name) : nullptr;
            using D = safetensors::dtype;  // (every float dtype the loader converts)
            if (!e || (e->type != D::F32 && e->type != D::F64 && e->type != D::F16 && e->type != D::BF16)) return;
            for (std::size_t i = 0; i < e->numel(); ++i)
                if (f.template element<double>(*e, i) < 0) {
                    st = status::error(errc::value_out_of_range, "optimizer.exp_avg_sq.", name);
                    return;
                }
        });
        if (!st) return st;
    }
    return load_state_dicts(f, options, state_target<P>{"model.", params}, state_target<Opt>{"optimizer.", opt});
}

}  // namespace ctformer
