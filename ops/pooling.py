"""MaxPool-1, MaxPool-8 and AvgPool-1 (spec pages: pooling/max-pool-1, pooling/max-pool-8,
pooling/avg-pool-1, pooling/pooling_shape_rules)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC, AutoPad, TensorSpec, check_spatial_rank, check_window_attrs, compute_dtype, dilated,
    element_type, fail, fixed_pads, numeric, register, resolve_pads, same_pads, tap_slices, warn,
    window_count, window_dim,
)

Rounding = Literal["floor", "ceil"]


@dataclass(frozen=True)
class MaxPool1Attrs:
    strides: tuple[int, ...]
    kernel: tuple[int, ...]
    pads_begin: tuple[int, ...] = ()
    pads_end: tuple[int, ...] = ()
    rounding_type: Rounding = "floor"
    auto_pad: AutoPad = "explicit"


@dataclass(frozen=True)
class MaxPool8Attrs:
    strides: tuple[int, ...]
    kernel: tuple[int, ...]
    dilations: tuple[int, ...] = ()      # empty means ones, as the spec's default [1,1,...]
    pads_begin: tuple[int, ...] = ()
    pads_end: tuple[int, ...] = ()
    rounding_type: Rounding = "floor"
    auto_pad: AutoPad = "explicit"
    index_element_type: Literal["i32", "i64"] = "i64"
    axis: int = 0


@dataclass(frozen=True)
class AvgPoolAttrs:
    strides: tuple[int, ...]
    kernel: tuple[int, ...]
    exclude_pad: bool = field(metadata={"ir_name": "exclude-pad"})
    pads_begin: tuple[int, ...] = ()
    pads_end: tuple[int, ...] = ()
    rounding_type: Rounding = "floor"
    auto_pad: AutoPad = "explicit"


def _dilations(attrs) -> tuple[int, ...]:
    return getattr(attrs, "dilations", ()) or (1,) * len(attrs.kernel)


def _window_positions(size, pad_begin, count, kernel, dilation, stride) -> np.ndarray:
    """[count, kernel] input coordinates of every tap of every window along one axis."""
    return (np.arange(count)[:, None] * stride - pad_begin) + np.arange(kernel)[None, :] * dilation


# The shape rule looks at this many windows per end of an axis at most: absurd pads in a file
# must not make validation allocate [count, kernel] arrays.
_EDGE_WINDOWS = 1 << 16


def _padding_only_windows(size, pad_begin, count, kernel, dilation, stride) -> np.ndarray:
    """Indices of the windows whose every tap falls in the padding.

    Window w's taps are s + k*dilation (k < kernel, s = w*stride - pad_begin); one lands in
    [0, size) iff some k lies in [ceil(-s/d), ceil((size-s)/d) - 1]. Such windows sit at
    the two ends of the axis, so only the first and last _EDGE_WINDOWS are examined.
    """
    if count <= 2 * _EDGE_WINDOWS:
        w = np.arange(count, dtype=np.int64)
    else:
        w = np.concatenate([np.arange(_EDGE_WINDOWS, dtype=np.int64),
                            np.arange(count - _EDGE_WINDOWS, count, dtype=np.int64)])
    start = w * stride - pad_begin
    first = np.maximum(0, -(start // dilation))              # ceil(-s/d)
    last = np.minimum(kernel - 1, -((start - size) // dilation) - 1)  # ceil((size-s)/d) - 1
    return w[first > last]


# ---------------------------------------------------------------- shape rule


def _pool_infer(attrs, data: TensorSpec):
    """Output shape of a pooling op (pooling_shape_rules): rounding applies to every auto_pad
    mode; same_* recompute the pads from the input size, so a dynamic size gives a dynamic dim."""
    check_spatial_rank(data, "the data input")
    numeric(data, "the data input")
    n = len(attrs.kernel)
    if data.rank is not None and data.rank != n + 2:
        fail(f"attribute kernel has {n} values but the data {data} has {data.rank - 2} spatial axes")
    dil = _dilations(attrs)
    check_window_attrs(n, kernel=attrs.kernel, strides=attrs.strides, dilations=dil,
                       pads_begin=attrs.pads_begin, pads_end=attrs.pads_end)
    if any(k < 1 for k in attrs.kernel):
        fail(f"attribute kernel={','.join(map(str, attrs.kernel))} has a value below 1")
    if data.shape is None:
        return (DYNAMIC,) * (n + 2)
    for i, what in ((0, "batch size"), (1, "channel count")):
        if data.shape[i].hi == 0:
            fail(f"the {what} (data dim {i}) is zero: {data}")
    ceil = attrs.rounding_type == "ceil"
    out = list(data.shape[:2])
    fixed_b, fixed_e = fixed_pads(attrs.auto_pad, n, attrs.pads_begin, attrs.pads_end)
    for i in range(n):
        dim = data.shape[2 + i]
        extent = dilated(attrs.kernel[i], dil[i])
        if attrs.auto_pad in ("same_upper", "same_lower"):
            if not dim.is_static:
                out.append(DYNAMIC)      # the pads, hence the count, depend on the size
                continue
            pb, pe = same_pads(dim.value, attrs.kernel[i], dil[i], attrs.strides[i],
                               attrs.auto_pad == "same_upper")
        else:
            pb, pe = fixed_b[i], fixed_e[i]
        if getattr(attrs, "exclude_pad", False) and dim.is_static and not (pb < extent and pe < extent):
            # OpenVINO's AvgPool rule: with exclude-pad a window inside the padding would divide by 0.
            fail(f"with exclude-pad the kernel ({extent}) must be larger than each pad "
                 f"(pads {pb},{pe}) at spatial axis {i}: a window could lie entirely in the padding")
        od = window_dim(dim, pb + pe, extent, attrs.strides[i], i, ceil)
        out.append(od)
        if dim.is_static:
            empty = _padding_only_windows(dim.value, pb, od.value, attrs.kernel[i], dil[i],
                                          attrs.strides[i])
            if empty.size:
                # OpenVINO keeps these windows (no ceil_torch-style trimming in opset1/8). MaxPool
                # gives the CPU plugin's start value there (see _lowest); for AvgPool the CPU
                # plugin gives NaN or -0 and the reference 0, which irrun follows.
                warn(f"window(s) {', '.join(map(str, empty[:5]))} along spatial axis {i} cover only "
                     f"padding (input size {dim.value}, pads {pb},{pe}, kernel {attrs.kernel[i]}, "
                     f"stride {attrs.strides[i]}): MaxPool gives the lowest value there, AvgPool 0",
                     "empty-window")
    return tuple(out)


# ---------------------------------------------------------------- kernels


def _geometry(attrs, x: np.ndarray):
    """Concrete pads, window counts and per-axis tap coordinates for an input array."""
    spatial = x.shape[2:]
    dil = _dilations(attrs)
    pb, pe = resolve_pads(attrs.auto_pad, spatial, attrs.kernel, dil, attrs.strides,
                          attrs.pads_begin, attrs.pads_end)
    counts, positions = [], []
    for i, size in enumerate(spatial):
        extent = dilated(attrs.kernel[i], dil[i])
        if size + pb[i] + pe[i] < extent:
            fail(f"the kernel after dilation ({extent}) is larger than the padded input "
                 f"({size} + pads {pb[i] + pe[i]}) at spatial axis {i}")
        count = window_count(size, pb[i] + pe[i], extent, attrs.strides[i],
                             attrs.rounding_type == "ceil")
        counts.append(count)
        positions.append(_window_positions(size, pb[i], count, attrs.kernel[i], dil[i], attrs.strides[i]))
    # Pad by the begin pads, and at the end far enough for ceil-mode windows that run past
    # the end pads; padded cells are masked out, so their value does not matter.
    ends = [max(0, int(p[-1, -1]) + 1 - size) for p, size in zip(positions, spatial)]
    padded = np.pad(x, [(0, 0), (0, 0)] + list(zip(pb, ends)))
    return pb, counts, positions, dil, padded


def _taps(attrs, x):
    """Yield (view [N, C, *counts], in-bounds mask [*counts], per-axis coordinates) per kernel tap."""
    pb, counts, positions, dil, padded = _geometry(attrs, x)
    spatial = x.shape[2:]
    for tap in np.ndindex(*attrs.kernel):
        offsets = [t * d for t, d in zip(tap, dil)]
        view = padded[(slice(None), slice(None)) + tap_slices(offsets, attrs.strides, counts)]
        coords = [p[:, t] for p, t in zip(positions, tap)]
        mask = np.ones((), dtype=bool)
        for i, c in enumerate(coords):
            shape = [1] * len(counts)
            shape[i] = -1
            mask = mask & ((c >= 0) & (c < spatial[i])).reshape(shape)
        yield view, mask, coords


def _lowest(dtype) -> np.ndarray:
    """What a window over padding only holds: the CPU plugin's start value.

    The plugin starts float maxima at the lowest f32 value and rounds it to the element type
    (so f16 and bf16 give -inf, f64 gives -3.4e38), integers at the type's minimum.
    OpenVINO's reference kernel uses each type's own lowest value instead.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return np.array(np.iinfo(dtype).min, dtype=dtype)
    with np.errstate(over="ignore"):
        return np.array(np.finfo(np.float32).min, dtype=np.float32).astype(dtype)


