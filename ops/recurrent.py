"""Recurrent cells and sequences (spec pages: sequence/LSTMCell_1, LSTMSequence_5, GRUCell_3,
GRUSequence_5, RNNCell_3, RNNSequence_5; LSTMCell-4 is LSTMCell-1 without peepholes).

Gate orders are OpenVINO's: LSTM fico (forget, input, cell, output), GRU zrh. Everything is
computed in the input's precision: f32 in f32, f64 in f64, f16/bf16 in f32 and rounded once
at the output. A sequence's input projections X W^T of all steps and directions are one
product up front; the recurrence is a compiled loop over every direction, batch item and
step (ops/recurrent_loop.py) up to a size, past it a NumPy loop over steps, each a few
matrix products over the whole batch. A cell is one NumPy step.

Sequence lengths shorter than T follow OpenVINO's reference kernel: outputs past a batch
item's length are 0, its final states are those of its last valid step (0 for a length of 0),
and the reverse direction runs over the valid part only, from its last step back to step 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from irrun.opkit import Dim, TensorSpec, check_integer, fail, format_shape, matmul, register, warn

# ---------------------------------------------------------------- activations


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _relu(x):
    return np.maximum(x, 0)


# The spec pages allow these three; their alpha/beta parameters do not apply to any of them.
_ACTIVATIONS = {"sigmoid": _sigmoid, "tanh": np.tanh, "relu": _relu}


def _activations(attrs, count: int):
    names = [a.strip().lower() for a in attrs.activations]
    if len(names) != count:
        fail(f"activations has {len(names)} functions ({', '.join(names) or 'none'}); "
             f"this op takes {count}")
    for n in names:
        if n not in _ACTIVATIONS:
            fail(f"activation '{n}' is not one of {', '.join(_ACTIVATIONS)}")
    return [_ACTIVATIONS[n] for n in names]


def _clipper(clip: float):
    """Clipping of gate pre-activations to [-clip, clip]; clip <= 0 means none (OpenVINO's
    default 0; the pages say infinity)."""
    if clip > 0:
        return lambda x: np.clip(x, -clip, clip)
    return lambda x: x


def _check_attrs(attrs, count):
    if attrs.hidden_size <= 0:
        fail(f"hidden_size must be positive, got {attrs.hidden_size}")
    if attrs.clip < 0 or np.isnan(attrs.clip):
        fail(f"clip must be non-negative, got {attrs.clip}")
    return _activations(attrs, count)


# ---------------------------------------------------------------- shape rules


def _unify(entries):
    """Check named shapes against patterns and bind their symbolic dims.

    entries: (what, shape or None, pattern) with pattern items (label, want): want is a
    symbol (str, bound across entries: batch size, input size, ...) or an int. Returns the
    bound symbols as Dims.
    """
    env: dict[str, Dim] = {}
    for what, shape, pattern in entries:
        if shape is None:
            continue
        labels = "[" + ", ".join(label for label, _ in pattern) + "]"
        if len(shape) != len(pattern):
            fail(f"{what} must be {len(pattern)}-D {labels}, got {format_shape(shape)}")
        for j, (d, (label, want)) in enumerate(zip(shape, pattern)):
            if isinstance(want, str):
                have = env.get(want)
                m = d if have is None else have.merge(d)
                if m is None:
                    fail(f"{what} has shape {format_shape(shape)}: dim {j} ({label}) is {d}, "
                         f"but elsewhere {want} is {have}")
                env[want] = m
            elif d.merge(Dim.of(want)) is None:
                fail(f"{what} has shape {format_shape(shape)}, expected {labels}: dim {j} "
                     f"({label}) is {d}, not {want}")
    return env


def _check_types(specs, names):
    x = specs[0]
    if x.etype.kind != "float":
        fail(f"X must be of a floating-point type, got {x.etype.name}")
    for s, n in zip(specs[1:], names[1:]):
        if s is not None and s.etype != x.etype:
            fail(f"{n} has element type {s.etype.name}, X has {x.etype.name}: they must match")


def _dims_of(arrays):
    return [None if a is None else tuple(Dim.of(d) for d in a.shape) for a in arrays]


def _check_run_shapes(names, arrays, patterns, implied):
    """A kernel's shape check: the arrays' shapes against those X's shape `implied` (None
    when X has the wrong rank); the shape rule's check (_unify) words any difference. The
    comparison costs a tenth of the general check, which a cell ran at every call."""
    if implied is None or any(a is not None and a.shape != want
                              for a, want in zip(arrays, implied)):
        _unify(list(zip(names, _dims_of(arrays), patterns)))


# ---------------------------------------------------------------- one time step per family


def _lstm_step(acts, clip, x_proj, h, c, r, p, input_forget):
    """One LSTM step; x_proj = X W^T + B for this step, r = R (fico rows)."""
    f_act, g_act, h_act = acts
    hs = h.shape[-1]
    gates = x_proj + h @ r.T
    gf, gi, gc, go = (gates[:, k * hs:(k + 1) * hs] for k in range(4))
    if p is not None:
        # Peepholes in the order f, i, o (OpenVINO's reference and CPU plugin).
        gf = gf + p[:hs] * c
        gi = gi + p[hs:2 * hs] * c
    f = f_act(clip(gf))
    i = 1 - f if input_forget else f_act(clip(gi))
    c_new = f * c + i * g_act(clip(gc))
    if p is not None:
        go = go + p[2 * hs:] * c_new
    h_new = f_act(clip(go)) * h_act(c_new)
    return h_new, c_new


def _gru_step(acts, clip, lbr, x_proj, h, r, rb_h):
    f_act, g_act = acts
    hs = h.shape[-1]
    hzr = h @ r[:2 * hs].T
    z = f_act(clip(x_proj[:, :hs] + hzr[:, :hs]))
    rr = f_act(clip(x_proj[:, hs:2 * hs] + hzr[:, hs:]))
    if lbr:
        cand = g_act(clip(x_proj[:, 2 * hs:] + rr * (h @ r[2 * hs:].T + rb_h)))
    else:
        cand = g_act(clip(x_proj[:, 2 * hs:] + (rr * h) @ r[2 * hs:].T))
    return (1 - z) * cand + z * h


def _rnn_step(acts, clip, x_proj, h, r):
    return acts[0](clip(x_proj + h @ r.T))


# ---------------------------------------------------------------- weights per family


def _compute_dtype(x: np.ndarray):
    return np.float64 if x.dtype == np.float64 else np.float32


def _gru_bias(b, hs, lbr, dtype):
    """(bias added to X W^T [3*hs], Rbh or None) from GRU's B (3*hs, or 4*hs with lbr)."""
    if b is None:
        return np.zeros(3 * hs, dtype), (np.zeros(hs, dtype) if lbr else None)
    b = b.astype(dtype)
    if lbr:
        # [bz, br, Wbh, Rbh]: Rbh goes inside the reset gate's product.
        return b[:3 * hs], b[3 * hs:]
    return b, None


