"""Image ops: Interpolate-1, Interpolate-4, Interpolate-11 and the colour conversions
NV12toRGB-8, NV12toBGR-8, I420toRGB-8, I420toBGR-8 (spec pages: image/interpolate-1,
interpolate-4, interpolate-11, nv12-to-rgb-8, nv12-to-bgr-8, i420-to-rgb-8, i420-to-bgr-8).

Every mode is separable, so the kernel resamples one axis at a time with a [out, in] weight
matrix (nearest: an index gather), never looping over elements. Coordinates and weights are
computed in f32 with the formulas of OpenVINO's reference (so ties in the nearest modes fall
the same way); sums run in f32 (f64 for f64 data).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC, Dim, NoAttrs, TensorSpec, check_alloc, check_integer, elements, fail, format_shape,
    known_ints, register,
)

F32 = np.float32
Mode4 = Literal["nearest", "linear", "linear_onnx", "cubic"]
Mode11 = Literal["nearest", "linear", "linear_onnx", "cubic", "bilinear_pillow", "bicubic_pillow"]
Transform = Literal["half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn",
                    "align_corners"]
Nearest = Literal["round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"]


@dataclass(frozen=True)
class Interpolate1Attrs:
    axes: tuple[int, ...]
    mode: Literal["nearest", "linear", "cubic", "area", "linear_onnx"]
    align_corners: bool = False
    antialias: bool = False
    pads_begin: tuple[int, ...] = (0,)
    pads_end: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class Interpolate4Attrs:
    mode: Mode4
    shape_calculation_mode: Literal["sizes", "scales"]
    coordinate_transformation_mode: Transform = "half_pixel"
    nearest_mode: Nearest = "round_prefer_floor"
    antialias: bool = False
    pads_begin: tuple[int, ...] = (0,)
    pads_end: tuple[int, ...] = (0,)
    cube_coeff: float = -0.75
    v11: ClassVar[bool] = False


@dataclass(frozen=True)
class Interpolate11Attrs(Interpolate4Attrs):
    mode: Mode11 = "nearest"
    shape_calculation_mode: Literal["sizes", "scales"] = "sizes"
    v11: ClassVar[bool] = True


# ---------------------------------------------------------------- one axis


def _source_coords(mode: str, n_out: int, n_in: int, scale) -> np.ndarray:
    """The input coordinate (f32) of every output position along one axis."""
    x = np.arange(n_out, dtype=F32)
    s = F32(scale)
    if s == F32(1) or n_out == n_in:       # OpenVINO's reference: the identity then
        return x
    with np.errstate(all="ignore"):
        if mode == "pytorch_half_pixel":
            return (x + F32(0.5)) / s - F32(0.5) if n_out > 1 else np.zeros(n_out, F32)
        if mode == "asymmetric":
            return x / s
        if mode == "tf_half_pixel_for_nn":
            return (x + F32(0.5)) / s
        if mode == "align_corners":
            if n_out == 1:
                return np.zeros(1, F32)
            return x * F32(n_in - 1) / F32(n_out - 1)
        return (x + F32(0.5)) / s - F32(0.5)          # half_pixel


def _round_half_away(c: np.ndarray) -> np.ndarray:
    return np.where(c >= 0, np.floor(c + F32(0.5)), np.ceil(c - F32(0.5)))


def _nearest_index(c: np.ndarray, mode: str, downsample: bool, n_in: int) -> np.ndarray:
    if mode == "round_prefer_ceil":
        i = _round_half_away(c)
    elif mode == "floor":
        i = np.floor(c)
    elif mode == "ceil":
        i = np.ceil(c)
    elif mode == "simple":
        i = np.ceil(c) if downsample else np.trunc(c)
    else:   # round_prefer_floor: a true half goes down
        i = np.where(c == np.trunc(c) + F32(0.5), np.floor(c), _round_half_away(c))
    return np.clip(i, 0, n_in - 1).astype(np.int64)


def _cubic_coeffs(s: np.ndarray, a: float) -> np.ndarray:
    """The four Keys weights for fractional offsets s (OpenVINO's formulation), [len, 4]."""
    a = F32(a)
    s = np.abs(s).astype(F32)
    one, two = F32(1), F32(2)
    c0 = ((a * (s + one) - 5 * a) * (s + one) + 8 * a) * (s + one) - 4 * a
    c1 = ((a + two) * s - (a + 3)) * s * s + one
    c2 = ((a + two) * (one - s) - (a + 3)) * (one - s) * (one - s) + one
    c3 = ((a * (two - s) - 5 * a) * (two - s) + 8 * a) * (two - s) - 4 * a
    return np.stack([c0, c1, c2, c3], axis=1)


def _pillow_weights(n_in: int, n_out: int, support: float, kernel, a: float) -> np.ndarray:
    """Pillow's resampling coefficients (Resample.c's precompute_coeffs), as a [out, in] matrix."""
    scale = n_in / n_out
    fscale = max(scale, 1.0)
    sup = support * fscale
    center = (np.arange(n_out) + 0.5) * scale
    xmin = np.maximum((center - sup + 0.5).astype(np.int64), 0)
    xmax = np.minimum((center + sup + 0.5).astype(np.int64), n_in)
    j = np.arange(n_in)[None, :]
    inside = (j >= xmin[:, None]) & (j < xmax[:, None])
    w = np.where(inside, kernel((j - center[:, None] + 0.5) / fscale, a), 0.0)
    total = w.sum(axis=1, keepdims=True)
    return np.where(total != 0, w / np.where(total == 0, 1, total), w)


def _bilinear(x, a):
    x = np.abs(x)
    return np.where(x < 1, 1 - x, 0.0)


def _bicubic(x, a):
    x = np.abs(x)
    return np.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                    np.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, 0.0))


