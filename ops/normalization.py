"""Normalization ops.

Spec pages: normalization/ (MVN-1 as MVN-2 (OpenVINO's opset2 MVN), MVN-6,
GroupNormalization-12, BatchNormInference-1, BatchNormInference-5, LRN-1, NormalizeL2-1,
GRN-1).

Numerics: every op computes in f64 and rounds once to the input type (f16, bf16, f32, f64);
means and variances are two-pass (mean first, then the mean of squared deviations), as
OpenVINO's reference kernels compute them.

BatchNormInference-1 takes its inputs as (gamma, beta, data, mean, variance), the order
OpenVINO's opset1 op and its IR files use; BatchNormInference-5 takes (data, gamma, beta,
mean, variance). The spec page for version 1 lists the version-5 order; the files win.
A variance below -epsilon is an error naming the channel (OpenVINO would return NaN).

NormalizeL2 with an empty axes list gives 1 for every non-zero element and 0 for zeros (the
spec: "each element is divided by itself"), as OpenVINO's reference kernel does.

LRN: the window along each axis covers [i - (size - 1) // 2, i + (size - 1) // 2], clipped to
the tensor: `size` elements for odd sizes, one fewer for even ones (the spec's pseudo-code
would take size + 1); OpenVINO's reference kernel and CPU plugin do this. See docs/ops.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from irrun.opkit import Dim, TensorSpec, as_dtype, check_rank, fail, format_shape, register

# ------------------------------------------------------------------ shared helpers

def _float_data(name: str, spec: TensorSpec, what: str = "data (input 0)") -> None:
    if not spec.etype.is_float:
        fail(f"{name} {what} must be floating-point (f16, bf16, f32, f64), got {spec.etype.name}")


def _axes(name: str, values, rank: int, what: str = "axes (input 1)",
          unique: bool = True) -> list[int]:
    """Axis values as sorted non-negative axes; out of range or repeated ones fail."""
    out = []
    for v in (int(a) for a in np.asarray(values).reshape(-1)):
        if not -rank <= v < rank:
            fail(f"{name} {what} value {v} is out of range [{-rank}, {rank - 1}] for data of rank {rank}")
        a = v + rank if v < 0 else v
        if a in out and unique:
            fail(f"{name} {what} repeats axis {v} (values must be unique)")
        out.append(a)
    return sorted(set(out))


def _check_axes_input(name: str, data: TensorSpec, axes: TensorSpec, scalar_ok: bool,
                      unique: bool = True) -> None:
    if not axes.etype.is_integer:
        fail(f"{name} axes (input 1) must have an integer element type, got {axes.etype.name}")
    if axes.shape is not None and (len(axes.shape) > 1 or (len(axes.shape) == 0 and not scalar_ok)):
        want = "a scalar or 1-D" if scalar_ok else "1-D"
        fail(f"{name} axes (input 1) must be {want}, got shape {format_shape(axes.shape)}")
    if data.shape is not None and axes.shape is not None and len(axes.shape) == 1:
        n = axes.shape[0]
        if n.lo > len(data.shape) and unique:
            fail(f"{name} axes (input 1) has {n} values but data has rank {len(data.shape)}")
    if data.shape is not None and axes.value is not None:
        _axes(name, axes.value, len(data.shape), unique=unique)


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def _same(x: TensorSpec) -> list[TensorSpec]:
    return [TensorSpec(x.etype, x.shape)]


def _per_channel(name: str, data: TensorSpec, *params: tuple[str, TensorSpec]) -> None:
    """Each parameter is 1-D with one value per channel (dim 1 of data), of data's type."""
    channels = data.shape[1] if data.shape is not None and len(data.shape) >= 2 else Dim()
    for what, p in params:
        if p.etype != data.etype:
            fail(f"{name} {what} must have data's element type {data.etype.name}, got {p.etype.name}")
        if p.shape is None:
            continue
        if len(p.shape) != 1:
            fail(f"{name} {what} must be 1-D, got shape {format_shape(p.shape)}")
        if channels.merge(p.shape[0]) is None:
            fail(f"{name} {what} has {p.shape[0]} values but data has {channels} channels "
                 f"(dim 1 of {format_shape(data.shape)})")


