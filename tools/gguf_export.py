#!/usr/bin/env python3
"""A llama.cpp GGUF file (architecture "llama") for ctformer, with numpy only: prints the ct::Llama
alias ct::load_gguf reads the file into and, given OUT.safetensors, writes the model as ctformer's
exporter does — Hugging Face's names, q/k rows back in Hugging Face's rotate-half order, every
tensor decoded to F32 as ggml's dequantizers compute it (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
Q5_1, Q4_K, Q5_K, Q6_K), the configuration as ctformer.* metadata, and the file's tokenizer as
tables (tools/tokenizer_export.py).

  python3 tools/export.py MODEL.gguf [OUT.safetensors]     (the same)
  python3 tools/gguf_export.py MODEL.gguf [OUT.safetensors]
  python3 tools/gguf_export.py --check BLOCKS.gguf          the decoders against tensors <F>.values
                                                           (tests/data/gguf/blocks.gguf: ggml's own)
"""
import os, sys

try:
    import numpy as np
except ImportError:  # (the --check test is skipped where numpy is missing: CTest's skip code)
    sys.exit(77 if sys.argv[1:2] == ["--check"] else "tools/gguf_export.py needs numpy (Debian: python3-numpy)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_reader import GGML_TYPES, read_gguf  # noqa: E402

BLOCK = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
         12: (256, 144), 13: (256, 176), 14: (256, 210)}
f32 = np.float32


def _k4_scales(scales):  # ggml's get_scale_min_k4 for the 8 sub-blocks: (sc, m), each (blocks, 8)
    s = scales.astype(np.uint32)
    sc, m = np.empty((len(s), 8), np.uint32), np.empty((len(s), 8), np.uint32)
    sc[:, :4], m[:, :4] = s[:, 0:4] & 63, s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)
    m[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc.astype(f32), m.astype(f32)


def _nibbles32(qs):  # Q4_0/Q4_1/Q5_0/Q5_1: element j < 16 the low nibble of byte j, j >= 16 the high of j - 16
    return np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.uint32)


