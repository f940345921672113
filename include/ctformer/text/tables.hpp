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

// Bytes a table is made of (a file's tensor, or a string literal in a generated header); an
// integer table's elements are `width` bytes: 2 (U16; 0xFFFF stands for "none") or 4 (U32).
struct byte_span {
    const char* p = nullptr;
    std::size_t n = 0;
    std::uint8_t width = 4;
    constexpr byte_span() = default;
    constexpr byte_span(const char* data, std::size_t size, std::uint8_t w = 4) : p(data), n(size), width(w) {}
    constexpr bool empty() const { return n == 0; }
    constexpr std::uint8_t u8(std::size_t i) const { return static_cast<std::uint8_t>(p[i]); }
    constexpr std::uint32_t u32(std::size_t i) const { return load(4 * i, 4); }
    constexpr float f32(std::size_t i) const { return std::bit_cast<float>(u32(i)); }
    constexpr std::size_t words() const { return n / 4; }
    // element i of an integer table of either width (a U16 table's 0xFFFF: 0xFFFFFFFF)
    constexpr std::uint32_t at(std::size_t i) const {
        if (width == 4) return load(4 * i, 4);
        const std::uint32_t v = load(2 * i, 2);
        return v == 0xFFFFu ? 0xFFFFFFFFu : v;
    }
    constexpr std::size_t count() const { return n / width; }

  private:
    constexpr std::uint32_t load(std::size_t at, std::size_t bytes) const {
        if constexpr (std::endian::native == std::endian::little)
            if (!std::is_constant_evaluated()) {  // (one unaligned load)
                if (bytes == 4) {
                    std::uint32_t v;
                    std::memcpy(&v, p + at, 4);
                    return v;
                }
                std::uint16_t v;
                std::memcpy(&v, p + at, 2);
                return v;
            }
        std::uint32_t v = 0;
        for (std::size_t k = 0; k < bytes; ++k) v |= std::uint32_t{u8(at + k)} << (8 * k);
        return v;
    }
};

struct raw_tables {
    byte_span bytes;         // every piece's bytes, in id order
    byte_span lengths;       // U8 (V): each piece's length
    byte_span offsets;       // U32 (V/4 + 1): where pieces 0, 4, 8, ... start, then the end
    byte_span special;       // U32 (E, 2): (id, kind) of the pieces that are not normal, by id
    byte_span special_bits;  // U8 (V/8): a bit per id, set for those
    byte_span index;         // U16/U32: a piece's slot (hash and displace) -> id + 1
    byte_span displacements; // U16: each bucket's displacement (no two pieces share a slot)
    byte_span byte_ids;      // U16/U32 (256): byte fallback's ids (none: 0xFFFF / 0xFFFFFFFF)
    byte_span scores;        // F32 (V): SentencePiece kinds
    byte_span merges;        // U16/U32 (M, 3): left, right, result; the row is the rank
    byte_span merge_index;   // U16/U32: hash from (left, right) to row + 1
    byte_span charsmap;      // U8: SentencePiece's precompiled character map, as stored
    byte_span literals;      // U32: ids of the literal (added, user-defined) tokens
    byte_span unk_surface;   // U8: what <unk> decodes to (SentencePiece)
    byte_span prefixes;      // U8 (unigram, optional): two bits per hash: a proper prefix of a piece, a piece
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
// A hash index: slots each empty (0) or a valid entry, one empty at least (every probe ends).
template <class Valid> constexpr status check_index(const byte_span& ix, const char* name, Valid valid) {
    if (ix.n % ix.width || ix.count() == 0 || (ix.width != 2 && ix.width != 4))
        return status::error(errc::malformed_tables, name);
    std::size_t empty = 0;
    for (std::size_t i = 0; i < ix.count(); ++i) {
        const std::uint32_t v = ix.at(i);
        empty += v == 0;
        if (v != 0 && !valid(v)) return status::error(errc::malformed_tables, name);
    }
    return empty ? status{} : status::error(errc::malformed_tables, name);
}
// Slot of hash h in a table of n slots (any n: multiply-shift).
constexpr std::size_t slot_of(std::uint32_t h, std::size_t n) {
    return static_cast<std::size_t>((std::uint64_t{h} * n) >> 32);
}
constexpr std::uint32_t fmix32(std::uint32_t h) {  // (MurmurHash3's finalizer)
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    return h ^ (h >> 16);
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
        t.V_ = r.lengths.n;
        if (status s = t.check_pieces(); !s) return s;
        if (status s = t.check_config(); !s) return s;
        if (status s = t.check_lookups(); !s) return s;
        if (status s = t.check_charsmap(); !s) return s;
        t.summarize();
        out = t;
        return {};
    }

