#!/usr/bin/env python3
"""The decoding benchmark's models, identical for llama.cpp and ctformer (random weights, seeded).

For each model, writes OUT/<name>.gguf (llama.cpp: GGUF v3, F32, a synthetic tokenizer of the right
size: the benchmark feeds token ids; stories15M also as OUT/stories15M_q8_0.gguf and _q4_0.gguf,
its matrices quantized by ggml's reference rules, and as _q4_k_m.gguf, llama.cpp's Q4_K_M mix
written by tools/gguf_write.py — the bytes llama.cpp's quantize tool writes: at d_model 288 most
matrices fall back to Q5_0, ffn_down is Q4_K / Q6_K, the output Q8_0) and OUT/<name>.safetensors (ctformer: Hugging Face's
LlamaForCausalLM names, or the GPT of docs/models.md). Models (benchmarks/bench_models.cpp has
the same shapes):
  stories15M      llama: dim 288, 6 layers, 6 heads, 6 kv heads, hidden 768, vocab 32000, ctx 256
  stories15M_gqa  the same with 2 kv heads
  gpt2_d256       gpt2: d 256, 4 layers, 4 heads, ffn 1024, vocab 50257, ctx 256, untied head

The weights are written as Hugging Face stores them; llama.cpp's converter permutes the q/k rows
of a Hugging Face checkpoint for its RoPE layout, which is done here too (so both compute the same
function); timing does not depend on it.
Usage: write_models.py OUT_DIR   (needs numpy only)
"""
import json, os, struct, sys
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import gguf_write  # noqa: E402

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_STR, GGUF_ARR = 4, 5, 6, 8, 9


def s(b):
    b = b.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, val):
    out = s(key) + struct.pack("<I", typ)
    if typ == GGUF_U32:
        return out + struct.pack("<I", val)
    if typ == GGUF_F32:
        return out + struct.pack("<f", val)
    if typ == GGUF_STR:
        return out + s(val)
    elem, items = val
    out += struct.pack("<IQ", elem, len(items))
    fmt = {GGUF_I32: "<i", GGUF_F32: "<f"}
    return out + b"".join(s(x) if elem == GGUF_STR else struct.pack(fmt[elem], x) for x in items)


GGML_F32, GGML_Q4_0, GGML_Q8_0 = 0, 2, 8
FILE_TYPE = {GGML_F32: 0, GGML_Q4_0: 2, GGML_Q8_0: 7}  # llama_ftype: all F32, mostly Q4_0, mostly Q8_0


def typed_meta(meta):  # write_models' (key, type, value | (element type, items)) as tools/gguf_write.py's
    return [(k, t, v[1], v[0]) if t == GGUF_ARR else (k, t, v, None) for k, t, v in meta]


def write_gguf(path, meta, tensors, typ=GGML_F32):
    """meta: [(key, type, value)], tensors: [(name, float32 array (rows, cols) or (n,))]; the
    matrices in typ (F32, Q8_0 or Q4_0: ggml's reference quantizers, tools/ggml_quantize.py),
    vectors in F32."""
    name = {GGML_F32: "F32", GGML_Q4_0: "Q4_0", GGML_Q8_0: "Q8_0"}[typ]
    gguf_write.write(path, typed_meta(meta), [(n, a, name if a.ndim == 2 and a.shape[1] % 32 == 0 else "F32") for n, a in tensors])


