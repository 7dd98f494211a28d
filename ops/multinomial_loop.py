"""The compiled loop of Multinomial-13 without replacement (ops/generation.py). Numba,
because each draw changes the cumulative distribution the next one reads: NumPy spent a
step of some 15 array calls per draw over [batch, classes], with a temporary per call.

Per row and draw, as the NumPy steps did and in the same f32 operations: the first class
whose cumulative probability reaches the sample (none: class 0, the distribution left as
it is); the chosen class's probability, cdf[k] - cdf[k - 1]; then every entry from that
class on less that probability, and every entry divided by 1 - that probability (x / 0
as NumPy gives it: inf with the sign of x, NaN for 0 or NaN).

Imported on the op's first run without replacement, so loading other models never imports
numba.
"""
import numba
import numpy as np

from irrun.opkit.compiled import cached_loop


@numba.njit(inline="always", nogil=True)
def _divide(x, d):
    """x / d in f32, NumPy's x / 0 included (numba would raise)."""
    if d != 0:
        return x / d
    if x > 0 or x < 0:
        return np.float32(np.inf) if (x > 0) != np.signbit(d) else np.float32(-np.inf)
    return np.float32(np.nan)


@cached_loop
def without_replacement(cdf, u, out):
    """Draw u.shape[1] classes per row of cdf [batch, classes] (f32, normalised, changed
    in place) with the samples u [batch, n] (f32), writing them to out [batch, n]."""
    batch, classes = cdf.shape
    zero = np.float32(0)
    one = np.float32(1)
    for b in range(batch):
        c = cdf[b]
        for j in range(u.shape[1]):
            x = u[b, j]
            sel = -1
            for k in range(classes):
                if x <= c[k]:
                    sel = k
                    break
            if sel < 0:
                out[b, j] = 0
                continue
            out[b, j] = sel
            below = c[sel - 1] if sel > 0 else zero
            chosen = c[sel] - below
            divisor = one - chosen
            if divisor != 0:            # (two plain loops the compiler vectorises)
                for k in range(sel):
                    c[k] = c[k] / divisor
                for k in range(sel, classes):
                    c[k] = (c[k] - chosen) / divisor
            else:
                for k in range(sel):
                    c[k] = _divide(c[k], divisor)
                for k in range(sel, classes):
                    c[k] = _divide(c[k] - chosen, divisor)
