"""Scaled dot-product attention.

Spec page: sequence/scaled-dot-product-attention (ScaledDotProductAttention-13).

softmax(Q K^T * scale + bias) V over the last two dims, for batch dims [N, ...] that
broadcast with numpy rules between query, key, value and the mask. OpenVINO's shape rule
only lets a batch dim broadcast from 1: multi-query attention (key/value with one head)
is accepted, grouped-query attention with 8 query heads over 2 key heads is refused, as
OpenVINO refuses it (converters repeat the key/value heads before the op).

Numerics, as OpenVINO's CPU plugin computes them:
- f16 and bf16 inputs compute in f32 (scores, softmax and the weighted sum), f32 in f32,
  f64 in f64; the result is rounded once to the input type.
- The scale multiplies the query before the product (so with E = 0 the scores are 0 and
  the result is the mean of the values, where the spec's pseudo-code would give NaN).
- causal=true masks key positions j > i (top-left aligned, numpy.triu(k=1) of [L, S]) and
  ignores the mask input; a boolean mask keeps the positions where it is true; a float mask
  is added to the scores. A row with every position masked gives NaN (the CPU plugin
  does too); S = 0 gives zeros.

Memory: the kernel never holds more than one [L, S] block of scores per head. Heads are
processed in groups whose scores fit in a fixed budget of elements, and a single head whose
[L, S] exceeds the budget is processed in blocks of query rows.
"""
from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np

from irrun.opkit import (
    TensorSpec,
    as_dtype,
    broadcast_shapes,
    check_alloc,
    fail,
    format_shape,
    register,
)

# Scores held at once, in elements (16 MiB of f32): a group of heads, or rows of one head.
SCORE_BUDGET = 1 << 22


@dataclass(frozen=True)
class SDPAAttrs:
    causal: bool


def _mask_is_absent(mask: TensorSpec | None, causal: bool) -> bool:
    return mask is None or causal


@register("ScaledDotProductAttention", since=13, attrs=SDPAAttrs, category="sequence")
class ScaledDotProductAttention13:
    @staticmethod
    def infer(attrs, query: TensorSpec, key: TensorSpec, value: TensorSpec,
              attention_mask: TensorSpec | None = None, scale: TensorSpec | None = None
              ) -> list[TensorSpec]:
        name = "ScaledDotProductAttention"
        if not query.etype.is_float:
            fail(f"{name} query (input 0) must be floating-point, got {query.etype.name}")
        for what, s in (("key (input 1)", key), ("value (input 2)", value)):
            if s.etype != query.etype:
                fail(f"{name} {what} must have the query's type {query.etype.name}, got {s.etype.name}")
        for what, s in (("query (input 0)", query), ("key (input 1)", key), ("value (input 2)", value)):
            if s.rank is not None and s.rank < 3:
                fail(f"{name} {what} must have rank 3 or more ([N, ..., seq, embedding]), "
                     f"got {format_shape(s.shape)}")
        mask = None if _mask_is_absent(attention_mask, attrs.causal) else attention_mask
        if attention_mask is not None and attention_mask.etype not in (query.etype,) \
                and attention_mask.etype.kind != "bool":
            fail(f"{name} attention_mask (input 3) must be boolean or of the query's type "
                 f"{query.etype.name}, got {attention_mask.etype.name}")
        if mask is not None and mask.rank == 1:
            fail(f"{name} attention_mask (input 3) must be a scalar or have rank 2 or more, "
                 f"got {format_shape(mask.shape)}")
        if scale is not None:
            if scale.etype != query.etype:
                fail(f"{name} scale (input 4) must have the query's type {query.etype.name}, "
                     f"got {scale.etype.name}")
            if scale.shape is not None and not (len(scale.shape) == 0 or
                                                (len(scale.shape) == 1 and scale.shape[0].contains(1))):
                fail(f"{name} scale (input 4) must be a scalar or hold one element, "
                     f"got {format_shape(scale.shape)}")
        if query.shape is None or key.shape is None or value.shape is None:
            return [TensorSpec(query.etype, None)]
        q, k, v = query.shape, key.shape, value.shape
        names = ["query", "key", "value"]
        batches = [q[:-2], k[:-2], v[:-2]]
        if mask is not None and mask.shape is not None and len(mask.shape) >= 3:
            batches.append(mask.shape[:-2])
            names.append("attention_mask")
        batch = _batch_shape(batches, names)
        if q[-1].merge(k[-1]) is None:
            fail(f"{name}: query {format_shape(q)} and key {format_shape(k)} differ in the "
                 f"embedding dim E ({q[-1]} vs {k[-1]})")
        if k[-2].merge(v[-2]) is None:
            fail(f"{name}: key {format_shape(k)} and value {format_shape(v)} differ in the "
                 f"source length S ({k[-2]} vs {v[-2]})")
        if mask is not None and mask.shape is not None and len(mask.shape) >= 2:
            for dim, want, what in ((mask.shape[-2], q[-2], "L"), (mask.shape[-1], k[-2], "S")):
                if not (dim.contains(1) or dim.merge(want) is not None):
                    fail(f"{name} attention_mask {format_shape(mask.shape)} does not broadcast "
                         f"to [..., L, S]: its {what} dim is {dim}, the inputs' is {want}")
        return [TensorSpec(query.etype, tuple(batch) + (q[-2], v[-1]))]

    @staticmethod
    def run(attrs, query: np.ndarray, key: np.ndarray, value: np.ndarray,
            attention_mask: np.ndarray | None = None, scale: np.ndarray | None = None
            ) -> tuple[np.ndarray]:
        return (attention(query, key, value, None if attrs.causal else attention_mask, scale,
                          attrs.causal),)

    @staticmethod
    def prepare(attrs, inputs, values):
        # attention()'s case of every head's scores at once (a decode step), with the scale
        # computed once when it is a Const or absent; other shapes go to attention().
        if attrs.causal or inputs[0].shape is None or len(inputs[0].shape) < 3 or \
                inputs[0].etype.dtype.char not in "fd":
            return None
        if len(inputs) == 5:
            scale = values[4]
            if scale is None or scale.size != 1:
                return None
        else:
            scale = None
        return _decode_attention(inputs[0].etype.dtype, scale,
                                 inputs[0].shape[-1].value), tuple(range(min(len(inputs), 4)))


