#!/usr/bin/python3
# The coefficients of simd::verf_float (include/ctformer/simd.hpp): erf(x) = x·P(x²)/Q(x²) on
# [0, 4], P of degree 6, Q of degree 4, fitted to a relative minimax by Loeb's linearized least
# squares with Lawson's reweighting, against mpmath's erf; then the float coefficients' error
# with every Horner step rounded to float, over a dense grid of [-6, 6].
# Debian's python3-numpy and python3-mpmath (both come with python3-torch): /usr/bin/python3 tools/fit_erf.py
import mpmath
import numpy as np

X, DP, DQ = 4.0, 6, 4
xs = np.unique(np.concatenate([np.cos(np.linspace(np.pi, 0, 4000)) * X / 2 + X / 2, np.linspace(0, X, 4000)]))
xs = xs[xs > 1e-6]
f = np.array([float(mpmath.erf(mpmath.mpf(x)) / x) for x in xs])  # erf(x)/x, even: a function of t = x²
t = xs * xs

q_prev, w = np.ones_like(t), np.ones_like(t)
for _ in range(80):
    # P(t) - f·(Q(t) - 1) = f, relative to f, linearized around the last Q (Loeb), weighted (Lawson)
    A = np.hstack([np.vander(t, DP + 1, increasing=True), -(f[:, None] * np.vander(t, DQ + 1, increasing=True)[:, 1:])])
    s = np.sqrt(w) / (q_prev * f)
    c, *_ = np.linalg.lstsq(A * s[:, None], f * s, rcond=None)
    p, q = c[: DP + 1], np.concatenate([[1.0], c[DP + 1 :]])
    q_prev = np.polyval(q[::-1], t)
    err = np.abs((np.polyval(p[::-1], t) / q_prev - f) / f)
    w = np.maximum(w * err / (w * err).sum(), 1e-12)
eps = 2.0**-23
print(f"approximation: max relative error {err.max() / eps:.2f} eps")

f32 = np.float32
pc, qc = [f32(v) for v in p], [f32(v) for v in q]
print("P (t^0 first):", ", ".join(float(v).hex() for v in pc))
print("Q (t^0 first):", ", ".join(float(v).hex() for v in qc))


def horner(coeffs, t):  # each step one fma rounded to float (the product and sum exact in double)
    r = np.full_like(t, coeffs[-1])
    for c in coeffs[-2::-1]:
        r = f32(r.astype(np.float64) * t + np.float64(c))
    return r


x = np.linspace(-6, 6, 300001).astype(f32)
a = np.clip(x, f32(-4), f32(4)).astype(f32)
t32 = (a * a).astype(f32)
y = ((a * horner(pc, t32)).astype(f32) / horner(qc, t32)).astype(f32).astype(np.float64)
ref = np.array([float(mpmath.erf(mpmath.mpf(float(v)))) for v in x])
keep = np.abs(ref) > 1e-30
rel = np.abs(y - ref)[keep] / np.abs(ref)[keep]
print(f"in float over [-6, 6]: max relative error {rel.max() / eps:.2f} eps at x = {x[keep][rel.argmax()]}")
