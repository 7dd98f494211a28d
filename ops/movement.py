"""Data movement ops (spec pages: movement/Transpose_1, Concat_1, Split_1, VariadicSplit_1,
Gather_1, Gather_7, Gather_8, Slice_8, StridedSlice_1).

Concat, Gather, Slice and StridedSlice also carry partial values (TensorSpec.dims) of small
integer tensors, so shape arithmetic built from ShapeOf stays known at load time.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from irrun.opkit import (
    DYNAMIC, Dim, Fixed, NoAttrs, ResourceError, TensorSpec, check_alloc, check_integer, check_rank,
    elements, fail, format_shape, int_spec, known_int_vector, known_ints, length, normalize_axis,
    is_static, register, shape_dims, slice_index, static_values,
)

# ---------------------------------------------------------------- Transpose


def _check_order(order, rank):
    if sorted(order) != list(range(rank)):
        fail(f"input_order {order} is not a permutation of [0, {rank - 1}] "
             f"(data rank {rank})")


@register("Transpose", since=1, attrs=NoAttrs, category="movement")
class Transpose1:
    # An empty input_order reverses the dims (the spec's default).
    @staticmethod
    def infer(attrs, data, input_order):
        check_integer(input_order, "input_order (input 1)")
        check_rank(input_order, (1,), "input_order (input 1)")
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        rank = len(data.shape)
        order = known_ints(input_order)
        if order is None:
            return [TensorSpec(data.etype, (DYNAMIC,) * rank)]
        if not order:
            order = list(range(rank))[::-1]
        _check_order(order, rank)
        return [TensorSpec(data.etype, tuple(data.shape[i] for i in order))]

    @staticmethod
    def run(attrs, data, input_order):
        return (np.transpose(data, _order(input_order, data.ndim)),)

    @staticmethod
    def prepare(attrs, inputs, values):
        if values[1] is None or inputs[0].shape is None:
            return None
        return np.ndarray.transpose, (0, Fixed(tuple(_order(values[1], len(inputs[0].shape)))))


def _order(input_order: np.ndarray, rank: int) -> list[int]:
    order = [int(v) for v in input_order.reshape(-1).tolist()]
    if not order:
        order = list(range(rank))[::-1]
    _check_order(order, rank)
    return order


# ---------------------------------------------------------------- Concat


@dataclass(frozen=True)
class ConcatAttrs:
    axis: int


@register("Concat", since=1, attrs=ConcatAttrs, category="movement")
class Concat1:
    @staticmethod
    def infer(attrs, *inputs):
        if not inputs:
            fail("Concat needs at least one input")
        etype = inputs[0].etype
        for i, s in enumerate(inputs):
            if s.etype != etype:
                fail(f"input {i} has element type {s.etype.name}, input 0 has {etype.name}")
        ranked = [s for s in inputs if s.shape is not None]
        if not ranked:
            return [TensorSpec(etype, None)]
        rank = len(ranked[0].shape)
        if rank == 0:
            fail("Concat inputs must not be scalars")
        for i, s in enumerate(inputs):
            if s.shape is not None and len(s.shape) != rank:
                fail(f"input {i} has shape {format_shape(s.shape)}, input 0 has rank {rank}: "
                     "all inputs must have the same rank")
        axis = normalize_axis(attrs.axis, rank)
        out = [DYNAMIC] * rank
        total = Dim.of(0)
        for i, s in enumerate(inputs):
            if s.shape is None:
                total = total + DYNAMIC
                continue
            for j, d in enumerate(s.shape):
                if j == axis:
                    total = total + d
                    continue
                merged = out[j].merge(d)
                if merged is None:
                    fail(f"input {i} has shape {format_shape(s.shape)}: dim {j} = {d} does not "
                         f"match {out[j]} of the other inputs")
                out[j] = merged
        out[axis] = total
        shape = tuple(out)
        if rank == 1 and etype.kind in ("int", "uint"):
            parts = [elements(s) for s in inputs]
            if all(p is not None for p in parts):
                return [int_spec(etype, shape, [d for p in parts for d in p])]
        return [TensorSpec(etype, shape)]

    @staticmethod
    def run(attrs, *inputs):
        axis = normalize_axis(attrs.axis, inputs[0].ndim, "axis")
        first = inputs[0].shape
        rest = first[:axis] + first[axis + 1:]
        for i, a in enumerate(inputs):
            if a.shape[:axis] + a.shape[axis + 1:] != rest or a.ndim != len(first):
                fail(f"input {i} has shape {list(a.shape)}, input 0 has "
                     f"{list(first)}: only dim {axis} may differ")
        return (np.concatenate(inputs, axis=axis),)

    @staticmethod
    def prepare(attrs, inputs, values):
        # The shapes, which inference checked (or the rule checks again on the real ones),
        # are the ones run sees: only the join.
        if inputs[0].shape is None:
            return None
        axis = normalize_axis(attrs.axis, len(inputs[0].shape), "axis")

        def concat(*arrays):
            return np.concatenate(arrays, axis=axis)
        return concat, tuple(range(len(inputs)))

    @staticmethod
    def rule_ignores_dims(attrs, inputs):
        # Every dim but the axis static: what the rule merges is known; the output holds
        # the inputs' bytes.
        axis = normalize_axis(attrs.axis, len(inputs[0].shape))
        return all(len(s.shape) == len(inputs[0].shape) and
                   all(d.is_static for j, d in enumerate(s.shape) if j != axis) for s in inputs)


# ---------------------------------------------------------------- Split / VariadicSplit


def _split_axis(axis_spec: TensorSpec, rank: int | None):
    check_integer(axis_spec, "axis (input 1)")
    check_rank(axis_spec, (0,), "axis (input 1)")
    value = known_ints(axis_spec)
    if value is None or rank is None:
        return None
    return normalize_axis(value[0], rank)


# The most outputs one Split or VariadicSplit makes. Each output is a tensor of its own with
# its own bookkeeping (~1 KiB in irrun), so num_splits=10000000 on an empty axis, valid for
# OpenVINO, would take minutes and gigabytes from a file of a few hundred bytes.
MAX_OUTPUTS = 1 << 16
OUTPUT_BYTES = 1024


def _check_output_count(n: int, what: str) -> None:
    if n > MAX_OUTPUTS:
        raise ResourceError(f"{what}={n} would make {n} outputs; irrun makes at most "
                            f"{MAX_OUTPUTS} for one layer")
    check_alloc([n, OUTPUT_BYTES], np.uint8, f"the bookkeeping of {what}={n} outputs")


def _split_outputs(data: TensorSpec, axis, sizes: list[Dim]) -> list[TensorSpec]:
    if data.shape is None:
        return [TensorSpec(data.etype, None) for _ in sizes]
    if axis is None:
        return [TensorSpec(data.etype, (DYNAMIC,) * len(data.shape)) for _ in sizes]
    outs = []
    el = elements(data) if len(data.shape) == 1 else None
    start = 0
    for size in sizes:
        shape = data.shape[:axis] + (size,) + data.shape[axis + 1:]
        if el is not None and size.is_static and start is not None:
            outs.append(int_spec(data.etype, shape, el[start:start + size.lo]))
            start += size.lo
        else:
            start = None
            outs.append(TensorSpec(data.etype, shape))
    return outs


@dataclass(frozen=True)
class SplitAttrs:
    num_splits: int


@register("Split", since=1, attrs=SplitAttrs, category="movement")
class Split1:
    @staticmethod
    def infer(attrs, data, axis):
        n = attrs.num_splits
        if n <= 0:
            fail(f"num_splits must be positive, got {n}")
        _check_output_count(n, "num_splits")
        ax = _split_axis(axis, data.rank)
        size = DYNAMIC
        if ax is not None:
            d = data.shape[ax]
            if d.is_static:
                if d.lo % n:
                    fail(f"dim {ax} of data shape {format_shape(data.shape)} is {d.lo}, "
                         f"which num_splits={n} does not divide")
                size = Dim.of(d.lo // n)
            else:
                size = Dim(-(-d.lo // n), None if d.hi is None else d.hi // n)
        return _split_outputs(data, ax, [size] * n)

    @staticmethod
    def run(attrs, data, axis):
        ax = normalize_axis(int(axis.reshape(-1)[0]), data.ndim, "axis")
        n = attrs.num_splits
        if data.shape[ax] % n:
            fail(f"dim {ax} of data shape {list(data.shape)} is {data.shape[ax]}, "
                 f"which num_splits={n} does not divide")
        size = data.shape[ax] // n
        lead = (slice(None),) * ax
        return tuple(data[lead + (slice(k * size, (k + 1) * size),)] for k in range(n))


def _variadic_sizes(dim, lengths: list[int]):
    """Split lengths with the -1 resolved (dim is an int or a Dim)."""
    minus = [i for i, v in enumerate(lengths) if v == -1]
    if len(minus) > 1:
        fail(f"split_lengths {lengths} has more than one -1")
    bad = [v for v in lengths if v < -1]
    if bad:
        fail(f"split_lengths {lengths} has {bad[0]}; lengths must be >= -1")
    known = sum(v for v in lengths if v != -1)
    sizes = [Dim.of(v) if v != -1 else None for v in lengths]
    d = Dim.of(dim)
    if minus:
        if d.is_static:
            if known > d.lo:
                fail(f"split_lengths {lengths} sum to {known}, more than the dim ({d.lo})")
            sizes[minus[0]] = Dim.of(d.lo - known)
        else:
            sizes[minus[0]] = Dim(max(d.lo - known, 0), None if d.hi is None else d.hi - known)
    elif d.is_static and known != d.lo:
        fail(f"split_lengths {lengths} sum to {known}, but the dim is {d.lo}")
    return sizes


@register("VariadicSplit", since=1, attrs=NoAttrs, category="movement")
class VariadicSplit1:
    @staticmethod
    def infer(attrs, data, axis, split_lengths):
        check_integer(split_lengths, "split_lengths (input 2)")
        check_rank(split_lengths, (1,), "split_lengths (input 2)")
        n = length(split_lengths)
        if n is None:
            fail("split_lengths (input 2) must have a static length: it sets the output count")
        _check_output_count(n, "the length of split_lengths")
        ax = _split_axis(axis, data.rank)
        lengths = known_ints(split_lengths)
        if lengths is None or ax is None:
            sizes = [DYNAMIC] * n
        else:
            sizes = _variadic_sizes(data.shape[ax], lengths)
        return _split_outputs(data, ax, sizes)

    @staticmethod
    def run(attrs, data, axis, split_lengths):
        ax = normalize_axis(int(axis.reshape(-1)[0]), data.ndim, "axis")
        lengths = [int(v) for v in split_lengths.reshape(-1).tolist()]
        sizes = [d.lo for d in _variadic_sizes(data.shape[ax], lengths)]
        return tuple(np.split(data, np.cumsum(sizes)[:-1], axis=ax))


# ---------------------------------------------------------------- Gather


def _gather_params(data_rank, indices_rank, axis, batch_dims):
    axis = normalize_axis(axis, data_rank, "axis")
    b = batch_dims + indices_rank if batch_dims < 0 else batch_dims
    if not 0 <= b <= min(data_rank, indices_rank):
        fail(f"batch_dims {batch_dims} is out of range [-{min(data_rank, indices_rank)}, "
             f"{min(data_rank, indices_rank)}] for data rank {data_rank} and indices "
             f"rank {indices_rank}")
    if b > axis:
        fail(f"batch_dims {batch_dims} must not be greater than axis {axis}")
    return axis, b


def _gather_infer(data, indices, axis_spec, batch_dims, negative_ok):
    check_integer(indices, "indices (input 1)")
    check_integer(axis_spec, "axis (input 2)")
    check_rank(axis_spec, (0, 1), "axis (input 2)")
    if axis_spec.rank == 1 and length(axis_spec) not in (None, 1):
        fail(f"axis (input 2) must have one element, got {format_shape(axis_spec.shape)}")
    axis = known_ints(axis_spec)
    if data.shape is None or indices.shape is None:
        return [TensorSpec(data.etype, None)]
    dr, ir = len(data.shape), len(indices.shape)
    if axis is None:
        b = batch_dims + ir if batch_dims < 0 else batch_dims
        return [TensorSpec(data.etype, (DYNAMIC,) * (dr + ir - 1 - b))]
    ax, b = _gather_params(dr, ir, axis[0], batch_dims)
    batch = []
    for i in range(b):
        m = data.shape[i].merge(indices.shape[i])
        if m is None:
            fail(f"batch dim {i}: data shape {format_shape(data.shape)} and indices shape "
                 f"{format_shape(indices.shape)} differ")
        batch.append(m)
    shape = tuple(batch) + data.shape[b:ax] + indices.shape[b:] + data.shape[ax + 1:]
    # Partial values: gathering from a 1-D integer tensor with known indices.
    el = elements(data) if dr == 1 else None
    idx = known_ints(indices) if indices.rank <= 1 else None
    if el is not None and idx is not None:
        n = len(el)
        # A value error even at load time: the same OpError the kernel raises.
        _check_indices(np.array(idx, dtype=np.int64), n, ax, negative_ok)
        return [int_spec(data.etype, shape, [el[i] for i in idx])]
    return [TensorSpec(data.etype, shape)]


def _check_indices(idx: np.ndarray, n: int, axis: int, negative_ok: bool):
    lo = -n if negative_ok else 0
    bad = (idx < lo) | (idx >= n)
    if bad.any():
        pos = tuple(int(p) for p in np.argwhere(bad)[0])
        where = f"indices[{','.join(map(str, pos))}]" if pos else "indices"
        fail(f"{where} = {int(idx[pos])} is out of range [{lo}, {n - 1}] for data "
             f"axis {axis} of size {n}")


def _gather_run(data, indices, axis, batch_dims, negative_ok):
    ax, b = _gather_params(data.ndim, indices.ndim, int(axis.reshape(-1)[0]), batch_dims)
    if indices.ndim == 0 and data.ndim > ax:
        # One index (a Loop body's step i of a sequence): a basic index, no index arrays.
        i, n = int(indices), data.shape[ax]
        if -n <= i < 0 and negative_ok:
            i += n
        if 0 <= i < n:
            return (np.array(data[(slice(None),) * ax + (i,)]),)
    if data.shape[:b] != indices.shape[:b]:
        fail(f"batch dims of data shape {list(data.shape)} and indices shape "
             f"{list(indices.shape)} differ (batch_dims={b})")
    n = data.shape[ax]
    if b == 0 and 0 < indices.size <= 8:
        # A few indices (a token's embedding row, a beam's cache): checked as Python ints;
        # in range and non-negative, taken as they are.
        values = indices.reshape(-1).tolist()
        if 0 <= min(values) and max(values) < n:
            return (np.asarray(np.take(data, indices, axis=ax)),)
    idx = indices.astype(np.int64)
    _check_indices(idx, n, ax, negative_ok)
    if negative_ok:
        idx = np.where(idx < 0, idx + n, idx)
    if b == 0:
        return (np.asarray(np.take(data, idx, axis=ax)),)
    # Batched: per batch item, take along axis; done with one advanced index.
    bshape = data.shape[:b]
    bp = int(np.prod(bshape, dtype=np.int64))
    mid = data.shape[b:ax]
    d2 = data.reshape((bp,) + data.shape[b:])
    d2 = np.moveaxis(d2, 1 + len(mid), 1)                  # [bp, n, mid..., rest...]
    i2 = idx.reshape((bp,) + indices.shape[b:])            # [bp, I...]
    rows = np.arange(bp).reshape((bp,) + (1,) * (i2.ndim - 1))
    g = d2[rows, i2]                                       # [bp, I..., mid..., rest...]
    ni = i2.ndim - 1
    order = [0] + list(range(1 + ni, 1 + ni + len(mid))) + list(range(1, 1 + ni)) + \
        list(range(1 + ni + len(mid), g.ndim))
    g = np.transpose(g, order)
    return (g.reshape(bshape + mid + indices.shape[b:] + data.shape[ax + 1:]),)


@dataclass(frozen=True)
class Gather1Attrs:
    """Gather-1 has no attributes: no batch dims, and indices lie in [0, dim - 1] by its spec."""

    batch_dims: ClassVar[int] = 0
    negative_indices: ClassVar[bool] = False


@dataclass(frozen=True)
class Gather7Attrs:
    batch_dims: int = 0
    negative_indices: ClassVar[bool] = False


@dataclass(frozen=True)
class GatherAttrs(Gather7Attrs):
    """Gather-8: negative indices count from the end."""

    negative_indices: ClassVar[bool] = True


@register("Gather", since=(1, 7, 8), attrs=(Gather1Attrs, Gather7Attrs, GatherAttrs),
          category="movement")
class Gather:
    # Gather-1/7 indices lie in [0, dim - 1] by the spec; OpenVINO's CPU plugin writes zeros
    # for anything else (negative indices included). Gather-8's spec fills zeros for indices
    # outside [-dim, dim - 1]. irrun reports them instead, naming the position and value.
    @staticmethod
    def infer(attrs, data, indices, axis):
        return _gather_infer(data, indices, axis, attrs.batch_dims, attrs.negative_indices)

    @staticmethod
    def run(attrs, data, indices, axis):
        return _gather_run(data, indices, axis, attrs.batch_dims, attrs.negative_indices)

    @staticmethod
    def prepare(attrs, inputs, values):
        data, indices, axis = inputs
        if (values[2] is None or not indices.shape or not is_static(indices.shape)
                or data.shape is None):
            return None
        ax, b = _gather_params(len(data.shape), len(indices.shape),
                               int(values[2].reshape(-1)[0]), attrs.batch_dims)
        n = data.shape[ax].value
        count = math.prod(static_values(indices.shape))
        if b != 0 or not 0 < count <= 8 or n is None:
            return None
        take, axis_array = np.ndarray.take, values[2]
        batch_dims, negative_ok = attrs.batch_dims, attrs.negative_indices

        def gather(data, indices):
            # _gather_run's case of a few indices, its axis and sizes known.
            found = indices.reshape(-1).tolist()
            if 0 <= min(found) and max(found) < n:
                return take(data, indices, ax)
            return _gather_run(data, indices, axis_array, batch_dims, negative_ok)[0]
        return gather, (0, 1)

    @staticmethod
    def rule_ignores_dims(attrs, inputs):
        # The rule merges the batch dims, reads the axis, and the indices' values only to
        # gather from a 1-D tensor's: with those dims, the axis' dim and the indices' shape
        # static and data of another rank, it reads no dynamic dim and no value; at most
        # as many indices as the axis has entries: the output is no larger.
        data, indices, axis = inputs
        if axis.value is None or not is_static(indices.shape) or len(data.shape) == 1:
            return False
        ax, b = _gather_params(len(data.shape), len(indices.shape),
                               int(np.asarray(axis.value).reshape(-1)[0]), attrs.batch_dims)
        return (all(d.is_static for d in data.shape[:b]) and data.shape[ax].is_static
                and math.prod(static_values(indices.shape[b:])) <= data.shape[ax].value)


# ---------------------------------------------------------------- slicing helpers


def spec_slice(s: slice, n: int) -> slice:
    """The slice the specs describe, for a dim of size n, as a NumPy slice.

    Forward steps clamp exactly like Python. In reverse, the specs (and OpenVINO) clamp a
    begin that is still negative after adding n to 0, where Python clamps it to -1 and
    selects nothing: x[-100:-100:-1] on [a] is [a] in OpenVINO, [] in Python.
    """
    start, stop, step = s.start, s.stop, 1 if s.step is None else s.step
    if step > 0 or n == 0:
        return s
    if start is not None:
        start = start + n if start < 0 else start
        start = min(max(start, 0), n - 1)
    if stop is not None:
        stop = stop + n if stop < 0 else stop
        if stop < 0:
            stop = None          # runs through element 0
    return slice(start, stop, step)


def _slice_dim(d: Dim, s: slice) -> Dim:
    """The length of d[s] for a possibly dynamic dim."""
    if d.is_static:
        return Dim.of(len(range(*spec_slice(s, d.lo).indices(d.lo))))
    start, stop, step = s.start, s.stop, 1 if s.step is None else s.step
    if start is None and stop is None and abs(step) == 1:
        return d
    if step > 0 and (start is None or start >= 0) and stop is not None and stop >= 0:
        # Monotone in the dim: evaluate at both ends of the interval.
        lo = len(range(*s.indices(d.lo)))
        hi = len(range(*s.indices(d.hi))) if d.hi is not None else \
            len(range(start or 0, stop, step))
        return Dim(lo, hi)
    bound = d.hi
    if step > 0 and start is not None and stop is not None and (start < 0) == (stop < 0):
        span = len(range(start, stop, step))
        bound = span if bound is None else min(bound, span)
    return Dim(0, bound)


def _clamped(index, shape) -> tuple:
    """The index with each slice clamped the spec's way for its dim of `shape`."""
    out, j = [], 0
    for x in index:
        if isinstance(x, slice):
            x = spec_slice(x, shape[j])
        out.append(x)
        if x is not None:
            j += 1
    return tuple(out)


