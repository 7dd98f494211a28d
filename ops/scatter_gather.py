"""Index-driven gathers and scatters (spec pages: movement/GatherND_5, GatherND_8,
GatherElements_6, ReverseSequence_1, ScatterUpdate_3, ScatterNDUpdate_3 (registered as
ScatterNDUpdate-4, the opset that brought it), ScatterNDUpdate_15, ScatterElementsUpdate_3,
ScatterElementsUpdate_12; condition/NonZero_3; sequence/OneHot_1, OneHot_16;
activation/Identity_16).

Every index is checked before it is used: an index outside its dim is an error naming the
input, the position and the value, never a read or write out of bounds. Where OpenVINO
accepts negative indices (counting from the end) beyond what an older spec page says, irrun
follows OpenVINO's CPU plugin, version by version (see the per-op comments).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC,
    Dim,
    NoAttrs,
    TensorSpec,
    check_alloc,
    check_integer,
    check_rank,
    fail,
    format_shape,
    known_ints,
    length,
    normalize_axis,
    register,
    shape_dims,
)

# ---------------------------------------------------------------- shared helpers


def _pos(p) -> str:
    return ",".join(str(int(i)) for i in p)


def _check_indices(idx: np.ndarray, size, negative_ok: bool, what: str = "indices",
                   where=lambda pos: "") -> np.ndarray:
    """idx (any integer array) as int64 with negatives resolved; fails on the first index
    outside [-size, size - 1] (or [0, size - 1]). `size` broadcasts against idx (GatherND
    bounds each column by its own dim); `where(pos)` describes the dim for the message."""
    idx = np.asarray(idx)
    if idx.dtype.kind == "u":
        # u64 beyond int64 would wrap in astype; everything that large is out of range.
        big = idx > np.iinfo(np.int64).max
        idx = np.where(big, np.iinfo(np.int64).max, idx).astype(np.int64)
    else:
        idx = idx.astype(np.int64)
    if np.ndim(size) == 0 and idx.size:
        # One bound for all: the extremes say whether any index is out of range (the usual
        # case, checked in two passes; the full check below finds the first bad one).
        n, lo, hi = int(size), int(idx.min()), int(idx.max())
        if lo >= (-n if negative_ok else 0) and hi < n:
            return np.where(idx < 0, idx + n, idx) if lo < 0 else idx
    size = np.broadcast_to(np.asarray(size, np.int64), idx.shape)
    lo = -size if negative_ok else np.zeros_like(size)
    bad = (idx < lo) | (idx >= size)
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        n = int(size[pos])
        fail(f"{what}[{_pos(pos)}] = {int(idx[pos])} is out of range "
             f"[{-n if negative_ok else 0}, {n - 1}]{where(pos)}", code="value")
    return np.where(idx < 0, idx + size, idx) if negative_ok else idx


def _check_constant(indices: TensorSpec, dims, what: str, negative_ok: bool, where) -> None:
    """At load time: constant indices against static dims (the kernel's error, found early)."""
    if indices.value is None or dims is None or not all(d.is_static for d in dims):
        return
    size = np.array([d.lo for d in dims], np.int64)
    if size.size == 1:
        size = size[0]
    _check_indices(indices.value, size, negative_ok, what, where)


def _merge(a: Dim, b: Dim, message: str) -> Dim:
    m = a.merge(b)
    if m is None:
        fail(message)
    return m


def _scalar_int(x: np.ndarray, what: str) -> int:
    if x.size != 1 or x.ndim > 1:
        fail(f"{what} must be a scalar or a 1-element 1-D tensor, got shape {list(x.shape)}")
    return int(x.reshape(-1)[0])


def _axis_input(spec: TensorSpec, what: str) -> int | None:
    check_integer(spec, what)
    check_rank(spec, (0, 1), what)
    if spec.rank == 1 and length(spec) not in (None, 1):
        fail(f"{what} must have one element, got {format_shape(spec.shape)}")
    v = known_ints(spec)
    return None if v is None else v[0]


def _last_writes(flat: np.ndarray) -> np.ndarray:
    """Positions in `flat` of the last occurrence of each distinct value, ascending.

    A scatter without reduction writes its updates in order (OpenVINO's reference and CPU
    plugin: the last update of a repeated index wins); NumPy leaves the order of repeated
    advanced-index assignments unspecified, so irrun writes only the last one of each.
    Without repeats, slice(None): every position. `flat` holds indices (>= 0).
    """
    if flat.size == 0:
        return np.zeros(0, np.intp)
    top = int(flat.max())
    if top >= 4 * flat.size:
        # Few indices into a long axis: sort them rather than count over the axis.
        _, first_in_reversed = np.unique(flat[::-1], return_index=True)
        return np.sort(flat.size - 1 - first_in_reversed)
    marks = np.zeros(top + 1, np.uint8)
    marks[flat] = 1
    if np.count_nonzero(marks) == flat.size:        # as many targets as updates
        return slice(None)
    # The last write of each index is the largest position holding it (np.maximum.at is
    # unbuffered, and a maximum does not depend on the order it is taken in).
    last = np.full(top + 1, -1, np.intp)
    positions = np.arange(flat.size)
    np.maximum.at(last, flat, positions)
    return np.flatnonzero(last[flat] == positions)


# ---------------------------------------------------------------- GatherND


@dataclass(frozen=True)
class GatherNDAttrs:
    batch_dims: int = 0
    # GatherND-5 flattens the batch dims of the output into one; GatherND-8 keeps them.
    flatten_batch: ClassVar[bool] = True


@dataclass(frozen=True)
class GatherND8Attrs(GatherNDAttrs):
    flatten_batch: ClassVar[bool] = False


def _gather_nd_rank_checks(b: int, dr: int, ir: int, k: int | None):
    if dr < 1 or ir < 1:
        fail(f"data and indices must have rank >= 1, got ranks {dr} and {ir}")
    if not 0 <= b < min(dr, ir):
        fail(f"batch_dims {b} is out of range [0, {min(dr, ir) - 1}] for data rank {dr} "
             f"and indices rank {ir}")
    if k is not None and k + b > dr:
        fail(f"indices.shape[-1] = {k} plus batch_dims {b} exceeds the data rank {dr}")


@register("GatherND", since=(5, 8), attrs=(GatherNDAttrs, GatherND8Attrs), category="movement")
class GatherND:
    # Both versions accept negative indices (count from the end), as OpenVINO's CPU plugin
    # does for GatherND-5 too; batch dims must be equal (OpenVINO refuses broadcasting them
    # although the GatherND-8 page says broadcastable).
    @staticmethod
    def infer(attrs, data, indices):
        check_integer(indices, "indices (input 1)")
        b = attrs.batch_dims
        if data.shape is None or indices.shape is None:
            return [TensorSpec(data.etype, None)]
        dr, ir = len(data.shape), len(indices.shape)
        k = indices.shape[-1].value if ir else None
        _gather_nd_rank_checks(b, dr, ir, k)
        if k is None:
            return [TensorSpec(data.etype, None)]
        batch = tuple(_merge(data.shape[i], indices.shape[i],
                             f"batch dim {i}: data shape {format_shape(data.shape)} and indices "
                             f"shape {format_shape(indices.shape)} differ")
                      for i in range(b))
        if attrs.flatten_batch and b:
            prod = Dim.of(1)
            for d in batch:
                prod = prod * d
            batch = (prod,)
        shape = batch + indices.shape[b:-1] + data.shape[b + k:]
        dims = data.shape[b:b + k]
        _check_constant(indices, dims, "indices", True,
                        lambda p: f" for data dim {b + p[-1]} of size {dims[p[-1]]}")
        return [TensorSpec(data.etype, shape)]

    @staticmethod
    def run(attrs, data, indices):
        b = attrs.batch_dims
        _gather_nd_rank_checks(b, data.ndim, indices.ndim, indices.shape[-1] if indices.ndim else None)
        k = indices.shape[-1]
        if data.shape[:b] != indices.shape[:b]:
            fail(f"batch dims of data shape {list(data.shape)} and indices shape "
                 f"{list(indices.shape)} differ (batch_dims={b})")
        dims = data.shape[b:b + k]
        idx = _check_indices(indices, np.array(dims, np.int64), True, "indices",
                             lambda p: f" for data dim {b + p[-1]} of size {dims[p[-1]]}")
        nb = int(np.prod(data.shape[:b], dtype=np.int64))
        d2 = data.reshape((nb,) + data.shape[b:])
        i2 = idx.reshape((nb,) + indices.shape[b:])
        rows = np.arange(nb).reshape((nb,) + (1,) * (i2.ndim - 2))
        out = d2[(rows,) + tuple(i2[..., j] for j in range(k))]
        lead = ((nb,) if b else ()) if attrs.flatten_batch else data.shape[:b]
        return (np.asarray(out).reshape(lead + indices.shape[b:-1] + data.shape[b + k:]),)


# ---------------------------------------------------------------- GatherElements


@dataclass(frozen=True)
class GatherElementsAttrs:
    axis: int


@register("GatherElements", since=6, attrs=GatherElementsAttrs, category="movement")
class GatherElements6:
    # Negative indices count from the end (OpenVINO's CPU plugin), though the page says
    # [0, s - 1].
    @staticmethod
    def infer(attrs, data, indices):
        check_integer(indices, "indices (input 1)")
        if data.shape is None or indices.shape is None:
            rank = data.rank if data.rank is not None else indices.rank
            if rank is not None:
                normalize_axis(attrs.axis, rank)
            return [TensorSpec(data.etype, indices.shape)]
        dr, ir = len(data.shape), len(indices.shape)
        if dr != ir or dr < 1:
            fail(f"data and indices must have the same rank >= 1, got "
                 f"{format_shape(data.shape)} and {format_shape(indices.shape)}")
        ax = normalize_axis(attrs.axis, dr)
        shape = tuple(d if i == ax else _merge(
            d, e, f"dim {i}: indices shape {format_shape(indices.shape)} and data shape "
                  f"{format_shape(data.shape)} must agree except on axis {ax}")
            for i, (e, d) in enumerate(zip(data.shape, indices.shape)))
        n = data.shape[ax]
        _check_constant(indices, (n,), "indices", True,
                        lambda p: f" for data axis {ax} of size {n}")
        return [TensorSpec(data.etype, shape)]

    @staticmethod
    def run(attrs, data, indices):
        if data.ndim != indices.ndim or data.ndim < 1:
            fail(f"data and indices must have the same rank >= 1, got {list(data.shape)} "
                 f"and {list(indices.shape)}")
        ax = normalize_axis(attrs.axis, data.ndim)
        for i in range(data.ndim):
            if i != ax and data.shape[i] != indices.shape[i]:
                fail(f"dim {i}: indices shape {list(indices.shape)} and data shape "
                     f"{list(data.shape)} must agree except on axis {ax}")
        n = data.shape[ax]
        idx = _check_indices(indices, n, True, "indices",
                             lambda p: f" for data axis {ax} of size {n}")
        return (np.take_along_axis(data, idx, axis=ax),)


# ---------------------------------------------------------------- NonZero


@dataclass(frozen=True)
class NonZeroAttrs:
    output_type: Literal["i32", "i64"] = "i64"


@register("NonZero", since=3, attrs=NonZeroAttrs, category="condition")
class NonZero3:
    # A scalar is treated as a 1-element 1-D tensor: [1, 0 or 1] (OpenVINO does so).
    @staticmethod
    def infer(attrs, data):
        if data.shape is None:
            return [TensorSpec.make(attrs.output_type, [DYNAMIC, DYNAMIC])]
        count = Dim.of(1)
        for d in data.shape:
            count = count * d
        rows = max(len(data.shape), 1)
        return [TensorSpec.make(attrs.output_type, [rows, Dim(0, count.hi)])]

    @staticmethod
    def run(attrs, data):
        x = data.reshape(1) if data.ndim == 0 else data
        if x.dtype.kind == "V" or x.dtype.name == "bfloat16":
            x = x.astype(np.float32)
        # NaN is non-zero; -0.0 is zero (C++ `x != 0`).
        nz = np.nonzero(x != 0)
        dtype = np.int32 if attrs.output_type == "i32" else np.int64
        return (np.stack(nz).astype(dtype) if nz else np.zeros((x.ndim, 0), dtype),)


# ---------------------------------------------------------------- ReverseSequence


@dataclass(frozen=True)
class ReverseSequenceAttrs:
    batch_axis: int = 0
    seq_axis: int = 1


def _reverse_axes(attrs, rank: int):
    if rank < 2:
        fail(f"data must have rank >= 2, got rank {rank}")
    b = normalize_axis(attrs.batch_axis, rank, "batch_axis")
    s = normalize_axis(attrs.seq_axis, rank, "seq_axis")
    if b == s:
        fail(f"batch_axis ({attrs.batch_axis}) and seq_axis ({attrs.seq_axis}) name the same "
             f"dim {b}")
    return b, s


@register("ReverseSequence", since=1, attrs=ReverseSequenceAttrs, category="movement")
class ReverseSequence1:
    # Lengths lie in [1, T] by the spec; a 0 reverses nothing, like 1 (OpenVINO's CPU
    # plugin); a negative length or one above T is an error, as there.
    @staticmethod
    def infer(attrs, data, seq_lengths):
        if seq_lengths.etype.kind == "bool":
            fail("seq_lengths (input 1) must be of a numeric type, got boolean")
        check_rank(seq_lengths, (1,), "seq_lengths (input 1)")
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        b, _ = _reverse_axes(attrs, len(data.shape))
        shape = list(data.shape)
        if seq_lengths.shape is not None:
            shape[b] = _merge(data.shape[b], seq_lengths.shape[0],
                              f"seq_lengths has shape {format_shape(seq_lengths.shape)}, but "
                              f"data's batch dim {b} is {data.shape[b]}")
        s = _reverse_axes(attrs, len(data.shape))[1]
        t = data.shape[s]
        if seq_lengths.value is not None and t.is_static and seq_lengths.rank == 1:
            ReverseSequence1._check(seq_lengths.value, t.lo, s)
        return [TensorSpec(data.etype, tuple(shape))]

    @staticmethod
    def _check(seq_lengths: np.ndarray, t: int, s: int) -> np.ndarray:
        lengths = seq_lengths
        if lengths.dtype.kind == "f" or lengths.dtype.name == "bfloat16":
            # A float length is used as its integer part (C++ conversion toward zero).
            lengths = np.trunc(lengths.astype(np.float64))
        bad = np.flatnonzero((lengths < 0) | (lengths > t) | np.isnan(lengths.astype(np.float64)))
        if bad.size:
            i = int(bad[0])
            fail(f"seq_lengths[{i}] = {seq_lengths[i]} is out of range [0, {t}] (data's seq "
                 f"dim {s} has size {t})", code="value")
        return lengths.astype(np.int64)

    @staticmethod
    def run(attrs, data, seq_lengths):
        b, s = _reverse_axes(attrs, data.ndim)
        n, t = data.shape[b], data.shape[s]
        if seq_lengths.shape != (n,):
            fail(f"seq_lengths has shape {list(seq_lengths.shape)}, but data's batch dim {b} "
                 f"is {n}: expected [{n}]")
        lengths = ReverseSequence1._check(seq_lengths, t, s)
        steps = np.arange(t)
        src = np.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)  # [N, T]
        x = np.moveaxis(data, (b, s), (0, 1))
        idx = src.reshape(src.shape + (1,) * (x.ndim - 2))
        out = np.take_along_axis(x, idx, axis=1)
        return (np.moveaxis(out, (0, 1), (b, s)),)