def write_safetensors(path, tensors):
    header, off = {}, 0
    for name, a in tensors:
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, a in tensors:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def byte_unicode():  # GPT-2's byte-level alphabet (its BPE vocabulary starts with these 256 tokens)
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def tokenizer(kind, V):
    if kind == "llama":  # SentencePiece: unk, bos, eos, 256 byte tokens, then plain pieces
        toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)]
        types = [2, 3, 3] + [6] * 256
        toks += ["\u2581t%d" % i for i in range(V - len(toks))]
        types += [1] * (V - len(types))
        return [("tokenizer.ggml.model", GGUF_STR, "llama"), ("tokenizer.ggml.tokens", GGUF_ARR, (GGUF_STR, toks)),
                ("tokenizer.ggml.scores", GGUF_ARR, (GGUF_F32, [0.0] * V)),
                ("tokenizer.ggml.token_type", GGUF_ARR, (GGUF_I32, types)),
                ("tokenizer.ggml.bos_token_id", GGUF_U32, 1), ("tokenizer.ggml.eos_token_id", GGUF_U32, 2)]
    toks = byte_unicode()
    toks += ["t%d" % i for i in range(V - len(toks) - 1)] + ["<|endoftext|>"]
    return [("tokenizer.ggml.model", GGUF_STR, "gpt2"), ("tokenizer.ggml.tokens", GGUF_ARR, (GGUF_STR, toks)),
            ("tokenizer.ggml.merges", GGUF_ARR, (GGUF_STR, ["t 0"])),
            ("tokenizer.ggml.bos_token_id", GGUF_U32, V - 1), ("tokenizer.ggml.eos_token_id", GGUF_U32, V - 1)]


