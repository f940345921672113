#!/usr/bin/env python3
"""Tokenizers as tables: a SentencePiece .model (BPE or unigram), a Hugging Face tokenizer.json (BPE
with byte fallback as in Llama-2, byte-level BPE as in GPT-2), a directory with GPT-2's
encoder.json + vocab.bpe, or a llama.cpp .gguf (its tokenizer.ggml.* keys: "llama" or "gpt2"), written as the tensors and metadata include/ctformer/text/ reads in place
(docs/text.md has the layout). Pure Python: no sentencepiece, protobuf or torch needed.

  python3 tools/export.py --tokenizer SRC OUT.safetensors [--header OUT.hpp --name NAME]
  python3 tools/tokenizer_export.py SRC OUT.safetensors     (the same)

The tables are laid out here, once, so that loading parses nothing: every piece's bytes in one blob
with offsets, its score and kind, an open-addressing hash from bytes to id, the merges with a hash
from (left, right) to their rank, the byte-fallback ids, the SentencePiece normalizer's
precompiled character map as stored in the model."""
import json
import os
import struct
import sys

FORMAT = "ctformer.tokenizer.4"
# piece kinds: SentencePiece's ModelProto.SentencePiece.Type numbers
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
M32 = 0xFFFFFFFF


# ---- the hashes the C++ side computes (text/tables.hpp) ----
def fnv1a(b):
    h = 0x811C9DC5
    for c in b:
        h = ((h ^ c) * 0x01000193) & M32
    return h


def pair_hash(left, right):
    h = (left * 0x9E3779B1 + right) & M32
    h ^= h >> 15
    h = (h * 0x2C1B3C6D) & M32
    h ^= h >> 12
    return h


