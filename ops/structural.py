"""Parameter-1, Const-1, Result-1 and Convert-1 (spec pages: infrastructure/, type/Convert_1)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from irrun.opkit import (
    ElementTypeName, Fixed, NoAttrs, PartialShapeText, TensorSpec, convert_array,
    convert_is_astype, element_type, fail, is_static, parse_partial_shape, pass_elements,
    register, static_values,
)


@dataclass(frozen=True)
class ParameterAttrs:
    shape: PartialShapeText
    element_type: ElementTypeName


@register("Parameter", since=1, attrs=ParameterAttrs, category="infrastructure")
class Parameter1:
    @staticmethod
    def infer(attrs):
        if attrs.element_type in ("dynamic", "undefined"):
            # A body Parameter of this type takes what its layer feeds it (run/bodies.py);
            # only one that nothing feeds gets here.
            fail(f"element_type='{attrs.element_type}': a model's own Parameter needs an "
                 "element type (only a body Parameter may take it from what its layer feeds)")
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


@register("Convert", since=1, attrs=ConvertAttrs, category="type")
class Convert1:
    @staticmethod
    def infer(attrs, data: TensorSpec):
        try:
            et = element_type(attrs.destination_type)
        except ValueError as e:
            fail(str(e))
        if (et.name == "string") != (data.etype.name == "string"):
            # OpenVINO refuses this when it compiles the model; strings go through
            # StringTensorUnpack/Pack instead.
            fail(f"Convert cannot convert {data.etype.name} to {et.name}: strings convert to "
                 "and from bytes with StringTensorUnpack-15 / StringTensorPack-15")
        # Partial shape values keep flowing (ShapeOf -> Convert -> Reshape chains).
        return [pass_elements(data, et, data.shape)]

    @staticmethod
    def run(attrs, data):
        return (convert_array(data, attrs.destination_type),)

    @staticmethod
    def prepare(attrs, inputs, values):
        (data,) = inputs
        size = math.prod(static_values(data.shape)) if is_static(data.shape) else None
        if element_type(attrs.destination_type).kind == "bool" and data.etype.dtype.kind in "biuf":
            return np.not_equal, (0, Fixed(0))      # convert_array's x != 0
        dtype = convert_is_astype(data.etype.dtype, size, attrs.destination_type)
        return None if dtype is None else (np.ndarray.astype, (0, Fixed(dtype)))

    @staticmethod
    def rule_ignores_dims(attrs, inputs):
        # The rule reads the types alone; the output is no larger when the type is no wider.
        return element_type(attrs.destination_type).bits <= inputs[0].etype.bits
