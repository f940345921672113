// ctformer/text/tokenizer.hpp — text to token ids and back, over tables read in place (tables.hpp;
// tools/export.py --tokenizer writes them). No heap: encode works in a Workspace whose size is a
// template argument; decode streams, holding at most three bytes of an unfinished character.
//
//   static ct::tokenizer tok;                          // from ct::load_tokenizer (load.hpp) or tables in flash
//   static ct::tokenizer::Workspace<4096> ws;          // scratch for a normalized text of up to 4096 bytes
//   std::array<ct::token, 1024> ids; std::size_t n;
//   ct::status s = tok.encode("Hello world", ids, n, ws, {.add_bos = true});
//   ct::text_decoder dec(tok);
//   for (std::size_t i = 0; i < n; ++i) dec.push(ids[i], [](std::string_view s) { fputs(...); });
//   dec.finish(print);
//
// The kinds (docs/text.md): SentencePiece BPE and unigram (its normalization, byte fallback, unknown
// runs fused into one <unk>), Hugging Face's merge-rank BPE over SentencePiece-style text (Llama-2's
// tokenizer.json), and GPT-2's byte-level BPE. Invalid UTF-8 in the input is defined: SentencePiece
// kinds see U+FFFD for each invalid byte (as SentencePiece does); byte-level BPE encodes the bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "../core/role_size.hpp"
#include "../core/status.hpp"
#include "../models/sampling.hpp"
#include "merge.hpp"
#include "normalizer.hpp"
#include "pretokenize.hpp"
#include "tables.hpp"
#include "unigram.hpp"
#include "utf8.hpp"

namespace ctformer {

struct encode_options {
    bool add_bos = false;  // the tables' bos id first (errc::invalid_option if it has none)
    bool add_eos = false;
};

class tokenizer {
  public:
    using kind_type = text::tokenizer_kind;

    // A tokenizer over tables that make() checked (text::tables::make).
    static constexpr status make(const text::raw_tables& r, const text::tokenizer_config& c, tokenizer& out) {
        return text::tables::make(r, c, out.t_);
    }
    constexpr const text::tables& tables() const { return t_; }
    constexpr std::size_t vocab() const { return t_.vocab(); }
    constexpr kind_type kind() const { return t_.config().kind; }
    constexpr token bos() const { return t_.config().bos; }
    constexpr token eos() const { return t_.config().eos; }
    constexpr token unk() const { return t_.config().unk; }
    constexpr std::string_view piece(token id) const { return t_.piece(static_cast<std::uint32_t>(id)); }

    // Scratch of encode for a text whose normalized form has up to MaxBytes bytes (SentencePiece:
    // each space is 3 bytes, "▁"; a character map may lengthen a character). Its bytes are
    // ~65·MaxBytes.
    template <std::size_t MaxBytes> struct Workspace : sized_role<Workspace<MaxBytes>> {
        static_assert(MaxBytes > 0 && MaxBytes < 0x7FFFFFFF, "ctformer: a tokenizer workspace of 1 .. 2^31 bytes");
        static constexpr std::size_t capacity = MaxBytes;
        char norm[MaxBytes];
        std::uint32_t ids[MaxBytes + 2];  // (+ bos, eos)
        struct merging {
            std::uint32_t len[MaxBytes];
            std::int32_t prev[MaxBytes];
            std::uint32_t id[MaxBytes];
            text::merge_candidate heap[3 * MaxBytes];
        };
        struct viterbi {
            float best[MaxBytes + 1];
            std::int32_t start[MaxBytes + 1];
            std::uint32_t id[MaxBytes + 1];
            std::uint32_t out[MaxBytes], out_start[MaxBytes];
        };
        union {  // (one kind runs at a time)
            merging bpe;
            viterbi uni;
        };
        Workspace() {}
    };