# ---------------------------------------------------------------- ScatterUpdate


@register("ScatterUpdate", since=3, attrs=NoAttrs, category="movement")
class ScatterUpdate3:
    # Indices lie in [0, s - 1]: OpenVINO's CPU plugin refuses negative ones, as the page
    # says. A repeated index: the last update wins (the CPU plugin's order).
    @staticmethod
    def infer(attrs, data, indices, updates, axis):
        check_integer(indices, "indices (input 1)")
        ax = _axis_input(axis, "axis (input 3)")
        if updates.etype != data.etype:
            fail(f"updates (input 2) has element type {updates.etype.name}, data has "
                 f"{data.etype.name}")
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        r = len(data.shape)
        if ax is not None and r:
            ax = normalize_axis(ax, r)
            if indices.shape is not None and updates.shape is not None:
                want = data.shape[:ax] + indices.shape + data.shape[ax + 1:]
                if len(updates.shape) != len(want) or any(
                        u.merge(w) is None for u, w in zip(updates.shape, want)):
                    fail(f"updates has shape {format_shape(updates.shape)}, expected "
                         f"{format_shape(want)} (data[:axis] + indices shape + data[axis+1:])")
            n = data.shape[ax]
            _check_constant(indices, (n,), "indices", False,
                            lambda p: f" for data axis {ax} of size {n}")
        return [TensorSpec(data.etype, data.shape)]

    @staticmethod
    def run(attrs, data, indices, updates, axis):
        if data.ndim == 0:
            fail("data must have rank >= 1")
        ax = normalize_axis(_scalar_int(axis, "axis"), data.ndim)
        want = data.shape[:ax] + indices.shape + data.shape[ax + 1:]
        if updates.shape != want:
            fail(f"updates has shape {list(updates.shape)}, expected {list(want)} "
                 f"(data[:axis] + indices shape + data[axis+1:])")
        n = data.shape[ax]
        lead = (slice(None),) * ax
        if indices.size == 1 and indices.dtype.kind in "iu":
            # One index (a Loop body writing its step into a TensorList): a basic index.
            i = int(indices.reshape(-1)[0])
            if 0 <= i < n:
                out = data.copy()
                out[lead + (slice(i, i + 1),)] = updates.reshape(
                    data.shape[:ax] + (1,) + data.shape[ax + 1:])
                return (out,)
        idx = _check_indices(indices, n, False, "indices",
                             lambda p: f" for data axis {ax} of size {n}").reshape(-1)
        upd = updates.reshape(data.shape[:ax] + (idx.size,) + data.shape[ax + 1:])
        keep = _last_writes(idx)
        out = data.copy()
        out[lead + (idx[keep],)] = upd[lead + (keep,)]
        return (out,)