def _run_per_channel(name: str, x: np.ndarray, *params: tuple[str, np.ndarray]) -> None:
    for what, p in params:
        if p.ndim != 1 or p.shape[0] != x.shape[1]:
            fail(f"{name} {what} has shape {list(p.shape)} but data {list(x.shape)} has "
                 f"{x.shape[1]} channels")


def _channel_view(p: np.ndarray, ndim: int) -> np.ndarray:
    return _wide(p).reshape((1, -1) + (1,) * (ndim - 2))


# ------------------------------------------------------------------ MVN

def _mvn(x: np.ndarray, axes, normalize_variance: bool, eps: float, inside: bool) -> np.ndarray:
    axes = tuple(axes)
    if x.size == 0:
        return x.copy()
    if (x.dtype in (np.float32, np.float64) and axes
            and sorted(axes) == list(range(x.ndim - len(axes), x.ndim))):
        # Trailing axes: the compiled loop of ops/mvn_loop.py, row by row, in f64 as below.
        from .mvn_loop import mvn_rows

        length = math.prod(x.shape[x.ndim - len(axes):])
        rows = np.ascontiguousarray(x).reshape(x.size // length, length)
        return mvn_rows(rows, normalize_variance, eps, inside).reshape(x.shape)
    w = _wide(x)
    d = w - w.mean(axis=axes, keepdims=True) if axes else w - w
    if normalize_variance:
        var = np.mean(d * d, axis=axes, keepdims=True) if axes else d * d
        d = d / (np.sqrt(var + eps) if inside else np.sqrt(var) + eps)
    return as_dtype(d, x.dtype)


@dataclass(frozen=True)
class MVN2Attrs:
    eps: float
    normalize_variance: bool = True
    across_channels: bool = False
    reduction_axes: tuple[int, ...] = ()


def _mvn2_axes(attrs, rank: int) -> list[int]:
    # OpenVINO writes both across_channels and the reduction_axes it derived; when
    # reduction_axes is given it decides (across_channels only picks the default axes).
    if attrs.reduction_axes:
        return _axes("MVN", attrs.reduction_axes, rank, what="attribute reduction_axes")
    return list(range(1 if attrs.across_channels else 2, rank))


@register("MVN", since=2, attrs=MVN2Attrs, category="normalization")
class MVN2:
    @staticmethod
    def infer(attrs, data: TensorSpec) -> list[TensorSpec]:
        _float_data("MVN", data)
        if data.shape is not None:
            _mvn2_axes(attrs, len(data.shape))
        return _same(data)

    @staticmethod
    def run(attrs, data: np.ndarray) -> tuple[np.ndarray]:
        axes = _mvn2_axes(attrs, data.ndim)
        return (_mvn(data, axes, attrs.normalize_variance, attrs.eps, inside=True),)


@dataclass(frozen=True)
class MVN6Attrs:
    normalize_variance: bool
    eps: float
    eps_mode: Literal["inside_sqrt", "outside_sqrt"]


@register("MVN", since=6, attrs=MVN6Attrs, category="normalization")
class MVN6:
    @staticmethod
    def infer(attrs, data: TensorSpec, axes: TensorSpec) -> list[TensorSpec]:
        _float_data("MVN", data)
        _check_axes_input("MVN", data, axes, scalar_ok=False)
        return _same(data)

    @staticmethod
    def run(attrs, data: np.ndarray, axes: np.ndarray) -> tuple[np.ndarray]:
        if axes.ndim != 1:
            fail(f"MVN axes (input 1) must be 1-D, got shape {list(axes.shape)}")
        ax = _axes("MVN", axes, data.ndim)
        inside = attrs.eps_mode.lower() == "inside_sqrt"
        return (_mvn(data, ax, attrs.normalize_variance, attrs.eps, inside),)


# ------------------------------------------------------------------ GroupNormalization

@dataclass(frozen=True)
class GroupNormAttrs:
    num_groups: int
    epsilon: float


@register("GroupNormalization", since=12, attrs=GroupNormAttrs, category="normalization")
class GroupNormalization12:
    @staticmethod
    def infer(attrs, data: TensorSpec, scale: TensorSpec, bias: TensorSpec) -> list[TensorSpec]:
        _float_data("GroupNormalization", data)
        if data.shape is not None and len(data.shape) < 2:
            fail(f"GroupNormalization data (input 0) must have rank 2 or more (N, C, ...), "
                 f"got {format_shape(data.shape)}")
        if attrs.num_groups < 1:
            fail(f"GroupNormalization num_groups must be at least 1, got {attrs.num_groups}")
        _per_channel("GroupNormalization", data, ("scale (input 1)", scale), ("bias (input 2)", bias))
        if data.shape is not None:
            c = data.shape[1]
            if c.is_static and c.value % attrs.num_groups:
                fail(f"GroupNormalization: the {c.value} channels do not divide into "
                     f"num_groups={attrs.num_groups} groups")
        return _same(data)

    @staticmethod
    def run(attrs, data: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray]:
        _run_per_channel("GroupNormalization", data, ("scale (input 1)", scale), ("bias (input 2)", bias))
        n, c = data.shape[:2]
        g = attrs.num_groups
        if c % g:
            fail(f"GroupNormalization: the {c} channels do not divide into num_groups={g} groups")
        if data.size == 0:
            return (data.copy(),)
        w = _wide(data).reshape(n, g, -1)
        d = w - w.mean(axis=2, keepdims=True)
        y = d / np.sqrt(np.mean(d * d, axis=2, keepdims=True) + attrs.epsilon)
        y = y.reshape(data.shape) * _channel_view(scale, data.ndim) + _channel_view(bias, data.ndim)
        return (as_dtype(y, data.dtype),)


# ------------------------------------------------------------------ BatchNormInference

@dataclass(frozen=True)
class BatchNorm1Attrs:
    epsilon: float
    data_port: ClassVar[int] = 2     # opset1: (gamma, beta, data, mean, variance)


@dataclass(frozen=True)
class BatchNorm5Attrs:
    epsilon: float
    data_port: ClassVar[int] = 0     # opset5: (data, gamma, beta, mean, variance)


_BN_PARAMS = ("gamma", "beta", "mean", "variance")


def _bn_split(attrs, inputs):
    """(data, [(name, gamma), (name, beta), (name, mean), (name, variance)]) by port."""
    ports = [p for p in range(5) if p != attrs.data_port]
    return inputs[attrs.data_port], [(f"{n} (input {p})", inputs[p]) for n, p in zip(_BN_PARAMS, ports)]


@register("BatchNormInference", since=(1, 5), attrs=(BatchNorm1Attrs, BatchNorm5Attrs),
          category="normalization")
class BatchNormInference:
    @staticmethod
    def infer(attrs, in0: TensorSpec, in1: TensorSpec, in2: TensorSpec, in3: TensorSpec,
              in4: TensorSpec) -> list[TensorSpec]:
        data, params = _bn_split(attrs, (in0, in1, in2, in3, in4))
        _float_data("BatchNormInference", data, f"data (input {attrs.data_port})")
        if data.shape is not None and len(data.shape) < 2:
            fail(f"BatchNormInference data (input {attrs.data_port}) must have rank 2 or more, "
                 f"got {format_shape(data.shape)}")
        if attrs.epsilon < 0:
            fail(f"BatchNormInference epsilon must be >= 0, got {attrs.epsilon}")
        _per_channel("BatchNormInference", data, *params)
        return _same(data)

    @staticmethod
    def run(attrs, in0: np.ndarray, in1: np.ndarray, in2: np.ndarray, in3: np.ndarray,
            in4: np.ndarray) -> tuple[np.ndarray]:
        data, params = _bn_split(attrs, (in0, in1, in2, in3, in4))
        _run_per_channel("BatchNormInference", data, *params)
        gamma, beta, mean, var = (_channel_view(p, data.ndim) for _, p in params)
        if (var + attrs.epsilon < 0).any():
            bad = int(np.argmax((var + attrs.epsilon < 0).reshape(-1)))
            fail(f"BatchNormInference variance is {float(var.reshape(-1)[bad])} at channel {bad}: "
                 "variance + epsilon is negative", code="value")
        y = (_wide(data) - mean) / np.sqrt(var + attrs.epsilon) * gamma + beta
        return (as_dtype(y, data.dtype),)


# ------------------------------------------------------------------ LRN

@dataclass(frozen=True)
class LRNAttrs:
    alpha: float
    beta: float
    bias: float
    size: int


def _window_sum(sq: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Sum over [i - (size - 1) // 2, i + (size - 1) // 2] along axis, clipped (a cumulative sum)."""
    n = sq.shape[axis]
    before = after = (size - 1) // 2
    c = np.cumsum(sq, axis=axis)
    zero = np.zeros_like(np.take(c, [0], axis=axis))
    c = np.concatenate([zero, c], axis=axis)
    i = np.arange(n)
    hi = np.minimum(i + after + 1, n)
    lo = np.maximum(i - before, 0)
    return np.take(c, hi, axis=axis) - np.take(c, lo, axis=axis)


@register("LRN", since=1, attrs=LRNAttrs, category="normalization")
class LRN1:
    @staticmethod
    def infer(attrs, data: TensorSpec, axes: TensorSpec) -> list[TensorSpec]:
        _float_data("LRN", data)
        if attrs.size < 1:
            fail(f"LRN size must be a positive integer, got {attrs.size}")
        _check_axes_input("LRN", data, axes, scalar_ok=False)
        return _same(data)

    @staticmethod
    def run(attrs, data: np.ndarray, axes: np.ndarray) -> tuple[np.ndarray]:
        ax = _axes("LRN", axes, data.ndim)
        w = _wide(data)
        if w.size == 0:
            return (data.copy(),)
        # Square, then sum one axis at a time: the region is a box, so the sums separate.
        # Squares are small non-negative numbers: the cumulative sums lose nothing that
        # matters at f64 for the sizes a model has.
        s = w * w
        for a in ax:
            s = _window_sum(s, a, attrs.size)
        scale = attrs.alpha / float(attrs.size) ** len(ax)
        y = w / np.power(attrs.bias + scale * s, attrs.beta)
        return (as_dtype(y, data.dtype),)


# ------------------------------------------------------------------ NormalizeL2, GRN

@dataclass(frozen=True)
class NormalizeL2Attrs:
    eps: float
    eps_mode: Literal["add", "max"]


@register("NormalizeL2", since=1, attrs=NormalizeL2Attrs, category="normalization")
class NormalizeL21:
    @staticmethod
    def infer(attrs, data: TensorSpec, axes: TensorSpec) -> list[TensorSpec]:
        _float_data("NormalizeL2", data)
        _check_axes_input("NormalizeL2", data, axes, scalar_ok=True)
        return _same(data)

    @staticmethod
    def run(attrs, data: np.ndarray, axes: np.ndarray) -> tuple[np.ndarray]:
        ax = _axes("NormalizeL2", axes, data.ndim)
        w = _wide(data)
        if not ax:
            return (as_dtype(w != 0, data.dtype),)
        ss = np.sum(w * w, axis=tuple(ax), keepdims=True)
        ss = ss + attrs.eps if attrs.eps_mode.lower() == "add" else np.maximum(ss, attrs.eps)
        return (as_dtype(w / np.sqrt(ss), data.dtype),)


@dataclass(frozen=True)
class GRNAttrs:
    bias: float


@register("GRN", since=1, attrs=GRNAttrs, category="normalization")
class GRN1:
    @staticmethod
    def infer(attrs, data: TensorSpec) -> list[TensorSpec]:
        _float_data("GRN", data)
        check_rank(data, (2, 3, 4), "GRN data (input 0)")
        return _same(data)

    @staticmethod
    def run(attrs, data: np.ndarray) -> tuple[np.ndarray]:
        if not 2 <= data.ndim <= 4:
            fail(f"GRN data (input 0) must have rank 2, 3 or 4, got shape {list(data.shape)}")
        w = _wide(data)
        y = w / np.sqrt(np.sum(w * w, axis=1, keepdims=True) + attrs.bias)
        return (as_dtype(y, data.dtype),)

