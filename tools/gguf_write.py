#!/usr/bin/env python3
"""A Llama from ctformer (or Hugging Face) into the GGUF file llama.cpp, ollama and LM Studio run:
the way back from a model trained, fine-tuned or adapter-merged with ctformer. numpy only.

  python3 tools/gguf_write.py MODEL OUT.gguf --vocab VOCAB.gguf [--type Q4_K_M]

MODEL   a safetensors file of a Llama with ctformer's configuration (tools/export.py's, or
        tools/gguf_export.py's from a GGUF file: Hugging Face's names, ctformer.* metadata), or a
        Hugging Face directory (config.json + model.safetensors)
--vocab a GGUF file whose tokenizer (every tokenizer.* key, as stored) the new file carries:
        llama.cpp needs one; the file the model came from, typically
--type  F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S, Q6_K (default
        Q4_K_M): each tensor's format chosen by llama.cpp's quantize rules (llama_tensor_get_type:
        the output in Q6_K, attn_v and ffn_down of some layers in Q6_K for the _M mixes, ggml's
        fallbacks where a row is not whole 256-value blocks), quantized by ggml's reference
        quantizers (tools/ggml_quantize.py: the same bytes as llama.cpp's quantize tool); the
        vectors (norms) stay F32. q and k rows are permuted into llama.cpp's RoPE layout.

The file loads back with ct::load_gguf / tools/gguf_export.py (the values ggml decodes); the
gguf_agreement test (tests/llama_cpp) checks the bytes against llama.cpp's own quantizer and
llama.cpp's greedy tokens on the files written here.
"""
import argparse, json, os, struct, sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggml_quantize import BLOCK, TYPES, quantize  # noqa: E402
from gguf_reader import read_gguf  # noqa: E402

# llama_ftype of each --type, and the format most tensors get
FTYPES = {"F32": (0, "F32"), "F16": (1, "F16"), "Q4_0": (2, "Q4_0"), "Q4_1": (3, "Q4_1"), "Q8_0": (7, "Q8_0"),
          "Q5_0": (8, "Q5_0"), "Q5_1": (9, "Q5_1"), "Q4_K_S": (14, "Q4_K"), "Q4_K_M": (15, "Q4_K"),
          "Q5_K_S": (16, "Q5_K"), "Q5_K_M": (17, "Q5_K"), "Q6_K": (18, "Q6_K")}
FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}  # (llama.cpp's, for rows not whole super-blocks)
U32, F32V, STR, ARR = 4, 6, 8, 9
HF = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
      "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
      "post_attention_layernorm": "ffn_norm"}


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensor_type(name, cols, ftype, layers, tied):
    """llama.cpp's llama_tensor_get_type for a llama model without experts (no importance matrix)."""
    default = FTYPES[ftype][1]
    if default in ("F32", "F16"):
        return default
    t = default
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        t = "Q8_0" if cols % BLOCK[default] else default if default == "Q8_0" else "Q6_K"
    elif name == "token_embd.weight":
        pass
    elif "attn_v.weight" in name:
        if ftype in ("Q4_K_M", "Q5_K_M") and use_more_bits(layer, layers):
            t = "Q6_K"
        elif ftype == "Q4_K_S" and layer < 4:
            t = "Q5_K"
    elif "ffn_down" in name:
        if ftype in ("Q4_K_M", "Q5_K_M") and use_more_bits(layer, layers):
            t = "Q6_K"
        elif ftype == "Q4_K_S" and layer < layers // 8:
            t = "Q5_K"
    if cols % BLOCK[t]:
        t = FALLBACK.get(t)
        if t is None or cols % BLOCK[t]:
            t = "F16"
    return t


