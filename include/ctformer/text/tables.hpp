// ctformer/text/tables.hpp — a tokenizer's tables, read in place: the bytes a converter
// (tools/export.py --tokenizer) laid out, from a file or from constexpr arrays in flash.
//
// Every table is little-endian bytes (no alignment needed): the pieces' bytes in one blob with
// offsets, their kinds and scores, an open-addressing hash from bytes to id, the merges
// (left, right, result; the row is the rank) with a hash from (left, right) to the row, the
// byte-fallback ids, SentencePiece's precompiled character map, the literal (added) tokens.
// make() checks every table once, so encoding and decoding never read outside them.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "../core/status.hpp"

namespace ctformer::text {

enum class tokenizer_kind : std::uint8_t {
    sentencepiece_bpe,      // SentencePiece BPE: merges by the merged piece's score
    sentencepiece_unigram,  // SentencePiece unigram: Viterbi over the pieces' scores
    bpe,                    // merge-rank BPE over SentencePiece-style text (Hugging Face, Llama-2)
    byte_level_bpe,         // merge-rank BPE over bytes, GPT-2's pre-tokenization
};
// SentencePiece's piece types (ModelProto.SentencePiece.Type)
enum class piece_kind : std::uint8_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// Bytes a table is made of (a file's tensor, or a string literal in a generated header).
struct byte_span {
    const char* p = nullptr;
    std::size_t n = 0;
    constexpr byte_span() = default;
    constexpr byte_span(const char* data, std::size_t size) : p(data), n(size) {}
    template <std::size_t N> constexpr byte_span(const char (&lit)[N]) : p(lit), n(N - 1) {}  // (a literal's NUL)
    constexpr bool empty() const { return n == 0; }
    constexpr std::uint8_t u8(std::size_t i) const { return static_cast<std::uint8_t>(p[i]); }
    constexpr std::uint32_t u32(std::size_t i) const {
        if constexpr (std::endian::native == std::endian::little)
            if (!std::is_constant_evaluated()) {  // (one unaligned load)
                std::uint32_t v;
                std::memcpy(&v, p + 4 * i, 4);
                return v;
            }
        return std::uint32_t{u8(4 * i)} | std::uint32_t{u8(4 * i + 1)} << 8 | std::uint32_t{u8(4 * i + 2)} << 16 |
               std::uint32_t{u8(4 * i + 3)} << 24;
    }
    constexpr float f32(std::size_t i) const { return std::bit_cast<float>(u32(i)); }
    constexpr std::size_t words() const { return n / 4; }
};

struct raw_tables {
    byte_span bytes, offsets, kinds, index, byte_ids, scores, merges, merge_index, charsmap, literals, unk_surface;
    byte_span prefixes;  // (unigram, optional) a bit per hash of each proper prefix of a piece
};

// A metadata entry of tables in a generated header (tools/export.py --tokenizer --header).
struct metadata_pair {
    std::string_view key, value;
};

struct tokenizer_config {
    tokenizer_kind kind = tokenizer_kind::sentencepiece_bpe;
    std::int32_t bos = -1, eos = -1, unk = -1, pad = -1;
    bool add_dummy_prefix = false, remove_extra_whitespaces = false, escape_whitespaces = false;
    bool byte_fallback = false;
    bool split_literals = false;  // literal tokens cut the text before the model (Hugging Face's added tokens)
};

namespace detail {
constexpr std::uint32_t fnv1a(const char* s, std::size_t n) {
    std::uint32_t h = 0x811C9DC5u;
    for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<std::uint8_t>(s[i])) * 0x01000193u;
    return h;
}
constexpr std::uint32_t pair_hash(std::uint32_t l, std::uint32_t r) {
    std::uint32_t h = l * 0x9E3779B1u + r;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    return h ^ (h >> 12);
}
constexpr bool power_of_two(std::size_t n) { return n && !(n & (n - 1)); }
// A hash index: a power-of-two number of slots, each empty (0) or a valid entry, one empty at least.
template <class Valid> constexpr status check_index(const byte_span& ix, std::size_t entries, Valid valid) {
    if (ix.n % 4 || !detail::power_of_two(ix.words()) || ix.words() <= entries)
        return status::error(errc::malformed_tables, "tokenizer index");
    std::size_t empty = 0;
    for (std::size_t i = 0; i < ix.words(); ++i) {
        const std::uint32_t v = ix.u32(i);
        empty += v == 0;
        if (v != 0 && (v > entries || !valid(v))) return status::error(errc::malformed_tables, "tokenizer index");
    }
    // (an empty slot ends every probe)
    return empty ? status{} : status::error(errc::malformed_tables, "tokenizer index");
}
}  // namespace detail

