"""Shape manipulation ops (spec pages: shape/ShapeOf_1, ShapeOf_3, Reshape_1, Squeeze_1, Squeeze_15,
Unsqueeze_1; generation/Range_4; movement/Broadcast_1, Broadcast_3, Tile_1; type/ConvertLike_1).

Besides full constant values (which the inference pass folds), these ops carry *partial*
values: `TensorSpec.dims` holds what is known of each element of a small integer tensor,
so `x[?,3,4] -> ShapeOf -> Gather -> Concat -> Reshape` knows the static dims before run
time, as OpenVINO's value bounds do.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC, Dim, DimOf, ElementTypeName, Fixed, NoAttrs, TensorSpec, UnsupportedError, check_alloc,
    check_integer, check_rank, convert_array, convert_is_astype, element_type, elements, fail,
    format_shape, from_dtype, int_spec, is_static, known_ints, length, normalize_axis,
    pass_elements, register, shape_dims, static_values, warn,
)

# ---------------------------------------------------------------- partial values


def _product(dims) -> Dim:
    total = Dim.of(1)
    for d in dims:
        total = total * d
    return total


# ---------------------------------------------------------------- ShapeOf


def _shape_of(data: TensorSpec, etype: str) -> list[TensorSpec]:
    if data.shape is None:
        return [TensorSpec(element_type(etype), (DYNAMIC,))]
    elems = [d if d.is_static else DimOf(d.lo, d.hi, data, i) for i, d in enumerate(data.shape)]
    return [int_spec(etype, (Dim.of(len(data.shape)),), elems)]


@register("ShapeOf", since=1, attrs=NoAttrs, category="shape")
class ShapeOf1:
    @staticmethod
    def infer(attrs, data):
        return _shape_of(data, "i64")

    @staticmethod
    def run(attrs, data):
        return (np.array(data.shape, dtype=np.int64),)

    @staticmethod
    def prepare(attrs, inputs, values):
        return _shape_of_prepared(np.dtype(np.int64))

    @staticmethod
    def rule_ignores_dims(attrs, inputs):
        return True          # any shape has a shape; the output is [rank]


@dataclass(frozen=True)
class ShapeOf3Attrs:
    output_type: Literal["i32", "i64"] = "i64"


@register("ShapeOf", since=3, attrs=ShapeOf3Attrs, category="shape")
class ShapeOf3:
    @staticmethod
    def infer(attrs, data):
        return _shape_of(data, attrs.output_type)

    @staticmethod
    def run(attrs, data):
        return (np.array(data.shape, dtype=element_type(attrs.output_type).dtype),)

    @staticmethod
    def prepare(attrs, inputs, values):
        return _shape_of_prepared(element_type(attrs.output_type).dtype)

    @staticmethod
    def rule_ignores_dims(attrs, inputs):
        return True


def _shape_of_prepared(dtype):
    def shape_of(data):
        return np.array(data.shape, dtype=dtype)
    return shape_of, (0,)


# ---------------------------------------------------------------- Reshape


_TARGETS: dict = {}      # (input shape, pattern, special_zero) -> reshape_target's answer


def reshape_target(shape, pattern, special_zero: bool) -> tuple[int, ...]:
    """The concrete output shape for a concrete input shape and pattern."""
    out: list[int | None] = []
    minus = None
    for i, v in enumerate(pattern):
        if v == -1:
            if minus is not None:
                fail(f"target shape {list(pattern)} has more than one -1 "
                     f"(at positions {minus} and {i})")
            minus = i
            out.append(None)
        elif v < -1:
            fail(f"target shape {list(pattern)} has {v} at position {i}; "
                 "a dim must be >= -1")
        elif v == 0 and special_zero:
            if i >= len(shape):
                fail(f"target shape {list(pattern)} copies input dim {i} (special_zero), "
                     f"but the input shape {list(shape)} has rank {len(shape)}")
            out.append(int(shape[i]))
        else:
            out.append(int(v))
    total = math.prod(shape)
    if minus is not None:
        # Dims copied by special_zero are cancelled on both sides first, as OpenVINO does:
        # [0, -1] on [0, 3, 4] gives [0, 12], not [0, 0].
        copied = {i for i, v in enumerate(pattern) if v == 0 and special_zero}
        num = math.prod(d for i, d in enumerate(shape) if i not in copied)
        den = math.prod(d for i, d in enumerate(out) if d is not None and i not in copied)
        if den == 0 or num % den:
            if not (num == 0 and den == 0):
                fail(f"cannot reshape input shape {list(shape)} ({total} elements) to "
                     f"target shape {list(pattern)}: the other dims hold "
                     f"{math.prod(d for d in out if d is not None)} elements")
            out[minus] = 0
        else:
            out[minus] = num // den
    elif math.prod(out) != total:
        fail(f"cannot reshape input shape {list(shape)} ({total} elements) to target "
             f"shape {out} ({math.prod(out)} elements)")
    return tuple(out)


def _divide(num: Dim | None, den: Dim) -> Dim:
    """The interval of num / den for the -1 dim of a Reshape."""
    if num is None:
        return DYNAMIC
    if den.is_static and den.lo == 0:
        if num.hi == 0:
            return Dim.of(0)
        if num.lo > 0:
            fail(f"cannot compute the -1 dim: the other dims hold 0 elements, the input {num}")
        return DYNAMIC
    if num.is_static and den.is_static:
        # Exact even when dynamic input dims were cancelled: the division must work.
        if num.lo % den.lo:
            fail(f"cannot reshape: the input's {num} elements (beyond the dims it shares with "
                 f"the target) do not divide into the target's {den}")
        return Dim.of(num.lo // den.lo)
    lo = -(-num.lo // den.hi) if den.hi else 0
    hi = num.hi // den.lo if num.hi is not None and den.lo > 0 else None
    return Dim(lo, hi) if hi is None or lo <= hi else DYNAMIC


def reshape_dims(shape, elems, special_zero: bool, source=None):
    """Output partial shape for a partial input shape and partially known pattern."""
    if shape is not None and all(d.is_static for d in shape) and all(e.is_static for e in elems):
        return tuple(Dim.of(d) for d in reshape_target(
            static_values(shape), [e.lo for e in elems], special_zero))
    out: list[Dim] = []
    minus = None
    copied = set()
    own: dict[int, int] = {}     # output position -> the input dim it is known to equal
    for i, e in enumerate(elems):
        if e.is_static and e.lo == -1:
            if minus is not None:
                fail(f"target shape has more than one -1 (at positions {minus} and {i})")
            minus = i
            out.append(DYNAMIC)
        elif e.is_static and e.lo < -1:
            fail(f"target shape has {e.lo} at position {i}; a dim must be >= -1")
        elif e.is_static and e.lo == 0 and special_zero:
            if shape is None:
                out.append(DYNAMIC)
            elif i >= len(shape):
                fail(f"target shape copies input dim {i} (special_zero), but the input shape "
                     f"{format_shape(shape)} has rank {len(shape)}")
            else:
                out.append(shape[i])
                copied.add(i)
        elif e.lo < 0:
            out.append(DYNAMIC)   # may be -1: nothing is known of this dim
        elif special_zero and e.lo == 0 and shape is not None and i < len(shape):
            # Either the value itself or, when it is 0, the copied input dim.
            hi = None if e.hi is None or shape[i].hi is None else max(e.hi, shape[i].hi)
            out.append(Dim(min(e.lo, shape[i].lo), hi))
        else:
            out.append(Dim(e.lo, e.hi))
            if isinstance(e, DimOf) and e.source is source and source is not None:
                own[i] = e.index
    unknown_minus = any(not e.is_static and e.lo < 0 for e in elems)
    if minus is not None:
        # The dims special_zero copies, and those read from the input's own ShapeOf, are
        # the same on both sides: cancel them.
        cancel_in = set(copied)
        cancel_out = set(copied)
        for i, j in own.items():
            if j not in cancel_in:
                cancel_in.add(j)
                cancel_out.add(i)
        num = None if shape is None else _product(
            d for j, d in enumerate(shape) if j not in cancel_in)
        den = _product(d for j, d in enumerate(out) if j != minus and j not in cancel_out)
        out[minus] = DYNAMIC if unknown_minus else _divide(num, den)
        # The run time knows nothing of a dim read through ShapeOf: when that dim is 0,
        # the other dims hold 0 elements and -1 becomes 0.
        if any(shape[j].lo == 0 for j in own.values() if j not in copied):
            out[minus] = Dim(0, out[minus].hi)
    elif shape is not None and not unknown_minus:
        total, got = _product(shape), _product(out)
        if not total.compatible(got):
            fail(f"cannot reshape input shape {format_shape(shape)} ({total} elements) to "
                 f"target shape {format_shape(tuple(out))} ({got} elements)")
    return tuple(out)


@dataclass(frozen=True)
class ReshapeAttrs:
    special_zero: bool


@register("Reshape", since=1, attrs=ReshapeAttrs, category="shape")
class Reshape1:
    @staticmethod
    def infer(attrs, data, pattern):
        check_integer(pattern, "target shape (input 1)")
        check_rank(pattern, (0, 1), "target shape (input 1)")
        n = length(pattern)
        if n is None:
            return [TensorSpec(data.etype, None)]
        elems = elements(pattern) or (DYNAMIC,) * n
        shape = reshape_dims(data.shape, elems, attrs.special_zero, data)
        return [pass_elements(data, data.etype, shape)]

    @staticmethod
    def run(attrs, data, pattern):
        # reshape_target is a pure function of these three: a decode step reshapes the same
        # shapes every step, so the targets are kept (a refused one raises, and is not).
        key = (data.shape, tuple(pattern.reshape(-1).tolist()), attrs.special_zero)
        target = _TARGETS.get(key)
        if target is None:
            target = reshape_target(data.shape, list(key[1]), attrs.special_zero)
            if len(_TARGETS) >= 4096:
                _TARGETS.clear()
            _TARGETS[key] = target
        return (data.reshape(target),)

    @staticmethod
    def prepare(attrs, inputs, values):
        # A target the plan knows: the reshape, its target computed once, or per input
        # shape (kept) where that is dynamic; a target of run time, per shape and values.
        special_zero = attrs.special_zero
        if values[1] is None:
            targets: dict = {}

            def reshape(data, pattern):
                key = (data.shape, pattern.tobytes())
                target = targets.get(key)
                if target is None:
                    target = reshape_target(data.shape, pattern.reshape(-1).tolist(),
                                            special_zero)
                    if len(targets) >= 256:
                        targets.clear()
                    targets[key] = target
                return data.reshape(target)
            return reshape, (0, 1)
        pattern = values[1].reshape(-1).tolist()
        if is_static(inputs[0].shape):
            target = reshape_target(static_values(inputs[0].shape), pattern, special_zero)
            return np.ndarray.reshape, (0, Fixed(target))
        return _per_shape(lambda shape: reshape_target(shape, pattern, special_zero))


def _per_shape(target_of):
    """A prepared kernel reshaping its input to target_of(its shape), kept per shape (a
    decode step's dims grow by one a step: the last 256 shapes are kept)."""
    targets: dict = {}

    def reshape(data):
        target = targets.get(data.shape)
        if target is None:
            target = target_of(data.shape)
            if len(targets) >= 256:
                targets.clear()
            targets[data.shape] = target
        return data.reshape(target)
    return reshape, (0,)


# ---------------------------------------------------------------- Squeeze / Unsqueeze


@dataclass(frozen=True)
class Squeeze15Attrs:
    allow_axis_skip: bool = False


@register("Squeeze", since=(1, 15), attrs=(NoAttrs, Squeeze15Attrs), category="shape")
class Squeeze1:
    # Since OpenVINO 2024.3 (and in its spec) an axis whose dim is not 1 is ignored, not an
    # error. A dynamic dim named by an axis counts as 1; if it is not 1 at run time, the
    # executor reports the output shape that disagrees with inference (OpenVINO fails too).
    @staticmethod
    def infer(attrs, data, axes=None):
        if axes is not None:
            check_integer(axes, "axes (input 1)")
            check_rank(axes, (0, 1), "axes (input 1)")
        shape = data.shape
        if shape is None:
            return [TensorSpec(data.etype, None)]
        if axes is None or length(axes) == 0:
            if any(not d.is_static and d.contains(1) for d in shape):
                return [TensorSpec(data.etype, None)]
            out = tuple(d for d in shape if d.value != 1)
            return [pass_elements(data, data.etype, out)]
        values = known_ints(axes)
        if values is None:
            return [TensorSpec(data.etype, None)]
        drop = set()
        for a in values:
            i = normalize_axis(a, len(shape), "axes value")
            d = shape[i]
            if getattr(attrs, "allow_axis_skip", False) and not d.is_static and d.contains(1):
                # Squeeze-15: such a dim may or may not be squeezed: the rank is unknown.
                return [TensorSpec(data.etype, None)]
            if d.contains(1):
                drop.add(i)
            else:
                warn(f"axis {a} names dim {i} = {d}, which is not 1: Squeeze keeps it")
        out = tuple(d for i, d in enumerate(shape) if i not in drop)
        return [pass_elements(data, data.etype, out)]

    @staticmethod
    def run(attrs, data, axes=None):
        return (data.reshape(_squeezed(data.shape, axes)),)

    @staticmethod
    def prepare(attrs, inputs, values):
        if len(values) > 1 and values[1] is None or inputs[0].shape is None:
            return None
        axes = values[1] if len(values) > 1 else None
        if not is_static(inputs[0].shape):
            return _per_shape(lambda shape: _squeezed(shape, axes))
        shape = _squeezed(static_values(inputs[0].shape), axes)
        return np.ndarray.reshape, (0, Fixed(shape))


def _squeezed(shape: tuple, axes) -> tuple:
    """Squeeze's output shape for an input of `shape` and the axes input's array (or None)."""
    if axes is None or axes.size == 0:
        return tuple(d for d in shape if d != 1)
    drop = {normalize_axis(int(a), len(shape), "axes value") for a in axes.reshape(-1).tolist()}
    return tuple(d for i, d in enumerate(shape) if not (i in drop and d == 1))


_UNSQUEEZED: dict = {}    # (data shape, axes) -> Unsqueeze's output shape


def _unsqueeze_axes(values, rank) -> set[int]:
    # Normalized against rank + the number of distinct values; repeats count once
    # (OpenVINO: [2,3] with axes [0,0] gives [1,2,3], with [-1,3] gives [2,3,1]).
    out_rank = rank + len(set(values))
    return {normalize_axis(a, out_rank, "axes value") for a in values}


def _unsqueeze_shape(shape, axes: set[int]):
    out = list(shape)
    for a in sorted(axes):
        # An axis past the end (possible only when repeats merged) appends, as in OpenVINO.
        out.insert(a, Dim.of(1)) if a < len(out) else out.append(Dim.of(1))
    return tuple(out)


@register("Unsqueeze", since=1, attrs=NoAttrs, category="shape")
class Unsqueeze1:
    @staticmethod
    def infer(attrs, data, axes):
        check_integer(axes, "axes (input 1)")
        check_rank(axes, (0, 1), "axes (input 1)")
        values = known_ints(axes)
        if data.shape is None or values is None:
            return [TensorSpec(data.etype, None)]
        norm = _unsqueeze_axes(values, len(data.shape))
        return [pass_elements(data, data.etype, _unsqueeze_shape(data.shape, norm))]

    @staticmethod
    def run(attrs, data, axes):
        key = (data.shape, tuple(axes.reshape(-1).tolist()))
        out = _UNSQUEEZED.get(key)
        if out is None:
            out = _unsqueezed(*key)
            if len(_UNSQUEEZED) >= 4096:
                _UNSQUEEZED.clear()
            _UNSQUEEZED[key] = out
        return (data.reshape(out),)

    @staticmethod
    def prepare(attrs, inputs, values):
        if values[1] is None or inputs[0].shape is None:
            return None
        axes = tuple(values[1].reshape(-1).tolist())
        if not is_static(inputs[0].shape):
            return _per_shape(lambda shape: _unsqueezed(shape, axes))
        out = _unsqueezed(static_values(inputs[0].shape), axes)
        return np.ndarray.reshape, (0, Fixed(out))

    @staticmethod
    def rule_ignores_dims(attrs, inputs):
        return inputs[1].value is not None   # known axes against the rank; a view


def _unsqueezed(shape: tuple, axes: tuple) -> tuple:
    """Unsqueeze's output shape (ints) for an input of `shape` and the axes' values."""
    out = list(shape)                 # _unsqueeze_shape's, on ints
    for a in sorted(_unsqueeze_axes(list(axes), len(shape))):
        out.insert(a, 1) if a < len(out) else out.append(1)
    return tuple(out)


# ---------------------------------------------------------------- Range


@dataclass(frozen=True)
class Range4Attrs:
    output_type: ElementTypeName


def _range_count(start, stop, step) -> int:
    if step == 0:
        fail("step (input 2) is 0", code="value")
    if all(isinstance(v, int) for v in (start, stop, step)):
        return max(-((start - stop) // step), 0)    # exact ceil((stop - start) / step)
    n = (stop - start) / step
    if not math.isfinite(n):
        fail(f"the number of elements of Range({start}, {stop}, {step}) is not finite")
    return max(math.ceil(n), 0)


def _scalar(a: np.ndarray):
    v = a.reshape(-1)[0]
    return int(v) if a.dtype.kind in "iu" else float(v)


@register("Range", since=4, attrs=Range4Attrs, category="generation")
class Range4:
    @staticmethod
    def infer(attrs, start, stop, step):
        try:
            et = element_type(attrs.output_type)
        except ValueError as e:
            fail(str(e))
        if et.kind == "bool":
            fail("output_type must be a numeric type, got boolean")
        for spec, name in ((start, "start (input 0)"), (stop, "stop (input 1)"),
                           (step, "step (input 2)")):
            if spec.etype.kind == "bool":
                fail(f"{name} must be numeric, got boolean")
            if spec.shape is not None and not (len(spec.shape) == 0 or (
                    len(spec.shape) == 1 and spec.shape[0].compatible(Dim.of(1)))):
                fail(f"{name} must be a scalar, got {format_shape(spec.shape)}")
        values = [None if s.value is None else _scalar(s.value) for s in (start, stop, step)]
        if all(v is not None for v in values):
            n = _range_count(*values)
            return [TensorSpec(et, (Dim.of(n),))]
        # A stop known as an interval (from a ShapeOf) with a known start and step.
        s0, s2, stop_el = values[0], values[2], elements(stop)
        if isinstance(s0, int) and isinstance(s2, int) and s2 > 0 and stop_el and len(stop_el) == 1:
            d = stop_el[0]
            lo = max(-((s0 - d.lo) // s2), 0)
            hi = None if d.hi is None else max(-((s0 - d.hi) // s2), 0)
            return [TensorSpec(et, (Dim(lo, hi),))]
        return [TensorSpec(et, (DYNAMIC,))]

    @staticmethod
    def run(attrs, start, stop, step):
        et = element_type(attrs.output_type)
        s0, s1, s2 = _scalar(start), _scalar(stop), _scalar(step)
        n = _range_count(s0, s1, s2)
        check_alloc((n,), et.dtype, "Range output")
        if all(isinstance(v, int) for v in (s0, s1, s2)):
            values = s0 + np.arange(n, dtype=np.int64) * s2
        else:
            # Computed in f64 (the accumulate type), then cast like Convert (toward zero).
            values = np.float64(s0) + np.arange(n, dtype=np.float64) * np.float64(s2)
        return (convert_array(values, et),)

    @staticmethod
    def prepare(attrs, inputs, values):
        # run, its output type looked up once, and its cast when that is astype.
        et = element_type(attrs.output_type)
        cast = convert_is_astype(np.dtype(np.int64), None, et.name)
        arange = np.arange

        def range4(start, stop, step):
            s0, s1, s2 = _scalar(start), _scalar(stop), _scalar(step)
            n = _range_count(s0, s1, s2)
            check_alloc((n,), et.dtype, "Range output")
            if type(s0) is int and type(s1) is int and type(s2) is int:
                values = s0 + arange(n, dtype=np.int64) * s2
                return values.astype(cast) if cast is not None else convert_array(values, et)
            values = np.float64(s0) + arange(n, dtype=np.float64) * np.float64(s2)
            return convert_array(values, et)
        return range4, (0, 1, 2)


@register("Range", since=1, category="generation")
class Range1:
    """Range-1: like Range-4, but the output has the inputs' element type, which all three
    share. OpenVINO's Python API (opset4.range and newer) writes this version too."""

    @staticmethod
    def infer(attrs, start, stop, step):
        types = {s.etype.name for s in (start, stop, step)}
        if len(types) != 1:
            fail(f"start, stop and step must have the same element type, got "
                 f"{start.etype.name}, {stop.etype.name} and {step.etype.name}")
        return Range4.infer(Range4Attrs(start.etype.name), start, stop, step)

    @staticmethod
    def run(attrs, start, stop, step):
        return Range4.run(Range4Attrs(from_dtype(start.dtype).name), start, stop, step)


# ---------------------------------------------------------------- Broadcast


def _target_dims(target: TensorSpec):
    check_integer(target, "target_shape (input 1)")
    check_rank(target, (1,), "target_shape (input 1)")
    n = length(target)
    if n is None:
        return None
    elems = elements(target)
    if elems is None:
        return (DYNAMIC,) * n
    out = []
    for i, e in enumerate(elems):
        if e.is_static and e.lo < 0:
            fail(f"target_shape has {e.lo} at position {i}; dims must be >= 0")
        out.append(Dim(max(e.lo, 0), e.hi))
    return tuple(out)


def _broadcast_pair(a: Dim, b: Dim, how: str) -> Dim:
    if a.value == 1:
        return b
    if b.value == 1:
        return a
    merged = a.merge(b)
    if merged is None:
        fail(f"{how}: dims {a} and {b} are not equal and neither is 1")
    if a.contains(1) or b.contains(1):
        # Either may still be 1 at run time: the result is at least as large as each.
        hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
        return Dim(max(a.lo, b.lo), hi)
    return merged


def _numpy_dims(data_shape, target):
    if len(data_shape) > len(target):
        fail(f"numpy mode: data shape {format_shape(data_shape)} has a higher rank than target "
             f"shape {format_shape(target)}")
    out = list(target)
    off = len(target) - len(data_shape)
    for i, d in enumerate(data_shape):
        t = target[off + i]
        if d.value == 1:
            continue
        if t.is_static and d.is_static and t.value != d.value:
            fail(f"numpy mode: data dim {i} = {d} cannot be broadcast to target dim {t} "
                 f"(data shape {format_shape(data_shape)}, target {format_shape(target)})")
        if not t.is_static:
            out[off + i] = d if d.is_static else (t.merge(d) or t)
    return tuple(out)


def _bidirectional_dims(a, b):
    n = max(len(a), len(b))
    a = (Dim.of(1),) * (n - len(a)) + tuple(a)
    b = (Dim.of(1),) * (n - len(b)) + tuple(b)
    return tuple(_broadcast_pair(x, y, "bidirectional mode") for x, y in zip(a, b))


def _explicit_check(data_shape, target, axes):
    if len(axes) != len(data_shape):
        fail(f"explicit mode: axes_mapping {axes} must have one entry per data dim "
             f"(data shape {format_shape(data_shape)})")
    if any(b <= a for a, b in zip(axes, axes[1:])):
        fail(f"explicit mode: axes_mapping {axes} must be increasing (no transposes)")
    for i, a in enumerate(axes):
        if not 0 <= a < len(target):
            fail(f"explicit mode: axes_mapping value {a} is out of range "
                 f"[0, {len(target) - 1}] for target {format_shape(target)}")
        d, t = data_shape[i], target[a]
        if d.value != 1 and not d.compatible(t):
            fail(f"explicit mode: data dim {i} = {d} does not match target dim {a} = {t}")


def _broadcast_infer(attrs, data, target, axes_mapping):
    attrs = _explicit_alias(attrs)
    if attrs.mode == "pdpd":
        raise UnsupportedError("Broadcast mode 'pdpd' is not supported yet")
    dims = _target_dims(target)
    if dims is None or data.shape is None:
        if attrs.mode == "bidirectional" or dims is None:
            return [TensorSpec(data.etype, None)]
        return [TensorSpec(data.etype, dims)]
    if attrs.mode == "numpy":
        return [TensorSpec(data.etype, _numpy_dims(data.shape, dims))]
    if attrs.mode == "bidirectional":
        return [TensorSpec(data.etype, _bidirectional_dims(data.shape, dims))]
    if axes_mapping is None:
        fail("explicit mode needs axes_mapping (input 2)")
    check_integer(axes_mapping, "axes_mapping (input 2)")
    axes = known_ints(axes_mapping)
    if axes is not None:
        _explicit_check(data.shape, dims, axes)
    return [TensorSpec(data.etype, dims)]


def _explicit_alias(attrs):
    return Broadcast3Attrs("explicit") if attrs.mode == "none" else attrs


def _numpy_broadcast(a: tuple, b: tuple) -> tuple | None:
    """np.broadcast_shapes of two int shapes (without its cost), None when they do not."""
    n = max(len(a), len(b))
    out = []
    for x, y in zip((1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def _broadcast_run(attrs, data, target, axes_mapping):
    attrs = _explicit_alias(attrs)
    shape = tuple(int(v) for v in target.reshape(-1).tolist())
    if any(v < 0 for v in shape):
        fail(f"target_shape {list(shape)} has a negative dim")
    if attrs.mode == "bidirectional":
        both = _numpy_broadcast(data.shape, shape)
        if both is None:
            fail(f"bidirectional mode: data shape {list(data.shape)} and target "
                 f"{list(shape)} do not broadcast")
        shape = both
    elif attrs.mode == "numpy":
        off = len(shape) - data.ndim
        if off < 0 or any(d != 1 and d != shape[off + i] for i, d in enumerate(data.shape)):
            fail(f"numpy mode: data shape {list(data.shape)} cannot be broadcast to "
                 f"target shape {list(shape)}")
    elif attrs.mode == "explicit":
        if axes_mapping is None:
            fail("explicit mode needs axes_mapping (input 2)")
        axes = [int(a) for a in axes_mapping.reshape(-1).tolist()]
        _explicit_check(shape_dims(data.shape), shape_dims(shape), axes)
        if any(d != 1 and d != shape[a] for d, a in zip(data.shape, axes)):
            fail(f"explicit mode: data shape {list(data.shape)} does not match target "
                 f"{list(shape)} at axes {axes}")
        placed = [1] * len(shape)
        for d, a in zip(data.shape, axes):
            placed[a] = d
        data = data.reshape(placed)
    else:
        raise UnsupportedError(f"Broadcast mode '{attrs.mode}' is not supported yet")
    check_alloc(shape, data.dtype, "Broadcast output")
    out = np.empty(shape, data.dtype)
    np.copyto(out, data)          # broadcasts data (np.broadcast_to's checks were done above)
    return (out,)


@dataclass(frozen=True)
class Broadcast1Attrs:
    # OpenVINO writes Broadcast-1's explicit mode as "none" (its AutoBroadcastType name).
    mode: Literal["numpy", "explicit", "none", "pdpd"] = "numpy"


@dataclass(frozen=True)
class Broadcast3Attrs:
    mode: Literal["numpy", "explicit", "bidirectional", "pdpd"] = "numpy"


@register("Broadcast", since=(1, 3), attrs=(Broadcast1Attrs, Broadcast3Attrs),
          category="movement")
class Broadcast:
    @staticmethod
    def infer(attrs, data, target_shape, axes_mapping=None):
        return _broadcast_infer(attrs, data, target_shape, axes_mapping)

    @staticmethod
    def run(attrs, data, target_shape, axes_mapping=None):
        return _broadcast_run(attrs, data, target_shape, axes_mapping)

    @staticmethod
    def prepare(attrs, inputs, values):
        # _broadcast_run of the numpy and bidirectional modes, its mode decided once.
        mode = _explicit_alias(attrs).mode
        if mode not in ("numpy", "bidirectional") or inputs[1].etype.kind not in ("int", "uint"):
            return None
        bidirectional = mode == "bidirectional"

        def broadcast(data, target):
            shape = tuple(target.reshape(-1).tolist())
            if shape and min(shape) < 0:
                fail(f"target_shape {list(shape)} has a negative dim")
            if bidirectional:
                both = _numpy_broadcast(data.shape, shape)
                if both is None:
                    fail(f"bidirectional mode: data shape {list(data.shape)} and target "
                         f"{list(shape)} do not broadcast")
                shape = both
            else:
                off = len(shape) - data.ndim
                if off < 0 or any(d != 1 and d != shape[off + i] for i, d in enumerate(data.shape)):
                    fail(f"numpy mode: data shape {list(data.shape)} cannot be broadcast to "
                         f"target shape {list(shape)}")
            check_alloc(shape, data.dtype, "Broadcast output")
            out = np.empty(shape, data.dtype)
            np.copyto(out, data)
            return out
        return broadcast, (0, 1)


# ---------------------------------------------------------------- Tile


@register("Tile", since=1, attrs=NoAttrs, category="movement")
class Tile1:
    # repeats shorter than the rank are padded with leading 1s; longer ones add leading
    # dims of size 1 to the data (numpy.tile does both).
    @staticmethod
    def infer(attrs, data, repeats):
        check_integer(repeats, "repeats (input 1)")
        check_rank(repeats, (1,), "repeats (input 1)")
        n = length(repeats)
        if n is None or data.shape is None:
            return [TensorSpec(data.etype, None)]
        reps = elements(repeats) or (DYNAMIC,) * n
        for i, r in enumerate(reps):
            if r.is_static and r.lo < 0:
                fail(f"repeats has {r.lo} at position {i}; repeats must be >= 0")
        rank = max(n, len(data.shape))
        shape = (Dim.of(1),) * (rank - len(data.shape)) + tuple(data.shape)
        reps = (Dim.of(1),) * (rank - n) + tuple(Dim(max(r.lo, 0), r.hi) for r in reps)
        return [TensorSpec(data.etype, tuple(d * r for d, r in zip(shape, reps)))]

    @staticmethod
    def run(attrs, data, repeats):
        reps = [int(r) for r in repeats.reshape(-1).tolist()]
        if any(r < 0 for r in reps):
            fail(f"repeats {reps} has a negative value")
        rank = max(len(reps), data.ndim)
        full = (1,) * (rank - data.ndim) + data.shape
        reps_full = [1] * (rank - len(reps)) + reps
        check_alloc([d * r for d, r in zip(full, reps_full)], data.dtype, "Tile output")
        return (np.tile(data, reps),)


# ---------------------------------------------------------------- ConvertLike


@dataclass(frozen=True)
class ConvertLikeBound:
    """ConvertLike's attributes once the loader knows its inputs (ConvertLike1.bind): the
    element type of "like", which its array does not carry for i4/u4/u1 (held as int8/uint8)."""
    destination_type: str


@register("ConvertLike", since=1, attrs=NoAttrs, category="type")
class ConvertLike1:
    @staticmethod
    def bind(attrs, data, like):
        return ConvertLikeBound(like.etype.name)

    @staticmethod
    def infer(attrs, data, like):
        if (like.etype.name == "string") != (data.etype.name == "string"):
            fail(f"ConvertLike cannot convert {data.etype.name} to {like.etype.name}: strings "
                 "convert with StringTensorUnpack-15 / StringTensorPack-15")
        return [pass_elements(data, like.etype, data.shape)]

    @staticmethod
    def run(attrs, data, like):
        # The destination is like's element type (bound at load); a kernel called without
        # the loader falls back to the NumPy dtype, which is exact for byte-sized types.
        dst = getattr(attrs, "destination_type", None) or from_dtype(like.dtype)
        # asarray: a 0-d comparison (anything -> boolean) gives a NumPy scalar, not an array.
        return (np.asarray(convert_array(data, dst)),)