# ---------------------------------------------------------------- reductions of scatters


def _identity(dtype, reduction: str):
    """The value a reduction starts from when the data is not used (std::numeric_limits
    lowest/max for max/min, as OpenVINO's reference)."""
    if reduction in ("sum", "mean", "sub"):
        return 0
    if reduction == "prod":
        return 1
    if dtype.kind == "b":
        return reduction == "min"
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    return info.min if reduction == "max" else info.max


def _ufunc(dtype, reduction: str):
    if dtype.kind == "b":
        # Booleans: sum is OR, sub XOR, prod AND (ScatterNDUpdate-15 and
        # ScatterElementsUpdate-12 pages); min AND, max OR.
        return {"sum": np.logical_or, "sub": np.logical_xor, "prod": np.logical_and,
                "min": np.logical_and, "max": np.logical_or}[reduction]
    return {"sum": np.add, "mean": np.add, "sub": np.subtract, "prod": np.multiply,
            "min": np.minimum, "max": np.maximum}[reduction]


def _scatter_flat(out: np.ndarray, lin: np.ndarray, upd: np.ndarray, reduction: str,
                  use_init_val: bool = True) -> np.ndarray:
    """Scatter rows upd[i] into out[lin[i]] (out and upd flattened on their first axis).

    Reductions are applied in update order (ufunc.at is unbuffered and sequential), as
    OpenVINO's reference does: float sums may differ from the CPU plugin's order by
    rounding only. Works in f32 for bf16 (NumPy has no bf16 ufunc.at loops).
    """
    if reduction == "none":
        keep = _last_writes(lin)
        out[lin[keep]] = upd[keep]
        return out
    dtype = out.dtype
    wide = dtype.name == "bfloat16"
    work = out.astype(np.float32) if wide else out
    u = upd.astype(np.float32) if wide else upd
    if not use_init_val:
        work[lin] = _identity(work.dtype, reduction)
    _ufunc(work.dtype, reduction).at(work, lin, u)
    if reduction == "mean":
        counts = np.bincount(lin, minlength=work.shape[0]).astype(np.int64)
        touched = np.flatnonzero(counts)
        div = (counts[touched] + int(use_init_val)).reshape((-1,) + (1,) * (work.ndim - 1))
        if work.dtype.kind in "iu":
            # Integer means round down (toward negative infinity), as the page says.
            work[touched] = np.floor_divide(work[touched], div.astype(work.dtype))
        else:
            work[touched] = (work[touched] / div.astype(work.dtype)).astype(work.dtype)
    return work.astype(dtype) if wide else work


