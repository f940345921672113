#!/usr/bin/env python3
"""Exports a PyTorch model to a safetensors file ctformer loads, with its configuration.

The file holds the model's state_dict under its PyTorch / Hugging Face names and, in __metadata__,
every configuration field as "ctformer.<field>" strings; ctformer's load_state_dict compares them
with the C++ type and refuses a file written for another configuration (errc::config_mismatch:
"heads: file 8, type 4"). The matching C++ type alias is printed (or written with --header).

Supported (Debian's python3-torch only; no safetensors package needed):
  torch.nn.TransformerDecoderLayer         -> ct::DecoderLayer<...>
  torch.nn.TransformerEncoderLayer         -> ct::DecoderOnlyBlock<...> (a GPT-style block)
  torch.nn.TransformerDecoder              -> ct::DecoderStack<ct::DecoderLayer<...>, N, final_norm>
  the GPT of docs/models.md (wte, wpe, transformer, lm_head)      -> ct::GPT<...>
  a Llama-family model (model.embed_tokens, model.layers, model.norm, lm_head; Hugging Face's
    LlamaForCausalLM or the same structure), or a Hugging Face directory (config.json +
    model.safetensors / pytorch_model.bin)                         -> ct::Llama<...>

Command:  export.py MODEL OUT.safetensors [--header OUT.hpp] [--name Alias] [--config CONFIG.json]
                    [--weights bf16 | int8_per_channel | int8_group<G> | int6_group<G> | int4_group<G>]
                    (the grouped ones also as int8_group<G, f16>, ...: scales as halves, F16 in the file)
          MODEL: a directory (Hugging Face), a file torch.load reads into a module, or a state_dict
          file with --config (a JSON object of ctformer's fields: kind, d_model, heads, ...).
          --weights: the weight matrices quantized exactly as ctformer quantizes at load, stored as
          ct::weights<...> reads them back (docs/weights.md, "Quantized weights"); the alias says so.
GGUF:     export.py MODEL.gguf [OUT.safetensors]   a llama.cpp file (architecture llama): prints the
          alias ct::load_gguf reads it into; with OUT, writes it as this exporter does (Hugging Face
          names, q/k rows un-permuted, values decoded to F32 as ggml does, its tokenizer as tables;
          tools/gguf_export.py, numpy only). Back to GGUF (llama.cpp's per-tensor formats, its
          quantize tool's bytes): tools/gguf_write.py MODEL OUT.gguf --vocab VOCAB.gguf --type Q4_K_M.
Tokenizer: export.py --tokenizer SRC OUT.safetensors [--header OUT.hpp --name NAME]
          SRC: a SentencePiece .model, a Hugging Face tokenizer.json (or a directory holding one),
          a llama.cpp .gguf (its tokenizer.ggml.* keys), or a directory with GPT-2's encoder.json +
          vocab.bpe (tools/tokenizer_export.py; no torch).
Module:   import export; export.export(module, "out.safetensors") -> the C++ alias (a string);
          export.export(module, path, config={...}) for a Llama-like module without .config;
          export.export(module, path, weights="int8_per_channel").
"""
import argparse, fractions, json, math, os, struct, sys

if __name__ == "__main__" and "--tokenizer" in sys.argv[1:]:  # (tables only: no torch needed)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tokenizer_export
    tokenizer_export.main([a for a in sys.argv[1:] if a != "--tokenizer"])
    sys.exit(0)

if __name__ == "__main__" and sys.argv[1:2] and sys.argv[1].endswith(".gguf"):  # (numpy only: tools/gguf_export.py)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gguf_export
    print(gguf_export.export(*sys.argv[1:3]))
    sys.exit(0)

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_export  # (the safetensors writer, the tokenizer tables)