def load_safetensors(path):
    """{name: float32 array} and the __metadata__ of a safetensors file (F32, F16, BF16, F64)."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        raw = np.frombuffer(data, np.uint8, b - a, 8 + n + a)
        if e["dtype"] == "BF16":
            v = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] in ("F32", "F16", "F64"):
            v = raw.view({"F32": "<f4", "F16": "<f2", "F64": "<f8"}[e["dtype"]]).astype(np.float32)
        else:
            continue  # (integer tensors: a tokenizer's tables, not the model's)
        out[name] = v.reshape(e["shape"])
    return out, header.get("__metadata__", {})


def read_model(src):
    """(Hugging Face state_dict as float32 arrays, configuration as llama.* values)."""
    if os.path.isdir(src):
        sd, _ = load_safetensors(os.path.join(src, "model.safetensors"))
        with open(os.path.join(src, "config.json")) as f:
            c = json.load(f)
        H = c["num_attention_heads"]
        cfg = {"embedding_length": c["hidden_size"], "block_count": c["num_hidden_layers"], "attention.head_count": H,
               "attention.head_count_kv": c.get("num_key_value_heads", H), "feed_forward_length": c["intermediate_size"],
               "attention.layer_norm_rms_epsilon": c.get("rms_norm_eps", 1e-6), "rope.freq_base": c.get("rope_theta", 10000.0),
               "rope.dimension_count": c["hidden_size"] // H, "context_length": c.get("max_position_embeddings", 2048),
               "vocab_size": c["vocab_size"]}
        return sd, cfg
    sd, md = load_safetensors(src)
    if md.get("ctformer.kind") != "llama":
        raise ValueError("%s: no ctformer.kind = llama in its metadata (write it with tools/export.py)" % src)
    g = lambda k: md["ctformer." + k]  # noqa: E731
    if g("rope") != "rotate_half" or g("norm") != "rms_norm" or g("activation") != "silu":
        raise ValueError("%s: llama.cpp's llama architecture is rotate-half RoPE, RMSNorm and SiLU gating" % src)
    cfg = {"embedding_length": int(g("d_model")), "block_count": int(g("layers")), "attention.head_count": int(g("heads")),
           "attention.head_count_kv": int(g("kv_heads")), "feed_forward_length": int(g("ffn_dim")),
           "attention.layer_norm_rms_epsilon": float(g("eps")), "rope.freq_base": float(g("rope_theta")),
           "rope.dimension_count": int(g("rotary_dim")), "context_length": int(g("context")), "vocab_size": int(g("vocab"))}
    return sd, cfg


def permute_qk(w, heads):  # Hugging Face's rotate-half rows -> llama.cpp's interleaved pairs (its converter's)
    out, d = w.shape
    return w.reshape(heads, 2, out // heads // 2, d).swapaxes(1, 2).reshape(out, d)


def gguf_tensors(sd, cfg):
    """[(llama.cpp name, float32 array)] in llama.cpp's converter's order."""
    out = [("token_embd.weight", sd["model.embed_tokens.weight"])]
    for i in range(cfg["block_count"]):
        for hf, gg in [("input_layernorm", "attn_norm"), ("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
                       ("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"), ("post_attention_layernorm", "ffn_norm"),
                       ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down")]:
            w = sd["model.layers.%d.%s.weight" % (i, hf)]
            if gg in ("attn_q", "attn_k"):
                w = permute_qk(w, cfg["attention.head_count" if gg == "attn_q" else "attention.head_count_kv"])
            out.append(("blk.%d.%s.weight" % (i, gg), w))
    out.append(("output_norm.weight", sd["model.norm.weight"]))
    if "lm_head.weight" in sd:
        out.append(("output.weight", sd["lm_head.weight"]))
    known = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    known |= {"model.layers.%d.%s.weight" % (i, h) for i in range(cfg["block_count"]) for h in HF}
    extra = sorted(k for k in sd if k not in known and "rotary_emb" not in k and not k.startswith("tokenizer."))
    if extra:
        raise ValueError("tensors a llama model does not have: %s" % ", ".join(extra[:5]))
    return out


def kv(key, typ, val, elem=None):
    s = lambda b: struct.pack("<Q", len(b)) + b  # noqa: E731
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def one(t, v):
        return s(v.encode("utf-8", "surrogateescape")) if t == STR else struct.pack(scalar[t], v)
    out = s(key.encode()) + struct.pack("<I", typ)
    if typ == ARR:
        return out + struct.pack("<IQ", elem, len(val)) + b"".join(one(elem, v) for v in val)
    return out + one(typ, val)


def write(path, meta, tensors, align=32):
    """meta: [(key, gguf type, value, array element type)]; tensors: [(name, array, ggml type name)]."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(kv(*m) for m in meta)
    infos, off, blobs = b"", 0, []
    for name, a, t in tensors:
        b = quantize(a, t)
        infos += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", a.ndim)
        infos += b"".join(struct.pack("<Q", d) for d in reversed(a.shape)) + struct.pack("<IQ", TYPES[t], off)
        off += (len(b) + align - 1) // align * align
        blobs.append(b)
    with open(path, "wb") as f:
        f.write(head + infos)
        f.write(b"\0" * ((align - f.tell() % align) % align))
        for b in blobs:
            f.write(b + b"\0" * ((align - len(b) % align) % align))


