"""Activation functions and softmax.

Spec pages: activation/ (ReLU-1, Sigmoid-1, Clamp-1, Gelu-2, Gelu-7, Swish-4, HSwish-4,
SoftMax-1, SoftMax-8, LogSoftmax-5, Elu-1, Selu-1, HardSigmoid-1, HSigmoid-5, Mish-4, PRelu-1,
SoftPlus-4, SoftSign-9) and arithmetic/Tanh-1.

Float results are computed in f64 and rounded once to the input type. Integer inputs
(OpenVINO accepts them for most of these) compute in float and round to nearest, as the
CPU plugin does; Gelu and Swish reject them, as OpenVINO's validation does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from irrun.opkit import (
    ARITH, Dim, Fixed, NoAttrs, TensorSpec, as_dtype, broadcast_shapes, erf, etype_name, fail,
    float_unary, format_shape, is_static, make_unary, register, shape_dims, static_values,
    unary_apply, widened,
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
    if _name != "HSwish":       # (its class below takes the compiled loop)
        globals()[f"{_name}{_SINCE.get(_name, 1)}"] = make_unary(
            _name, _fn, "exact" if _name == "ReLU" else "round", ARITH,
            "arithmetic" if _name == "Tanh" else "activation", since=_SINCE.get(_name, 1))


def _relu_prepare(attrs, inputs, values):
    # float_unary's f32/f64 case: np.maximum with the 0 as x's type, as NumPy takes it.
    dtype = inputs[0].etype.dtype
    if dtype.char not in "fd":
        return None
    return np.maximum, (0, Fixed(np.zeros((), dtype)))


ReLU1.prepare = staticmethod(_relu_prepare)  # noqa: F821 (made by make_unary above)


@register("HSwish", since=4, attrs=NoAttrs, category="activation")
class HSwish4:
    """HSwish-4: element-wise, as make_unary's ops, f32/f64 through a compiled loop."""

    @staticmethod
    def infer(attrs, x: TensorSpec):
        if x.etype.kind not in ARITH:
            fail(f"HSwish does not accept element type {x.etype.name} (accepts {', '.join(ARITH)} types)")
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x):
        if x.dtype.char in "fd":
            # The compiled loop of ops/hswish_loop.py: the same f32/f64 steps in one pass.
            from .hswish_loop import hswish

            return (hswish(x),)
        return (unary_apply("HSwish", ACTIVATIONS["HSwish"], "round", x),)

    @staticmethod
    def prepare(attrs, inputs, values):
        # run's compiled loop, its constants and (for a tensor too small to split over
        # threads) its single call worked out once.
        x = inputs[0]
        if x.etype.dtype.char not in "fd" or not is_static(x.shape):
            return None
        from .hswish_loop import prepared

        return prepared(static_values(x.shape), x.etype.dtype), (0,)


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
        if x.dtype in (np.float32, np.float64):
            # The compiled loop of ops/gelu_loop.py: the same f64 formula element by element.
            from .gelu_loop import gelu_erf

            return (gelu_erf(x),)
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
        if attrs.approximation_mode == "erf":
            return Gelu2.run(attrs, x)
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

    @staticmethod
    def prepare(attrs, inputs, values):
        # float_unary's f32 case (Swish computes in f32), beta absent or a Const.
        if inputs[0].etype.dtype != np.float32 or (len(values) > 1 and values[1] is None):
            return None
        b = 1.0 if len(values) == 1 else \
            float(np.asarray(values[1], dtype=np.float64).reshape(-1)[0])

        def swish(x):
            y = x * sigmoid(b * x)
            return y if type(y) is np.ndarray and y.dtype == np.float32 else as_dtype(y, x.dtype)
        return swish, (0,)


# ------------------------------------------------------------------ SoftMax, LogSoftmax