    constexpr std::size_t vocab() const { return V_; }
    constexpr const tokenizer_config& config() const { return c_; }
    constexpr std::string_view piece(std::uint32_t id) const { return {r_.bytes.p + start(id), r_.lengths.u8(id)}; }
    constexpr piece_kind kind(std::uint32_t id) const {
        if (!((r_.special_bits.u8(id >> 3) >> (id & 7)) & 1)) return piece_kind::normal;
        std::size_t lo = 0, hi = r_.special.words() / 2;  // (by id: binary search)
        while (lo + 1 < hi) {
            const std::size_t mid = (lo + hi) / 2;
            (r_.special.u32(2 * mid) <= id ? lo : hi) = mid;
        }
        return static_cast<piece_kind>(r_.special.u32(2 * lo + 1));
    }
    constexpr float score(std::uint32_t id) const { return r_.scores.f32(id); }
    constexpr float min_score() const { return min_score_; }
    constexpr std::size_t max_piece() const { return max_piece_; }  // bytes of the longest matchable piece
    constexpr float max_score() const { return max_score_; }
    constexpr std::uint32_t byte_id(unsigned char b) const { return r_.byte_ids.at(b); }
    // No piece holds "▁" after anything but "▁" (SentencePiece's split_by_whitespace): no merge
    // joins a symbol to a following one that starts with "▁" unless the first ends with it.
    constexpr bool splits_at_words() const { return splits_at_words_; }
    // The unigram filter's two bits for the bytes whose hash is h: bit 0, some piece may be longer
    // and start with them; bit 1, they may be a piece (no filter: both).
    constexpr unsigned prefix_bits(std::uint32_t h) const {
        if (r_.prefixes.empty()) return 3;
        const std::uint32_t slot = h & static_cast<std::uint32_t>(4 * r_.prefixes.n - 1);
        return (r_.prefixes.u8(slot >> 2) >> (2 * (slot & 3))) & 3;
    }
    constexpr std::string_view unk_surface() const { return {r_.unk_surface.p, r_.unk_surface.n}; }

