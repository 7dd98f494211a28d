"""Bucketize-3 (spec page: condition/Bucketize_3)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    ElementType, OpProblem, TensorSpec, even_ranges, fail, from_dtype, parallel, register, warn,
    workers,
)


@dataclass(frozen=True)
class BucketizeAttrs:
    output_type: Literal["i32", "i64"] = "i64"
    with_right_bound: bool = True


def compare_dtype(data: ElementType, boundaries: ElementType) -> np.dtype | None:
    """The type C++ compares `data < boundary` in; None for u64 against a signed integer.

    f64 if either side is f64; else f32 if either is a float (f16 and bf16 widen to f32, and
    an integer meets a float in f32: i64 data against f32 boundaries compares in f32);
    else the integers compare exactly. NumPy's own promotion differs (f32 with i64 gives
    f64), so it is not used for floats. u64 against a signed type has no common exact
    NumPy type: the kernel splits off the values outside the other side's range.
    """
    kinds = {data.kind, boundaries.kind}
    if "float" in kinds:
        return np.dtype(np.float64) if "f64" in (data.name, boundaries.name) else np.dtype(np.float32)
    common = np.result_type(data.dtype, boundaries.dtype)
    return common if common.kind in "iu" else None


def _check_boundaries(b: np.ndarray) -> None:
    """Sorted ascending (repeats allowed) and NaN-free, or an OpError naming the position."""
    if b.dtype.kind not in "iub":
        nan = np.flatnonzero(np.isnan(b))
        if nan.size:
            fail(f"boundaries[{nan[0]}] is NaN; boundaries must be sorted ascending "
                 f"and free of NaN")
    down = np.flatnonzero(b[1:] < b[:-1])
    if down.size:
        i = int(down[0])
        fail(f"boundaries must be sorted ascending, but boundaries[{i}] = {b[i]} > "
             f"boundaries[{i + 1}] = {b[i + 1]}")


# Elements per block: the working arrays of one block stay in the L2 cache across the
# ~log2(len(boundaries)) passes of the search.
_BLOCK = 1 << 15
# Inputs are split over the op kit's shared pool (NumPy releases the GIL) in parts of at
# least this many elements.
_PARALLEL_MIN = 1 << 17


def _search_range(table: np.ndarray, x: np.ndarray, out: np.ndarray, lower: bool, n: int) -> None:
    """out[i] = std::lower_bound (lower=True) or std::upper_bound of x[i] in table[:n].

    A branchless binary search vectorised over the elements: `table` is the sorted
    boundaries padded to a power of two with the type's maximum. Each pass asks the very
    comparison std::lower_bound (`b < x`) or std::upper_bound (`!(x < b)`) asks, so NaN
    data lands where C++ puts it: 0 for lower_bound, past the end for upper_bound.
    """
    p = table.size
    size = min(_BLOCK, x.size)
    idx = np.empty(size, np.intp)
    cand = np.empty(size, np.intp)
    val = np.empty(size, table.dtype)
    hit = np.empty(size, np.bool_)
    inc = np.empty(size, np.intp)
    for start in range(0, x.size, size):
        xs = x[start:start + size]
        k = xs.size
        i, c, v, h, d = idx[:k], cand[:k], val[:k], hit[:k], inc[:k]
        i.fill(0)
        step = p >> 1
        while step:
            np.add(i, step - 1, out=c)
            table.take(c, out=v, mode="clip")
            if lower:
                np.less(v, xs, out=h)
            else:
                np.less(xs, v, out=h)
                np.logical_not(h, out=h)   # !(x < b), which is true for NaN x
            np.multiply(h, step, out=d)
            i += d
            step >>= 1
        if not lower:
            # The padding equals the type's maximum, and x == max (or NaN) counts it too.
            np.minimum(i, n, out=i)
        out[start:start + k] = i


def bucketize(data: np.ndarray, boundaries: np.ndarray, with_right_bound: bool, out_dtype) -> np.ndarray:
    """Bucket indices of `data` (any shape) for sorted `boundaries`; see Bucketize-3."""
    out = np.zeros(data.shape, out_dtype)
    n = boundaries.size
    if n == 0 or data.size == 0:
        return out
    det, bet = from_dtype(data.dtype), from_dtype(boundaries.dtype)
    common = compare_dtype(det, bet)
    x = np.ascontiguousarray(data).reshape(-1)
    b = boundaries
    fixed = None   # (mask, value) for u64 meeting a signed type
    if common is None:
        if det.kind == "uint":
            # u64 data above every i64 boundary: past the end, whatever the side.
            fixed = (x > np.iinfo(np.int64).max, n)
            x = np.minimum(x, np.iinfo(np.int64).max)
            common = np.dtype(np.int64)
        else:
            # Negative data below every u64 boundary: bucket 0, whatever the side.
            fixed = (x < 0, 0)
            x = np.maximum(x, 0)
            common = np.dtype(np.uint64)
    x = x.astype(common, copy=False)
    b = b.astype(common)
    p = 1 << n.bit_length()          # > n, so every real boundary sits below the padding
    table = np.empty(p, common)
    table[:n] = b
    table[n:] = np.inf if common.kind == "f" else np.iinfo(common).max
    flat = out.reshape(-1)
    parallel(lambda lo, hi: _search_range(table, x[lo:hi], flat[lo:hi], with_right_bound, n),
             even_ranges(x.size, workers(x.size, _PARALLEL_MIN)))
    if fixed is not None:
        flat[fixed[0]] = fixed[1]
    return out


@register("Bucketize", since=3, attrs=BucketizeAttrs, category="condition")
class Bucketize3:
    @staticmethod
    def infer(attrs, data: TensorSpec, boundaries: TensorSpec):
        for name, spec in (("data", data), ("boundaries", boundaries)):
            if spec.etype.kind not in ("float", "int", "uint"):
                fail(f"{name} must be of a numeric type; got {spec.etype.name}")
        if boundaries.rank not in (None, 1):
            fail(f"boundaries must be a 1-D tensor; got shape "
                 f"[{','.join(str(d) for d in boundaries.shape)}]")
        if boundaries.value is not None:
            try:
                _check_boundaries(_plain(boundaries.value))
            except OpProblem as e:
                warn(f"constant {e.message}")
        return [TensorSpec.make(attrs.output_type, data.shape)]

    @staticmethod
    def run(attrs, data, boundaries):
        if boundaries.ndim != 1:
            fail(f"boundaries must be a 1-D tensor; got shape {list(boundaries.shape)}")
        _check_boundaries(_plain(boundaries))
        out_dtype = np.int64 if attrs.output_type == "i64" else np.int32
        return (bucketize(_plain(data), _plain(boundaries), attrs.with_right_bound, out_dtype),)


def _plain(a: np.ndarray) -> np.ndarray:
    """bf16 as f32 (exact, same order): NumPy's ufuncs and from_dtype know f32."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.kind == "V" else a
