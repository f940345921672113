// ctformer/core/dropout.hpp — reproducible dropout from a counter-based RNG (Philox-4x32-10).
//
// Each element's random number is a pure function of (seed, step, site, row, column), so a run is
// reproducible, independent of vector width, tiling or thread count, and the step API draws the
// same numbers for a row as the full forward does.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "schedule.hpp"
#include "status.hpp"

namespace ctformer {

// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> c, std::array<std::uint32_t, 2> k) {
    constexpr std::uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const std::uint64_t p0 = std::uint64_t{M0} * c[0], p1 = std::uint64_t{M1} * c[2];
        const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
        const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
        c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
        k[0] += W0;
        k[1] += W1;
    }
    return c;
}

// The six dropout sites of torch.nn.TransformerDecoderLayer (decoder-only blocks use four), then
// the LoRA adapters' input dropout: site lora_input + k for the projection of bit k (modules/lora.hpp).
enum class dropout_site : std::uint32_t { self_attn_weights, self_attn_out, cross_attn_weights, cross_attn_out,
                                          ffn_activation, ffn_out, lora_input };

// Probabilities as Paddle splits them: p for the residual branches, attn_p for attention weights,
// act_p after the FFN activation; a negative value means "same as p"; lora_p on the input of each
// LoRA adapter (PEFT's lora_dropout; default 0). seed and step select the random stream: use a new
// step per training iteration.
struct dropout_config {
    float p = 0.1f;
    float attn_p = -1.0f;
    float act_p = -1.0f;
    std::uint64_t seed = 0;
    std::uint32_t step = 0;
    float lora_p = 0.0f;

    // p in [0, 1]; attn_p and act_p in [0, 1] or negative ("same as p"); NaN never (PyTorch
    // raises for p outside [0, 1]). Every training entry point checks it before writing anything.
    constexpr status validate() const {
        if (!(p >= 0.0f && p <= 1.0f)) return status::error(errc::invalid_option, "dropout p");
        if (!(attn_p <= 1.0f)) return status::error(errc::invalid_option, "dropout attn_p");
        if (!(act_p <= 1.0f)) return status::error(errc::invalid_option, "dropout act_p");
        if (!(lora_p >= 0.0f && lora_p <= 1.0f)) return status::error(errc::invalid_option, "dropout lora_p");
        return {};
    }
};

// Training-mode dropout: x[j] = keep ? x[j] / (1 - p) : 0 with P(keep) = 1 - p.
class dropout_rng {
  public:
    explicit dropout_rng(const dropout_config& c)
        : key_{static_cast<std::uint32_t>(c.seed), static_cast<std::uint32_t>(c.seed >> 32)}, step_(c.step),
          p_{c.p, c.attn_p < 0 ? c.p : c.attn_p, c.act_p < 0 ? c.p : c.act_p, c.lora_p} {}

    static constexpr bool enabled = true;
    // Whether the site drops anything (p > 0); the layer fuses residual adds where it does not.
    bool drops(dropout_site s) const { return probability(s) > 0.0f; }

    float probability(dropout_site s) const {
        switch (s) {
            case dropout_site::self_attn_weights:
            case dropout_site::cross_attn_weights: return p_[1];
            case dropout_site::ffn_activation: return p_[2];
            default: return s >= dropout_site::lora_input ? p_[3] : p_[0];
        }
    }

    // x: (n), columns col0..col0+n of the row'th row of the site's tensor (row numbering is fixed
    // by the layer). Element (row, col) always draws the same number, however the row is split.
    template <class T>
    void apply(T* x, std::size_t n, dropout_site site, std::uint64_t row, std::size_t col0 = 0) const {
        const float p = probability(site);
        if (p <= 0.0f) return;
        if (p >= 1.0f) {
            for (std::size_t j = 0; j < n; ++j) x[j] = T(0);
            return;
        }
        // keep iff u >= p * 2^32, u uniform on [0, 2^32)
        const std::uint64_t threshold = static_cast<std::uint64_t>(static_cast<double>(p) * 4294967296.0);
        const T scale = T(1) / (T(1) - static_cast<T>(p));
        // one Philox call per 4 consecutive columns: (column / 4, row, row >> 32 ^ site << 24, step)
        std::size_t j = 0;
        while (j < n) {
            const std::size_t col = col0 + j, base = col - col % 4;
            const auto r = philox4x32({static_cast<std::uint32_t>(base / 4), static_cast<std::uint32_t>(row),
                                       static_cast<std::uint32_t>(row >> 32) ^ (static_cast<std::uint32_t>(site) << 24),
                                       step_},
                                      key_);
            for (std::size_t i = col - base; i < 4 && j < n; ++i, ++j) x[j] = r[i] >= threshold ? x[j] * scale : T(0);
        }
    }

  private:
    std::array<std::uint32_t, 2> key_;
    std::uint32_t step_;
    float p_[4];
};

// Eval mode: dropout is exactly the identity and costs nothing.
struct no_dropout {
    static constexpr bool enabled = false;
    static constexpr bool drops(dropout_site) { return false; }
    template <class T> constexpr void apply(T*, std::size_t, dropout_site, std::uint64_t, std::size_t = 0) const {}
};

// Dropout over rows of `width` values of a (B·Tq, width) tensor at row stride ld; x holds `rows`
// rows from row `first` on. Rows are numbered (batch row << 32 | position) so every caller
// (forward, step, backward; all rows at once or in parts) draws the same stream.
constexpr std::uint64_t dropout_row_id(std::size_t r, std::size_t Tq) { return (std::uint64_t{r / Tq} << 32) | (r % Tq); }
template <class Drop, class T>
constexpr void drop_rows(const Drop& drop, T* x, std::size_t rows, std::size_t width, std::size_t ld, std::size_t Tq,
                         dropout_site site, std::size_t first = 0) {
    if constexpr (Drop::enabled)
        schedule::for_each_row(rows, width, [&](std::size_t r) { drop.apply(x + r * ld, width, site, dropout_row_id(first + r, Tq)); });
}

}  // namespace ctformer
