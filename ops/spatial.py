"""Data movement over spatial axes: Pad-1 and Pad-12 (spec pages: movement/pad-1, pad-12)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC, Dim, TensorSpec, check_alloc, check_integer, elements, fail, format_shape,
    register, warn,
)

# ---------------------------------------------------------------- Pad


@dataclass(frozen=True)
class PadAttrs:
    pad_mode: Literal["constant", "edge", "reflect", "symmetric"] = "constant"


def _pad_dim(d: Dim, b: Dim, e: Dim) -> Dim:
    """max(b + d + e, 0) over intervals (pads may be negative)."""
    lo = max(d.lo + b.lo + e.lo, 0)
    hi = None if d.hi is None or b.hi is None or e.hi is None else max(d.hi + b.hi + e.hi, 0)
    return Dim(lo, hi)


def _check_mode_pads(mode: str, sizes, begins, ends, static=True) -> None:
    """reflect needs pads < dim (no edge repeat) and symmetric pads <= dim, as OpenVINO checks."""
    for axis, (size, b, e) in enumerate(zip(sizes, begins, ends)):
        if size is None or b is None or e is None:
            continue
        if mode == "reflect" and (b >= size or e >= size) and max(b, e) > 0:
            fail(f"reflect padding needs pads below the dim: axis {axis} has size {size} and "
                 f"pads {b},{e}")
        if mode == "symmetric" and (b > size or e > size):
            fail(f"symmetric padding needs pads at most the dim: axis {axis} has size {size} and "
                 f"pads {b},{e}")
        if mode == "edge" and size == 0 and max(b, e) > 0:
            fail(f"edge padding of the empty axis {axis} has no edge to repeat (pads {b},{e})")


def _pad_infer(attrs, x: TensorSpec, begin: TensorSpec, end: TensorSpec, value, negative_ok: bool):
    for what, s in (("pads_begin (input 1)", begin), ("pads_end (input 2)", end)):
        check_integer(s, f"Pad {what}")
        if s.rank is not None and s.rank != 1:
            fail(f"Pad {what} must be 1-D, got {format_shape(s.shape)}")
        if x.rank is not None and s.shape is not None and s.shape[0].is_static \
                and s.shape[0].value != x.rank:
            fail(f"Pad {what} has {s.shape[0].value} elements but the data has rank {x.rank}")
    if value is not None:
        if attrs.pad_mode != "constant" and not (value.value is not None and not value.value.any()):
            # The page says it should not be set; OpenVINO's own Python API adds a zero one.
            warn(f"Pad pad_value (input 3) is ignored with pad_mode='{attrs.pad_mode}'")
        if value.etype != x.etype:
            fail(f"Pad pad_value (input 3) must have the data's element type {x.etype.name}, "
                 f"got {value.etype.name}")
        if value.rank not in (None, 0):
            fail(f"Pad pad_value (input 3) must be a scalar, got {format_shape(value.shape)}")
    if x.shape is None:
        return [TensorSpec(x.etype, None)]
    b_el, e_el = elements(begin), elements(end)
    rank = len(x.shape)
    b_el = b_el if b_el is not None and len(b_el) == rank else (DYNAMIC_PAD,) * rank
    e_el = e_el if e_el is not None and len(e_el) == rank else (DYNAMIC_PAD,) * rank
    known = lambda el: [d.value if d.is_static else None for d in el]   # noqa: E731
    if not negative_ok:
        for what, el in (("pads_begin", b_el), ("pads_end", e_el)):
            neg = [v for v in known(el) if v is not None and v < 0]
            if neg:
                fail(f"Pad-1 {what} must be non-negative (Pad-12 crops with negative pads), "
                     f"got {','.join(map(str, known(el)))}")
    _check_mode_pads(attrs.pad_mode, [d.value for d in x.shape], known(b_el), known(e_el))
    out = tuple(_pad_dim(d, b, e) if b is not DYNAMIC_PAD and e is not DYNAMIC_PAD else DYNAMIC
                for d, b, e in zip(x.shape, b_el, e_el))
    return [TensorSpec(x.etype, out)]


DYNAMIC_PAD = Dim(-(1 << 62), None)    # an unknown, possibly negative, pad


def _source_index(n_out: int, begin: int, size: int, mode: str):
    """For one axis: the data index each output position reads, and whether it is inside.

    Output position i reads data index j = i - begin; outside [0, size) the mode maps j back
    into the data (reflect without and symmetric with the edge repeated), relative to the
    whole data even when the other end is cropped, as the spec's mixed-pads example shows.
    """
    j = np.arange(n_out, dtype=np.int64) - begin
    inside = (j >= 0) & (j < size)
    if mode == "edge":
        j = np.clip(j, 0, size - 1)
    elif mode == "reflect":
        j = np.where(j < 0, -j, np.where(j >= size, 2 * (size - 1) - j, j))
    elif mode == "symmetric":
        j = np.where(j < 0, -j - 1, np.where(j >= size, 2 * size - 1 - j, j))
    else:
        j = np.clip(j, 0, max(size - 1, 0))
    return j, inside


def pad(x: np.ndarray, begins, ends, mode: str, value) -> np.ndarray:
    out_shape = [max(s + b + e, 0) for s, b, e in zip(x.shape, begins, ends)]
    check_alloc(out_shape, x.dtype, "the Pad output")
    if 0 in out_shape:
        return np.zeros(out_shape, x.dtype)
    if x.size == 0:           # constant mode only (the checks refuse the others)
        return np.full(out_shape, value, x.dtype)
    index, mask = [], None
    for axis, (n, b, s) in enumerate(zip(out_shape, begins, x.shape)):
        j, inside = _source_index(n, b, s, mode)
        shape = [1] * x.ndim
        shape[axis] = n
        index.append(j.reshape(shape))
        if mode == "constant" and not inside.all():
            m = inside.reshape(shape)
            mask = m if mask is None else mask & m
    y = x[tuple(index)]
    if mask is not None:
        y = np.where(mask, y, np.asarray(value, x.dtype))
    return np.ascontiguousarray(y, dtype=x.dtype)


def _pad_run(attrs, x, begin, end, value, negative_ok):
    rank = x.ndim
    for what, p in (("pads_begin (input 1)", begin), ("pads_end (input 2)", end)):
        if p.ndim != 1 or p.shape[0] != rank:
            fail(f"Pad {what} must hold {rank} values (the data's rank), got shape {list(p.shape)}")
        if not negative_ok and (p < 0).any():
            fail(f"Pad-1 {what} must be non-negative, got {p.tolist()}")
    b, e = [int(v) for v in begin], [int(v) for v in end]
    _check_mode_pads(attrs.pad_mode, x.shape, b, e)
    v = 0 if value is None else np.asarray(value).reshape(-1)[0]
    return (pad(x, b, e, attrs.pad_mode, v),)


@register("Pad", since=1, attrs=PadAttrs, category="movement")
class Pad1:
    """Negative pads: the Pad-1 page says non-negative; irrun refuses them (Pad-12 crops)."""

    @staticmethod
    def infer(attrs, x: TensorSpec, begin: TensorSpec, end: TensorSpec, value: TensorSpec | None = None):
        return _pad_infer(attrs, x, begin, end, value, negative_ok=False)

    @staticmethod
    def run(attrs, x, begin, end, value=None):
        return _pad_run(attrs, x, begin, end, value, negative_ok=False)


@register("Pad", since=12, attrs=PadAttrs, category="movement")
class Pad12:
    @staticmethod
    def infer(attrs, x: TensorSpec, begin: TensorSpec, end: TensorSpec, value: TensorSpec | None = None):
        return _pad_infer(attrs, x, begin, end, value, negative_ok=True)

    @staticmethod
    def run(attrs, x, begin, end, value=None):
        return _pad_run(attrs, x, begin, end, value, negative_ok=True)
