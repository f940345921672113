// ctformer/text/generate.hpp — text in, text out: a prompt string through the tokenizer, the
// model's generate (the samplers of models/sampling.hpp), the new tokens streamed back as text.
// Stop strings are matched on the text across token boundaries and never passed on; the
// tokenizer's end-of-sequence token stops generation (unless the sampling names another stop).
//
//   static ct::TextWorkspace<Model, 4096> tws;     // prompt of up to 4096 bytes, its ids, generation
//   static Model::KVCache<1, 256> cache;
//   const std::string_view stops[] = {"\n\n"};
//   ct::generate_text(params, tws, cache, tok, "Once upon a time",
//                     {.max_new = 100, .sample = {.temperature = 0.8f, .repetition_penalty = 1.1f}, .stop = stops},
//                     [](std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); return true; });
#pragma once
#include <cstddef>
#include <span>
#include <string_view>

#include "../core/role_size.hpp"
#include "../core/status.hpp"
#include "../models/sampling.hpp"
#include "tokenizer.hpp"

namespace ctformer {

struct text_options {
    std::size_t max_new = 64;                    // new tokens at most
    sampling sample = {};                         // (stop -1: the tokenizer's eos)
    std::span<const std::string_view> stop = {};  // stop strings: each at most max_stop bytes, not empty
    bool add_bos = true;                          // the tokenizer's bos first (when it has one)
    static constexpr std::size_t max_stop = 64;
};

// Memory for generate_text: the prompt's encoding (MaxPromptBytes of normalized text), the ids,
// the model's generation workspace (prefill chunk C, penalty window W), the held text.
template <class Model, std::size_t MaxPromptBytes = 4096, std::size_t C = 16, std::size_t W = 64>
struct TextWorkspace : sized_role<TextWorkspace<Model, MaxPromptBytes, C, W>> {
    tokenizer::Workspace<MaxPromptBytes> encode;
    token ids[MaxPromptBytes + 2];
    typename Model::template GenerateWorkspace<C, W> generate;
    char held[text_options::max_stop + 8];  // text that may begin a stop string
};

namespace detail {
// The text after the prompt, with stop strings cut out: feeds bytes, passes on what can no longer
// begin a stop string, reports a completed one.
class stop_filter {
  public:
    constexpr stop_filter(std::span<const std::string_view> stops, char* held) : stops_(stops), held_(held) {}
    // false: a stop string completed (what preceded it was passed on)
    template <class F> constexpr bool feed(std::string_view s, F& emit) {
        for (const char c : s) {
            held_[n_++] = c;
            const std::string_view h(held_, n_);
            for (const std::string_view st : stops_)
                if (h.ends_with(st)) {
                    if (n_ > st.size()) ok_ = ok_ && emit(text::utf8::slice(h, 0, n_ - st.size()));
                    n_ = 0;
                    return false;
                }
            std::size_t keep = 0;  // the longest suffix of h that begins some stop string
            for (const std::string_view st : stops_)
                for (std::size_t k = std::min(st.size() - 1, n_); k > keep; --k)
                    if (st.starts_with(text::utf8::slice(h, n_ - k))) {
                        keep = k;
                        break;
                    }
            if (keep < n_) {
                ok_ = ok_ && emit(text::utf8::slice(h, 0, n_ - keep));
                for (std::size_t i = 0; i < keep; ++i) held_[i] = held_[n_ - keep + i];
                n_ = keep;
            }
        }
        return true;
    }
    template <class F> constexpr void finish(F& emit) {
        if (n_) ok_ = ok_ && emit(std::string_view(held_, n_));
        n_ = 0;
    }
    constexpr bool wanted() const { return ok_; }  // on_text has not asked to stop

  private:
    std::span<const std::string_view> stops_;
    char* held_;
    std::size_t n_ = 0;
    bool ok_ = true;
};
}  // namespace detail

// Continues the sequence in cache (reset() it for a new one) with prompt's tokens and passes the
// new text to on_text(std::string_view) -> bool (false stops) as it is decoded. Errors: those of
// encode (the prompt too long for the workspace), of Model::generate, errc::invalid_option for
// an empty or too long stop string; nothing is passed on before the first new token.
// (cache: a Model::KVCache<1, Cap>)
template <class Model, std::size_t N, std::size_t C, std::size_t W, class Cache, class F>
status generate_text(const typename Model::Params& p, TextWorkspace<Model, N, C, W>& ws, Cache& cache, const tokenizer& tok,
                     std::string_view prompt, const text_options& o, F&& on_text) {
    for (const std::string_view st : o.stop)
        if (st.empty() || st.size() > text_options::max_stop) return status::error(errc::invalid_option, "stop string");
    if (status s = check_tokenizer<Model>(tok); !s) return s;
    std::size_t n = 0;
    const encode_options eo{.add_bos = o.add_bos && tok.bos() >= 0};
    if (status s = tok.encode(prompt, std::span<token>(ws.ids, N + 2), n, ws.encode, eo); !s) return s;
    sampling s = o.sample;
    if (s.stop < 0) s.stop = tok.eos();
    text_decoder dec(tok, false);
    if (n > (eo.add_bos ? 1u : 0u)) dec.continue_text();  // (the new text follows the prompt's)
    detail::stop_filter filter(o.stop, ws.held);
    bool stopped = false;
    auto emit = [&](std::string_view t) { return on_text(t); };
    const status st = Model::generate(p, ws.generate, cache, ws.ids, n, o.max_new, s, [&](token t) {
        bool more = true;
        (void)dec.push(t, [&](std::string_view piece) { more = more && filter.feed(piece, emit); });
        stopped = stopped || !more;
        return more && filter.wanted();
    });
    if (!stopped) {
        dec.finish([&](std::string_view piece) { (void)filter.feed(piece, emit); });
        filter.finish(emit);
    }
    return st;
}

}  // namespace ctformer