def open_addressing(keys, hash_of):
    """Slots (value index + 1, 0: empty) of an open-addressing hash over keys (None: not entered):
    n entries in ceil(1.5 n) slots at least (load 2/3), slot (h * size) >> 32, linear probing."""
    n = sum(1 for k in keys if k is not None)
    size = max(8, (3 * n + 1) // 2 + 1)
    slots = [0] * size
    for i, k in enumerate(keys):
        if k is None:
            continue
        s = (hash_of(k) * size) >> 32
        while slots[s]:
            s = s + 1 if s + 1 < size else 0
        slots[s] = i + 1
    return slots


def fmix32(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def perfect_hash(keys, hash_of):
    """A hash-and-displace table over keys (None: not entered): the key of hash h is in bucket
    (fmix32(h) * buckets) >> 32, and at slot (fmix32(h ^ d * 0x9E3779B9) * size) >> 32 where d is its
    bucket's displacement; no two keys share a slot, so a lookup reads one slot. (displacements,
    slots: value index + 1, 0 empty)."""
    entries = [(hash_of(k), i) for i, k in enumerate(keys) if k is not None]
    n = len(entries)
    size = max(8, n + n // 64 + 1)
    nb = max(1, (n + 3) // 4)
    buckets = [[] for _ in range(nb)]
    for h, i in entries:
        buckets[(fmix32(h) * nb) >> 32].append((h, i))  # (mixed: FNV-1a's top bits cluster for pieces that differ at the end)
    slots, disp = [0] * size, [0] * nb
    for b in sorted(range(nb), key=lambda b: -len(buckets[b])):
        if not buckets[b]:
            continue
        for d in range(0xFFFF):
            pos = [(fmix32(h ^ ((d * 0x9E3779B9) & M32)) * size) >> 32 for h, _ in buckets[b]]
            if len(set(pos)) == len(pos) and all(slots[p] == 0 for p in pos):
                for p, (_, i) in zip(pos, buckets[b]):
                    slots[p] = i + 1
                disp[b] = d
                break
        else:
            raise ValueError("tokenizer: no displacement places bucket %d (two pieces with one hash?)" % b)
    return disp, slots


def packed(values, limit):
    """("U16", bytes) if every value fits 16 bits (0xFFFF stands for 0xFFFFFFFF), else ("U32", bytes)."""
    if limit < 0xFFFF:
        return "U16", struct.pack("<%dH" % len(values), *[0xFFFF if v == M32 else v for v in values])
    return "U32", struct.pack("<%dI" % len(values), *values)


# ---- SentencePiece .model: a protobuf (ModelProto), read by hand ----
def _varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def _fields(b):
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("sentencepiece model: unsupported protobuf wire type %d" % wt)
        yield num, wt, v


def _signed32(v):
    v &= M32
    return v - (1 << 32) if v >> 31 else v


def read_sentencepiece(path):
    with open(path, "rb") as f:
        data = f.read()
    pieces, trainer, norm, denorm = [], {}, {}, {}
    for num, wt, v in _fields(data):
        if num == 1:
            p = {"piece": b"", "score": 0.0, "type": NORMAL}
            for n2, w2, v2 in _fields(v):
                if n2 == 1: p["piece"] = bytes(v2)
                elif n2 == 2: p["score"] = struct.unpack("<f", v2)[0]
                elif n2 == 3: p["type"] = v2
            pieces.append(p)
        elif num == 2:
            for n2, w2, v2 in _fields(v):
                trainer[n2] = v2
        elif num == 3:
            for n2, w2, v2 in _fields(v):
                norm[n2] = v2
        elif num == 5:
            for n2, w2, v2 in _fields(v):
                denorm[n2] = v2
    model_type = trainer.get(3, 1)
    if model_type not in (1, 2):
        raise ValueError("sentencepiece model: type %d (WORD/CHAR) is not supported: BPE or unigram" % model_type)
    if trainer.get(24, 0):
        raise ValueError("sentencepiece model: treat_whitespace_as_suffix is not supported")
    if denorm.get(2):
        raise ValueError("sentencepiece model: a denormalizer is not supported")
    for p in pieces:
        if not p["piece"]:
            raise ValueError("sentencepiece model: an empty piece")
        if p["type"] not in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE):
            raise ValueError("sentencepiece model: piece type %d" % p["type"])
    byte_ids = [M32] * 256
    for i, p in enumerate(pieces):
        if p["type"] == BYTE:
            byte_ids[int(p["piece"][3:5], 16)] = i
    kind = "sentencepiece_bpe" if model_type == 2 else "sentencepiece_unigram"
    unk = [i for i, p in enumerate(pieces) if p["type"] == UNKNOWN]
    meta = {
        "kind": kind,
        "unk": _signed32(trainer.get(40, 0)) if unk else -1,
        "bos": _signed32(trainer.get(41, 1)),
        "eos": _signed32(trainer.get(42, 2)),
        "pad": _signed32(trainer.get(43, M32)),
        "add_dummy_prefix": bool(norm.get(3, 1)),
        "remove_extra_whitespaces": bool(norm.get(4, 1)),
        "escape_whitespaces": bool(norm.get(5, 1)),
        "byte_fallback": bool(trainer.get(35, 0)),
        "split_literals": False,  # user-defined pieces are matched inside the model, as SentencePiece does
        "unk_surface": bytes(trainer.get(44, b" \xe2\x81\x87 ")).decode("utf-8"),
    }
    for key in ("bos", "eos", "pad", "unk"):
        if meta[key] >= len(pieces):
            meta[key] = -1
    return dict(pieces=[p["piece"] for p in pieces], scores=[p["score"] for p in pieces],
                kinds=[p["type"] for p in pieces], byte_ids=byte_ids, merges=[], meta=meta,
                charsmap=bytes(norm.get(2, b"")),
                literals=[i for i, p in enumerate(pieces) if p["type"] == USER_DEFINED])


# ---- GPT-2's byte-to-unicode map (byte-level BPE stores each byte as a printable character) ----
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _byte_level(vocab, merges, added, meta):
    dec = bytes_to_unicode()
    n = max(vocab.values()) + 1
    pieces, kinds = [None] * n, [NORMAL] * n
    for s, i in vocab.items():
        pieces[i] = bytes(dec[c] for c in s)
    for s, (i, special) in added.items():
        if i >= n:
            pieces.extend([None] * (i + 1 - n))
            kinds.extend([NORMAL] * (i + 1 - n))
            n = i + 1
        pieces[i] = s.encode("utf-8")
        kinds[i] = CONTROL if special else USER_DEFINED
    if any(p is None for p in pieces):
        raise ValueError("byte-level BPE: the vocabulary's ids are not contiguous")
    ids = {}
    for i, p in enumerate(pieces):
        if kinds[i] == NORMAL:
            ids.setdefault(p, i)
    byte_ids = [ids.get(bytes([b]), M32) for b in range(256)]
    rows = []
    for a, b in merges:
        ab, bb = bytes(dec[c] for c in a), bytes(dec[c] for c in b)
        if ab not in ids or bb not in ids or ab + bb not in ids:
            raise ValueError("byte-level BPE: merge %r %r names a token not in the vocabulary" % (a, b))
        rows.append((ids[ab], ids[bb], ids[ab + bb]))
    meta = dict(meta, kind="byte_level_bpe", byte_fallback=False, add_dummy_prefix=False,
                remove_extra_whitespaces=False, escape_whitespaces=False)
    return dict(pieces=pieces, scores=None, kinds=kinds, byte_ids=byte_ids, merges=rows, meta=meta, charsmap=b"",
                literals=[i for s, (i, sp) in added.items()])


def read_gpt2_dir(path):
    with open(os.path.join(path, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(path, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    merges = [tuple(l.split()) for l in lines[1:] if l.strip()]
    eot = vocab.get("<|endoftext|>", -1)
    # GPT-2's own encoder matches no special token in text: <|endoftext|> is a vocabulary entry only
    # (kind control, so it decodes to nothing and never merges)
    out = _byte_level(vocab, merges, {}, {"bos": eot, "eos": eot, "unk": -1, "pad": -1, "split_literals": False})
    if eot >= 0:
        out["kinds"][eot] = CONTROL
    return out


def _special_ids(added, names):
    for n in names:
        if n in added:
            return added[n][0]
    return -1


def read_tokenizer_json(path):
    with open(path, encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    if model.get("type") != "BPE":
        raise ValueError("tokenizer.json: model type %r: BPE only (unigram: export the SentencePiece .model)"
                         % model.get("type"))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    added = {t["content"]: (t["id"], t.get("special", False)) for t in tj.get("added_tokens", [])}
    cfg = {}
    cfg_path = os.path.join(os.path.dirname(path), "tokenizer_config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)

    def named(key, fallback):
        v = cfg.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            if v in added:
                return added[v][0]
            if v in model["vocab"]:
                return model["vocab"][v]
        return _special_ids(added, fallback)

    meta = {"bos": named("bos_token", ["<s>", "<|begin_of_text|>", "<|endoftext|>"]),
            "eos": named("eos_token", ["</s>", "<|end_of_text|>", "<|endoftext|>"]),
            "unk": named("unk_token", ["<unk>"]), "pad": named("pad_token", ["<pad>"]), "split_literals": True}
    pre = json.dumps(tj.get("pre_tokenizer")) + json.dumps(tj.get("decoder"))
    if "ByteLevel" in pre:
        return _byte_level(model["vocab"], merges, added, meta)
    # BPE over SentencePiece-style text (Llama-2): "▁" for spaces and one in front, byte fallback
    vocab = model["vocab"]
    n = max(list(vocab.values()) + [i for i, _ in added.values()]) + 1
    pieces, kinds = [None] * n, [NORMAL] * n
    for s, i in vocab.items():
        pieces[i] = s.encode("utf-8")
        if len(s) == 6 and s.startswith("<0x") and s.endswith(">") and model.get("byte_fallback"):
            kinds[i] = BYTE
    for s, (i, special) in added.items():
        pieces[i] = s.encode("utf-8")
        kinds[i] = CONTROL if special else USER_DEFINED
    if meta["unk"] >= 0:
        kinds[meta["unk"]] = UNKNOWN
    if any(p is None for p in pieces):
        raise ValueError("tokenizer.json: the vocabulary's ids are not contiguous")
    ids = {}
    for i, p in enumerate(pieces):
        if kinds[i] == NORMAL:
            ids.setdefault(p, i)
    byte_ids = [M32] * 256
    for i, p in enumerate(pieces):
        if kinds[i] == BYTE:
            byte_ids[int(p[3:5], 16)] = i
    rows = []
    for a, b in merges:
        ab, bb = a.encode("utf-8"), b.encode("utf-8")
        if ab not in ids or bb not in ids or ab + bb not in ids:
            raise ValueError("tokenizer.json: merge %r %r names a token not in the vocabulary" % (a, b))
        rows.append((ids[ab], ids[bb], ids[ab + bb]))
    norm = json.dumps(tj.get("normalizer")) + json.dumps(tj.get("pre_tokenizer"))
    meta.update(kind="bpe", byte_fallback=bool(model.get("byte_fallback")),
                add_dummy_prefix="Prepend" in norm or "prepend_scheme" in norm or "add_prefix_space\": true" in norm,
                escape_whitespaces="\\u2581" in norm or "▁" in norm, remove_extra_whitespaces=False)
    return dict(pieces=pieces, scores=None, kinds=kinds, byte_ids=byte_ids, merges=rows, meta=meta, charsmap=b"",
                literals=[i for s, (i, sp) in added.items()])


def read_gguf_tokenizer(path):
    """tokenizer.ggml.* of a llama.cpp GGUF: model "llama" (SentencePiece BPE by score: tokens, scores,
    token types, byte fallback, a space prefix) or "gpt2" (byte-level BPE: tokens, merges; GPT-2's
    pre-tokenizer only)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gguf_reader import read_gguf
    meta = read_gguf(path)[0]
    model, tokens = meta.get("tokenizer.ggml.model"), meta.get("tokenizer.ggml.tokens")
    if model is None or tokens is None:
        raise ValueError("%s: no tokenizer.ggml.model / tokenizer.ggml.tokens" % path)
    n = len(tokens)
    types = meta.get("tokenizer.ggml.token_type", [NORMAL] * n)

    def special(key):
        v = meta.get("tokenizer.ggml.%s_token_id" % key, -1)
        return v if 0 <= v < n else -1
    ids = {"bos": special("bos"), "eos": special("eos"), "unk": special("unknown"), "pad": special("padding")}
    if model == "llama":
        scores = meta.get("tokenizer.ggml.scores", [0.0] * n)
        pieces = [t.encode("utf-8", errors="surrogateescape") for t in tokens]
        kinds = [k if k in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE) else NORMAL for k in types]
        byte_ids = [M32] * 256
        for i, p in enumerate(pieces):
            if kinds[i] == BYTE:
                byte_ids[int(p[3:5], 16)] = i
        # llama.cpp's SentencePiece tokenizer: "▁" for spaces, one in front unless add_space_prefix is
        # false, spaces kept as they are, no character map, bytes for what no piece covers
        meta_out = dict(ids, kind="sentencepiece_bpe", add_dummy_prefix=bool(meta.get("tokenizer.ggml.add_space_prefix", True)),
                        remove_extra_whitespaces=False, escape_whitespaces=True, byte_fallback=any(k == BYTE for k in kinds),
                        split_literals=False, unk_surface=" \u2047 ")
        return dict(pieces=pieces, scores=list(scores), kinds=kinds, byte_ids=byte_ids, merges=[], meta=meta_out, charsmap=b"",
                    literals=[i for i, k in enumerate(kinds) if k == USER_DEFINED])
    if model == "gpt2":
        pre = meta.get("tokenizer.ggml.pre", "default")
        if pre not in ("default", "gpt-2", "gpt2"):
            raise ValueError("%s: pre-tokenizer %r: GPT-2's ('default') is the one the tables implement" % (path, pre))
        vocab, added = {}, {}
        for i, (t, k) in enumerate(zip(tokens, types)):
            if k in (CONTROL, USER_DEFINED):
                added[t] = (i, k == CONTROL)
            else:
                vocab[t] = i
        merges = [tuple(m.split(" ")) for m in meta.get("tokenizer.ggml.merges", [])]
        out = _byte_level(vocab, merges, added, dict(ids, split_literals=True))
        # llama.cpp matches user-defined tokens in text, control tokens only when asked to (parse_special)
        out["literals"] = [i for i in out["literals"] if out["kinds"][i] == USER_DEFINED]
        return out
    raise ValueError("%s: tokenizer.ggml.model %r: 'llama' or 'gpt2'" % (path, model))


def read_source(src):
    if os.path.isdir(src):
        if os.path.exists(os.path.join(src, "tokenizer.json")):
            return read_tokenizer_json(os.path.join(src, "tokenizer.json"))
        if os.path.exists(os.path.join(src, "tokenizer.model")):
            return read_sentencepiece(os.path.join(src, "tokenizer.model"))
        if os.path.exists(os.path.join(src, "encoder.json")):
            return read_gpt2_dir(src)
        raise ValueError("%s: no tokenizer.json, tokenizer.model or encoder.json + vocab.bpe" % src)
    if src.endswith(".json"):
        return read_tokenizer_json(src)
    if src.endswith(".gguf"):
        return read_gguf_tokenizer(src)
    return read_sentencepiece(src)


# ---- the tables ----
def tables(t):
    """name -> (dtype, shape, bytes), and the metadata strings."""
    pieces, kinds = t["pieces"], t["kinds"]
    n = len(pieces)
    if n == 0 or n > 0x7FFFFFFF:
        raise ValueError("tokenizer: %d pieces" % n)
    if max(len(p) for p in pieces) > 255:
        raise ValueError("tokenizer: a piece of more than 255 bytes")
    blob = b"".join(pieces)
    # each piece's length, and where every 4th piece starts (a piece is at most 3 additions away)
    offsets, at = [], 0
    for i, p in enumerate(pieces):
        if i % 4 == 0:
            offsets.append(at)
        at += len(p)
    offsets.append(at)
    # the pieces that are not normal: their ids and kinds (sorted), and a bit per id
    special = [(i, k) for i, k in enumerate(kinds) if k != NORMAL]
    bits = bytearray((n + 7) // 8)
    for i, _ in special:
        bits[i >> 3] |= 1 << (i & 7)
    # the pieces encoding may produce from text: normal, user-defined, unused (SentencePiece's
    # pieces_); the first id wins where two share their bytes
    keys, seen = [], set()
    for i, p in enumerate(pieces):
        ok = kinds[i] in (NORMAL, USER_DEFINED, UNUSED) and p not in seen
        keys.append(p if ok else None)
        if ok:
            seen.add(p)
    u32 = lambda xs: struct.pack("<%dI" % len(xs), *xs)
    disp, slots = perfect_hash(keys, fnv1a)
    index_dt, index_b = packed(slots, n)
    bytes_dt, bytes_b = packed(t["byte_ids"], n)
    out = {
        "tokenizer.bytes": ("U8", [len(blob)], blob),
        "tokenizer.lengths": ("U8", [n], bytes(len(p) for p in pieces)),
        "tokenizer.offsets": ("U32", [len(offsets)], u32(offsets)),
        "tokenizer.index": (index_dt, [len(index_b) // (2 if index_dt == "U16" else 4)], index_b),
        "tokenizer.displacements": ("U16", [len(disp)], struct.pack("<%dH" % len(disp), *disp)),
        "tokenizer.byte_ids": (bytes_dt, [256], bytes_b),
        "tokenizer.special_bits": ("U8", [len(bits)], bytes(bits)),
    }
    if special:
        out["tokenizer.special"] = ("U32", [len(special), 2], u32([x for pair in special for x in pair]))
    if t["scores"] is not None:
        out["tokenizer.scores"] = ("F32", [n], struct.pack("<%df" % n, *t["scores"]))
    if t["meta"]["kind"] == "sentencepiece_unigram":
        # two bits per hash slot: bit 0, some piece is longer than these bytes and starts with
        # them; bit 1, these bytes may be a piece. The Viterbi pass looks a piece up only where
        # bit 1 is set, and stops looking where bit 0 is not.
        prefixes = {k[:i] for k in keys if k is not None for i in range(1, len(k))}
        full = {k for k in keys if k is not None}
        nbits = 512
        while nbits < 8 * (len(prefixes) + len(full)):
            nbits *= 2
        filt = bytearray(2 * nbits // 8)
        for group, bit in ((prefixes, 0), (full, 1)):
            for p in group:
                b = 2 * (fnv1a(p) & (nbits - 1)) + bit
                filt[b >> 3] |= 1 << (b & 7)
        out["tokenizer.prefixes"] = ("U8", [len(filt)], bytes(filt))
    if t["merges"]:
        rows = t["merges"]
        dt, b = packed([x for r in rows for x in r], n)
        out["tokenizer.merges"] = (dt, [len(rows), 3], b)
        dt, b = packed(open_addressing([(a, c) for a, c, _ in rows], lambda k: pair_hash(*k)), len(rows))
        out["tokenizer.merge_index"] = (dt, [len(b) // (2 if dt == "U16" else 4)], b)
    if t["charsmap"]:
        out["tokenizer.charsmap"] = ("U8", [len(t["charsmap"])], t["charsmap"])
    if t["literals"]:
        lit = sorted(set(t["literals"]))
        out["tokenizer.literals"] = ("U32", [len(lit)], u32(lit))
    m = dict(t["meta"])
    surface = m.pop("unk_surface", None)
    if surface:
        out["tokenizer.unk_surface"] = ("U8", [len(surface.encode("utf-8"))], surface.encode("utf-8"))
    meta = {"format": FORMAT, "vocab": str(n)}
    for k, v in m.items():
        meta[k] = ("true" if v else "false") if isinstance(v, bool) else (repr(v) if isinstance(v, float) else str(v))
    return out, {"tokenizer." + k: v for k, v in meta.items()}


def save(path, tensors, metadata):
    header, off, blobs = {"__metadata__": metadata}, 0, []
    for name in sorted(tensors):
        dt, shape, b = tensors[name]
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def _literal(b):
    """bytes as a C++ string literal (octal escapes: no escape runs into the next character)"""
    out = []
    for c in b:
        ch = chr(c)
        out.append(ch if (ch.isalnum() and c < 128) or ch in " _.,:;!#$%&'()*+-/<=>@[]^`{|}~" else "\\%03o" % c)
    return '"' + "".join(out) + '"'


def write_header(path, name, tensors, metadata):
    """The same tables as constexpr string literals (firmware: they stay in flash)."""
    fields = ["bytes", "lengths", "offsets", "special", "special_bits", "index", "displacements", "byte_ids", "scores",
              "merges", "merge_index", "charsmap", "literals", "unk_surface", "prefixes"]
    lines = ["// Generated by tools/export.py --tokenizer --header: a tokenizer's tables as constexpr data",
             "// (little-endian bytes, read in place; ctformer::make_tokenizer checks them).", "#pragma once",
             "#include <ctformer/text/tables.hpp>", "", "namespace %s_data {" % name]
    present = {t.split(".", 1)[1]: (dt, b) for t, (dt, shape, b) in tensors.items()}
    for f in fields:
        if f in present:
            b = present[f][1]
            chunks = [_literal(b[i:i + 64]) for i in range(0, len(b), 64)] or ['""']
            lines.append("inline constexpr char %s[] =\n    %s;" % (f, "\n    ".join(chunks)))
    lines.append("}  // namespace %s_data" % name)
    args = ", ".join(("{%s_data::%s, sizeof %s_data::%s - 1, %d}" % (name, f, name, f, 2 if present[f][0] == "U16" else 4))
                     if f in present else "{}" for f in fields)
    lines.append("inline constexpr ctformer::text::raw_tables %s_tables{%s};" % (name, args))
    lines.append("// the tables' bytes in read-only memory (ctformer::generation_memory's TableBytes)")
    lines.append("inline constexpr std::size_t %s_table_bytes = %s;" %
                 (name, " + ".join("sizeof %s_data::%s" % (name, f) for f in fields if f in present)))
    meta = ",\n    ".join('{"%s", "%s"}' % (k, v.replace("\\", "\\\\").replace('"', '\\"'))
                          for k, v in sorted(metadata.items()))
    lines.append("inline constexpr ctformer::text::metadata_pair %s_metadata[] = {\n    %s};" % (name, meta))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def export(src, out, header=None, name="tokenizer"):
    t = read_source(src)
    tensors, metadata = tables(t)
    save(out, tensors, metadata)
    if header:
        write_header(header, name, tensors, metadata)
    size = sum(len(b) for _, _, b in tensors.values())
    return "%s: %s, %d pieces, %d merges, %d bytes of tables" % (out, t["meta"]["kind"], len(t["pieces"]),
                                                                 len(t["merges"]), size)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="a SentencePiece .model, a tokenizer.json, a llama.cpp .gguf, or a directory "
                                "holding one of the first two (or GPT-2's encoder.json + vocab.bpe)")
    ap.add_argument("out", help="the .safetensors file to write")
    ap.add_argument("--header", help="also write the tables as constexpr arrays into this header")
    ap.add_argument("--name", default="tokenizer", help="the header's names' prefix")
    a = ap.parse_args(argv)
    print(export(a.src, a.out, a.header, a.name))


if __name__ == "__main__":
    main()
