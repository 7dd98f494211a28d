"""FakeQuantize-1 (spec page: quantization/fake-quantize-1)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    Fixed,
    TensorSpec,
    fail,
    format_shape,
    is_static,
    output_shape,
    register,
    static_values,
)

_NAMES = ["X (input 0)", "input_low (input 1)", "input_high (input 2)", "output_low (input 3)",
          "output_high (input 4)"]


@dataclass(frozen=True)
class FakeQuantizeAttrs:
    levels: int
    auto_broadcast: Literal["none", "numpy", "pdpd"] = "numpy"


def fake_quantize(x, il, ih, ol, oh, levels: int) -> np.ndarray:
    """The spec's formula in the input's precision, each step rounded as OpenVINO's reference
    rounds it: round((x - il) / (ih - il) * (levels - 1)) / (levels - 1) * (oh - ol) + ol,
    with round half to even (std::nearbyint); x <= min(il, ih) gives ol, x > max(il, ih) oh.

    f16 and bf16 compute in f32 (the CPU plugin's precision; the reference would round every
    step to f16). The CPU plugin instead precomputes scales and shifts, so a value within an
    ulp of a rounding boundary may land on the neighbouring level there.
    """
    t = np.float64 if x.dtype == np.float64 else np.float32
    x, il, ih, ol, oh = (a if type(a) is np.ndarray and a.dtype == t else
                         np.asarray(a).astype(t) for a in (x, il, ih, ol, oh))
    lm1 = t(levels - 1)
    # Where il < ih and the formula at il and ih gives ol and oh bit for bit (checked on the
    # limits), x clipped to [il, ih] first gives the spec's selection without its two
    # np.where calls (most of the time for a small tensor); else the formula on x itself,
    # then the selection. Either way step by step in one buffer of the output's shape (the
    # limits may broadcast X to a larger one); the calls are the ufuncs themselves
    # (np.clip and np.broadcast_shapes cost more than the arithmetic on a small tensor).
    exact = _clip_is_exact(il, ih, ol, oh, lm1)
    q = np.minimum(np.maximum(x, il), ih) if exact else x.copy()
    shape = np.broadcast(q, il, ih, ol, oh).shape
    if q.shape != shape:
        q = np.broadcast_to(q, shape).copy()
    if exact:
        return _levels(q, il, ih, ol, oh, lm1)
    with np.errstate(all="ignore"):      # where ih == il the formula gives inf or NaN,
        _levels(q, il, ih, ol, oh, lm1)  # which the selection replaces
    return np.where(x <= np.minimum(il, ih), ol, np.where(x > np.maximum(il, ih), oh, q))


def _levels(q, il, ih, ol, oh, lm1):
    """round((q - il) / (ih - il) * lm1) / lm1 * (oh - ol) + ol on q, in place, one rounding
    per step in q's precision, in the spec's order."""
    np.subtract(q, il, out=q)
    np.divide(q, ih - il, out=q)
    np.multiply(q, lm1, out=q)
    np.rint(q, out=q)
    np.divide(q, lm1, out=q)
    np.multiply(q, oh - ol, out=q)
    np.add(q, ol, out=q)
    return q


def _clip_is_exact(il, ih, ol, oh, lm1) -> bool:
    """Whether il < ih everywhere and the formula at il and at ih gives ol and oh exactly
    (zeros' signs included): then clipping x to [il, ih] gives what the spec's selection
    does. Memoised on the limits' bytes, since they are mostly Consts."""
    if il.size + ih.size + ol.size + oh.size > 4096:
        return _ends_exact(il, ih, ol, oh, lm1)
    return _ends_exact_cached(il.dtype.str, il.shape, il.tobytes(), ih.shape, ih.tobytes(),
                              ol.shape, ol.tobytes(), oh.shape, oh.tobytes(), float(lm1))


@functools.lru_cache(maxsize=256)
def _ends_exact_cached(dtype, *shapes_and_bytes_and_lm1) -> bool:
    *pairs, lm1 = shapes_and_bytes_and_lm1
    il, ih, ol, oh = (np.frombuffer(b, dtype).reshape(shape)
                      for shape, b in zip(pairs[::2], pairs[1::2]))
    return _ends_exact(il, ih, ol, oh, il.dtype.type(lm1))


def _ends_exact(il, ih, ol, oh, lm1) -> bool:
    with np.errstate(all="ignore"):
        if not np.all(il < ih):
            return False
        shape = np.broadcast_shapes(il.shape, ih.shape, ol.shape, oh.shape)
        for end, want in ((il, ol), (ih, oh)):
            got = _levels(np.broadcast_to(end, shape).copy(), il, ih, ol, oh, lm1)
            want = np.broadcast_to(want, shape)
            if not (np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))):
                return False
    return True


