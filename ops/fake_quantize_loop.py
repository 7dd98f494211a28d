"""The compiled loop of FakeQuantize-1 (ops/quantization.py) for limits that are single
values or vary along one axis of X (per tensor, per channel) on f32 or f64 data: one pass
instead of nine ufunc calls and their temporaries, which on the small activations of an
int8 network cost more than their arithmetic (tflite_int8_cnn: 34 us a layer; a
per-channel layer of mobilenet_v3_small_int8 took 35-60 us in NumPy).

Each element takes the spec's selection, x <= min(il, ih) gives ol, x > max(il, ih) oh,
else round((x - il) / (ih - il) * (levels - 1)) / (levels - 1) * (oh - ol) + ol, step by
step in the data's type in that order, rounding half to even: what fake_quantize computes
(its clip-first path gives the same values, which it checks on the limits), no fused
multiply-add (numba contracts nothing).

Imported on the op's first run, so loading models without FakeQuantize never imports numba.
"""
import math

import numpy as np

from irrun.opkit.compiled import cached_loop


@cached_loop
def _by_channel(x, out, limits):
    """out = FakeQuantize(x) for x, out [A, C, B] (the channel axis in the middle); limits
    [C, 5], a row [il, ih, ol, oh, levels - 1] per channel, of x's type."""
    for c in range(x.shape[1]):
        il, ih, ol, oh, lm1 = limits[c, 0], limits[c, 1], limits[c, 2], limits[c, 3], limits[c, 4]
        lo, hi = min(il, ih), max(il, ih)
        span, out_span = ih - il, oh - ol
        for a in range(x.shape[0]):
            xr, outr = x[a, c], out[a, c]
            if span == 0:       # every x is <= lo or > hi, or NaN (NaN / 0 is NaN)
                for k in range(xr.size):
                    v = xr[k]
                    outr[k] = ol if v <= lo else (oh if v > hi else v)
                continue
            # The formula for every element, then the selection: no branch in the loop,
            # which LLVM then vectorises.
            for k in range(xr.size):
                v = xr[k]
                q = np.rint((v - il) / span * lm1) / lm1 * out_span + ol
                q = oh if v > hi else q
                outr[k] = ol if v <= lo else q


def layout(x_shape: tuple, limit_shapes) -> tuple[tuple, tuple] | None:
    """Where the loop applies to X of x_shape and limits of limit_shapes: (the output's
    shape, X seen as [A, C, B]: C the channels along the one axis the limits vary on, 1 for
    single values); None where they vary along more than one axis or enlarge X."""
    rank = max(len(x_shape), *(len(s) for s in limit_shapes))
    shape = (1,) * (rank - len(x_shape)) + tuple(x_shape)
    axis = None
    for s in limit_shapes:
        for i, d in enumerate(s, rank - len(s)):
            if d == 1:
                continue
            if d != shape[i] or axis not in (None, i):
                return None
            axis = i
    if axis is None:
        return shape, (1, 1, math.prod(shape))
    return shape, (math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:]))


def limits_table(il, ih, ol, oh, levels: int, channels: int, dtype) -> np.ndarray | None:
    """The loop's [C, 5] limits (each limit of one value or C, of dtype); None where one is
    not finite (fake_quantize's NumPy path then)."""
    table = np.empty((channels, 5), dtype)
    for j, v in enumerate((il, ih, ol, oh)):
        table[:, j] = v.reshape(-1)
    table[:, 4] = levels - 1
    if not np.isfinite(table).all():
        return None
    return table


def by_channel(x: np.ndarray, table: np.ndarray, shape: tuple, seen: tuple) -> np.ndarray:
    """FakeQuantize of x by the limits of `table` as an array of `shape` (x's, or the
    limits' larger rank of ones around it); `seen` is [A, C, B] (see layout)."""
    out = np.empty(shape, x.dtype)
    _by_channel(x.reshape(seen), out.reshape(seen), table)
    return out