def _batch_shape(batches, names):
    return broadcast_shapes(*batches, names=[f"{n} batch dims" for n in names])


def _batch_index(batch: tuple[int, ...], out_batch: tuple[int, ...]) -> np.ndarray:
    """For each flat output batch index, the flat index into an operand with batch dims
    `batch` (right-aligned, dims of 1 broadcast)."""
    full = (1,) * (len(out_batch) - len(batch)) + tuple(batch)
    # The usual operands, without np.indices (most of a small attention's time): the
    # output's own batch, or one that broadcasts whole.
    if full == tuple(out_batch):
        return np.arange(math.prod(out_batch), dtype=np.intp)
    if all(d == 1 for d in full):
        return np.zeros(math.prod(out_batch), np.intp)
    coords = np.indices(out_batch).reshape(len(out_batch), -1) if out_batch else np.zeros((0, 1), np.intp)
    idx = np.zeros(coords.shape[1], np.intp)
    for axis, d in enumerate(full):
        idx = idx * d + (coords[axis] if d != 1 else 0)
    return idx


def _static_batch(shapes, names) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        d = 1
        for s in shapes:
            n = s[axis - rank] if axis - rank >= -len(s) else 1
            if n != 1:
                if d not in (1, n):
                    listed = " and ".join(f"{nm} {list(s)}" for nm, s in zip(names, shapes))
                    fail(f"ScaledDotProductAttention: batch dims do not broadcast (numpy "
                         f"rules): {listed}")
                d = n
        out.append(d)
    return tuple(out)


def _apply_mask(s: np.ndarray, m: np.ndarray) -> None:
    """Scores s (in place) with a mask block: a boolean one keeps where true (-inf
    elsewhere), a float one is added."""
    if m.dtype == np.bool_:
        np.copyto(s, -np.inf, where=~m)
    else:
        s += m


