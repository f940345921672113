// ctformer/layer/checks.hpp — what a layer's entry points check before they write anything: the
// shapes, dtypes, masks and workspaces at compile time (static_assert with a readable message),
// the masks' values, non-finite inputs (check_finite<true>) and the output's aliasing at run time
// (error values). The layer (layer.hpp) and the stacks call them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../core/dropout.hpp"
#include "../core/status.hpp"
#include "../core/tensor.hpp"
#include "../kernels/elementwise.hpp"
#include "roles.hpp"

namespace ctformer {

// The memory argument of a decoder-only block (and of a stack of them): there is none.
struct no_memory {};

namespace detail {
template <class Cfg> struct layer_checks {
    using T = typename Cfg::value_type;
    static constexpr std::size_t D = Cfg::d_model, H = Cfg::heads;

    // The runtime checks of a call, before anything is written: each mask's values against its
    // key count, then (check_finite<true>) the inputs X: (B, rows, D) and Mem (void: none).
    // Public for the stacks, which check once before their first layer writes anything.
    template <class X, class Mem, class SM, class CM>
    static constexpr status check_inputs(const SM& sm, std::size_t self_keys, const CM& cm, std::size_t cross_keys, const T* x,
                               const char* x_name, const T* mem) {
        if (!sm.valid(self_keys)) return status::error(errc::out_of_range, "self-attention mask");
        if (!cm.valid(cross_keys)) return status::error(errc::out_of_range, "cross-attention mask");
        if constexpr (Cfg::check_finite) {
            if (x && !kernels::all_finite(x, 1, X::size, X::size)) return status::error(errc::non_finite, x_name);
            if constexpr (!std::is_void_v<Mem>)
                if (!kernels::all_finite(mem, 1, Mem::size, Mem::size)) return status::error(errc::non_finite, "memory");
        }
        (void)x, (void)x_name, (void)mem;
        return {};
    }
    // An output may be its input exactly (every stage reads a row before writing it), but may not
    // overlap the memory (read after the self-attention has written the output) or part of x.
    // Not checked during constant evaluation (addresses of distinct objects are not ordered there).
    static constexpr status check_aliasing(const T* out, std::size_t n_out, const T* x, std::size_t n_x,
                                           const char* x_name, const T* mem, std::size_t n_mem) {
        if (std::is_constant_evaluated()) return {};
        auto overlaps = [out, n_out](const T* a, std::size_t n) {
            const auto o = reinterpret_cast<std::uintptr_t>(out), b = reinterpret_cast<std::uintptr_t>(a);
            return a && n && n_out && o < b + n * sizeof(T) && b < o + n_out * sizeof(T);
        };
        if (overlaps(mem, n_mem)) return status::error(errc::aliased_output, "memory");
        if (out != x && overlaps(x, n_x)) return status::error(errc::aliased_output, x_name);
        return {};
    }

    // A decoder-only block's no_memory stands for a memory of tgt's shape in the shape checks.
    template <class Mem, class Tgt> using memory_t = std::conditional_t<std::is_same_v<Mem, no_memory>, Tgt, Mem>;
    template <class Mem> static constexpr auto data_of(Mem& m) {
        if constexpr (std::is_same_v<std::remove_const_t<Mem>, no_memory>)
            return static_cast<std::conditional_t<std::is_const_v<Mem>, const T*, T*>>(nullptr);
        else return m.data();
    }
    // Everything a forward checks before it writes: the training options, the masks' values, the
    // inputs (check_finite<true>), the output's aliasing.
    template <class SM, class CM, class Tgt, class Mem, class Out>
    static constexpr status check_call(const SM& sm, const CM& cm, const Tgt& tgt, const Mem& mem, const Out& out,
                                       const dropout_config* dc = nullptr) {
        if (dc)
            if (status st = dc->validate(); !st) return st;
        constexpr bool has_mem = !std::is_same_v<Mem, no_memory>;
        using M = std::conditional_t<has_mem, Mem, void>;
        const T* m = data_of(mem);
        if (status st = check_inputs<Tgt, M>(sm, Tgt::shape[1], cm, memory_t<Mem, Tgt>::shape[1] * has_mem, tgt.data(),
                                             "tgt", m);
            !st)
            return st;
        return check_aliasing(out.data(), Out::size, tgt.data(), Tgt::size, "tgt", m, has_mem ? memory_t<Mem, Tgt>::size : 0);
    }
    template <class Tgt, class Mem, class Out, class WS, class SM, class CM> static constexpr void check_shapes() {
        static_assert(tensor_like<Tgt> && tensor_like<Mem> && tensor_like<Out>,
                      "ctformer: tgt, memory and out must be ct::Tensor / ct::TensorView (or have value_type, shape, "
                      "data())");
        static_assert(std::is_same_v<typename Tgt::value_type, T> && std::is_same_v<typename Mem::value_type, T> &&
                          std::is_same_v<typename Out::value_type, T>,
                      "ctformer: mixed dtypes: tgt, memory and out must have the layer's dtype");
        static_assert(Tgt::rank == 3 && Mem::rank == 3 && Out::rank == 3,
                      "ctformer: tgt, memory and out are (batch, len, d_model) tensors");
        static_assert(Tgt::shape[2] == D, "ctformer: d_model mismatch: tgt's last dimension is not the layer's d_model");
        static_assert(Mem::shape[2] == D,
                      "ctformer: d_model mismatch: memory's last dimension is not the layer's d_model");
        static_assert(Tgt::shape[0] == Mem::shape[0], "ctformer: batch mismatch: tgt and memory batch sizes differ");
        static_assert(Out::shape == Tgt::shape, "ctformer: out must have tgt's shape (batch, tgt_len, d_model)");
        constexpr std::size_t B = Tgt::shape[0], Tq = Tgt::shape[1], S = Mem::shape[1];
        static_assert(std::is_base_of_v<ctformer::Workspace<Cfg, B, Tq, S>, WS>,
                      "ctformer: workspace shape differs from the call: use Layer::Workspace<batch, tgt_len, src_len>");
        static_assert(SM::template fits<T, B, H, Tq, Tq>,
                      "ctformer: self-attention mask does not fit (batch, heads, tgt_len, tgt_len) or dtype");
        static_assert(CM::template fits<T, B, H, Tq, S>,
                      "ctformer: cross-attention mask does not fit (batch, heads, tgt_len, src_len) or dtype");
        static_assert(!Cfg::rope || Tq <= Cfg::max_positions,
                      "ctformer: tgt_len exceeds the RoPE table's max_positions");
    }

    template <class Acts, std::size_t B, std::size_t Tq, std::size_t S> static constexpr void check_acts() {
        static_assert(std::is_same_v<Acts, ctformer::Activations<Cfg, B, Tq, S>>,
                      "ctformer: activations shape differs from the call: use Layer::Activations<batch, tgt_len, src_len>");
    }
    // Adapters: training LoRA adapters (the base frozen, in any format).
    template <bool Adapters = false> static constexpr void check_trainable() {
        static_assert(!Cfg::quantized || Adapters,
                      "ctformer: training needs dense weights: quantized params (ct::weights<...>) are for inference (train "
                      "with dense weights, then load the checkpoint into the quantized type), or train LoRA adapters over "
                      "them (ct::lora, ct::with_adapters)");
    }
    template <class Acts, class WS, class DOut, bool Adapters = false> static constexpr void check_backward() {
        check_trainable<Adapters>();
        constexpr std::size_t B = Acts::batch, Tq = Acts::tgt_len, S = Acts::src_len;
        check_acts<Acts, B, Tq, S>();
        static_assert(std::is_base_of_v<ctformer::TrainWorkspace<Cfg, B, Tq, S>, WS>,
                      "ctformer: backward needs Layer::TrainWorkspace<batch, tgt_len, src_len> (the forward's "
                      "Workspace plus backward's scratch)");
        static_assert(DOut::shape[0] == B && DOut::shape[1] == Tq, "ctformer: d_out must have the forward output's shape");
    }
};
}  // namespace detail

}  // namespace ctformer
