"""MaxPool-1/8/14, AvgPool-1/14/16, AdaptiveAvgPool-8 and AdaptiveMaxPool-8 (spec pages:
pooling/max-pool-1, max-pool-8, max-pool-14, avg-pool-1, avg-pool-14, avg-pool-16,
adaptive-avg-pool-8, adaptive-max-pool-8, pooling_shape_rules).

A box of (dilated) taps is the product of one window per axis, so maxima, their positions
and sums are computed one spatial axis at a time over strided window views: no Python loop
over taps, whatever the kernel size."""
from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC, AutoPad, Dim, NoAttrs, TensorSpec, check_alloc, check_spatial_rank, check_window_attrs,
    compute_dtype, dilated, element_type, elements, etype_name, fail, format_shape, fixed_pads, numeric, register,
    resolve_pads, same_pads, warn, widened, window_count, window_dim,
)

Rounding = Literal["floor", "ceil"]
Rounding14 = Literal["floor", "ceil", "ceil_torch"]


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
class MaxPool14Attrs(MaxPool8Attrs):
    rounding_type: Rounding14 = "floor"


@dataclass(frozen=True)
class AvgPoolAttrs:
    strides: tuple[int, ...]
    kernel: tuple[int, ...]
    exclude_pad: bool = field(metadata={"ir_name": "exclude-pad"})
    pads_begin: tuple[int, ...] = ()
    pads_end: tuple[int, ...] = ()
    rounding_type: Rounding = "floor"
    auto_pad: AutoPad = "explicit"


@dataclass(frozen=True)
class AvgPool14Attrs(AvgPoolAttrs):
    rounding_type: Rounding14 = "floor"


@dataclass(frozen=True)
class AvgPool16Attrs(AvgPool14Attrs):
    dilations: tuple[int, ...] = ()      # empty means ones


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
    ceil = attrs.rounding_type in ("ceil", "ceil_torch")
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
        if attrs.rounding_type == "ceil_torch":
            if dim.is_static:
                od = Dim.of(_count(dim.value, pb, pe, extent, attrs.strides[i], "ceil_torch"))
            else:       # the count grows with the size: evaluate it at both bounds
                lo_size = max(dim.lo + pb + pe, extent) - pb - pe
                od = Dim(_count(lo_size, pb, pe, extent, attrs.strides[i], "ceil_torch"),
                         None if dim.hi is None else _count(dim.hi, pb, pe, extent, attrs.strides[i], "ceil_torch"))
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


def _count(size, pb, pe, extent, stride, rounding) -> int:
    """Window positions along one axis; ceil_torch drops a last window that would start in
    the end padding (PyTorch's rule: every window starts inside the input or the begin pads)."""
    count = window_count(size, pb + pe, extent, stride, rounding in ("ceil", "ceil_torch"))
    if rounding == "ceil_torch" and count > 1 and (count - 1) * stride >= size + pb:
        count -= 1
    return count


def _geometry(attrs, x: np.ndarray):
    """Concrete begin pads and window counts per spatial axis."""
    spatial = x.shape[2:]
    dil = _dilations(attrs)
    pb, pe = resolve_pads(attrs.auto_pad, spatial, attrs.kernel, dil, attrs.strides,
                          attrs.pads_begin, attrs.pads_end)
    counts = []
    for i, size in enumerate(spatial):
        extent = dilated(attrs.kernel[i], dil[i])
        if size + pb[i] + pe[i] < extent:
            fail(f"the kernel after dilation ({extent}) is larger than the padded input "
                 f"({size} + pads {pb[i] + pe[i]}) at spatial axis {i}")
        counts.append(_count(size, pb[i], pe[i], extent, attrs.strides[i], attrs.rounding_type))
    check_alloc(x.shape[:2] + tuple(counts), x.dtype, "the pooling output")
    return pb, counts, dil


