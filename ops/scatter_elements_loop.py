"""The compiled loop of ScatterElementsUpdate-3/12 without reduction (ops/scatter_gather.py).
Numba, because NumPy needs a pass per step: the indices widened to int64 and checked, each
update's flat position worked out from them, its targets counted for repeats (the last write
of a repeated target must win, and NumPy leaves repeated assignments unordered), then the
assignment; here one pass over the indices checks, places and writes each update, in
row-major order of the indices, so a repeated target keeps the last write as OpenVINO's.

Imported on the op's first run, so loading models without it never imports numba.
"""
from irrun.opkit.compiled import cached_loop


@cached_loop
def scatter_none(out, idx, upd, base_a, base_b, stride, n):
    """out (flat) at base_a[a] + i * stride + base_b[b] takes upd[a, m, b] for each
    i = idx[a, m, b] in row-major order (a negative i counts from n). idx and upd are
    [A, M, B]: the dims before the axis, the axis, the dims after it. Returns -1, or at the
    first index outside [-n, n) its position in idx (flat), with out then half written."""
    A, M, B = idx.shape
    for a in range(A):
        oa = base_a[a]
        for m in range(M):
            for b in range(B):
                i = idx[a, m, b]
                if i < 0:
                    i += n
                if i < 0 or i >= n:
                    return (a * M + m) * B + b
                out[oa + i * stride + base_b[b]] = upd[a, m, b]
    return -1