    // ids[0..count) = the tokens of text. Errors (nothing written to ids): errc::buffer_too_small
    // when the normalized text exceeds the workspace or the ids exceed ids.size(); errc::invalid_option
    // for add_bos/add_eos without such a token.
    template <std::size_t N>
    status encode(std::string_view text, std::span<token> ids, std::size_t& count, Workspace<N>& ws,
                  const encode_options& o = {}) const {
        count = 0;
        const text::tokenizer_config& c = t_.config();
        if ((o.add_bos && c.bos < 0) || (o.add_eos && c.eos < 0))
            return status::error(errc::invalid_option, o.add_bos && c.bos < 0 ? "add_bos: no bos token" : "add_eos: no eos token");
        sink out{ws.ids, N + 2, 0, false};
        if (o.add_bos) out.put(static_cast<std::uint32_t>(c.bos));
        status st = for_segments(text, [&](std::string_view seg, std::uint32_t literal) {
            if (literal != text::no_id) return out.put(literal) ? status{} : too_many();
            return encode_segment(seg, ws, out);
        });
        if (!st) return st;
        if (o.add_eos && !out.put(static_cast<std::uint32_t>(c.eos))) return too_many();
        if (out.n > ids.size()) return status::error(errc::buffer_too_small, "ids");
        for (std::size_t i = 0; i < out.n; ++i) ids[i] = static_cast<token>(ws.ids[i]);
        count = out.n;
        return {};
    }

  private:
    struct sink {
        std::uint32_t* p;
        std::size_t cap, n;
        bool prev_unk;  // SentencePiece fuses a run of unknown pieces into one
        constexpr bool put(std::uint32_t id) { return n < cap ? (p[n++] = id, true) : false; }
    };
    static status too_many() { return status::error(errc::buffer_too_small, "ids (workspace)"); }

    // f(segment, no_id) for the text between literal tokens and f({}, id) for each literal, where
    // the tables cut the text at them (Hugging Face's added tokens); else f(text, no_id).
    template <class F> constexpr status for_segments(std::string_view text, F&& f) const {
        if (!t_.config().split_literals || !t_.has_literals()) return text.empty() ? status{} : f(text, text::no_id);
        std::size_t from = 0;
        for (std::size_t p = 0; p < text.size();) {
            const auto m = t_.literal_at(text.data() + p, text.size() - p);
            if (!m.len) {
                ++p;
                continue;
            }
            if (p > from)
                if (status s = f(text::utf8::slice(text, from, p - from), text::no_id); !s) return s;
            if (status s = f({}, m.id); !s) return s;
            p += m.len;
            from = p;
        }
        return from < text.size() ? f(text::utf8::slice(text, from), text::no_id) : status{};
    }

    // An unknown piece s: its bytes' byte-fallback tokens, or <unk> (one for a run).
    constexpr bool put_unknown(sink& out, std::string_view s) const {
        const text::tokenizer_config& c = t_.config();
        if (c.byte_fallback) {
            for (const char ch : s) {
                const std::uint32_t b = t_.byte_id(static_cast<unsigned char>(ch));
                if (!out.put(b != text::no_id ? b : static_cast<std::uint32_t>(c.unk))) return false;
            }
            return true;
        }
        if (out.prev_unk) return true;
        out.prev_unk = true;
        return out.put(static_cast<std::uint32_t>(c.unk));
    }
    constexpr bool put_known(sink& out, std::uint32_t id) const {
        out.prev_unk = false;
        return out.put(id);
    }