def permute_qk(w, heads):  # Hugging Face rotate-half rows -> llama.cpp's interleaved pairs
    out, d = w.shape
    return w.reshape(heads, 2, out // heads // 2, d).swapaxes(1, 2).reshape(out, d)


def llama(name, out, kvh, dim=288, L=6, H=6, F=768, V=32000, ctx=256, eps=1e-5, seed=1, quantized=(), std=0.02, head_std=None):
    rng = np.random.default_rng(seed)
    r = lambda *sh: (rng.standard_normal(sh) * (head_std if head_std and sh[0] == V else std)).astype(np.float32)
    Dh = dim // H
    hf = [("model.embed_tokens.weight", r(V, dim))]
    gg = [("token_embd.weight", hf[0][1])]
    for i in range(L):
        p = "model.layers.%d." % i
        w = {"q": r(dim, dim), "k": r(kvh * Dh, dim), "v": r(kvh * Dh, dim), "o": r(dim, dim),
             "gate": r(F, dim), "up": r(F, dim), "down": r(dim, F),
             "n1": (1 + r(dim)).astype(np.float32), "n2": (1 + r(dim)).astype(np.float32)}
        hf += [(p + "self_attn.q_proj.weight", w["q"]), (p + "self_attn.k_proj.weight", w["k"]),
               (p + "self_attn.v_proj.weight", w["v"]), (p + "self_attn.o_proj.weight", w["o"]),
               (p + "mlp.gate_proj.weight", w["gate"]), (p + "mlp.up_proj.weight", w["up"]),
               (p + "mlp.down_proj.weight", w["down"]), (p + "input_layernorm.weight", w["n1"]),
               (p + "post_attention_layernorm.weight", w["n2"])]
        b = "blk.%d." % i
        gg += [(b + "attn_norm.weight", w["n1"]), (b + "attn_q.weight", permute_qk(w["q"], H)),
               (b + "attn_k.weight", permute_qk(w["k"], kvh)), (b + "attn_v.weight", w["v"]),
               (b + "attn_output.weight", w["o"]), (b + "ffn_norm.weight", w["n2"]),
               (b + "ffn_gate.weight", w["gate"]), (b + "ffn_up.weight", w["up"]), (b + "ffn_down.weight", w["down"])]
    norm, head = (1 + r(dim)).astype(np.float32), r(V, dim)
    hf += [("model.norm.weight", norm), ("lm_head.weight", head)]
    gg += [("output_norm.weight", norm), ("output.weight", head)]
    a = "llama."
    meta = [("general.architecture", GGUF_STR, "llama"), ("general.name", GGUF_STR, name),
            ("general.file_type", GGUF_U32, 0), (a + "context_length", GGUF_U32, ctx),
            (a + "embedding_length", GGUF_U32, dim), (a + "block_count", GGUF_U32, L),
            (a + "feed_forward_length", GGUF_U32, F), (a + "attention.head_count", GGUF_U32, H),
            (a + "attention.head_count_kv", GGUF_U32, kvh), (a + "attention.layer_norm_rms_epsilon", GGUF_F32, eps),
            (a + "rope.dimension_count", GGUF_U32, Dh), (a + "rope.freq_base", GGUF_F32, 10000.0)]
    write_gguf(os.path.join(out, name + ".gguf"), meta + tokenizer("llama", V), gg)
    for typ, suffix in quantized:  # the same weights for llama.cpp's quantized formats
        if typ in gguf_write.FTYPES:  # a mix: llama.cpp's choice per tensor (tools/gguf_write.py)
            typed = [m if m[0] != "general.file_type" else (m[0], m[1], gguf_write.FTYPES[typ][0], None)
                     for m in typed_meta(meta + tokenizer("llama", V))]
            gguf_write.write(os.path.join(out, name + suffix + ".gguf"), typed,
                             [(n, a, gguf_write.tensor_type(n, a.shape[-1], typ, L, False) if a.ndim == 2 else "F32") for n, a in gg])
            continue
        qmeta = [m if m[0] != "general.file_type" else (m[0], m[1], FILE_TYPE[typ]) for m in meta]
        write_gguf(os.path.join(out, name + suffix + ".gguf"), qmeta + tokenizer("llama", V), gg, typ)
    write_safetensors(os.path.join(out, name + ".safetensors"), hf)


def gpt2(name, out, D=256, L=4, H=4, F=1024, V=50257, ctx=256, seed=2):
    rng = np.random.default_rng(seed)
    r = lambda *sh: (rng.standard_normal(sh) * 0.02).astype(np.float32)
    one = lambda n: (1 + r(n)).astype(np.float32)
    ct = [("wte.weight", r(V, D)), ("wpe.weight", r(ctx, D))]
    gg = [("token_embd.weight", ct[0][1]), ("position_embd.weight", ct[1][1])]
    for i in range(L):
        p, b = "transformer.layers.%d." % i, "blk.%d." % i
        w = [("self_attn.in_proj_weight", "attn_qkv.weight", r(3 * D, D)), ("self_attn.in_proj_bias", "attn_qkv.bias", r(3 * D)),
             ("self_attn.out_proj.weight", "attn_output.weight", r(D, D)), ("self_attn.out_proj.bias", "attn_output.bias", r(D)),
             ("linear1.weight", "ffn_up.weight", r(F, D)), ("linear1.bias", "ffn_up.bias", r(F)),
             ("linear2.weight", "ffn_down.weight", r(D, F)), ("linear2.bias", "ffn_down.bias", r(D)),
             ("norm1.weight", "attn_norm.weight", one(D)), ("norm1.bias", "attn_norm.bias", r(D)),
             ("norm2.weight", "ffn_norm.weight", one(D)), ("norm2.bias", "ffn_norm.bias", r(D))]
        ct += [(p + c, a) for c, _, a in w]
        gg += [(b + g, a) for _, g, a in w]
    nw, nb, head = one(D), r(D), r(V, D)
    ct += [("transformer.norm.weight", nw), ("transformer.norm.bias", nb), ("lm_head.weight", head)]
    gg += [("output_norm.weight", nw), ("output_norm.bias", nb), ("output.weight", head)]
    a = "gpt2."
    meta = [("general.architecture", GGUF_STR, "gpt2"), ("general.name", GGUF_STR, name),
            ("general.file_type", GGUF_U32, 0), (a + "context_length", GGUF_U32, ctx),
            (a + "embedding_length", GGUF_U32, D), (a + "block_count", GGUF_U32, L),
            (a + "feed_forward_length", GGUF_U32, F), (a + "attention.head_count", GGUF_U32, H),
            (a + "attention.layer_norm_epsilon", GGUF_F32, 1e-5)]
    write_gguf(os.path.join(out, name + ".gguf"), meta + tokenizer("gpt2", V), gg)
    write_safetensors(os.path.join(out, name + ".safetensors"), ct)


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    llama("stories15M", out, 6, quantized=[(GGML_Q8_0, "_q8_0"), (GGML_Q4_0, "_q4_0"), ("Q4_K_M", "_q4_k_m")])
    llama("stories15M_gqa", out, 2)
    gpt2("gpt2_d256", out)
    print("wrote", out)