@register("FakeQuantize", since=1, attrs=FakeQuantizeAttrs, category="quantization")
class FakeQuantize1:
    @staticmethod
    def infer(attrs, x: TensorSpec, *limits: TensorSpec):
        if len(limits) != 4:
            fail(f"FakeQuantize takes 5 inputs (X and four limits), got {1 + len(limits)}")
        if not x.etype.is_float:
            fail(f"FakeQuantize X (input 0) must be of a floating-point type, got {x.etype.name}")
        for name, s in zip(_NAMES[1:], limits):
            if s.etype != x.etype:
                fail(f"FakeQuantize {name} must have X's element type {x.etype.name}, got {s.etype.name}")
        if attrs.levels < 2:
            fail(f"FakeQuantize needs levels >= 2, got levels={attrs.levels}")
        # OpenVINO merges every limit's shape into X's: the output may be larger than X.
        return [TensorSpec(x.etype, output_shape(attrs.auto_broadcast, x, *limits, names=_NAMES))]

    @staticmethod
    def run(attrs, x, il, ih, ol, oh):
        if attrs.auto_broadcast == "none" and len({a.shape for a in (x, il, ih, ol, oh)}) != 1:
            fail("auto_broadcast='none' needs equal shapes, got "
                 + " and ".join(f"{n} {list(a.shape)}" for n, a in zip(_NAMES, (x, il, ih, ol, oh))))
        if x.dtype.char in "fd" and x.size and \
                il.dtype == ih.dtype == ol.dtype == oh.dtype == x.dtype:
            loop = _loop(x.shape, il, ih, ol, oh, attrs.levels, x.dtype)
            if loop is not None:
                from .fake_quantize_loop import by_channel

                return (by_channel(x, *loop),)
        return (fake_quantize(x, il, ih, ol, oh, attrs.levels).astype(x.dtype, copy=False),)

    @staticmethod
    def prepare(attrs, inputs, values):
        # run's compiled loop for limits the plan knows (Consts): their table made once.
        x = inputs[0]
        if not is_static(x.shape) or x.etype.dtype.char not in "fd" or \
                any(v is None or v.dtype != x.etype.dtype for v in values[1:]):
            return None
        shape = static_values(x.shape)
        if not math.prod(shape):
            return None
        if attrs.auto_broadcast == "none" and any(v.shape != shape for v in values[1:]):
            return None
        loop = _loop(shape, *values[1:], attrs.levels, x.etype.dtype)
        if loop is None:
            return None
        from .fake_quantize_loop import by_channel

        table, out_shape, seen = loop
        return functools.partial(by_channel, shape=out_shape, seen=seen), (0, Fixed(table))


def _loop(x_shape, il, ih, ol, oh, levels, dtype) -> tuple | None:
    """(limits table, output shape, X seen as [A, C, B]) for the compiled loop of
    ops/fake_quantize_loop.py: limits of one value or varying along one axis of X, all
    finite; None where fake_quantize's NumPy path computes the layer."""
    from .fake_quantize_loop import layout, limits_table

    seen = layout(x_shape, [il.shape, ih.shape, ol.shape, oh.shape])
    if seen is None:
        return None
    table = limits_table(il, ih, ol, oh, levels, seen[1][1], dtype)
    return None if table is None else (table,) + seen


# ---------------------------------------------------------------- FakeConvert
# Spec page: quantization/fake-convert-13.


@dataclass(frozen=True)
class FakeConvertAttrs:
    destination_type: Literal["f8e4m3", "f8e5m2"] = "f8e4m3"


def _to_f8(y: np.ndarray, destination: str) -> np.ndarray:
    """Round to the f8 type as OpenVINO does: through f16 first (its reference converts to f16
    and emulates f8 rounding there; the CPU plugin gives the same values), saturating at the
    f8 type's largest finite value (the reference clamps f8e4m3; the CPU plugin also
    saturates f8e5m2, and values beyond f16's range). NaN stays NaN (irrun's choice: the
    reference and the CPU plugin turn it into +-448 or -57344)."""
    import ml_dtypes
    f8 = ml_dtypes.float8_e4m3fn if destination == "f8e4m3" else ml_dtypes.float8_e5m2
    top = np.float16(float(ml_dtypes.finfo(f8).max))
    with np.errstate(over="ignore", invalid="ignore"):
        h = y.astype(np.float16)
        nan = np.isnan(h)
        h = np.clip(np.where(nan, np.float16(0), h), -top, top)
        out = h.astype(f8).astype(np.float32)
    return np.where(nan, np.float32(np.nan), out)


@register("FakeConvert", since=13, attrs=FakeConvertAttrs, category="quantization")
class FakeConvert13:
    @staticmethod
    def infer(attrs, data: TensorSpec, scale: TensorSpec, shift: TensorSpec | None = None):
        if data.etype.name not in ("f32", "f16", "bf16"):
            fail(f"FakeConvert data must be f32, f16 or bf16, got {data.etype.name}")
        names = ["data (input 0)", "scale (input 1)", "shift (input 2)"]
        specs = [data, scale] + ([shift] if shift is not None else [])
        for name, s in zip(names[1:], specs[1:]):
            if s.etype != data.etype:
                fail(f"FakeConvert {name} must have the data's element type {data.etype.name}, got {s.etype.name}")
        if shift is not None and scale.shape is not None and shift.shape is not None:
            if len(scale.shape) != len(shift.shape) or any(not a.compatible(b) for a, b in zip(scale.shape, shift.shape)):
                fail(f"FakeConvert shift {format_shape(shift.shape)} must match scale {format_shape(scale.shape)}")
        out = output_shape("numpy", *specs, names=names[:len(specs)])
        if out is not None and data.shape is not None and len(out) != len(data.shape):
            fail(f"FakeConvert scale/shift must broadcast to the data's shape {format_shape(data.shape)}")
        return [TensorSpec(data.etype, data.shape)]

    @staticmethod
    def run(attrs, data, scale, shift=None):
        dt = data.dtype
        if np.broadcast_shapes(data.shape, scale.shape, *( [shift.shape] if shift is not None else [])) != data.shape:
            fail(f"FakeConvert scale {list(scale.shape)} must broadcast to the data's shape {list(data.shape)}")
        x = data.astype(np.float32)
        s = scale.astype(np.float32)
        o = np.zeros((), np.float32) if shift is None else shift.astype(np.float32)
        # Each step rounds to the data's type, as the reference computes in T.
        y = (x * s).astype(dt).astype(np.float32)
        y = (y - o).astype(dt).astype(np.float32)
        q = _to_f8(y, attrs.destination_type).astype(dt).astype(np.float32)
        q = (q + o).astype(dt).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            return ((q / s).astype(dt),)