def _axis_weights(attrs, mode, n_in, n_out, scale, antialias_a):
    """The [n_out, n_in] weight matrix of one axis."""
    check_alloc([n_out, n_in], np.float64, "the Interpolate weights of one axis")
    w = np.zeros((n_out, n_in), dtype=F32)
    rows = np.arange(n_out)
    if mode in ("bilinear_pillow", "bicubic_pillow"):
        if mode == "bilinear_pillow":
            return _pillow_weights(n_in, n_out, 1.0, _bilinear, attrs.cube_coeff)
        return _pillow_weights(n_in, n_out, 2.0, _bicubic, attrs.cube_coeff)
    c = _source_coords(attrs.coordinate_transformation_mode, n_out, n_in, scale)
    if mode == "linear_onnx":
        c = np.clip(c, F32(0), F32(n_in - 1))
        i1 = np.minimum(c.astype(np.int64), n_in - 1)
        i2 = np.minimum(i1 + 1, n_in - 1)
        d1 = np.abs(c - i1.astype(F32))
        d2 = np.abs(c - i2.astype(F32))
        same = i1 == i2
        d1 = np.where(same, F32(0.5), d1)
        d2 = np.where(same, F32(0.5), d2)
        np.add.at(w, (rows, i1), d2)         # a point's weight is its distance to the other one
        np.add.at(w, (rows, i2), d1)
        return w
    if mode == "cubic":
        base = np.floor(c).astype(np.int64)
        coeff = _cubic_coeffs(c - base.astype(F32), attrs.cube_coeff)
        for k in range(4):      # the 4 taps of the cubic kernel (a fixed small number)
            np.add.at(w, (rows, np.clip(base + k - 1, 0, n_in - 1)), coeff[:, k])
        return w
    # linear: a triangle filter, widened by 1/a when anti-aliasing a downsample
    a = F32(antialias_a)
    r = 2 if scale > 1.0 else int(np.ceil(F32(2) / a))
    centre = _round_half_away(c).astype(np.int64)
    j = np.arange(n_in)[None, :]
    near = (j >= centre[:, None] - r) & (j <= centre[:, None] + r)
    dz = c[:, None] - j.astype(F32)
    tri = np.maximum(F32(0), F32(1) - np.abs(a * dz)).astype(F32)
    return np.where(near, a * tri, F32(0)).astype(F32)


def _apply(x: np.ndarray, axis: int, w: np.ndarray) -> np.ndarray:
    """y[..., o, ...] = sum_i w[o, i] x[..., i, ...] along `axis`."""
    y = np.tensordot(x, w.astype(x.dtype, copy=False), axes=([axis], [1]))
    return np.moveaxis(y, -1, axis)


# An axis of more than _DENSE_MAX_IN inputs whose weight rows have at most
# _MAX_GATHERED_TAPS non-zero weights is resampled tap by tap, each tap a gather along the
# axis times its weights: for linear_onnx's 2 and cubic's 4 taps far less than the dense
# product. Shorter axes keep the product, which costs less there than the gathers (a
# gather along the last axis moves one element at a time: [1, 128, 8, 8] to 16x16 took
# 160 us as taps, 95 as products).
_MAX_GATHERED_TAPS = 8
_DENSE_MAX_IN = 32
# Plans of axes with at most this many weights are kept (lru_cache) for the next run.
_CACHED_MAX_WEIGHTS = 1 << 20


def _axis_plan(attrs, mode, n_in, n_out, scale, antialias_a, linear_norm):
    """How one axis is resampled: None where its weights are the identity (the axis is left
    as it is: a 320x320 image to its own size took 4.6 ms as two dense [320, 320]
    products), else ("taps", index [k, n_out], weights [k, n_out]) with k the most non-zero
    weights of a row, or ("dense", w [n_out, n_in]). Made once per axis geometry."""
    make = _cached_plan if n_in * n_out <= _CACHED_MAX_WEIGHTS else _make_plan
    return make(attrs, mode, n_in, n_out, scale, antialias_a, linear_norm)


def _make_plan(attrs, mode, n_in, n_out, scale, antialias_a, linear_norm):
    w = _axis_weights(attrs, mode, n_in, n_out, scale, antialias_a)
    if linear_norm:
        total = w.sum(axis=1, keepdims=True)
        # A row without any weight gives 0, as OpenVINO's wsum == 0 branch does.
        w = np.where(total == 0, F32(0), w / np.where(total == 0, F32(1), total))
    if n_in == n_out and np.array_equal(w, np.eye(n_in, dtype=w.dtype)):
        return None
    nonzero = w != 0
    k = int(nonzero.sum(axis=1).max(initial=0))
    if k > _MAX_GATHERED_TAPS or n_in <= _DENSE_MAX_IN:
        w.flags.writeable = False
        return "dense", w
    # Each row's non-zero columns first, in ascending order; the rest read column 0 by 0.
    order = np.argsort(~nonzero, axis=1, kind="stable")[:, :max(k, 1)]
    weights = np.take_along_axis(w, order, axis=1)
    index, weights = np.ascontiguousarray(order.T), np.ascontiguousarray(weights.T)
    index.flags.writeable = weights.flags.writeable = False
    return "taps", index, weights


