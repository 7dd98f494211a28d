"""The compiled loop of HSwish-4 (ops/activation.py) on f32 and f64: one pass of
x * min(max(x + 3, 0), 6) / 6 in the data's type, where NumPy makes five passes and four
temporaries (torch_ssdlite's twenty HSwish layers: 1.2 ms).

The same steps in the same order and type (no fused multiply-add: numba contracts
nothing), with np.maximum's and np.minimum's rules where they matter: NaN propagates, and
of two equal operands (+0.0 and -0.0) the second is returned. The same bits.

Imported on the op's first run, so loading models without HSwish never imports numba.
"""
import math

import numpy as np

from irrun.opkit import even_ranges, parallel, workers
from irrun.opkit.compiled import cached_loop

# Elements per thread below which the caller works alone: the loop takes 0.2-0.4 ns an
# element, so a split gains only on millions (2-core AMD EPYC: 1M elements 0.7x, 4M 1.8x).
MIN_WORK_PER_THREAD = 1 << 21


@cached_loop
def _hswish(src, dst, three, zero, six):
    for k in range(src.size):
        v = src[k]
        t = v + three
        t = t if (t > zero or np.isnan(t)) else zero       # np.maximum(t, 0)
        t = t if (t < six or np.isnan(t)) else six         # np.minimum(t, 6)
        dst[k] = v * t / six


def hswish(x: np.ndarray) -> np.ndarray:
    """HSwish of an f32 or f64 array, of its type and shape."""
    src = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(x.shape, x.dtype)
    dst = out.reshape(-1)
    t = x.dtype.type
    consts = (t(3), t(0), t(6))
    threads = workers(src.size, MIN_WORK_PER_THREAD)
    if threads < 2:
        _hswish(src, dst, *consts)
    else:       # a few parts per thread: see ops/depthwise_loop.py's PARTS_PER_THREAD
        parallel(lambda lo, hi: _hswish(src[lo:hi], dst[lo:hi], *consts),
                 even_ranges(src.size, 4 * threads))
    return out


def prepared(shape: tuple, dtype):
    """hswish for arrays of `shape` and `dtype` (a prepared kernel, irrun.opkit.prepared):
    one call of the loop where the tensor is too small to be split over threads (at any
    thread count), else hswish itself."""
    if math.prod(shape) >= 2 * MIN_WORK_PER_THREAD:
        return hswish
    t = np.dtype(dtype).type
    three, zero, six = t(3), t(0), t(6)

    def small(x):
        out = np.empty(shape, dtype)
        _hswish(np.ascontiguousarray(x).reshape(-1), out.reshape(-1), three, zero, six)
        return out
    return small
