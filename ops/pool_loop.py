"""The compiled loop of 2-D AvgPool (ops/pooling.py) on f32 and f64 data. Numba, because
the NumPy path builds padded copies and window views and reduces over axes of two or
three taps, a dozen calls per layer that cost more than the arithmetic on small maps
(tflite_int8_cnn's [1,32,8,8]: 100 us) and pass over large ones several times
(raft_small's [256,1,16,16]: 700 us). (MaxPool keeps its NumPy path: its separable fmax
passes are vector code, which a branchy scalar loop did not beat.)

Each window's sum is added as the NumPy path adds it: row sums first, each from +0.0 and
then tap by tap left to right, then the rows' sums from +0.0 top to bottom, a tap outside
the input adding 0.0 (the NumPy path's zero padding); divided by the number of taps inside
the input, or by the whole kernel's where the rule says so. For kernels of at most 7 taps
an axis that is NumPy's order too (longer reductions it sums in eight lanes), so the
results are the same bits.

Imported on the op's first run, so loading models without pooling never imports numba.
"""
import numpy as np

from irrun.opkit import even_ranges, parallel, workers
from irrun.opkit.compiled import cached_loop

MIN_WORK_PER_THREAD = 1 << 17       # taps read per thread below which the caller works alone
MAX_AVG_KERNEL = 7                  # taps per axis up to which AvgPool's sums keep NumPy's order


@cached_loop
def _avg(x, out, first, last, kh, kw, sh, sw, dh, dw, ph, pw, whole_kernel, zero):
    """Window sums divided by the number of taps inside the input, or by kh * kw where
    whole_kernel; 0 where nothing is inside. zero: 0 in x's type; the divisor is made of
    x's type too (numba would divide a float32 by an integer in float64)."""
    h, w = x.shape[1], x.shape[2]
    oh, ow = out.shape[1], out.shape[2]
    divisor = np.empty(1, x.dtype)
    for p in range(first, last):
        for oy in range(oh):
            rows = 0
            for ky in range(kh):
                iy = oy * sh - ph + ky * dh
                if iy >= 0 and iy < h:
                    rows += 1
            for ox in range(ow):
                cols = 0
                for kx in range(kw):
                    ix = ox * sw - pw + kx * dw
                    if ix >= 0 and ix < w:
                        cols += 1
                total = zero
                for ky in range(kh):
                    iy = oy * sh - ph + ky * dh
                    inside_y = iy >= 0 and iy < h
                    row = zero
                    for kx in range(kw):
                        ix = ox * sw - pw + kx * dw
                        v = x[p, iy, ix] if inside_y and ix >= 0 and ix < w else zero
                        row = row + v
                    total = total + row
                count = rows * cols
                if count == 0:
                    out[p, oy, ox] = zero
                else:
                    divisor[0] = kh * kw if whole_kernel else count
                    out[p, oy, ox] = total / divisor[0]


def avg_pool2d(x: np.ndarray, kernel, strides, dilations, pads_begin, counts,
               whole_kernel: bool) -> np.ndarray:
    """AvgPool means of x [N, C, H, W] (f32 or f64), [N, C, *counts], the planes split
    over the kit's pool."""
    n, c, h, w = x.shape
    planes = n * c
    out = np.empty((n, c) + tuple(counts), x.dtype)
    if out.size == 0:
        return out
    xs = np.ascontiguousarray(x).reshape(planes, h, w)
    os_ = out.reshape((planes,) + tuple(counts))
    geometry = (kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1],
                pads_begin[0], pads_begin[1])
    loop, tail = _avg, (bool(whole_kernel), x.dtype.type(0))
    threads = workers(out.size * kernel[0] * kernel[1], MIN_WORK_PER_THREAD)
    if threads < 2 or planes < 2:
        loop(xs, os_, 0, planes, *geometry, *tail)
    else:       # a few parts per thread: see ops/depthwise_loop.py's PARTS_PER_THREAD
        parallel(lambda lo, hi: loop(xs, os_, lo, hi, *geometry, *tail),
                 even_ranges(planes, min(planes, 4 * threads)))
    return out
