"""Bucketize-3 and SearchSorted-15 (spec pages: condition/Bucketize_3, sort/SearchSorted_15):
one batched binary search serves both."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    ElementType,
    OpProblem,
    TensorSpec,
    check_alloc,
    even_ranges,
    fail,
    format_shape,
    from_dtype,
    parallel,
    register,
    warn,
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


def _check_boundaries(b: np.ndarray, name: str = "boundaries") -> None:
    """Sorted ascending along the last axis (repeats allowed) and NaN-free, or an OpError
    naming the position."""
    # (any() first: argwhere, needed only to word an error, took 40 us of a 200 us run
    # on [16, 1024] boundaries)
    if b.dtype.kind not in "iub":
        nan = np.isnan(b)
        if nan.any():
            fail(f"{name}{_at(np.argwhere(nan)[0])} is NaN; {name} must be sorted ascending "
                 f"and free of NaN")
    down = b[..., 1:] < b[..., :-1]
    if down.any():
        i = tuple(int(k) for k in np.argwhere(down)[0])
        j = (*i[:-1], i[-1] + 1)
        fail(f"{name} must be sorted ascending, but {name}{_at(i)} = {b[i]} > "
             f"{name}{_at(j)} = {b[j]}")


def _at(index) -> str:
    return "[" + ", ".join(str(int(k)) for k in index) + "]"


# Elements per block: the working arrays of one block stay in the L2 cache across the
# ~log2(len(boundaries)) passes of the search.
_BLOCK = 1 << 15
# Inputs are split over the op kit's shared pool (NumPy releases the GIL) in parts of at
# least this many elements.
_PARALLEL_MIN = 1 << 17
# Up to this many values, in up to this many sorted rows, ndarray.searchsorted answers row
# by row instead: the vectorised search makes ~6 NumPy calls per halving of the row whatever
# the size, 60 us of a 95 us run for 16 rows of 1024 and 64 values each (np.searchsorted:
# a few us a row).
_SMALL_VALUES, _SMALL_ROWS = 4096, 64


def _search_range(table: np.ndarray, x: np.ndarray, out: np.ndarray, lower: bool, n: int,
                  first: int, per_row: int) -> None:
    """out[i] = std::lower_bound (lower=True) or std::upper_bound of x[i] in its row of
    sorted values: `table` is [rows, p], each row padded from n to a power of two p with
    the type's maximum; x[i] (element first + i of the flat values) searches row
    (first + i) // per_row, or row 0 when per_row is 0.

    A branchless binary search vectorised over the elements. Each pass asks the very
    comparison std::lower_bound (`b < x`) or std::upper_bound (`!(x < b)`) asks, so NaN
    data lands where C++ puts it: 0 for lower_bound, past the end for upper_bound.
    """
    p = table.shape[1]
    flat = table.reshape(-1)
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
        if per_row:                   # each element starts at its own row
            base = np.arange(first + start, first + start + k, dtype=np.intp)
            base //= per_row
            base *= p
            i[...] = base
        else:
            i.fill(0)
            base = 0
        step = p >> 1
        while step:
            np.add(i, step - 1, out=c)
            flat.take(c, out=v, mode="clip")   # always in range; clip skips the check
            if lower:
                np.less(v, xs, out=h)
            else:
                np.less(xs, v, out=h)
                np.logical_not(h, out=h)   # !(x < b), which is true for NaN x
            np.multiply(h, step, out=d)
            i += d
            step >>= 1
        i -= base
        if not lower:
            # The padding equals the type's maximum, and x == max (or NaN) counts it too.
            np.minimum(i, n, out=i)
        out[start:start + k] = i


def search_sorted(sorted_rows: np.ndarray, values: np.ndarray, lower: bool, out_dtype) -> np.ndarray:
    """The kernel Bucketize and SearchSorted share: for each value, std::lower_bound
    (lower=True) or std::upper_bound in its row of `sorted_rows`, compared in the type C++
    compares the two element types in (compare_dtype).

    `sorted_rows` is [n] (every value searches it) or [rows, n] with `values` [rows, ...]
    (row r's values search row r).
    """
    out = np.zeros(values.shape, out_dtype)
    n = sorted_rows.shape[-1]
    if n == 0 or values.size == 0:
        return out
    rows = sorted_rows.reshape(-1, n)
    det, bet = from_dtype(values.dtype), from_dtype(sorted_rows.dtype)
    common = compare_dtype(det, bet)
    x = np.ascontiguousarray(values).reshape(-1)
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
    per_row = 0 if rows.shape[0] == 1 else x.size // rows.shape[0]
    flat = out.reshape(-1)
    if x.size <= _SMALL_VALUES and rows.shape[0] <= _SMALL_ROWS:
        if rows.dtype != common:
            check_alloc(rows.shape, common, "the sorted sequence in the compared type")
        _search_rows(rows.astype(common, copy=False), x, flat, lower, per_row)
    else:
        _search_padded(rows, x, flat, lower, n, common, per_row)
    if fixed is not None:
        flat[fixed[0]] = fixed[1]
    return out


def _search_rows(rows: np.ndarray, x: np.ndarray, flat: np.ndarray, lower: bool,
                 per_row: int) -> None:
    """search_sorted's answer by ndarray.searchsorted, row by row. Its comparisons are C++'s
    (side="left" finds the first b with !(b < x), "right" the first with x < b) except for
    NaN, which NumPy sorts after every number: std::lower_bound puts a NaN x at 0 (b < NaN
    is false), std::upper_bound past the end, where NumPy puts it too."""
    side = "left" if lower else "right"
    if per_row == 0:
        flat[...] = rows[0].searchsorted(x, side)
    else:
        # (the method, not np.searchsorted: its wrapper was half of each row's 1.8 us)
        for r, row in enumerate(rows):
            lo, hi = r * per_row, (r + 1) * per_row
            flat[lo:hi] = row.searchsorted(x[lo:hi], side)
    if lower and x.dtype.kind == "f":
        flat[np.isnan(x)] = 0


def _search_padded(rows: np.ndarray, x: np.ndarray, flat: np.ndarray, lower: bool, n: int,
                   common: np.dtype, per_row: int) -> None:
    """search_sorted's answer by the vectorised search (_search_range) over rows padded to
    a power of two, in parts on the kit's pool."""
    p = 1 << n.bit_length()          # > n, so every real boundary sits below the padding
    check_alloc((rows.shape[0], p), common, "the padded sorted sequence")
    table = np.empty((rows.shape[0], p), common)
    table[:, :n] = rows
    table[:, n:] = np.inf if common.kind == "f" else np.iinfo(common).max
    parallel(lambda lo, hi: _search_range(table, x[lo:hi], flat[lo:hi], lower, n, lo, per_row),
             even_ranges(x.size, workers(x.size, _PARALLEL_MIN)))


def bucketize(data: np.ndarray, boundaries: np.ndarray, with_right_bound: bool, out_dtype) -> np.ndarray:
    """Bucket indices of `data` (any shape) for sorted `boundaries`; see Bucketize-3."""
    # Buckets (b[i-1], b[i]] (with_right_bound) are std::lower_bound's answer.
    return search_sorted(boundaries, data, with_right_bound, out_dtype)


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


@dataclass(frozen=True)
class SearchSortedAttrs:
    right_mode: bool = False
    # Not on the spec page; OpenVINO 2026.4 has it (i32 or i64, default i64) and writes it
    # into every SearchSorted it saves.
    output_type: Literal["i32", "i64"] = "i64"


@register("SearchSorted", since=15, attrs=SearchSortedAttrs, category="sort")
class SearchSorted15:
    @staticmethod
    def infer(attrs, sorted_sequence: TensorSpec, values: TensorSpec):
        for name, spec in (("sorted_sequence", sorted_sequence), ("values", values)):
            if spec.etype.kind not in ("float", "int", "uint"):
                fail(f"{name} must be of a numeric type; got {spec.etype.name}")
        if sorted_sequence.etype != values.etype:
            # OpenVINO refuses two types; irrun compares them as Bucketize does.
            warn(f"sorted_sequence ({sorted_sequence.etype.name}) and values "
                 f"({values.etype.name}) have different element types, which OpenVINO "
                 f"refuses; irrun compares them as Bucketize does")
        seq, val = sorted_sequence.shape, values.shape
        if seq is not None and len(seq) == 0:
            fail("sorted_sequence cannot be a scalar")
        if val is not None and len(val) == 0 and seq is not None and len(seq) != 1:
            fail(f"values is a scalar, so sorted_sequence must be 1D; got shape "
                 f"{format_shape(seq)}")
        out = attrs.output_type
        if seq is None or len(seq) == 1:
            return [TensorSpec.make(out, val)]
        if val is None:
            return [TensorSpec.make(out, (*seq[:-1], None))]
        if len(val) != len(seq):
            fail(f"sorted_sequence {format_shape(seq)} has rank {len(seq)} > 1, so values "
                 f"must have that rank; got {format_shape(val)}")
        dims = []
        for axis, (a, b) in enumerate(zip(seq[:-1], val[:-1])):
            merged = a.merge(b)
            if merged is None:
                fail(f"dim {axis} of sorted_sequence ({a}) and of values ({b}) must match "
                     f"(all dims but the last)")
            dims.append(merged)
        if sorted_sequence.value is not None:
            try:
                _check_boundaries(_plain(sorted_sequence.value), "sorted_sequence")
            except OpProblem as e:
                warn(f"constant {e.message}")
        return [TensorSpec.make(out, (*dims, val[-1]))]

    @staticmethod
    def run(attrs, sorted_sequence, values):
        seq, val = np.asarray(sorted_sequence), np.asarray(values)
        if seq.ndim == 0:
            fail("sorted_sequence cannot be a scalar")
        if seq.ndim > 1 and (val.ndim != seq.ndim or val.shape[:-1] != seq.shape[:-1]):
            fail(f"values has shape {list(val.shape)}, expected [{', '.join(map(str, seq.shape[:-1]))}"
                 f", ...] (sorted_sequence's dims but the last)")
        seq, val = _plain(seq), _plain(val)
        _check_boundaries(seq, "sorted_sequence")
        # right_mode=false: the first i with values <= seq[i] (std::lower_bound), which is
        # Bucketize's with_right_bound=true; right_mode=true: std::upper_bound.
        dtype = np.int64 if attrs.output_type == "i64" else np.int32
        return (search_sorted(seq, val, not attrs.right_mode, dtype),)