# ---------------------------------------------------------------- the time loop


def _reverse_within(x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """x [N, T, ...] with each row's first lengths[n] steps reversed (ReverseSequence with
    batch axis 0 and seq axis 1; a length of 0 reverses nothing)."""
    t = x.shape[1]
    steps = np.arange(t)
    src = np.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)
    return np.take_along_axis(x, src.reshape(src.shape + (1,) * (x.ndim - 2)), axis=1)


def _run_direction(step, x_proj, states, lengths, reverse):
    """Run `step(x_proj_t, *states) -> new states (hidden first)` over T steps.

    x_proj [N, T, G]; states: list of [N, H]. Returns (Y [N, T, H], final states).
    """
    n, t = x_proj.shape[:2]
    if reverse:
        x_proj = _reverse_within(x_proj, lengths)
    full = bool((lengths == t).all())
    y = np.zeros((n, t) + states[0].shape[1:], states[0].dtype)
    for k in range(t):
        new = step(x_proj[:, k], *states)
        new = new if isinstance(new, tuple) else (new,)
        if full:
            states = list(new)
            y[:, k] = states[0]
        else:
            live = (k < lengths)[:, None]
            states = [np.where(live, a, b) for a, b in zip(new, states)]
            y[:, k] = np.where(live, new[0], 0)
    if not full:
        # A batch item of length 0 ends with zero states (OpenVINO's reference).
        states = [np.where((lengths == 0)[:, None], 0, s) for s in states]
    if reverse:
        y = _reverse_within(y, lengths)
    return y, states