# A last axis of at most this many elements takes its maximum and sum slice by slice:
# NumPy's reduction of a short innermost axis costs ten times its arithmetic (ssd_head's
# [2, 1216, 5] class scores: 110 us for the maximum, 60 for the sum, 20 and 15 by slices).
# The maximum is the same value either way; the slices add one after the other, which is
# NumPy's order for a sum of fewer than 8 terms, so the bits are the same
# (tests/test_ops_activation.py checks that against np.sum).
SHORT_AXIS = 7


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    # Subtracting the maximum keeps exp() in range (a slice of -inf stays NaN, like OpenVINO).
    n = x.shape[axis]
    if axis == x.ndim - 1 and 1 < n <= SHORT_AXIS:
        top = np.maximum(x[..., :1], x[..., 1:2])
        for k in range(2, n):
            np.maximum(top, x[..., k:k + 1], out=top)
        e = np.exp(x - top)
        total = e[..., :1] + e[..., 1:2]
        for k in range(2, n):
            total += e[..., k:k + 1]
        return e / total
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


# ------------------------------------------------------------------ Elu, Selu, HardSigmoid, PRelu, ...
# Spec pages: activation/elu-1, selu-1, hard-sigmoid-1, hsigmoid-5, mish-4, prelu-1,
# softplus-4, softsign-9. Like the ops above, floats compute in f64 and round once;
# integer inputs (OpenVINO accepts them for Elu, HSigmoid, HardSigmoid and PRelu) compute
# in f64 and round half to even, which is what the CPU plugin gives (e.g. Elu alpha=3 at -1
# gives -2, HSigmoid at 0 gives 0).


def _softplus(x: np.ndarray) -> np.ndarray:
    # log(1 + e^x) without overflow; OpenVINO switches to x above a threshold (about 13.8
    # for f32, where log1p(e^-x) is below half an ulp of x), which rounding to f32 reproduces.
    return np.logaddexp(0.0, x)


def _elu(x, alpha):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _scalar_input(name: str, what: str, x: TensorSpec, s: TensorSpec, ranks=(0, 1)) -> None:
    """An alpha/beta/lambda input: the data's element type and one element."""
    if s.etype != x.etype:
        fail(f"{name} {what} must have the data's element type {x.etype.name}, got {s.etype.name}")
    if s.shape is None:
        return
    if len(s.shape) not in ranks or any(d.is_static and d.value != 1 for d in s.shape):
        fail(f"{name} {what} must hold one element (a scalar or shape [1]), got shape "
             f"[{','.join(map(str, s.shape))}]")


def _scalar_value(a: np.ndarray, name: str, what: str) -> float:
    if a.size != 1:
        fail(f"{name} {what} must hold one element, got shape {list(a.shape)}")
    return float(np.asarray(a, dtype=np.float64).reshape(-1)[0])


def _not_bool(name: str, x: TensorSpec) -> None:
    if x.etype.kind not in ARITH:
        fail(f"{name} does not accept element type {x.etype.name} (accepts float, int, uint types)")


@dataclass(frozen=True)
class EluAttrs:
    alpha: float


@register("Elu", since=1, attrs=EluAttrs, category="activation")
class Elu1:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        _not_bool("Elu", x)
        return _same_type(x)

    @staticmethod
    def run(attrs, x):
        return (float_unary(lambda v: _elu(v, attrs.alpha), x, "Elu"),)


@register("Selu", since=1, attrs=NoAttrs, category="activation")
class Selu1:
    @staticmethod
    def infer(attrs, x: TensorSpec, alpha: TensorSpec, lambda_: TensorSpec):
        _float_only("Selu", x)
        _scalar_input("Selu", "alpha (input 1)", x, alpha)
        _scalar_input("Selu", "lambda (input 2)", x, lambda_)
        return _same_type(x)

    @staticmethod
    def run(attrs, x, alpha, lambda_):
        a = _scalar_value(alpha, "Selu", "alpha (input 1)")
        lam = _scalar_value(lambda_, "Selu", "lambda (input 2)")
        return (float_unary(lambda v: lam * _elu(v, a), x, "Selu"),)


@register("HardSigmoid", since=1, attrs=NoAttrs, category="activation")
class HardSigmoid1:
    @staticmethod
    def infer(attrs, x: TensorSpec, alpha: TensorSpec, beta: TensorSpec):
        _not_bool("HardSigmoid", x)
        _scalar_input("HardSigmoid", "alpha (input 1)", x, alpha)
        _scalar_input("HardSigmoid", "beta (input 2)", x, beta)
        return _same_type(x)

    @staticmethod
    def run(attrs, x, alpha, beta):
        a = _scalar_value(alpha, "HardSigmoid", "alpha (input 1)")
        b = _scalar_value(beta, "HardSigmoid", "beta (input 2)")
        return (float_unary(lambda v: np.clip(a * v + b, 0.0, 1.0), x, "HardSigmoid"),)