    template <std::size_t N> status encode_segment(std::string_view seg, Workspace<N>& ws, sink& out) const {
        const text::tokenizer_config& c = t_.config();
        out.prev_unk = false;
        if (c.kind == kind_type::byte_level_bpe) {
            if (seg.size() > N) return status::error(errc::buffer_too_small, "text");
            for (std::size_t p = 0; p < seg.size();) {
                const std::size_t e = text::gpt2_word_end(seg.data(), seg.size(), p);
                if (!merge_run(seg.data() + p, e - p, ws, out, true)) return too_many();
                p = e;
            }
            return {};
        }
        std::size_t n = 0;
        if (status s = text::normalize(t_, seg, !c.split_literals, ws.norm, N, n); !s) return s;
        if (c.kind == kind_type::sentencepiece_unigram) {
            auto& u = ws.uni;
            const std::size_t k = text::unigram_segment(t_, ws.norm, n, {u.best, u.start, u.id}, u.out, u.out_start);
            for (std::size_t i = 0; i < k; ++i) {
                const std::size_t a = u.out_start[i], b = i + 1 < k ? u.out_start[i + 1] : n;
                if (!(u.out[i] == text::no_id ? put_unknown(out, {ws.norm + a, b - a}) : put_known(out, u.out[i])))
                    return too_many();
            }
            return {};
        }
        return merge_run(ws.norm, n, ws, out, c.kind == kind_type::bpe) ? status{} : too_many();
    }

    // Merges s[0..n) (ranked: the merge-rank rule over ids, else SentencePiece's over scores) and
    // puts its pieces.
    template <std::size_t N>
    constexpr bool merge_run(const char* s, std::size_t n, Workspace<N>& ws, sink& out, bool ranked) const {
        if (n == 0) return true;
        auto& w = ws.bpe;
        const text::tokenizer_config& c = t_.config();
        const bool bytes = c.kind == kind_type::byte_level_bpe;
        // Where no piece holds "▁" after other text (tables::splits_at_words), a symbol that starts
        // with "▁" after one that does not end with it begins a run no merge crosses: the runs merge
        // alone (small heaps, in cache) with the same result.
        const bool split = !bytes && t_.splits_at_words();
        std::size_t seg = 0;
        std::int32_t last = -1;  // (relative to seg)
        bool prev_space = true;
        auto flush = [&](std::size_t end) {
            text::merge_symbols(t_, s + seg, end - seg, {w.len + seg, w.prev + seg, w.id + seg, w.heap}, ranked);
            for (std::size_t p = seg; p < end;) {
                const std::uint32_t l = w.len[p] & ~text::detail::frozen;
                const std::uint32_t id = w.id[p] != text::no_id || ranked ? w.id[p] : t_.find(s + p, l);
                if (!(id == text::no_id ? put_unknown(out, {s + p, l}) : put_known(out, id))) return false;
                p += l;
            }
            seg = end, last = -1;
            return true;
        };
        auto symbol = [&](std::size_t p, std::uint32_t len, std::uint32_t id) {
            const bool frozen = len & text::detail::frozen;
            if (split && p > seg && !frozen && !prev_space &&
                std::string_view(s + p, n - p).starts_with(text::space_symbol) && !flush(p))
                return false;
            const std::size_t l = len & ~text::detail::frozen;
            w.len[p] = len, w.prev[p] = last, w.id[p] = id;
            last = static_cast<std::int32_t>(p - seg);
            prev_space = !frozen && l >= 3 && std::string_view(s + p + l - 3, 3) == text::space_symbol;
            return true;
        };
        for (std::size_t p = 0; p < n;) {
            if (bytes) {
                symbol(p, 1, t_.byte_id(static_cast<unsigned char>(s[p])));
                ++p;
            } else if (!ranked) {  // SentencePiece: characters, user-defined pieces frozen
                const auto m = t_.has_literals() ? t_.literal_at(s + p, n - p) : text::tables::literal_match{};
                const std::size_t l = m.len ? m.len : text::utf8::announced_length(s + p, n - p);
                if (!symbol(p, static_cast<std::uint32_t>(l) | (m.len ? text::detail::frozen : 0u), m.len ? m.id : text::no_id))
                    return false;
                p += l;
            } else {  // merge ranks: characters in the vocabulary, the others as bytes (or unknown)
                const std::size_t l = text::utf8::decode(s + p, n - p).len;
                const std::uint32_t id = t_.find(s + p, l);
                if (id != text::no_id || !c.byte_fallback) {
                    if (!symbol(p, static_cast<std::uint32_t>(l), id)) return false;
                } else {
                    for (std::size_t i = 0; i < l; ++i)
                        if (!symbol(p + i, 1, t_.byte_id(static_cast<unsigned char>(s[p + i])))) return false;
                }
                p += l;
            }
        }
        return flush(n);
    }