def _check_lengths(lengths: np.ndarray, n: int, t: int) -> np.ndarray:
    if lengths.shape != (n,):
        fail(f"sequence_lengths has shape {list(lengths.shape)}, expected [{n}] (the batch size)")
    lens = lengths.astype(np.int64)
    if n and (lens.min() < 0 or lens.max() > t):
        bad = np.flatnonzero((lens < 0) | (lens > t))
        i = int(bad[0])
        fail(f"sequence_lengths[{i}] = {int(lengths[i])} is out of range [0, {t}] (X has "
             f"{t} time steps)", code="value")
    return lens


# ---------------------------------------------------------------- attributes


@dataclass(frozen=True)
class RecurrentAttrs:
    hidden_size: int
    activations_alpha: tuple[float, ...] = ()
    activations_beta: tuple[float, ...] = ()
    clip: float = 0.0


@dataclass(frozen=True)
class LSTMCellAttrs(RecurrentAttrs):
    activations: tuple[str, ...] = ("sigmoid", "tanh", "tanh")
    input_forget: bool = False
    weights_format: Literal["fico", "icof", "ifco", "ifoc", "iofc"] = "fico"
    peepholes: ClassVar[bool] = True


@dataclass(frozen=True)
class LSTMCell4Attrs(RecurrentAttrs):
    activations: tuple[str, ...] = ("sigmoid", "tanh", "tanh")
    peepholes: ClassVar[bool] = False
    input_forget: ClassVar[bool] = False
    weights_format: ClassVar[str] = "fico"


Direction = Literal["forward", "reverse", "bidirectional"]


@dataclass(frozen=True)
class LSTMSequenceAttrs(RecurrentAttrs):
    direction: Direction = "forward"
    activations: tuple[str, ...] = ("sigmoid", "tanh", "tanh")


@dataclass(frozen=True)
class GRUCellAttrs(RecurrentAttrs):
    activations: tuple[str, ...] = ("sigmoid", "tanh")
    linear_before_reset: bool = False


@dataclass(frozen=True)
class GRUSequenceAttrs(RecurrentAttrs):
    direction: Direction = "forward"
    activations: tuple[str, ...] = ("sigmoid", "tanh")
    linear_before_reset: bool = False


@dataclass(frozen=True)
class RNNCellAttrs(RecurrentAttrs):
    activations: tuple[str, ...] = ("tanh",)


@dataclass(frozen=True)
class RNNSequenceAttrs(RecurrentAttrs):
    direction: Direction = "forward"
    activations: tuple[str, ...] = ("tanh",)


def _fico(w: np.ndarray | None, fmt: str, axis: int = 0):
    """Gate blocks of an LSTMCell-1 weight in weights_format order, reordered to fico."""
    if w is None or fmt == "fico":
        return w
    blocks = np.split(w, 4, axis=axis)
    return np.concatenate([blocks[fmt.index(g)] for g in "fico"], axis=axis)


# ---------------------------------------------------------------- LSTMCell


