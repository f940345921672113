// ctformer/modules/embedding.hpp — token and position embeddings (torch.nn.Embedding, and the
// sinusoidal table of "Attention Is All You Need"): forward and backward side by side.
#pragma once
#include <boost/hana/define_struct.hpp>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "../core/reflect.hpp"
#include "../core/quant.hpp"
#include "../core/tensor.hpp"

namespace ctformer {

// torch.nn.Embedding: weight (V, D). Packed: stored as a Linear weight in format Fmt (an embedding
// tied to the LM head, which reads it as one).
template <class T, std::size_t V, std::size_t D, bool Packed, class Fmt = dense> struct EmbeddingParams {
    using weight_t = std::conditional_t<Packed, weight_storage_t<Fmt, T, V, D>, Tensor<T, V, D>>;
    BOOST_HANA_DEFINE_STRUCT(EmbeddingParams, (weight_t, weight));
};

}  // namespace ctformer

namespace ctformer::modules {

struct embedding {
    // y[d] (+)= W[id, d] for d < D. W: (V, D) in PyTorch's order, stored plainly (Tensor) or in panel
    // layout (PackedWeight: an embedding tied to the LM head); get(i) reads either.
    template <class W, class T> static void forward(const W& w, std::size_t id, T* y, bool accumulate) {
        constexpr std::size_t D = W::shape[1];
        for (std::size_t d = 0; d < D; ++d) y[d] = (accumulate ? y[d] : T(0)) + w.get(id * D + d);
    }
    // dW[id, d] += dy[d] for d in [d0, d1) (all D unless said).
    template <class W, class T>
    static void backward(W& g, std::size_t id, const T* dy, std::size_t d0 = 0, std::size_t d1 = W::shape[1]) {
        constexpr std::size_t D = W::shape[1];
        for (std::size_t d = d0; d < d1; ++d) {
            if constexpr (requires { W::storage_index(0); }) g.storage[W::storage_index(id * D + d)] += dy[d];
            else g.storage[id * D + d] += dy[d];
        }
    }
    // y[d] += PE(pos, d): sin(pos / 10000^(2i/D)) at d = 2i, cos at d = 2i + 1 (no parameters,
    // no backward). Computed in double, rounded once.
    template <std::size_t D, class T> static void sinusoidal_add(std::size_t pos, T* y) {
        for (std::size_t d = 0; d < D; ++d) {
            const double freq = std::pow(10000.0, -static_cast<double>(d - d % 2) / static_cast<double>(D));
            const double a = static_cast<double>(pos) * freq;
            y[d] += static_cast<T>(d % 2 ? std::cos(a) : std::sin(a));
        }
    }
};

}  // namespace ctformer::modules