# ---------------------------------------------------------------- ScatterNDUpdate


@dataclass(frozen=True)
class ScatterNDUpdateAttrs:
    @property
    def mode(self) -> str:
        return "none"


@dataclass(frozen=True)
class ScatterNDUpdate15Attrs:
    reduction: Literal["none", "sum", "sub", "prod", "min", "max"] = "none"

    @property
    def mode(self) -> str:
        return self.reduction


def _scatter_nd_shapes(data_shape, indices_shape, updates_shape):
    """The updates shape ScatterNDUpdate expects, or a failure; works on Dims."""
    if len(data_shape) < 1 or len(indices_shape) < 1:
        fail(f"data and indices must have rank >= 1, got {format_shape(data_shape)} and "
             f"{format_shape(indices_shape)}")
    k = indices_shape[-1].value
    if k is None:
        return None
    if k > len(data_shape):
        fail(f"indices.shape[-1] = {k} exceeds the data rank {len(data_shape)}")
    return indices_shape[:-1] + data_shape[k:]


@register("ScatterNDUpdate", since=(4, 15), attrs=(ScatterNDUpdateAttrs, ScatterNDUpdate15Attrs),
          category="movement")
class ScatterNDUpdate:
    # Negative indices count from the end in both versions (OpenVINO's reference and CPU
    # plugin resolve them for ScatterNDUpdate-4 too). Repeated indices with reduction none:
    # the last update wins, as both OpenVINO implementations write in order.
    @staticmethod
    def infer(attrs, data, indices, updates):
        if indices.etype.name not in ("i32", "i64"):
            fail(f"indices (input 1) must be i32 or i64, got {indices.etype.name}")
        if updates.etype != data.etype:
            fail(f"updates (input 2) has element type {updates.etype.name}, data has "
                 f"{data.etype.name}")
        if data.shape is not None and indices.shape is not None:
            want = _scatter_nd_shapes(data.shape, indices.shape, updates.shape)
            single = want == () and updates.shape is not None and all(
                d.merge(Dim.of(1)) is not None for d in updates.shape)   # may stand for 0-D
            if want is not None and updates.shape is not None and not single and not (
                    len(updates.shape) == len(want) and all(
                        u.merge(w) is not None for u, w in zip(updates.shape, want))):
                fail(f"updates has shape {format_shape(updates.shape)}, expected "
                     f"{format_shape(want)} (indices.shape[:-1] + data.shape[indices.shape[-1]:])")
            k = indices.shape[-1].value
            if k is not None:
                dims = data.shape[:k]
                _check_constant(indices, dims, "indices", True,
                                lambda p: f" for data dim {p[-1]} of size {dims[p[-1]]}")
        return [TensorSpec(data.etype, data.shape)]

    @staticmethod
    def run(attrs, data, indices, updates):
        _scatter_nd_shapes(shape_dims(data.shape), shape_dims(indices.shape), None)
        k = indices.shape[-1]
        want = indices.shape[:-1] + data.shape[k:]
        # A 1-element updates may stand for a 0-D one (the page says so).
        if updates.shape != want and not (want == () and updates.size == 1):
            fail(f"updates has shape {list(updates.shape)}, expected {list(want)} "
                 f"(indices.shape[:-1] + data.shape[indices.shape[-1]:])")
        dims = data.shape[:k]
        idx = _check_indices(indices, np.array(dims, np.int64), True, "indices",
                             lambda p: f" for data dim {p[-1]} of size {dims[p[-1]]}")
        idx = idx.reshape(-1, k)
        lin = np.ravel_multi_index(tuple(idx.T), dims) if k else np.zeros(idx.shape[0], np.intp)
        rest = data.shape[k:]
        out = data.reshape((int(np.prod(dims, dtype=np.int64)),) + rest).copy()
        upd = updates.reshape((idx.shape[0],) + rest)
        return (_scatter_flat(out, lin, upd, attrs.mode).reshape(data.shape),)