@register("LSTMCell", since=(1, 4), attrs=(LSTMCellAttrs, LSTMCell4Attrs), category="sequence")
class LSTMCell:
    # LSTMCell-1 takes peepholes P [3 * hidden_size] (order f, i, o) as input 6, input_forget
    # and weights_format; LSTMCell-4 has neither. OpenVINO's CPU plugin ignores the last two
    # (it computes input_forget=false, fico whatever they say); its reference kernel couples
    # the gates for input_forget (i = 1 - f) and refuses formats other than fico. irrun does
    # what the attributes say: i = 1 - f, and W/R/B gate blocks read in weights_format's
    # order; validate warns that OpenVINO's CPU plugin computes something else.
    @staticmethod
    def infer(attrs, x, h, c, w, r, b=None, p=None):
        if p is not None and not attrs.peepholes:
            fail("LSTMCell-4 takes 6 inputs; peepholes (input 6) are LSTMCell-1's")
        _check_attrs(attrs, 3)
        if attrs.input_forget:
            warn("input_forget=true: irrun couples the gates (i = 1 - f) as OpenVINO's reference "
                 "does; OpenVINO's CPU plugin ignores the attribute")
        if attrs.weights_format != "fico":
            warn(f"weights_format={attrs.weights_format}: irrun reads the gate blocks in that "
                 "order; OpenVINO's CPU plugin ignores the attribute (reads fico)")
        hs = attrs.hidden_size
        _check_types([x, h, c, w, r, b, p], ["X", "initial_hidden_state", "initial_cell_state",
                                              "W", "R", "B", "P"])
        env = _unify([
            ("X (input 0)", x.shape, [("batch_size", "N"), ("input_size", "I")]),
            ("initial_hidden_state (input 1)", h.shape, [("batch_size", "N"), ("hidden_size", hs)]),
            ("initial_cell_state (input 2)", c.shape, [("batch_size", "N"), ("hidden_size", hs)]),
            ("W (input 3)", w.shape, [("4 * hidden_size", 4 * hs), ("input_size", "I")]),
            ("R (input 4)", r.shape, [("4 * hidden_size", 4 * hs), ("hidden_size", hs)]),
            ("B (input 5)", None if b is None else b.shape, [("4 * hidden_size", 4 * hs)]),
            ("P (input 6)", None if p is None else p.shape, [("3 * hidden_size", 3 * hs)]),
        ])
        out = TensorSpec(x.etype, (env.get("N", Dim()), Dim.of(hs)))
        return [out, out]

    @staticmethod
    def run(attrs, x, h, c, w, r, b=None, p=None):
        if p is not None and not attrs.peepholes:
            fail("LSTMCell-4 takes 6 inputs; peepholes (input 6) are LSTMCell-1's")
        acts = _check_attrs(attrs, 3)
        hs = attrs.hidden_size
        n, i = x.shape if x.ndim == 2 else (None, None)
        _check_run_shapes(
            ["X", "initial_hidden_state", "initial_cell_state", "W", "R", "B", "P"],
            [x, h, c, w, r, b, p],
            [[("batch_size", "N"), ("input_size", "I")], [("batch_size", "N"), ("hidden_size", hs)],
             [("batch_size", "N"), ("hidden_size", hs)], [("4 * hidden_size", 4 * hs), ("input_size", "I")],
             [("4 * hidden_size", 4 * hs), ("hidden_size", hs)], [("4 * hidden_size", 4 * hs)],
             [("3 * hidden_size", 3 * hs)]],
            None if n is None else [(n, i), (n, hs), (n, hs), (4 * hs, i), (4 * hs, hs),
                                    (4 * hs,), (3 * hs,)])
        cd = _compute_dtype(x)
        fmt = attrs.weights_format
        w, r, b = (_fico(a, fmt) for a in (w, r, b))
        bias = 0 if b is None else b.astype(cd, copy=False)
        x_proj = x.astype(cd, copy=False) @ w.astype(cd, copy=False).T + bias
        ho, co = _lstm_step(acts, _clipper(attrs.clip), x_proj, h.astype(cd, copy=False),
                            c.astype(cd, copy=False), r.astype(cd, copy=False),
                            None if p is None else p.astype(cd, copy=False), attrs.input_forget)
        return ho.astype(x.dtype, copy=False), co.astype(x.dtype, copy=False)


# ---------------------------------------------------------------- GRUCell / RNNCell


@register("GRUCell", since=3, attrs=GRUCellAttrs, category="sequence")
class GRUCell3:
    @staticmethod
    def infer(attrs, x, h, w, r, b=None):
        _check_attrs(attrs, 2)
        hs = attrs.hidden_size
        nb = 4 * hs if attrs.linear_before_reset else 3 * hs
        _check_types([x, h, w, r, b], ["X", "initial_hidden_state", "W", "R", "B"])
        env = _unify([
            ("X (input 0)", x.shape, [("batch_size", "N"), ("input_size", "I")]),
            ("initial_hidden_state (input 1)", h.shape, [("batch_size", "N"), ("hidden_size", hs)]),
            ("W (input 2)", w.shape, [("3 * hidden_size", 3 * hs), ("input_size", "I")]),
            ("R (input 3)", r.shape, [("3 * hidden_size", 3 * hs), ("hidden_size", hs)]),
            ("B (input 4)", None if b is None else b.shape,
             [("4 * hidden_size" if attrs.linear_before_reset else "3 * hidden_size", nb)]),
        ])
        return [TensorSpec(x.etype, (env.get("N", Dim()), Dim.of(hs)))]

    @staticmethod
    def run(attrs, x, h, w, r, b=None):
        acts = _check_attrs(attrs, 2)
        hs, lbr = attrs.hidden_size, attrs.linear_before_reset
        n, i = x.shape if x.ndim == 2 else (None, None)
        nb = 4 * hs if lbr else 3 * hs
        _check_run_shapes(["X", "initial_hidden_state", "W", "R", "B"], [x, h, w, r, b],
                          [[("batch_size", "N"), ("input_size", "I")],
                           [("batch_size", "N"), ("hidden_size", hs)],
                           [("3 * hidden_size", 3 * hs), ("input_size", "I")],
                           [("3 * hidden_size", 3 * hs), ("hidden_size", hs)],
                           [("B size", nb)]],
                          None if n is None else [(n, i), (n, hs), (3 * hs, i), (3 * hs, hs),
                                                  (nb,)])
        cd = _compute_dtype(x)
        xb, rbh = _gru_bias(b, hs, lbr, cd)
        x_proj = x.astype(cd, copy=False) @ w.astype(cd, copy=False).T + xb
        ho = _gru_step(acts, _clipper(attrs.clip), lbr, x_proj, h.astype(cd, copy=False),
                       r.astype(cd, copy=False), rbh)
        return (ho.astype(x.dtype, copy=False),)