def _take(xf: np.ndarray, idx: np.ndarray, h0: int, h1: int) -> np.ndarray:
    """Rows idx[h0:h1] of xf: a view when they are consecutive (no broadcasting)."""
    part = idx[h0:h1]
    first = int(part[0])
    if int(part[-1]) - first == h1 - h0 - 1 and (h1 - h0 <= 2 or (np.diff(part) == 1).all()):
        return xf[first:first + h1 - h0]
    return xf[part]


def _batch_fits(q, k, v, mask) -> bool:
    """Whether key, value and the mask's batch dims are the query's (or broadcast to them
    as 1s): then the output's batch is the query's, with no broadcasting to work out."""
    qb = q.shape[:-2]
    return qb == k.shape[:-2] == v.shape[:-2] and (
        mask is None or mask.ndim < 3 or (mask.ndim <= q.ndim and all(
            m == 1 or m == d for m, d in zip(mask.shape[-3::-1], qb[::-1]))))


def _all_heads(q, k, v, mask, sc, cdt):
    """Every head's scores at once in the compute type `cdt` (a decode step: [N, H, 1, S]),
    for batches that fit (_batch_fits) and scores within the budget: the same sums as the
    kernel's groups, without their per-group bookkeeping."""
    s = np.matmul(q.astype(cdt, copy=False) * sc,
                  np.swapaxes(k.astype(cdt, copy=False), -1, -2))
    if mask is not None:
        if mask.dtype == np.bool_:
            s = np.where(mask, s, cdt(-np.inf))
        else:
            s += mask
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    total = s.sum(axis=-1, keepdims=True)
    return as_dtype(np.matmul(s, v.astype(cdt, copy=False)) / total, q.dtype)


