"""ggml's reference quantizers in numpy, bit for bit: the rows of a float32 matrix into the block
formats llama.cpp reads (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; F16 and F32 as they are).

Written from ggml-quants.c's quantize_row_*_ref, the functions llama.cpp's quantize tool runs
without an importance matrix. Every operation is the C code's float32 operation in the C code's
order (sums are sequential loops, never numpy's pairwise reductions; no fused multiply-adds), so the
bytes equal ggml's: tests/llama_cpp (gguf_agreement) compares them with ggml_quantize_chunk's from
llama.cpp's own library and with llama.cpp's quantized files.

  blocks = quantize(matrix, "Q4_K")     # bytes, rows one after another as a GGUF tensor stores them
"""
import numpy as np

f32, i32 = np.float32, np.int32
TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14}
BLOCK = {"F32": 1, "F16": 1, "Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32, "Q8_0": 32, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256}
GROUP_MAX_EPS = f32(1e-15)


def nearest_int(v):  # ggml's nearest_int: round half to even through the float 1.5 * 2^23
    return ((np.asarray(v, f32) + f32(12582912.0)).view(i32) & 0x007FFFFF) - 0x00400000


def fp16(v):  # GGML_FP32_TO_FP16 (round to nearest even) and back
    return np.asarray(v, f32).astype(np.float16)


def roundf(v):  # C's roundf: half away from zero
    t = np.trunc(v)
    return t + np.where(np.abs(v - t) >= f32(0.5), np.sign(v), f32(0)).astype(f32)


def seqsum(terms):  # Σ over the last axis in the C loop's order, float32
    s = terms[..., 0].copy()
    for i in range(1, terms.shape[-1]):
        s = s + terms[..., i]
    return s


def _div(a, b):  # a / b where b != 0, else 0 (the C code's guards select before dividing)
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape, f32), where=b != 0).astype(f32)


def _abs_argmax_value(x):  # the first element of largest |x| (C: if (ax > amax) ...), per row
    return x[np.arange(len(x)), np.abs(x).argmax(axis=1)]


# ---- 32-element blocks ----
def q8_0(x):
    d = np.abs(x).max(axis=1) / f32(127)
    q = roundf(x * _div(f32(1), d)[:, None])
    b = np.zeros(len(x), [("d", "<f2"), ("qs", "i1", 32)])
    b["d"], b["qs"] = fp16(d), q.astype(np.int8)
    return b


def _symmetric(x, levels):  # Q4_0 (levels 8) and Q5_0 (16): d = max / -levels, q = min(2·levels - 1, (int8)(x/d + levels + 0.5))
    d = _abs_argmax_value(x) / f32(-levels)
    v = x * _div(f32(1), d)[:, None] + f32(levels + 0.5)
    return d, np.minimum(2 * levels - 1, np.trunc(v).astype(i32))


def _affine(x, levels):  # Q4_1 (15) and Q5_1 (31): d = (max - min) / levels, q = (x - min)/d + 0.5 truncated
    mn, mx = x.min(axis=1), x.max(axis=1)
    d = (mx - mn) / f32(levels)
    q = np.trunc((x - mn[:, None]) * _div(f32(1), d)[:, None] + f32(0.5)).astype(i32)
    return d, mn, np.minimum(levels, q) if levels == 15 else q


def _nibbles(q):  # element j in the low nibble of byte j, j + 16 in its high nibble
    return (q[:, :16] & 0xF | (q[:, 16:] & 0xF) << 4).astype(np.uint8)


