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
Activation codes: 0 sigmoid, 1 tanh, 2 relu.

Imported on the op's first run, so loading models without recurrent sequences never
imports numba.
"""
import numpy as np

from irrun.opkit.compiled import cached_loop

ACTIVATION_CODES = {"sigmoid": 0, "tanh": 1, "relu": 2}


@cached_loop
def _act(code, x):
    """An activation, in f64."""
    x = np.float64(x)
    if code == 0:
        return 1.0 / (1.0 + np.exp(-x))
    if code == 1:
        return np.tanh(x)
    return x if x > 0.0 else x * 0.0        # relu; NaN stays NaN


@cached_loop
def _clip(clip, x):
    """x in f64, clipped to [-clip, clip] when clip > 0."""
    v = np.float64(x)
    if clip > 0.0:
        if v > clip:
            return clip
        if v < -clip:
            return -clip
    return v


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
                for j in range(hs):
                    f = _act(fa, _clip(clip, xp[n, t, base + j] + acc[j]))
                    i = _act(fa, _clip(clip, xp[n, t, base + hs + j] + acc[hs + j]))
                    g = _act(ga, _clip(clip, xp[n, t, base + 2 * hs + j] + acc[2 * hs + j]))
                    o = _act(fa, _clip(clip, xp[n, t, base + 3 * hs + j] + acc[3 * hs + j]))
                    c[j] = f * c[j] + i * g
                    hn = o * _act(ha, c[j])
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
    h = np.empty(hs, xp.dtype)
    rh = np.empty(hs, xp.dtype)
    z = np.empty(hs, xp.dtype)
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
                    for j in range(hs):
                        z[j] = _act(fa, _clip(clip, xp[n, t, base + j] + acc[j]))
                        r = _act(fa, _clip(clip, xp[n, t, base + hs + j] + acc[hs + j]))
                        rh[j] = r * (acc[2 * hs + j] + rbh[d, j])
                else:
                    _product(h, rt, d, hs, 0, 2 * hs, acc)
                    for j in range(hs):
                        z[j] = _act(fa, _clip(clip, xp[n, t, base + j] + acc[j]))
                        r = _act(fa, _clip(clip, xp[n, t, base + hs + j] + acc[hs + j]))
                        rh[j] = r * h[j]
                    # (r * h) R_h^T: the candidate's product takes the reset state.
                    _product(rh, rt, d, hs, 2 * hs, hs, acc)
                    for j in range(hs):
                        rh[j] = acc[j]
                for j in range(hs):
                    cand = _act(ga, _clip(clip, xp[n, t, base + 2 * hs + j] + rh[j]))
                    hn = (1 - z[j]) * cand + z[j] * h[j]
                    h[j] = hn
                    y[n, d, t, j] = hn
            for j in range(hs):
                ho[n, d, j] = h[j]


@cached_loop
def rnn_loop(xp, rt, h0, lengths, reverse, clip, fa, y, ho):
    n_items, _, _ = xp.shape
    dirs, hs, _ = rt.shape
    acc = np.empty(hs, xp.dtype)
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
                for j in range(hs):
                    hn = _act(fa, _clip(clip, xp[n, t, base + j] + acc[j]))
                    h[j] = hn
                    y[n, d, t, j] = hn
            for j in range(hs):
                ho[n, d, j] = h[j]
