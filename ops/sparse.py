"""EmbeddingSegmentsSum-3 (spec page: sparse/EmbeddingSegmentsSum_3).

out[s] = sum of w[i] * emb_table[indices[i]] over the lookups i of segment s. The lookups
are taken in segment order, in blocks of a few thousand: a block's table rows are gathered
(np.take) into a buffer that stays in the CPU cache, and a CSR matrix with one row per
segment, holding the weights, sums them (scipy's sparse product). So the [n, d1, ...]
intermediate the spec promises to avoid is never built: beyond the output, memory is the
sort order of unsorted ids (up to 16 bytes per lookup) plus a fixed working set. Spans
of lookups that start on a segment boundary run on all cores (both steps release the GIL).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse

from irrun.errors import OpError, UnsupportedError
from irrun.infer import fail, warn
from irrun.registry import register
from irrun.shapes import DYNAMIC, Dim, TensorSpec, format_shape

_INDEX_TYPES = ("i32", "i64")

# The working set. Each thread handles blocks of at most CHUNK_LOOKUPS lookups, whose three
# buffers (gathered rows, the same rows in the accumulation type, their sums) take at most
# WORKING_BYTES over all threads, a few MiB per buffer, so a block stays in the CPU's cache;
# a table not in the accumulation type is converted TABLE_BYTES at a time (one block for a
# 200k x 64 f16 table: every block is one more pass over the lookups). So the memory beyond
# the output and the sort order of unsorted ids (16 bytes per lookup at most) stays under
# TABLE_BYTES + WORKING_BYTES = 64 MiB, plus a few index arrays of CHUNK_LOOKUPS entries.
CHUNK_LOOKUPS = 16384
WORKING_BYTES = 16 << 20
TABLE_BYTES = 48 << 20
MAX_THREADS = 4
PARALLEL_MIN_LOOKUPS = 65536      # fewer lookups than this per thread are not worth one


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
        segments = int(num_segments.reshape(()))
        if segments < 0:
            raise OpError(f"num_segments is {segments}, expected >= 0")
        _check_range("indices", indices, num_emb, "emb_table rows")
        _check_range("segment_ids", segment_ids, segments, "num_segments")

        out = np.zeros((segments, *emb_table.shape[1:]), dtype=emb_table.dtype)
        width = int(np.prod(emb_table.shape[1:], dtype=np.int64))
        table = emb_table.reshape(num_emb, width)   # a view when contiguous (Consts, inputs)
        flat = out.reshape(segments, width)
        if width > 0:
            _segment_sum(flat, table, indices, segment_ids, per_sample_weights)

        # Empty segments: emb_table[default_index] as it is, not weighted (the spec example).
        if default_index is not None and segments > 0:
            empty = np.ones(segments, dtype=bool)
            empty[segment_ids] = False
            if empty.any():
                default = int(default_index.reshape(()))
                if not 0 <= default < num_emb:
                    first = int(np.flatnonzero(empty)[0])
                    raise OpError(f"default_index is {default}, expected in [0, {num_emb}) "
                                  f"(emb_table rows): it is needed for the empty segment {first}")
                out[empty] = emb_table[default]
        return (out,)


def _check_range(name: str, values: np.ndarray, limit: int, what: str) -> None:
    if values.size == 0:
        return
    if values.min() < 0 or values.max() >= limit:
        bad = np.flatnonzero((values < 0) | (values >= limit))[0]
        raise OpError(f"{name}[{bad}] is {values[bad]}, expected in [0, {limit}) ({what} = {limit})")


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


def _segment_sum(out: np.ndarray, table: np.ndarray, indices: np.ndarray,
                 segment_ids: np.ndarray, weights: np.ndarray | None) -> None:
    """out[s] = sum of table[indices[i]] * weights[i] over lookups i with segment_ids[i] == s.

    `out` is [num_segments, D] and zero; `table` is [num_emb, D]; ids are checked.
    """
    n = indices.shape[0]
    if n == 0:
        return
    num_emb, width = table.shape
    acc = _accumulator(table.dtype)

    # The lookups must come grouped by segment. Sorted ids (the spec's promise) are used
    # in place; otherwise a stable sort order and the ids in that order are built (up to
    # 16 bytes per lookup), so unsorted ids give the same scatter-add sums.
    order = None
    if n > 1 and not (segment_ids[1:] >= segment_ids[:-1]).all():
        order = np.argsort(segment_ids, kind="stable")
        segment_ids = segment_ids[order]

    # A table not in the accumulation type (f16, bf16, integers) is converted once, a block
    # of columns at a time, when it has fewer rows than there are lookups; otherwise each
    # gathered row is converted.
    convert_table = table.dtype != acc and num_emb <= n
    spans = _spans(segment_ids, _workers(n))
    buffer_bytes = WORKING_BYTES // (3 * len(spans))
    cols = min(width, max(1, buffer_bytes // acc.itemsize))     # one gathered row fits
    if convert_table:
        cols = min(cols, max(1, TABLE_BYTES // (num_emb * acc.itemsize)))
    converted = np.empty(num_emb * cols, dtype=acc) if convert_table else None
    for c0 in range(0, width, cols):
        c1 = min(width, c0 + cols)
        if convert_table:
            source = converted[:num_emb * (c1 - c0)].reshape(num_emb, c1 - c0)
            _parallel(lambda lo, hi: np.copyto(source[lo:hi], table[lo:hi, c0:c1],
                                               casting="unsafe"), _even(num_emb, len(spans)))
        else:
            source = table if c1 - c0 == width else table[:, c0:c1]
        _parallel(lambda a, b: _sum_span(out[:, c0:c1], source, acc, indices, segment_ids,
                                         order, weights, a, b, buffer_bytes), spans)


def _sum_span(out: np.ndarray, source: np.ndarray, acc: np.dtype, indices: np.ndarray,
              segment_ids: np.ndarray, order: np.ndarray | None, weights: np.ndarray | None,
              start: int, stop: int, buffer_bytes: int) -> None:
    """Add the lookups start..stop (in segment order) of `source`'s columns into `out`."""
    width = source.shape[1]
    chunk = max(1, min(CHUNK_LOOKUPS, buffer_bytes // (width * acc.itemsize)))
    gathered = np.empty(chunk * width, dtype=source.dtype)
    converted = np.empty(chunk * width, dtype=acc) if source.dtype != acc else None
    ones = np.ones(chunk, dtype=acc) if weights is None else None
    positions = np.arange(chunk, dtype=np.int32 if chunk < 2**31 else np.int64)
    contiguous = source.flags.c_contiguous
    carry = None              # the partial sum of a segment that goes on in the next block
    for a in range(start, stop, chunk):
        b = min(stop, a + chunk)
        picked = slice(a, b) if order is None else order[a:b]
        rows = gathered[:(b - a) * width].reshape(b - a, width)
        if contiguous:
            # take() with mode="clip" copies row by row without buffering (the ids are
            # checked already); it is the fastest gather NumPy has.
            np.take(source, indices[picked], axis=0, out=rows, mode="clip")
        else:
            rows[...] = source[indices[picked]]
        if converted is not None:
            block = converted[:(b - a) * width].reshape(b - a, width)
            np.copyto(block, rows, casting="unsafe")
            rows = block
        data = ones[:b - a] if weights is None else weights[picked].astype(acc, copy=False)

        # Sum consecutive rows of one segment: a CSR matrix with one row per segment
        # present in this block, listing its lookups, weighted, times the gathered rows.
        ids = segment_ids[a:b]
        starts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        present = ids[np.concatenate(([0], starts))]
        # (int32 index arrays spare scipy a scan for whether they fit in int32)
        indptr = np.concatenate(([0], starts, [b - a])).astype(positions.dtype)
        matrix = scipy.sparse.csr_matrix((data, positions[:b - a], indptr),
                                         shape=(len(present), b - a))
        sums = matrix @ rows
        if carry is not None:
            sums[0] += carry
            carry = None
        if b < stop and segment_ids[b] == present[-1]:
            carry = sums[-1].copy()
            sums, present = sums[:-1], present[:-1]
        out[present] = sums


# ------------------------------------------------------------------ threads
# NumPy's take and casts and scipy's CSR product release the GIL, and the gather is bound
# by memory latency, so independent spans of lookups run on all cores.

_pool: tuple[int, ThreadPoolExecutor] | None = None    # (pid, pool): a forked child makes its own


def _workers(n: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_THREADS, cores or 1, n // PARALLEL_MIN_LOOKUPS))


def _even(n: int, parts: int) -> list[tuple[int, int]]:
    cuts = [n * i // parts for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(cuts, cuts[1:]) if hi > lo]


def _spans(segment_ids: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """`parts` ranges of lookups of about equal size, cut where a segment starts, so no
    output row is written by two threads."""
    n = segment_ids.shape[0]
    cuts = [0]
    for lo, _ in _even(n, parts)[1:]:
        cut = int(np.searchsorted(segment_ids, segment_ids[lo], side="left"))
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(n)
    return list(zip(cuts, cuts[1:]))


def _parallel(fn, ranges: list[tuple[int, int]]) -> None:
    """fn(lo, hi) for every range; the calling thread runs the first one."""
    global _pool
    if len(ranges) > 1 and (_pool is None or _pool[0] != os.getpid()):
        _pool = (os.getpid(), ThreadPoolExecutor(max_workers=MAX_THREADS - 1,
                                                 thread_name_prefix="irrun-sparse"))
    futures = [_pool[1].submit(fn, *r) for r in ranges[1:]]
    try:
        fn(*ranges[0])
    finally:
        for f in futures:
            f.result()
