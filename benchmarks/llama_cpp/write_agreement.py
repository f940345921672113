#!/usr/bin/env python3
"""The GGUF agreement check's files (scripts/gguf_agreement): one Llama (dim 256, 2 layers, 4 heads,
2 kv heads, hidden 768, vocab 512, ctx 128: every matrix a whole number of 256-element k-quant
blocks per row) written in F32 by write_models.py's converter rules (Hugging Face weights, q/k rows
permuted), then quantized by llama.cpp itself (llama_model_quantize from node-llama-cpp's libllama,
the quantize tool's function) into F16, BF16, Q8_0, Q4_0, Q4_K_M, Q5_K_M and Q6_K: the formats
users download, each mixing what llama.cpp's rules choose per tensor; and Q4_0 --pure (every matrix
Q4_0), which ctformer's int4 weights also read as stored.

Then ctformer's GGUF writer (tools/gguf_write.py, tools/ggml_quantize.py) against llama.cpp's
quantizer: ggml_quantize_chunk from llama.cpp's own library and ggml_quantize.py on the same
adversarial rows (every format: the bytes must be equal); the writer's files of the same model
(and of a second one, d_model 288 as stories15M's, whose rows are not whole k-quant blocks: ggml's
fallback formats) against llama.cpp's quantized files: every tensor's format and bytes equal.
agree_ct_q4_k_m.gguf (the writer's) and agree_ct_q4_k_m_f32.gguf (its values dequantized, F32)
are decoded by llama.cpp too (agree.mjs, tests/llama_cpp/agree.cpp).

The weights are scaled so the model is confident (logits several nats apart, as a trained model's
are where it repeats itself): the LM head at std 0.5, the rest at 0.05.
Usage: /usr/bin/python3 write_agreement.py NODE_MODULES_DIR OUT_DIR
"""
import ctypes, glob, os, sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import write_models  # noqa: E402
import ggml_quantize, gguf_export, gguf_write  # noqa: E402
from gguf_reader import read_gguf  # noqa: E402

node_modules, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
SHAPE = dict(kvh=2, dim=256, L=2, H=4, F=768, V=512, ctx=128, eps=1e-5, seed=3)

SHAPE288 = dict(kvh=6, dim=288, L=3, H=6, F=768, V=512, ctx=128, eps=1e-5, seed=4)

write_models.llama("agree", out, **SHAPE, std=0.05, head_std=0.5)
write_models.llama("agree288", out, **SHAPE288, std=0.05, head_std=0.5)
for m in ("agree", "agree288"):
    os.remove(os.path.join(out, m + ".safetensors"))

lib_dir = os.path.dirname(glob.glob(os.path.join(node_modules, "@node-llama-cpp/linux-*/bins/*/libllama.v*.so"))[0])
for dep in sorted(glob.glob(os.path.join(lib_dir, "libggml-base.so"))) + sorted(glob.glob(os.path.join(lib_dir, "libggml.v*.so"))):
    ctypes.CDLL(dep, mode=ctypes.RTLD_GLOBAL)
llama = ctypes.CDLL(glob.glob(os.path.join(lib_dir, "libllama.v*.so"))[0], mode=ctypes.RTLD_GLOBAL)


class QuantizeParams(ctypes.Structure):  # llama.h: llama_model_quantize_params (v0.5.0)
    _fields_ = [("nthread", ctypes.c_int32), ("ftype", ctypes.c_int), ("output_tensor_type", ctypes.c_int),
                ("token_embedding_type", ctypes.c_int), ("allow_requantize", ctypes.c_bool),
                ("quantize_output_tensor", ctypes.c_bool), ("only_copy", ctypes.c_bool), ("pure", ctypes.c_bool),
                ("keep_split", ctypes.c_bool), ("dry_run", ctypes.c_bool), ("imatrix", ctypes.c_void_p),
                ("kv_overrides", ctypes.c_void_p), ("tt_overrides", ctypes.c_void_p), ("prune_layers", ctypes.c_void_p),
                ("max_buf_size", ctypes.c_size_t)]


