#!/usr/bin/env python3
"""Llama-2's vocabulary for the tokenizer benchmark, identical for llama.cpp and ctformer: from npm's
llama-tokenizer-js (which ships it), OUT/llama2_vocab.gguf (llama.cpp: GGUF v3 with the llama
architecture's keys and its SentencePiece vocabulary: tokens, scores, token types; no tensors: it
is loaded vocabulary only) and OUT/llama2_sp.model (a SentencePiece ModelProto of the same pieces
and scores: BPE, byte fallback, identity normalization — the shape of Llama-2's tokenizer.model),
which tools/export.py --tokenizer turns into ctformer's tables. The scores order the merges: a
normal piece's score is minus its id (Llama-2's vocabulary is in merge order).
Usage: /usr/bin/python3 write_tokenizer.py node_modules/llama-tokenizer-js/llama-tokenizer.js OUT_DIR"""
import base64, os, re, struct, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from write_models import GGUF_ARR, GGUF_F32, GGUF_I32, GGUF_STR, GGUF_U32, kv, s  # noqa: E402

src, out = sys.argv[1], sys.argv[2]
js = open(src, encoding="utf-8").read()
vocab = base64.b64decode(re.search(r'const llama_vocab_base64 = "([^"]+)"', js).group(1)).decode("utf-8").split("\n")
types = [2 if t == "<unk>" else 3 if t in ("<s>", "</s>") else 6 if re.fullmatch(r"<0x[0-9A-F]{2}>", t) else 1
         for t in vocab]
scores = [-float(i) if k == 1 else 0.0 for i, k in enumerate(types)]
os.makedirs(out, exist_ok=True)

meta = [("general.architecture", GGUF_STR, "llama"), ("llama.context_length", GGUF_U32, 256),
        ("llama.embedding_length", GGUF_U32, 64), ("llama.block_count", GGUF_U32, 1),
        ("llama.feed_forward_length", GGUF_U32, 128), ("llama.attention.head_count", GGUF_U32, 2),
        ("llama.attention.head_count_kv", GGUF_U32, 2), ("llama.rope.dimension_count", GGUF_U32, 32),
        ("llama.attention.layer_norm_rms_epsilon", GGUF_F32, 1e-5), ("general.file_type", GGUF_U32, 0),
        ("tokenizer.ggml.model", GGUF_STR, "llama"), ("tokenizer.ggml.tokens", GGUF_ARR, (GGUF_STR, vocab)),
        ("tokenizer.ggml.scores", GGUF_ARR, (GGUF_F32, scores)), ("tokenizer.ggml.token_type", GGUF_ARR, (GGUF_I32, types)),
        ("tokenizer.ggml.bos_token_id", GGUF_U32, 1), ("tokenizer.ggml.eos_token_id", GGUF_U32, 2),
        ("tokenizer.ggml.unknown_token_id", GGUF_U32, 0), ("tokenizer.ggml.add_bos_token", 7, True)]


def kv_any(key, typ, val):
    if typ == 7:  # bool
        return s(key) + struct.pack("<IB", 7, 1 if val else 0)
    return kv(key, typ, val)


with open(os.path.join(out, "llama2_vocab.gguf"), "wb") as f:
    f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta)) + b"".join(kv_any(*m) for m in meta))


def varint(v):
    b = b""
    while True:
        c, v = v & 0x7F, v >> 7
        b += bytes([c | (0x80 if v else 0)])
        if not v:
            return b


def field(num, wt, payload):
    key = varint((num << 3) | wt)
    return key + (varint(payload) if wt == 0 else varint(len(payload)) + payload if wt == 2 else payload)


proto = b"".join(field(1, 2, field(1, 2, t.encode()) + field(2, 5, struct.pack("<f", sc)) + field(3, 0, k))
                 for t, sc, k in zip(vocab, scores, types))
proto += field(2, 2, field(3, 0, 2) + field(35, 0, 1) + field(40, 0, 0) + field(41, 0, 1) + field(42, 0, 2))
proto += field(3, 2, field(1, 2, b"identity") + field(3, 0, 1) + field(4, 0, 0) + field(5, 0, 1))
with open(os.path.join(out, "llama2_sp.model"), "wb") as f:
    f.write(proto)
print("%s: llama2_vocab.gguf, llama2_sp.model (%d pieces)" % (out, len(vocab)))
