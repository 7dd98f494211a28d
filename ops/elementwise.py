"""Element-wise ops: the binary arithmetic, comparison and logical families, Select, and
the simple unary math ops.

Spec pages: arithmetic/ (Add-1, Subtract-1, Multiply-1, Divide-1, Maximum-1, Minimum-1,
Power-1, SquaredDifference-1, FloorMod-1, Mod-1, Abs-1, Negative-1, Sqrt-1, Exp-1, Log-1,
Floor-1, Ceiling-1, Erf-1, Sign-1, Sin-1, Cos-1, Tan-1, Asin-1, Acos-1, Atan-1, Sinh-1,
Cosh-1, Asinh-3 (opset4), Acosh-3 (opset4), Atanh-3 (opset4), Round-5, CumSum-3), comparison/ (Equal-1, NotEqual-1, Less-1,
LessEqual-1, Greater-1, GreaterEqual-1), logical/ (LogicalAnd-1, LogicalOr-1,
LogicalXor-1, LogicalNot-1, and Xor-1: opset1's older name of LogicalXor, without a spec
page), condition/Select-1, and broadcast_rules (numpy and none; pdpd is reported as
unsupported).

Comparisons take any element type, strings included (compared by code point, which is
the order of their UTF-8 bytes), as OpenVINO's type rules do; its CPU plugin has no string
comparison kernel. LogicalNot takes any element type as OpenVINO does (x == 0, in x's
type); LogicalAnd/Or/Xor take booleans only, as OpenVINO requires.

Numerics: results keep the input element type exactly. Maximum/Minimum propagate NaN (the
spec is silent; the CPU plugin's answer depends on the operand order). Integer arithmetic wraps like the
C++ types (OpenVINO's reference kernels do; its CPU plugin saturates u8, so tests stay in
range). f16/bf16 compute in f32 and round once, as the CPU plugin does.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    check_arrays_broadcast,
    ARITH,
    add_elements,
    NoAttrs,
    TensorSpec,
    as_dtype,
    check_integer,
    check_rank,
    erf,
    etype_name,
    fail,
    first_position,
    known_ints,
    make_unary,
    normalize_axis,
    output_shape,
    register,
    is_static,
    same_etype,
    static_values,
    widened,
)

# ------------------------------------------------------------------ shape and type rules


# ------------------------------------------------------------------ numeric helpers

# ------------------------------------------------------------------ binary family

@dataclass(frozen=True)
class BroadcastAttrs:
    auto_broadcast: Literal["none", "numpy", "pdpd"] = "numpy"


@dataclass(frozen=True)
class DivideAttrs:
    auto_broadcast: Literal["none", "numpy", "pdpd"] = "numpy"
    m_pythondiv: bool = True


def _int_divide(a, b, attrs):
    zero = b == 0
    if zero.any():
        pos = first_position(zero)
        fail(f"integer division by zero: input 1 is 0 at position {pos}")
    if attrs.m_pythondiv:
        return np.floor_divide(a, b)
    # C++ truncation: the floor quotient, one closer to zero where the signs differ and
    # the division is inexact.
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


def _int_mod(floored: bool):
    """Integer FloorMod (the sign of the divisor, as Python's %) and Mod (the sign of the
    dividend, as C's %); division by zero is undefined in the spec: irrun refuses it."""
    def kernel(a, b, attrs):
        a, b = np.broadcast_arrays(a, b)
        zero = b == 0
        if zero.any():
            pos = first_position(zero)
            fail(f"integer modulo by zero: input 1 is 0 at position {pos}")
        return np.remainder(a, b) if floored else np.fmod(a, b)
    return kernel


def _float_floor_mod(a, b):
    # C's fmod, then moved into the divisor's sign: exact, unlike a - floor(a / b) * b.
    r = np.fmod(a, b)
    fix = (r != 0) & ((r < 0) != (b < 0))
    return np.where(fix, r + b, r)


def _int_power(a, b, attrs):
    """Integer power by repeated squaring (wraps like C++); negative exponents follow
    std::pow then conversion: 1 -> 1, -1 -> +-1, |base| > 1 -> 0, base 0 -> error."""
    a, b = np.broadcast_arrays(a, b)
    neg = b < 0 if b.dtype.kind == "i" else np.zeros(b.shape, bool)
    if (neg & (a == 0)).any():
        pos = first_position(neg & (a == 0))
        fail(f"0 raised to a negative power (input 1 is {b[tuple(pos)]} at position {pos})")
    e = np.where(neg, 0, b).astype(np.uint64)
    result = np.ones(a.shape, a.dtype)
    base = a.copy()
    while e.any():
        odd = (e & 1).astype(bool)
        result = np.where(odd, result * base, result)
        base = base * base
        e >>= np.uint64(1)
    if neg.any():
        odd_exp = (b % 2) != 0
        neg_val = np.where(a == 1, 1, np.where(a == -1, np.where(odd_exp, -1, 1), 0))
        result = np.where(neg, neg_val.astype(a.dtype), result)
    return result


def _float_or_int(float_fn, int_fn):
    def kernel(a, b, attrs):
        if a.dtype.kind in "iu":
            return int_fn(a, b, attrs)
        return float_fn(a, b)
    return kernel


# Element kinds a comparison accepts: every kind (OpenVINO's comparison ops check none).
ANY = ARITH + ("bool", "string")

# name -> (kernel(a, b, attrs), output kind: "same" | "bool", accepted input kinds)
BINARY = {
    "Add": (lambda a, b, _: np.add(a, b), "same", ARITH),
    "Subtract": (lambda a, b, _: np.subtract(a, b), "same", ARITH),
    "Multiply": (lambda a, b, _: np.multiply(a, b), "same", ARITH),
    "Divide": (_float_or_int(np.true_divide, _int_divide), "same", ARITH),
    "Maximum": (lambda a, b, _: np.maximum(a, b), "same", ARITH),   # NaN propagates
    "Minimum": (lambda a, b, _: np.minimum(a, b), "same", ARITH),
    "Power": (_float_or_int(np.power, _int_power), "same", ARITH),
    "SquaredDifference": (lambda a, b, _: np.square(np.subtract(a, b)), "same", ARITH),
    "FloorMod": (_float_or_int(_float_floor_mod, _int_mod(True)), "same", ARITH),
    "Mod": (_float_or_int(np.fmod, _int_mod(False)), "same", ARITH),
    "Equal": (lambda a, b, _: np.equal(a, b), "bool", ANY),
    "NotEqual": (lambda a, b, _: np.not_equal(a, b), "bool", ANY),
    "Less": (lambda a, b, _: np.less(a, b), "bool", ANY),
    "LessEqual": (lambda a, b, _: np.less_equal(a, b), "bool", ANY),
    "Greater": (lambda a, b, _: np.greater(a, b), "bool", ANY),
    "GreaterEqual": (lambda a, b, _: np.greater_equal(a, b), "bool", ANY),
    "LogicalAnd": (lambda a, b, _: np.logical_and(a, b), "bool", ("bool",)),
    "LogicalOr": (lambda a, b, _: np.logical_or(a, b), "bool", ("bool",)),
    "LogicalXor": (lambda a, b, _: np.logical_xor(a, b), "bool", ("bool",)),
    "Xor": (lambda a, b, _: np.logical_xor(a, b), "bool", ("bool",)),
}
# What BINARY's kernel computes for two float arrays, where that is one ufunc.
FLOAT_UFUNCS = {"Add": np.add, "Subtract": np.subtract, "Multiply": np.multiply,
                "Divide": np.true_divide, "Maximum": np.maximum, "Minimum": np.minimum,
                "Power": np.power}
LOGICAL = frozenset(("LogicalAnd", "LogicalOr", "LogicalXor", "Xor"))


def binary_infer(name: str, attrs, a: TensorSpec, b: TensorSpec) -> list[TensorSpec]:
    _, out_kind, kinds = BINARY[name]
    et = same_etype(a, b)
    if et.kind not in kinds:
        fail(f"{name} does not accept element type {et.name} (accepts {', '.join(kinds)} types)")
    shape = output_shape(attrs.auto_broadcast, a, b)
    out = TensorSpec.make("boolean" if out_kind == "bool" else et, shape)
    if name == "Add":
        out = add_elements(a, b, out)    # shape arithmetic: x.shape[2] + 1
    return [out]


def binary_run(name: str, attrs, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    # Per call this is most of an Add's time on a small map (MobileNet has 42), so the
    # usual case skips what it can: equal shapes need no broadcast check, a result of the
    # right type no conversion. Overflow and 0/0 warnings are silenced by the executor
    # (and by folding and inference) for the whole run, not here.
    kernel, out_kind, _ = BINARY[name]
    if a.shape != b.shape:
        check_arrays_broadcast(attrs.auto_broadcast, a, b)
    dtype = np.bool_ if out_kind == "bool" else a.dtype
    if a.dtype.char in "fd":
        # f32/f64: nothing to widen; the arithmetic ones are their ufunc for floats.
        ufunc = FLOAT_UFUNCS.get(name)
        y = ufunc(a, b) if ufunc is not None else kernel(a, b, attrs)
    else:
        et = etype_name(a)
        y = kernel(widened(a, et), widened(b, et), attrs)
    if type(y) is np.ndarray and y.dtype == dtype:
        return (y,)
    return (as_dtype(y, dtype),)


class _Shaped:
    """A static shape where check_arrays_broadcast reads an array's."""

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape


# What BINARY's kernel computes for two arrays of one integer type (widened() keeps
# them), and for two arrays of any type it does not widen (not f16/bf16), where that is
# one ufunc whose result has the op's type.
INT_UFUNCS = {"Add": np.add, "Subtract": np.subtract, "Multiply": np.multiply,
              "Maximum": np.maximum, "Minimum": np.minimum}
BOOL_UFUNCS = {"Equal": np.equal, "NotEqual": np.not_equal, "Less": np.less,
               "LessEqual": np.less_equal, "Greater": np.greater,
               "GreaterEqual": np.greater_equal, "LogicalAnd": np.logical_and,
               "LogicalOr": np.logical_or, "LogicalXor": np.logical_xor, "Xor": np.logical_xor}


def binary_prepare(name: str, attrs, a: TensorSpec, b: TensorSpec):
    """binary_run where it is one ufunc (irrun.opkit.prepared): the arithmetic ops on
    f32/f64 and on integers, the comparisons and logical ops on any type but f16/bf16 and
    strings; the broadcast checked once for static shapes, for others by the shape rule,
    run again on the real shapes (numpy or none broadcasting, as binary_run checks)."""
    if b.etype != a.etype:
        return None
    char, kind = a.etype.dtype.char, a.etype.dtype.kind
    if char in "fd":
        ufunc = FLOAT_UFUNCS.get(name) or BOOL_UFUNCS.get(name)
    elif kind in "iu":
        ufunc = INT_UFUNCS.get(name) or BOOL_UFUNCS.get(name)
    elif kind == "b":
        ufunc = BOOL_UFUNCS.get(name)
    else:
        ufunc = None
    if ufunc is None:
        return None
    if is_static(a.shape) and is_static(b.shape):
        sa, sb = static_values(a.shape), static_values(b.shape)
        if sa != sb:
            check_arrays_broadcast(attrs.auto_broadcast, _Shaped(sa), _Shaped(sb))
    elif attrs.auto_broadcast not in ("numpy", "none"):
        return None
    return ufunc, (0, 1)


def _make_binary(name: str, attrs_cls=BroadcastAttrs, category="arithmetic"):
    def infer(attrs, a, b):
        return binary_infer(name, attrs, a, b)

    def run(attrs, a, b):
        return binary_run(name, attrs, a, b)

    def prepare(attrs, inputs, values):
        return binary_prepare(name, attrs, *inputs)

    cls = type(f"{name}1", (), {"infer": staticmethod(infer), "run": staticmethod(run),
                                "prepare": staticmethod(prepare),
                                "__doc__": f"{name}-1: element-wise, with auto_broadcast."})
    return register(name, since=1, attrs=attrs_cls, category=category)(cls)


for _name in BINARY:
    _category = ("logical" if _name in LOGICAL else
                 "comparison" if BINARY[_name][1] == "bool" else "arithmetic")
    globals()[f"{_name}1"] = _make_binary(_name, DivideAttrs if _name == "Divide" else BroadcastAttrs,
                                          _category)


@register("LogicalNot", since=1, attrs=NoAttrs, category="logical")
class LogicalNot1:
    # The spec asks for booleans; OpenVINO takes any type and gives x == 0 in that type
    # (NaN -> 0), on the CPU plugin and in its reference alike: irrun follows.
    @staticmethod
    def infer(attrs, x: TensorSpec):
        if x.etype.kind == "string":
            fail("LogicalNot does not accept element type string")
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x):
        return (as_dtype(np.logical_not(x), x.dtype),)


@dataclass(frozen=True)
class SelectAttrs:
    auto_broadcast: Literal["none", "numpy", "pdpd"] = "numpy"


@register("Select", since=1, attrs=SelectAttrs, category="condition")
class Select1:
    @staticmethod
    def infer(attrs, cond: TensorSpec, then: TensorSpec, else_: TensorSpec):
        if cond.etype.kind != "bool":
            fail(f"Select needs a boolean condition (input 0), got {cond.etype.name}")
        et = same_etype(then, else_, names=("then (input 1)", "else (input 2)"))
        names = ["cond", "then", "else"]
        return [TensorSpec(et, output_shape(attrs.auto_broadcast, cond, then, else_, names=names))]

    @staticmethod
    def run(attrs, cond, then, else_):
        if attrs.auto_broadcast == "none" and not (cond.shape == then.shape == else_.shape):
            fail("auto_broadcast='none' needs equal shapes, got "
                 f"{list(cond.shape)}, {list(then.shape)} and {list(else_.shape)}")
        try:
            y = np.where(cond, then, else_)
        except ValueError:
            fail(f"shapes do not broadcast (numpy rules): cond {list(cond.shape)}, "
                 f"then {list(then.shape)} and else {list(else_.shape)}")
        return (as_dtype(y, then.dtype),)

    @staticmethod
    def prepare(attrs, inputs, values):
        # np.where, the broadcast the rule checks (numpy rules; none: equal shapes), its
        # result of the inputs' one type (rank >= 1: an ndarray).
        if attrs.auto_broadcast not in ("numpy", "none") or inputs[1].etype != inputs[2].etype:
            return None
        return np.where, (0, 1, 2)


# ------------------------------------------------------------------ unary family

UNARY: dict[str, tuple[Callable, str, tuple[str, ...]]] = {
    "Abs": (np.abs, "exact", ARITH),
    "Negative": (np.negative, "exact", ARITH),
    "Sign": (np.sign, "exact", ARITH),
    "Floor": (np.floor, "exact", ARITH),
    "Ceiling": (np.ceil, "exact", ARITH),
    "Sqrt": (np.sqrt, "round", ARITH),
    "Exp": (np.exp, "round", ARITH),
    "Log": (np.log, "round", ARITH),
    "Erf": (erf, "round", ARITH),
    "Sin": (np.sin, "round", ARITH),
    "Cos": (np.cos, "round", ARITH),
    "Tan": (np.tan, "round", ARITH),
    "Asin": (np.arcsin, "round", ARITH),
    "Acos": (np.arccos, "round", ARITH),
    "Atan": (np.arctan, "round", ARITH),
    "Sinh": (np.sinh, "round", ARITH),
    "Cosh": (np.cosh, "round", ARITH),
}


def _atanh(x: np.ndarray) -> np.ndarray:
    """atanh; on integers the spec's rule: <= -1 gives the type's minimum, >= 1 its
    maximum (atanh(0) = 0 is the only other integer)."""
    if x.dtype.kind not in "iu":
        return np.arctanh(x)
    info = np.iinfo(x.dtype)
    return np.where(x >= 1, info.max, np.where(x <= -1, info.min, 0)).astype(x.dtype)


# The hyperbolic inverses are version 3 of the op, first held by opset4.
UNARY_V4 = {
    "Asinh": (np.arcsinh, "round", ARITH),
    "Acosh": (np.arccosh, "round", ARITH),
    "Atanh": (_atanh, "exact", ARITH),
}


for _name, (_fn, _mode, _kinds) in UNARY.items():
    globals()[f"{_name}1"] = make_unary(_name, _fn, _mode, _kinds, "arithmetic")
for _name, (_fn, _mode, _kinds) in UNARY_V4.items():
    globals()[f"{_name}4"] = make_unary(_name, _fn, _mode, _kinds, "arithmetic", since=4)


@dataclass(frozen=True)
class RoundAttrs:
    mode: Literal["half_to_even", "half_away_from_zero"] = "half_to_even"


def _round_half_away(x: np.ndarray) -> np.ndarray:
    # trunc, then one step away from zero when the dropped fraction is at least a half;
    # floor(|x| + 0.5) would misround 0.49999999999999994 (the sum rounds up to 1).
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):     # inf - inf: NaN, and inf stays inf
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


