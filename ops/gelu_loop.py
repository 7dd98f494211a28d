"""The compiled loop of Gelu's erf mode (Gelu-2, Gelu-7; ops/activation.py): for each
element of an f32 or f64 array, 0.5 * x * (1 + erf(x / sqrt(2))) in f64, rounded to the
array's type once. Numba, because the NumPy path (irrun.opkit.erf) evaluates fdlibm's
ranges with a boolean mask, a gather and a scatter each, some forty calls: on vit_tiny's
[2, 17, 128] activations they cost 180 us a layer, the arithmetic a tenth of that.

erf is fdlibm's s_erf.c as irrun.opkit.erf evaluates it: the same constants, the same
Horner steps and divisions in the same order, no fused multiply-add (numba contracts
nothing). The one difference is exp, libm's here and NumPy's (SIMD) there, both within
an ulp: after rounding to f32 the results are the same bits but in rare cases.

Imported on the op's first run, so loading models without Gelu never imports numba.
"""
import math

import numpy as np

from irrun.opkit import ERF_CONSTANTS, even_ranges, parallel, workers
from irrun.opkit.compiled import cached_loop

MIN_WORK_PER_THREAD = 1 << 15      # elements per thread below which the caller works alone

PP, QQ, PA, QA, RA, SA, RB, SB = (np.array(ERF_CONSTANTS[k], np.float64)
                                  for k in ("pp", "qq", "pa", "qa", "ra", "sa", "rb", "sb"))
ERX = ERF_CONSTANTS["erx"]
SQRT2 = float(np.sqrt(2.0))


@cached_loop
def _horner(coeffs, z):
    acc = coeffs[coeffs.size - 1]
    for k in range(coeffs.size - 2, -1, -1):
        acc = acc * z + coeffs[k]
    return acc


@cached_loop
def _erf(x, scratch):
    """erf of one f64 (scratch: a 1-element f64 array, for the high word of |x|)."""
    if math.isnan(x):
        return x
    ax = abs(x)
    if ax < 0.84375:
        z = x * x
        return x + x * (_horner(PP, z) / _horner(QQ, z))
    if ax < 1.25:
        s = ax - 1.0
        return math.copysign(ERX + _horner(PA, s) / _horner(QA, s), x)
    if ax >= 6.0:
        return math.copysign(1.0, x)
    inv = 1.0 / (ax * ax)
    if ax < 1 / 0.35:
        rs = _horner(RA, inv) / _horner(SA, inv)
    else:
        rs = _horner(RB, inv) / _horner(SB, inv)
    scratch[0] = ax
    bits = scratch.view(np.uint64)
    bits[0] = bits[0] & np.uint64(0xFFFFFFFF00000000)
    hi = scratch[0]
    value = 1.0 - np.exp(-hi * hi - 0.5625) * np.exp((hi - ax) * (hi + ax) + rs) / ax
    return math.copysign(value, x)


@cached_loop
def _gelu(src, dst, scaled, numerators):
    """dst[k] = Gelu(src[k]) for every k of the 1-D arrays src, dst (scaled, numerators:
    f64 scratch of their size). The first two loops take every element as in erf's first
    range (|x / sqrt(2)| < 0.84375, most of a network's activations): straight-line
    arithmetic, which LLVM vectorises when each loop holds one polynomial (with both it
    did not), over arrays indexed from 0 (an index numba knows is not negative needs no
    wrap-around check). x / sqrt(2) is divided once (divisions are most of the cost).
    The last loop redoes the other elements."""
    p0, p1, p2, p3, p4 = PP[0], PP[1], PP[2], PP[3], PP[4]
    q0, q1, q2, q3, q4, q5 = QQ[0], QQ[1], QQ[2], QQ[3], QQ[4], QQ[5]
    n = src.size
    for k in range(n):
        t = np.float64(src[k]) / SQRT2
        scaled[k] = t
        z = t * t
        numerators[k] = (((p4 * z + p3) * z + p2) * z + p1) * z + p0
    for k in range(n):
        t = scaled[k]
        z = t * t
        q = ((((q5 * z + q4) * z + q3) * z + q2) * z + q1) * z + q0
        dst[k] = 0.5 * np.float64(src[k]) * (1.0 + (t + t * (numerators[k] / q)))
    scratch = np.empty(1, np.float64)
    for k in range(n):
        t = scaled[k]
        if not abs(t) < 0.84375:
            dst[k] = 0.5 * np.float64(src[k]) * (1.0 + _erf(t, scratch))


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """Gelu (erf mode) of an f32 or f64 array, of its type and shape."""
    src = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(x.shape, x.dtype)
    dst = out.reshape(-1)
    threads = workers(src.size, MIN_WORK_PER_THREAD)
    scaled, numerators = np.empty(src.size, np.float64), np.empty(src.size, np.float64)
    if threads < 2:
        _gelu(src, dst, scaled, numerators)
    else:       # a few parts per thread: see ops/depthwise_loop.py's PARTS_PER_THREAD
        parallel(lambda lo, hi: _gelu(src[lo:hi], dst[lo:hi], scaled[lo:hi], numerators[lo:hi]),
                 even_ranges(src.size, 4 * threads))
    return out