_cached_plan = functools.lru_cache(maxsize=64)(_make_plan)


def _resample(y: np.ndarray, axis: int, plan) -> np.ndarray:
    """y resampled along `axis` by an _axis_plan."""
    if plan is None:
        return y
    if plan[0] == "dense":
        return _apply(y, axis, plan[1])
    _, index, weights = plan
    bshape = [1] * y.ndim
    bshape[axis] = index.shape[1]
    out = None
    for i, wk in zip(index, weights):
        term = np.take(y, i, axis=axis)
        term *= wk.astype(y.dtype, copy=False).reshape(bshape)
        if out is None:
            out = term
        else:
            out += term
    return out


def interpolate(attrs, mode: str, x: np.ndarray, axes, out_sizes, scales, antialias: bool):
    """Resample the padded x along `axes` to `out_sizes`, with the given per-axis scales."""
    out_dtype = x.dtype
    work = np.float64 if x.dtype == np.float64 else F32
    if mode == "nearest":
        y = x
        for axis, n_out, s in zip(axes, out_sizes, scales):
            n_in = y.shape[axis]
            c = _source_coords(attrs.coordinate_transformation_mode, n_out, n_in, s)
            idx = _nearest_index(c, attrs.nearest_mode, F32(s) < 1, n_in)
            y = np.take(y, idx, axis=axis)
        return np.ascontiguousarray(y)
    y = x.astype(work, copy=False)
    downsample = any(F32(s) < 1 for s in scales)
    linear_norm = mode == "linear"
    order = list(zip(axes, out_sizes, scales))
    if mode in ("bilinear_pillow", "bicubic_pillow"):
        order = order[::-1]            # Pillow resamples the second (W) axis first
    for axis, n_out, s in order:
        n_in = y.shape[axis]
        a = F32(s) if (linear_norm and antialias and downsample) else F32(1)
        y = _resample(y, axis, _axis_plan(attrs, mode, n_in, n_out, s, a, linear_norm))
        if mode in ("bilinear_pillow", "bicubic_pillow") and out_dtype.kind in "iu":
            info = np.iinfo(out_dtype)
            # The reference rounds each Pillow pass half away from zero; OpenVINO 2026.4's
            # CPU plugin differs by 1 on some u8 pixels (in neither pass order).
            y = np.clip(_round_half_away(y), info.min, info.max)
    if out_dtype.kind in "iu":
        # Integer results round half to even and saturate, as the CPU plugin gives for u8
        # images (the reference truncates linear_onnx/cubic and rounds linear half away).
        info = np.iinfo(out_dtype)
        y = np.clip(np.rint(y), info.min, info.max)
    return np.ascontiguousarray(y).astype(out_dtype)


# ---------------------------------------------------------------- shapes


def _pads(attrs, rank: int):
    def fit(p):
        p = list(p)
        return (p + [0] * rank)[:rank]
    pb, pe = fit(attrs.pads_begin), fit(attrs.pads_end)
    if any(v < 0 for v in pb + pe):
        fail(f"Interpolate pads must be non-negative, got pads_begin={attrs.pads_begin} "
             f"pads_end={attrs.pads_end}")
    return pb, pe


def _scaled_dim(d: Dim, scale: float) -> Dim:
    def f(v):
        # In f32, with the small epsilon OpenVINO adds (0.299999 * 10 gives 3, 0.29999 * 10 gives 2).
        return int(np.floor(F32(F32(v) * F32(scale)) + F32(1e-5)))
    return Dim(f(d.lo), None if d.hi is None else f(d.hi))


def _axes_of(axes: TensorSpec | None, rank: int | None, n_values: int | None):
    """The interpolated axes: the axes input's values, or all axes when it is absent."""
    if axes is None:
        if rank is None:
            return None
        return list(range(rank))
    check_integer(axes, "Interpolate axes")
    vals = known_ints(axes)
    if vals is None:
        return None
    if rank is not None:
        for i, v in enumerate(vals):
            if not -rank <= v < rank:
                fail(f"Interpolate axes has {v} at position {i}, out of range for rank {rank}")
        vals = [v + rank if v < 0 else v for v in vals]
    if len(set(vals)) != len(vals):
        fail(f"Interpolate axes must be distinct, got {vals}")
    return vals