def _fifth_bits(q):
    return ((q >> 4 & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1).astype("<u4")


def q4_0(x):
    d, q = _symmetric(x, 8)
    b = np.zeros(len(x), [("d", "<f2"), ("qs", "u1", 16)])
    b["d"], b["qs"] = fp16(d), _nibbles(q)
    return b


def q5_0(x):
    d, q = _symmetric(x, 16)
    b = np.zeros(len(x), [("d", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])
    b["d"], b["qh"], b["qs"] = fp16(d), _fifth_bits(q), _nibbles(q)
    return b


def q4_1(x):
    d, m, q = _affine(x, 15)
    b = np.zeros(len(x), [("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)])
    b["d"], b["m"], b["qs"] = fp16(d), fp16(m), _nibbles(q)
    return b


def q5_1(x):
    d, m, q = _affine(x, 31)
    b = np.zeros(len(x), [("d", "<f2"), ("m", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])
    b["d"], b["m"], b["qh"], b["qs"] = fp16(d), fp16(m), _fifth_bits(q), _nibbles(q)
    return b


# ---- k-quants: super-blocks of 256 ----
def make_qkx2_quants(x, w, nmax, rmin, rdelta, nstep):
    """ggml's make_qkx2_quants (use_mad false) for every row of x (n = its length): the scale, the
    minimum (positive: subtracted) and the levels L in [0, nmax]."""
    rmin, rdelta = f32(rmin), f32(rdelta)
    mn, mx = x.min(axis=1), x.max(axis=1)
    sum_w, sum_x = seqsum(w), seqsum(w * x)  # (the C loop starts from element 0's terms: the same order)
    mn = np.minimum(mn, f32(0))
    flat = mx == mn
    span = np.where(flat, f32(1), mx - mn)
    iscale = f32(nmax) / span
    scale = f32(1) / iscale
    L = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
    best = seqsum(w * np.square(scale[:, None] * L.astype(f32) + mn[:, None] - x))
    for step in range(nstep + 1):  # (min moves to each better fit, and the next steps start from it)
        span = np.where(flat, f32(1), mx - mn)
        iscale = (rmin + rdelta * f32(step) + f32(nmax)) / span
        La = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
        l = La.astype(f32)
        sum_l, sum_l2, sum_xl = seqsum(w * l), seqsum(w * l * l), seqsum(w * l * x)
        D = sum_w * sum_l2 - sum_l * sum_l
        ok = D > 0
        Ds = np.where(ok, D, f32(1))
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / Ds
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / Ds
        pos = this_min > 0
        this_min = np.where(pos, f32(0), this_min)
        this_scale = np.where(pos, _div(sum_xl, sum_l2), this_scale)
        cur = seqsum(w * np.square(this_scale[:, None] * l + this_min[:, None] - x))
        take = ok & (cur < best) & ~flat
        L = np.where(take[:, None], La, L)
        best, scale, mn = np.where(take, cur, best), np.where(take, this_scale, scale), np.where(take, this_min, mn)
    L = np.where(flat[:, None], 0, L)
    return np.where(flat, f32(0), scale).astype(f32), (-mn).astype(f32), L


def make_qx_quants(x, nmax):
    """ggml's make_qx_quants with rmse_type 1 and no weights (Q6_K's sub-blocks of 16), per row:
    the scale and L + nmax in [0, 2·nmax)."""
    mx = _abs_argmax_value(x)
    zero = np.abs(mx) < GROUP_MAX_EPS
    mxs = np.where(zero, f32(1), mx)
    w = x * x

    def levels(iscale):
        return np.clip(nearest_int(iscale[:, None] * x), -nmax, nmax - 1)

    def sums(l):
        lf = l.astype(f32)
        return seqsum(w * x * lf), seqsum(w * lf * lf)

    L = levels(f32(-nmax) / mxs)
    sumlx, suml2 = sums(L)
    scale = _div(sumlx, suml2)
    best = scale * sumlx
    for step in [s for s in range(-9, 10) if s]:
        La = levels(-(f32(nmax) + f32(0.1) * f32(step)) / mxs)
        slx, sl2 = sums(La)
        take = (sl2 > 0) & (slx * slx > best * sl2)
        L = np.where(take[:, None], La, L)
        scale = np.where(take, _div(slx, sl2), scale)
        best = np.where(take, scale * slx, best)
    return np.where(zero, f32(0), scale).astype(f32), np.where(zero[:, None], 0, L + nmax)


def _k_scales(scales, mins):  # 8 six-bit scales and mins of a Q4_K/Q5_K super-block -> d, dmin, 12 bytes
    max_scale, max_min = np.maximum(scales.max(axis=1), f32(0)), np.maximum(mins.max(axis=1), f32(0))
    inv_s = np.where(max_scale > 0, _div(f32(63), max_scale), f32(0))
    inv_m = np.where(max_min > 0, _div(f32(63), max_min), f32(0))
    ls = np.minimum(63, nearest_int(inv_s[:, None] * scales) & 0xFF)  # (C: uint8_t, then MIN)
    lm = np.minimum(63, nearest_int(inv_m[:, None] * mins) & 0xFF)
    packed = np.zeros((len(scales), 12), np.int64)
    packed[:, 0:4], packed[:, 4:8] = ls[:, :4], lm[:, :4]
    packed[:, 8:12] = (ls[:, 4:] & 0xF) | (lm[:, 4:] & 0xF) << 4
    packed[:, 0:4] |= (ls[:, 4:] >> 4) << 6
    packed[:, 4:8] |= (lm[:, 4:] >> 4) << 6
    # what the dequantizer reads back (get_scale_min_k4)
    return fp16(max_scale / f32(63)), fp16(max_min / f32(63)), packed.astype(np.uint8), ls, lm


def _k_levels(x, d16, dmin16, ls, lm, L, nmax):  # L = nearest((x + dm) / d) where d != 0, per 32-element sub-block
    d = d16.astype(f32)[:, None] * ls.astype(f32)
    dm = dmin16.astype(f32)[:, None] * lm.astype(f32)
    xs = x.reshape(len(x), 8, 32)
    new = np.clip(nearest_int(_div(xs + dm[:, :, None], np.broadcast_to(d[:, :, None], xs.shape))), 0, nmax)
    return np.where((d != 0)[:, :, None], new, L.reshape(len(x), 8, 32)).reshape(len(x), 256)


def _k_subblocks(x, nmax, rmin, rdelta, nstep):
    s = x.reshape(-1, 32)
    av = np.sqrt(seqsum(s * s) / f32(32))
    w = av[:, None] + np.abs(s)
    scales, mins, L = make_qkx2_quants(s, w, nmax, rmin, rdelta, nstep)
    return scales.reshape(len(x), 8), mins.reshape(len(x), 8), L.reshape(len(x), 256)


def q4_k(x):
    scales, mins, L = _k_subblocks(x, 15, -1.0, 0.1, 20)
    d, dmin, packed, ls, lm = _k_scales(scales, mins)
    L = _k_levels(x, d, dmin, ls, lm, L, 15)
    q = L.reshape(len(x), 4, 2, 32)
    b = np.zeros(len(x), [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qs", "u1", 128)])
    b["d"], b["dmin"], b["scales"] = d, dmin, packed
    b["qs"] = (q[:, :, 0] | q[:, :, 1] << 4).reshape(len(x), 128).astype(np.uint8)
    return b


def q5_k(x):
    scales, mins, L = _k_subblocks(x, 31, -0.5, 0.1, 15)
    d, dmin, packed, ls, lm = _k_scales(scales, mins)
    L = _k_levels(x, d, dmin, ls, lm, L, 31)
    q = L.reshape(len(x), 4, 2, 32)
    hi = (q >> 4 & 1) << (2 * np.arange(4)[None, :, None, None] + np.arange(2)[None, None, :, None])
    b = np.zeros(len(x), [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qh", "u1", 32), ("qs", "u1", 128)])
    b["d"], b["dmin"], b["scales"] = d, dmin, packed
    b["qh"] = hi.sum(axis=(1, 2)).astype(np.uint8)
    b["qs"] = ((q[:, :, 0] & 0xF) | (q[:, :, 1] & 0xF) << 4).reshape(len(x), 128).astype(np.uint8)
    return b


def q6_k(x):
    n = len(x)
    scale, L = make_qx_quants(x.reshape(-1, 16), 32)
    scales, L = scale.reshape(n, 16), L.reshape(n, 256)
    pick = np.abs(scales).argmax(axis=1)
    max_scale = scales[np.arange(n), pick]
    empty = np.abs(max_scale) < GROUP_MAX_EPS
    iscale = f32(-128) / np.where(empty, f32(1), max_scale)
    d = fp16(f32(1) / iscale)
    sc = np.minimum(127, nearest_int(iscale[:, None] * scales))
    dd = d.astype(f32)[:, None] * sc.astype(f32)
    xs = x.reshape(n, 16, 16)
    new = np.clip(nearest_int(_div(xs, np.broadcast_to(dd[:, :, None], xs.shape))), -32, 31) + 32
    L = np.where((dd != 0)[:, :, None], new, L.reshape(n, 16, 16)).reshape(n, 2, 4, 32)
    ql = np.concatenate([(L[:, :, 0] & 0xF) | (L[:, :, 2] & 0xF) << 4, (L[:, :, 1] & 0xF) | (L[:, :, 3] & 0xF) << 4], axis=2)
    qh = (L[:, :, 0] >> 4) | (L[:, :, 1] >> 4) << 2 | (L[:, :, 2] >> 4) << 4 | (L[:, :, 3] >> 4) << 6
    b = np.zeros(n, [("ql", "u1", 128), ("qh", "u1", 64), ("sc", "i1", 16), ("d", "<f2")])
    b["ql"], b["qh"], b["sc"], b["d"] = ql.reshape(n, 128), qh.reshape(n, 64), sc, d
    b[empty] = np.zeros(1, b.dtype)  # (a super-block of zeros: every byte 0)
    return b


QUANTIZERS = {"Q8_0": q8_0, "Q4_0": q4_0, "Q4_1": q4_1, "Q5_0": q5_0, "Q5_1": q5_1, "Q4_K": q4_k, "Q5_K": q5_k, "Q6_K": q6_k}


def quantize(a, typ):
    """The rows of a (any shape: its last axis is ggml's ne0) as GGUF tensor bytes of ggml type typ."""
    x = np.ascontiguousarray(a, dtype=np.float32)
    if typ == "F32":
        return x.astype("<f4").tobytes()
    if typ == "F16":
        return x.astype("<f2").tobytes()
    if x.shape[-1] % BLOCK[typ]:
        raise ValueError("rows of %d values are not whole %s blocks of %d" % (x.shape[-1], typ, BLOCK[typ]))
    if not np.isfinite(x).all():
        raise ValueError("%s: the values must be finite" % typ)
    return QUANTIZERS[typ](x.reshape(-1, BLOCK[typ])).tobytes()