llama.llama_model_quantize_default_params.restype = QuantizeParams
llama.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(QuantizeParams)]
llama.llama_model_quantize.restype = ctypes.c_uint32
llama.llama_backend_init()
# (q4_0_pure: every matrix Q4_0, the output and embedding too, as --pure makes it: what ctformer's
# int4_group<32> weights hold as stored; llama.cpp's q4_0 keeps the output in Q6_K)
FTYPES = {"f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2, "q4_0_pure": 2, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18}
for model, names in (("agree", FTYPES), ("agree288", ["q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"])):
    for name in names:
        p = llama.llama_model_quantize_default_params()
        p.nthread, p.ftype, p.pure = 2, FTYPES[name], name.endswith("_pure")
        src, dst = os.path.join(out, model + ".gguf"), os.path.join(out, "%s_%s.gguf" % (model, name))
        if llama.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) != 0:
            sys.exit("llama_model_quantize failed for %s %s" % (model, name))
print("wrote", ", ".join(["agree.gguf"] + ["agree_%s.gguf" % n for n in FTYPES]), "in", out)

# ---- ctformer's GGUF writer against llama.cpp's quantizer ----
chunk = ctypes.CDLL(os.path.join(lib_dir, "libggml-base.so")).ggml_quantize_chunk  # (ggml.h)
chunk.restype = ctypes.c_size_t
chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
rng = np.random.default_rng(5)
n = 512
rows = [np.zeros(n), np.full(n, 0.7), np.full(n, -3.0), rng.standard_normal(n) * 1e-8, -np.abs(rng.standard_normal(n)),
        np.abs(rng.standard_normal(n)), rng.standard_normal(n) ** 3, np.where(rng.random(n) < 0.05, rng.standard_normal(n) * 50, 0),
        rng.standard_t(2, n), np.concatenate([np.zeros(n // 2), rng.standard_normal(n // 2)]), np.arange(n) - n / 2]
rows += [rng.standard_normal(n) * rng.choice([1e-3, 0.02, 0.5, 3.0]) + rng.choice([0, 0.1, -1]) for _ in range(300)]
x = np.ascontiguousarray(np.array(rows, np.float32))
for t in ggml_quantize.QUANTIZERS:
    ours = np.frombuffer(ggml_quantize.quantize(x, t), np.uint8)
    ref = np.zeros(len(ours) + 256, np.uint8)
    size = chunk(ggml_quantize.TYPES[t], x.ctypes.data, ref.ctypes.data, 0, x.shape[0], n, None)
    per_row = size // len(x)
    bad = [i for i in range(len(x)) if size != len(ours) or not np.array_equal(ours[i * per_row:(i + 1) * per_row], ref[i * per_row:(i + 1) * per_row])]
    print("ggml_quantize.py %-4s against ggml_quantize_chunk: %d of %d rows differ" % (t, len(bad), len(x)))
    if bad:
        sys.exit("ggml_quantize.py %s: rows %s differ from ggml's" % (t, bad[:8]))


def tensors_of(path):
    meta, tensors, start = read_gguf(path)
    with open(path, "rb") as f:
        data = f.read()
    sizes = {}
    for name, (dims, t, off) in tensors.items():
        elems, size = gguf_export.BLOCK[t]
        sizes[name] = (t, dims, data[start + off:start + off + int(np.prod(dims)) // elems * size])
    return sizes


for model, names in (("agree", ["q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"]), ("agree288", ["q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"])):
    hf = os.path.join(out, model + "_hf.safetensors")
    gguf_export.export(os.path.join(out, model + ".gguf"), hf)
    for name in names:
        ours = os.path.join(out, "%s_ct_%s.gguf" % (model, name))
        gguf_write.convert(hf, ours, os.path.join(out, model + ".gguf"), name.upper())
        a, b = tensors_of(ours), tensors_of(os.path.join(out, "%s_%s.gguf" % (model, name)))
        diff = [k for k in b if k not in a or a[k] != b[k]] + [k for k in a if k not in b]
        kinds = sorted({gguf_export.GGML_TYPES[t] for t, _, _ in a.values()})
        print("tools/gguf_write.py %s --type %s (%s): %d of %d tensors differ from llama.cpp's" % (model, name.upper(), " ".join(kinds), len(diff), len(b)))
        if diff:
            sys.exit("tools/gguf_write.py %s %s: %s differ from llama.cpp's (format or bytes)" % (model, name, diff[:4]))
# the writer's Q4_K_M file and the F32 file of its dequantized values, for llama.cpp to decode
deq = os.path.join(out, "agree_ct_q4_k_m_hf.safetensors")
gguf_export.export(os.path.join(out, "agree_ct_q4_k_m.gguf"), deq)
gguf_write.convert(deq, os.path.join(out, "agree_ct_q4_k_m_f32.gguf"), os.path.join(out, "agree.gguf"), "F32")
print("wrote agree_ct_q4_k_m.gguf, agree_ct_q4_k_m_f32.gguf")