def _infer(attrs, x: TensorSpec, sizes: TensorSpec | None, scales: TensorSpec | None,
           axes_list, mode: str):
    if x.etype.kind == "bool":
        fail("Interpolate does not accept boolean data")
    if x.shape is None:
        return [TensorSpec(x.etype, None)]
    rank = len(x.shape)
    pb, pe = _pads(attrs, rank)
    padded = [d + (b + e) for d, b, e in zip(x.shape, pb, pe)]
    if axes_list is None:
        return [TensorSpec(x.etype, (DYNAMIC,) * rank)]
    n = len(axes_list)
    out = list(padded)
    if mode == "sizes":
        el = elements(sizes)
        if sizes.shape is not None and sizes.rank == 1 and sizes.shape[0].is_static \
                and sizes.shape[0].value != n:
            fail(f"Interpolate sizes has {sizes.shape[0].value} values but there are {n} axes")
        for i, axis in enumerate(axes_list):
            if el is not None and len(el) == n:
                d = el[i]
                if d.hi is not None and d.hi < 0:
                    fail(f"Interpolate sizes has the negative value {d.hi} at position {i}")
                out[axis] = d if d.lo >= 0 else DYNAMIC
            else:
                out[axis] = DYNAMIC
    else:
        vals = None if scales.value is None else [float(v) for v in scales.value.reshape(-1)]
        if vals is not None and len(vals) != n:
            fail(f"Interpolate scales has {len(vals)} values but there are {n} axes")
        for i, axis in enumerate(axes_list):
            if vals is None:
                out[axis] = DYNAMIC
            else:
                if not vals[i] > 0:
                    fail(f"Interpolate scales must be positive, got {vals[i]} at position {i}")
                out[axis] = _scaled_dim(padded[axis], vals[i])
    return [TensorSpec(x.etype, tuple(out))]


def _run(attrs, mode: str, x, sizes, scales, axes, shape_mode: str, antialias: bool):
    rank = x.ndim
    pb, pe = _pads(attrs, rank)
    if axes is None:
        axes = list(range(rank))
    else:
        axes = [int(v) for v in np.asarray(axes).reshape(-1)]
        for i, v in enumerate(axes):
            if not -rank <= v < rank:
                fail(f"Interpolate axes has {v} at position {i}, out of range for rank {rank}")
        axes = [v + rank if v < 0 else v for v in axes]
        if len(set(axes)) != len(axes):
            fail(f"Interpolate axes must be distinct, got {axes}")
    padded_shape = [s + b + e for s, b, e in zip(x.shape, pb, pe)]
    if shape_mode == "sizes":
        out_sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
        if len(out_sizes) != len(axes):
            fail(f"Interpolate sizes has {len(out_sizes)} values but there are {len(axes)} axes")
        if any(v < 0 for v in out_sizes):
            fail(f"Interpolate sizes must be non-negative, got {out_sizes}")
        sc = [float(F32(o) / F32(padded_shape[a])) if padded_shape[a] else 0.0
              for o, a in zip(out_sizes, axes)]
    else:
        sc = [float(v) for v in np.asarray(scales, dtype=np.float64).reshape(-1)]
        if len(sc) != len(axes):
            fail(f"Interpolate scales has {len(sc)} values but there are {len(axes)} axes")
        if any(not s > 0 for s in sc):
            fail(f"Interpolate scales must be positive, got {sc}")
        out_sizes = [_scaled_dim(Dim.of(padded_shape[a]), s).lo for a, s in zip(axes, sc)]
    out_shape = list(padded_shape)
    for a, o in zip(axes, out_sizes):
        out_shape[a] = o
    check_alloc(out_shape, x.dtype, "the Interpolate output")
    check_alloc(padded_shape, x.dtype, "the padded Interpolate input")
    if mode in ("bilinear_pillow", "bicubic_pillow") and len(axes) != 2:
        fail(f"Interpolate {mode} resamples exactly two axes (H, W), got axes {axes}")
    if any(pb) or any(pe):
        x = np.pad(x, list(zip(pb, pe)))
    if 0 in out_shape or x.size == 0:
        if x.size == 0 and 0 not in out_shape:
            fail(f"Interpolate cannot resample the empty input {list(x.shape)} to {out_shape}")
        return np.zeros(out_shape, x.dtype)
    a_, o_, s_ = (list(axes), out_sizes, sc)
    return interpolate(attrs, mode, x, a_, o_, s_, antialias)


# ---------------------------------------------------------------- the op versions


@register("Interpolate", since=(4, 11), attrs=(Interpolate4Attrs, Interpolate11Attrs),
          category="image")
class Interpolate4:
    """Interpolate-4: data, sizes, scales, axes (optional). Interpolate-11: data,
    scales_or_sizes, axes (optional); adds the Pillow modes."""

    @staticmethod
    def infer(attrs, x: TensorSpec, *rest: TensorSpec):
        sizes, scales, axes = _inputs(attrs, rest)
        if sizes is not None:
            check_integer(sizes, "Interpolate sizes")
        if attrs.shape_calculation_mode == "scales" and scales is not None and not scales.etype.is_float:
            fail(f"Interpolate scales must be of a floating-point type, got {scales.etype.name}")
        given = sizes if attrs.shape_calculation_mode == "sizes" else scales
        if given is None:
            fail(f"Interpolate with shape_calculation_mode='{attrs.shape_calculation_mode}' "
                 f"needs the {attrs.shape_calculation_mode} input")
        if given.rank is not None and given.rank != 1:
            fail(f"Interpolate {attrs.shape_calculation_mode} must be 1-D, got {format_shape(given.shape)}")
        n = given.shape[0].value if given.shape is not None else None
        axes_list = _axes_of(axes, x.rank, n)
        return _infer(attrs, x, sizes, scales, axes_list, attrs.shape_calculation_mode)

    @staticmethod
    def run(attrs, x, *rest):
        sizes, scales, axes = _inputs(attrs, rest)
        return (_run(attrs, attrs.mode, x, sizes, scales, axes, attrs.shape_calculation_mode,
                     attrs.antialias),)