# ---------------------------------------------------------------- ScatterElementsUpdate


@dataclass(frozen=True)
class ScatterElementsUpdateAttrs:
    @property
    def mode(self) -> str:
        return "none"

    use_init_val: ClassVar[bool] = True


@dataclass(frozen=True)
class ScatterElementsUpdate12Attrs:
    reduction: Literal["none", "sum", "prod", "min", "max", "mean"] = "none"
    use_init_val: bool = True

    @property
    def mode(self) -> str:
        return self.reduction


def _check_elements_shapes(attrs, data_shape, indices_shape, updates_shape, ax, fmt):
    if len(indices_shape) != len(data_shape):
        fail(f"indices must have the rank of data ({len(data_shape)}), got shape "
             f"{fmt(indices_shape)}")
    if len(updates_shape) != len(indices_shape) or any(
            Dim.of(u).merge(Dim.of(i)) is None for u, i in zip(updates_shape, indices_shape)):
        fail(f"updates has shape {fmt(updates_shape)}, indices has {fmt(indices_shape)}: "
             "they must be equal")
    if ax is None:
        return
    for j, (i, d) in enumerate(zip(indices_shape, data_shape)):
        i, d = Dim.of(i), Dim.of(d)
        if j != ax and d.hi is not None and i.lo > d.hi:
            fail(f"indices dim {j} is {i}, more than data's {d}: only the axis dim ({ax}) "
                 "of indices may exceed data's")


