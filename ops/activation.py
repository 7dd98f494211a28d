"""Activation functions and softmax.

Spec pages: activation/ (ReLU-1, Sigmoid-1, Clamp-1, Gelu-2, Gelu-7, Swish-4, HSwish-4,
SoftMax-1, SoftMax-8, LogSoftmax-5) and arithmetic/Tanh-1.

Float results are computed in f64 and rounded once to the input type. Integer inputs
(OpenVINO accepts them for most of these) compute in float and round to nearest, as the
CPU plugin does; Gelu and Swish reject them, as OpenVINO's validation does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from irrun.opkit import (
    ARITH, NoAttrs, TensorSpec, as_dtype, erf, etype_name, fail, float_unary, make_unary,
    register, widened,
)


def sigmoid(x: np.ndarray) -> np.ndarray:
    # exp(-|x|) never overflows, so both branches stay finite.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


ACTIVATIONS = {
    "ReLU": lambda x: np.maximum(x, 0),  # a Python 0 keeps integer dtypes exact
    "Sigmoid": sigmoid,
    "Tanh": np.tanh,
    "HSwish": lambda x: x * np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0,
}
_SINCE = {"HSwish": 4}

for _name, _fn in ACTIVATIONS.items():
    globals()[f"{_name}{_SINCE.get(_name, 1)}"] = make_unary(
        _name, _fn, "exact" if _name == "ReLU" else "round", ARITH,
        "arithmetic" if _name == "Tanh" else "activation", since=_SINCE.get(_name, 1))


def _same_type(x: TensorSpec) -> list[TensorSpec]:
    return [TensorSpec(x.etype, x.shape)]


def _float_only(name: str, x: TensorSpec) -> None:
    if not x.etype.is_float:
        fail(f"{name} needs a floating-point input (f16, bf16, f32, f64), got {x.etype.name}")


# ------------------------------------------------------------------ Clamp

@dataclass(frozen=True)
class ClampAttrs:
    min: float
    max: float


@register("Clamp", since=1, attrs=ClampAttrs, category="activation")
class Clamp1:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        if x.etype.kind == "bool":
            fail("Clamp does not accept boolean input")
        if not attrs.min <= attrs.max:
            fail(f"Clamp needs min <= max, got min={attrs.min} and max={attrs.max}")
        return _same_type(x)

    @staticmethod
    def run(attrs, x):
        if x.dtype.kind in "iu":
            # The spec: ceil converts min and floor converts max to an integer type; the
            # bounds then saturate at the type's range.
            info = np.iinfo(x.dtype)
            lo = int(np.clip(np.ceil(attrs.min), info.min, info.max))
            hi = int(np.clip(np.floor(attrs.max), info.min, info.max))
            y = np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi))
            return (as_dtype(y, x.dtype),)
        # Float types: the bounds are converted to the input type first (T(min), T(max)).
        lo = np.asarray(attrs.min).astype(x.dtype)
        hi = np.asarray(attrs.max).astype(x.dtype)
        name = etype_name(x)
        w = widened(x, name)
        y = np.minimum(np.maximum(w, widened(lo, name)), widened(hi, name))
        return (as_dtype(y, x.dtype),)


# ------------------------------------------------------------------ Gelu, Swish

_SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)


def gelu(x: np.ndarray, mode: str) -> np.ndarray:
    if mode == "tanh":
        # 0.5 * (1 + tanh(z)) == sigmoid(2z), without the cancellation of 1 + tanh(z) for x << 0.
        return x * sigmoid(2.0 * _SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


@register("Gelu", since=2, attrs=NoAttrs, category="activation")
class Gelu2:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        _float_only("Gelu", x)
        return _same_type(x)

    @staticmethod
    def run(attrs, x):
        return (float_unary(lambda v: gelu(v, "erf"), x, "Gelu"),)


@dataclass(frozen=True)
class Gelu7Attrs:
    approximation_mode: Literal["erf", "tanh"] = "erf"


@register("Gelu", since=7, attrs=Gelu7Attrs, category="activation")
class Gelu7:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        _float_only("Gelu", x)
        return _same_type(x)

    @staticmethod
    def run(attrs, x):
        return (float_unary(lambda v: gelu(v, attrs.approximation_mode), x, "Gelu"),)


@register("Swish", since=4, attrs=NoAttrs, category="activation")
class Swish4:
    @staticmethod
    def infer(attrs, x: TensorSpec, beta: TensorSpec | None = None):
        _float_only("Swish", x)
        if beta is not None:
            if beta.etype != x.etype:
                fail(f"Swish beta (input 1) must have the input's type {x.etype.name}, got {beta.etype.name}")
            if beta.shape is not None and len(beta.shape) != 0 and \
                    not (len(beta.shape) == 1 and beta.shape[0].contains(1)):
                fail(f"Swish beta (input 1) must be a scalar, got shape {list(map(str, beta.shape))}")
        return _same_type(x)

    @staticmethod
    def run(attrs, x, beta=None):
        b = 1.0 if beta is None else float(np.asarray(beta, dtype=np.float64).reshape(-1)[0])
        return (float_unary(lambda v: v * sigmoid(b * v), x, "Swish"),)


# ------------------------------------------------------------------ SoftMax, LogSoftmax

def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    # Subtracting the maximum keeps exp() in range (a slice of -inf stays NaN, like OpenVINO).
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _softmax_axis(name: str, axis: int, x: TensorSpec, allow_negative: bool) -> None:
    if x.etype.kind == "bool":
        fail(f"{name} does not accept boolean input")
    if x.shape is None:
        return
    r = len(x.shape)
    lo = -r if allow_negative else 0
    if not lo <= axis < r:
        fail(f"{name} axis {axis} is out of range [{lo}, {r - 1}] for input rank {r}")


def _softmax_run(fn, x, axis, name):
    if not -x.ndim <= axis < x.ndim:   # only reachable when the rank was unknown
        fail(f"{name} axis {axis} is out of range for input of shape {list(x.shape)}")
    if x.size == 0:
        return x.copy()
    axis = axis + x.ndim if axis < 0 else axis
    return float_unary(lambda v: fn(v, axis), x, name)


@dataclass(frozen=True)
class AxisAttrs:
    axis: int = 1
    negative_axis: ClassVar[bool] = True    # SoftMax-8 and LogSoftmax-5 count from the end
    name: ClassVar[str] = "SoftMax"


@dataclass(frozen=True)
class SoftMax1Attrs(AxisAttrs):
    negative_axis: ClassVar[bool] = False   # SoftMax-1's axis lies in [0, rank - 1]
    name: ClassVar[str] = "SoftMax-1"


@register("SoftMax", since=(1, 8), attrs=(SoftMax1Attrs, AxisAttrs), category="activation")
class SoftMax:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        _softmax_axis(attrs.name, attrs.axis, x, allow_negative=attrs.negative_axis)
        return _same_type(x)

    @staticmethod
    def run(attrs, x):
        return (_softmax_run(softmax, x, attrs.axis, "SoftMax"),)


@register("LogSoftmax", since=5, attrs=AxisAttrs, category="activation")
class LogSoftmax5:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        _softmax_axis("LogSoftmax", attrs.axis, x, allow_negative=True)
        return _same_type(x)

    @staticmethod
    def run(attrs, x):
        return (_softmax_run(log_softmax, x, attrs.axis, "LogSoftmax"),)
