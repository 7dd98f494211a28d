"""Data movement over spatial axes: Pad-1, Pad-12, DepthToSpace-1, SpaceToDepth-1,
BatchToSpace-2, SpaceToBatch-2, ShuffleChannels-1, Roll-7, ExtractImagePatches-3 (spec pages
under movement/)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC, Dim, NoAttrs, TensorSpec, check_alloc, check_integer, elements, fail, format_shape,
    known_ints, normalize_axis, register, warn,
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
    if not any(begins) and not any(ends):
        return x
    if mode == "constant":
        # The data, cropped by the negative pads, copied into a tensor of the pad value.
        kept = x[tuple(slice(max(-b, 0), s - max(-e, 0))
                       for b, e, s in zip(begins, ends, x.shape))]
        out = np.full(out_shape, np.asarray(value, x.dtype), x.dtype)
        out[tuple(slice(max(b, 0), max(b, 0) + k) for b, k in zip(begins, kept.shape))] = kept
        return out
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


# ---------------------------------------------------------------- DepthToSpace, SpaceToDepth
# Spec pages: movement/depth-to-space-1, space-to-depth-1.


@dataclass(frozen=True)
class DepthSpaceAttrs:
    mode: Literal["blocks_first", "depth_first"]
    block_size: int = 1


def _check_block(attrs, x: TensorSpec, name: str):
    if attrs.block_size < 1:
        fail(f"{name} needs block_size >= 1, got {attrs.block_size}")
    if x.rank is not None and x.rank < 3:
        fail(f"{name} needs data of rank 3 or more ([N, C, D1, ...]), got {format_shape(x.shape)}")


@register("DepthToSpace", since=1, attrs=DepthSpaceAttrs, category="movement")
class DepthToSpace1:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        _check_block(attrs, x, "DepthToSpace")
        if x.shape is None:
            return [TensorSpec(x.etype, None)]
        k = len(x.shape) - 2
        div = attrs.block_size ** k
        c = x.shape[1]
        if c.is_static and c.value % div:
            fail(f"DepthToSpace: the channels ({c.value}) are not divisible by block_size^{k} = {div}")
        cout = Dim(-(-c.lo // div), None if c.hi is None else c.hi // div)
        return [TensorSpec(x.etype, (x.shape[0], cout) + tuple(d * attrs.block_size for d in x.shape[2:]))]

    @staticmethod
    def run(attrs, x):
        n, c, *sp = x.shape
        k, b = len(sp), attrs.block_size
        if c % (b ** k):
            fail(f"DepthToSpace: the channels ({c}) are not divisible by block_size^{k} = {b ** k}")
        cb = c // b ** k
        if attrs.mode == "blocks_first":
            y = x.reshape([n] + [b] * k + [cb] + sp)
            perm = [0, k + 1] + [p for i in range(k) for p in (k + 2 + i, 1 + i)]
        else:
            y = x.reshape([n, cb] + [b] * k + sp)
            perm = [0, 1] + [p for i in range(k) for p in (k + 2 + i, 2 + i)]
        return (np.ascontiguousarray(y.transpose(perm)).reshape([n, cb] + [d * b for d in sp]),)


@register("SpaceToDepth", since=1, attrs=DepthSpaceAttrs, category="movement")
class SpaceToDepth1:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        _check_block(attrs, x, "SpaceToDepth")
        if x.shape is None:
            return [TensorSpec(x.etype, None)]
        b = attrs.block_size
        out = []
        for i, d in enumerate(x.shape[2:]):
            if d.is_static and d.value % b:
                fail(f"SpaceToDepth: spatial dim {i} ({d.value}) is not divisible by block_size {b}")
            out.append(Dim(-(-d.lo // b), None if d.hi is None else d.hi // b))
        k = len(out)
        return [TensorSpec(x.etype, (x.shape[0], x.shape[1] * (b ** k)) + tuple(out))]

    @staticmethod
    def run(attrs, x):
        n, c, *sp = x.shape
        k, b = len(sp), attrs.block_size
        for i, d in enumerate(sp):
            if d % b:
                fail(f"SpaceToDepth: spatial dim {i} ({d}) is not divisible by block_size {b}")
        y = x.reshape([n, c] + [v for d in sp for v in (d // b, b)])
        blocks = [3 + 2 * i for i in range(k)]
        inner = [2 + 2 * i for i in range(k)]
        perm = [0] + blocks + [1] + inner if attrs.mode == "blocks_first" else [0, 1] + blocks + inner
        return (np.ascontiguousarray(y.transpose(perm)).reshape([n, c * b ** k] + [d // b for d in sp]),)


# ---------------------------------------------------------------- BatchToSpace, SpaceToBatch
# Spec pages: movement/batch-to-space-2, space-to-batch-2.


def _block_inputs(x: TensorSpec, specs, names, op: str):
    for s, name in zip(specs, names):
        check_integer(s, f"{op} {name}")
        if s.rank is not None and s.rank != 1:
            fail(f"{op} {name} must be 1-D, got {format_shape(s.shape)}")
        if x.rank is not None and s.shape is not None and s.shape[0].is_static and s.shape[0].value != x.rank:
            fail(f"{op} {name} has {s.shape[0].value} values but the data has rank {x.rank}")
    if x.rank is not None and x.rank < 2:
        fail(f"{op} needs data of rank 2 or more, got {format_shape(x.shape)}")


def _values(arrays, names, op, rank):
    out = []
    for a, name in zip(arrays, names):
        v = [int(t) for t in np.asarray(a).reshape(-1)]
        if len(v) != rank:
            fail(f"{op} {name} has {len(v)} values but the data has rank {rank}")
        out.append(v)
    return out


def _check_blocks(block, op):
    if block[0] != 1:
        fail(f"{op} block_shape (input 1) must start with 1 (the batch), got {block}")
    if any(b < 1 for b in block):
        fail(f"{op} block_shape (input 1) values must be >= 1, got {block}")


@register("BatchToSpace", since=2, attrs=NoAttrs, category="movement")
class BatchToSpace2:
    @staticmethod
    def infer(attrs, x: TensorSpec, block: TensorSpec, begin: TensorSpec, end: TensorSpec):
        names = ["block_shape (input 1)", "crops_begin (input 2)", "crops_end (input 3)"]
        _block_inputs(x, (block, begin, end), names, "BatchToSpace")
        if x.shape is None:
            return [TensorSpec(x.etype, None)]
        vals = [known_ints(s) for s in (block, begin, end)]
        if any(v is None or len(v) != len(x.shape) for v in vals):
            return [TensorSpec(x.etype, (DYNAMIC,) * len(x.shape))]
        b, cb, ce = vals
        _check_blocks(b, "BatchToSpace")
        if any(v < 0 for v in cb + ce):
            fail(f"BatchToSpace crops must be non-negative, got {cb} and {ce}")
        prod = int(np.prod(b))
        n = x.shape[0]
        if n.is_static and n.value % prod:
            fail(f"BatchToSpace: the batch ({n.value}) is not divisible by prod(block_shape) = {prod}")
        out = [Dim(-(-n.lo // prod), None if n.hi is None else n.hi // prod)]
        for i in range(1, len(x.shape)):
            d = x.shape[i] * b[i]
            if d.is_static and cb[i] + ce[i] > d.value:
                fail(f"BatchToSpace crops {cb[i]} + {ce[i]} exceed dim {i} x block = {d.value}")
            out.append(Dim(max(d.lo - cb[i] - ce[i], 0), None if d.hi is None else d.hi - cb[i] - ce[i]))
        return [TensorSpec(x.etype, tuple(out))]

    @staticmethod
    def run(attrs, x, block, begin, end):
        b, cb, ce = _values((block, begin, end), ["block_shape (input 1)", "crops_begin (input 2)",
                                                  "crops_end (input 3)"], "BatchToSpace", x.ndim)
        _check_blocks(b, "BatchToSpace")
        bs = b[1:]
        prod = int(np.prod(bs))
        if x.shape[0] % prod:
            fail(f"BatchToSpace: the batch ({x.shape[0]}) is not divisible by prod(block_shape) = {prod}")
        k = len(bs)
        y = x.reshape(bs + [x.shape[0] // prod] + list(x.shape[1:]))
        perm = [k] + [p for i in range(k) for p in (k + 1 + i, i)]
        y = y.transpose(perm).reshape([x.shape[0] // prod] + [d * s for d, s in zip(x.shape[1:], bs)])
        sl = [slice(None)]
        for i in range(1, x.ndim):
            size = y.shape[i]
            if cb[i] < 0 or ce[i] < 0 or cb[i] + ce[i] > size:
                fail(f"BatchToSpace crops {cb[i]}, {ce[i]} do not fit dim {i} x block = {size}")
            sl.append(slice(cb[i], size - ce[i]))
        return (np.ascontiguousarray(y[tuple(sl)]),)


@register("SpaceToBatch", since=2, attrs=NoAttrs, category="movement")
class SpaceToBatch2:
    @staticmethod
    def infer(attrs, x: TensorSpec, block: TensorSpec, begin: TensorSpec, end: TensorSpec):
        names = ["block_shape (input 1)", "pads_begin (input 2)", "pads_end (input 3)"]
        _block_inputs(x, (block, begin, end), names, "SpaceToBatch")
        if x.shape is None:
            return [TensorSpec(x.etype, None)]
        vals = [known_ints(s) for s in (block, begin, end)]
        if any(v is None or len(v) != len(x.shape) for v in vals):
            return [TensorSpec(x.etype, (DYNAMIC,) * len(x.shape))]
        b, pb, pe = vals
        _check_blocks(b, "SpaceToBatch")
        if any(v < 0 for v in pb + pe):
            fail(f"SpaceToBatch pads must be non-negative, got {pb} and {pe}")
        out = [x.shape[0] * int(np.prod(b))]
        for i in range(1, len(x.shape)):
            d = x.shape[i] + (pb[i] + pe[i])
            if d.is_static and d.value % b[i]:
                fail(f"SpaceToBatch: padded dim {i} ({d.value}) is not divisible by block {b[i]}")
            out.append(Dim(-(-d.lo // b[i]), None if d.hi is None else d.hi // b[i]))
        return [TensorSpec(x.etype, tuple(out))]

    @staticmethod
    def run(attrs, x, block, begin, end):
        b, pb, pe = _values((block, begin, end), ["block_shape (input 1)", "pads_begin (input 2)",
                                                  "pads_end (input 3)"], "SpaceToBatch", x.ndim)
        _check_blocks(b, "SpaceToBatch")
        if any(v < 0 for v in pb + pe):
            fail(f"SpaceToBatch pads must be non-negative, got {pb} and {pe}")
        shape = [d + p + q for d, p, q in zip(x.shape, pb, pe)]
        check_alloc(shape, x.dtype, "the padded SpaceToBatch input")
        for i in range(1, x.ndim):
            if shape[i] % b[i]:
                fail(f"SpaceToBatch: padded dim {i} ({shape[i]}) is not divisible by block {b[i]}")
        xp = np.pad(x, list(zip(pb, pe)))
        k = x.ndim - 1
        y = xp.reshape([shape[0]] + [v for i in range(1, x.ndim) for v in (shape[i] // b[i], b[i])])
        perm = [2 + 2 * i for i in range(k)] + [0] + [1 + 2 * i for i in range(k)]
        y = y.transpose(perm).reshape([shape[0] * int(np.prod(b))] + [shape[i] // b[i] for i in range(1, x.ndim)])
        return (np.ascontiguousarray(y),)


# ---------------------------------------------------------------- ShuffleChannels, Roll
# Spec pages: movement/shuffle-channels-1, roll-7.


@dataclass(frozen=True)
class ShuffleChannelsAttrs:
    axis: int = 1
    group: int = 1


@register("ShuffleChannels", since=1, attrs=ShuffleChannelsAttrs, category="movement")
class ShuffleChannels1:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        if attrs.group < 1:
            fail(f"ShuffleChannels needs group >= 1, got {attrs.group}")
        if x.shape is None:
            return [TensorSpec(x.etype, None)]
        if len(x.shape) == 0:
            fail("ShuffleChannels needs data of rank 1 or more, got a scalar")
        axis = normalize_axis(attrs.axis, len(x.shape), "ShuffleChannels axis")
        d = x.shape[axis]
        if d.is_static and d.value % attrs.group:
            fail(f"ShuffleChannels: dim {axis} ({d.value}) is not divisible by group {attrs.group}")
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x):
        axis = normalize_axis(attrs.axis, x.ndim, "ShuffleChannels axis")
        c, g = x.shape[axis], attrs.group
        if c % g:
            fail(f"ShuffleChannels: dim {axis} ({c}) is not divisible by group {g}")
        y = x.reshape(x.shape[:axis] + (g, c // g) + x.shape[axis + 1:])
        return (np.ascontiguousarray(np.swapaxes(y, axis, axis + 1)).reshape(x.shape),)


@register("Roll", since=7, attrs=NoAttrs, category="movement")
class Roll7:
    @staticmethod
    def infer(attrs, x: TensorSpec, shift: TensorSpec, axes: TensorSpec):
        check_integer(shift, "Roll shift (input 1)")
        check_integer(axes, "Roll axes (input 2)")
        for s, name in ((shift, "shift (input 1)"), (axes, "axes (input 2)")):
            if s.rank is not None and s.rank > 1:
                fail(f"Roll {name} must be a scalar or 1-D, got {format_shape(s.shape)}")
        if shift.rank == 1 and axes.shape is not None and shift.shape is not None:
            n_axes = 1 if axes.rank == 0 else axes.shape[0]
            if not shift.shape[0].compatible(n_axes):
                fail(f"Roll shift (input 1) {format_shape(shift.shape)} must be a scalar or as long "
                     f"as axes (input 2) {format_shape(axes.shape)}")
        vals = known_ints(axes)
        if vals is not None and x.rank is not None:
            for v in vals:
                normalize_axis(v, x.rank, "Roll axes value")
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x, shift, axes):
        ax = [normalize_axis(int(a), x.ndim, "Roll axes value") for a in np.asarray(axes).reshape(-1)]
        sh = [int(s) for s in np.asarray(shift).reshape(-1)]
        if len(sh) == 1:
            sh = sh * len(ax)
        if len(sh) != len(ax):
            fail(f"Roll shift (input 1) has {len(sh)} values but axes (input 2) has {len(ax)}")
        if not ax:
            return (x.copy(),)
        # A shift modulo the dim, so huge shifts cost nothing; repeated axes add up.
        total = {}
        for a, s in zip(ax, sh):
            total[a] = total.get(a, 0) + s
        axes_t = tuple(total)
        shifts = tuple(total[a] % x.shape[a] if x.shape[a] else 0 for a in axes_t)
        return (np.roll(x, shifts, axis=axes_t),)


# ---------------------------------------------------------------- ExtractImagePatches
# Spec page: movement/extract-image-patches-3.


@dataclass(frozen=True)
class ExtractImagePatchesAttrs:
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    rates: tuple[int, ...]
    auto_pad: Literal["valid", "same_upper", "same_lower"]


def _patch_geometry(attrs, size: int, i: int):
    """(out, pad_begin) along spatial axis i for an input of `size`."""
    eff = (attrs.sizes[i] - 1) * attrs.rates[i] + 1
    if attrs.auto_pad == "valid":
        out = max(-(-(size - eff + 1) // attrs.strides[i]), 0)
        return out, 0
    out = -(-size // attrs.strides[i])
    total = max((out - 1) * attrs.strides[i] + eff - size, 0)
    begin = total // 2 if attrs.auto_pad == "same_upper" else total - total // 2
    return out, begin


def _check_patch_attrs(attrs):
    for name in ("sizes", "strides", "rates"):
        v = getattr(attrs, name)
        if len(v) != 2:
            fail(f"ExtractImagePatches attribute {name} needs 2 values (rows, cols), got {list(v)}")
        if any(t < 1 for t in v):
            fail(f"ExtractImagePatches attribute {name} values must be >= 1, got {list(v)}")


@register("ExtractImagePatches", since=3, attrs=ExtractImagePatchesAttrs, category="movement")
class ExtractImagePatches3:
    """Output [N, size_rows * size_cols * C, out_rows, out_cols]: depth index
    (r * size_cols + c) * C + channel, as TensorFlow's extract_image_patches orders it."""

    @staticmethod
    def infer(attrs, x: TensorSpec):
        _check_patch_attrs(attrs)
        if x.rank is not None and x.rank != 4:
            fail(f"ExtractImagePatches needs 4-D data [N, C, H, W], got {format_shape(x.shape)}")
        if x.shape is None:
            return [TensorSpec(x.etype, (DYNAMIC,) * 4)]
        n, c, h, w = x.shape
        spatial = []
        for i, d in enumerate((h, w)):
            if d.is_static:
                spatial.append(Dim.of(_patch_geometry(attrs, d.value, i)[0]))
            else:
                lo = _patch_geometry(attrs, d.lo, i)[0]
                hi = None if d.hi is None else _patch_geometry(attrs, d.hi, i)[0]
                spatial.append(Dim(lo, hi))
        return [TensorSpec(x.etype, (n, c * (attrs.sizes[0] * attrs.sizes[1])) + tuple(spatial))]

    @staticmethod
    def run(attrs, x):
        _check_patch_attrs(attrs)
        n, c, h, w = x.shape
        (oh, ph), (ow, pw) = _patch_geometry(attrs, h, 0), _patch_geometry(attrs, w, 1)
        sr, sc = attrs.sizes
        check_alloc([n, sr * sc * c, oh, ow], x.dtype, "the ExtractImagePatches output")
        # Input row of patch row r, tap i: r * stride - pad + i * rate; outside reads 0.
        rows = (np.arange(oh)[:, None] * attrs.strides[0] - ph + np.arange(sr)[None, :] * attrs.rates[0])
        cols = (np.arange(ow)[:, None] * attrs.strides[1] - pw + np.arange(sc)[None, :] * attrs.rates[1])
        rin = (rows >= 0) & (rows < h)
        cin = (cols >= 0) & (cols < w)
        g = x[:, :, np.clip(rows, 0, max(h - 1, 0))[:, :, None, None], np.clip(cols, 0, max(w - 1, 0))[None, None, :, :]]
        # g: [N, C, oh, sr, ow, sc]
        mask = rin[:, :, None, None] & cin[None, None, :, :]
        g = np.where(mask, g, np.zeros((), x.dtype))
        y = g.transpose(0, 3, 5, 1, 2, 4).reshape(n, sr * sc * c, oh, ow)
        return (np.ascontiguousarray(y),)