def max_pool(attrs, x: np.ndarray, index_type="i64", axis=0):
    """Values and flat indices of the window maxima.

    Like OpenVINO (reference and CPU plugin): taps are scanned in row-major order and a tap
    wins only if strictly greater, so the first maximum wins and NaN never wins; a window
    over padding only gives _lowest() and the index of the channel's first element.
    Indices count over the whole tensor, then wrap modulo prod(shape[axis:]).
    """
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    inner = [int(np.prod(spatial[i + 1:], dtype=np.int64)) for i in range(len(spatial))]
    best = idx = None
    for view, mask, coords in _taps(attrs, x):
        if best is None:
            best = np.full(view.shape, _lowest(x.dtype), dtype=x.dtype)
            idx = np.zeros(view.shape, dtype=np.int64)
        flat = np.zeros((), dtype=np.int64)
        for i, co in enumerate(coords):
            shape = [1] * len(spatial)
            shape[i] = -1
            flat = flat + (co * inner[i]).reshape(shape)
        better = mask & (view > best)
        np.copyto(best, view, where=better)
        np.copyto(idx, np.broadcast_to(flat, idx.shape), where=better)
    size = int(np.prod(spatial, dtype=np.int64))
    idx += (np.arange(n * c, dtype=np.int64) * size).reshape((n, c) + (1,) * len(spatial))
    if axis != 0:
        idx %= int(np.prod(x.shape[axis:], dtype=np.int64))
    return best, idx.astype(element_type(index_type).dtype)


