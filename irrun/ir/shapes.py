"""Partial shapes (static, dynamic, interval dims, dynamic rank) and TensorSpec."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .etypes import ElementType, element_type


@dataclass(frozen=True, slots=True)
class Dim:
    """One dimension: the interval [lo, hi]; hi None means unbounded. Static when lo == hi."""

    lo: int = 0
    hi: int | None = None

    @classmethod
    def of(cls, value) -> "Dim":
        if isinstance(value, Dim):
            return value
        if value is None or value == -1:
            return DYNAMIC
        value = int(value)
        return cls(value, value)

    @property
    def is_static(self) -> bool:
        return self.hi is not None and self.lo == self.hi

    @property
    def value(self) -> int | None:
        """The static value, or None."""
        return self.lo if self.is_static else None

    def contains(self, n: int) -> bool:
        return self.lo <= n and (self.hi is None or n <= self.hi)

    def compatible(self, other: "Dim") -> bool:
        """Whether the two intervals overlap."""
        other = Dim.of(other)
        return (self.hi is None or other.lo <= self.hi) and (other.hi is None or self.lo <= other.hi)

    def merge(self, other: "Dim") -> "Dim | None":
        """The intersection of two dims, or None when they cannot be equal."""
        other = Dim.of(other)
        lo = max(self.lo, other.lo)
        hi = self.hi if other.hi is None else other.hi if self.hi is None else min(self.hi, other.hi)
        if hi is not None and lo > hi:
            return None
        return Dim(lo, hi)

    def __add__(self, other):
        other = Dim.of(other)
        hi = None if self.hi is None or other.hi is None else self.hi + other.hi
        return Dim(self.lo + other.lo, hi)

    __radd__ = __add__

    def __mul__(self, other):
        other = Dim.of(other)
        hi = None if self.hi is None or other.hi is None else self.hi * other.hi
        if (self.hi == 0) or (other.hi == 0):
            hi = 0
        return Dim(self.lo * other.lo, hi)

    __rmul__ = __mul__

    # A static dim behaves as its int (`shape[1] == 4`, `int(d)`, `range(d)`, NumPy shapes);
    # a dynamic one has no single value and says so.
    def __eq__(self, other):
        if isinstance(other, Dim):
            return self.lo == other.lo and self.hi == other.hi
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            return self.is_static and self.lo == other
        return NotImplemented

    def __hash__(self):
        return hash(self.lo) if self.is_static else hash((self.lo, self.hi))

    def __int__(self) -> int:
        if not self.is_static:
            raise TypeError(f"dim {self} is dynamic: it has no single value (use .lo and .hi, "
                            "or check .is_static first)")
        return self.lo

    __index__ = __int__

    def __str__(self) -> str:
        if self.is_static:
            return str(self.lo)
        if self.lo == 0 and self.hi is None:
            return "?"
        return f"{self.lo if self.lo else ''}..{'' if self.hi is None else self.hi}"

    __repr__ = __str__


DYNAMIC = Dim(0, None)


def shape_of(dims) -> tuple[Dim, ...] | None:
    """A shape tuple from ints / Dims / None (dynamic dim); None stays dynamic rank."""
    if dims is None:
        return None
    return tuple(Dim.of(d) for d in dims)


def format_shape(shape) -> str:
    if shape is None:
        return "[...]"
    return "[" + ",".join(str(d) for d in shape) + "]"


def is_static(shape) -> bool:
    return shape is not None and all(d.is_static for d in shape)


def static_values(shape) -> tuple[int, ...]:
    return tuple(d.value for d in shape)


def shape_matches(shape, concrete) -> bool:
    """Whether a concrete shape (tuple of ints) fits the partial shape."""
    if shape is None:
        return True
    return len(shape) == len(concrete) and all(d.contains(n) for d, n in zip(shape, concrete))


_DIM = re.compile(r"^(?:(\?|-1)|(\d+)|(\d*)\.\.(\d*))$")


def parse_dim(text: str) -> Dim:
    m = _DIM.match(text.strip())
    if not m:
        raise ValueError(f"'{text}' is not a dimension (expected N, ?, -1, a..b, ..b or a..)")
    if m.group(1):
        return DYNAMIC
    if m.group(2):
        return Dim.of(int(m.group(2)))
    lo = int(m.group(3)) if m.group(3) else 0
    hi = int(m.group(4)) if m.group(4) else None
    if hi is not None and lo > hi:
        raise ValueError(f"'{text}' is an empty interval ({lo} > {hi})")
    return Dim(lo, hi)


# Parsed shapes by text: a file spells the same few shapes on many layers.
_PARSED: dict[str, tuple[Dim, ...] | None] = {}


def parse_partial_shape(text: str) -> tuple[Dim, ...] | None:
    """The IR partial-shape grammar: `1,3,?`, `-1`, `2..10`, `..5`, `3..`, `...`, `""`, `[1,?]`."""
    if type(text) is str:
        found = _PARSED.get(text, False)
        if found is False:
            found = _parse_partial_shape(text)   # a ValueError is not kept
            if len(_PARSED) < 4096 and len(text) < 200:
                _PARSED[text] = found
        return found
    return _parse_partial_shape(text)


def _parse_partial_shape(text: str) -> tuple[Dim, ...] | None:
    s = text.strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1].strip()
    if s == "...":
        return None
    if s == "":
        return ()
    return tuple(parse_dim(part) for part in s.split(","))


@dataclass(frozen=True)
class TensorSpec:
    """What inference knows about one tensor: element type, partial shape and maybe its value."""

    etype: ElementType
    shape: tuple[Dim, ...] | None
    value: np.ndarray | None = None   # known at inference time (a constant or folded)
    # Partial value of a rank-0/1 integer tensor (what OpenVINO's value bounds carry): its
    # elements in order, each as the interval it is known to lie in (a static Dim may hold a
    # negative value). ShapeOf produces it, Gather/Concat/... pass it on, Reshape reads it.
    dims: tuple[Dim, ...] | None = None

    @classmethod
    def make(cls, etype, shape, value=None) -> "TensorSpec":
        return cls(element_type(etype), shape_of(shape), value)

    @classmethod
    def of_value(cls, value: np.ndarray, etype) -> "TensorSpec":
        value = np.asarray(value)
        return cls(element_type(etype), shape_of(value.shape), value)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __str__(self) -> str:
        return f"{self.etype.name}{format_shape(self.shape)}"