    text::tables t_{};
};

// The tokenizer's ids fit Model's vocabulary (a model may have more rows than the tokenizer ids).
template <class Model> constexpr status check_tokenizer(const tokenizer& t) {
    if (t.vocab() > Model::vocab) return status::error(errc::config_mismatch, "tokenizer vocabulary larger than the model's");
    return {};
}


// Streaming decode: each id's text as soon as it is whole. A token that ends inside a UTF-8
// character is held (at most 3 bytes) until the character completes; an invalid sequence becomes
// U+FFFD (per byte for SentencePiece kinds, per maximal subpart as a browser's TextDecoder for the
// others); SentencePiece's leading "▁" of the first piece is dropped. Control tokens (<s>, </s>,
// <|endoftext|>) decode as the reference decoders do: to nothing for SentencePiece kinds, to their
// text for the others (GPT-2's decoder, Hugging Face's without skip_special_tokens); show_control
// says otherwise.
class text_decoder {
  public:
    explicit constexpr text_decoder(const tokenizer& t)
        : t_(&t), show_control_(t.kind() == text::tokenizer_kind::bpe || t.kind() == text::tokenizer_kind::byte_level_bpe) {}
    constexpr text_decoder(const tokenizer& t, bool show_control) : t_(&t), show_control_(show_control) {}

    // emit(std::string_view) for the text id completes; errc::out_of_range for an id outside the
    // vocabulary (nothing emitted, the state unchanged).
    template <class F> constexpr status push(token id, F&& emit) {
        if (id < 0 || static_cast<std::size_t>(id) >= t_->vocab()) return status::error(errc::out_of_range, "token id");
        const text::tables& tb = t_->tables();
        const auto kind = tb.kind(static_cast<std::uint32_t>(id));
        std::string_view p = tb.piece(static_cast<std::uint32_t>(id));
        if (kind == text::piece_kind::byte && sp_text()) {  // "<0xAB>": one raw byte
            const char b = static_cast<char>(hex(p[3]) * 16 + hex(p[4]));
            feed(std::string_view(&b, 1), emit);
            return {};
        }
        if (per_byte()) flush(emit);  // (SentencePiece decodes each run of byte pieces alone)
        // SentencePiece drops the leading "▁" of the text's first piece (all of them while the text
        // is empty, with remove_extra_whitespaces)
        if (bos_ws_seen_ || started_) bos_ws_ = false;
        bos_ws_seen_ = false;
        if (kind == text::piece_kind::control) {
            if (show_control_) feed(p, emit);
            return {};
        }
        if (kind == text::piece_kind::unknown && t_->kind() != text::tokenizer_kind::bpe) {
            feed(tb.unk_surface().empty() ? p : tb.unk_surface(), emit);
            return {};
        }
        if (!sp_text()) {
            feed(p, emit);
            return {};
        }
        const text::tokenizer_config& c = tb.config();
        if (bos_ws_ && (c.add_dummy_prefix || c.remove_extra_whitespaces) &&
            p.starts_with(text::space_symbol)) {
            p.remove_prefix(text::space_symbol.size());
            bos_ws_seen_ = !c.remove_extra_whitespaces;
        }
        // "▁" -> " ", the rest as is
        while (!p.empty()) {
            const std::size_t k = c.escape_whitespaces ? p.find(text::space_symbol) : std::string_view::npos;
            feed(text::utf8::slice(p, 0, k), emit);
            if (k == std::string_view::npos) break;
            feed(" ", emit);
            p.remove_prefix(k + text::space_symbol.size());
        }
        return {};
    }
    // The ids continue a text (a prompt's): no leading "▁" is dropped.
    constexpr void continue_text() { started_ = true; }
    // The end of the text: a held, unfinished character becomes U+FFFD.
    template <class F> constexpr void finish(F&& emit) {
        flush(emit);
        started_ = bos_ws_seen_ = false;
        bos_ws_ = true;
    }

