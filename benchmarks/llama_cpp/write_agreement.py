#!/usr/bin/env python3
"""The GGUF agreement check's files (scripts/gguf_agreement): one Llama (dim 256, 2 layers, 4 heads,
2 kv heads, hidden 768, vocab 512, ctx 128: every matrix a whole number of 256-element k-quant
blocks per row) written in F32 by write_models.py's converter rules (Hugging Face weights, q/k rows
permuted), then quantized by llama.cpp itself (llama_model_quantize from node-llama-cpp's libllama,
the quantize tool's function) into F16, BF16, Q8_0, Q4_0, Q4_K_M, Q5_K_M and Q6_K: the formats
users download, each mixing what llama.cpp's rules choose per tensor; and Q4_0 --pure (every matrix
Q4_0), which ctformer's int4 weights also read as stored.

The weights are scaled so the model is confident (logits several nats apart, as a trained model's
are where it repeats itself): the LM head at std 0.5, the rest at 0.05.
Usage: /usr/bin/python3 write_agreement.py NODE_MODULES_DIR OUT_DIR
"""
import ctypes, glob, os, sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import write_models  # noqa: E402

node_modules, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
SHAPE = dict(kvh=2, dim=256, L=2, H=4, F=768, V=512, ctx=128, eps=1e-5, seed=3)

write_models.llama("agree", out, **SHAPE, std=0.05, head_std=0.5)
os.remove(os.path.join(out, "agree.safetensors"))

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
for name, ftype in FTYPES.items():
    p = llama.llama_model_quantize_default_params()
    p.nthread, p.ftype, p.pure = 2, ftype, name.endswith("_pure")
    src, dst = os.path.join(out, "agree.gguf"), os.path.join(out, "agree_%s.gguf" % name)
    if llama.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) != 0:
        sys.exit("llama_model_quantize failed for " + name)
print("wrote", ", ".join(["agree.gguf"] + ["agree_%s.gguf" % n for n in FTYPES]), "in", out)
