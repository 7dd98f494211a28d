"""The compiled loop of FakeQuantize-1 (ops/quantization.py) for per-tensor limits (each
of the four a single value) on f32 or f64 data: one pass instead of nine ufunc calls,
which on the small activations of an int8 network cost more than their arithmetic
(tflite_int8_cnn: 34 us a layer).

Each element takes the spec's selection, x <= min(il, ih) gives ol, x > max(il, ih) oh,
else round((x - il) / (ih - il) * (levels - 1)) / (levels - 1) * (oh - ol) + ol, step by
step in the data's type in that order, rounding half to even: what fake_quantize computes
(its clip-first path gives the same values, which it checks on the limits), no fused
multiply-add (numba contracts nothing).

Imported on the op's first run, so loading models without FakeQuantize never imports numba.
"""
import numpy as np

from irrun.opkit.compiled import cached_loop


@cached_loop
def _per_tensor(x, out, limits):
    """out = FakeQuantize(x) for 1-D x, out; limits [il, ih, ol, oh, levels - 1] of x's type."""
    il, ih, ol, oh, lm1 = limits[0], limits[1], limits[2], limits[3], limits[4]
    lo, hi = min(il, ih), max(il, ih)
    span, out_span = ih - il, oh - ol
    if span == 0:               # every x is <= lo or > hi, or NaN (NaN / 0 is NaN)
        for k in range(x.size):
            v = x[k]
            out[k] = ol if v <= lo else (oh if v > hi else v)
        return
    # The formula for every element, then the selection: no branch in the loop, which
    # LLVM then vectorises.
    for k in range(x.size):
        v = x[k]
        q = np.rint((v - il) / span * lm1) / lm1 * out_span + ol
        q = oh if v > hi else q
        out[k] = ol if v <= lo else q


def per_tensor(x: np.ndarray, il, ih, ol, oh, levels: int, shape) -> np.ndarray | None:
    """FakeQuantize of x (f32 or f64) by single-value limits (arrays of x's type), as an
    array of `shape` (x's, or the limits' larger rank of ones around it); None where a
    limit is not finite (fake_quantize's NumPy path then)."""
    limits = np.array([il.flat[0], ih.flat[0], ol.flat[0], oh.flat[0], levels - 1], x.dtype)
    if not np.isfinite(limits).all():
        return None
    out = np.empty(shape, x.dtype)
    _per_tensor(x.reshape(-1) if x.flags.c_contiguous else np.ravel(x), out.reshape(-1), limits)
    return out