def _inputs(attrs, rest):
    """(sizes, scales, axes) of either version's inputs."""
    if attrs.v11:
        if not 1 <= len(rest) <= 2:
            fail(f"Interpolate-11 takes 2 or 3 inputs, got {1 + len(rest)}")
        given, axes = rest[0], rest[1] if len(rest) > 1 else None
        if attrs.shape_calculation_mode == "sizes":
            return given, None, axes
        return None, given, axes
    if not 2 <= len(rest) <= 3:
        fail(f"Interpolate-4 takes 3 or 4 inputs, got {1 + len(rest)}")
    return rest[0], rest[1], rest[2] if len(rest) > 2 else None


@dataclass(frozen=True)
class _V1As4:
    """Interpolate-1 seen as Interpolate-4, as OpenVINO's reference converts it."""
    coordinate_transformation_mode: str
    nearest_mode: str = "simple"
    cube_coeff: float = -0.75
    pads_begin: tuple[int, ...] = (0,)
    pads_end: tuple[int, ...] = (0,)


def _v1_as_v4(attrs, rank: int):
    if attrs.mode == "area":
        # OpenVINO has no kernel for it either: its reference and CPU plugin refuse 'area'.
        fail("Interpolate-1 mode='area' is not computable (OpenVINO refuses it too)")
    mode = attrs.mode
    if mode == "linear":
        if rank > 5:
            fail(f"Interpolate-1 mode='linear' takes data of rank at most 5, got rank {rank}")
        mode = "linear_onnx" if rank < 5 else "linear"
    ctm = "asymmetric"
    if attrs.align_corners:
        ctm = "align_corners"
    elif mode in ("linear_onnx", "linear") and not any(attrs.pads_begin) and not any(attrs.pads_end) \
            and not (rank == 4 and sorted(attrs.axes) == [2, 3]):
        ctm = "half_pixel"
    return mode, _V1As4(ctm, pads_begin=attrs.pads_begin, pads_end=attrs.pads_end)


@register("Interpolate", since=1, attrs=Interpolate1Attrs, category="image")
class Interpolate1:
    """Interpolate-1: data and the target sizes of attribute `axes`."""

    @staticmethod
    def infer(attrs, x: TensorSpec, sizes: TensorSpec):
        check_integer(sizes, "Interpolate target_spatial_shape (input 1)")
        if x.rank is not None:
            _v1_as_v4(attrs, x.rank)
            for a in attrs.axes:
                if not 0 <= a < x.rank:
                    fail(f"Interpolate-1 attribute axes has {a}, out of range for rank {x.rank}")
        if len(set(attrs.axes)) != len(attrs.axes):
            fail(f"Interpolate-1 attribute axes must be distinct, got {list(attrs.axes)}")
        return _infer(attrs, x, sizes, None, list(attrs.axes), "sizes")

    @staticmethod
    def run(attrs, x, sizes):
        mode, a4 = _v1_as_v4(attrs, x.ndim)
        return (_run(a4, mode, x, sizes, None, np.array(attrs.axes), "sizes", attrs.antialias),)


# ---------------------------------------------------------------- colour conversions
# Spec pages: image/nv12-to-rgb-8, nv12-to-bgr-8, i420-to-rgb-8, i420-to-bgr-8.


def _yuv_to_rgb(y, u, v, dtype, bgr: bool) -> np.ndarray:
    """BT.601 limited range, in f32 as OpenVINO's reference: integers round half away from
    zero, every type clamps to [0, 255]."""
    c = y.astype(F32) - F32(16)
    d = u.astype(F32) - F32(128)
    e = v.astype(F32) - F32(128)
    r = F32(1.164) * c + F32(1.596) * e
    g = F32(1.164) * c - F32(0.391) * d - F32(0.813) * e
    b = F32(1.164) * c + F32(2.018) * d
    out = np.stack([b, g, r] if bgr else [r, g, b], axis=-1)
    if np.dtype(dtype).kind in "iu":
        out = _round_half_away(out)
    return np.clip(out, F32(0), F32(255)).astype(dtype)


def _color_type(what: str, specs) -> None:
    first = specs[0]
    if first.etype.name not in ("u8", "f32", "f16", "bf16", "f64"):
        fail(f"{what} takes u8 or floating-point planes, got {first.etype.name}")
    for i, s in enumerate(specs[1:], 1):
        if s.etype != first.etype:
            fail(f"{what} planes must share one element type: input 0 is {first.etype.name}, "
                 f"input {i} is {s.etype.name}")
        if s.rank is not None and s.rank != 4:
            fail(f"{what} input {i} must be 4-D [N, H, W, C], got {format_shape(s.shape)}")
    if first.rank is not None and first.rank != 4:
        fail(f"{what} input 0 must be 4-D [N, H, W, 1], got {format_shape(first.shape)}")