inline constexpr std::uint32_t no_id = 0xFFFFFFFFu;

class tables {
  public:
    // The tables checked: sizes agree, every offset, id and row is in range, each hash has an empty
    // slot (lookups end), the character map's trie lies inside it and its strings are terminated.
    static constexpr status make(const raw_tables& r, const tokenizer_config& c, tables& out) {
        tables t;
        t.r_ = r;
        t.c_ = c;
        const std::size_t V = r.offsets.words() ? r.offsets.words() - 1 : 0;
        t.V_ = V;
        auto bad = [](const char* what) { return status::error(errc::malformed_tables, what); };
        if (V == 0 || r.offsets.n != 4 * (V + 1) || r.kinds.n != V || V > 0x7FFFFFFF) return bad("tokenizer.offsets");
        if (r.offsets.u32(0) != 0 || r.offsets.u32(V) != r.bytes.n) return bad("tokenizer.offsets");
        for (std::size_t i = 0; i < V; ++i) {
            if (r.offsets.u32(i + 1) <= r.offsets.u32(i)) return bad("tokenizer.offsets");  // (no empty piece)
            const std::uint8_t k = r.kinds.u8(i);
            if (k < 1 || k > 6) return bad("tokenizer.kinds");
        }
        const bool sp = c.kind == tokenizer_kind::sentencepiece_bpe || c.kind == tokenizer_kind::sentencepiece_unigram;
        if (sp ? r.scores.n != 4 * V : !r.scores.empty()) return bad("tokenizer.scores");
        for (std::size_t i = 0; i < r.scores.words(); ++i) {
            const float s = r.scores.f32(i);
            if (!(s == s) || s > 3.0e38f || s < -3.0e38f) return status::error(errc::non_finite, "tokenizer.scores");
        }
        for (const std::int32_t id : {c.bos, c.eos, c.unk, c.pad})
            if (id < -1 || id >= static_cast<std::int64_t>(V)) return status::error(errc::value_out_of_range, "tokenizer special id");
        if (c.unk >= 0 && t.kind(static_cast<std::uint32_t>(c.unk)) != piece_kind::unknown && sp)
            return bad("tokenizer.unk");
        if ((sp || (c.kind == tokenizer_kind::bpe && !c.byte_fallback)) && c.unk < 0) return bad("tokenizer.unk");
        if (status s = detail::check_index(r.index, V, [&](std::uint32_t v) {
                const piece_kind k = t.kind(v - 1);  // (v <= V: checked first)
                return k == piece_kind::normal || k == piece_kind::user_defined || k == piece_kind::unused;
            });
            !s)
            return s;
        if (r.byte_ids.n != 4 * 256) return bad("tokenizer.byte_ids");
        for (std::size_t b = 0; b < 256; ++b) {
            const std::uint32_t id = r.byte_ids.u32(b);
            if (id != no_id && id >= V) return bad("tokenizer.byte_ids");
            if (c.kind == tokenizer_kind::byte_level_bpe && id == no_id) return bad("tokenizer.byte_ids");
        }
        const bool ranked = c.kind == tokenizer_kind::bpe || c.kind == tokenizer_kind::byte_level_bpe;
        if (!ranked && !r.merges.empty()) return bad("tokenizer.merges");
        if (r.merges.n % 12) return bad("tokenizer.merges");
        t.M_ = r.merges.n / 12;
        for (std::size_t i = 0; i < 3 * t.M_; ++i)
            if (r.merges.u32(i) >= V) return bad("tokenizer.merges");
        if (t.M_ || !r.merge_index.empty())
            if (status s = detail::check_index(r.merge_index, t.M_, [&](std::uint32_t v) { return v <= t.M_; }); !s) return s;
        if (!r.charsmap.empty()) {
            const std::uint32_t trie = r.charsmap.u32(0);
            if (r.charsmap.n < 8 || trie % 4 || trie == 0 || trie >= r.charsmap.n - 4 || r.charsmap.u8(r.charsmap.n - 1) != 0)
                return bad("tokenizer.charsmap");
            t.trie_units_ = trie / 4;
            for (std::uint32_t c = 0; c < 128; ++c)  // (which ASCII bytes begin a rule: the others map to themselves)
                if (t.trie_child(t.trie_offset(t.trie_unit(0)) ^ c, c)) t.ascii_rules_[c >> 5] |= 1u << (c & 31);
        }
        if (!r.prefixes.empty() && !detail::power_of_two(r.prefixes.n)) return bad("tokenizer.prefixes");
        if (r.literals.n % 4) return bad("tokenizer.literals");
        for (std::size_t i = 0; i < r.literals.words(); ++i)
            if (r.literals.u32(i) >= V) return bad("tokenizer.literals");
        // SentencePiece's unigram: the unknown character's score and the user-defined bonus come from
        // the normal pieces' extreme scores (its initial values too: FLT_MAX, FLT_MIN)
        for (std::size_t i = 0; i < V; ++i) {
            const piece_kind k = t.kind(static_cast<std::uint32_t>(i));
            const std::size_t len = r.offsets.u32(i + 1) - r.offsets.u32(i);
            if ((k == piece_kind::normal || k == piece_kind::user_defined || k == piece_kind::unused) && len > t.max_piece_)
                t.max_piece_ = len;
        }
        t.min_score_ = 3.40282347e38f;
        t.max_score_ = 1.17549435e-38f;
        for (std::size_t i = 0; sp && i < V; ++i)
            if (t.kind(static_cast<std::uint32_t>(i)) == piece_kind::normal) {
                const float s = r.scores.f32(i);
                t.min_score_ = s < t.min_score_ ? s : t.min_score_;
                t.max_score_ = s > t.max_score_ ? s : t.max_score_;
            }
        out = t;
        return {};
    }