# Data types the compiled loop of ScatterElementsUpdate without reduction takes.
_LOOP_TYPES = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
               "uint32", "uint64", "bool"}


def _flat_bases(dims: tuple, strides: list) -> np.ndarray:
    """The flat offset in data of each position of `dims` (C order), given data's strides
    (in elements) for those dims."""
    bases = np.zeros(dims, np.int64)
    for k, grid in enumerate(np.indices(dims, sparse=True)):
        bases = bases + grid * strides[k]
    return bases.reshape(-1)


def _scatter_elements_none(data, indices, updates, ax: int) -> np.ndarray:
    """ScatterElementsUpdate without reduction through the compiled loop of
    ops/scatter_elements_loop.py: each index checked, placed and written in one pass, in
    row-major order (a repeated target keeps the last write)."""
    from .scatter_elements_loop import scatter_none

    n = data.shape[ax]
    strides = [math.prod(data.shape[k + 1:]) for k in range(data.ndim)]
    lead, tail = indices.shape[:ax], indices.shape[ax + 1:]
    shape3 = (math.prod(lead), indices.shape[ax], math.prod(tail))
    out = data.copy()
    bad = scatter_none(out.reshape(-1), np.ascontiguousarray(indices).reshape(shape3),
                       np.ascontiguousarray(updates).reshape(shape3),
                       _flat_bases(lead, strides[:ax]), _flat_bases(tail, strides[ax + 1:]),
                       strides[ax], n)
    if bad >= 0:        # the first index out of range: the checks' own message
        _check_indices(indices, n, True, "indices", lambda p: f" for data axis {ax} of size {n}")
        fail(f"indices[{bad}] (flat) = {int(indices.reshape(-1)[bad])} is out of range "
             f"[{-n}, {n - 1}] for data axis {ax} of size {n}", code="value")
    return out


