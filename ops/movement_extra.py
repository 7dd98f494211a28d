"""More data movement ops: beam-search back-tracking, slice updates, unique elements and
reversal along axes.

Spec pages: movement/gather-tree-1, movement/slice-scatter-15, movement/unique-10,
movement/reverse-1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC,
    Dim,
    NoAttrs,
    TensorSpec,
    check_rank,
    etype_name,
    fail,
    first_position,
    format_shape,
    known_int_vector,
    known_ints,
    normalize_axis,
    register,
    same_etype,
    slice_index,
    widened,
)

# ---------------------------------------------------------------- GatherTree


@register("GatherTree", since=1, attrs=NoAttrs, category="movement")
class GatherTree1:
    @staticmethod
    def infer(attrs, step_ids: TensorSpec, parent_ids: TensorSpec, max_seq_len: TensorSpec,
              end_token: TensorSpec):
        names = ("step_ids (input 0)", "parent_ids (input 1)", "max_seq_len (input 2)",
                 "end_token (input 3)")
        et = same_etype(step_ids, parent_ids, max_seq_len, end_token, names=names)
        if et.kind == "bool":
            fail(f"GatherTree takes numeric inputs, got {et.name}")
        check_rank(step_ids, (3,), names[0])
        check_rank(parent_ids, (3,), names[1])
        check_rank(max_seq_len, (1,), names[2])
        check_rank(end_token, (0,), names[3])
        shape = step_ids.shape
        if shape is not None and parent_ids.shape is not None:
            merged = []
            for i, (a, b) in enumerate(zip(shape, parent_ids.shape)):
                m = a.merge(b)
                if m is None:
                    fail(f"step_ids {format_shape(shape)} and parent_ids "
                         f"{format_shape(parent_ids.shape)} differ in dim {i}")
                merged.append(m)
            shape = tuple(merged)
        elif shape is None:
            shape = parent_ids.shape
        if (shape is not None and max_seq_len.shape is not None
                and shape[1].merge(max_seq_len.shape[0]) is None):
            fail(f"max_seq_len {format_shape(max_seq_len.shape)} must have BATCH_SIZE "
                 f"({shape[1]}) elements")
        return [TensorSpec(et, shape)]

    @staticmethod
    def run(attrs, step_ids, parent_ids, max_seq_len, end_token):
        if step_ids.shape != parent_ids.shape:
            fail(f"step_ids {list(step_ids.shape)} and parent_ids {list(parent_ids.shape)} differ")
        time, batch, beam = step_ids.shape
        if max_seq_len.shape != (batch,):
            fail(f"max_seq_len must have shape [{batch}], got {list(max_seq_len.shape)}")
        lens = max_seq_len.astype(np.float64) if max_seq_len.dtype.kind == "f" else max_seq_len
        if not (lens >= 0).all():       # (NaN is refused too)
            pos = first_position(~(lens >= 0))
            fail(f"max_seq_len (input 2) is {max_seq_len[tuple(pos)]} at position {pos}, "
                 f"expected a non-negative length", code="value")
        # Lengths and parents are indices: float inputs are cast toward zero, as in C++.
        lens = np.minimum(lens.astype(np.int64), time)
        parents = parent_ids.astype(np.int64) if parent_ids.dtype.kind in "iu" else \
            np.trunc(parent_ids.astype(np.float64))
        out = np.full(step_ids.shape, end_token, dtype=step_ids.dtype)
        b_idx = np.arange(batch)[:, None]
        k_idx = np.arange(beam)[None, :]
        alive = np.broadcast_to((lens > 0)[:, None], (batch, beam))
        last = np.maximum(lens - 1, 0)[:, None]
        out[last, b_idx, k_idx] = np.where(alive, step_ids[last, b_idx, k_idx], out[last, b_idx, k_idx])
        parent = parents[last, b_idx, k_idx]
        # Back-track the beams one time step at a time (a loop over time, vectorised over
        # batch and beam); steps at or beyond a batch's length stay end_token.
        for level in range(time - 2, -1, -1):
            active = np.broadcast_to((level < lens - 1)[:, None], (batch, beam))
            bad = active & ~((parent >= 0) & (parent < beam))     # (NaN is bad too)
            if bad.any():
                b, k = first_position(bad)
                v = parent[b, k]
                fail(f"parent_ids (input 1) points to beam {int(v) if np.isfinite(v) else v} at "
                     f"position {[level + 1, b, k]} (of the back-tracked path), expected "
                     f"0..{beam - 1}", code="value")
            p = np.where(active, parent, 0).astype(np.int64)
            out[level] = np.where(active, step_ids[level, b_idx, p], out[level])
            parent = np.where(active, parents[level, b_idx, p], parent)
        # Past the first end_token of a beam, everything is end_token.
        is_end = out == end_token
        seen = np.logical_or.accumulate(is_end, axis=0)
        after = np.zeros_like(seen)
        after[1:] = seen[:-1]
        out[after] = end_token
        return (out,)


# ---------------------------------------------------------------- SliceScatter


@register("SliceScatter", since=15, attrs=NoAttrs, category="movement")
class SliceScatter15:
    @staticmethod
    def infer(attrs, data: TensorSpec, updates: TensorSpec, start: TensorSpec, stop: TensorSpec,
              step: TensorSpec, axes: TensorSpec | None = None):
        et = same_etype(data, updates, names=("data (input 0)", "updates (input 1)"))
        if data.rank == 0:
            fail("data (input 0) must have rank >= 1, got a scalar")
        vals = [known_int_vector(s, n) for s, n in ((start, "start (input 2)"), (stop, "stop (input 3)"),
                                               (step, "step (input 4)"))]
        ax = known_int_vector(axes, "axes (input 5)") if axes is not None else None
        if data.rank is not None and updates.rank is not None and data.rank != updates.rank:
            fail(f"updates (input 1) must have the rank of data, got {format_shape(updates.shape)} "
                 f"for data {format_shape(data.shape)}")
        if (data.shape is not None and updates.shape is not None and all(v is not None for v in vals)
                and (axes is None or ax is not None) and all(d.is_static for d in data.shape)):
            if ax is None:
                ax = list(range(len(vals[0])))
            index = slice_index(len(data.shape), *vals, ax)
            want = np.empty([d.value for d in data.shape], dtype=np.bool_)[tuple(index)].shape
            for i, (u, w) in enumerate(zip(updates.shape, want)):
                if not u.contains(w):
                    fail(f"updates (input 1) {format_shape(updates.shape)} must have the slice's "
                         f"shape {list(want)} (dim {i})")
        return [TensorSpec(et, data.shape)]

    @staticmethod
    def run(attrs, data, updates, start, stop, step, axes=None):
        if data.ndim == 0:
            fail("data (input 0) must have rank >= 1, got a scalar")
        vals = [[int(v) for v in a.reshape(-1).tolist()] for a in (start, stop, step)]
        ax = list(range(len(vals[0]))) if axes is None else [int(v) for v in axes.reshape(-1).tolist()]
        index = tuple(slice_index(data.ndim, *vals, ax))
        out = data.copy()
        target = out[index]
        if target.shape != updates.shape:
            fail(f"updates (input 1) {list(updates.shape)} must have the slice's shape "
                 f"{list(target.shape)}")
        out[index] = updates
        return (out,)


# ---------------------------------------------------------------- Unique


@dataclass(frozen=True)
class UniqueAttrs:
    sorted: bool = True
    index_element_type: Literal["i64", "i32"] = "i64"
    count_element_type: Literal["i64", "i32"] = "i64"


def _unique_axis(axis: TensorSpec | None, rank: int | None) -> int | None:
    if axis is None:
        return None
    if axis.etype.name not in ("i32", "i64"):
        fail(f"axis (input 1) must be i32 or i64, got {axis.etype.name}")
    if axis.shape is not None and not (len(axis.shape) == 0 or (
            len(axis.shape) == 1 and axis.shape[0].compatible(Dim.of(1)))):
        fail(f"axis (input 1) must be a scalar or a 1-element 1-D tensor, got {format_shape(axis.shape)}")
    values = known_ints(axis)
    if values is None:
        fail("axis (input 1) must be a constant")
    if rank is None:
        return values[0]
    return normalize_axis(values[0], rank, "axis (input 1)")


def _unique_with_nans(keys: np.ndarray, nan: np.ndarray):
    """(first, inverse, counts) of a flat array holding NaNs, as OpenVINO compares values
    (==): each NaN is a value of its own, after every number in the sorted order, in the
    order they occur. np.unique would make the NaNs one value."""
    good, bad = np.flatnonzero(~nan), np.flatnonzero(nan)
    _, first, inverse, counts = np.unique(keys[good], return_index=True, return_inverse=True,
                                          return_counts=True)
    all_inverse = np.empty(keys.size, np.int64)
    all_inverse[good] = inverse.reshape(-1)
    all_inverse[bad] = first.size + np.arange(bad.size)
    return (np.concatenate([good[first], bad]), all_inverse,
            np.concatenate([counts, np.ones(bad.size, counts.dtype)]))


@register("Unique", since=10, attrs=UniqueAttrs, category="movement")
class Unique10:
    @staticmethod
    def infer(attrs, data: TensorSpec, axis: TensorSpec | None = None):
        ax = _unique_axis(axis, data.rank)
        idx_t, cnt_t = attrs.index_element_type, attrs.count_element_type
        if axis is None:
            total = None
            if data.shape is not None and all(d.is_static for d in data.shape):
                total = int(np.prod([d.value for d in data.shape], dtype=np.int64))
            n = Dim(min(total, 1), total) if total is not None else DYNAMIC
            return [TensorSpec.make(data.etype, (n,)), TensorSpec.make(idx_t, (n,)),
                    TensorSpec.make(idx_t, (Dim.of(total) if total is not None else DYNAMIC,)),
                    TensorSpec.make(cnt_t, (n,))]
        if data.rank == 0:
            fail("axis (input 1) needs data of rank >= 1, got a scalar")
        if data.shape is None:
            return [TensorSpec.make(data.etype, None), TensorSpec.make(idx_t, (DYNAMIC,)),
                    TensorSpec.make(idx_t, (DYNAMIC,)), TensorSpec.make(cnt_t, (DYNAMIC,))]
        d = data.shape[ax]
        n = Dim(min(d.lo, 1), d.hi)
        shape = data.shape[:ax] + (n,) + data.shape[ax + 1:]
        return [TensorSpec.make(data.etype, shape), TensorSpec.make(idx_t, (n,)),
                TensorSpec.make(idx_t, (d,)), TensorSpec.make(cnt_t, (n,))]

    @staticmethod
    def run(attrs, data, axis=None):
        idx_t = np.int64 if attrs.index_element_type == "i64" else np.int32
        cnt_t = np.int64 if attrs.count_element_type == "i64" else np.int32
        if axis is None:
            flat = data.reshape(-1)
            keys = widened(flat, etype_name(flat))       # f16/bf16 compare exactly in f32
            nan = np.isnan(keys) if keys.dtype.kind == "f" else np.zeros(0, bool)
            if nan.any():
                first, inverse, counts = _unique_with_nans(keys, nan)
            else:
                _, first, inverse, counts = np.unique(keys, return_index=True,
                                                      return_inverse=True, return_counts=True)
            ax = 0
            source = flat
        else:
            if data.ndim == 0:
                fail("axis (input 1) needs data of rank >= 1, got a scalar")
            ax = normalize_axis(int(np.asarray(axis).reshape(-1)[0]), data.ndim, "axis (input 1)")
            moved = np.moveaxis(data, ax, 0)
            width = int(np.prod(moved.shape[1:], dtype=np.int64))
            rows = widened(moved, etype_name(moved)).reshape(moved.shape[0], width)
            if rows.shape[0] == 0:
                first = inverse = counts = np.zeros(0, np.int64)
            else:
                # Slices compare lexicographically, element by element in C order, a NaN
                # after every number; a slice holding a NaN equals no other (NaN != NaN).
                _, first, inverse, counts = np.unique(rows, axis=0, return_index=True,
                                                      return_inverse=True, return_counts=True)
            source = data
        inverse = inverse.reshape(-1)
        if not attrs.sorted:
            # The order of first occurrence.
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            first, counts, inverse = first[order], counts[order], rank[inverse]
        values = np.take(source, first, axis=ax)     # the input's own values and dtype
        return (values, first.astype(idx_t), inverse.astype(idx_t), counts.astype(cnt_t))


# ---------------------------------------------------------------- Reverse


@dataclass(frozen=True)
class ReverseAttrs:
    mode: Literal["index", "mask"]


def _reverse_axes(attrs, axes: list, rank: int) -> list[int]:
    """The axes to flip. Index mode: each in [-rank, rank), a repeated axis flips once (as
    OpenVINO does: the axes form a set). Mask mode: one boolean per axis."""
    if attrs.mode == "mask":
        if len(axes) != rank:
            fail(f"mode='mask' needs one boolean per data axis ({rank}), got {len(axes)}")
        return [i for i, m in enumerate(axes) if m]
    return sorted({normalize_axis(int(a), rank, "axis (input 1)") for a in axes})


@register("Reverse", since=1, attrs=ReverseAttrs, category="movement")
class Reverse1:
    # Left in opset1 only (OpenVINO's ONNX frontend writes it for ArgMax/ArgMin with
    # select_last_index).
    @staticmethod
    def infer(attrs, data: TensorSpec, axis: TensorSpec):
        check_rank(axis, (1,), "axis (input 1)")
        if attrs.mode == "mask":
            if axis.etype.kind != "bool":
                fail(f"axis (input 1) must be boolean in mode='mask', got {axis.etype.name}")
        elif axis.etype.kind not in ("int", "uint"):
            fail(f"axis (input 1) must have an integer element type in mode='index', "
                 f"got {axis.etype.name}")
        if data.rank is not None and axis.shape is not None and axis.shape[0].is_static:
            n = axis.shape[0].value
            if attrs.mode == "mask" and n != data.rank:
                fail(f"mode='mask' needs one boolean per data axis ({data.rank}), got "
                     f"{format_shape(axis.shape)}")
        if data.rank is not None and attrs.mode == "index":
            values = known_ints(axis)
            if values is not None:
                _reverse_axes(attrs, values, data.rank)
        return [TensorSpec(data.etype, data.shape)]

    @staticmethod
    def run(attrs, data, axis):
        flip = _reverse_axes(attrs, axis.reshape(-1).tolist(), data.ndim)
        return (np.flip(data, flip) if flip else data,)