def dequantize(raw, t, n):
    """The n values of tensor data raw in ggml type t, as float32, the way ggml computes them."""
    if t not in BLOCK:
        raise ValueError("ggml type %s is not decoded here" % GGML_TYPES.get(t, t))
    elems, size = BLOCK[t]
    b = np.frombuffer(raw, np.uint8, n // elems * size)
    if t == 0:
        return b.view("<f4").astype(f32)
    if t == 1:
        return b.view("<f2").astype(f32)
    if t == 30:
        return (b.view("<u2").astype(np.uint32) << 16).view(f32)
    layouts = {8: [("d", "<f2"), ("qs", "i1", 32)], 2: [("d", "<f2"), ("qs", "u1", 16)], 3: [("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)],
               6: [("d", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)], 7: [("d", "<f2"), ("m", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)],
               12: [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qs", "u1", 128)],
               13: [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qh", "u1", 32), ("qs", "u1", 128)],
               14: [("ql", "u1", 128), ("qh", "u1", 64), ("sc", "i1", 16), ("d", "<f2")]}
    x = b.view(np.dtype(layouts[t]))
    d = x["d"].astype(f32)[:, None]
    if t == 8:
        return (d * x["qs"].astype(f32)).reshape(-1)
    if t in (2, 3, 6, 7):
        q = _nibbles32(x["qs"])
        if t in (6, 7):
            q |= ((x["qh"][:, None] >> np.arange(32, dtype=np.uint32)) & 1) << 4
        if t == 2:
            return ((q.astype(f32) - f32(8)) * d).reshape(-1)
        if t == 6:
            return ((q.astype(np.int32) - 16).astype(f32) * d).reshape(-1)
        return (q.astype(f32) * d + x["m"].astype(f32)[:, None]).reshape(-1)
    j = np.arange(256)
    if t in (12, 13):
        chunk, r = j // 64, j % 64
        l, sub = r % 32, 2 * (j // 64) + r // 32
        byte = x["qs"][:, 32 * chunk + l].astype(np.uint32)
        q = np.where(r < 32, byte & 0xF, byte >> 4)
        if t == 13:
            q = q + ((x["qh"][:, l].astype(np.uint32) >> sub) & 1) * 16
        sc, m = _k4_scales(x["scales"])
        d1, m1 = d * sc, x["dmin"].astype(f32)[:, None] * m
        return (d1[:, sub] * q.astype(f32) - m1[:, sub]).reshape(-1)
    half, r = j // 128, j % 128
    quarter, l = r // 32, r % 32
    lo = x["ql"][:, 64 * half + l + 32 * (quarter % 2)].astype(np.int32)
    lo = np.where(quarter < 2, lo & 0xF, lo >> 4)
    hi = (x["qh"][:, 32 * half + l].astype(np.int32) >> (2 * quarter)) & 3
    q = (lo | hi << 4) - 32
    sc = x["sc"][:, 8 * half + l // 16 + 2 * quarter].astype(f32)
    return ((d * sc) * q.astype(f32)).reshape(-1)


def tensor(path, tensors, start, name):
    dims, t, off = tensors[name]
    n = int(np.prod(dims))
    elems, size = BLOCK.get(t, (1, 0))
    with open(path, "rb") as f:
        f.seek(start + off)
        raw = f.read(n // elems * size)
    return dequantize(raw, t, n).reshape(list(reversed(dims)))


def config_of(meta, tensors):
    a = lambda k, d=None: meta.get("llama." + k, d)  # noqa: E731
    if meta.get("general.architecture") != "llama":
        raise ValueError("general.architecture %r: ct::load_gguf and this exporter read 'llama'" % meta.get("general.architecture"))
    D, H = a("embedding_length"), a("attention.head_count")
    vocab = a("vocab_size") or len(meta.get("tokenizer.ggml.tokens", [])) or tensors["token_embd.weight"][0][1]
    theta = float(a("rope.freq_base", 10000.0))
    return {"kind": "llama", "d_model": D, "heads": H, "kv_heads": a("attention.head_count_kv", H), "ffn_dim": a("feed_forward_length"),
            "activation": "silu", "gated": True, "norm": "rms_norm", "norm_first": True,
            "eps": float(np.float32(a("attention.layer_norm_rms_epsilon"))), "attn_bias": False, "ffn_bias": False,
            "norm_bias": False, "rope": "rotate_half", "rope_theta": int(theta), "rotary_dim": a("rope.dimension_count", D // H),
            "param_names": "hugging_face", "layers": a("block_count"), "final_norm": True, "vocab": vocab,
            "context": a("context_length"), "positions": "rotary", "tied": "output.weight" not in tensors}


def eps_option(eps):  # eps as ct::norm_eps<N, 10^k> (the file stores a float: 1e-5 is 9.99999975e-06)
    for k in range(12):
        n = round(eps * 10 ** k)
        if n >= 1 and abs(n / 10 ** k - eps) <= 1e-6 * eps:
            return "ct::norm_eps<%d, %d>" % (n, 10 ** k)
    raise ValueError("rms eps %r" % eps)


def alias(c, name="Model"):
    o = ["ct::d_model<%d>" % c["d_model"], "ct::heads<%d>" % c["heads"]]
    if c["kv_heads"] != c["heads"]:
        o.append("ct::kv_heads<%d>" % c["kv_heads"])
    o += ["ct::ffn_dim<%d>" % c["ffn_dim"], eps_option(c["eps"])]
    if c["rope_theta"] != 10000 or c["rotary_dim"] != c["d_model"] // c["heads"]:
        o.append("ct::rope<ct::rotate_half, %d, %d>" % (c["rope_theta"], c["rotary_dim"]))
    if c["tied"]:
        o.append("ct::tied_embeddings<true>")
    return "using %s = ct::Llama<%d, %d, %d, %s>;" % (name, c["vocab"], c["context"], c["layers"], ", ".join(o))


# ct::weights<...> keeping each weight matrix's tensors as stored (io/ggml_blocks.hpp's stored_formats)
MATRICES = ["q", "k", "v", "o", "gate", "up", "down", "head"]
MATRIX_KEYS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, BF16 = 0, 1, 2, 3, 6, 7, 8, 12, 13, 14, 30
READ = {0, 1, 2, 3, 6, 7, 8, 12, 13, 14, 30}  # F32 F16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K BF16


def stored_format(types):  # the fewest bits a weight that holds every format in `types` as stored
    if not types <= READ:
        return None
    if types == {BF16}:
        return "ct::bf16"
    if types & {F32, F16, BF16}:
        return "ct::dense"
    # (bits a weight: the integer's, and 32 a group for each scale and minimum, 16 as halves — the file's own
    # halves where they are the scale and minimum; io/ggml_blocks.hpp's order)
    # (k-quants alone: their own two levels, ct::kscale — an int8 a run, a half a 256)
    for fmt, ok in (("ct::int4_group_min<32, ct::kscale>", {Q4_K}), ("ct::int6_group_min<32, ct::kscale>", {Q4_K, Q5_K}),
                    ("ct::int6_group<16, ct::kscale>", {Q6_K}), ("ct::int6_group_min<16, ct::kscale>", {Q4_K, Q5_K, Q6_K}),
                    ("ct::int4_group<32, ct::f16>", {Q4_0}), ("ct::int4_group_min<32, ct::f16>", {Q4_1}),
                    ("ct::int4_group_min<32>", {Q4_0, Q4_1, Q4_K}), ("ct::int6_group<32, ct::f16>", {Q4_0, Q5_0}),
                    ("ct::int6_group_min<32, ct::f16>", {Q4_1, Q5_1}), ("ct::int6_group<16>", {Q4_0, Q5_0, Q6_K}),
                    ("ct::int6_group_min<32>", {Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K}), ("ct::int8_group<32, ct::f16>", {Q4_0, Q5_0, Q8_0}),
                    ("ct::int8_group_min<32, ct::f16>", {Q4_0, Q5_0, Q8_0, Q4_1, Q5_1})):
        if types <= ok:
            return fmt
    if Q8_0 not in types:
        return "ct::int6_group_min<16>"
    if types <= {Q4_0, Q5_0, Q8_0, Q6_K}:
        return "ct::int8_group<16>"
    return "ct::int8_group_min<16>" if Q6_K in types else "ct::int8_group_min<32>"


def stored_weights(tensors):
    tied = "output.weight" not in tensors
    types = [set() for _ in MATRICES]
    for name, (_, t, _) in tensors.items():
        parts = name.split(".")
        if name == "output.weight" or (tied and name == "token_embd.weight"):
            types[7].add(t)
        elif parts[0] == "blk" and len(parts) == 4 and parts[2] in MATRIX_KEYS and parts[3] == "weight":
            types[MATRIX_KEYS.index(parts[2])].add(t)
    f = [stored_format(s) if s else "ct::dense" for s in types]
    if None in f:
        return None
    best = max(range(8), key=lambda i: (f.count(f[i]), -i))
    if f.count(f[best]) == 8 and f[best] == "ct::dense":
        return None
    return "ct::weights<%s>" % ", ".join([f[best]] + ["ct::%s_weights<%s>" % (MATRICES[i], f[i]) for i in range(8) if f[i] != f[best]])


# llama.cpp's names -> Hugging Face's (per layer: blk.{i}.<key>)
LAYER = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
         "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
         "ffn_norm": "post_attention_layernorm"}


def unpermute(w, heads):  # llama.cpp's interleaved pairs -> Hugging Face's rotate-half rows
    out, d = w.shape
    return w.reshape(heads, out // heads // 2, 2, d).swapaxes(1, 2).reshape(out, d)


def state_dict(path, c):
    meta, tensors, start = read_gguf(path)
    sd = {}
    for name in tensors:
        parts = name.split(".")
        if name == "token_embd.weight":
            hf = "model.embed_tokens.weight"
        elif name == "output_norm.weight":
            hf = "model.norm.weight"
        elif name == "output.weight":
            hf = "lm_head.weight"
        elif parts[0] == "blk" and len(parts) == 4 and parts[2] in LAYER and parts[3] == "weight":
            hf = "model.layers.%s.%s.weight" % (parts[1], LAYER[parts[2]])
        else:
            raise ValueError("%s: tensor %s is not a llama model's" % (path, name))
        w = tensor(path, tensors, start, name)
        if parts[-2] in ("attn_q", "attn_k"):
            w = unpermute(w, c["heads"] if parts[-2] == "attn_q" else c["kv_heads"])
        sd[hf] = np.ascontiguousarray(w, dtype=f32)
    return sd


def export(path, out=None, name="Model"):
    meta, tensors, _ = read_gguf(path)
    c = config_of(meta, tensors)
    if out:
        import tokenizer_export  # (its writer: tensors as (dtype, shape, bytes))
        files = {k: ("F32", list(v.shape), v.tobytes()) for k, v in state_dict(path, c).items()}
        md = {"ctformer." + k: (str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)) for k, v in c.items()}
        md.update({"ctformer.dtype": "float32", "ctformer.weight_format": "dense", "ctformer.exporter": "tools/gguf_export.py"})
        if "tokenizer.ggml.tokens" in meta:
            tables, tmeta = tokenizer_export.tables(tokenizer_export.read_gguf_tokenizer(path))
            files.update(tables)
            md.update(tmeta)
        tokenizer_export.save(out, files, md)
    dense = alias(c, name)
    stored = stored_weights(tensors)
    if not stored:
        return dense
    return "%s\n// as stored (each weight matrix's tensors in the format that holds their blocks: the same values):\n%s, %s>;" % (
        dense, dense[:-2], stored)


def check(path):
    """Every tensor <F> against <F>.values: the decoders here against ggml's (bit for bit)."""
    meta, tensors, start = read_gguf(path)
    bad = 0
    for name, (dims, t, _) in tensors.items():
        if name.endswith(".values"):
            continue
        got, want = tensor(path, tensors, start, name), tensor(path, tensors, start, name + ".values")
        off = int(np.sum(got.view(np.uint32) != want.view(np.uint32)))
        print("%-14s %-5s %d of %d values differ" % (name, GGML_TYPES[t], off, got.size))
        bad += off
    return bad == 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--check"]:
        sys.exit(0 if check(args[1]) else 1)
    if not args:
        sys.exit(__doc__)
    print(export(args[0], args[1] if len(args) > 1 else None))
