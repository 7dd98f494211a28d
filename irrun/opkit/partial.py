"""Partial values and small-integer-tensor helpers: what inference knows of a shape tensor's
elements, so `x[?,3,4] -> ShapeOf -> Gather -> Concat -> Reshape` keeps its static dims, as
OpenVINO's value bounds do; and the rank/axis checks every shape rule makes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irrun.ir.etypes import element_type
from irrun.ir.shapes import Dim, TensorSpec, format_shape, static_values

from .problems import fail


@dataclass(frozen=True, slots=True, eq=False)
class DimOf(Dim):
    """An element of a ShapeOf output that is dim `index` of the tensor `source`.

    Inference passes the same TensorSpec object to every consumer of an output, so
    Reshape can tell that `x.view(x.shape[0], -1)` divides by x's own dim 0 and cancel it
    (OpenVINO does this with dimension symbols). Only inside TensorSpec.dims, never in shapes.
    """

    source: object = None
    index: int = 0


def exact(v) -> Dim:
    """The element value v as a static Dim (Dim.of would read -1 as 'dynamic')."""
    return Dim(int(v), int(v))


def elements(spec: TensorSpec) -> tuple[Dim, ...] | None:
    """What inference knows of the elements of a rank-0/1 integer tensor, else None."""
    if spec.value is not None:
        if spec.value.ndim > 1 or spec.etype.kind not in ("int", "uint"):
            return None
        return tuple(exact(v) for v in spec.value.reshape(-1).tolist())
    return spec.dims


def known_ints(spec: TensorSpec) -> list[int] | None:
    """The values of a rank-0/1 integer tensor when all are known."""
    el = elements(spec)
    if el is None or not all(d.is_static for d in el):
        return None
    return [d.lo for d in el]


def int_spec(etype, shape, elems) -> TensorSpec:
    """A small integer output: with its value when every element is known, else its dims."""
    etype = element_type(etype)
    if elems is None:
        return TensorSpec(etype, shape)
    elems = tuple(elems)
    if all(d.is_static for d in elems) and shape is not None and all(d.is_static for d in shape):
        info = np.iinfo(etype.dtype)
        if all(info.min <= d.lo <= info.max for d in elems):
            value = np.array([d.lo for d in elems], dtype=etype.dtype).reshape(static_values(shape))
            return TensorSpec(etype, shape, value)
    return TensorSpec(etype, shape, dims=elems)


def pass_elements(data: TensorSpec, etype, shape) -> TensorSpec:
    """An output holding data's elements in the same order (Reshape, Squeeze, Convert, ...)."""
    etype = element_type(etype)
    if etype.kind in ("int", "uint") and shape is not None and len(shape) <= 1:
        el = elements(data)
        if el is not None and (etype.kind == "int" or all(d.lo >= 0 for d in el)):
            return int_spec(etype, shape, el)
    return TensorSpec(etype, shape)


def add_elements(a: TensorSpec, b: TensorSpec, out: TensorSpec) -> TensorSpec:
    """`out` (an Add's output) with the sums of what is known of a's and b's elements, as
    OpenVINO's value bounds add lower and upper bounds: `x.shape[2] + 1` of a dynamic dim
    stays a dim of at least 1, so the Concat and Broadcast after it keep their static
    dims. Only sums whose bounds are all non-negative and fit the type; else `out`."""
    if (out.value is not None or out.etype.kind not in ("int", "uint") or out.shape is None
            or len(out.shape) > 1):
        return out
    ea, eb = elements(a), elements(b)
    if ea is None or eb is None:
        return out
    if len(ea) == 1 and len(eb) != 1:
        ea = ea * len(eb)
    elif len(eb) == 1 and len(ea) != 1:
        eb = eb * len(ea)
    if len(ea) != len(eb) or (out.shape and out.shape[0].value != len(ea)):
        return out
    top = int(np.iinfo(out.etype.dtype).max)
    sums = []
    for x, y in zip(ea, eb):
        d = x + y
        if d.lo < 0 or d.lo > top:
            return out
        sums.append(d if d.hi is None or d.hi <= top else Dim(d.lo, None))
    return int_spec(out.etype, out.shape, sums)


def check_integer(spec: TensorSpec, what: str) -> None:
    if spec.etype.kind not in ("int", "uint"):
        fail(f"{what} must have an integer element type, got {spec.etype.name}")


def check_rank(spec: TensorSpec, ranks, what: str) -> None:
    if spec.rank is not None and spec.rank not in ranks:
        want = " or ".join(str(r) for r in ranks)
        fail(f"{what} must have rank {want}, got {format_shape(spec.shape)}")


def length(spec: TensorSpec) -> int | None:
    """Number of elements of a rank-0/1 tensor, when static."""
    if spec.shape is None:
        return None
    if len(spec.shape) == 0:
        return 1
    return spec.shape[0].value


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """axis in [-rank, rank - 1] as a non-negative axis; fails naming `what` otherwise."""
    if not -rank <= axis < rank:
        fail(f"{what} {axis} is out of range [{-rank}, {rank - 1}] for rank {rank}")
    return axis + rank if axis < 0 else axis


def shape_dims(shape) -> tuple[Dim, ...]:
    """A concrete shape (ints) as static Dims."""
    return tuple(Dim.of(d) for d in shape)


def known_int_vector(spec: TensorSpec, what: str) -> list[int] | None:
    """A 1-D integer input's values when all are known (checking its type and rank)."""
    check_integer(spec, what)
    check_rank(spec, (1,), what)
    return known_ints(spec)


def slice_index(rank: int, start, stop, step, axes) -> list:
    """The NumPy index of Slice-8 / SliceScatter-15: one slice(start, stop, step) per named
    axis. Python slices clamp start and stop and count negative values from the end, as the
    specs ask (INT_MAX / INT_MIN reach the ends)."""
    if not len(start) == len(stop) == len(step) == len(axes):
        fail(f"start, stop, step and axes must have the same length, got "
             f"{len(start)}, {len(stop)}, {len(step)} and {len(axes)}")
    index = [slice(None)] * rank
    seen = set()
    for a, b, e, s in zip(axes, start, stop, step):
        if s == 0:
            fail(f"step is 0 for axis {a}", code="value")
        ax = normalize_axis(a, rank, "axes value")
        if ax in seen:
            fail(f"axes {list(axes)} name dim {ax} twice")
        seen.add(ax)
        index[ax] = slice(b, e, s)
    return index
