#!/usr/bin/env python3
"""Llama-2's vocabulary as a Hugging Face tokenizer.json, built from npm's llama-tokenizer-js (which
ships it: the vocabulary base64, the merges as pairs of 16-bit ids, rank = position).
Usage: llama_tokenizer_json.py node_modules/llama-tokenizer-js/llama-tokenizer.js OUT/tokenizer.json"""
import base64
import json
import re
import struct
import sys

src, out = sys.argv[1], sys.argv[2]
js = open(src, encoding="utf-8").read()
vocab_b64 = re.search(r'const llama_vocab_base64 = "([^"]+)"', js).group(1)
merges_b64 = re.search(r'const llama_merges_binary = "([^"]+)"', js).group(1)
vocab = base64.b64decode(vocab_b64).decode("utf-8").split("\n")
raw = base64.b64decode(merges_b64)
ids = struct.unpack("<%dH" % (len(raw) // 2), raw)
merges = ["%s %s" % (vocab[ids[i]], vocab[ids[i + 1]]) for i in range(0, len(ids), 2)]
special = {"<unk>": 0, "<s>": 1, "</s>": 2}
tj = {
    "version": "1.0",
    "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True} for s, i in special.items()],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                        {"type": "Replace", "pattern": {"String": " "},
                                                         "content": "\u2581"}]},
    "pre_tokenizer": None,
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                 {"type": "ByteFallback"}, {"type": "Fuse"},
                                                 {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
              "vocab": {s: i for i, s in enumerate(vocab)}, "merges": merges},
}
with open(out, "w", encoding="utf-8") as f:
    json.dump(tj, f, ensure_ascii=False)
print("%s: %d pieces, %d merges" % (out, len(vocab), len(merges)))