def _take(data: np.ndarray, index) -> np.ndarray:
    """data[index] with each slice clamped the spec's way for its dim."""
    return np.asarray(data[_clamped(index, data.shape)])


def _slice_elements(data: TensorSpec, index):
    """Partial values of a 1-D integer tensor sliced with a 1-item index, else None."""
    el = elements(data) if data.rank == 1 else None
    if el is None:
        return None
    (item,) = index
    if isinstance(item, int):
        if not -len(el) <= item < len(el):
            return None
        return [el[item]]
    return list(el[spec_slice(item, len(el))])


# ---------------------------------------------------------------- Slice


@register("Slice", since=8, attrs=NoAttrs, category="movement")
class Slice8:
    # start/stop are clamped and negative values count from the end, exactly as Python slices.
    @staticmethod
    def infer(attrs, data, start, stop, step, axes=None):
        vals = [known_int_vector(s, n) for s, n in ((start, "start (input 1)"), (stop, "stop (input 2)"),
                                           (step, "step (input 3)"))]
        ax = None
        if axes is not None:
            ax = known_int_vector(axes, "axes (input 4)")
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        rank = len(data.shape)
        if any(v is None for v in vals) or (axes is not None and ax is None):
            # Which dims are sliced is unknown: each keeps only its upper bound.
            return [TensorSpec(data.etype, tuple(Dim(0, d.hi) for d in data.shape))]
        if ax is None:
            ax = list(range(len(vals[0])))
        index = slice_index(rank, *vals, ax)
        shape = tuple(_slice_dim(d, s) for d, s in zip(data.shape, index))
        el = _slice_elements(data, index)
        if el is not None and data.etype.kind in ("int", "uint"):
            return [int_spec(data.etype, shape, el)]
        return [TensorSpec(data.etype, shape)]

    @staticmethod
    def run(attrs, data, start, stop, step, axes=None):
        # The clamped index is a pure function of the shape and the four inputs' values: a
        # decoder slices the same shapes every step, so it is kept (a refused one raises).
        key = (data.shape, tuple(start.reshape(-1).tolist()), tuple(stop.reshape(-1).tolist()),
               tuple(step.reshape(-1).tolist()),
               None if axes is None else tuple(axes.reshape(-1).tolist()))
        index = _SLICES.get(key)
        if index is None:
            index = _slice8_index(key)
            if len(_SLICES) >= 4096:
                _SLICES.clear()
            _SLICES[key] = index
        return (np.asarray(data[index]),)

    @staticmethod
    def prepare(attrs, inputs, values):
        # Bounds the plan knows: the index made once; slices give a view (an ndarray).
        if any(v is None for v in values[1:]) or not is_static(inputs[0].shape):
            return None
        key = (static_values(inputs[0].shape),) + tuple(
            tuple(v.reshape(-1).tolist()) for v in values[1:4]) + (
            None if len(values) < 5 else tuple(values[4].reshape(-1).tolist()),)
        index = _slice8_index(key)
        if not all(type(i) is slice for i in index):
            return None
        return operator.getitem, (0, Fixed(index))