  private:
    constexpr bool sp_text() const { return t_->kind() != text::tokenizer_kind::byte_level_bpe; }
    constexpr bool per_byte() const {
        return t_->kind() == text::tokenizer_kind::sentencepiece_bpe || t_->kind() == text::tokenizer_kind::sentencepiece_unigram;
    }
    static constexpr int hex(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

    template <class F> constexpr void out(std::string_view s, F& emit) {
        if (s.empty()) return;
        started_ = true;
        emit(s);
    }
    // Bytes through the UTF-8 check: whole valid runs go out as they are; around a pending
    // (unfinished) character, byte by byte. A pending sequence that a byte breaks becomes U+FFFD
    // (one per byte for SentencePiece) and its bytes after the first (else the breaking byte) are
    // read again: queued ahead of the rest of s, never fed back recursively (the stack stays bounded).
    template <class F> constexpr void feed(std::string_view s, F& emit) {
        char again[8];  // (at most 3 bytes wait: pending and queued bytes never exceed 4)
        std::size_t n_again = 0, i = 0;
        while (n_again || i < s.size()) {
            if (held_ || n_again) {
                const char c = n_again ? again[0] : s[i++];
                if (n_again) {
                    for (std::size_t k = 1; k < n_again; ++k) again[k - 1] = again[k];
                    --n_again;
                }
                pending_[held_++] = c;
                if (text::utf8::valid_prefix(pending_, held_) == held_) {
                    if (held_ == text::utf8::needed(static_cast<unsigned char>(pending_[0]))) {
                        out(std::string_view(pending_, held_), emit);
                        held_ = 0;
                    }
                    continue;
                }
                const std::size_t first = held_ == 1 || per_byte() ? 1 : held_ - 1;  // read again from here
                for (std::size_t k = n_again; k-- > 0;) again[k + held_ - first] = again[k];
                for (std::size_t k = first; k < held_; ++k) again[k - first] = pending_[k];
                n_again += held_ - first;
                held_ = 0;
                out(text::utf8::replacement, emit);
                continue;
            }
            std::size_t j = i;  // the longest run of whole, valid characters from i
            while (j < s.size()) {
                const std::size_t v = text::utf8::valid_prefix(s.data() + j, s.size() - j);
                const std::size_t need = text::utf8::needed(static_cast<unsigned char>(s[j]));
                if (v == 0 || v < need) break;
                j += need;
            }
            out(text::utf8::slice(s, i, j - i), emit);
            i = j;
            if (i == s.size()) break;
            const std::size_t v = text::utf8::valid_prefix(s.data() + i, s.size() - i);
            if (v == 0) {  // a byte that starts nothing
                out(text::utf8::replacement, emit);
                ++i;
            } else if (i + v == s.size()) {  // an unfinished character at the end: hold it
                for (std::size_t k = 0; k < v; ++k) pending_[held_++] = s[i + k];
                i += v;
            } else {  // a truncated sequence: one U+FFFD (per byte for SentencePiece)
                for (std::size_t k = 0; k < (per_byte() ? v : 1); ++k) out(text::utf8::replacement, emit);
                i += v;
            }
        }
    }
    template <class F> constexpr void flush(F& emit) {
        if (!held_) return;
        const std::size_t n = per_byte() ? held_ : 1;
        held_ = 0;
        for (std::size_t k = 0; k < n; ++k) out(text::utf8::replacement, emit);
    }

    const tokenizer* t_;
    bool show_control_;
    char pending_[4] = {};
    std::size_t held_ = 0;
    bool started_ = false, bos_ws_seen_ = false, bos_ws_ = true;
};

}  // namespace ctformer
