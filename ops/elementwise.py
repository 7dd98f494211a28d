"""Element-wise ops: the binary arithmetic, comparison and logical families, Select, and
the simple unary math ops.

Spec pages: arithmetic/ (Add-1, Subtract-1, Multiply-1, Divide-1, Maximum-1, Minimum-1,
Power-1, SquaredDifference-1, Abs-1, Negative-1, Sqrt-1, Exp-1, Log-1, Floor-1,
Ceiling-1, Erf-1, Sign-1, Sin-1, Cos-1), comparison/ (Equal-1, NotEqual-1, Less-1,
LessEqual-1, Greater-1, GreaterEqual-1), logical/ (LogicalAnd-1, LogicalOr-1,
LogicalXor-1, LogicalNot-1), condition/Select-1, and
broadcast_rules (numpy and none; pdpd is reported as unsupported).

Numerics: results keep the input element type exactly. Maximum/Minimum propagate NaN (the
spec is silent; the CPU plugin's answer depends on the operand order). Integer arithmetic wraps like the
C++ types (OpenVINO's reference kernels do; its CPU plugin saturates u8, so tests stay in
range). f16/bf16 compute in f32 and round once, as the CPU plugin does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from irrun.errors import OpError, UnsupportedError
from irrun.etypes import from_dtype
from irrun.infer import fail
from irrun.registry import NoAttrs, register
from irrun.shapes import Dim, TensorSpec, format_shape

# ------------------------------------------------------------------ shape and type rules


def _has_one(d: Dim) -> bool:
    return d.contains(1)


def broadcast_dim(a: Dim, b: Dim) -> Dim | None:
    """Numpy broadcast of two (interval) dims; None when they can never broadcast.

    The output is a's value when b is 1, b's value when a is 1, else the common value; so
    with intervals: a side that may be 1 defers to the other side.
    """
    a_one, b_one = _has_one(a), _has_one(b)
    if a.is_static and a.value == 1:
        return b
    if b.is_static and b.value == 1:
        return a
    if a_one and b_one:
        hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
        return Dim(min(a.lo, b.lo), hi)
    if a_one:
        return b
    if b_one:
        return a
    return a.merge(b)


def broadcast_shapes(*shapes, names=None) -> tuple | None:
    """Numpy broadcast of partial shapes (None = dynamic rank); fails naming every shape."""
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)
    padded = [(Dim.of(1),) * (rank - len(s)) + tuple(s) for s in shapes]
    out = []
    for axis in range(rank):
        d = padded[0][axis]
        for k, p in enumerate(padded[1:], 1):
            merged = broadcast_dim(d, p[axis])
            if merged is None:
                names = names or [f"input {i}" for i in range(len(shapes))]
                listed = " and ".join(f"{n} {format_shape(s)}" for n, s in zip(names, shapes))
                fail(f"shapes do not broadcast (numpy rules): {listed}; "
                     f"dim {axis - rank} is {d} vs {p[axis]}")
            d = merged
        out.append(d)
    return tuple(out)


def same_shapes(*shapes, names=None) -> tuple | None:
    """auto_broadcast="none": every input has the same shape."""
    known = [s for s in shapes if s is not None]
    if not known:
        return None
    names = names or [f"input {i}" for i in range(len(shapes))]
    listed = " and ".join(f"{n} {format_shape(s)}" for n, s in zip(names, shapes))
    out = list(known[0])
    for s in known[1:]:
        if len(s) != len(out):
            fail(f"auto_broadcast='none' needs equal shapes, got {listed}")
        for i, d in enumerate(s):
            merged = out[i].merge(d)
            if merged is None:
                fail(f"auto_broadcast='none' needs equal shapes, got {listed}")
            out[i] = merged
    return tuple(out)


def output_shape(mode: str, *specs: TensorSpec, names=None):
    shapes = [s.shape for s in specs]
    if mode == "numpy":
        return broadcast_shapes(*shapes, names=names)
    if mode == "none":
        return same_shapes(*shapes, names=names)
    # PDPD aligns the second input at an axis that the IR does not record; not needed by
    # any converter irrun targets.
    raise UnsupportedError(f"auto_broadcast='{mode}' is not supported (numpy and none are)")


def same_etype(*specs: TensorSpec, names=("input 0", "input 1")):
    first = specs[0].etype
    for name, s in zip(names[1:], specs[1:]):
        if s.etype != first:
            fail(f"element types differ: {names[0]} is {first.name}, {name} is {s.etype.name}")
    return first


# ------------------------------------------------------------------ numeric helpers

_WIDE = {"f16": np.float32, "bf16": np.float32}


def widened(x: np.ndarray, etype_name: str) -> np.ndarray:
    """f16/bf16 values as f32, so every ufunc exists and rounding happens once."""
    w = _WIDE.get(etype_name)
    return x.astype(w) if w is not None else x


def _etype_name(x: np.ndarray) -> str:
    return from_dtype(x.dtype).name


def as_dtype(y, dtype) -> np.ndarray:
    """An ndarray of exactly `dtype` (ufuncs on 0-d arrays return NumPy scalars)."""
    return np.asarray(y).astype(dtype, copy=False)


def first_position(mask: np.ndarray) -> list[int]:
    return [int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape)] if mask.ndim else []


def float_to_int(y: np.ndarray, dtype, what: str, x: np.ndarray) -> np.ndarray:
    """A float result back to an integer type: round half to even (the CPU plugin's
    conversion); NaN or out-of-range results are errors rather than garbage."""
    info = np.iinfo(dtype)
    bad = ~np.isfinite(y) | (y < info.min - 0.5) | (y > info.max + 0.5)
    if bad.any():
        pos = first_position(bad)
        raise OpError(f"{what} of integer input 0 at position {pos} (value {x[tuple(pos)]}) "
                      f"is {y[tuple(pos)]}, not representable in {np.dtype(dtype).name}")
    return as_dtype(np.rint(y), dtype)


def float_unary(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, what: str) -> np.ndarray:
    """Apply a float function and return x's dtype: f32/f16/bf16 compute in f64 and round
    once (so results are correctly rounded where fn is); integers round to nearest."""
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu":
            return float_to_int(np.asarray(fn(x.astype(np.float64))), x.dtype, what, x)
        return as_dtype(fn(x.astype(np.float64)), x.dtype)


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
        raise OpError(f"integer division by zero: input 1 is 0 at position {pos}")
    if attrs.m_pythondiv:
        return np.floor_divide(a, b)
    # C++ truncation: the floor quotient, one closer to zero where the signs differ and
    # the division is inexact.
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


def _int_power(a, b, attrs):
    """Integer power by repeated squaring (wraps like C++); negative exponents follow
    std::pow then conversion: 1 -> 1, -1 -> +-1, |base| > 1 -> 0, base 0 -> error."""
    a, b = np.broadcast_arrays(a, b)
    neg = b < 0 if b.dtype.kind == "i" else np.zeros(b.shape, bool)
    if (neg & (a == 0)).any():
        pos = first_position(neg & (a == 0))
        raise OpError(f"0 raised to a negative power (input 1 is {b[tuple(pos)]} at position {pos})")
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


# name -> (kernel(a, b, attrs), output kind: "same" | "bool", accepted input kinds)
_ARITH = ("float", "int", "uint")
BINARY = {
    "Add": (lambda a, b, _: np.add(a, b), "same", _ARITH),
    "Subtract": (lambda a, b, _: np.subtract(a, b), "same", _ARITH),
    "Multiply": (lambda a, b, _: np.multiply(a, b), "same", _ARITH),
    "Divide": (_float_or_int(np.true_divide, _int_divide), "same", _ARITH),
    "Maximum": (lambda a, b, _: np.maximum(a, b), "same", _ARITH),   # NaN propagates
    "Minimum": (lambda a, b, _: np.minimum(a, b), "same", _ARITH),
    "Power": (_float_or_int(np.power, _int_power), "same", _ARITH),
    "SquaredDifference": (lambda a, b, _: np.square(np.subtract(a, b)), "same", _ARITH),
    "Equal": (lambda a, b, _: np.equal(a, b), "bool", _ARITH + ("bool",)),
    "NotEqual": (lambda a, b, _: np.not_equal(a, b), "bool", _ARITH + ("bool",)),
    "Less": (lambda a, b, _: np.less(a, b), "bool", _ARITH + ("bool",)),
    "LessEqual": (lambda a, b, _: np.less_equal(a, b), "bool", _ARITH + ("bool",)),
    "Greater": (lambda a, b, _: np.greater(a, b), "bool", _ARITH + ("bool",)),
    "GreaterEqual": (lambda a, b, _: np.greater_equal(a, b), "bool", _ARITH + ("bool",)),
    "LogicalAnd": (lambda a, b, _: np.logical_and(a, b), "bool", ("bool",)),
    "LogicalOr": (lambda a, b, _: np.logical_or(a, b), "bool", ("bool",)),
    "LogicalXor": (lambda a, b, _: np.logical_xor(a, b), "bool", ("bool",)),
}


def binary_infer(name: str, attrs, a: TensorSpec, b: TensorSpec) -> list[TensorSpec]:
    _, out_kind, kinds = BINARY[name]
    et = same_etype(a, b)
    if et.kind not in kinds:
        fail(f"{name} does not accept element type {et.name} (accepts {', '.join(kinds)} types)")
    shape = output_shape(attrs.auto_broadcast, a, b)
    return [TensorSpec.make("boolean" if out_kind == "bool" else et, shape)]


def binary_run(name: str, attrs, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    kernel, out_kind, _ = BINARY[name]
    if attrs.auto_broadcast == "none" and a.shape != b.shape:
        raise OpError(f"auto_broadcast='none' needs equal shapes, got {list(a.shape)} and {list(b.shape)}")
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise OpError(f"shapes do not broadcast (numpy rules): input 0 {list(a.shape)} and "
                      f"input 1 {list(b.shape)}") from None
    dtype = np.bool_ if out_kind == "bool" else a.dtype
    et = _etype_name(a)
    with np.errstate(all="ignore"):
        y = kernel(widened(a, et), widened(b, et), attrs)
    return (as_dtype(y, dtype),)


def _make_binary(name: str, attrs_cls=BroadcastAttrs, category="arithmetic"):
    def infer(attrs, a, b):
        return binary_infer(name, attrs, a, b)

    def run(attrs, a, b):
        return binary_run(name, attrs, a, b)

    cls = type(f"{name}1", (), {"infer": staticmethod(infer), "run": staticmethod(run),
                                "__doc__": f"{name}-1: element-wise, with auto_broadcast."})
    return register(name, since=1, attrs=attrs_cls, category=category)(cls)


for _name in BINARY:
    _category = ("logical" if _name.startswith("Logical") else
                 "comparison" if BINARY[_name][1] == "bool" else "arithmetic")
    globals()[f"{_name}1"] = _make_binary(_name, DivideAttrs if _name == "Divide" else BroadcastAttrs,
                                          _category)


@register("LogicalNot", since=1, attrs=NoAttrs, category="logical")
class LogicalNot1:
    @staticmethod
    def infer(attrs, x: TensorSpec):
        if x.etype.kind != "bool":
            fail(f"LogicalNot needs a boolean input, got {x.etype.name}")
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x):
        return (as_dtype(np.logical_not(x), np.bool_),)


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
            raise OpError("auto_broadcast='none' needs equal shapes, got "
                          f"{list(cond.shape)}, {list(then.shape)} and {list(else_.shape)}")
        try:
            y = np.where(cond, then, else_)
        except ValueError:
            raise OpError(f"shapes do not broadcast (numpy rules): cond {list(cond.shape)}, "
                          f"then {list(then.shape)} and else {list(else_.shape)}") from None
        return (as_dtype(y, then.dtype),)


# ------------------------------------------------------------------ unary family

# erf in f64 to within an ulp, vectorised: the piecewise rational approximations of
# fdlibm's s_erf.c (Sun Microsystems, 1993; the same constants serve musl and FreeBSD).
# NumPy has no erf, and SciPy is not a dependency.
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)
_ERX = 8.45062911510467529297e-01


def _poly(coeffs, z):
    acc = np.full_like(z, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc = acc * z + c
    return acc


def erf(x: np.ndarray) -> np.ndarray:
    """erf of an f64 array (NaN stays NaN, +-inf gives +-1)."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    with np.errstate(all="ignore"):
        z = x * x
        small = x + x * (_poly(_PP, z) / _poly(_QQ, z))                     # |x| < 0.84375
        s = ax - 1.0
        mid = _ERX + _poly(_PA, s) / _poly(_QA, s)                          # 0.84375 <= |x| < 1.25
        inv = 1.0 / (ax * ax)
        rs = np.where(ax < 1 / 0.35, _poly(_RA, inv) / _poly(_SA, inv), _poly(_RB, inv) / _poly(_SB, inv))
        # exp(-x*x) split so its rounding error does not grow with x (fdlibm's trick).
        hi = (ax.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
        tail = 1.0 - np.exp(-hi * hi - 0.5625) * np.exp((hi - ax) * (hi + ax) + rs) / ax  # < 6
        big = np.where(ax < 1.25, mid, np.where(ax < 6.0, tail, 1.0))
        y = np.where(ax < 0.84375, small, np.copysign(big, x))
    return np.where(np.isnan(x), x, y)


# name -> (function on f64 (or exact on the input dtype), integer handling, accepted kinds)
#   integer handling: "exact" applies the function to the integers themselves;
#                     "round" computes in f64 and rounds to nearest (the CPU plugin's way).
UNARY: dict[str, tuple[Callable, str, tuple[str, ...]]] = {
    "Abs": (np.abs, "exact", _ARITH),
    "Negative": (np.negative, "exact", _ARITH),
    "Sign": (np.sign, "exact", _ARITH),
    "Floor": (np.floor, "exact", _ARITH),
    "Ceiling": (np.ceil, "exact", _ARITH),
    "Sqrt": (np.sqrt, "round", _ARITH),
    "Exp": (np.exp, "round", _ARITH),
    "Log": (np.log, "round", _ARITH),
    "Erf": (erf, "round", _ARITH),
    "Sin": (np.sin, "round", _ARITH),
    "Cos": (np.cos, "round", _ARITH),
}


def unary_apply(name: str, fn: Callable, int_mode: str, x: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu" and int_mode == "exact":
        if name in ("Floor", "Ceiling"):
            return x.copy()                 # integers are their own floor and ceiling
        with np.errstate(all="ignore"):     # Abs/Negative of the minimum wrap, as in C++
            return as_dtype(fn(x), x.dtype)
    return float_unary(fn, x, name)


def make_unary(name: str, fn: Callable, int_mode: str, kinds, category: str, since: int = 1):
    def infer(attrs, x):
        if x.etype.kind not in kinds:
            fail(f"{name} does not accept element type {x.etype.name} (accepts {', '.join(kinds)} types)")
        return [TensorSpec(x.etype, x.shape)]

    def run(attrs, x):
        return (unary_apply(name, fn, int_mode, x),)

    cls = type(f"{name}{since}", (), {"infer": staticmethod(infer), "run": staticmethod(run),
                                      "__doc__": f"{name}-{since}: element-wise."})
    return register(name, since=since, attrs=NoAttrs, category=category)(cls)


for _name, (_fn, _mode, _kinds) in UNARY.items():
    globals()[f"{_name}1"] = make_unary(_name, _fn, _mode, _kinds, "arithmetic")