@register("RNNCell", since=1, attrs=RNNCellAttrs, category="sequence")
class RNNCell1:
    @staticmethod
    def infer(attrs, x, h, w, r, b=None):
        _check_attrs(attrs, 1)
        hs = attrs.hidden_size
        _check_types([x, h, w, r, b], ["X", "H", "W", "R", "B"])
        env = _unify([
            ("X (input 0)", x.shape, [("batch_size", "N"), ("input_size", "I")]),
            ("H (input 1)", h.shape, [("batch_size", "N"), ("hidden_size", hs)]),
            ("W (input 2)", w.shape, [("hidden_size", hs), ("input_size", "I")]),
            ("R (input 3)", r.shape, [("hidden_size", hs), ("hidden_size", hs)]),
            ("B (input 4)", None if b is None else b.shape, [("hidden_size", hs)]),
        ])
        return [TensorSpec(x.etype, (env.get("N", Dim()), Dim.of(hs)))]

    @staticmethod
    def run(attrs, x, h, w, r, b=None):
        acts = _check_attrs(attrs, 1)
        hs = attrs.hidden_size
        n, i = x.shape if x.ndim == 2 else (None, None)
        _check_run_shapes(["X", "H", "W", "R", "B"], [x, h, w, r, b],
                          [[("batch_size", "N"), ("input_size", "I")],
                           [("batch_size", "N"), ("hidden_size", hs)],
                           [("hidden_size", hs), ("input_size", "I")],
                           [("hidden_size", hs), ("hidden_size", hs)], [("hidden_size", hs)]],
                          None if n is None else [(n, i), (n, hs), (hs, i), (hs, hs), (hs,)])
        cd = _compute_dtype(x)
        x_proj = x.astype(cd, copy=False) @ w.astype(cd, copy=False).T + (
            0 if b is None else b.astype(cd, copy=False))
        return (_rnn_step(acts, _clipper(attrs.clip), x_proj, h.astype(cd, copy=False),
                          r.astype(cd, copy=False)).astype(x.dtype, copy=False),)


# ---------------------------------------------------------------- sequences


def _num_directions(attrs) -> int:
    return 2 if attrs.direction == "bidirectional" else 1