    constexpr std::size_t vocab() const { return V_; }
    constexpr const tokenizer_config& config() const { return c_; }
    constexpr std::string_view piece(std::uint32_t id) const {
        const std::uint32_t a = r_.offsets.u32(id), b = r_.offsets.u32(id + 1);
        return {r_.bytes.p + a, b - a};
    }
    constexpr piece_kind kind(std::uint32_t id) const { return static_cast<piece_kind>(r_.kinds.u8(id)); }
    constexpr float score(std::uint32_t id) const { return r_.scores.f32(id); }
    constexpr float min_score() const { return min_score_; }
    constexpr std::size_t max_piece() const { return max_piece_; }  // bytes of the longest matchable piece
    constexpr float max_score() const { return max_score_; }
    constexpr std::uint32_t byte_id(unsigned char b) const { return r_.byte_ids.u32(b); }
    // Whether some piece may be longer than the bytes whose hash is h (false: none is; no filter: true).
    constexpr bool may_extend(std::uint32_t h) const {
        if (r_.prefixes.empty()) return true;
        const std::uint32_t bit = h & static_cast<std::uint32_t>(8 * r_.prefixes.n - 1);
        return (r_.prefixes.u8(bit >> 3) >> (bit & 7)) & 1;
    }
    constexpr std::string_view unk_surface() const { return {r_.unk_surface.p, r_.unk_surface.n}; }