@register("Round", since=5, attrs=RoundAttrs, category="arithmetic")
class Round5:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        if x.etype.kind not in ARITH:
            fail(f"Round does not accept element type {x.etype.name} (accepts {', '.join(ARITH)} types)")
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x):
        if x.dtype.kind in "iu":
            return (x.copy(),)          # integers are already integral
        w = widened(x, etype_name(x))   # f16/bf16 values are exact in f32
        y = np.rint(w) if attrs.mode == "half_to_even" else _round_half_away(w)
        return (as_dtype(y, x.dtype),)


@dataclass(frozen=True)
class CumSumAttrs:
    exclusive: bool = False
    reverse: bool = False


def _cumsum_axis(axis: TensorSpec | None, rank: int | None) -> int | None:
    if axis is None:
        return 0
    check_integer(axis, "CumSum axis (input 1)")
    if axis.etype.name not in ("i32", "i64"):
        fail(f"CumSum axis (input 1) must be i32 or i64, got {axis.etype.name}")
    check_rank(axis, (0,), "CumSum axis (input 1)")
    values = known_ints(axis)
    if values is None or rank is None:
        return None
    return normalize_axis(values[0], rank, "CumSum axis (input 1)")


@register("CumSum", since=3, attrs=CumSumAttrs, category="arithmetic")
class CumSum3:
    @staticmethod
    def infer(attrs, x: TensorSpec, axis: TensorSpec | None = None):
        if x.etype.kind not in ARITH:
            fail(f"CumSum does not accept element type {x.etype.name} (accepts {', '.join(ARITH)} types)")
        if x.rank == 0:
            fail("CumSum input 0 must have rank >= 1, got a scalar")
        _cumsum_axis(axis, x.rank)
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x, axis=None):
        if x.ndim == 0:
            fail("CumSum input 0 must have rank >= 1, got a scalar")
        if axis is not None and axis.ndim != 0:
            fail(f"CumSum axis (input 1) must be a scalar, got shape {list(axis.shape)}")
        ax = 0 if axis is None else normalize_axis(int(axis), x.ndim, "CumSum axis (input 1)")
        et = etype_name(x)
        w = widened(x, et)
        if attrs.reverse:
            w = np.flip(w, ax)
        with np.errstate(all="ignore"):      # integer sums wrap like the C++ types
            y = np.cumsum(w, axis=ax, dtype=w.dtype)
            if attrs.exclusive:
                y = _shift(y, ax)       # sums of the elements before, not y - x (rounding)
        if attrs.reverse:
            y = np.flip(y, ax)
        return (as_dtype(y, x.dtype),)


def _shift(y: np.ndarray, ax: int) -> np.ndarray:
    """Exclusive sums: the inclusive sums moved one step along the axis, 0 first."""
    out = np.zeros_like(y)
    src = [slice(None)] * y.ndim
    dst = [slice(None)] * y.ndim
    src[ax], dst[ax] = slice(0, -1), slice(1, None)
    out[tuple(dst)] = y[tuple(src)]
    return out