def vocabulary(path):
    """Every tokenizer.* key of a GGUF file, with the types it was stored in."""
    types = {}
    meta, _, _ = read_gguf(path, types)
    keys = [k for k in meta if k.startswith("tokenizer.")]
    if "tokenizer.ggml.model" not in keys:
        raise ValueError("%s: no tokenizer.ggml.model (llama.cpp needs a tokenizer)" % path)
    return [(k, types[k][0], meta[k], types[k][1]) for k in keys]


def convert(src, out, vocab, ftype="Q4_K_M", name=None):
    """Writes OUT; returns {tensor name: ggml type name}."""
    if ftype not in FTYPES:
        raise ValueError("--type %s: one of %s" % (ftype, ", ".join(FTYPES)))
    sd, cfg = read_model(src)
    tensors = gguf_tensors(sd, cfg)
    tied = not any(n == "output.weight" for n, _ in tensors)
    if len(sd["model.embed_tokens.weight"]) != cfg["vocab_size"]:
        raise ValueError("embedding rows %d, vocabulary %d" % (len(sd["model.embed_tokens.weight"]), cfg["vocab_size"]))
    typed = [(n, a, tensor_type(n, a.shape[-1], ftype, cfg["block_count"], tied) if a.ndim == 2 else "F32") for n, a in tensors]
    ints = {"embedding_length", "block_count", "attention.head_count", "attention.head_count_kv", "feed_forward_length",
            "rope.dimension_count", "context_length", "vocab_size"}
    meta = [("general.architecture", STR, "llama", None), ("general.name", STR, name or os.path.basename(out).rsplit(".", 1)[0], None)]
    meta += [("llama." + k, U32 if k in ints else F32V, v, None) for k, v in cfg.items()]
    meta += [("general.file_type", U32, FTYPES[ftype][0], None), ("general.quantization_version", U32, 2, None)]
    voc = vocabulary(vocab)
    tokens = [v for k, _, v, _ in voc if k == "tokenizer.ggml.tokens"]
    if tokens and len(tokens[0]) != cfg["vocab_size"]:
        raise ValueError("%s: %d tokens for a vocabulary of %d" % (vocab, len(tokens[0]), cfg["vocab_size"]))
    write(out, meta + voc, typed)
    return {n: t for n, _, t in typed}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--vocab", required=True, help="a GGUF file whose tokenizer.* keys the new file carries")
    p.add_argument("--type", default="Q4_K_M", choices=list(FTYPES))
    p.add_argument("--name")
    a = p.parse_args(argv)
    types = convert(a.model, a.out, a.vocab, a.type, a.name)
    counts = {}
    for t in types.values():
        counts[t] = counts.get(t, 0) + 1
    print("%s: %s, %s" % (a.out, a.type, ", ".join("%d %s" % (n, t) for t, n in sorted(counts.items()))))


if __name__ == "__main__":
    main()