@register("ScatterElementsUpdate", since=(3, 12),
          attrs=(ScatterElementsUpdateAttrs, ScatterElementsUpdate12Attrs), category="movement")
class ScatterElementsUpdate:
    # Negative indices count from the end in both versions (OpenVINO's CPU plugin resolves
    # them for ScatterElementsUpdate-3 too, though that page says they raise). Updates are
    # applied in row-major order of indices: with reduction none the last one wins.
    @staticmethod
    def infer(attrs, data, indices, updates, axis):
        check_integer(indices, "indices (input 1)")
        ax = _axis_input(axis, "axis (input 3)")
        if updates.etype != data.etype:
            fail(f"updates (input 2) has element type {updates.etype.name}, data has "
                 f"{data.etype.name}")
        if attrs.mode == "mean" and data.etype.kind == "bool":
            fail("reduction mean is not defined for boolean data")
        if data.shape is not None:
            if ax is not None:
                ax = normalize_axis(ax, len(data.shape))
            if indices.shape is not None and updates.shape is not None:
                _check_elements_shapes(attrs, data.shape, indices.shape, updates.shape, ax,
                                       format_shape)
            if ax is not None:
                n = data.shape[ax]
                _check_constant(indices, (n,), "indices", True,
                                lambda p: f" for data axis {ax} of size {n}")
        return [TensorSpec(data.etype, data.shape)]

    @staticmethod
    def run(attrs, data, indices, updates, axis):
        if attrs.mode == "mean" and data.dtype == np.bool_:
            fail("reduction mean is not defined for boolean data")
        if data.ndim == 0:
            fail("data must have rank >= 1")
        ax = normalize_axis(_scalar_int(axis, "axis"), data.ndim)
        _check_elements_shapes(attrs, data.shape, indices.shape, updates.shape, ax,
                               lambda s: str(list(s)))
        n = data.shape[ax]
        if (attrs.mode == "none" and indices.dtype in (np.int32, np.int64)
                and updates.dtype == data.dtype and data.dtype.name in _LOOP_TYPES):
            return (_scatter_elements_none(data, indices, updates, ax),)
        idx = _check_indices(indices, n, True, "indices",
                             lambda p: f" for data axis {ax} of size {n}")
        # Each update's flat position in data: the other axes' coordinates (a sum of small
        # grids, broadcast once) plus the index times the axis' stride.
        strides = [math.prod(data.shape[k + 1:]) for k in range(data.ndim)]
        others = sum((g * strides[k] for k, g in enumerate(np.indices(indices.shape, sparse=True))
                      if k != ax), np.zeros((1,) * indices.ndim, np.int64))
        lin = np.multiply(idx, strides[ax], out=idx if idx.base is None else None)
        lin += others                       # (in place: a large array's pages cost too)
        lin = lin.reshape(-1)
        out = data.reshape(-1).copy()
        return (_scatter_flat(out, lin, updates.reshape(-1), attrs.mode,
                              attrs.use_init_val).reshape(data.shape),)