def _sequence_infer(attrs, x, states, lengths, w, r, b, gates, bias_size, state_names):
    """Shared shape rule of the three sequences; returns the output specs."""
    hs = attrs.hidden_size
    d = _num_directions(attrs)
    names = ["X"] + state_names + ["W", "R", "B"]
    _check_types([x] + states + [w, r, b], names)
    check_integer(lengths, "sequence_lengths")
    k = 1 + len(states)
    entries = [("X (input 0)", x.shape, [("batch_size", "N"), ("seq_length", "T"),
                                         ("input_size", "I")])]
    for i, (s, n) in enumerate(zip(states, state_names)):
        entries.append((f"{n} (input {i + 1})", s.shape,
                        [("batch_size", "N"), ("num_directions", d), ("hidden_size", hs)]))
    g = f"{gates} * hidden_size" if gates > 1 else "hidden_size"
    entries += [
        (f"sequence_lengths (input {k})", lengths.shape, [("batch_size", "N")]),
        (f"W (input {k + 1})", w.shape, [("num_directions", d), (g, gates * hs),
                                         ("input_size", "I")]),
        (f"R (input {k + 2})", r.shape, [("num_directions", d), (g, gates * hs),
                                         ("hidden_size", hs)]),
        (f"B (input {k + 3})", b.shape, [("num_directions", d), ("bias size", bias_size)]),
    ]
    env = _unify(entries)
    n, t = env.get("N", Dim()), env.get("T", Dim())
    if lengths.value is not None and lengths.rank == 1 and t.is_static and n.is_static:
        _check_lengths(lengths.value, n.lo, t.lo)     # constant lengths: the error at load
    y = TensorSpec(x.etype, (n, Dim.of(d), t, Dim.of(hs)))
    st = TensorSpec(x.etype, (n, Dim.of(d), Dim.of(hs)))
    return [y] + [st] * len(states)


# The compiled loop (ops/recurrent_loop.py) runs the recurrence when a step's products
# over the batch take at most this many multiply-adds (N * G * hidden_size); past it BLAS
# (one product for the whole batch) and NumPy's vectorised activations are faster, and
# NumPy's few calls a step cost little next to them. Measured per step and direction
# (LSTM, f32, one thread): hidden 64 at N 8 both take 50 us, at N 16 the compiled loop
# 200 us and NumPy 74 us; hidden 16 at N 32 both about 40 us; hidden 128 at N 1 21 us
# against 26 us, at N 8 340 us against 210 us.
COMPILED_MAX_MACS = 1 << 17


def _sequence_run(attrs, x, states, lengths, w, r, b, gates, bias_size, state_names, make_step,
                  compiled):
    """make_step(R, B) of one direction -> (step for the NumPy loop, bias added to X W^T);
    compiled(xp, rt, states, lengths, reverse, y, finals): the family's compiled loop."""
    hs = attrs.hidden_size
    d = _num_directions(attrs)
    g = f"{gates} * hidden_size" if gates > 1 else "hidden_size"
    n, t, i = x.shape if x.ndim == 3 else (None, None, None)
    _check_run_shapes(
        ["X"] + state_names + ["sequence_lengths", "W", "R", "B"],
        [x] + states + [lengths, w, r, b],
        [[("batch_size", "N"), ("seq_length", "T"), ("input_size", "I")]]
        + [[("batch_size", "N"), ("num_directions", d), ("hidden_size", hs)]] * len(states)
        + [[("batch_size", "N")], [("num_directions", d), (g, gates * hs), ("input_size", "I")],
           [("num_directions", d), (g, gates * hs), ("hidden_size", hs)],
           [("num_directions", d), ("bias size", bias_size)]],
        None if n is None else [(n, t, i)] + [(n, d, hs)] * len(states)
        + [(n,), (d, gates * hs, i), (d, gates * hs, hs), (d, bias_size)])
    lens = _check_lengths(lengths, n, t)
    cd = _compute_dtype(x)
    rs = r.astype(cd, copy=False)
    made = [make_step(rs[di], b[di].astype(cd, copy=False)) for di in range(d)]
    # The input projections of all steps and both directions: one product, [N, T, D * G].
    width = d * gates * hs
    xp = matmul(x.astype(cd, copy=False).reshape(n * t, i),
                w.astype(cd, copy=False).reshape(width, i).T)
    xp += np.concatenate([bias for _, bias in made])
    xp = xp.reshape(n, t, width)
    reverse = [attrs.direction == "reverse" or di == 1 for di in range(d)]
    if n * gates * hs * hs <= COMPILED_MAX_MACS:
        y = np.zeros((n, d, t, hs), cd)
        finals = [np.empty((n, d, hs), cd) for _ in states]
        compiled(xp, np.ascontiguousarray(rs.transpose(0, 2, 1)),
                 [np.ascontiguousarray(s, dtype=cd) for s in states], lens,
                 np.array(reverse, np.int64), y, finals)
        return (y.astype(x.dtype, copy=False),
                *(f.astype(x.dtype, copy=False) for f in finals))
    ys, ends = [], []
    for di, (step, _) in enumerate(made):
        part = xp[:, :, di * gates * hs:(di + 1) * gates * hs]
        yd, fin = _run_direction(step, part, [s[:, di].astype(cd) for s in states], lens,
                                 reverse[di])
        ys.append(yd)
        ends.append(fin)
    y = np.stack(ys, axis=1).astype(x.dtype)
    outs = [np.stack([f[k] for f in ends], axis=1).astype(x.dtype) for k in range(len(states))]
    return (y, *outs)


