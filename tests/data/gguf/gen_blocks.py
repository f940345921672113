#!/usr/bin/env python3
"""ggml's own block formats and values for tests/gguf/blocks.cpp: for each format, rows quantized
by llama.cpp's quantizer (ggml_quantize_chunk) and rows of random bytes (every bit pattern of the
packed scales, finite f16 scales), then dequantized by ggml's to_float (ggml_get_type_traits) —
the library llama.cpp runs, from npm's node-llama-cpp. Writes blocks.gguf: tensor <FORMAT> the
blocks, tensor <FORMAT>.values (F32) ggml's values, one row of 512 elements each.

Usage: /usr/bin/python3 gen_blocks.py NODE_MODULES_DIR OUT.gguf
  (NODE_MODULES_DIR holds @node-llama-cpp/linux-x64/bins/*/libggml-base.so)
"""
import ctypes, glob, os, struct, sys
import numpy as np

lib_path = glob.glob(os.path.join(sys.argv[1], "@node-llama-cpp/linux-x64/bins/*/libggml-base.so"))[0]
ggml = ctypes.CDLL(lib_path)


class Traits(ctypes.Structure):  # ggml.h: struct ggml_type_traits
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64), ("blck_size_interleave", ctypes.c_int64),
                ("type_size", ctypes.c_size_t), ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


ggml.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
ggml.ggml_quantize_chunk.restype = ctypes.c_size_t
ggml.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                     ctypes.c_int64, ctypes.c_void_p]
TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)

FORMATS = {"F16": 1, "BF16": 30, "Q8_0": 8, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14}
SCALES = {"Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}
N = 512
rng = np.random.default_rng(20261128)


def quantize(t, x):
    tr = ggml.ggml_get_type_traits(t).contents
    out = ctypes.create_string_buffer(N // tr.blck_size * tr.type_size)
    xs = np.ascontiguousarray(x, dtype=np.float32)
    ggml.ggml_quantize_chunk(t, xs.ctypes.data, out, 0, 1, N, None)
    return out.raw


def dequantize(t, raw):
    tr = ggml.ggml_get_type_traits(t).contents
    y = np.zeros(N, dtype=np.float32)
    buf = ctypes.create_string_buffer(raw, len(raw))
    TO_FLOAT(tr.to_float)(ctypes.cast(buf, ctypes.c_void_p), y.ctypes.data, N)
    return y


def random_blocks(name, t):
    tr = ggml.ggml_get_type_traits(t).contents
    raw = bytearray(rng.integers(0, 256, N // tr.blck_size * tr.type_size, dtype=np.uint8).tobytes())
    for b in range(0, len(raw), tr.type_size):
        for off in SCALES.get(name, []):
            raw[b + off:b + off + 2] = np.float16(rng.uniform(-0.05, 0.05)).tobytes()
    return bytes(raw)


# values with extremes: a zero block, one outlier, all negative, large and tiny magnitudes
x = rng.normal(0, 1, N).astype(np.float32)
x[0:32] = 0
x[40] = 37.0
x[64:96] = -np.abs(x[64:96])
x[256:288] *= 1e3
x[288:320] *= 1e-4

tensors = []  # (name, ggml type, bytes)
for name, t in FORMATS.items():
    if name in ("F16", "BF16"):
        raw = x.astype(np.float16).tobytes() if name == "F16" else (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        rows = [("", raw)]
    else:
        rows = [("", quantize(t, x)), (".random", random_blocks(name, t))]
    for suffix, raw in rows:
        tensors.append((name + suffix, t, raw))
        tensors.append((name + suffix + ".values", 0, dequantize(t, raw).tobytes()))


def s(v):
    b = v.encode()
    return struct.pack("<Q", len(b)) + b


head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 1) + s("general.architecture") + struct.pack("<I", 8) + s("blocks")
data, infos = b"", b""
for name, t, raw in tensors:
    data += b"\0" * (-len(data) % 32)
    infos += s(name) + struct.pack("<IQIQ", 1, N, t, len(data))
    data += raw
out = head + infos
out += b"\0" * (-len(out) % 32)
with open(sys.argv[2], "wb") as f:
    f.write(out + data)
print(f"{sys.argv[2]}: {len(tensors) // 2} rows of {N}, {len(out + data)} bytes, ggml from {lib_path}")
