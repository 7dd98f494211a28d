"""EmbeddingSegmentsSum-3 (spec page: sparse/EmbeddingSegmentsSum_3).

out[s] = sum of w[i] * emb_table[indices[i]] over the lookups i of segment s. One compiled
loop (numba) takes the lookups in segment order and sums each segment's weighted table rows
in one row of the accumulation type, then writes it to the output once, so the
[n, d1, ...] intermediate the spec promises to avoid is never built. Beyond the output,
memory is the sort order of unsorted ids (up to 16 bytes per lookup) and one row per
thread. Spans of lookups that start on a segment boundary run on all cores (the compiled
loop releases the GIL). NumPy's part is the checks, the sort and the default rows.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numba
import numba.extending
import numpy as np
from llvmlite import ir
from numba.core import cgutils

from irrun.errors import OpError, UnsupportedError
from irrun.infer import fail, warn
from irrun.registry import register
from irrun.shapes import DYNAMIC, Dim, TensorSpec, format_shape

_INDEX_TYPES = ("i32", "i64")

PREFETCH_AHEAD = 16               # lookups (frozen into the loop when it is compiled)
MAX_THREADS = 4
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
        segments = int(num_segments.reshape(()))
        if segments < 0:
            raise OpError(f"num_segments is {segments}, expected >= 0")
        _check_range("indices", indices, num_emb, "emb_table rows")
        _check_range("segment_ids", segment_ids, segments, "num_segments")

        width = int(np.prod(emb_table.shape[1:], dtype=np.int64))
        if width > 0 and indices.shape[0] > 0:
            # The loop writes every row, empty segments' as zeros: no zeroing pass first.
            out = np.empty((segments, *emb_table.shape[1:]), dtype=emb_table.dtype)
            table = emb_table.reshape(num_emb, width)   # a view when contiguous (Consts, inputs)
            _segment_sum(out.reshape(segments, width), table, indices, segment_ids,
                         per_sample_weights)
        else:
            out = np.zeros((segments, *emb_table.shape[1:]), dtype=emb_table.dtype)

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
                 segment_ids: np.ndarray, weights: np.ndarray | None) -> None:
    """out[s] = sum of table[indices[i]] * weights[i] over lookups i with segment_ids[i] == s,
    0 for a segment without lookups.

    `out` is [num_segments, D], not initialised; `table` is [num_emb, D]; there are lookups
    and their ids are checked.
    """
    n = indices.shape[0]
    # The lookups must come grouped by segment. Sorted ids (the spec's promise) are used
    # in place; otherwise a stable sort order and the ids in that order are built (up to
    # 16 bytes per lookup), so unsorted ids give the same scatter-add sums.
    order = _NO_ORDER
    if n > 1 and not (segment_ids[1:] >= segment_ids[:-1]).all():
        order = np.argsort(segment_ids, kind="stable")
        segment_ids = segment_ids[order]
    if weights is None:
        weights = np.ones(1, dtype=table.dtype)     # one weight for every lookup
    # f16 and bf16 outputs are written as their bits; integer and boolean ones as they are
    # (the loop cuts the uint64 sums down to them).
    halves = out.dtype == np.float16 or out.dtype == ml_dtypes.bfloat16
    args = (out.view(np.uint16) if halves else out, _kernel_view(table),
            out.dtype == ml_dtypes.bfloat16, indices, segment_ids, order, _kernel_view(weights))
    acc = _accumulator(table.dtype)
    # Each span of lookups also owns the output rows from its first segment (0 for the
    # first span) up to the next span's first segment (all rows for the last).
    spans = _spans(segment_ids, _workers(n))
    rows = [0] + [int(segment_ids[start]) for start, _ in spans[1:]] + [out.shape[0]]
    _parallel(lambda start, stop, first, last: _sum_lookups(
                  np.empty(out.shape[1], acc), *args, start, stop, first, last),
              [(*span, first, last) for span, first, last in zip(spans, rows, rows[1:])])


# ------------------------------------------------------------------ the compiled loop
# cache=True keeps the machine code beside this file, or in the user's cache directory
# (NUMBA_CACHE_DIR, else ~/.cache/numba) when the package's folder is read-only; each kind
# of table and index type is compiled on its first use.

@numba.njit(nogil=True, cache=True)
def _sum_lookups(acc, out, table, bf16, indices, segment_ids, order, weights, start, stop,
                 first, last):
    """out[s] = sum of weights[i] * table[indices[i]] over the lookups j in start..stop
    with segment_ids[j] == s (i = order[j], or j when `order` is empty; a single weight is
    every lookup's), summed in `acc` (one row, the accumulation type), for the rows s in
    first..last (0 for those without lookups). The ids are sorted, so each segment's
    lookups come together and every row is written once."""
    width = acc.shape[0]
    row_bytes = width * table.itemsize
    filled = first
    j = start
    while j < stop:
        segment = segment_ids[j]
        for s in range(filled, segment):
            for c in range(width):
                out[s, c] = 0
        filled = segment + 1
        for c in range(width):
            acc[c] = 0
        while j < stop and segment_ids[j] == segment:
            # The time goes in waiting for table rows from memory: ask for the row needed
            # PREFETCH_AHEAD lookups later now, so several loads are under way at once.
            if j + PREFETCH_AHEAD < stop:
                ahead = j + PREFETCH_AHEAD
                later = indices[order[ahead] if order.size else ahead]
                for offset in range(0, row_bytes, 64):     # each 64-byte cache line
                    _prefetch(table, later, offset)
            i = order[j] if order.size else j
            w = _load(weights[i if weights.size > 1 else 0], acc, bf16)
            row = indices[i]
            for c in range(width):
                acc[c] += w * _load(table[row, c], acc, bf16)
            j += 1
        for c in range(width):
            out[segment, c] = _store(acc[c], out, bf16)
    for s in range(filled, last):
        for c in range(width):
            out[s, c] = 0


@numba.extending.intrinsic
def _prefetch(typingctx, table, row, offset):
    """A hint to the CPU to load the cache line at byte `offset` of table row `row` (LLVM's
    prefetch: it never faults and changes no result)."""
    def codegen(context, builder, sig, args):
        array = context.make_array(sig.args[0])(context, builder, args[0])
        stride = cgutils.unpack_tuple(builder, array.strides)[0]
        byte = ir.IntType(8)
        start = builder.add(builder.mul(args[1], stride), args[2])
        address = builder.gep(builder.bitcast(array.data, byte.as_pointer()), [start])
        i32 = ir.IntType(32)
        prefetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte.as_pointer(), i32, i32, i32]),
            "llvm.prefetch.p0")
        builder.call(prefetch, [address, i32(0), i32(3), i32(1)])    # read, keep, data
        return context.get_dummy_value()
    return numba.types.void(table, numba.types.intp, numba.types.intp), codegen


def _load(x, acc, bf16):
    """A table element as the compiled loop reads it (_kernel_view), in acc's type."""


@numba.extending.overload(_load)
def _load_typed(x, acc, bf16):
    if x == acc.dtype:                                  # f32, f64
        return lambda x, acc, bf16: x
    if isinstance(acc.dtype, numba.types.Integer):      # integers, booleans: uint64
        return lambda x, acc, bf16: np.uint64(x)
    return lambda x, acc, bf16: _bf16_to_f32(x) if bf16 else _f16_to_f32(x)


def _store(x, out, bf16):
    """A sum `x` (the accumulation type) as an element of `out` (as _segment_sum passes it)."""


@numba.extending.overload(_store)
def _store_typed(x, out, bf16):
    if x == out.dtype:                                  # f32, f64
        return lambda x, out, bf16: x
    if isinstance(out.dtype, numba.types.Boolean):      # any non-zero term
        return lambda x, out, bf16: x != 0
    if isinstance(x, numba.types.Integer):              # uint64, cut to the low bits (C++)
        kind = out.dtype
        return lambda x, out, bf16: kind(x)
    return lambda x, out, bf16: _f32_to_bf16(x) if bf16 else _f32_to_f16(x)


@numba.njit
def _f16_to_f32(bits):
    """IEEE half bits to float32, exactly. The exponent and mantissa bits, moved to their
    float32 places, read as a float32 2**112 times too small (half's exponent bias is 15,
    float32's 127): one exact product fixes normal and subnormal numbers alike. An all-ones
    exponent (inf, NaN) gets float32's all-ones exponent, the mantissa kept."""
    h = np.uint32(bits)
    magnitude = np.uint32((h & np.uint32(0x7FFF)) << np.uint32(13))
    finite = magnitude.view(np.float32) * np.float32(2.0 ** 112)
    special = np.uint32(magnitude | np.uint32(0x7F800000)).view(np.float32)
    value = special if magnitude >= np.uint32(0x7C00 << 13) else finite
    sign = np.uint32((h & np.uint32(0x8000)) << np.uint32(16))
    # (numba takes .view only straight on an np.<type>(...) value)
    return np.uint32(np.float32(value).view(np.uint32) | sign).view(np.float32)


@numba.njit
def _bf16_to_f32(bits):
    """bfloat16 is the upper half of a float32."""
    return np.uint32(np.uint32(bits) << np.uint32(16)).view(np.float32)


@numba.njit
def _f32_to_f16(value):
    """float32 to IEEE half bits, rounded to nearest even; a NaN keeps the top of its
    payload (1 if that is zero, only for a signalling NaN, never a sum), as NumPy's
    conversion does."""
    magnitude = np.uint32(np.float32(value).view(np.uint32) & np.uint32(0x7FFFFFFF))
    sign = np.uint32((np.float32(value).view(np.uint32) >> np.uint32(16)) & np.uint32(0x8000))
    if magnitude > np.uint32(0x7F800000):                       # NaN
        payload = np.uint32((magnitude & np.uint32(0x7FFFFF)) >> np.uint32(13))
        half = np.uint32(0x7C00) | (payload if payload else np.uint32(1))
    elif magnitude >= np.uint32(0x47800000):                    # >= 2**16, inf: inf
        half = np.uint32(0x7C00)
    elif magnitude < np.uint32(0x38800000):                     # below 2**-14: subnormal
        # Adding 0.5 (exponent 126) leaves the value, rounded to even by the float add,
        # as a multiple of 2**-24 in the low mantissa bits: half's subnormal bits.
        total = np.float32(np.uint32(magnitude).view(np.float32) + np.float32(0.5))
        half = np.uint32(total.view(np.uint32) - np.uint32(0x3F000000))
    else:                                                       # normal: rebias and round
        odd = np.uint32((magnitude >> np.uint32(13)) & np.uint32(1))   # ties to even
        half = np.uint32((magnitude - np.uint32((127 - 15) << 23) + np.uint32(0xFFF) + odd)
                         >> np.uint32(13))                      # a carry may give inf: right
    return np.uint16(half | sign)


@numba.njit
def _f32_to_bf16(value):
    """float32 to bfloat16 bits, rounded to nearest even; a NaN becomes the quiet NaN of
    its sign, as ml_dtypes' conversion does."""
    bits = np.float32(value).view(np.uint32)
    if np.isnan(value):
        return np.uint16(((bits >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7FC0))
    odd = np.uint32((bits >> np.uint32(16)) & np.uint32(1))          # ties to even
    return np.uint16((bits + np.uint32(0x7FFF) + odd) >> np.uint32(16))


# ------------------------------------------------------------------ threads
# The compiled loop releases the GIL and is bound by the memory latency of the row gathers,
# so independent spans of lookups run on all cores.

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