def _codes(acts_names):
    from .recurrent_loop import ACTIVATION_CODES
    return [ACTIVATION_CODES[a.strip().lower()] for a in acts_names]


@register("LSTMSequence", since=5, attrs=LSTMSequenceAttrs, category="sequence")
class LSTMSequence5:
    @staticmethod
    def infer(attrs, x, h, c, lengths, w, r, b):
        _check_attrs(attrs, 3)
        return _sequence_infer(attrs, x, [h, c], lengths, w, r, b, 4, 4 * attrs.hidden_size,
                               ["initial_hidden_state", "initial_cell_state"])

    @staticmethod
    def run(attrs, x, h, c, lengths, w, r, b):
        acts = _check_attrs(attrs, 3)
        clip = _clipper(attrs.clip)

        def make_step(rd, bd):
            return (lambda xp, hh, cc: _lstm_step(acts, clip, xp, hh, cc, rd, None, False)), bd

        def compiled(xp, rt, states, lens, reverse, y, finals):
            from .recurrent_loop import lstm_loop
            lstm_loop(xp, rt, *states, lens, reverse, float(attrs.clip),
                      *_codes(attrs.activations), y, *finals)
        return _sequence_run(attrs, x, [h, c], lengths, w, r, b, 4, 4 * attrs.hidden_size,
                             ["initial_hidden_state", "initial_cell_state"], make_step,
                             compiled)


@register("GRUSequence", since=5, attrs=GRUSequenceAttrs, category="sequence")
class GRUSequence5:
    @staticmethod
    def infer(attrs, x, h, lengths, w, r, b):
        _check_attrs(attrs, 2)
        nb = (4 if attrs.linear_before_reset else 3) * attrs.hidden_size
        return _sequence_infer(attrs, x, [h], lengths, w, r, b, 3, nb, ["initial_hidden_state"])

    @staticmethod
    def run(attrs, x, h, lengths, w, r, b):
        acts = _check_attrs(attrs, 2)
        clip = _clipper(attrs.clip)
        hs, lbr = attrs.hidden_size, attrs.linear_before_reset

        rbhs = []

        def make_step(rd, bd):
            xb, rbh = _gru_bias(bd, hs, lbr, bd.dtype)
            rbhs.append(rbh if lbr else np.zeros(hs, bd.dtype))
            return (lambda xp, hh: _gru_step(acts, clip, lbr, xp, hh, rd, rbh)), xb

        def compiled(xp, rt, states, lens, reverse, y, finals):
            from .recurrent_loop import gru_loop
            gru_loop(xp, rt, np.stack(rbhs), *states, lens, reverse, float(attrs.clip),
                     *_codes(attrs.activations), lbr, y, *finals)
        return _sequence_run(attrs, x, [h], lengths, w, r, b, 3, (4 if lbr else 3) * hs,
                             ["initial_hidden_state"], make_step, compiled)


@register("RNNSequence", since=5, attrs=RNNSequenceAttrs, category="sequence")
class RNNSequence5:
    @staticmethod
    def infer(attrs, x, h, lengths, w, r, b):
        _check_attrs(attrs, 1)
        return _sequence_infer(attrs, x, [h], lengths, w, r, b, 1, attrs.hidden_size, ["H"])

    @staticmethod
    def run(attrs, x, h, lengths, w, r, b):
        acts = _check_attrs(attrs, 1)
        clip = _clipper(attrs.clip)

        def make_step(rd, bd):
            return (lambda xp, hh: _rnn_step(acts, clip, xp, hh, rd)), bd

        def compiled(xp, rt, states, lens, reverse, y, finals):
            from .recurrent_loop import rnn_loop
            rnn_loop(xp, rt, *states, lens, reverse, float(attrs.clip),
                     *_codes(attrs.activations), y, *finals)
        return _sequence_run(attrs, x, [h], lengths, w, r, b, 1, attrs.hidden_size, ["H"],
                             make_step, compiled)
