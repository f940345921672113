"""A GGUF file's metadata and tensor infos (llama.cpp's format, versions 2 and 3), pure Python: what
tools/export.py and tools/tokenizer_export.py read from a .gguf. The C++ side's reader is
include/ctformer/io/gguf.hpp; this one serves the tools (the configuration, the alias, the
tokenizer's arrays) and is as strict about the header.

  meta, tensors, data_start = read_gguf(path)
  meta["llama.embedding_length"] -> 288;  tensors["blk.0.attn_q.weight"] -> (dims innermost first, ggml type, offset)
"""
import struct

# gguf_type -> struct format of one element (8: string, 9: array)
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K", 11: "Q3_K",
              12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 30: "BF16"}


class _Cursor:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        n = struct.calcsize(fmt)
        if self.pos + n > len(self.data):
            raise ValueError("GGUF: truncated at byte %d" % self.pos)
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += n
        return v

    def string(self):
        n = self.take("<Q")
        if self.pos + n > len(self.data):
            raise ValueError("GGUF: truncated string at byte %d" % self.pos)
        s = self.data[self.pos:self.pos + n].decode("utf-8", errors="surrogateescape")
        self.pos += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            if et == 9:
                raise ValueError("GGUF: nested arrays")
            return [self.value(et) for _ in range(n)]
        if t not in _SCALAR:
            raise ValueError("GGUF: value type %d" % t)
        return self.take(_SCALAR[t])


def read_gguf(path, types=None):
    """(metadata dict, {name: (dims innermost first, ggml type number, offset in the data section)},
    the data section's start in the file). types (a dict): filled with each key's (gguf value type,
    array element type or None), for a writer that copies values as they were stored."""
    with open(path, "rb") as f:
        data = f.read()
    c = _Cursor(data)
    if c.take("<I") != 0x46554747:
        raise ValueError("%s: not a GGUF file" % path)
    version = c.take("<I")
    if version not in (2, 3):
        raise ValueError("%s: GGUF version %d (2 or 3)" % (path, version))
    n_tensors, n_kv = c.take("<Q"), c.take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = c.string()
        if key in meta:
            raise ValueError("%s: key %s twice" % (path, key))
        t = c.take("<I")
        if types is not None:
            types[key] = (t, struct.unpack_from("<I", c.data, c.pos)[0] if t == 9 and c.pos + 4 <= len(c.data) else None)
        meta[key] = c.value(t)
    tensors = {}
    for _ in range(n_tensors):
        name = c.string()
        dims = [c.take("<Q") for _ in range(c.take("<I"))]
        tensors[name] = (dims, c.take("<I"), c.take("<Q"))
    align = meta.get("general.alignment", 32)
    return meta, tensors, (c.pos + align - 1) // align * align