def _axis_windows(a: np.ndarray, axis: int, pad_begin: int, count: int, kernel: int,
                  dilation: int, stride: int, fill):
    """A view [..., count, ...(axis)..., kernel] of the windows along `axis`, padded with
    `fill`. Only the cells some window reads are materialised (the padded axis is at most
    (count - 1) * stride + dilated kernel long, which the output size bounds)."""
    size = a.shape[axis]
    extent = dilated(kernel, dilation)
    length = (count - 1) * stride + extent
    start = -pad_begin
    lo, hi = max(start, 0), min(start + length, size)
    parts = []
    shape = list(a.shape)
    if lo - start > 0:
        shape[axis] = lo - start
        parts.append(np.full(shape, fill, a.dtype))
    if hi > lo:
        parts.append(np.take(a, np.arange(lo, hi), axis=axis) if (lo, hi) != (0, size) else a)
    if start + length - max(hi, lo) > 0:
        shape[axis] = start + length - max(hi, lo)
        parts.append(np.full(shape, fill, a.dtype))
    padded = np.concatenate(parts, axis=axis) if len(parts) > 1 else parts[0]
    view = np.lib.stride_tricks.sliding_window_view(padded, extent, axis=axis)
    sl = [slice(None)] * view.ndim
    sl[axis] = slice(0, (count - 1) * stride + 1, stride)
    sl[-1] = slice(None, None, dilation)
    return view[tuple(sl)]


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


def max_pool(attrs, x: np.ndarray, index_type="i64", axis=0, indices: bool = True):
    """Values and flat indices of the window maxima (the values alone, as a 1-tuple,
    without `indices`).

    Like OpenVINO (reference and CPU plugin): taps are scanned in row-major order and a tap
    wins only if strictly greater than the running maximum, which starts at _lowest(); so
    the first maximum wins, NaN never wins, and a window where nothing beats the start
    value gives _lowest() and the index of the channel's first element. Per axis, innermost
    first, the first maximum of each window is kept: that is the row-major first maximum of
    the box. Indices count over the whole tensor, then wrap modulo prod(shape[axis:]).
    """
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    ns = len(spatial)
    pb, counts, dil = _geometry(attrs, x)
    low = _lowest(x.dtype)
    w = widened(x, etype_name(x))
    low_w = low.astype(w.dtype)
    # The input laid into a buffer of the start value as long as the windows reach (pads,
    # and past the end in ceil mode): a tap then is one strided view of it.
    lengths = [(counts[i] - 1) * attrs.strides[i] + dilated(attrs.kernel[i], dil[i])
               for i in range(ns)]
    check_alloc([n, c] + lengths, w.dtype, "the padded pooling input")
    padded = np.full((n, c) + tuple(lengths), low_w, w.dtype)
    inside = []
    source = []
    for i in range(ns):
        lo, hi = max(pb[i], 0), min(pb[i] + spatial[i], lengths[i])
        inside.append(slice(lo, max(lo, hi)))
        source.append(slice(lo - pb[i], lo - pb[i] + max(0, hi - lo)))
    padded[(slice(None), slice(None)) + tuple(inside)] = w[(slice(None), slice(None)) + tuple(source)]
    # The maximum first (fmax passes over NaN, and the start value is below every value
    # that can win), then the first tap, in row-major order, that holds it.
    best = _window_max(padded, attrs.kernel, dil, attrs.strides, counts, low_w)
    if not indices:
        return (best.astype(x.dtype),)
    # Taps in row-major order; a tap wins where it is strictly greater than the best so far
    # (which starts at the start value), so the first maximum wins and NaN never does.
    taps = list(np.ndindex(*attrs.kernel))
    views = [padded[(slice(None), slice(None)) + tuple(
        slice(t * dil[i], t * dil[i] + (counts[i] - 1) * attrs.strides[i] + 1, attrs.strides[i])
        for i, t in enumerate(tap))] for tap in taps]
    winner = np.full(best.shape, -1, np.int64 if len(taps) > 32767 else np.int16)
    found = np.empty(best.shape, bool)
    open_ = best > low_w                  # windows some tap beats the start value in
    for number, view in reversed(list(enumerate(views))):
        np.equal(view, best, out=found)
        found &= open_
        np.copyto(winner, number, where=found)   # the last write is the first tap
    # The winning tap's flat index in its channel: the window's first tap plus the tap's
    # offset; a window where no tap won points at the channel's first element.
    inner = [int(np.prod(spatial[i + 1:], dtype=np.int64)) for i in range(ns)]
    first = sum((np.arange(counts[i], dtype=np.int64) * attrs.strides[i] - pb[i]).reshape(
        [-1] + [1] * (ns - 1 - i)) * inner[i] for i in range(ns))
    offsets = np.array([sum(t * dil[i] * inner[i] for i, t in enumerate(tap)) for tap in taps],
                       np.int64)
    flat = np.where(winner >= 0, first + offsets[winner], 0)
    size = int(np.prod(spatial, dtype=np.int64))
    flat += (np.arange(n * c, dtype=np.int64) * size).reshape((n, c) + (1,) * ns)
    if axis != 0:
        flat %= int(np.prod(x.shape[axis:], dtype=np.int64))
    return best.astype(x.dtype), flat.astype(element_type(index_type).dtype)