def _decode_attention(dtype, scale, e_static):
    """attention() for a query of `dtype`, a Const `scale` (or None) and an embedding dim
    that is `e_static` when static: its first case with the checks the shape rule, run
    again on the real shapes, made already, and the scale computed once."""
    cdt = np.float64 if dtype == np.float64 else np.float32
    if scale is not None:
        fixed = cdt(np.asarray(scale).reshape(-1)[0].astype(cdt))
    elif e_static is not None:
        with np.errstate(divide="ignore"):
            fixed = cdt(1) / np.sqrt(cdt(e_static))
    else:
        fixed = None

    def sdpa(q, k, v, mask=None):
        qb = q.shape[:-2]
        L, E = q.shape[-2:]
        S, Ev = v.shape[-2:]
        if not (0 < math.prod(qb) * L * S <= SCORE_BUDGET and Ev
                and _batch_fits(q, k, v, mask)):
            return attention(q, k, v, mask, scale, False)
        check_alloc(qb + (L, Ev), q.dtype, "ScaledDotProductAttention output")
        sc = fixed
        if sc is None:
            with np.errstate(divide="ignore"):
                sc = cdt(1) / np.sqrt(cdt(E))
        return _all_heads(q, k, v, mask, sc, cdt)
    return sdpa


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
              scale: np.ndarray | None, causal: bool, budget: int = SCORE_BUDGET) -> np.ndarray:
    """The kernel (mask None when causal or absent)."""
    name = "ScaledDotProductAttention"
    for what, x in (("query", q), ("key", k), ("value", v)):
        if x.ndim < 3:
            fail(f"{name} {what} must have rank 3 or more, got shape {list(x.shape)}")
    L, E = q.shape[-2:]
    S, Ev = v.shape[-2:]
    if k.shape[-1] != E or k.shape[-2] != S:
        fail(f"{name}: key {list(k.shape)} does not fit query {list(q.shape)} and value "
             f"{list(v.shape)} (needs [..., S, E])")
    if mask is not None and mask.ndim == 1:
        fail(f"{name} attention_mask must be a scalar or have rank 2 or more, got shape {list(mask.shape)}")
    if mask is not None and mask.ndim >= 2 and (mask.shape[-2] not in (1, L) or mask.shape[-1] not in (1, S)):
        fail(f"{name} attention_mask {list(mask.shape)} does not broadcast to [..., {L}, {S}]")
    shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
    names = ["query", "key", "value"]
    if mask is not None and mask.ndim >= 3:
        shapes.append(mask.shape[:-2])
        names.append("attention_mask")
    qb = q.shape[:-2]
    if _batch_fits(q, k, v, mask):
        batch = qb       # what _static_batch gives when the mask's batch dims fit the query's
    else:
        batch = _static_batch(shapes, names)
    check_alloc(batch + (L, Ev), q.dtype, f"{name} output")

    cdt = np.float64 if q.dtype == np.float64 else np.float32
    if scale is not None:
        if scale.size != 1:
            fail(f"{name} scale must hold one element, got shape {list(scale.shape)}")
        sc = cdt(np.asarray(scale).reshape(-1)[0].astype(cdt))
    else:
        # 1 / sqrt(E) in the compute type (E = 0 gives inf, multiplied into an empty query).
        with np.errstate(divide="ignore"):
            sc = cdt(1) / np.sqrt(cdt(E))

    nb = math.prod(batch)
    if (not causal and 0 < nb * L * S <= budget and Ev and qb == k.shape[:-2]
            == v.shape[:-2] == batch):
        # Every head's scores at once (a decode step: [N, H, 1, S]): the same sums as the
        # groups below, without their per-group bookkeeping, which was most of the time.
        return _all_heads(q, k, v, mask, sc, cdt)

    out = np.empty((nb, L, Ev), cdt)
    if nb == 0 or L == 0 or Ev == 0:
        # Nothing to compute (and the batch count, bounded by check_alloc only through a
        # non-empty output, could be huge).
        return as_dtype(out.reshape(batch + (L, Ev)), q.dtype)
    if S == 0:
        out[...] = 0
        return as_dtype(out.reshape(batch + (L, Ev)), q.dtype)

    def flat(x):
        return x.reshape((math.prod(x.shape[:-2]),) + x.shape[-2:])

    qf, kf, vf = flat(q), flat(k), flat(v)
    qi, ki, vi = (_batch_index(x.shape[:-2], batch) for x in (q, k, v))
    bias, bi = None, None
    if mask is not None:
        # The mask stays as given (boolean or float, any broadcastable shape): each block
        # applies its own slice, so a full [N, H, L, S] mask is never converted whole.
        m = mask.reshape((1,) * (2 - mask.ndim) + mask.shape) if mask.ndim < 2 else mask
        bi = _batch_index(m.shape[:-2], batch)
        bias = flat(m)

    # Groups run one after the other: NumPy's BLAS already spreads each product over the
    # cores, and running groups on the kit's worker threads as well measured no faster.
    heads = max(1, budget // max(1, L * S))        # heads per group
    rows = L if heads > 1 or L * S <= budget else max(1, budget // S)
    cols = np.arange(S)

    def group(h0: int, h1: int) -> None:
        kt = _take(kf, ki, h0, h1).astype(cdt, copy=False).transpose(0, 2, 1)
        vc = _take(vf, vi, h0, h1).astype(cdt, copy=False)
        qg = _take(qf, qi, h0, h1)
        for r0 in range(0, L, rows):
            r1 = min(L, r0 + rows)
            s = np.matmul(qg[:, r0:r1].astype(cdt) * sc, kt)       # [heads, rows, S]
            if causal:
                np.copyto(s, -np.inf, where=cols[None, :] > np.arange(r0, r1)[:, None])
            elif bias is not None:
                # Views of the mask, never a gathered copy of [heads, rows, S].
                rs = slice(r0, r1) if bias.shape[1] != 1 else slice(None)
                g = bi[h0:h1]
                if (g == g[0]).all():
                    _apply_mask(s, bias[g[0], rs])
                else:
                    for j, b in enumerate(g):
                        _apply_mask(s[j], bias[b, rs])
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            total = s.sum(axis=-1, keepdims=True)
            # Normalise after the product: [rows, Ev] divisions instead of [rows, S].
            # (matmul with out= skips the BLAS path: assign the product instead.)
            out[h0:h1, r0:r1] = np.matmul(s, vc) / total

    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for h0 in range(0, nb, heads):
            group(h0, min(nb, h0 + heads))
    return as_dtype(out.reshape(batch + (L, Ev)), q.dtype)