def _slice8_index(key: tuple) -> tuple:
    """Slice-8's clamped NumPy index for key = (data shape, start, stop, step, axes or None)."""
    shape = key[0]
    vals = [[int(v) for v in part] for part in key[1:4]]
    ax = list(range(len(vals[0]))) if key[4] is None else [int(v) for v in key[4]]
    return _clamped(slice_index(len(shape), *vals, ax), shape)


_SLICES: dict = {}     # (data shape, start, stop, step, axes) -> Slice's clamped index


# ---------------------------------------------------------------- StridedSlice


@dataclass(frozen=True)
class StridedSliceAttrs:
    begin_mask: tuple[int, ...]
    end_mask: tuple[int, ...]
    new_axis_mask: tuple[int, ...] = ()
    shrink_axis_mask: tuple[int, ...] = ()
    ellipsis_mask: tuple[int, ...] = ()


def _bit(mask, i) -> bool:
    # Masks shorter than begin are padded with zeros; longer ones are cut (spec).
    return i < len(mask) and mask[i] != 0


def _strided_index(attrs, shape, begin, end, stride):
    """The NumPy index (slices, None, ints, Ellipsis) the masks describe, checked against
    the data rank; shrunk positions are checked against their dims."""
    m = len(begin)
    if len(end) != m or len(stride) != m:
        fail(f"begin, end and stride must have the same length, got {len(begin)}, "
             f"{len(end)} and {len(stride)}")
    ellipses = [i for i in range(m) if _bit(attrs.ellipsis_mask, i)]
    if len(ellipses) > 1:
        fail(f"ellipsis_mask {list(attrs.ellipsis_mask)} has more than one bit set")
    index = []
    for i in range(m):
        if _bit(attrs.ellipsis_mask, i):
            index.append(Ellipsis)
        elif _bit(attrs.new_axis_mask, i):
            index.append(None)
        elif _bit(attrs.shrink_axis_mask, i):
            # A begin_mask bit still applies: the shrunk dim keeps element 0 (OpenVINO).
            index.append(0 if _bit(attrs.begin_mask, i) else int(begin[i]))
        else:
            if stride[i] == 0:
                fail(f"stride[{i}] is 0", code="value")
            index.append(slice(None if _bit(attrs.begin_mask, i) else int(begin[i]),
                               None if _bit(attrs.end_mask, i) else int(end[i]), int(stride[i])))
    rank = len(shape)
    used = sum(1 for x in index if x is not None and x is not Ellipsis)
    if used > rank:
        fail(f"begin has {used} slicing entries but the data has rank {rank}")
    # Expand the ellipsis (or the implicit one at the end) to whole-dim slices; remember
    # which begin entry each index item came from, for messages.
    fill = [slice(None)] * (rank - used)
    at = index.index(Ellipsis) if ellipses else len(index)
    entries = list(range(at)) + [None] * len(fill) + list(range(at + 1, len(index)))
    index = index[:at] + fill + index[at + 1:]
    j = 0
    for x, entry in zip(index, entries):
        if x is None:
            continue
        if isinstance(x, int):
            d = shape[j]
            if d.is_static and not -d.lo <= x < d.lo:
                fail(f"begin[{entry}] = {x} (shrink_axis_mask) is out of range "
                     f"[{-d.lo}, {d.lo - 1}] for dim {j} of size {d.lo}")
        j += 1
    return index


