"""Broadcasting of partial shapes (the IR's numpy and none rules) and element-type agreement."""
from __future__ import annotations

from irrun.errors import UnsupportedError
from irrun.ir.shapes import Dim, TensorSpec, format_shape

from .problems import fail


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


def check_arrays_broadcast(mode: str, a, b) -> None:
    """At run time, the binary ops' auto_broadcast rule on two arrays (numpy or none), for
    shapes the rule could not check at load time."""
    if mode == "none" and a.shape != b.shape:
        fail(f"auto_broadcast='none' needs equal shapes, got {list(a.shape)} and {list(b.shape)}")
    # NumPy's rule, dim by dim from the right (np.broadcast_shapes took most of a small
    # Multiply's time).
    for x, y in zip(reversed(a.shape), reversed(b.shape)):
        if x != y and x != 1 and y != 1:
            fail(f"shapes do not broadcast (numpy rules): input 0 {list(a.shape)} and "
                 f"input 1 {list(b.shape)}")
