#!/usr/bin/env python3
"""tools/gguf_write.py without llama.cpp (the gguf_write CTest; tests/llama_cpp compares its bytes
with llama.cpp's quantizer where node-llama-cpp is installed): a small Llama written in F32 by the
benchmark's converter, exported by tools/gguf_export.py, written back by gguf_write.py for every
--type; each file must read back (gguf_export's decoders, ggml's values) as the source's weights
quantized by tools/ggml_quantize.py in the format llama.cpp's rules choose, with the source's
configuration, tokenizer keys and q/k row order; and the writer's errors must be errors.
Usage: write_check.py OUT_DIR   (exit 77: numpy missing, skipped)
"""
import os, sys

try:
    import numpy as np
except ImportError:
    sys.exit(77)
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(here, "..", "..", "tools"), os.path.join(here, "..", "..", "benchmarks", "llama_cpp")]
import ggml_quantize, gguf_export, gguf_write, write_models  # noqa: E402
from gguf_reader import GGML_TYPES, read_gguf  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
# d_model 288 (rows not whole 256-value blocks: ggml's fallbacks) and 256-wide FFN rows (k-quants)
write_models.llama("small", out, kvh=2, dim=288, L=3, H=6, F=512, V=320, ctx=64, eps=1e-5, seed=7)
src_gguf, hf = os.path.join(out, "small.gguf"), os.path.join(out, "small_hf.safetensors")
gguf_export.export(src_gguf, hf)
meta0, tensors0, _ = read_gguf(src_gguf)
source = {n: gguf_export.tensor(src_gguf, tensors0, read_gguf(src_gguf)[2], n) for n in tensors0}
failures = 0
for ftype in gguf_write.FTYPES:
    path = os.path.join(out, "small_%s.gguf" % ftype.lower())
    chosen = gguf_write.convert(hf, path, src_gguf, ftype)
    meta, tensors, start = read_gguf(path)
    bad = []
    for name, (dims, t, _) in tensors.items():
        want_t = chosen[name]
        a = source[name]
        want = gguf_export.dequantize(ggml_quantize.quantize(a, want_t), ggml_quantize.TYPES[want_t], a.size).reshape(a.shape)
        got = gguf_export.tensor(path, tensors, start, name)
        if GGML_TYPES[t] != want_t or not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            bad.append(name)
    same_meta = all(meta[k] == meta0[k] for k in meta0 if k.startswith("tokenizer.") or k.startswith("llama."))
    same_config = gguf_export.config_of(meta, tensors) == gguf_export.config_of(meta0, tensors0)
    kinds = sorted({GGML_TYPES[t] for _, t, _ in tensors.values()})
    ok = not bad and same_meta and same_config and meta["general.file_type"] == gguf_write.FTYPES[ftype][0]
    failures += not ok
    print("%-7s %-30s %s" % (ftype, " ".join(kinds), "ok" if ok else "FAIL: %s%s%s" % (
        bad[:3], "" if same_meta else " metadata", "" if same_config else " configuration")))
# the writer's own rules: llama.cpp's Q4_K_M choice for 3 layers (use_more_bits: layer 2's attn_v, ffn_down)
q4km = gguf_write.convert(hf, os.path.join(out, "rules.gguf"), src_gguf, "Q4_K_M")
expect = {"blk.2.attn_v.weight": "Q8_0", "blk.2.ffn_down.weight": "Q6_K", "blk.0.ffn_down.weight": "Q4_K",
          "blk.0.attn_q.weight": "Q5_0", "blk.0.ffn_up.weight": "Q5_0", "output.weight": "Q8_0", "token_embd.weight": "Q5_0",
          "blk.0.attn_norm.weight": "F32"}
for name, t in expect.items():
    if q4km[name] != t:
        failures += 1
        print("Q4_K_M %s: %s, llama.cpp's rules give %s  FAIL" % (name, q4km[name], t))
# errors: a vocabulary of another size, a file without a tokenizer, a format llama.cpp lacks
write_models.llama("other_vocab", out, kvh=1, dim=32, L=1, H=1, F=32, V=300, ctx=16, seed=8)
for args, what in [((hf, os.path.join(out, "x.gguf"), os.path.join(out, "other_vocab.gguf"), "Q8_0"), "a vocabulary of 300 tokens"),
                   ((hf, os.path.join(out, "x.gguf"), os.path.join(here, "..", "data", "gguf", "blocks.gguf"), "Q8_0"), "no tokenizer"),
                   ((hf, os.path.join(out, "x.gguf"), src_gguf, "Q3_K"), "unknown --type")]:
    try:
        gguf_write.convert(*args)
        failures += 1
        print("%s: written  FAIL" % what)
    except ValueError as e:
        print("%s: %s  ok" % (what, e))
# a file without ctformer's llama configuration; a Llama with a tensor llama.cpp's llama lacks
import tokenizer_export  # noqa: E402
sd, md = gguf_write.load_safetensors(hf)
entries = {k: ("F32", list(v.shape), v.astype("<f4").tobytes()) for k, v in sd.items()}
tokenizer_export.save(os.path.join(out, "no_config.safetensors"), entries, {})
tokenizer_export.save(os.path.join(out, "extra.safetensors"), dict(entries, **{"model.layers.0.mlp.bias": ("F32", [4], bytes(16))}), md)
for name, what in [("no_config.safetensors", "no configuration"), ("extra.safetensors", "a tensor llama lacks")]:
    try:
        gguf_write.convert(os.path.join(out, name), os.path.join(out, "x.gguf"), src_gguf, "Q8_0")
        failures += 1
        print("%s: written  FAIL" % what)
    except ValueError as e:
        print("%s: %s  ok" % (what, e))
if os.path.exists(os.path.join(out, "x.gguf")):
    failures += 1
    print("x.gguf written by a failing call  FAIL")
try:
    ggml_quantize.quantize(np.full((1, 256), np.nan, np.float32), "Q4_K")
    failures += 1
    print("NaN quantized  FAIL")
except ValueError as e:
    print("NaN: %s  ok" % e)
sys.exit(1 if failures else 0)
