"""The compiled loop of MVN-2/MVN-6 (ops/normalization.py) over trailing axes: each row
of x [R, L] (f32 or f64) normalised in one call, in f64 as the NumPy path computes it
(the mean, the deviations' mean square, sqrt(var + eps) or sqrt(var) + eps, each
deviation divided by it in f64, then rounded to x's type once). Numba, because the NumPy
path makes five passes over the tensor, each a new f64 array, where this one reads each
row twice from cache and writes it once.

The sums run in f64 with eight accumulators (numba does not reorder a sum itself, and a
single accumulator would leave the row waiting on each add); NumPy's pairwise f64 sums
differ from them by a few f64 ulps at most: f32 results come out the same bits, f64 ones
within a few ulps.

Imported on the op's first run, so loading models without MVN never imports numba.
"""
import numpy as np

from irrun.opkit import even_ranges, parallel, workers
from irrun.opkit.compiled import cached_loop

# Elements per thread below which the loop runs on the calling thread alone (2-core AMD
# EPYC, rows of 256: 65K elements 0.7x on two threads, 262K 1.2x, 1M 1.7x).
MIN_WORK_PER_THREAD = 1 << 18


@cached_loop
def _sum8(row, shift):
    """sum(row[k] - shift) in f64, eight partial sums."""
    n = row.size
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    k = 0
    while k + 8 <= n:
        a0 += np.float64(row[k]) - shift
        a1 += np.float64(row[k + 1]) - shift
        a2 += np.float64(row[k + 2]) - shift
        a3 += np.float64(row[k + 3]) - shift
        a4 += np.float64(row[k + 4]) - shift
        a5 += np.float64(row[k + 5]) - shift
        a6 += np.float64(row[k + 6]) - shift
        a7 += np.float64(row[k + 7]) - shift
        k += 8
    while k < n:
        a0 += np.float64(row[k]) - shift
        k += 1
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@cached_loop
def _squares8(row, mean):
    """sum((row[k] - mean) ** 2) in f64, eight partial sums."""
    n = row.size
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    k = 0
    while k + 8 <= n:
        d0 = np.float64(row[k]) - mean
        d1 = np.float64(row[k + 1]) - mean
        d2 = np.float64(row[k + 2]) - mean
        d3 = np.float64(row[k + 3]) - mean
        d4 = np.float64(row[k + 4]) - mean
        d5 = np.float64(row[k + 5]) - mean
        d6 = np.float64(row[k + 6]) - mean
        d7 = np.float64(row[k + 7]) - mean
        a0 += d0 * d0
        a1 += d1 * d1
        a2 += d2 * d2
        a3 += d3 * d3
        a4 += d4 * d4
        a5 += d5 * d5
        a6 += d6 * d6
        a7 += d7 * d7
        k += 8
    while k < n:
        d = np.float64(row[k]) - mean
        a0 += d * d
        k += 1
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@cached_loop
def _rows(x, out, first, last, normalize_variance, eps, inside):
    """out[r] = MVN of x[r] for the rows r in [first, last) of x, out [R, L]."""
    n = x.shape[1]
    for r in range(first, last):
        row = x[r]
        dst = out[r]
        mean = _sum8(row, 0.0) / n
        if normalize_variance:
            var = _squares8(row, mean) / n
            denom = np.sqrt(var + eps) if inside else np.sqrt(var) + eps
            for k in range(n):
                dst[k] = (np.float64(row[k]) - mean) / denom
        else:
            for k in range(n):
                dst[k] = np.float64(row[k]) - mean


def mvn_rows(x: np.ndarray, normalize_variance: bool, eps: float, inside: bool) -> np.ndarray:
    """MVN of each row of x [R, L] (C-contiguous, f32 or f64, L > 0), x's type."""
    rows = x.shape[0]
    out = np.empty_like(x)
    tail = (bool(normalize_variance), float(eps), bool(inside))
    threads = workers(x.size, MIN_WORK_PER_THREAD)
    if threads < 2 or rows < 2:
        _rows(x, out, 0, rows, *tail)
    else:       # a few parts per thread: see ops/depthwise_loop.py's PARTS_PER_THREAD
        parallel(lambda lo, hi: _rows(x, out, lo, hi, *tail),
                 even_ranges(rows, min(rows, 4 * threads)))
    return out
