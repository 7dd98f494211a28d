"""The compiled time loops of LSTMSequence-5, GRUSequence-5 and RNNSequence-5
(ops/recurrent.py): the recurrence of every direction and batch item in one call. Numba,
because the NumPy loop makes some fifteen calls a step for a few hundred multiply-adds
(torch_bilstm_ctc's hidden size 24: 0.9 ms a layer, nearly all of it call overhead).

Inputs are the sequence op's, prepared by the caller: xp [N, T, D * G], the input
projections X W^T + bias of every step and direction (one product up front); rt [D, H, G],
each direction's R transposed; states [N, D, H]; lengths [N] (each in [0, T]); reverse [D]
(1 where the direction runs from its last valid step back to step 0). Outputs Y
[N, D, T, H] must come in zeroed: steps past a batch item's length stay 0. A batch item
of length 0 ends with zero states (OpenVINO's reference).

Each step computes the NumPy path's formulas in the same order: the recurrent product
h R^T summed in the compute type (f32 or f64) over the hidden units in order (BLAS sums in
its own order), added to the step's projection; clipping, the activations and the gate
arithmetic in f64, the new states rounded to the compute type (the NumPy path does those
in the compute type: f32 results differ from it in the last bits, as OpenVINO's do).
The activations (libm's exp and tanh, most of a step's time) run gate block by gate block.
Activation codes: 0 sigmoid, 1 tanh, 2 relu.

Imported on the op's first run, so loading models without recurrent sequences never
imports numba.
"""
import numpy as np

from irrun.opkit.compiled import cached_loop

ACTIVATION_CODES = {"sigmoid": 0, "tanh": 1, "relu": 2}


@cached_loop
def _apply(code, a, lo, hi):
    """a[lo:hi] (f64) through an activation, in place. One loop per activation, the code
    tested once: a call per element with the test inside took half again as long."""
    if code == 0:
        for j in range(lo, hi):
            a[j] = 1.0 / (1.0 + np.exp(-a[j]))
    elif code == 1:
        for j in range(lo, hi):
            a[j] = np.tanh(a[j])
    else:
        for j in range(lo, hi):
            v = a[j]
            a[j] = v if v > 0.0 else v * 0.0        # relu; NaN stays NaN


@cached_loop
def _clip(clip, v):
    """v (f64) clipped to [-clip, clip] when clip > 0; NaN stays NaN."""
    if clip > 0.0:
        if v > clip:
            return clip
        if v < -clip:
            return -clip
    return v


@cached_loop
def _pre(xp, n, t, first, acc, acc_first, count, clip, out, out_first):
    """out[out_first + g] = xp[n, t, first + g] + acc[acc_first + g] (in the compute type),
    in f64, clipped to [-clip, clip] when clip > 0; g < count."""
    for g in range(count):
        out[out_first + g] = _clip(clip, np.float64(xp[n, t, first + g] + acc[acc_first + g]))


@cached_loop
def _product(h, rt, d, rows, first, count, acc):
    """acc[g] = sum over j of h[j] * rt[d, j, first + g], g < count, j in order."""
    for g in range(count):
        acc[g] = 0
    for j in range(rows):
        hj = h[j]
        for g in range(count):
            acc[g] += hj * rt[d, j, first + g]


@cached_loop
def lstm_loop(xp, rt, h0, c0, lengths, reverse, clip, fa, ga, ha, y, ho, co):
    n_items, _, _ = xp.shape
    dirs, hs, g4 = rt.shape
    acc = np.empty(g4, xp.dtype)
    pre = np.empty(g4, np.float64)          # gates f, i, c, o
    tc = np.empty(hs, np.float64)
    h = np.empty(hs, xp.dtype)
    c = np.empty(hs, xp.dtype)
    for d in range(dirs):
        base = d * g4
        for n in range(n_items):
            steps = lengths[n]
            if steps == 0:
                for j in range(hs):
                    ho[n, d, j] = 0
                    co[n, d, j] = 0
                continue
            for j in range(hs):
                h[j] = h0[n, d, j]
                c[j] = c0[n, d, j]
            for k in range(steps):
                t = steps - 1 - k if reverse[d] else k
                _product(h, rt, d, hs, 0, g4, acc)
                _pre(xp, n, t, base, acc, 0, g4, clip, pre, 0)
                _apply(fa, pre, 0, 2 * hs)
                _apply(ga, pre, 2 * hs, 3 * hs)
                _apply(fa, pre, 3 * hs, g4)
                for j in range(hs):
                    c[j] = pre[j] * c[j] + pre[hs + j] * pre[2 * hs + j]
                    tc[j] = c[j]
                _apply(ha, tc, 0, hs)
                for j in range(hs):
                    hn = pre[3 * hs + j] * tc[j]
                    h[j] = hn
                    y[n, d, t, j] = hn
            for j in range(hs):
                ho[n, d, j] = h[j]
                co[n, d, j] = c[j]