def _simple(name: str, since: int, fn, float_only: bool):
    def infer(attrs, x):
        (_float_only if float_only else _not_bool)(name, x)
        return _same_type(x)

    def run(attrs, x):
        return (float_unary(fn, x, name),)

    cls = type(f"{name}{since}", (), {"infer": staticmethod(infer), "run": staticmethod(run),
                                      "__doc__": f"{name}-{since}: element-wise."})
    return register(name, since=since, attrs=NoAttrs, category="activation")(cls)


HSigmoid5 = _simple("HSigmoid", 5, lambda v: np.clip(v + 3.0, 0.0, 6.0) / 6.0, float_only=False)


def _hsigmoid(x):
    """The kernel's f32/f64 HSigmoid in one buffer: np.clip(x + 3, 0, 6) / 6 as its maximum
    and minimum (x + 3 is never -0.0, where the two could differ; NaN stays NaN in both)."""
    y = x + 3.0
    np.maximum(y, 0.0, out=y)
    np.minimum(y, 6.0, out=y)
    y /= 6.0
    return y


def _hsigmoid_prepare(attrs, inputs, values):
    return (_hsigmoid, (0,)) if inputs[0].etype.dtype.char in "fd" else None


HSigmoid5.prepare = staticmethod(_hsigmoid_prepare)
Mish4 = _simple("Mish", 4, lambda v: v * np.tanh(_softplus(v)), float_only=True)
SoftPlus4 = _simple("SoftPlus", 4, _softplus, float_only=True)
SoftSign9 = _simple("SoftSign", 9, lambda v: v / (1.0 + np.abs(v)), float_only=True)


def _prelu_slope_shape(data_shape, slope_shape):
    """OpenVINO's rule: a 1-D slope as long as the channel dim (dim 1, or dim 0 of a 1-D
    input) applies per channel; any other slope broadcasts with numpy rules."""
    if data_shape is None or slope_shape is None:
        return slope_shape
    ch = 1 if len(data_shape) > 1 else 0
    if len(slope_shape) == 1 and len(data_shape) > 0 and slope_shape[0].is_static \
            and data_shape[ch].is_static and slope_shape[0].value == data_shape[ch].value:
        return tuple(slope_shape[0] if i == ch else Dim.of(1) for i in range(len(data_shape)))
    return slope_shape


@register("PRelu", since=1, attrs=NoAttrs, category="activation")
class PRelu1:
    @staticmethod
    def infer(attrs, x: TensorSpec, slope: TensorSpec):
        _not_bool("PRelu", x)
        if slope.etype != x.etype:
            fail(f"PRelu slope (input 1) must have the data's element type {x.etype.name}, "
                 f"got {slope.etype.name}")
        if slope.rank == 0:
            fail("PRelu slope (input 1) must have rank 1 or more, got a scalar")
        s = _prelu_slope_shape(x.shape, slope.shape)
        out = broadcast_shapes(x.shape, s, names=["data (input 0)", "slope (input 1)"])
        if out is not None and len(out) != len(x.shape):
            fail(f"PRelu slope (input 1) {format_shape(slope.shape)} has a higher rank than the "
                 f"data {format_shape(x.shape)}")
        return _same_type(x)

    @staticmethod
    def run(attrs, x, slope):
        s_shape = _prelu_slope_shape(shape_dims(x.shape), shape_dims(slope.shape))
        s = slope.reshape([d.value for d in s_shape])
        if np.broadcast_shapes(x.shape, s.shape) != x.shape:
            fail(f"PRelu slope (input 1) of shape {list(slope.shape)} does not broadcast to the "
                 f"data's shape {list(x.shape)}")
        if x.dtype.kind in "iu":
            with np.errstate(all="ignore"):     # the product wraps, as in C++
                return (as_dtype(np.where(x < 0, x * s, x), x.dtype),)
        name = etype_name(x)
        w, ws = widened(x, name), widened(s, name)
        # x * slope is one product, rounded once to the type: exact in f32 as in OpenVINO.
        return (as_dtype(np.where(w < 0, w * ws, w), x.dtype),)
