"""Classification of floating-point values: NaN, infinity, finite.

Spec pages: comparison/ (IsNaN-10, IsInf-10, IsFinite-10). Each maps a floating-point
tensor to a boolean tensor of the same shape; f16 and bf16 classify exactly (their NaNs and
infinities survive the widening to f32).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irrun.opkit import NoAttrs, TensorSpec, etype_name, fail, register, widened


def _float_to_bool(name: str, x: TensorSpec) -> list[TensorSpec]:
    if not x.etype.is_float:
        fail(f"{name} needs a floating-point input (f16, bf16, f32, f64), got {x.etype.name}")
    return [TensorSpec.make("boolean", x.shape)]


def _wide(x: np.ndarray) -> np.ndarray:
    return widened(x, etype_name(x))


@register("IsNaN", since=10, attrs=NoAttrs, category="comparison")
class IsNaN10:
    @staticmethod
    def infer(attrs, x: TensorSpec) -> list[TensorSpec]:
        return _float_to_bool("IsNaN", x)

    @staticmethod
    def run(attrs, x: np.ndarray) -> tuple[np.ndarray]:
        return (np.asarray(np.isnan(_wide(x))),)


@register("IsFinite", since=10, attrs=NoAttrs, category="comparison")
class IsFinite10:
    @staticmethod
    def infer(attrs, x: TensorSpec) -> list[TensorSpec]:
        return _float_to_bool("IsFinite", x)

    @staticmethod
    def run(attrs, x: np.ndarray) -> tuple[np.ndarray]:
        return (np.asarray(np.isfinite(_wide(x))),)


@dataclass(frozen=True)
class IsInfAttrs:
    detect_negative: bool = True
    detect_positive: bool = True


@register("IsInf", since=10, attrs=IsInfAttrs, category="comparison")
class IsInf10:
    @staticmethod
    def infer(attrs, x: TensorSpec) -> list[TensorSpec]:
        return _float_to_bool("IsInf", x)

    @staticmethod
    def run(attrs, x: np.ndarray) -> tuple[np.ndarray]:
        w = _wide(x)
        y = np.zeros(w.shape, np.bool_)
        if attrs.detect_positive:
            y |= w == np.inf
        if attrs.detect_negative:
            y |= w == -np.inf
        return (y,)
