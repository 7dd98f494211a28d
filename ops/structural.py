"""Parameter-1, Const-1, Result-1 and Convert-1 (spec pages: infrastructure/, type/Convert_1)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irrun.etypes import element_type
from irrun.infer import fail
from irrun.registry import ElementTypeName, NoAttrs, PartialShapeText, register
from irrun.shapes import TensorSpec, parse_partial_shape


@dataclass(frozen=True)
class ParameterAttrs:
    shape: PartialShapeText
    element_type: ElementTypeName


@register("Parameter", since=1, attrs=ParameterAttrs, category="infrastructure")
class Parameter1:
    @staticmethod
    def infer(attrs):
        try:
            et = element_type(attrs.element_type)
        except ValueError as e:
            fail(str(e))
        return [TensorSpec(et, parse_partial_shape(attrs.shape))]

    @staticmethod
    def run(attrs):  # the executor feeds Parameters; this is never called
        raise NotImplementedError


@dataclass(frozen=True)
class ConstAttrs:
    element_type: ElementTypeName
    shape: PartialShapeText
    offset: int
    size: int


@register("Const", since=1, attrs=ConstAttrs, category="infrastructure")
class Const1:
    @staticmethod
    def infer(attrs):  # the loader reads the value from the .bin instead
        return [TensorSpec(element_type(attrs.element_type), parse_partial_shape(attrs.shape))]

    @staticmethod
    def run(attrs):
        raise NotImplementedError


@register("Result", since=1, attrs=NoAttrs, category="infrastructure")
class Result1:
    @staticmethod
    def infer(attrs, data):
        return []

    @staticmethod
    def run(attrs, data):
        return ()


@dataclass(frozen=True)
class ConvertAttrs:
    destination_type: ElementTypeName


def convert_array(x: np.ndarray, dst) -> np.ndarray:
    """Element-wise conversion with C++ semantics, as OpenVINO's CPU plugin computes it.

    Float to integer rounds toward zero and saturates at the destination's range (NaN
    gives 0); integer to integer wraps modulo 2**bits; anything to boolean is x != 0.
    """
    dst = element_type(dst)
    src_dtype = x.dtype
    if dst.kind == "bool":
        return np.asarray(x != 0)    # a 0-d input would otherwise give a NumPy scalar
    if dst.is_float:
        # Values beyond the destination's range become +-inf, as in C++ (the executor
        # silences NumPy's warning for every kernel).
        return x.astype(dst.dtype)
    if dst.name in ("u1", "u4", "i4"):
        # Sub-byte destinations keep their low bits (irrun holds them unpacked).
        bits = dst.bits
        v = convert_array(x, "i64" if dst.is_signed else "u64").astype(np.int64) & ((1 << bits) - 1)
        if dst.is_signed:
            v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
        return np.asarray(v, dtype=dst.dtype)   # `&` on a 0-d array gives a NumPy scalar
    info = np.iinfo(dst.dtype)
    if np.issubdtype(src_dtype, np.floating) or src_dtype.kind == "V":
        f = x.astype(np.float64)
        f = np.trunc(np.nan_to_num(f, nan=0.0))
        f = np.clip(f, float(info.min), float(info.max))
        # float(info.max) of a 64-bit type rounds up past the range: saturate by hand.
        big = f >= float(info.max)
        out = np.where(big, 0.0, f).astype(dst.dtype)
        out[big] = info.max
        return out
    return x.astype(dst.dtype)


@register("Convert", since=1, attrs=ConvertAttrs, category="type")
class Convert1:
    @staticmethod
    def infer(attrs, data: TensorSpec):
        try:
            et = element_type(attrs.destination_type)
        except ValueError as e:
            fail(str(e))
        from .shape import pass_elements  # keeps partial shape values flowing (ShapeOf chains)
        return [pass_elements(data, et, data.shape)]

    @staticmethod
    def run(attrs, data):
        return (convert_array(data, attrs.destination_type),)