# ---------------------------------------------------------------- OneHot


@dataclass(frozen=True)
class OneHotAttrs:
    axis: int
    # OneHot-1 fills off_value for negative indices (undefined by its page; OpenVINO's
    # behaviour, and OneHot-16's ignore-negative).
    @property
    def normalize(self) -> bool:
        return False


@dataclass(frozen=True)
class OneHot16Attrs:
    axis: int
    # The page spells it ignore-negative; OpenVINO writes and reads ignore_negative.
    negative_indices_mode: Literal["ignore_negative", "ignore-negative", "normalize"] = \
        "ignore_negative"

    @property
    def normalize(self) -> bool:
        return self.negative_indices_mode == "normalize"


@register("OneHot", since=(1, 16), attrs=(OneHotAttrs, OneHot16Attrs), category="sequence")
class OneHot:
    @staticmethod
    def infer(attrs, indices, depth, on_value, off_value):
        check_integer(indices, "indices (input 0)")
        check_integer(depth, "depth (input 1)")
        check_rank(depth, (0, 1), "depth (input 1)")
        for spec, what in ((on_value, "on_value (input 2)"), (off_value, "off_value (input 3)")):
            check_rank(spec, (0, 1), what)
            if spec.rank == 1 and length(spec) not in (None, 1):
                fail(f"{what} must be a scalar, got {format_shape(spec.shape)}")
        if on_value.etype != off_value.etype:
            fail(f"on_value is {on_value.etype.name} but off_value is {off_value.etype.name}: "
                 "they must have the same element type")
        d = known_ints(depth)
        if d is not None and d[0] < 0:
            fail(f"depth must be non-negative, got {d[0]}")
        if indices.shape is None:
            return [TensorSpec(on_value.etype, None)]
        rank = len(indices.shape) + 1
        ax = normalize_axis(attrs.axis, rank)
        size = Dim.of(d[0]) if d is not None else DYNAMIC
        return [TensorSpec(on_value.etype, indices.shape[:ax] + (size,) + indices.shape[ax:])]

    @staticmethod
    def run(attrs, indices, depth, on_value, off_value):
        n = _scalar_int(depth, "depth")
        if n < 0:
            fail(f"depth must be non-negative, got {n}", code="value")
        on = on_value.reshape(-1)
        off = off_value.reshape(-1)
        if on.size != 1 or off.size != 1:
            fail(f"on_value and off_value must be scalars, got shapes {list(on_value.shape)} "
                 f"and {list(off_value.shape)}")
        ax = normalize_axis(attrs.axis, indices.ndim + 1)
        shape = indices.shape[:ax] + (n,) + indices.shape[ax:]
        check_alloc(shape, on.dtype, "OneHot output")
        idx = indices.astype(np.int64)
        if attrs.normalize:
            idx = np.where((idx < 0) & (idx >= -n), idx + n, idx)
        classes = np.arange(n).reshape((n,) + (1,) * (indices.ndim - ax))
        hot = np.expand_dims(idx, ax) == classes
        return (np.where(hot, on[0], off[0]).astype(on.dtype),)


# ---------------------------------------------------------------- Identity


@register("Identity", since=16, attrs=NoAttrs, category="activation")
class Identity16:
    @staticmethod
    def infer(attrs, data):
        return [TensorSpec(data.etype, data.shape, data.value, data.dims)]

    @staticmethod
    def run(attrs, data):
        return (data,)
