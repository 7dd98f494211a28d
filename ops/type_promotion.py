"""ConvertPromoteTypes: two tensors converted to their common element type.

Spec page: type/convert-promote-types-14. The common type follows the spec's rules as
OpenVINO's shape inference orders them (ties, booleans, float/integer mixes, PyTorch-like
scalars, signed/unsigned mixes, then the unsafe special cases); refusals in safe mode are
shape errors, as OpenVINO refuses the model. Values convert like Convert-1 (C++ casts).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irrun.opkit import (
    ElementType,
    ElementTypeName,
    TensorSpec,
    convert_array,
    element_type,
    fail,
    from_dtype,
    register,
)

# The types OpenVINO's rule accepts (the rest of the IR's types are refused).
_SUPPORTED = ("boolean", "f16", "f32", "f64", "i4", "i8", "i16", "i32", "i64", "u1", "u4", "u8",
              "u16", "u32", "u64", "f8e4m3", "f8e5m2", "bf16")
_INT_BY_BITS = {4: "i4", 8: "i8", 16: "i16", 32: "i32"}


@dataclass(frozen=True)
class ConvertPromoteTypesAttrs:
    promote_unsafe: bool = False
    pytorch_scalar_promotion: bool = False
    u64_integer_promotion_target: ElementTypeName = "f32"


def common_type(attrs, a: ElementType, b: ElementType, rank_a: int | None, rank_b: int | None) -> str | None:
    """The promoted type's name; None when it depends on an unknown rank."""
    for et, i in ((a, 0), (b, 1)):
        if et.name not in _SUPPORTED:
            fail(f"input {i} has element type {et.name}, which ConvertPromoteTypes does not "
                 f"accept (accepts {', '.join(_SUPPORTED)})")
    if a.name == b.name:
        return a.name
    if a.kind == "bool":
        return b.name
    if b.kind == "bool":
        return a.name
    unsafe = attrs.promote_unsafe
    if a.is_float != b.is_float:
        real, integer = (a, b) if a.is_float else (b, a)
        if not unsafe and real.bits < 2 * integer.bits:
            fail(f"integer input ({integer.name}) cannot be safely promoted to {real.name}: the "
                 f"float needs at least twice its bits (promote_unsafe=false)")
        return real.name
    if attrs.pytorch_scalar_promotion:
        if rank_a is None or rank_b is None:
            return None
        if (rank_a == 0) != (rank_b == 0):
            target, scalar = (b, a) if rank_a == 0 else (a, b)
            if not unsafe and not (
                    (target.is_signed == scalar.is_signed and target.bits >= scalar.bits)
                    or (target.is_signed and not scalar.is_signed and target.bits * 2 >= scalar.bits)):
                fail(f"scalar input ({scalar.name}) cannot be promoted PyTorch-like to "
                     f"{target.name} under the safe rules (promote_unsafe=false)")
            return target.name
    if a.is_signed != b.is_signed:
        uint_bits = b.bits if a.is_signed else a.bits
        int_bits = a.bits if a.is_signed else b.bits
        if uint_bits <= 32 and (unsafe or uint_bits * 2 <= int_bits):
            return _INT_BY_BITS.get(max(uint_bits * 2, int_bits), "i64")
        if not unsafe:
            fail(f"unsigned input ({(b if a.is_signed else a).name}) cannot be safely promoted to a "
                 f"signed integer (promote_unsafe=false)")
        return attrs.u64_integer_promotion_target
    if a.bits != b.bits:
        return a.name if a.bits >= b.bits else b.name
    if unsafe:
        names = {a.name, b.name}
        if names == {"f8e4m3", "f8e5m2"}:
            return "f16"
        if names == {"f16", "bf16"}:
            return "f32"
    fail(f"no common type for {a.name} and {b.name} with promote_unsafe="
         f"{str(unsafe).lower()}")


@register("ConvertPromoteTypes", since=14, attrs=ConvertPromoteTypesAttrs, category="type")
class ConvertPromoteTypes14:
    @staticmethod
    def infer(attrs, a: TensorSpec, b: TensorSpec):
        name = common_type(attrs, a.etype, b.etype, a.rank, b.rank)
        if name is None:
            # PyTorch-like promotion of a tensor of unknown rank: the plugin's answer is
            # "dynamic"; irrun needs an element type, so the rule runs on the values.
            fail("pytorch_scalar_promotion needs the ranks of both inputs, and one is dynamic")
        try:
            et = element_type(name)
        except ValueError as e:
            fail(str(e))
        return [TensorSpec(et, a.shape), TensorSpec(et, b.shape)]

    @staticmethod
    def run(attrs, a, b):
        ea, eb = from_dtype(a.dtype), from_dtype(b.dtype)
        name = common_type(attrs, ea, eb, a.ndim, b.ndim)
        et = element_type(name)
        return (np.asarray(convert_array(a, et)), np.asarray(convert_array(b, et)))