def _color_infer(what: str, planes: int, specs) -> list[TensorSpec]:
    _color_type(what, specs)
    y = specs[0]
    if y.shape is None:
        return [TensorSpec(y.etype, (DYNAMIC, DYNAMIC, DYNAMIC, Dim.of(3)))]
    n, h, w, c = y.shape
    if c.is_static and c.value != 1:
        fail(f"{what} Y plane must have 1 channel, got {c.value}")
    if len(specs) == 1:
        if h.is_static and h.value % 3:
            fail(f"{what} single-plane height {h.value} is not divisible by 3 (H * 3 / 2 rows)")
        h = Dim(h.lo * 2 // 3, None if h.hi is None else h.hi * 2 // 3)
    for what_dim, d in (("height", h), ("width", w)):
        if d.is_static and d.value % 2:
            fail(f"{what} image {what_dim} must be even, got {d.value}")
    want_c = 2 if planes == 2 else 1
    for i, s in enumerate(specs[1:], 1):
        if s.shape is None:
            continue
        sn, sh, sw, sc = s.shape
        if (sh.is_static and h.is_static and sh.value * 2 != h.value) or \
                (sw.is_static and w.is_static and sw.value * 2 != w.value) or \
                (sc.is_static and sc.value != want_c) or not sn.compatible(n):
            fail(f"{what} input {i} must be [N, H/2, W/2, {want_c}] for a {h}x{w} image, "
                 f"got {format_shape(s.shape)}")
    return [TensorSpec(y.etype, (n, h, w, Dim.of(3)))]


def _color_run(what: str, nv12: bool, bgr: bool, arrays) -> np.ndarray:
    y = arrays[0]
    n, h, w, _ = y.shape
    if len(arrays) == 1:
        if h % 3:
            fail(f"{what} single-plane height {h} is not divisible by 3")
        h = h * 2 // 3
        flat = y.reshape(n, -1)
        yp = flat[:, :h * w].reshape(n, h, w)
        if nv12:
            uv = flat[:, h * w:].reshape(n, h // 2, w // 2, 2)
            u, v = uv[..., 0], uv[..., 1]
        else:
            q = (h // 2) * (w // 2)
            u = flat[:, h * w:h * w + q].reshape(n, h // 2, w // 2)
            v = flat[:, h * w + q:].reshape(n, h // 2, w // 2)
    else:
        yp = y[..., 0]
        if nv12:
            u, v = arrays[1][..., 0], arrays[1][..., 1]
        else:
            u, v = arrays[1][..., 0], arrays[2][..., 0]
    if h % 2 or w % 2:
        fail(f"{what} image height and width must be even, got {h}x{w}")
    up = lambda p: np.repeat(np.repeat(p, 2, axis=1), 2, axis=2)   # noqa: E731
    return _yuv_to_rgb(yp, up(u), up(v), y.dtype, bgr)


def _color_op(name: str, nv12: bool, bgr: bool):
    planes = 2 if nv12 else 3

    def infer(attrs, *specs):
        if len(specs) not in (1, planes):
            fail(f"{name} takes 1 or {planes} inputs, got {len(specs)}")
        return _color_infer(name, planes, specs)

    def run(attrs, *arrays):
        return (_color_run(name, nv12, bgr, arrays),)

    cls = type(f"{name}8", (), {"infer": staticmethod(infer), "run": staticmethod(run),
                                "__doc__": f"{name}-8: one plane [N, H*3/2, W, 1] or separate planes."})
    return register(name, since=8, attrs=NoAttrs, category="image")(cls)


NV12toRGB8 = _color_op("NV12toRGB", nv12=True, bgr=False)
NV12toBGR8 = _color_op("NV12toBGR", nv12=True, bgr=True)
I420toRGB8 = _color_op("I420toRGB", nv12=False, bgr=False)
I420toBGR8 = _color_op("I420toBGR", nv12=False, bgr=True)


# ---------------------------------------------------------------- GridSample
# Spec page: image/grid-sample-9.


@dataclass(frozen=True)
class GridSampleAttrs:
    align_corners: bool = False
    mode: Literal["bilinear", "bicubic", "nearest"] = "bilinear"
    padding_mode: Literal["zeros", "border", "reflection"] = "zeros"


def _grid_taps(attrs, idx: np.ndarray, size: int):
    """Padding applied to integer tap coordinates (as OpenVINO's reference does): the index to
    read and whether the tap reads data (zeros padding reads 0 outside)."""
    if attrs.padding_mode == "zeros":
        return np.clip(idx, 0, size - 1), (idx >= 0) & (idx < size)
    if attrs.padding_mode == "border":
        return np.clip(idx, 0, size - 1), None
    if attrs.align_corners:
        period = 1 if size == 1 else 2 * (size - 1)
        r = np.abs(idx) % period
        return np.where(r >= size, period - r, r), None
    period = 2 * size
    r = np.mod(idx, period)
    return np.where(r >= size, period - 1 - r, r), None


def _gather(data, attrs, yi, xi):
    """data[n, :, yi, xi] for index arrays [N, Ho, Wo] -> [N, C, Ho, Wo], padded per mode."""
    n, c, h, w = data.shape
    y, my = _grid_taps(attrs, yi, h)
    x, mx = _grid_taps(attrs, xi, w)
    b = np.arange(n).reshape(n, 1, 1)
    v = data[b, :, y, x]                       # [N, Ho, Wo, C]
    if my is not None:
        v = np.where((my & mx)[..., None], v, 0)
    return np.moveaxis(v, -1, 1)


@register("GridSample", since=9, attrs=GridSampleAttrs, category="image")
class GridSample9:
    @staticmethod
    def infer(attrs, data: TensorSpec, grid: TensorSpec):
        if data.rank is not None and data.rank != 4:
            fail(f"GridSample data must be 4-D [N, C, H, W], got {format_shape(data.shape)}")
        if grid.rank is not None and grid.rank != 4:
            fail(f"GridSample grid must be 4-D [N, H_out, W_out, 2], got {format_shape(grid.shape)}")
        if not grid.etype.is_float:
            fail(f"GridSample grid must be of a floating-point type, got {grid.etype.name}")
        if data.etype.kind in ("bool", "string"):
            fail(f"GridSample does not accept {data.etype.name} data")
        d = data.shape if data.shape is not None else (DYNAMIC,) * 4
        g = grid.shape if grid.shape is not None else (DYNAMIC,) * 4
        if g[3].is_static and g[3].value != 2:
            fail(f"GridSample grid's last dim must be 2 (x, y), got {g[3].value}")
        batch = d[0].merge(g[0])
        if batch is None:
            fail(f"GridSample data batch {d[0]} and grid batch {g[0]} differ")
        return [TensorSpec(data.etype, (batch, d[1], g[1], g[2]))]

    @staticmethod
    def run(attrs, data, grid):
        n, c, h, w = data.shape
        if grid.shape[0] != n or grid.shape[3] != 2:
            fail(f"GridSample grid must be [{n}, H_out, W_out, 2], got {list(grid.shape)}")
        check_alloc([n, c, grid.shape[1], grid.shape[2]], data.dtype, "the GridSample output")
        out_shape = (n, c, grid.shape[1], grid.shape[2])
        if not h or not w:
            # An image with no pixels: every tap falls outside it. Zeros padding reads 0 there;
            # border and reflection have no pixel to repeat (OpenVINO returns uninitialised memory).
            if 0 in out_shape or attrs.padding_mode == "zeros":
                return (np.zeros(out_shape, data.dtype),)
            fail(f"GridSample {attrs.padding_mode} padding needs an image with pixels, got data "
                 f"{list(data.shape)} (H or W is 0)", code="value")
        t = np.float64 if grid.dtype == np.float64 else F32
        work = np.float64 if data.dtype == np.float64 else F32
        src = data.astype(work, copy=False) if data.dtype.kind != "f" or data.dtype == np.float16 else data
        if attrs.mode == "bilinear" and h and w and grid.dtype == src.dtype == t:
            # The compiled loop (ops/grid_sample_loop.py): the same steps in the same types.
            from .grid_sample_loop import bilinear, finite

            if not finite(grid):
                fail("GridSample grid holds a NaN or infinite coordinate")
            out = bilinear(src, grid, attrs.padding_mode, attrs.align_corners)
            if data.dtype.kind in "iu":
                out = np.rint(out)
            return (out.astype(data.dtype, copy=False),)
        gx, gy = grid[..., 0].astype(t), grid[..., 1].astype(t)
        one, two = t(1), t(2)
        if attrs.align_corners:
            xd, yd = (gx + one) * (t(w) - one) / two, (gy + one) * (t(h) - one) / two
        else:
            xd, yd = ((gx + one) * t(w) - one) / two, ((gy + one) * t(h) - one) / two
        if not np.isfinite(xd).all() or not np.isfinite(yd).all():
            fail("GridSample grid holds a NaN or infinite coordinate")
        if attrs.mode == "nearest":
            out = _gather(src, attrs, np.rint(yd).astype(np.int64), np.rint(xd).astype(np.int64))
        else:
            y0, x0 = np.floor(yd), np.floor(xd)
            dy = (yd - y0).astype(work)[:, None]
            dx = (xd - x0).astype(work)[:, None]
            y0, x0 = y0.astype(np.int64), x0.astype(np.int64)
            if attrs.mode == "bilinear":
                q0 = (1 - dx) * _gather(src, attrs, y0, x0) + dx * _gather(src, attrs, y0, x0 + 1)
                q1 = (1 - dx) * _gather(src, attrs, y0 + 1, x0) + dx * _gather(src, attrs, y0 + 1, x0 + 1)
                out = dy * q1 + (1 - dy) * q0
            else:
                cy = _cubic_coeffs(dy.reshape(-1), -0.75).reshape(dy.shape + (4,))
                cx = _cubic_coeffs(dx.reshape(-1), -0.75).reshape(dx.shape + (4,))
                out = 0
                for j in range(4):          # the 4 x 4 taps of the bicubic kernel
                    row = 0
                    for i in range(4):
                        row = row + cx[..., i] * _gather(src, attrs, y0 + j - 1, x0 + i - 1)
                    out = out + cy[..., j] * row
        if data.dtype.kind in "iu":
            out = np.rint(out)
        # (astype keeps the gathers' channel-last layout: C-contiguous first.)
        return (np.ascontiguousarray(out).astype(data.dtype, copy=False),)


# ---------------------------------------------------------------- Col2Im
# Spec page: movement/col2im-15.


@dataclass(frozen=True)
class Col2ImAttrs:
    strides: tuple[int, ...] = (1, 1)
    dilations: tuple[int, ...] = (1, 1)
    pads_begin: tuple[int, ...] = (0, 0)
    pads_end: tuple[int, ...] = (0, 0)


def _col2im_attrs(attrs):
    for name in ("strides", "dilations", "pads_begin", "pads_end"):
        v = getattr(attrs, name)
        if len(v) != 2:
            fail(f"Col2Im attribute {name} needs 2 values (height, width), got {list(v)}")
    if any(v < 1 for v in attrs.strides + attrs.dilations):
        fail(f"Col2Im strides and dilations must be >= 1, got {list(attrs.strides)} and {list(attrs.dilations)}")
    if any(v < 0 for v in attrs.pads_begin + attrs.pads_end):
        fail("Col2Im pads must be non-negative")


def _col2im_blocks(attrs, out, kernel):
    counts = []
    for d in range(2):
        span = out[d] + attrs.pads_begin[d] + attrs.pads_end[d] - attrs.dilations[d] * (kernel[d] - 1) - 1
        counts.append(span // attrs.strides[d] + 1 if span >= 0 else 0)
    return counts


@register("Col2Im", since=15, attrs=Col2ImAttrs, category="movement")
class Col2Im15:
    @staticmethod
    def infer(attrs, data: TensorSpec, output_size: TensorSpec, kernel_size: TensorSpec):
        _col2im_attrs(attrs)
        for s, name in ((output_size, "output_size (input 1)"), (kernel_size, "kernel_size (input 2)")):
            if s.etype.name not in ("i32", "i64"):
                fail(f"Col2Im {name} must be i32 or i64, got {s.etype.name}")
            if s.shape is not None and (len(s.shape) != 1 or (s.shape[0].is_static and s.shape[0].value != 2)):
                fail(f"Col2Im {name} must hold 2 values, got shape {format_shape(s.shape)}")
        if data.rank is not None and data.rank not in (2, 3):
            fail(f"Col2Im data must be 2-D or 3-D, got {format_shape(data.shape)}")
        out, k = known_ints(output_size), known_ints(kernel_size)
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        batched = len(data.shape) == 3
        lead = (data.shape[0],) if batched else ()
        ch = data.shape[-2]
        if k is not None:
            if any(v < 1 for v in k):
                fail(f"Col2Im kernel_size must be positive, got {k}")
            kk = k[0] * k[1]
            if ch.is_static and ch.value % kk:
                fail(f"Col2Im data dim {len(data.shape) - 2} ({ch.value}) is not divisible by "
                     f"prod(kernel_size) = {kk}")
            c = Dim(-(-ch.lo // kk), None if ch.hi is None else ch.hi // kk)
        else:
            c = DYNAMIC
        if out is not None and k is not None:
            blocks = _col2im_blocks(attrs, out, k)
            L = data.shape[-1]
            if L.is_static and L.value != blocks[0] * blocks[1]:
                fail(f"Col2Im data has {L.value} blocks but output_size {out} with kernel {k} "
                     f"makes {blocks[0]} x {blocks[1]} = {blocks[0] * blocks[1]}")
        spatial = tuple(Dim.of(v) for v in out) if out is not None else (DYNAMIC, DYNAMIC)
        return [TensorSpec(data.etype, lead + (c,) + spatial)]

    @staticmethod
    def run(attrs, data, output_size, kernel_size):
        _col2im_attrs(attrs)
        out = [int(v) for v in np.asarray(output_size).reshape(-1)]
        k = [int(v) for v in np.asarray(kernel_size).reshape(-1)]
        if len(out) != 2 or len(k) != 2 or min(out) < 1 or min(k) < 1:
            fail(f"Col2Im output_size and kernel_size must hold 2 positive values, got {out} and {k}")
        x = data if data.ndim == 3 else data[None]
        n, ck, L = x.shape
        kk = k[0] * k[1]
        if ck % kk:
            fail(f"Col2Im data has {ck} rows, not divisible by prod(kernel_size) = {kk}")
        bh, bw = _col2im_blocks(attrs, out, k)
        if L != bh * bw:
            fail(f"Col2Im data has {L} blocks but output_size {out} with kernel {k} makes {bh * bw}")
        c = ck // kk
        check_alloc([n, c] + out, data.dtype, "the Col2Im output")
        hp, wp = out[0] + attrs.pads_begin[0] + attrs.pads_end[0], out[1] + attrs.pads_begin[1] + attrs.pads_end[1]
        # Padded output coordinates of every (kernel row, kernel col, block) element; one
        # bincount sums the overlaps (no loop over taps).
        ki, kj = np.divmod(np.arange(kk), k[1])
        li, lj = np.divmod(np.arange(L), max(bw, 1))
        y = li[None, :] * attrs.strides[0] + ki[:, None] * attrs.dilations[0]     # [kk, L]
        xx = lj[None, :] * attrs.strides[1] + kj[:, None] * attrs.dilations[1]
        flat = (y * wp + xx)[None, None]                                          # [1, 1, kk, L]
        base = (np.arange(n * c) * (hp * wp)).reshape(n, c, 1, 1)
        idx = (base + flat).reshape(-1)
        acc = np.bincount(idx, weights=x.reshape(n, c, kk, L).astype(np.float64).reshape(-1),
                          minlength=n * c * hp * wp).reshape(n, c, hp, wp)
        acc = acc[:, :, attrs.pads_begin[0]:attrs.pads_begin[0] + out[0],
                  attrs.pads_begin[1]:attrs.pads_begin[1] + out[1]]
        if data.dtype.kind in "iu":
            acc = np.rint(acc)
        res = acc.astype(data.dtype)
        return (res if data.ndim == 3 else res[0],)