    // The id of the normal, user-defined or unused piece whose bytes are s[0..n), or no_id.
    constexpr std::uint32_t find(const char* s, std::size_t n) const {
        return find_hashed(detail::fnv1a(s, n), s, n);
    }
    constexpr std::uint32_t find_hashed(std::uint32_t h, const char* s, std::size_t n) const {
        const std::size_t mask = r_.index.words() - 1;
        for (std::size_t i = h & mask;; i = (i + 1) & mask) {
            const std::uint32_t v = r_.index.u32(i);
            if (v == 0) return no_id;
            const std::uint32_t a = r_.offsets.u32(v - 1), b = r_.offsets.u32(v);
            if (b - a == n && same(r_.bytes.p + a, s, n)) return v - 1;
        }
    }
    // The merge of (left, right): its row (the rank) and result, or row no_id.
    struct merge_rule {
        std::uint32_t rank, result;
    };
    constexpr merge_rule merge(std::uint32_t left, std::uint32_t right) const {
        if (M_ == 0) return {no_id, no_id};
        const std::size_t mask = r_.merge_index.words() - 1;
        for (std::size_t i = detail::pair_hash(left, right) & mask;; i = (i + 1) & mask) {
            const std::uint32_t v = r_.merge_index.u32(i);
            if (v == 0) return {no_id, no_id};
            if (r_.merges.u32(3 * (v - 1)) == left && r_.merges.u32(3 * (v - 1) + 1) == right)
                return {v - 1, r_.merges.u32(3 * (v - 1) + 2)};
        }
    }

    // The literal (added or user-defined) token longest at the start of s[0..n): its id and length.
    struct literal_match {
        std::uint32_t id = no_id;
        std::size_t len = 0;
    };
    constexpr literal_match literal_at(const char* s, std::size_t n) const {
        literal_match best;
        for (std::size_t i = 0; i < r_.literals.words(); ++i) {
            const std::uint32_t id = r_.literals.u32(i);
            const std::string_view p = piece(id);
            if (p.size() > best.len && p.size() <= n && p == std::string_view(s, p.size())) best = {id, p.size()};
        }
        return best;
    }
    constexpr bool has_literals() const { return !r_.literals.empty(); }

    // SentencePiece's character map: the longest rule matching a prefix of s[0..n) (its length
    // and replacement), or length 0. (A darts-clone double array: the map's own layout.)
    struct rule {
        std::size_t len = 0;
        std::string_view to;
    };
    constexpr bool has_charsmap() const { return trie_units_ != 0; }
    constexpr rule normalize_prefix(const char* s, std::size_t n) const {
        const byte_span& m = r_.charsmap;
        rule best;
        const std::uint8_t c0 = static_cast<std::uint8_t>(s[0]);
        if (c0 < 128 && !((ascii_rules_[c0 >> 5] >> (c0 & 31)) & 1)) return best;
        std::size_t pos = trie_offset(trie_unit(0));
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t c = static_cast<std::uint8_t>(s[i]);
            pos ^= c;
            if (!trie_child(pos, c)) break;
            const std::uint32_t u = trie_unit(pos);
            pos ^= trie_offset(u);
            if (pos >= trie_units_) break;
            if ((u >> 8) & 1) {
                const std::size_t v = trie_unit(pos) & 0x7FFFFFFFu, base = 4 + 4 * trie_units_;
                if (v >= m.n - base) break;
                std::size_t e = base + v;
                while (m.p[e] != 0) ++e;  // (terminated: make() checked the last byte)
                best = {i + 1, std::string_view(m.p + base + v, e - base - v)};
            }
        }
        return best;
    }

  private:
    static constexpr bool same(const char* a, const char* b, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i)
            if (a[i] != b[i]) return false;
        return true;
    }
    // the character map's double array (darts-clone's unit layout)
    constexpr std::uint32_t trie_unit(std::size_t i) const { return r_.charsmap.u32(1 + i); }
    static constexpr std::size_t trie_offset(std::uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
    constexpr bool trie_child(std::size_t pos, std::uint32_t c) const {
        return pos < trie_units_ && (trie_unit(pos) & (0x80000000u | 0xFFu)) == c;
    }


    raw_tables r_{};
    tokenizer_config c_{};
    std::size_t V_ = 0, M_ = 0, trie_units_ = 0, max_piece_ = 0;
    float min_score_ = 0, max_score_ = 0;
    std::uint32_t ascii_rules_[4] = {};
};

}  // namespace ctformer::text