    // The id of the normal, user-defined or unused piece whose bytes are s[0..n), or no_id.
    constexpr std::uint32_t find(const char* s, std::size_t n) const {
        return find_hashed(detail::fnv1a(s, n), s, n);
    }
    // (one slot: the piece the exporter placed there for this hash's bucket, or none)
    constexpr std::uint32_t find_hashed(std::uint32_t h, const char* s, std::size_t n) const {
        const std::uint32_t d = r_.displacements.at(detail::slot_of(detail::fmix32(h), r_.displacements.count()));
        const std::uint32_t v = r_.index.at(detail::slot_of(detail::fmix32(h ^ (d * 0x9E3779B9u)), r_.index.count()));
        return v != 0 && r_.lengths.u8(v - 1) == n && same(r_.bytes.p + start(v - 1), s, n) ? v - 1 : no_id;
    }
    // The merge of (left, right): its row (the rank) and result, or row no_id.
    struct merge_rule {
        std::uint32_t rank, result;
    };
    constexpr merge_rule merge(std::uint32_t left, std::uint32_t right) const {
        if (M_ == 0) return {no_id, no_id};
        const std::size_t size = r_.merge_index.count();
        for (std::size_t i = detail::slot_of(detail::pair_hash(left, right), size);; i = i + 1 < size ? i + 1 : 0) {
            const std::uint32_t v = r_.merge_index.at(i);
            if (v == 0) return {no_id, no_id};
            if (r_.merges.at(3 * (v - 1)) == left && r_.merges.at(3 * (v - 1) + 1) == right)
                return {v - 1, r_.merges.at(3 * (v - 1) + 2)};
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
    // where piece id starts: its group of 4's offset plus the lengths before it in the group
    constexpr std::size_t start(std::uint32_t id) const {
        std::size_t o = r_.offsets.u32(id >> 2);
        for (std::uint32_t j = id & ~3u; j < id; ++j) o += r_.lengths.u8(j);
        return o;
    }
    static constexpr status bad(const char* what) { return status::error(errc::malformed_tables, what); }
    // lengths, offsets and bytes agree; the special pieces are sorted, of known kinds, and their bits set
    constexpr status check_pieces() const {
        const std::size_t V = V_, groups = (V + 3) / 4;
        if (V == 0 || V > 0x7FFFFFFF || r_.offsets.n != 4 * (groups + 1)) return bad("tokenizer.offsets");
        std::size_t at = 0;
        for (std::size_t i = 0; i < V; ++i) {
            if (i % 4 == 0 && r_.offsets.u32(i / 4) != at) return bad("tokenizer.offsets");
            if (r_.lengths.u8(i) == 0) return bad("tokenizer.lengths");  // (no empty piece)
            at += r_.lengths.u8(i);
        }
        if (r_.offsets.u32(groups) != at || at != r_.bytes.n) return bad("tokenizer.offsets");
        const std::size_t E = r_.special.words() / 2;
        if (r_.special.n != 8 * E || r_.special_bits.n != (V + 7) / 8) return bad("tokenizer.special");
        std::size_t bits = 0;
        for (std::size_t b = 0; b < r_.special_bits.n; ++b) bits += static_cast<std::size_t>(std::popcount(r_.special_bits.u8(b)));
        if (bits != E) return bad("tokenizer.special_bits");
        for (std::size_t e = 0; e < E; ++e) {
            const std::uint32_t id = r_.special.u32(2 * e), k = r_.special.u32(2 * e + 1);
            if (id >= V || (e && id <= r_.special.u32(2 * e - 2)) || k < 2 || k > 6) return bad("tokenizer.special");
            if (!((r_.special_bits.u8(id >> 3) >> (id & 7)) & 1)) return bad("tokenizer.special_bits");
        }
        return {};
    }
    constexpr bool sentencepiece() const {
        return c_.kind == tokenizer_kind::sentencepiece_bpe || c_.kind == tokenizer_kind::sentencepiece_unigram;
    }
    // scores, special ids
    constexpr status check_config() const {
        const std::size_t V = V_;
        if (sentencepiece() ? r_.scores.n != 4 * V : !r_.scores.empty()) return bad("tokenizer.scores");
        for (std::size_t i = 0; i < r_.scores.words(); ++i) {
            const float s = r_.scores.f32(i);
            if (!(s == s) || s > 3.0e38f || s < -3.0e38f) return status::error(errc::non_finite, "tokenizer.scores");
        }
        for (const std::int32_t id : {c_.bos, c_.eos, c_.unk, c_.pad})
            if (id < -1 || id >= static_cast<std::int64_t>(V))
                return status::error(errc::value_out_of_range, "tokenizer special id");
        if (c_.unk >= 0 && sentencepiece() && kind(static_cast<std::uint32_t>(c_.unk)) != piece_kind::unknown)
            return bad("tokenizer.unk");
        if ((sentencepiece() || (c_.kind == tokenizer_kind::bpe && !c_.byte_fallback)) && c_.unk < 0) return bad("tokenizer.unk");
        return {};
    }
    // the piece index, the byte ids, the merges and their index, the literals
    constexpr status check_lookups() {
        const std::size_t V = V_;
        if (r_.index.n % r_.index.width || r_.index.count() == 0 || (r_.index.width != 2 && r_.index.width != 4))
            return bad("tokenizer.index");
        for (std::size_t i = 0; i < r_.index.count(); ++i)
            if (const std::uint32_t v = r_.index.at(i); v != 0) {
                const piece_kind k = v <= V ? kind(v - 1) : piece_kind::control;
                if (k != piece_kind::normal && k != piece_kind::user_defined && k != piece_kind::unused)
                    return bad("tokenizer.index");
            }
        if (r_.displacements.width != 2 || r_.displacements.n % 2 || r_.displacements.count() == 0)
            return bad("tokenizer.displacements");
        if (r_.byte_ids.count() != 256 || r_.byte_ids.n != 256u * r_.byte_ids.width) return bad("tokenizer.byte_ids");
        for (std::size_t b = 0; b < 256; ++b) {
            const std::uint32_t id = r_.byte_ids.at(b);
            if ((id != no_id && id >= V) || (c_.kind == tokenizer_kind::byte_level_bpe && id == no_id))
                return bad("tokenizer.byte_ids");
        }
        const bool ranked = c_.kind == tokenizer_kind::bpe || c_.kind == tokenizer_kind::byte_level_bpe;
        if ((!ranked && !r_.merges.empty()) || r_.merges.n % (3u * r_.merges.width)) return bad("tokenizer.merges");
        M_ = r_.merges.count() / 3;
        for (std::size_t i = 0; i < 3 * M_; ++i)
            if (r_.merges.at(i) >= V) return bad("tokenizer.merges");
        if (M_ || !r_.merge_index.empty())
            if (status s = detail::check_index(r_.merge_index, "tokenizer.merge_index", [&](std::uint32_t v) { return v <= M_; });
                !s)
                return s;
        if (!r_.prefixes.empty() && !detail::power_of_two(r_.prefixes.n)) return bad("tokenizer.prefixes");
        if (r_.literals.n % 4) return bad("tokenizer.literals");
        for (std::size_t i = 0; i < r_.literals.words(); ++i)
            if (r_.literals.u32(i) >= V) return bad("tokenizer.literals");
        return {};
    }
    // the character map's trie lies inside it and its strings end with NUL
    constexpr status check_charsmap() {
        if (r_.charsmap.empty()) return {};
        const std::uint32_t trie = r_.charsmap.n >= 8 ? r_.charsmap.u32(0) : 0;
        if (trie % 4 || trie == 0 || trie >= r_.charsmap.n - 4 || r_.charsmap.u8(r_.charsmap.n - 1) != 0)
            return bad("tokenizer.charsmap");
        trie_units_ = trie / 4;
        for (std::uint32_t ch = 0; ch < 128; ++ch)  // (which ASCII bytes begin a rule: the others map to themselves)
            if (trie_child(trie_offset(trie_unit(0)) ^ ch, ch)) ascii_rules_[ch >> 5] |= 1u << (ch & 31);
        return {};
    }
    // SentencePiece's unigram: the unknown character's score and the user-defined bonus come from
    // the normal pieces' extreme scores (its initial values too: FLT_MAX, FLT_MIN)
    constexpr void summarize() {
        min_score_ = 3.40282347e38f;
        max_score_ = 1.17549435e-38f;
        splits_at_words_ = c_.escape_whitespaces && c_.kind != tokenizer_kind::byte_level_bpe;
        constexpr std::string_view ws = "\xE2\x96\x81";
        for (std::uint32_t i = 0; i < V_; ++i) {
            const piece_kind k = kind(i);
            if (k == piece_kind::normal || k == piece_kind::user_defined || k == piece_kind::unused) {
                const std::string_view p = piece(i);
                for (std::size_t at = p.find(ws, 1); at != std::string_view::npos && splits_at_words_; at = p.find(ws, at + 1))
                    splits_at_words_ = at >= 3 && std::string_view(p.data() + at - 3, 3) == ws;
            }
            if ((k == piece_kind::normal || k == piece_kind::user_defined || k == piece_kind::unused) &&
                r_.lengths.u8(i) > max_piece_)
                max_piece_ = r_.lengths.u8(i);
            if (sentencepiece() && k == piece_kind::normal) {
                const float s = r_.scores.f32(i);
                min_score_ = s < min_score_ ? s : min_score_;
                max_score_ = s > max_score_ ? s : max_score_;
            }
        }
    }
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
    bool splits_at_words_ = false;
};

}  // namespace ctformer::text