F = torch.nn.functional
DT = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
      torch.int64: "I64", torch.int32: "I32", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def save_safetensors(path, tensors, metadata):
    """torch tensors (and already laid out (dtype, shape, bytes) entries) to one file."""
    raw = {}
    for name, t in tensors.items():
        if isinstance(t, tuple):
            raw[name] = t
            continue
        t = t.detach().contiguous().cpu()
        raw[name] = (DT[t.dtype], list(t.shape), (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes())
    tokenizer_export.save(path, raw, metadata)


def load_safetensors(path):
    """A safetensors file's tensors (F32/F64/F16/BF16/I64/I32), without the safetensors package."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    inv = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "I64": torch.int64,
           "I32": torch.int32}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        raw = bytearray(data[8 + n + a:8 + n + b])
        if e["dtype"] == "BF16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=inv[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out


# ---- Configuration of each supported kind: ctformer's field names (layer/config.hpp: describe) ----
def activation_of(layer):
    act = getattr(layer, "activation", None)
    if act is F.relu or getattr(layer, "activation_relu_or_gelu", 0) == 1:
        return "relu"
    if act is F.gelu or getattr(layer, "activation_relu_or_gelu", 0) == 2:
        return "gelu"
    if isinstance(act, torch.nn.GELU):
        return "gelu_tanh" if act.approximate == "tanh" else "gelu"
    if isinstance(act, torch.nn.ReLU):
        return "relu"
    raise ValueError("export: unsupported activation %r (relu and gelu are)" % (act,))


def torch_layer_config(layer):
    cross = isinstance(layer, torch.nn.TransformerDecoderLayer)
    sa = layer.self_attn
    return {
        "kind": "decoder_layer" if cross else "decoder_block",
        "d_model": sa.embed_dim, "heads": sa.num_heads, "kv_heads": sa.num_heads,
        "ffn_dim": layer.linear1.out_features, "activation": activation_of(layer), "gated": False,
        "norm": "layer_norm", "norm_first": bool(layer.norm_first), "eps": layer.norm1.eps,
        "attn_bias": sa.in_proj_bias is not None, "ffn_bias": layer.linear1.bias is not None,
        "norm_bias": getattr(layer.norm1, "bias", None) is not None, "rope": "none", "param_names": "pytorch",
    }


def llama_config(cfg, dtype):
    """From a Hugging Face LlamaConfig (object or dict)."""
    g = (lambda k, d=None: cfg.get(k, d)) if isinstance(cfg, dict) else (lambda k, d=None: getattr(cfg, k, d))
    H, D = g("num_attention_heads"), g("hidden_size")
    act = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh",
           "gelu_new": "gelu_tanh"}[g("hidden_act", "silu")]
    if g("rope_scaling"):
        raise ValueError("export: rope_scaling is not supported")
    theta = float(g("rope_theta", 10000.0))
    if theta != int(theta):
        raise ValueError("export: rope_theta must be an integer (ct::rope<Layout, Theta>)")
    c = {"kind": "llama", "d_model": D, "heads": H, "kv_heads": g("num_key_value_heads") or H,
         "ffn_dim": g("intermediate_size"), "activation": act, "gated": True, "norm": "rms_norm",
         "norm_first": True, "eps": g("rms_norm_eps", 1e-6), "attn_bias": bool(g("attention_bias", False)),
         "ffn_bias": bool(g("mlp_bias", False)), "norm_bias": False, "rope": "rotate_half",
         "rope_theta": int(theta), "rotary_dim": int(D // H * g("partial_rotary_factor", 1.0)),
         "param_names": "hugging_face", "layers": g("num_hidden_layers"), "final_norm": True,
         "vocab": g("vocab_size"), "context": g("max_position_embeddings"), "positions": "rotary",
         "tied": bool(g("tie_word_embeddings", False))}
    return c


def describe(module, config=None):
    """(kind-specific config dict, state_dict) of a supported module."""
    if isinstance(module, (torch.nn.TransformerDecoderLayer, torch.nn.TransformerEncoderLayer)):
        return torch_layer_config(module), module.state_dict()
    if isinstance(module, torch.nn.TransformerDecoder):
        c = torch_layer_config(module.layers[0])
        c.update(kind="decoder_stack", layers=len(module.layers), final_norm=module.norm is not None)
        return c, module.state_dict()
    if hasattr(module, "wte") and hasattr(module, "transformer"):  # docs/models.md's GPT
        enc = module.transformer
        c = torch_layer_config(enc.layers[0])
        tied = not hasattr(module, "lm_head")
        c.update(kind="gpt", layers=len(enc.layers), final_norm=enc.norm is not None,
                 vocab=module.wte.num_embeddings, tied=tied,
                 positions="learned" if hasattr(module, "wpe") else "sinusoidal",
                 context=module.wpe.num_embeddings if hasattr(module, "wpe") else (config or {}).get("context"))
        if c["context"] is None:
            raise ValueError("export: a GPT with sinusoidal positions needs config={'context': N}")
        return c, module.state_dict()
    if hasattr(module, "model") and hasattr(module.model, "embed_tokens"):  # Llama family
        cfg = config or getattr(module, "config", None)
        if cfg is None:
            raise ValueError("export: a Llama-like module without .config needs config={...} (LlamaConfig's keys)")
        c = llama_config(cfg, module.model.embed_tokens.weight.dtype)
        sd = module.state_dict()
        if c["tied"]:
            sd.pop("lm_head.weight", None)
        for k in [k for k in sd if k.endswith("rotary_emb.inv_freq")]:  # a buffer, not a parameter
            sd.pop(k)
        return c, sd
    raise ValueError("export: unsupported module %s" % type(module).__name__)


# ---- The C++ type ----
def ratio(x):
    f = fractions.Fraction(x).limit_denominator(10 ** 12)
    return "%d, %d" % (f.numerator, f.denominator)


def cpp_alias(c, dtype, name="Model", weights=("dense", 0)):
    T = "double" if dtype == torch.float64 and weights[0] == "dense" else "float"
    o = ["ct::d_model<%d>" % c["d_model"], "ct::heads<%d>" % c["heads"]]
    if c["kv_heads"] != c["heads"]:
        o.append("ct::kv_heads<%d>" % c["kv_heads"])
    o.append("ct::ffn_dim<%d>" % c["ffn_dim"])
    if T == "double":
        o.append("ct::dtype<double>")
    if weights[0] != "dense":
        o.append("ct::weights<ct::%s>" % (weights[0] if not weights[1] else
                                         "%s<%d%s>" % (weights[0], weights[1], ", ct::f16" if weights[2] else "")))
    if c["kind"] == "llama":  # llama_config's defaults cover the rest unless they differ
        if c["activation"] != "silu":
            o.append("ct::activation<ct::%s>" % c["activation"])
        if abs(c["eps"] - 1e-6) > 1e-12:
            o.append("ct::norm_eps<%s>" % ratio(c["eps"]))
        if c["rope_theta"] != 10000 or c["rotary_dim"] != c["d_model"] // c["heads"]:
            o.append("ct::rope<ct::rotate_half, %d, %d>" % (c["rope_theta"], c["rotary_dim"]))
        if c["attn_bias"] or c["ffn_bias"]:
            o += ["ct::attn_bias<%s>" % str(c["attn_bias"]).lower(), "ct::ffn_bias<%s>" % str(c["ffn_bias"]).lower()]
        if c["tied"]:
            o.append("ct::tied_embeddings<true>")
        return "using %s = ct::Llama<%d, %d, %d, %s>;" % (name, c["vocab"], c["context"], c["layers"], ", ".join(o))
    if c["activation"] != "relu":
        o.append("ct::activation<ct::%s>" % c["activation"])
    if c["norm_first"]:
        o.append("ct::norm_first<true>")
    if abs(c["eps"] - 1e-5) > 1e-12:
        o.append("ct::layer_norm_eps<%s>" % ratio(c["eps"]))
    for k in ("attn_bias", "ffn_bias", "norm_bias"):
        if not c[k]:
            o.append("ct::%s<false>" % k)
    cross = c["kind"] in ("decoder_layer", "decoder_stack")
    block = "ct::%s<%s>" % ("DecoderLayer" if cross else "DecoderOnlyBlock", ", ".join(o))
    if c["kind"] in ("decoder_layer", "decoder_block"):
        return "using %s = %s;" % (name, block)
    if c["kind"] == "decoder_stack":
        return "using %s = ct::DecoderStack<%s, %d%s>;" % (name, block, c["layers"], "" if c["final_norm"] else ", false")
    extra = ([", ct::tied_embeddings<true>"] if c["tied"] else []) + \
            ([", ct::positions<ct::sinusoidal>"] if c["positions"] == "sinusoidal" else [])
    return "using %s = ct::GPT<%d, %d, %d, %s%s>;" % (name, c["vocab"], c["context"], c["layers"], block, "".join(extra))


# The weight matrices ctformer stores in its weight format (a tied embedding is the LM head).
MATRICES = ("in_proj_weight", "out_proj.weight", "linear1.weight", "linear2.weight", "q_proj.weight", "k_proj.weight",
            "v_proj.weight", "o_proj.weight", "gate_proj.weight", "up_proj.weight", "down_proj.weight", "lm_head.weight")


def parse_weights(w):
    """'bf16', 'int8_per_channel', 'int4_group<32>' (or int4_group32), 'int8_group<32, f16>' (or
    ct::f16) -> (format, group, half scales)."""
    if w in (None, "dense"):
        return "dense", 0, False
    if w in ("bf16", "int8_per_channel"):
        return w, 0, False
    for fmt, sizes in (("int4_group", (8, 16, 32, 64, 128, 256)), ("int8_group", (16, 32, 64, 128, 256)),
                       ("int6_group", (16, 32, 64, 128, 256))):
        args = [a.strip() for a in w.replace(fmt, "", 1).strip("<>").split(",")]
        half = len(args) == 2 and args[1] in ("f16", "ct::f16")
        if w.startswith(fmt) and args[0].isdigit() and int(args[0]) in sizes and (len(args) == 1 or half):
            return fmt, int(args[0]), half
    raise ValueError("export: --weights is bf16, int8_per_channel, int8_group<G> or int6_group<G> (G in 16..256), or "
                     "int4_group<G> (G in 8..256), G a power of two; a grouped one as <G, f16> for scales as halves")


def quantize(name, w, fmt, group, half=False):
    """{name: packed, name_scale: scales} as ctformer's QuantizedWeight::quantize computes them (in
    double: the largest magnitude, the scale rounded to float — half: then to the nearest half within
    ±65504 —, q = round half to even of w / s)."""
    def stored(s):  # the scale as kept: float, or a half (the integers from the rounded value)
        return s.clamp(-65504, 65504).to(torch.float16) if half else s
    w64 = w.detach().to(torch.float32).double() if w.dtype != torch.float64 else w.detach()
    if fmt == "bf16":
        return {name: w64.to(torch.float32).to(torch.bfloat16)}
    out_f, in_f = w64.shape
    if fmt == "int8_per_channel":
        s = (w64.abs().amax(dim=1) / 127).to(torch.float32)
        q = torch.where(s[:, None] == 0, torch.zeros_like(w64), torch.round(w64 / s.double()[:, None])).clamp(-127, 127)
        return {name: q.to(torch.int8), name + "_scale": s}
    if in_f % group or in_f % 8:
        raise ValueError("export: %s has %d inputs, not a multiple of the group %d" % (name, in_f, group))
    g = w64.reshape(out_f, in_f // group, group)
    if fmt == "int8_group":
        s = stored((g.abs().amax(dim=2) / 127).to(torch.float32))
        q = torch.where(s[:, :, None] == 0, torch.zeros_like(g), torch.round(g / s.double()[:, :, None])).clamp(-127, 127)
        return {name: q.reshape(out_f, in_f).to(torch.int8), name + "_scale": s}
    m = torch.gather(g, 2, g.abs().argmax(dim=2, keepdim=True))  # the value of largest magnitude (first)
    lim = 32 if fmt == "int6_group" else 8  # (the largest magnitude at -lim steps: Q4_0's rule; int6: a byte a weight in [-32, 31])
    s = stored((m / -lim).to(torch.float32))
    q = torch.where(s == 0, torch.zeros_like(g), torch.round(g / s.double())).clamp(-lim, lim - 1).to(torch.int16).reshape(out_f, in_f)
    if fmt == "int6_group":
        return {name: q.to(torch.int8), name + "_scale": s.reshape(out_f, in_f // group)}
    nib = q & 0xF
    return {name: (nib[:, 0::2] | (nib[:, 1::2] << 4)).to(torch.uint8), name + "_scale": s.reshape(out_f, in_f // group)}


def quantize_state(sd, c, fmt, group, half=False):
    """The state_dict with its weight matrices in format fmt (half: scales as halves)."""
    tied = {"wte.weight", "model.embed_tokens.weight"} if c.get("tied") else set()
    out = {}
    for name, t in sd.items():
        if t.dim() == 2 and (name.endswith(MATRICES) or name in tied):
            out.update(quantize(name, t, fmt, group, half))
        else:
            out[name] = t
    return out


def meta_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


# A state_dict with its configuration given as ctformer's fields (what describe() returns).
REQUIRED = ("kind", "d_model", "heads", "ffn_dim", "activation", "norm_first", "eps")


def export(module, path, config=None, name="Model", header=None, weights=None):
    """Writes path (safetensors + configuration); returns the C++ alias. module: a supported module,
    or a state_dict (a dict of tensors) with config = ctformer's fields. weights: None (as the
    model stores them), "bf16", "int8_per_channel" or "int4_group<G>"."""
    fmt = parse_weights(weights)
    if isinstance(module, dict):
        missing = [k for k in REQUIRED if k not in (config or {})]
        if missing:
            raise ValueError("export: a state_dict needs config with %s" % ", ".join(missing))
        c = {"kv_heads": config["heads"], "gated": False, "norm": "layer_norm", "attn_bias": True, "ffn_bias": True,
             "norm_bias": True, "rope": "none", "param_names": "pytorch"}
        c.update(config)
        sd = module
    else:
        c, sd = describe(module, config)
    dtype = next(iter(sd.values())).dtype
    meta = {"ctformer.%s" % k: meta_value(v) for k, v in c.items()}
    # informational: the tensors' dtype (loads convert it); checked: the weights' format
    meta["ctformer.dtype"] = str(dtype).replace("torch.", "")
    meta["ctformer.weight_format"] = fmt[0]
    if fmt[1]:
        meta["ctformer.weight_group"] = str(fmt[1])
    meta["ctformer.exporter"] = "tools/export.py"
    state = dict(quantize_state(sd, c, *fmt) if fmt[0] != "dense" else sd)
    source = getattr(module, "directory", None)  # a Hugging Face directory: its tokenizer too
    if source and any(os.path.exists(os.path.join(source, n)) for n in ("tokenizer.json", "tokenizer.model")):
        tensors, tmeta = tokenizer_export.tables(tokenizer_export.read_source(source))
        state.update(tensors)
        meta.update(tmeta)
    save_safetensors(path, state, meta)
    alias = cpp_alias(c, dtype, name, fmt)
    if header:
        with open(header, "w") as f:
            f.write("// Written by tools/export.py for %s\n#pragma once\n#include <ctformer/ctformer.hpp>\n\n%s\n"
                    % (os.path.basename(path), alias))
    return alias


class _HFLlama(torch.nn.Module):
    """A Hugging Face directory's weights under LlamaForCausalLM's names, with its config."""

    def __init__(self, directory):
        super().__init__()
        self.directory = directory
        with open(os.path.join(directory, "config.json")) as f:
            self.config = json.load(f)
        st = os.path.join(directory, "model.safetensors")
        sd = load_safetensors(st) if os.path.exists(st) else torch.load(os.path.join(directory, "pytorch_model.bin"))
        self._sd = sd
        self.model = torch.nn.Module()
        self.model.embed_tokens = torch.nn.Embedding.from_pretrained(sd["model.embed_tokens.weight"])

    def state_dict(self, *a, **k):
        return dict(self._sd)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a Hugging Face directory, or a file torch.load reads into a module")
    ap.add_argument("out", help="the .safetensors file to write")
    ap.add_argument("--header", help="also write the C++ alias into this header")
    ap.add_argument("--name", default="Model", help="the alias's name")
    ap.add_argument("--config", help="for a state_dict file: a JSON object of ctformer's fields")
    ap.add_argument("--weights", help="bf16, int8_per_channel, int8_group<G>, int6_group<G> or int4_group<G>: the weight matrices quantized")
    a = ap.parse_args(argv)
    module = _HFLlama(a.model) if os.path.isdir(a.model) else torch.load(a.model)
    config = None
    if a.config:
        with open(a.config) as f:
            config = json.load(f)
    print(export(module, a.out, config=config, name=a.name, header=a.header, weights=a.weights))


if __name__ == "__main__":
    main()
