"""Bitwise ops on integer and boolean tensors.

Spec pages: bitwise/ (BitwiseAnd-13, BitwiseOr-13, BitwiseXor-13, BitwiseNot-13,
BitwiseLeftShift-15, BitwiseRightShift-15) and broadcast_rules (numpy and none).

And/Or/Xor/Not take every integer type and boolean (on boolean they are the logical ops);
the shifts take integers only. Results keep the input element type: a left shift that
overflows a signed type wraps (its low bits), a right shift of a negative number is
arithmetic (sign-filling), as C++ on two's complement does.

Shift counts: the spec leaves a negative count, or one of at least the type's width, to the
implementation (x86 masks the count, C++ calls it undefined). irrun refuses them, naming the
position and the count, rather than returning a hardware-dependent value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    check_arrays_broadcast,
    NoAttrs,
    TensorSpec,
    UnsupportedError,
    as_dtype,
    fail,
    first_position,
    output_shape,
    register,
    same_etype,
)

# Sub-byte types are held unpacked, one byte each: And/Or/Xor of in-range values stay in
# range, but Not and the shifts would set bits beyond the type's width.
_SUB_BYTE = ("u1", "u4", "i4")


@dataclass(frozen=True)
class BroadcastAttrs:
    auto_broadcast: Literal["none", "numpy", "pdpd"] = "numpy"


def _check_kinds(name: str, spec: TensorSpec, kinds: tuple[str, ...], whole_bytes: bool) -> None:
    if spec.etype.kind not in kinds:
        accepted = "integer or boolean" if "bool" in kinds else "integer"
        fail(f"{name} needs {accepted} inputs, got {spec.etype.name}")
    if whole_bytes and spec.etype.name in _SUB_BYTE:
        raise UnsupportedError(f"{name} on the sub-byte type {spec.etype.name} is not supported")


def _shift_counts(name: str, a: np.ndarray, b: np.ndarray) -> None:
    bits = a.dtype.itemsize * 8
    bad = (b < 0) | (b >= bits) if b.dtype.kind == "i" else b >= bits
    if bad.any():
        pos = first_position(np.broadcast_to(bad, np.broadcast_shapes(a.shape, b.shape)))
        value = np.broadcast_to(b, np.broadcast_shapes(a.shape, b.shape))[tuple(pos)]
        fail(f"{name}: shift count (input 1) is {value} at position {pos}; it must lie in "
             f"[0, {bits - 1}] for {a.dtype.name}", code="value")


# name -> (NumPy function, accepted kinds, needs whole-byte types, checks shift counts)
BINARY = {
    "BitwiseAnd": (np.bitwise_and, ("int", "uint", "bool"), False, False),
    "BitwiseOr": (np.bitwise_or, ("int", "uint", "bool"), False, False),
    "BitwiseXor": (np.bitwise_xor, ("int", "uint", "bool"), False, False),
    "BitwiseLeftShift": (np.left_shift, ("int", "uint"), True, True),
    "BitwiseRightShift": (np.right_shift, ("int", "uint"), True, True),
}
_SINCE = {"BitwiseLeftShift": 15, "BitwiseRightShift": 15}


def _make_binary(name: str):
    fn, kinds, whole_bytes, shifts = BINARY[name]
    since = _SINCE.get(name, 13)

    def infer(attrs, a: TensorSpec, b: TensorSpec) -> list[TensorSpec]:
        et = same_etype(a, b)
        _check_kinds(name, a, kinds, whole_bytes)
        return [TensorSpec(et, output_shape(attrs.auto_broadcast, a, b))]

    def run(attrs, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        check_arrays_broadcast(attrs.auto_broadcast, a, b)
        if shifts:
            _shift_counts(name, a, b)
        return (as_dtype(fn(a, b), a.dtype),)

    def prepare(attrs, inputs, values):
        # And/Or/Xor of one integer or boolean type: the ufunc, of that type (the shape
        # rule, run again on the real shapes, checks the broadcast as run does).
        if shifts or attrs.auto_broadcast not in ("numpy", "none") or \
                inputs[0].etype != inputs[1].etype:
            return None
        return fn, (0, 1)

    cls = type(f"{name}{since}", (), {"infer": staticmethod(infer), "run": staticmethod(run),
                                      "prepare": staticmethod(prepare),
                                      "__doc__": f"{name}-{since}: element-wise, with auto_broadcast."})
    return register(name, since=since, attrs=BroadcastAttrs, category="bitwise")(cls)


for _name in BINARY:
    globals()[f"{_name}{_SINCE.get(_name, 13)}"] = _make_binary(_name)


@register("BitwiseNot", since=13, attrs=NoAttrs, category="bitwise")
class BitwiseNot13:
    @staticmethod
    def infer(attrs, x: TensorSpec) -> list[TensorSpec]:
        _check_kinds("BitwiseNot", x, ("int", "uint", "bool"), True)
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x: np.ndarray) -> tuple[np.ndarray]:
        return (as_dtype(np.invert(x), x.dtype),)    # np.invert of bool is logical not