def _strided_shape(shape, index):
    out, j = [], 0
    for x in index:
        if x is None:
            out.append(Dim.of(1))
            continue
        if isinstance(x, slice):
            out.append(_slice_dim(shape[j], x))
        j += 1
    return tuple(out)


@register("StridedSlice", since=1, attrs=StridedSliceAttrs, category="movement")
class StridedSlice1:
    @staticmethod
    def infer(attrs, data, begin, end, stride=None):
        b = known_int_vector(begin, "begin (input 1)")
        e = known_int_vector(end, "end (input 2)")
        s = None if stride is None else known_int_vector(stride, "stride (input 3)")
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        n = length(begin)
        if b is None or e is None or (stride is not None and s is None):
            if n is None or any(_bit(attrs.ellipsis_mask, i) for i in range(n)):
                return [TensorSpec(data.etype, None)]
            # Dim count is known from the masks; the sizes are not.
            new = sum(_bit(attrs.new_axis_mask, i) for i in range(n))
            shrink = sum(_bit(attrs.shrink_axis_mask, i) and not _bit(attrs.new_axis_mask, i)
                         for i in range(n))
            return [TensorSpec(data.etype, (DYNAMIC,) * (len(data.shape) + new - shrink))]
        if s is None:
            s = [1] * len(b)
        index = _strided_index(attrs, data.shape, b, e, s)
        shape = _strided_shape(data.shape, index)
        if data.etype.kind in ("int", "uint") and len(index) == 1:
            el = _slice_elements(data, index)
            if el is not None:
                return [int_spec(data.etype, shape, el)]
        return [TensorSpec(data.etype, shape)]

    @staticmethod
    def run(attrs, data, begin, end, stride=None):
        b = tuple(int(v) for v in begin.reshape(-1).tolist())
        e = tuple(int(v) for v in end.reshape(-1).tolist())
        s = (1,) * len(b) if stride is None else \
            tuple(int(v) for v in stride.reshape(-1).tolist())
        # The same slice of the same shape comes back run after run (a Loop body's every
        # iteration): its checked, clamped NumPy index is kept.
        key = (attrs, data.shape, b, e, s)
        index = _STRIDED_INDEX.get(key)
        if index is None:
            index = _clamped(_strided_index(attrs, shape_dims(data.shape), b, e, s),
                             data.shape)
            if len(_STRIDED_INDEX) >= 1024:
                _STRIDED_INDEX.clear()
            _STRIDED_INDEX[key] = index
        return (np.asarray(data[index]),)


_STRIDED_INDEX: dict = {}
