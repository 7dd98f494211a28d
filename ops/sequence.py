"""CTCGreedyDecoder-1, CTCGreedyDecoderSeqLen-6 and CTCLoss-4 (spec pages:
sequence/CTCGreedyDecoder_1, CTCGreedyDecoderSeqLen_6, CTCLoss_4)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC,
    Dim,
    OpProblem,
    TensorSpec,
    balanced_ranges,
    fail,
    format_shape,
    parallel,
    register,
    warn,
    workers,
)

_INDEX_DTYPES = {"i32": np.int32, "i64": np.int64}


@dataclass(frozen=True)
class CTCGreedyDecoderSeqLenAttrs:
    merge_repeated: bool = True
    classes_index_type: Literal["i32", "i64"] = "i32"
    sequence_length_type: Literal["i32", "i64"] = "i32"


def best_path(data: np.ndarray) -> np.ndarray:
    """argmax over the last axis as std::max_element computes it, as [N, T] intp.

    The first maximum wins on ties. NaN: a NaN at class 0 makes the class 0 (nothing
    compares greater than it); a NaN elsewhere is never greater, so it is skipped.
    np.argmax instead returns the first NaN, so rows holding a NaN are redone.
    """
    if data.dtype.kind == "V" or data.dtype == np.float16:
        data = data.astype(np.float32)   # exact and order-preserving; f32 argmax is SIMD
    classes = data.argmax(axis=-1)
    top = np.take_along_axis(data, classes[..., None], axis=-1)[..., 0]
    nan_rows = np.isnan(top)           # argmax picked a NaN iff the row holds one
    if nan_rows.any():
        rows = data[nan_rows]
        fixed = np.where(np.isnan(rows), -np.inf, rows).argmax(axis=-1)
        fixed[np.isnan(rows[:, 0])] = 0
        classes[nan_rows] = fixed
    return classes


def greedy_decode(classes: np.ndarray, lengths: np.ndarray, blank: int, merge_repeated: bool,
                  classes_dtype, lengths_dtype) -> tuple[np.ndarray, np.ndarray]:
    """Drop blanks (and repeats), left-align what is kept, pad with -1; no loop over time."""
    n, t = classes.shape
    keep = np.arange(t) < lengths[:, None]
    keep &= classes != blank
    if merge_repeated and t > 1:
        # `previous` is the class of the step before, blank or not: A blank A gives A A.
        keep[:, 1:] &= classes[:, 1:] != classes[:, :-1]
    counts = keep.sum(axis=1)
    decoded = np.full((n, t), -1, classes_dtype)
    rows, steps = np.nonzero(keep)                   # row-major: time order within a row
    slots = np.cumsum(keep, axis=1)[rows, steps] - 1
    decoded[rows, slots] = classes[rows, steps]
    return decoded, counts.astype(lengths_dtype)


def _blank_value(blank_index: np.ndarray | None, classes: int) -> int:
    """The blank class; one outside [0, C) matches no class (no Python-style wrap of -1)."""
    if blank_index is None:
        return classes - 1
    b = np.asarray(blank_index)
    if b.ndim > 1 or b.size != 1:
        fail(f"blank_index must be a scalar or a 1-element 1-D tensor; got shape "
             f"{list(b.shape)}")
    blank = int(b.reshape(-1)[0])
    return blank if 0 <= blank < classes else -1


def _check_lengths(lengths: np.ndarray, t: int) -> None:
    bad = np.flatnonzero((lengths < 0) | (lengths > t))
    if bad.size:
        i = int(bad[0])
        fail(f"sequence_length[{i}] = {int(lengths[i])} is outside [0, {t}] "
             f"(T, the data's dim 1, is {t})")


@register("CTCGreedyDecoderSeqLen", since=6, attrs=CTCGreedyDecoderSeqLenAttrs, category="sequence")
class CTCGreedyDecoderSeqLen6:
    @staticmethod
    def infer(attrs, data: TensorSpec, sequence_length: TensorSpec, blank_index: TensorSpec = None):
        if data.etype.kind != "float":
            fail(f"data must be of a floating-point type (f16, bf16, f32 or f64); "
                 f"got {data.etype.name}")
        if sequence_length.etype.name not in ("i32", "i64"):
            fail(f"sequence_length must be i32 or i64; got {sequence_length.etype.name}")
        if blank_index is not None:
            if not blank_index.etype.is_integer:
                fail(f"blank_index must be of an integer type; got {blank_index.etype.name}")
            shape = blank_index.shape
            # OpenVINO checks a fully static blank shape only.
            if shape is not None and all(d.is_static for d in shape) and not (
                    len(shape) == 0 or (len(shape) == 1 and shape[0].value == 1)):
                fail(f"blank_index must be a scalar or a 1-element 1-D tensor; got shape "
                     f"{format_shape(shape)}")
        n, t = DYNAMIC, DYNAMIC
        if data.shape is not None:
            if len(data.shape) != 3:
                fail(f"data must be 3-D [N, T, C]; got shape {format_shape(data.shape)}")
            n, t = data.shape[0], data.shape[1]
        if sequence_length.shape is not None:
            if len(sequence_length.shape) != 1:
                fail(f"sequence_length must be 1-D [N]; got shape "
                     f"{format_shape(sequence_length.shape)}")
            merged = n.merge(sequence_length.shape[0])
            if merged is None:
                fail(f"data's dim 0 (N = {n}) and sequence_length's dim 0 "
                     f"({sequence_length.shape[0]}) must match")
            n = merged
        if sequence_length.value is not None and t.is_static:
            try:
                _check_lengths(sequence_length.value, t.value)
            except OpProblem as e:
                warn(f"constant {e.message}")
        return [TensorSpec.make(attrs.classes_index_type, [n, t]),
                TensorSpec.make(attrs.sequence_length_type, [n])]

    @staticmethod
    def run(attrs, data, sequence_length, blank_index=None):
        n, t, c = data.shape
        if sequence_length.shape != (n,):
            fail(f"sequence_length has shape {list(sequence_length.shape)} but data "
                 f"has N = {n}: expected [{n}]")
        _check_lengths(sequence_length, t)
        lengths = sequence_length.astype(np.int64)
        blank = _blank_value(blank_index, c)
        if c == 0:
            if lengths.any():
                i = int(np.flatnonzero(lengths)[0])
                fail(f"data has no classes (C = 0) but sequence_length[{i}] = "
                     f"{int(lengths[i])} asks for decoding")
            classes = np.zeros((n, t), np.intp)
        else:
            classes = best_path(data)
        return greedy_decode(classes, lengths, blank, attrs.merge_repeated,
                             _INDEX_DTYPES[attrs.classes_index_type],
                             _INDEX_DTYPES[attrs.sequence_length_type])


# ------------------------------------------------------------------ CTCGreedyDecoder-1

@dataclass(frozen=True)
class CTCGreedyDecoderAttrs:
    ctc_merge_repeated: bool = True


@register("CTCGreedyDecoder", since=1, attrs=CTCGreedyDecoderAttrs, category="sequence")
class CTCGreedyDecoder1:
    @staticmethod
    def infer(attrs, data: TensorSpec, sequence_mask: TensorSpec):
        for name, spec in (("data", data), ("sequence_mask", sequence_mask)):
            if spec.etype.kind != "float":
                fail(f"{name} must be of a floating-point type (f16, bf16, f32 or f64); "
                     f"got {spec.etype.name}")
        t, n = DYNAMIC, DYNAMIC
        if data.shape is not None:
            if len(data.shape) != 3:
                fail(f"data must be 3-D [T, N, C]; got shape {format_shape(data.shape)}")
            t, n = data.shape[0], data.shape[1]
        if sequence_mask.shape is not None:
            if len(sequence_mask.shape) != 2:
                fail(f"sequence_mask must be 2-D [T, N]; got shape "
                     f"{format_shape(sequence_mask.shape)}")
            mt, mn = t.merge(sequence_mask.shape[0]), n.merge(sequence_mask.shape[1])
            if mt is None or mn is None:
                fail(f"sequence_mask {format_shape(sequence_mask.shape)} must be [T, N] = "
                     f"[{t},{n}] (data's first two dims)")
            t, n = mt, mn
        return [TensorSpec(data.etype, (n, t, Dim.of(1), Dim.of(1)))]

    @staticmethod
    def run(attrs, data, sequence_mask):
        t, n, c = data.shape
        if sequence_mask.shape != (t, n):
            fail(f"sequence_mask has shape {list(sequence_mask.shape)}, expected [{t}, {n}] "
                 f"(data's T and N)")
        # A sequence runs up to its first 0 in the mask (as the CPU plugin reads it): ones
        # after a zero do not count.
        zero = sequence_mask.T == 0
        lengths = np.where(zero.any(axis=1), zero.argmax(axis=1), t)
        if c == 0:
            if lengths.any():
                fail("data has no classes (C = 0) but sequence_mask asks for decoding")
            classes = np.zeros((n, t), np.intp)
        else:
            classes = best_path(data.transpose(1, 0, 2))
        decoded, _ = greedy_decode(classes, lengths, c - 1, attrs.ctc_merge_repeated,
                                   data.dtype, np.int64)
        return (decoded.reshape(n, t, 1, 1),)


# ------------------------------------------------------------------ CTCLoss-4

@dataclass(frozen=True)
class CTCLossAttrs:
    preprocess_collapse_repeated: bool = False
    ctc_merge_repeated: bool = True
    unique: bool = False


def _merge_dim(n: Dim, spec: TensorSpec, axis: int, what: str) -> Dim:
    merged = n.merge(spec.shape[axis])
    if merged is None:
        fail(f"{what} has {spec.shape[axis]} where {n} is expected (shape "
             f"{format_shape(spec.shape)})")
    return merged


@register("CTCLoss", since=4, attrs=CTCLossAttrs, category="sequence")
class CTCLoss4:
    @staticmethod
    def infer(attrs, logits: TensorSpec, logit_length: TensorSpec, labels: TensorSpec,
              label_length: TensorSpec, blank_index: TensorSpec | None = None):
        if logits.etype.kind != "float":
            fail(f"logits must be of a floating-point type; got {logits.etype.name}")
        for name, spec in (("logit_length", logit_length), ("labels", labels),
                           ("label_length", label_length), ("blank_index", blank_index)):
            if spec is not None and spec.etype.name not in ("i32", "i64"):
                fail(f"{name} must be i32 or i64; got {spec.etype.name}")
        n, t = DYNAMIC, DYNAMIC
        if logits.shape is not None:
            if len(logits.shape) != 3:
                fail(f"logits must be 3-D [N, T, C]; got shape {format_shape(logits.shape)}")
            n, t = logits.shape[0], logits.shape[1]
        for name, spec, rank in (("logit_length", logit_length, 1), ("labels", labels, 2),
                                 ("label_length", label_length, 1)):
            if spec.shape is None:
                continue
            if len(spec.shape) != rank:
                fail(f"{name} must be {rank}-D; got shape {format_shape(spec.shape)}")
            n = _merge_dim(n, spec, 0, name)
            if rank == 2:
                t = _merge_dim(t, spec, 1, name)
        if blank_index is not None and blank_index.shape is not None and len(blank_index.shape):
            fail(f"blank_index must be a scalar; got shape {format_shape(blank_index.shape)}")
        return [TensorSpec(logits.etype, (n,))]

    @staticmethod
    def run(attrs, logits, logit_length, labels, label_length, blank_index=None):
        n, t, c = logits.shape
        for name, a, shape in (("logit_length", logit_length, (n,)), ("labels", labels, (n, t)),
                               ("label_length", label_length, (n,))):
            if a.shape != shape:
                fail(f"{name} has shape {list(a.shape)}, expected {list(shape)}")
        blank = c - 1 if blank_index is None else int(np.asarray(blank_index).reshape(()))
        if not 0 <= blank < c:
            fail(f"blank_index is {blank}, expected in [0, {c}) (C, the classes)")
        logit_len = logit_length.astype(np.int64)
        label_len = label_length.astype(np.int64)
        for b in np.flatnonzero((logit_len < 0) | (logit_len > t))[:1]:
            fail(f"logit_length[{b}] is {logit_len[b]}, expected in [0, {t}] (T)")
        for b in np.flatnonzero((label_len < 0) | (label_len > logit_len))[:1]:
            fail(f"label_length[{b}] is {label_len[b]}, expected in [0, {logit_len[b]}] "
                 f"(logit_length[{b}])")
        used = np.arange(t) < label_len[:, None]
        bad = np.argwhere(used & ((labels < 0) | (labels >= c) | (labels == blank)))
        if bad.size:
            b, i = map(int, bad[0])
            fail(f"labels[{b}, {i}] is {labels[b, i]}, expected in [0, {c}) and not the "
                 f"blank_index {blank}")
        compute = np.float64 if logits.dtype == np.float64 else np.float32
        loss = compiled_ctc_loss(logits.astype(compute, copy=False), logit_len,
                                 _decoded_targets(labels.astype(np.int64), used, attrs), blank,
                                 attrs.ctc_merge_repeated)
        return (loss.astype(logits.dtype),)


def _decoded_targets(labels: np.ndarray, used: np.ndarray, attrs) -> tuple[np.ndarray, np.ndarray]:
    """The targets after the spec's decoding, left-aligned: ([N, L] labels, [N] lengths).

    unique keeps the first occurrence of each label (and wins over
    preprocess_collapse_repeated, as in OpenVINO); preprocess_collapse_repeated merges runs.
    """
    n, t = labels.shape
    keep = used.copy()
    if attrs.unique and t:
        # A label is kept if no earlier used position of its row holds it.
        order = np.lexsort((np.arange(t)[None, :].repeat(n, 0).ravel(),
                            np.where(used, labels, -1).ravel(), np.repeat(np.arange(n), t)))
        rows, values = np.repeat(np.arange(n), t)[order], np.where(used, labels, -1).ravel()[order]
        first = np.ones(order.size, bool)
        first[1:] = (rows[1:] != rows[:-1]) | (values[1:] != values[:-1])
        flat_keep = np.zeros(order.size, bool)
        flat_keep[order] = first
        keep &= flat_keep.reshape(n, t)
    elif attrs.preprocess_collapse_repeated and t > 1:
        keep[:, 1:] &= labels[:, 1:] != labels[:, :-1]
    lengths = keep.sum(axis=1)
    width = int(lengths.max()) if n else 0
    targets = np.zeros((n, width), np.int64)
    rows, steps = np.nonzero(keep)
    slots = np.cumsum(keep, axis=1)[rows, steps] - 1
    targets[rows, slots] = labels[rows, steps]
    return targets, lengths


MIN_STATE_STEPS_PER_THREAD = 200_000   # state updates: about 1 ms of the compiled loop


def compiled_ctc_loss(logits: np.ndarray, logit_len: np.ndarray, targets: tuple, blank: int,
                      merge_repeated: bool) -> np.ndarray:
    """ctc_loss by the compiled recursion (ops/ctc_loss_loop.py), in float64 whatever the
    logits' type; spans of rows of about equal work run on the kit's threads. Rows the
    compiled loop cannot hold (log-probabilities below -2**30) are left to ctc_loss.
    """
    from .ctc_loss_loop import MAX_STEPS, forward

    labels, lengths = targets
    n, t, c = logits.shape
    if t > MAX_STEPS:
        return ctc_loss(logits, logit_len, targets, blank, merge_repeated)
    classes = np.empty((n, labels.shape[1] + 1), np.int64)
    classes[:, 0] = blank
    classes[:, 1:] = labels
    states = 2 * lengths + 1
    skip = np.zeros((n, 2 * labels.shape[1] + 1), bool)
    # Into label state s from s - 2: always without merge_repeated, else between labels
    # that differ (two equal labels need the blank between them).
    skip[:, 3::2] = labels[:, 1:] != labels[:, :-1] if merge_repeated else True
    out = np.empty(n, np.float64)
    fallback = np.zeros(n, bool)

    def rows(lo: int, hi: int) -> None:
        x = logits[lo:hi]
        top = x.max(axis=2, keepdims=True)
        ex = np.subtract(x, top)
        np.exp(ex, out=ex)
        forward(x, top[..., 0], ex, ex.sum(axis=2), classes[lo:hi], skip[lo:hi], states[lo:hi],
                logit_len[lo:hi], merge_repeated, out[lo:hi], fallback[lo:hi])

    work = np.concatenate([[0], np.cumsum(logit_len * states)])     # state updates
    parallel(rows, balanced_ranges(work, workers(int(work[-1]), MIN_STATE_STEPS_PER_THREAD)))
    if fallback.any():
        out[fallback] = ctc_loss(logits[fallback], logit_len[fallback],
                                 (labels[fallback], lengths[fallback]), blank, merge_repeated)
    return out


def ctc_loss(logits: np.ndarray, logit_len: np.ndarray, targets: tuple, blank: int,
             merge_repeated: bool) -> np.ndarray:
    """-ln of the summed probability of all alignments, by the forward recursion in log
    space (no underflow however long the sequence), vectorised over the batch and the
    extended-label states [N, 2L+1]; the loop runs over time steps only. The op runs
    compiled_ctc_loss; this one takes the rows that cannot be held there (and checks it).

    `logits` is [N, T, C] in the compute type (f32 or f64); targets = ([N, L], [N]).
    """
    labels, lengths = targets
    n, t, c = logits.shape
    states = 2 * labels.shape[1] + 1
    dtype = logits.dtype
    # The extended labels: blank, l1, blank, l2, ..., blank; states past a row's own
    # 2 L_b + 1 get a log-probability of -inf, so no path reaches or leaves them.
    ext = np.full((n, states), blank, np.int64)
    ext[:, 1::2] = labels
    valid = np.arange(states) < (2 * lengths + 1)[:, None]
    minus_inf = dtype.type(-np.inf)
    zero = dtype.type(0)
    # Log-softmax only where needed: lse[n, t], and at each step the logits of the
    # states' classes, gathered from the flat logits (no [N, T, states] array).
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        top = logits.max(axis=2, keepdims=True) if c else np.zeros((n, t, 1), dtype)
        lse = np.log(np.exp(logits - top).sum(axis=2)) + top[..., 0]
    flat = logits.reshape(-1)
    where = ext + (np.arange(n) * (t * c))[:, None]
    outside = np.where(valid, zero, minus_inf)

    def logp(step: int) -> np.ndarray:
        lp = flat.take(where + step * c) if c else np.full((n, states), minus_inf, dtype)
        lp -= lse[:, step, None]
        lp += outside
        return lp

    # Transitions into state s: from s (stay: always with merge_repeated, else blanks only),
    # s - 1, and s - 2 (a label state from the previous label when they differ, or always
    # without merge_repeated). As additive 0 / -inf masks.
    stay = np.zeros(states, dtype)
    if not merge_repeated:
        stay[1::2] = minus_inf
    skip = np.full((n, states), minus_inf, dtype)
    if states > 3:
        label_states = ext[:, 3::2]
        allowed = np.ones(label_states.shape, bool) if not merge_repeated else \
            label_states != ext[:, 1:-2:2]
        skip[:, 3::2] = np.where(allowed, zero, minus_inf)
    alpha = np.full((n, states), minus_inf, dtype)
    if t:
        alpha[:, :2] = logp(0)[:, :2]
    # Below any finite log-probability, so exp(x - floor) is 0 for x = -inf and a state
    # set with no path stays -inf (a large finite floor avoids -inf - -inf).
    floor = dtype.type(np.finfo(dtype).min / 4)
    # The three predecessors of every state side by side, so each step is a few ufunc
    # calls over [3, N, states]: stay, from s - 1, from s - 2.
    terms = np.full((3, n, states), minus_inf, dtype)
    m = np.empty((n, states), dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for step in range(1, t):
            np.add(alpha, stay, out=terms[0])
            terms[1, :, 1:] = alpha[:, :-1]
            np.add(alpha[:, :-2], skip[:, 2:], out=terms[2, :, 2:])
            np.max(terms, axis=0, out=m)
            np.maximum(m, floor, out=m)
            terms -= m
            np.exp(terms, out=terms)
            new = np.log(terms.sum(axis=0))
            new += m
            new += logp(step)
            active = step < logit_len
            if active.all():
                alpha = new
            else:
                alpha[active] = new[active]
            terms[1, :, 0] = minus_inf
            terms[2, :, :2] = minus_inf
        rows = np.arange(n)
        last = 2 * lengths
        end = alpha[rows, last]
        before = np.where(lengths > 0, alpha[rows, np.maximum(last - 1, 0)], minus_inf)
        total = np.logaddexp(end, before)
    # No time steps: the empty alignment, probability 1 (label_length is 0 then).
    return np.where(logit_len == 0, zero, -total)
