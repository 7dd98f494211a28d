"""EmbeddingSegmentsSum-3 (spec page: sparse/EmbeddingSegmentsSum_3).

out[s] = sum of w[i] * emb_table[indices[i]] over the lookups i of segment s. One compiled
loop (numba, in segment_sum_loop.py) takes the lookups in segment order, sums each
segment's weighted table rows in one row of the accumulation type and writes it to the
output once, so the [n, d1, ...] intermediate the spec promises to avoid is never built;
it also writes the rows of empty segments and checks the ids on the way. Beyond the
output, memory is the sort order of unsorted ids (up to 16 bytes per lookup) and one row
per thread. Spans of lookups that start on a segment boundary run on all cores (the
compiled loop releases the GIL). NumPy's part is the messages for bad ids and the sort.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from irrun.opkit import (
    DYNAMIC, Dim, TensorSpec, UnsupportedError, even_ranges, fail, format_shape, parallel,
    register, warn, workers,
)

_INDEX_TYPES = ("i32", "i64")

PARALLEL_MIN_LOOKUPS = 16384      # fewer lookups than this per thread are not worth one (measured)


def _rank_text(spec: TensorSpec) -> str:
    if spec.shape is None:
        return "dynamic rank"
    return f"rank {len(spec.shape)} ({format_shape(spec.shape)})"


def _rank_compatible(spec: TensorSpec, rank: int) -> bool:
    return spec.shape is None or len(spec.shape) == rank


def _shapes_compatible(a: TensorSpec, b: TensorSpec) -> bool:
    if a.shape is None or b.shape is None:
        return True
    return len(a.shape) == len(b.shape) and all(x.compatible(y) for x, y in zip(a.shape, b.shape))


def _scalar_value(spec: TensorSpec) -> int | None:
    if spec.value is None or spec.value.size != 1:
        return None
    return int(spec.value.reshape(()))


@register("EmbeddingSegmentsSum", since=3, category="sparse")
class EmbeddingSegmentsSum3:
    @staticmethod
    def infer(attrs, emb_table: TensorSpec, indices: TensorSpec, segment_ids: TensorSpec,
              num_segments: TensorSpec, default_index: TensorSpec | None = None,
              per_sample_weights: TensorSpec | None = None) -> list[TensorSpec]:
        # Element types: OpenVINO's checks, in its order and with its wording, plus what was got.
        for name, spec in (("SEGMENT_IDS", segment_ids), ("INDICES", indices),
                           ("NUM_SEGMENTS", num_segments)):
            if spec.etype.name not in _INDEX_TYPES:
                fail(f"{name} type must be i32 or i64, got {spec.etype.name}")
        if indices.etype != segment_ids.etype:
            fail(f"Segment_ids element type ({segment_ids.etype.name}) must match indices "
                 f"element type ({indices.etype.name})")
        if segment_ids.etype != num_segments.etype:
            fail(f"Num_segments element type ({num_segments.etype.name}) must match "
                 f"Segment_ids element type ({segment_ids.etype.name})")
        if default_index is not None:
            if default_index.etype.name not in _INDEX_TYPES:
                fail(f"DEFAULT_INDEX type must be i32 or i64, got {default_index.etype.name}")
            if default_index.etype != indices.etype:
                fail(f"Default_index element type ({default_index.etype.name}) must match "
                     f"indices element type ({indices.etype.name})")
        if per_sample_weights is not None and per_sample_weights.etype != emb_table.etype:
            fail(f"Per sample weight element type ({per_sample_weights.etype.name}) must match "
                 f"embedding table element type ({emb_table.etype.name})")
        if emb_table.etype.bits < 8:
            # OpenVINO's core accepts any type, but no plugin computes sub-byte sums and
            # there is no C++ type whose wrap-around irrun could follow.
            raise UnsupportedError(f"EmbeddingSegmentsSum with a {emb_table.etype.name} "
                                   f"emb_table is not supported (sub-byte types)")

        # Shapes: the same conditions as OpenVINO (compatibility, so dynamic dims pass).
        if not _rank_compatible(indices, 1):
            fail(f"INDICES must be 1D, got {_rank_text(indices)}")
        if not _rank_compatible(segment_ids, 1):
            fail(f"SEGMENT_IDS must be 1D, got {_rank_text(segment_ids)}")
        if not _shapes_compatible(indices, segment_ids):
            fail(f"INDICES and SEGMENT_IDS shape must be same, got {format_shape(indices.shape)} "
                 f"and {format_shape(segment_ids.shape)}")
        if not _rank_compatible(num_segments, 0):
            fail(f"NUM_SEGMENTS must be a scalar, got {_rank_text(num_segments)}")
        if default_index is not None and not _rank_compatible(default_index, 0):
            fail(f"DEFAULT_INDEX must be a scalar, got {_rank_text(default_index)}")
        if per_sample_weights is not None:
            if not _rank_compatible(per_sample_weights, 1):
                fail(f"PER_SAMPLE_WEIGHTS must be 1D, got {_rank_text(per_sample_weights)}")
            if not _shapes_compatible(indices, per_sample_weights):
                fail(f"INDICES and PER_SAMPLE_WEIGHTS shape must be same, got "
                     f"{format_shape(indices.shape)} and {format_shape(per_sample_weights.shape)}")
        if emb_table.shape is None:
            return [TensorSpec(emb_table.etype, None)]
        if len(emb_table.shape) == 0:
            fail("EMB_TABLE can't be a scalar")

        segments = _scalar_value(num_segments)
        if segments is not None and segments < 0:
            # OpenVINO's shape inference turns this into 0 rows; the run fails instead.
            warn(f"num_segments is {segments}: it must be >= 0, so running this layer fails")
            segments = None
        default = _scalar_value(default_index) if default_index is not None else None
        num_emb = emb_table.shape[0]
        if default is not None and (default < 0 or (num_emb.hi is not None and default >= num_emb.hi)):
            # Accepted while every segment has a lookup (as the CPU plugin does); an error
            # at run time as soon as one segment is empty.
            warn(f"default_index {default} is outside [0, {num_emb}) (emb_table rows): "
                 f"running this layer fails when a segment is empty")
        dim0 = Dim.of(segments) if segments is not None else DYNAMIC
        return [TensorSpec(emb_table.etype, (dim0, *emb_table.shape[1:]))]

    @staticmethod
    def run(attrs, emb_table: np.ndarray, indices: np.ndarray, segment_ids: np.ndarray,
            num_segments: np.ndarray, default_index: np.ndarray | None = None,
            per_sample_weights: np.ndarray | None = None) -> tuple[np.ndarray]:
        num_emb = emb_table.shape[0]
        # The loop reads ids and weights at the same positions without bounds checks. The
        # shape rule (run again on the real shapes when they were dynamic) saw to this;
        # checked here too, so no caller can make the loop read past an array.
        for name, other in (("segment_ids", segment_ids),
                            ("per_sample_weights", per_sample_weights)):
            if other is not None and (other.ndim != 1 or other.shape != indices.shape):
                fail(f"{name} has shape {list(other.shape)}, expected "
                     f"{list(indices.shape)} (the shape of indices)")
        segments = int(num_segments.reshape(()))
        if segments < 0:
            fail(f"num_segments is {segments}, expected >= 0")
        # Empty segments get emb_table[default_index] as it is, not weighted (the spec
        # example), or zeros without one. A default outside the table is an error only
        # when a segment is empty (as the CPU plugin has it).
        default = None if default_index is None else int(default_index.reshape(()))
        usable = default if default is not None and 0 <= default < num_emb else -1

        width = int(np.prod(emb_table.shape[1:], dtype=np.int64))
        if width > 0 and indices.shape[0] > 0:
            # The loop checks the ids and writes every row, the empty segments' too: no
            # checking or zeroing pass first.
            out = np.empty((segments, *emb_table.shape[1:]), dtype=emb_table.dtype)
            table = emb_table.reshape(num_emb, width)   # a view when contiguous (Consts, inputs)
            _segment_sum(out.reshape(segments, width), table, indices, segment_ids,
                         per_sample_weights, usable)
        else:
            _check_ids(indices, segment_ids, num_emb, segments)
            out = np.zeros((segments, *emb_table.shape[1:]), dtype=emb_table.dtype)
            if usable >= 0:
                out[...] = emb_table[usable]

        if default is not None and usable < 0 and segments > 0:
            empty = np.ones(segments, dtype=bool)
            empty[segment_ids] = False
            if empty.any():
                first = int(np.flatnonzero(empty)[0])
                fail(f"default_index is {default}, expected in [0, {num_emb}) "
                              f"(emb_table rows): it is needed for the empty segment {first}")
        return (out,)


def _check_ids(indices: np.ndarray, segment_ids: np.ndarray, num_emb: int, segments: int) -> None:
    _check_range("indices", indices, num_emb, "emb_table rows")
    _check_range("segment_ids", segment_ids, segments, "num_segments")


def _check_range(name: str, values: np.ndarray, limit: int, what: str) -> None:
    if values.size == 0:
        return
    if values.min() < 0 or values.max() >= limit:
        bad = np.flatnonzero((values < 0) | (values >= limit))[0]
        fail(f"{name}[{bad}] is {values[bad]}, expected in [0, {limit}) ({what} = {limit})")


def _accumulator(dtype: np.dtype) -> np.dtype:
    """The type sums are built in.

    Integers and booleans: uint64, whose wrap-around is defined, then cast down, which
    keeps the low bits, i.e. the C++ type's wrap (bool: any non-zero term gives true).
    f16/bf16: f32, rounded once at the end (the CPU plugin's choice). f32/f64: themselves.
    """
    if dtype == np.float32 or dtype == np.float64:
        return dtype
    if dtype.kind in "iub":
        return np.dtype(np.uint64)
    return np.dtype(np.float32)


def _kernel_view(a: np.ndarray) -> np.ndarray:
    """`a` as the compiled loop reads it: numba has no f16 or bf16, so those pass as their
    uint16 bits. Integer and boolean tables and weights pass as the unsigned type of their
    size: their products and sums taken mod 2**64 (_accumulator) and cut to the type's bits
    are the same whether the values were sign- or zero-extended."""
    if a.dtype == np.float16 or a.dtype == ml_dtypes.bfloat16:
        return a.view(np.uint16)
    if a.dtype.kind in "iub":
        return a.view(f"u{a.dtype.itemsize}")
    return a


_NO_ORDER = np.empty(0, dtype=np.intp)


def _segment_sum(out: np.ndarray, table: np.ndarray, indices: np.ndarray,
                 segment_ids: np.ndarray, weights: np.ndarray | None, default: int) -> None:
    """out[s] = sum of table[indices[i]] * weights[i] over lookups i with segment_ids[i] == s;
    table[default] for a segment without lookups (0 when `default` is -1).

    `out` is [num_segments, D], not initialised; `table` is [num_emb, D]; there are lookups.
    The ids are checked here: an OpError names the first bad one.
    """
    if weights is None:
        weights = np.ones(1, dtype=table.dtype)     # one weight for every lookup
    # f16 and bf16 outputs are written as their bits; integer and boolean ones as they are
    # (the loop cuts the uint64 sums down to them).
    halves = out.dtype == np.float16 or out.dtype == ml_dtypes.bfloat16
    head = (out.view(np.uint16) if halves else out, _kernel_view(table),
            out.dtype == ml_dtypes.bfloat16, indices)
    tail = (_kernel_view(weights), default)
    acc_type = _accumulator(table.dtype)
    # The lookups must come grouped by segment. Sorted ids (the spec's promise) are used
    # in place, and the loop checks them as it goes; it stops at an id out of range or
    # smaller than the one before. The ids are then checked here, for the message, and
    # if they are all in range they are unsorted: a stable sort order and the ids in that
    # order are built (up to 16 bytes per lookup), so they give the same scatter-add sums.
    if _sum_spans(acc_type, (*head, segment_ids, _NO_ORDER, *tail)):
        return
    _check_ids(indices, segment_ids, table.shape[0], out.shape[0])
    order = np.argsort(segment_ids, kind="stable")
    if not _sum_spans(acc_type, (*head, segment_ids[order], order, *tail)):
        raise AssertionError("the loop refused sorted ids in range")


def _sum_spans(acc_type: np.dtype, args: tuple) -> bool:
    """Run the loop (its arguments from `out` to `default`, the sums in `acc_type`) over
    spans of the lookups on all cores; False if it found the ids unsorted or out of range."""
    out, segment_ids = args[0], args[4]
    # Each span of lookups also owns the output rows from its first segment (0 for the
    # first span) up to the next span's first segment (all rows for the last).
    spans = _spans(segment_ids, _workers(segment_ids.shape[0]))
    rows = [0] + [int(segment_ids[start]) for start, _ in spans[1:]] + [out.shape[0]]
    # Imported on first use: numba's import and compilation are only paid by models that
    # run this op, not by `irrun validate` or other models.
    from .segment_sum_loop import loop_for

    loop = loop_for(out.shape[1])

    def run(start, stop, first, last):
        return loop(_row(out.shape[1], acc_type), *args, start, stop, first, last)
    stopped = parallel(run, [(*span, first, last)
                              for span, first, last in zip(spans, rows, rows[1:])])
    # Every span's ids sorted and in its own rows: all ids are sorted and in range.
    return all(at == stop for at, (_, stop) in zip(stopped, spans))


def _row(width: int, dtype: np.dtype) -> np.ndarray:
    """A row for a thread's sums, on a 64-byte boundary: one that straddles cache lines
    makes each vector store and reload of it slower (measured: 2x at width 64)."""
    buffer = np.empty(width * dtype.itemsize + 64, np.uint8)
    skip = -buffer.ctypes.data % 64
    return buffer[skip:skip + width * dtype.itemsize].view(dtype)


# ------------------------------------------------------------------ threads
# The compiled loop releases the GIL and is bound by the memory latency of the row gathers,
# so independent spans of lookups run on the op kit's shared pool (IRRUN_THREADS threads).


def _workers(n: int) -> int:
    return workers(n, PARALLEL_MIN_LOOKUPS)


def _spans(segment_ids: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """`parts` ranges of lookups of about equal size, cut where a segment starts, so no
    output row is written by two threads."""
    n = segment_ids.shape[0]
    cuts = [0]
    for lo, _ in even_ranges(n, parts)[1:]:
        cut = int(np.searchsorted(segment_ids, segment_ids[lo], side="left"))
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(n)
    return list(zip(cuts, cuts[1:]))