def avg_pool(attrs, x: np.ndarray) -> np.ndarray:
    """Window means.

    The divisor follows OpenVINO: with exclude-pad, the number of input elements in the
    window; without it, the whole kernel size as soon as any pad is non-zero (even where a
    ceil-mode window runs past the end pads), but the in-bounds count when there are no pads.
    A window over padding only gives 0. Integer means round half to even (the CPU plugin).
    """
    acc_t = compute_dtype(x.dtype)
    total = None
    for view, _, _ in _taps(attrs, x):
        # Padded cells hold zeros, so summing the views needs no mask.
        total = view.astype(acc_t) if total is None else total + view
    pb, pe = resolve_pads(attrs.auto_pad, x.shape[2:], attrs.kernel, _dilations(attrs),
                          attrs.strides, attrs.pads_begin, attrs.pads_end)
    padded_any = any(pb) or any(pe)
    if attrs.exclude_pad or not padded_any:
        count = np.ones((), dtype=np.int64)
        for i, size in enumerate(x.shape[2:]):
            pos = _window_positions(size, pb[i], total.shape[2 + i], attrs.kernel[i], 1, attrs.strides[i])
            shape = [1] * (x.ndim - 2)
            shape[i] = -1
            count = count * ((pos >= 0) & (pos < size)).sum(axis=1).reshape(shape)
    else:
        count = np.full((1,) * (x.ndim - 2), int(np.prod(attrs.kernel)), dtype=np.int64)
    safe = np.maximum(count, 1)
    if np.dtype(x.dtype).kind in "iu":
        mean = np.rint(total.astype(np.float64) / safe)
    else:
        mean = total / safe.astype(acc_t)
    mean = np.where(count > 0, mean, 0)
    return mean.astype(x.dtype)


@register("MaxPool", since=1, attrs=MaxPool1Attrs, category="pooling")
class MaxPool1:
    @staticmethod
    def infer(attrs, data: TensorSpec):
        return [TensorSpec(data.etype, _pool_infer(attrs, data))]

    @staticmethod
    def run(attrs, data):
        return (max_pool(attrs, data)[0],)


@register("MaxPool", since=8, attrs=MaxPool8Attrs, category="pooling")
class MaxPool8:
    """Second output: flat indices of the maxima, see max_pool()."""

    @staticmethod
    def infer(attrs, data: TensorSpec):
        shape = _pool_infer(attrs, data)
        if data.rank is not None and not -data.rank <= attrs.axis < data.rank:
            fail(f"attribute axis={attrs.axis} is out of range [{-data.rank}, {data.rank - 1}] "
                 f"for data of rank {data.rank}")
        return [TensorSpec(data.etype, shape), TensorSpec.make(attrs.index_element_type, shape)]

    @staticmethod
    def run(attrs, data):
        axis = attrs.axis + data.ndim if attrs.axis < 0 else attrs.axis
        return max_pool(attrs, data, attrs.index_element_type, axis)


@register("AvgPool", since=1, attrs=AvgPoolAttrs, category="pooling")
class AvgPool1:
    @staticmethod
    def infer(attrs, data: TensorSpec):
        return [TensorSpec(data.etype, _pool_infer(attrs, data))]

    @staticmethod
    def run(attrs, data):
        return (avg_pool(attrs, data),)