def _window_max(padded: np.ndarray, kernel, dil, strides, counts, low) -> np.ndarray:
    """The fmax of each window of `padded` [N, C, *lengths] (each axis as long as its
    windows reach), and of `low` (so a window of NaN only gives the start value).

    Separably, one axis at a time (the maximum over a box is the maximum of its rows'
    maxima), and over the flat buffer: tap t of an axis is the buffer shifted by t times
    the dilation times the axis's flat stride, so each fmax is one contiguous vector pass
    (k - 1 of them per axis, not one strided pass per tap of the box). Positions whose
    window would cross a row's end get garbage but are never picked: the windows picked
    at the end, strided by the pooling strides, all lie inside their rows. ResNet's 3x3
    stride-2 MaxPool on 64x32x32: 0.28 ms as 9 strided passes, 0.14 ms this way."""
    out_shape = padded.shape[:2] + tuple(counts)
    if 0 in padded.shape or 0 in counts:
        return np.full(out_shape, low, padded.dtype)    # no windows, or nothing in them
    lengths = padded.shape[2:]
    flat_strides = [math.prod(lengths[i + 1:]) for i in range(len(lengths))]
    block = math.prod(lengths)
    buf = padded.reshape(-1)    # read only: the caller's taps view it afterwards
    for i in reversed(range(len(lengths))):
        if kernel[i] == 1:
            continue
        step = dil[i] * flat_strides[i]
        reach = buf.shape[0] - (kernel[i] - 1) * step
        out = np.fmax(buf[:reach], buf[step:step + reach])
        for t in range(2, kernel[i]):
            np.fmax(out, buf[t * step:t * step + reach], out=out)
        buf = out
    item = buf.itemsize
    # Every window start picked here lies inside the buffer each pass shortened.
    picked = np.lib.stride_tricks.as_strided(
        buf, out_shape, (padded.shape[1] * block * item, block * item)
        + tuple(flat_strides[i] * strides[i] * item for i in range(len(lengths))),
        writeable=False)
    return np.fmax(picked, low)


