// ctformer/checkpoint.hpp — a training run's state in one safetensors file: the params under
// "model." and the optimizer's state (moments or momentum buffers, step count) under "optimizer.".
// A run saved, then loaded into fresh objects, continues bit for bit.
#pragma once
#include <cstddef>
#include <span>

#include "safetensors.hpp"

namespace ctformer {

// Writes params and opt's state; with an empty out only the size needed is returned.
template <class P, class Opt> save_result save_checkpoint(std::span<std::byte> out, const P& params, const Opt& opt) {
    return save_state_dicts(out, named_state<P>{"model.", params}, named_state<Opt>{"optimizer.", opt});
}
// Loads both, all or nothing (any missing, extra, misshapen or non-finite tensor: an error, and
// neither object changes). Cap: the index capacity (a checkpoint holds 3x the params' tensors).
template <std::size_t Cap, class P, class Opt>
status load_checkpoint(const safetensors::file<Cap>& f, P& params, Opt& opt) {
    return load_state_dicts(f, safetensors::load_options{.reject_non_finite = true, .max_abs = 0},
                            state_target<P>{"model.", params}, state_target<Opt>{"optimizer.", opt});
}

}  // namespace ctformer
