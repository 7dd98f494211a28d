"""Checking and casting user inputs against the model's Parameters."""
from __future__ import annotations

import numpy as np

from .errors import FeedError
from .etypes import ElementType
from .shapes import format_shape, shape_matches


def _describe(spec) -> str:
    return f"{spec.etype.name}{format_shape(spec.shape)}"


def cast_input(name: str, value, etype: ElementType, shape) -> np.ndarray:
    """The value as an array of the Parameter's type, or a FeedError saying what is wrong.

    A same-kind cast is silent (f64 data for an f32 input, i64 for i32 when the values fit,
    Python lists). A lossy or foreign value is an error: floats for an integer input,
    integers out of range, strings, objects. OpenVINO would silently truncate or wrap.
    """
    want = f"{etype.name}{format_shape(shape)}"
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise FeedError(f"input '{name}': cannot make an array of the value ({e}); "
                            f"expected {want}") from None
    kind = arr.dtype.kind
    if kind in "OUSVMm" and not (kind == "V" and arr.dtype == etype.dtype):
        raise FeedError(f"input '{name}': got {arr.dtype} values, expected {want}")
    if not shape_matches(shape, arr.shape):
        raise FeedError(f"input '{name}': got shape {list(arr.shape)}, expected {want}")
    if arr.dtype == etype.dtype:
        return arr
    if etype.kind == "bool":
        if kind != "b":
            raise FeedError(f"input '{name}': got {arr.dtype} values for a boolean input; "
                            f"expected {want}")
        return arr.astype(np.bool_)
    if etype.is_float:
        if kind == "f" or arr.dtype.kind == "V":
            return arr.astype(etype.dtype)
        if kind in "iub":
            if kind == "b":
                raise FeedError(f"input '{name}': got bool values, expected {want}")
            cast = arr.astype(etype.dtype)
            if arr.size and not np.array_equal(cast.astype(np.float64), arr.astype(np.float64)):
                raise FeedError(f"input '{name}': {arr.dtype} values are not exactly "
                                f"representable in {etype.name}; expected {want}")
            return cast
    if etype.is_integer:
        if kind == "f":
            raise FeedError(f"input '{name}': got {arr.dtype} values for an integer input "
                            f"(it would truncate them); expected {want}")
        if kind == "b":
            raise FeedError(f"input '{name}': got bool values, expected {want}")
        if arr.size:
            lo, hi = _range(etype)
            amin, amax = int(arr.min()), int(arr.max())
            if amin < lo or amax > hi:
                bad = amin if amin < lo else amax
                raise FeedError(f"input '{name}': value {bad} is out of the range of "
                                f"{etype.name} [{lo}, {hi}]; expected {want}")
        return arr.astype(etype.dtype)
    raise FeedError(f"input '{name}': got {arr.dtype} values, expected {want}")


def _range(etype: ElementType) -> tuple[int, int]:
    if etype.bits < 8:
        if etype.kind == "int":
            return -(1 << (etype.bits - 1)), (1 << (etype.bits - 1)) - 1
        return 0, (1 << etype.bits) - 1
    info = np.iinfo(etype.dtype)
    return int(info.min), int(info.max)
