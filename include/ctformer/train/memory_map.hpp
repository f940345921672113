// ctformer/train/memory_map.hpp — what training LoRA adapters needs, every byte known at compile
// time, and whether it fits a part (ct::fits, core/role_size.hpp): the frozen base params in flash
// (read in place), the adapters, their gradients, AdamW's state, the saved activations, the training
// workspace and the batch's tokens in RAM.
//
//   using Map = ct::adapter_training_memory<Model, 1, 16>;        // batch, tokens
//   static_assert(ct::fits<Map, ct::board<256_KiB, 1_MiB>>, "the fine-tune does not fit the part");
#pragma once
#include <cstddef>

#include "../core/role_size.hpp"
#include "../core/tensor.hpp"
#include "../models/sampling.hpp"  // (ct::token)
#include "optim.hpp"

namespace ctformer {

template <class Model, std::size_t B, std::size_t T> struct adapter_training_memory {
    // flash (or any read-only memory)
    static constexpr std::size_t params = sizeof(typename Model::Params);
    // RAM
    static constexpr std::size_t adapters = Model::Adapters::bytes, gradients = Model::Adapters::bytes;
    static constexpr std::size_t optimizer = sizeof(AdamW<typename Model::Adapters>);
    static constexpr std::size_t activations = Model::template Activations<B, T>::bytes;
    static constexpr std::size_t workspace = Model::template TrainWorkspace<B, T>::bytes;
    static constexpr std::size_t batch = 2 * sizeof(Tensor<token, B, T>);  // tokens and targets

    static constexpr std::size_t flash = params;
    static constexpr std::size_t ram = adapters + gradients + optimizer + activations + workspace + batch;
};

}  // namespace ctformer