@cached_loop
def gru_loop(xp, rt, rbh, h0, lengths, reverse, clip, fa, ga, lbr, y, ho):
    """rbh [D, H]: the reset gate's recurrent bias (linear_before_reset), else unused."""
    n_items, _, _ = xp.shape
    dirs, hs, g3 = rt.shape
    acc = np.empty(g3, xp.dtype)
    pre = np.empty(g3, np.float64)          # gates z, r, candidate
    h = np.empty(hs, xp.dtype)
    rh = np.empty(hs, xp.dtype)
    for d in range(dirs):
        base = d * g3
        for n in range(n_items):
            steps = lengths[n]
            if steps == 0:
                for j in range(hs):
                    ho[n, d, j] = 0
                continue
            for j in range(hs):
                h[j] = h0[n, d, j]
            for k in range(steps):
                t = steps - 1 - k if reverse[d] else k
                if lbr:
                    _product(h, rt, d, hs, 0, g3, acc)
                    _pre(xp, n, t, base, acc, 0, 2 * hs, clip, pre, 0)
                    _apply(fa, pre, 0, 2 * hs)
                    for j in range(hs):
                        pre[2 * hs + j] = _clip(clip, xp[n, t, base + 2 * hs + j]
                                                + pre[hs + j] * (acc[2 * hs + j] + rbh[d, j]))
                else:
                    _product(h, rt, d, hs, 0, 2 * hs, acc)
                    _pre(xp, n, t, base, acc, 0, 2 * hs, clip, pre, 0)
                    _apply(fa, pre, 0, 2 * hs)
                    # (r * h) R_h^T: the candidate's product takes the reset state.
                    for j in range(hs):
                        rh[j] = pre[hs + j] * h[j]
                    _product(rh, rt, d, hs, 2 * hs, hs, acc)
                    _pre(xp, n, t, base + 2 * hs, acc, 0, hs, clip, pre, 2 * hs)
                _apply(ga, pre, 2 * hs, g3)
                for j in range(hs):
                    z = pre[j]
                    hn = (1.0 - z) * pre[2 * hs + j] + z * h[j]
                    h[j] = hn
                    y[n, d, t, j] = hn
            for j in range(hs):
                ho[n, d, j] = h[j]


@cached_loop
def rnn_loop(xp, rt, h0, lengths, reverse, clip, fa, y, ho):
    n_items, _, _ = xp.shape
    dirs, hs, _ = rt.shape
    acc = np.empty(hs, xp.dtype)
    pre = np.empty(hs, np.float64)
    h = np.empty(hs, xp.dtype)
    for d in range(dirs):
        base = d * hs
        for n in range(n_items):
            steps = lengths[n]
            if steps == 0:
                for j in range(hs):
                    ho[n, d, j] = 0
                continue
            for j in range(hs):
                h[j] = h0[n, d, j]
            for k in range(steps):
                t = steps - 1 - k if reverse[d] else k
                _product(h, rt, d, hs, 0, hs, acc)
                _pre(xp, n, t, base, acc, 0, hs, clip, pre, 0)
                _apply(fa, pre, 0, hs)
                for j in range(hs):
                    h[j] = pre[j]
                    y[n, d, t, j] = pre[j]
            for j in range(hs):
                ho[n, d, j] = h[j]