def avg_pool(attrs, x: np.ndarray) -> np.ndarray:
    """Window means.

    The divisor follows OpenVINO: with exclude-pad, the number of input elements in the
    window; without it, the whole kernel size as soon as any pad is non-zero (even where a
    ceil-mode window runs past the end pads), but the in-bounds count when there are no pads.
    A window over padding only gives 0. Integer means round half to even (the CPU plugin).
    """
    acc_t = compute_dtype(x.dtype)
    pb, counts, dil = _geometry(attrs, x)
    if x.ndim == 4 and x.dtype.char in "fd":
        # The compiled loop of ops/pool_loop.py: the same sums in the same order.
        from .pool_loop import MAX_AVG_KERNEL, avg_pool2d

        if max(attrs.kernel) <= MAX_AVG_KERNEL:
            pb_, pe_ = resolve_pads(attrs.auto_pad, x.shape[2:], attrs.kernel, dil,
                                    attrs.strides, attrs.pads_begin, attrs.pads_end)
            whole = not attrs.exclude_pad and (any(pb_) or any(pe_))
            return avg_pool2d(x, attrs.kernel, attrs.strides, dil, pb, counts, whole)
    total = x.astype(acc_t)
    for ax in reversed(range(x.ndim - 2)):
        # Padded cells hold zeros, so the window sums need no mask.
        total = _axis_windows(total, 2 + ax, pb[ax], counts[ax], attrs.kernel[ax], dil[ax],
                              attrs.strides[ax], 0).sum(axis=-1, dtype=acc_t)
    pb_, pe_ = resolve_pads(attrs.auto_pad, x.shape[2:], attrs.kernel, dil,
                            attrs.strides, attrs.pads_begin, attrs.pads_end)
    padded_any = any(pb_) or any(pe_)
    if attrs.exclude_pad or not padded_any:
        count = np.ones((), dtype=np.int64)
        for i, size in enumerate(x.shape[2:]):
            # Taps s + k*d (k < kernel) inside [0, size), counted without listing them.
            start = np.arange(counts[i], dtype=np.int64) * attrs.strides[i] - pb[i]
            first = np.maximum(0, -(start // dil[i]))
            last = np.minimum(attrs.kernel[i] - 1, -((start - size) // dil[i]) - 1)
            shape = [1] * (x.ndim - 2)
            shape[i] = -1
            count = count * np.maximum(last - first + 1, 0).reshape(shape)
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
        return max_pool(attrs, data, indices=False)


@register("MaxPool", since=(8, 14), attrs=(MaxPool8Attrs, MaxPool14Attrs), category="pooling")
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

    @staticmethod
    def run_first(attrs, data):
        """The values alone, for a layer whose indices nobody reads (see Plan)."""
        return max_pool(attrs, data, indices=False)


@register("AvgPool", since=(1, 14, 16), attrs=(AvgPoolAttrs, AvgPool14Attrs, AvgPool16Attrs),
          category="pooling")
class AvgPool1:
    @staticmethod
    def infer(attrs, data: TensorSpec):
        return [TensorSpec(data.etype, _pool_infer(attrs, data))]

    @staticmethod
    def run(attrs, data):
        return (avg_pool(attrs, data),)


# ---------------------------------------------------------------- adaptive pooling


@dataclass(frozen=True)
class AdaptiveMaxPoolAttrs:
    index_element_type: Literal["i32", "i64"] = "i64"


def _adaptive_infer(data: TensorSpec, size: TensorSpec, what: str):
    check_spatial_rank(data, "the data input")
    if not data.etype.is_float:
        fail(f"{what} data must be of a floating-point type, got {data.etype.name}")
    if size.etype.name not in ("i32", "i64"):
        fail(f"{what} output_size (input 1) must be i32 or i64, got {size.etype.name}")
    if size.rank is not None and size.rank != 1:
        fail(f"{what} output_size (input 1) must be 1-D, got {format_shape(size.shape)}")
    n = None if size.shape is None else size.shape[0].value
    if data.rank is not None and n is not None and n != data.rank - 2:
        fail(f"{what} output_size (input 1) has {n} values but the data has {data.rank - 2} "
             "spatial axes")
    if data.shape is None:
        return None if n is None else (DYNAMIC, DYNAMIC) + (DYNAMIC,) * n
    el = elements(size)
    ns = data.rank - 2
    if el is None or len(el) != ns:
        spatial = (DYNAMIC,) * ns
    else:
        for i, d in enumerate(el):
            if d.hi is not None and d.hi < 0:
                fail(f"{what} output_size (input 1) has the negative value {d.hi} at position {i}")
        spatial = tuple(d if d.lo >= 0 else DYNAMIC for d in el)
    return tuple(data.shape[:2]) + spatial


def _adaptive_bins(n_in: int, n_out: int):
    """Per output position: [floor(i * in / out), ceil((i + 1) * in / out)), in integers."""
    i = np.arange(n_out, dtype=np.int64)
    start = (i * n_in) // n_out
    end = -((-(i + 1) * n_in) // n_out)
    return start, end


def _adaptive_windows(a: np.ndarray, axis: int, n_out: int, fill):
    """[..., n_out, ...(axis)..., L] windows (L the longest bin), `fill` past a bin's end."""
    n_in = a.shape[axis]
    start, end = _adaptive_bins(n_in, n_out)
    length = int((end - start).max()) if n_out else 0
    check_alloc(a.shape[:axis] + (n_out,) + a.shape[axis + 1:] + (length,), a.dtype,
                "the adaptive pooling windows")
    idx = start[:, None] + np.arange(length)[None, :]
    valid = idx < end[:, None]
    g = np.take(a, np.minimum(idx, n_in - 1).reshape(-1), axis=axis)
    g = g.reshape(a.shape[:axis] + (n_out, length) + a.shape[axis + 1:])
    g = np.moveaxis(g, axis + 1, -1)
    mask = valid.reshape((n_out,) + (1,) * (a.ndim - axis - 1) + (length,))
    return np.where(mask, g, fill), idx


def _output_sizes(data: np.ndarray, size: np.ndarray, what: str) -> list[int]:
    sizes = [int(v) for v in np.asarray(size).reshape(-1)]
    if len(sizes) != data.ndim - 2:
        fail(f"{what} output_size (input 1) has {len(sizes)} values but the data has "
             f"{data.ndim - 2} spatial axes")
    for i, v in enumerate(sizes):
        if v < 1:
            fail(f"{what} output_size (input 1) has {v} at position {i}; sizes must be >= 1")
    if any(s == 0 for s in data.shape[2:]):
        fail(f"{what} cannot pool the empty input {list(data.shape)}")
    check_alloc(list(data.shape[:2]) + sizes, data.dtype, f"the {what} output")
    return sizes


@register("AdaptiveAvgPool", since=8, attrs=NoAttrs, category="pooling")
class AdaptiveAvgPool8:
    @staticmethod
    def infer(attrs, data: TensorSpec, output_size: TensorSpec):
        return [TensorSpec(data.etype, _adaptive_infer(data, output_size, "AdaptiveAvgPool"))]

    @staticmethod
    def run(attrs, data, output_size):
        sizes = _output_sizes(data, output_size, "AdaptiveAvgPool")
        acc_t = compute_dtype(data.dtype)
        total = data.astype(acc_t)
        for ax in reversed(range(data.ndim - 2)):
            n_in = total.shape[2 + ax]
            start, end = _adaptive_bins(n_in, sizes[ax])
            win, _ = _adaptive_windows(total, 2 + ax, sizes[ax], 0)
            counts = (end - start).astype(acc_t).reshape((-1,) + (1,) * (data.ndim - 3 - ax))
            total = win.sum(axis=-1, dtype=acc_t) / counts
        return (total.astype(data.dtype),)


@register("AdaptiveMaxPool", since=8, attrs=AdaptiveMaxPoolAttrs, category="pooling")
class AdaptiveMaxPool8:
    """Second output: the flat spatial index of each maximum (within its N, C slice); the
    first maximum in row-major order wins, as in OpenVINO's reference."""

    @staticmethod
    def infer(attrs, data: TensorSpec, output_size: TensorSpec):
        shape = _adaptive_infer(data, output_size, "AdaptiveMaxPool")
        return [TensorSpec(data.etype, shape), TensorSpec.make(attrs.index_element_type, shape)]

    @staticmethod
    def run(attrs, data, output_size):
        sizes = _output_sizes(data, output_size, "AdaptiveMaxPool")
        ns = data.ndim - 2
        v = widened(data, etype_name(data))
        low = np.array(-np.inf, v.dtype)
        coords = []
        for ax in reversed(range(ns)):
            a = 2 + ax
            win, idx = _adaptive_windows(v, a, sizes[ax], low)
            k = np.argmax(win, axis=-1)
            v = np.take_along_axis(win, k[..., None], axis=-1)[..., 0]
            starts = idx[:, 0].reshape((-1,) + (1,) * (ns - 1 - ax))
            carried = []
            for cpos in coords:
                cw, _ = _adaptive_windows(cpos, a, sizes[ax], 0)
                carried.append(np.take_along_axis(cw, k[..., None], axis=-1)[..., 0])
            coords = carried + [starts + k]
        spatial = data.shape[2:]
        flat = np.zeros(v.shape, dtype=np.int64)
        for pos, ax in zip(coords, reversed(range(ns))):
            flat += pos.astype(np.int64) * int(np.prod(spatial[ax + 1:], dtype=np.int64))
        return v.astype(data.dtype), flat.astype(element_type(attrs.index_element_type).dtype)
