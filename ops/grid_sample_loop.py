"""The compiled loop of GridSample-9's bilinear mode (ops/image.py). Numba, because NumPy
spends a call per step on every sample: four gathers, each with its padding's clip and
masks, and the blend, some 60 calls over [N, Ho, Wo] arrays, where raft_small's lookups
(256 batches of one channel, 7x7 samples each) took 700 us a layer.

For data and a grid of one type (f32 or f64), the loop works out each sample's
coordinates in that type as GridSample9.run does, pads each corner's index as the
reference does and blends the four in the same order and types as the NumPy expression
((1 - dx) * v00 + dx * v01, the same for row y0 + 1, then dy * q1 + (1 - dy) * q0), each
product and sum rounded on its own (numba contracts nothing into FMAs): the same bits.

Imported on the op's first bilinear run, so loading models without one never imports numba.
"""
import numba
import numpy as np

from irrun.opkit import even_ranges, parallel, workers
from irrun.opkit.compiled import cached_loop

ZEROS, BORDER, REFLECTION = 0, 1, 2
PADDING = {"zeros": ZEROS, "border": BORDER, "reflection": REFLECTION}

# Samples (times channels) per thread below which the loop runs on the calling thread alone.
MIN_WORK_PER_THREAD = 1 << 16


@numba.njit(inline="always", nogil=True)
def _tap(i, size, padding, align):
    """(index to read, whether it reads data) of the integer coordinate i on an axis of
    `size`, padded as _grid_taps in ops/image.py pads it (an index outside zeros padding
    is clipped: it is read, and its value dropped without a branch)."""
    if padding == 0:
        return min(max(i, 0), size - 1), (i >= 0) & (i < size)
    if padding == 1:
        return min(max(i, 0), size - 1), True
    if align:
        period = 1 if size == 1 else 2 * (size - 1)
        r = abs(i) % period
        return (period - r if r >= size else r), True
    period = 2 * size
    r = i % period                        # Python's modulo: r >= 0
    return (period - 1 - r if r >= size else r), True


@cached_loop
def _finite(grid):
    """Whether every coordinate of grid [N, Ho, Wo, 2] is finite."""
    flat = grid.ravel()
    for k in range(flat.size):
        if not np.isfinite(flat[k]):
            return False
    return True


@cached_loop
def _bilinear(src, grid, out, first, last, padding, align, one, two, ht, wt):
    """out[b, :, i, j] for the batches b in [first, last): src [N, C, H, W], grid
    [N, Ho, Wo, 2] (x, y in [-1, 1], finite) of src's type, out [N, C, Ho, Wo]. one, two,
    ht, wt are 1, 2, H and W in that type: every step is computed in it, as
    GridSample9.run computes it."""
    c, h, w = src.shape[1], src.shape[2], src.shape[3]
    ho, wo = grid.shape[1], grid.shape[2]
    zero = one - one
    far = two ** 62         # int64 holds it: coordinates beyond are clamped before int()
    for b in range(first, last):
        for i in range(ho):
            for j in range(wo):
                gx, gy = grid[b, i, j, 0], grid[b, i, j, 1]
                if align:
                    xd = (gx + one) * (wt - one) / two
                    yd = (gy + one) * (ht - one) / two
                else:
                    xd = ((gx + one) * wt - one) / two
                    yd = ((gy + one) * ht - one) / two
                xf, yf = np.floor(xd), np.floor(yd)
                fx, fy = xd - xf, yd - yf
                x0, y0 = int(min(max(xf, -far), far)), int(min(max(yf, -far), far))
                ya, oka = _tap(y0, h, padding, align)
                yb, okb = _tap(y0 + 1, h, padding, align)
                xa, okc = _tap(x0, w, padding, align)
                xb, okd = _tap(x0 + 1, w, padding, align)
                ex, ey = one - fx, one - fy
                for ch in range(c):
                    v00 = src[b, ch, ya, xa]
                    v01 = src[b, ch, ya, xb]
                    v10 = src[b, ch, yb, xa]
                    v11 = src[b, ch, yb, xb]
                    v00 = v00 if oka and okc else zero
                    v01 = v01 if oka and okd else zero
                    v10 = v10 if okb and okc else zero
                    v11 = v11 if okb and okd else zero
                    q0 = ex * v00 + fx * v01
                    q1 = ex * v10 + fx * v11
                    out[b, ch, i, j] = fy * q1 + ey * q0


def finite(grid: np.ndarray) -> bool:
    return bool(_finite(np.ascontiguousarray(grid)))


def bilinear(src: np.ndarray, grid: np.ndarray, padding: str, align: bool) -> np.ndarray:
    """The bilinear samples [N, C, Ho, Wo] of src [N, C, H, W] (f32 or f64, H and W > 0) at
    grid [N, Ho, Wo, 2] (finite, of src's type)."""
    n, c = src.shape[:2]
    out = np.empty((n, c) + grid.shape[1:3], src.dtype)
    if out.size == 0:
        return out
    arrays = (np.ascontiguousarray(src), np.ascontiguousarray(grid), out)
    t = src.dtype.type
    tail = (PADDING[padding], bool(align), t(1), t(2), t(src.shape[2]), t(src.shape[3]))
    threads = workers(out.size, MIN_WORK_PER_THREAD)
    if threads < 2 or n < 2:
        _bilinear(*arrays, 0, n, *tail)
    else:       # a few parts per thread: see ops/depthwise_loop.py's PARTS_PER_THREAD
        parallel(lambda lo, hi: _bilinear(*arrays, lo, hi, *tail),
                 even_ranges(n, min(n, 4 * threads)))
    return out
