"""The sparse ops (spec pages: sparse/EmbeddingSegmentsSum_3, EmbeddingBagOffsetsSum_3,
EmbeddingBagPackedSum_3, EmbeddingBagOffsets_15, EmbeddingBagPacked_15, SparseFillEmptyRows_16;
arithmetic/SegmentMax_16).

The embedding ops share one compiled loop (numba, in segment_sum_loop.py): every op states
its bags as ranges of lookups (offsets, fixed-size rows of indices, or the runs of sorted
segment ids), and the loop sums each bag's weighted table rows in one row of the
accumulation type and writes it to the output once, so the [n, d1, ...] intermediate the
specs promise to avoid is never built; it also writes the rows of empty bags and checks the
indices on the way. Beyond the output, memory is the bag bounds (8 bytes a bag), the sort
order of unsorted segment ids (up to 16 bytes per lookup) and one row per thread. Spans of
bags with about equal numbers of lookups run on the op kit's shared pool (the compiled
loop releases the GIL); the LLVM IR loops (segment_sum_ir_loop.py, f32 and f16 tables)
take over where they apply, their threads claiming chunks of bags as they go. NumPy's
part is the messages for bad inputs and the sort.
"""
from __future__ import annotations

import ctypes
import math

from dataclasses import dataclass
from typing import Literal

import ml_dtypes
import numpy as np

from irrun.opkit import (
    DYNAMIC,
    Dim,
    OpProblem,
    TensorSpec,
    UnsupportedError,
    check_alloc,
    balanced_ranges,
    even_ranges,
    fail,
    format_shape,
    parallel,
    register,
    warn,
    workers,
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
        # example), or zeros without one. A default outside the table (-1 included) is an
        # error only when a segment is empty (as the CPU plugin has it).
        default = None if default_index is None else int(default_index.reshape(()))
        check_alloc((segments, *emb_table.shape[1:]), emb_table.dtype, "the output")
        out = _empty_output((segments, *emb_table.shape[1:]), emb_table.dtype)
        _segment_sum(_rows(out), _rows(emb_table), indices, segment_ids, per_sample_weights,
                     -1 if default is None else default,
                     none_index=-1 if default is None else None)
        return (out,)


def _rows(a: np.ndarray) -> np.ndarray:
    """[n, d1, d2, ...] as [n, d1 * d2 * ...]: a view when contiguous (Consts, inputs, outputs)."""
    return a.reshape(a.shape[0], math.prod(a.shape[1:]))


def _check_range(name: str, values: np.ndarray, limit: int, what: str) -> None:
    if values.size == 0:
        return
    if values.min() < 0 or values.max() >= limit:
        bad = np.flatnonzero((values < 0) | (values >= limit))[0]
        fail(f"{name}[{bad}] is {values[bad]}, expected in [0, {limit}) ({what} = {limit})")


def _check_ids(indices: np.ndarray, segment_ids: np.ndarray, num_emb: int, segments: int) -> None:
    _check_range("indices", indices, num_emb, "emb_table rows")
    _check_range("segment_ids", segment_ids, segments, "num_segments")


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


def _loop_operands(out: np.ndarray, table: np.ndarray, weights: np.ndarray | None) -> tuple:
    """The output, table and weights as both compiled loops take them: f16 and bf16
    outputs as their bits (the loop writes those), and whether they are bf16; integer and
    boolean outputs as they are (the loop cuts the uint64 sums down to them); the table and
    weights as _kernel_view gives them, and one weight of 1 for every lookup when there
    are none."""
    halves = out.dtype == np.float16 or out.dtype == ml_dtypes.bfloat16
    if weights is None:
        weights = np.ones(1, dtype=table.dtype)
    return (out.view(np.uint16) if halves else out, _kernel_view(table),
            out.dtype == ml_dtypes.bfloat16, _kernel_view(weights))


_NO_ORDER = np.empty(0, dtype=np.intp)


def _segment_sum(out: np.ndarray, table: np.ndarray, indices: np.ndarray,
                 segment_ids: np.ndarray, weights: np.ndarray | None, default: int,
                 none_index: int | None = -1) -> None:
    """out[s] = sum of table[indices[i]] * weights[i] over lookups i with segment_ids[i] == s;
    table[default] for a segment without lookups (0 when `default` is -1).

    `out` is [num_segments, D], not initialised; `table` is [num_emb, D]. The ids are
    checked here: an OpError names the first bad one. `none_index` is the default that
    means "no default" (None: every value outside the table is refused when needed).
    """
    segments = out.shape[0]
    if _sorted_segment_sum(out, table, indices, segment_ids, weights, default, none_index):
        return
    # The lookups must come grouped by segment. Sorted ids (the spec's promise) are used
    # in place: one pass finds where each segment starts and checks them. If one is out
    # of range or smaller than the one before, the ids are checked for the message (indices
    # first), and if they are all in range they are unsorted: a stable sort order and the
    # ids in that order are built (up to 16 bytes per lookup), so they give the same
    # scatter-add sums.
    bounds = np.empty(segments + 1, np.intp)
    order = _NO_ORDER
    if _segment_bounds(segment_ids, segments, bounds) >= 0:
        _check_ids(indices, segment_ids, table.shape[0], segments)
        order = np.argsort(segment_ids, kind="stable")
        if _segment_bounds(segment_ids[order], segments, bounds) >= 0:
            raise AssertionError("segment_bounds refused sorted ids in range")
    _sum_bags(out, table, indices, bounds, order, weights, default, False, none_index,
              "segment")


def _sorted_segment_sum(out: np.ndarray, table: np.ndarray, indices: np.ndarray,
                        segment_ids: np.ndarray, weights: np.ndarray | None, default: int,
                        none_index: int | None) -> bool:
    """_segment_sum for what the spec promises (ids sorted and in range, indices in the
    table, a usable default): one compiled pass that finds each segment as it sums it,
    in chunks of lookups cut where a segment starts, which the calling threads claim as
    they go (the numba loop: one span per thread). False when the
    inputs break the promise anywhere (or the default is needed and unusable), with `out`
    partly written: the caller's checking path then computes it again and words the error.
    """
    segments, width = out.shape
    n = indices.shape[0]
    num_emb = table.shape[0]
    usable = default if 0 <= default < num_emb else -1
    if (usable < 0 and default != none_index) or width == 0 or n == 0 or segments == 0:
        return False
    threads = _workers(n)
    ir = _ir_operands(out, table, indices, weights, segment_ids, indices.dtype, "segments")
    if ir is not None:
        loops, operands = ir
        return _claimed(loops["segment_chunks"],
                        (*operands(segment_ids), usable, n, segments), threads)
    spans = _segment_spans(segment_ids, segments, threads)
    out_bits, table_bits, bf16, weight_bits = _loop_operands(out, table, weights)
    args = (out_bits, table_bits, bf16, indices, segment_ids, weight_bits, usable)
    acc_type = _accumulator(table.dtype)
    from .segment_sum_loop import segments_loop_for

    loop = segments_loop_for(width)
    stopped = parallel(lambda lo, hi, first, last: loop(_row(width, acc_type), *args, lo, hi,
                                                        first, last), spans)
    return all(at < 0 for at in stopped)


_ONES = {np.dtype(t): np.ones(1, t) for t in (np.float32, np.float16)}   # no weights given
# Outputs of at least this many bytes are written with streaming stores by the IR loops
# (segment_sum_ir_loop): far past the cores' L2, so the next layer reads them from memory
# either way, and skipping the read of each line before it is overwritten saves a tenth
# of the traffic (the benchmark's 25 MB output: 0.98 -> 0.95x PyTorch). Smaller ones, a
# recommender's batch of embeddings, stay in the cache for the layer after.
STREAM_MIN_BYTES = 8 << 20


def _empty_output(shape, dtype) -> np.ndarray:
    """np.empty(shape, dtype) on a 64-byte boundary, which the IR loops' streaming stores
    need (NumPy aligns large arrays to 16 bytes only)."""
    count = math.prod(shape)
    dtype = np.dtype(dtype)
    buffer = np.empty(count * dtype.itemsize + 64, np.uint8)
    skip = -buffer.ctypes.data % 64
    return buffer[skip:skip + count * dtype.itemsize].view(dtype).reshape(shape)


# Chunks of work per thread for the IR loops, which the threads claim as they go (see
# segment_sum_ir_loop._chunks_ir): enough that the last ones even out a late or slow thread,
# few enough that their boundaries (where the prefetches ahead stop) cost nothing.
CHUNKS_PER_THREAD = 16


def _segment_spans(segment_ids: np.ndarray, segments: int, parts: int) -> list[tuple]:
    """Up to `parts` spans (lo, hi, first, last) for the numba loop's threads (the IR loops
    find the same cuts themselves): lookups lo..hi and segments first..last, the lookups
    cut at the first lookup of the segment holding the lookup each even share aims at. On
    ids that are not sorted searchsorted gives some position; each span checks that its
    ids rise through its own segments, so a bad cut fails there, never silently."""
    n = segment_ids.shape[0]
    spans, lo, first = [], 0, 0
    for at, _ in even_ranges(n, parts)[1:]:
        # (The id as the array's own scalar type: a Python int made searchsorted convert
        # the whole array to int64 first, 2.6 ms and 8 MB for a million i32 ids.)
        sid = segment_ids[at]
        cut = int(np.searchsorted(segment_ids, sid, side="left"))
        sid = int(sid)
        if first < sid < segments and lo < cut < n:
            spans.append((lo, cut, first, sid))
            lo, first = cut, sid
    spans.append((lo, n, first, segments))
    return spans


def _ir_operands(out: np.ndarray, table: np.ndarray, indices: np.ndarray,
                 weights: np.ndarray | None, ids: np.ndarray, ids_type, group: str):
    """(loops, operands) for the LLVM IR loops (segment_sum_ir_loop), where they apply:
    an f32 or f16 table, with weights and output of its type, rows of 1..256 elements,
    contiguous i32 or i64 indices and `ids` (bounds or segment ids) of
    `ids_type`, the type the loop reads them as; else None, and the numba loop runs.
    `group` names the loops wanted (segment_sum_ir_loop._GROUPS).
    operands(ids) gives the arguments up to the default: the loops read raw addresses, so
    every array must be C-contiguous here."""
    if (table.dtype not in (np.float32, np.float16) or out.dtype != table.dtype
            or table.ndim != 2 or ids.dtype != ids_type
            or (weights is not None and weights.dtype != table.dtype)
            or not (table.flags.c_contiguous and out.flags.c_contiguous
                    and indices.flags.c_contiguous and ids.flags.c_contiguous)
            or (weights is not None and not weights.flags.c_contiguous)):
        return None
    out_at = out.ctypes.data
    streaming = out.nbytes >= STREAM_MIN_BYTES and out_at % 64 == 0
    loops = _ir_loop().loops_for(table.shape[1], indices.dtype, streaming, table.dtype,
                                 group, table.nbytes)
    if loops is None:
        return None
    w = _ONES[table.dtype] if weights is None else weights
    head = (table.ctypes.data, table.shape[0], indices.ctypes.data)

    def operands(ids_: np.ndarray) -> tuple:
        return (*head, ids_.ctypes.data, w.ctypes.data, int(w.size == 1), out_at)
    return loops, operands


_IR_LOOP = None


def _ir_loop():
    """ops/segment_sum_ir_loop, imported on first use (the import statement itself cost
    3 us a call); tests replace its loops_for."""
    global _IR_LOOP
    if _IR_LOOP is None:
        from . import segment_sum_ir_loop

        _IR_LOOP = segment_sum_ir_loop
    return _IR_LOOP


def _claimed(loop, head: tuple, threads: int) -> bool:
    """Run one of the IR loops' *_chunks functions on `threads` threads (`head`: its
    arguments before the chunk count and the counter): whether every chunk was whole.
    The counter they share is a ctypes int (0.3 us, against 2.5 us for a NumPy one and
    its address), alive until the threads return."""
    counter = ctypes.c_int64(0)
    args = (*head, threads * CHUNKS_PER_THREAD if threads > 1 else 1,
            ctypes.addressof(counter))
    return all(at < 0 for at in parallel(lambda: loop(*args), [()] * threads))


def _segment_bounds(segment_ids: np.ndarray, segments: int, bounds: np.ndarray) -> int:
    """bounds[s] = the first lookup of segment s, for s in 0..segments, from sorted ids:
    -1, or the first position whose id is out of order or outside [0, segments).
    One compiled pass, its spans of lookups on the shared pool."""
    from .segment_sum_loop import segment_bounds

    n = segment_ids.shape[0]
    stops = parallel(lambda lo, hi: segment_bounds(segment_ids, segments, bounds, lo, hi),
                     even_ranges(n, _workers(n)) or [(0, 0)])
    bad = [int(j) for j in stops if j >= 0]
    return min(bad) if bad else -1


def _sum_bags(out: np.ndarray, table: np.ndarray, indices: np.ndarray, bounds: np.ndarray,
              order: np.ndarray, weights: np.ndarray | None, default: int, mean: bool,
              none_index: int | None, bag: str) -> None:
    """Fill `out` [bags, D] from `table` [num_emb, D]: bag s is the lookups
    bounds[s]..bounds[s+1] (checked by the caller) of `indices` (through `order` if it is
    not empty); the sum of their rows times `weights` (or their mean), or table[default]
    for an empty bag (zeros when default == none_index). The indices are checked here."""
    num_emb = table.shape[0]
    usable = default if 0 <= default < num_emb else -1
    if usable < 0 and default != none_index and out.shape[0]:
        empty = np.flatnonzero(bounds[1:] == bounds[:-1])
        if empty.size:
            _check_range("indices", indices, num_emb, "emb_table rows")
            fail(f"default_index is {default}, expected in [0, {num_emb}) (emb_table rows)"
                 f"{' or -1' if none_index == -1 else ''}: it is needed for the empty "
                 f"{bag} {int(empty[0])}")
    if out.shape[1] == 0 or indices.shape[0] == 0:
        _check_range("indices", indices, num_emb, "emb_table rows")
        out[...] = 0
        if usable >= 0:
            out[bounds[1:] == bounds[:-1]] = table[usable]
        return
    integer_mean = mean and table.dtype.kind in "iub"
    ir = None
    if order.size == 0 and not integer_mean:
        ir = _ir_operands(out, table, indices, weights, bounds, np.dtype(np.int64), "bags")
    if ir is not None:
        loops, operands = ir
        head = (*operands(bounds), usable, int(mean), indices.shape[0], out.shape[0])
        if not _claimed(loops["bag_chunks"], head, _workers(indices.shape[0])):
            _check_range("indices", indices, num_emb, "emb_table rows")
            raise AssertionError("the loop refused indices in range")
        return
    out_bits, table_bits, bf16, weight_bits = _loop_operands(out, table, weights)
    args = (out_bits, table_bits, bf16, indices, bounds, order, weight_bits, usable,
            mean and not integer_mean)
    acc_type = _accumulator(table.dtype)
    # Imported on first use: numba's import and compilation are only paid by models that
    # run these ops, not by `irrun validate` or other models.
    from .segment_sum_loop import loop_for

    loop = loop_for(out.shape[1])

    def run(first, last):
        return loop(_row(out.shape[1], acc_type), *args, first, last)
    spans = balanced_ranges(bounds, _workers(indices.shape[0]))
    stopped = parallel(run, spans)
    if any(at != bounds[last] for at, (_, last) in zip(stopped, spans)):
        _check_range("indices", indices, num_emb, "emb_table rows")
        raise AssertionError("the loop refused indices in range")
    if integer_mean:
        _divide_integers(out, np.diff(bounds))


def _divide_integers(out: np.ndarray, counts: np.ndarray) -> None:
    """out[s] /= counts[s] for the non-empty bags, rounded toward zero as C++ divides (the
    wrapped sum of the table's type by the bag's size; a bool sum counts as 0 or 1)."""
    full = counts > 0
    wide = np.uint64 if out.dtype.kind == "u" else np.int64
    sums, sizes = out[full].astype(wide), counts[full, None].astype(wide)
    quotient = sums // sizes
    if wide == np.int64:
        quotient += ((sums % sizes) != 0) & (sums < 0)   # floor -> toward zero
    out[full] = quotient.astype(out.dtype)


def _row(width: int, dtype: np.dtype) -> np.ndarray:
    """A row for a thread's sums, on a 64-byte boundary: one that straddles cache lines
    makes each vector store and reload of it slower (measured: 2x at width 64)."""
    buffer = np.empty(width * dtype.itemsize + 64, np.uint8)
    skip = -buffer.ctypes.data % 64
    return buffer[skip:skip + width * dtype.itemsize].view(dtype)


# ------------------------------------------------------------------ threads
# The compiled loop releases the GIL and is bound by the memory latency of the row gathers,
# so independent spans of bags run on the op kit's shared pool (IRRUN_THREADS threads).


def _workers(n: int) -> int:
    return workers(n, PARALLEL_MIN_LOOKUPS)


# ------------------------------------------------------------------ EmbeddingBag*

@dataclass(frozen=True)
class EmbeddingBagAttrs:
    reduction: Literal["sum", "mean"] = "sum"


def _check_index_type(name: str, spec: TensorSpec, indices: TensorSpec) -> None:
    if spec.etype.name not in _INDEX_TYPES:
        fail(f"{name} type must be i32 or i64, got {spec.etype.name}")
    if spec is not indices and spec.etype != indices.etype:
        fail(f"{name} element type ({spec.etype.name}) must match indices element type "
             f"({indices.etype.name})")


def _bag_infer(reduction: str, emb_table: TensorSpec, indices: TensorSpec, index_rank: int,
               batch: Dim, index_inputs: tuple, weights: TensorSpec | None) -> list[TensorSpec]:
    """The shape rule the EmbeddingBag ops share: [batch, *emb_table.shape[1:]]."""
    _check_index_type("INDICES", indices, indices)
    for name, spec in index_inputs:
        _check_index_type(name, spec, indices)
    if weights is not None:
        if reduction == "mean":
            # The spec: "per_sample_weights is not supported and will raise exception".
            fail("per_sample_weights is only supported with reduction 'sum', got reduction "
                 "'mean'")
        if weights.etype != emb_table.etype:
            fail(f"Per sample weight element type ({weights.etype.name}) must match "
                 f"embedding table element type ({emb_table.etype.name})")
    if emb_table.etype.kind not in ("float", "int", "uint"):
        fail(f"emb_table must be of a numeric type, got {emb_table.etype.name}")
    if emb_table.etype.bits < 8:
        # No plugin computes sub-byte sums, and no C++ type gives their wrap-around.
        raise UnsupportedError(f"an emb_table of {emb_table.etype.name} is not supported "
                               f"(sub-byte types)")
    if not _rank_compatible(indices, index_rank):
        fail(f"INDICES must be {index_rank}D, got {_rank_text(indices)}")
    if weights is not None:
        if not _rank_compatible(weights, index_rank):
            fail(f"PER_SAMPLE_WEIGHTS must be {index_rank}D, got {_rank_text(weights)}")
        if not _shapes_compatible(indices, weights):
            fail(f"INDICES and PER_SAMPLE_WEIGHTS shape must be same, got "
                 f"{format_shape(indices.shape)} and {format_shape(weights.shape)}")
    if emb_table.shape is None:
        return [TensorSpec(emb_table.etype, None)]
    if len(emb_table.shape) == 0:
        fail("EMB_TABLE can't be a scalar")
    return [TensorSpec(emb_table.etype, (batch, *emb_table.shape[1:]))]


def _offsets_infer(reduction, emb_table, indices, offsets, default_index, weights):
    index_inputs = [("OFFSETS", offsets)]
    if default_index is not None:
        index_inputs.append(("DEFAULT_INDEX", default_index))
        if not _rank_compatible(default_index, 0):
            fail(f"DEFAULT_INDEX must be a scalar, got {_rank_text(default_index)}")
        default = _scalar_value(default_index)
        rows = emb_table.shape[0].hi if emb_table.shape else None
        if default is not None and (default < -1 or (rows is not None and default >= rows)):
            warn(f"default_index {default} is outside [0, {rows}) (emb_table rows) and not -1: "
                 f"running this layer fails when a bag is empty")
    if not _rank_compatible(offsets, 1):
        fail(f"OFFSETS must be 1D, got {_rank_text(offsets)}")
    batch = offsets.shape[0] if offsets.shape is not None else DYNAMIC
    return _bag_infer(reduction, emb_table, indices, 1, batch, index_inputs, weights)


def _offsets_run(reduction, emb_table, indices, offsets, default_index, weights):
    n = indices.shape[0]
    if indices.ndim != 1 or offsets.ndim != 1:
        fail(f"indices and offsets must be 1D, got shapes {list(indices.shape)} and "
             f"{list(offsets.shape)}")
    if weights is not None and weights.shape != indices.shape:
        fail(f"per_sample_weights has shape {list(weights.shape)}, expected "
             f"{list(indices.shape)} (the shape of indices)")
    # Bag b is indices[offsets[b]:offsets[b+1]], the last one up to the end. Offsets must
    # not go backwards and must lie within [0, n]: an offset equal to n makes an empty bag
    # at the end (the spec: "cannot be greater than the length of indices"; the CPU plugin
    # refuses it, see docs/ops.md). Lookups before offsets[0] belong to no bag (the spec's code).
    default = -1 if default_index is None else int(default_index.reshape(()))
    out = _own_bags_ir(reduction, emb_table, indices, offsets, weights, default)
    if out is not None:
        return (out,)
    bounds = np.empty(offsets.shape[0] + 1, np.intp)
    bounds[:-1] = offsets
    bounds[-1] = n
    bad = np.flatnonzero((offsets < 0) | (offsets > n))
    if bad.size:
        b = int(bad[0])
        fail(f"offsets[{b}] is {offsets[b]}, expected in [0, {n}] (the length of indices)")
    back = np.flatnonzero(offsets[1:] < offsets[:-1])
    if back.size:
        b = int(back[0]) + 1
        fail(f"offsets[{b}] is {offsets[b]}, smaller than offsets[{b - 1}] = {offsets[b - 1]}: "
             f"offsets must not decrease")
    return _bags_out(reduction, emb_table, indices, bounds, weights, default)


def _own_bags_ir(reduction, emb_table, indices, offsets, weights, default, per_bag=None):
    """The output of a bag op from the IR loops that read its own description of the bags
    (segment_sum_ir_loop's own_bags): its offsets, which the loop checks as it goes, or
    for the packed ops (`per_bag` given, `indices` and `weights` flattened) bags of
    per_bag lookups each. No bounds are built and NumPy makes no pass over them. None
    where those loops do not apply or met anything wrong: the caller's path then checks
    everything, words the error, or computes the output again. They apply with offsets
    of the indices' type, a default that is a row or none (-1), and rows and lookups to
    sum."""
    n = indices.shape[0]
    bags = offsets.shape[0] if per_bag is None else n // per_bag if per_bag else 0
    if n == 0 or not -1 <= default < emb_table.shape[0]:
        return None
    check_alloc((bags, *emb_table.shape[1:]), emb_table.dtype, "the output")
    out = _empty_output((bags, *emb_table.shape[1:]), emb_table.dtype)
    rows, table = _rows(out), _rows(emb_table)
    if rows.shape[1] == 0:
        return None
    # (The offsets must be of the indices' type and contiguous; packed ops pass per_bag
    # where the offsets' address would go.)
    ir = _ir_operands(rows, table, indices, weights,
                      indices if per_bag is not None else offsets, indices.dtype,
                      "offsets" if per_bag is None else "packed")
    if ir is None:
        return None
    loops, operands = ir
    if per_bag is None:
        run, head = loops["offset_bag_chunks"], operands(offsets)
    else:
        run, head = loops["packed_bag_chunks"], operands(indices)
        head = (*head[:3], per_bag, *head[4:])
    whole = _claimed(run, (*head, default, int(reduction == "mean"), n, bags), _workers(n))
    return out if whole else None


def _bags_out(reduction, emb_table, indices, bounds, weights, default):
    bags = bounds.shape[0] - 1
    check_alloc((bags, *emb_table.shape[1:]), emb_table.dtype, "the output")
    out = _empty_output((bags, *emb_table.shape[1:]), emb_table.dtype)
    _sum_bags(_rows(out), _rows(emb_table), indices.reshape(-1), bounds,
              _NO_ORDER, None if weights is None else weights.reshape(-1), default,
              reduction == "mean", -1, "bag")
    return (out,)


def _packed_infer(reduction, emb_table, indices, weights):
    batch = indices.shape[0] if indices.shape is not None and len(indices.shape) == 2 else DYNAMIC
    return _bag_infer(reduction, emb_table, indices, 2, batch, (), weights)


def _packed_run(reduction, emb_table, indices, weights):
    if indices.ndim != 2:
        fail(f"indices must be 2D [batch, indices_per_bag], got shape {list(indices.shape)}")
    if weights is not None and weights.shape != indices.shape:
        fail(f"per_sample_weights has shape {list(weights.shape)}, expected "
             f"{list(indices.shape)} (the shape of indices)")
    batch, per_bag = indices.shape
    if indices.flags.c_contiguous and per_bag:
        out = _own_bags_ir(reduction, emb_table, indices.reshape(-1), None,
                           None if weights is None else weights.reshape(-1), -1, per_bag)
        if out is not None:
            return (out,)
    bounds = np.arange(batch + 1, dtype=np.intp) * per_bag
    # Bags of no lookups (indices_per_bag = 0) are zeros: no default index here.
    return _bags_out(reduction, emb_table, np.ascontiguousarray(indices), bounds,
                     None if weights is None else np.ascontiguousarray(weights), -1)


@register("EmbeddingBagOffsetsSum", since=3, category="sparse")
class EmbeddingBagOffsetsSum3:
    @staticmethod
    def infer(attrs, emb_table: TensorSpec, indices: TensorSpec, offsets: TensorSpec,
              default_index: TensorSpec | None = None,
              per_sample_weights: TensorSpec | None = None) -> list[TensorSpec]:
        return _offsets_infer("sum", emb_table, indices, offsets, default_index, per_sample_weights)

    @staticmethod
    def run(attrs, emb_table, indices, offsets, default_index=None, per_sample_weights=None):
        return _offsets_run("sum", emb_table, indices, offsets, default_index, per_sample_weights)


@register("EmbeddingBagOffsets", since=15, attrs=EmbeddingBagAttrs, category="sparse")
class EmbeddingBagOffsets15:
    @staticmethod
    def infer(attrs, emb_table: TensorSpec, indices: TensorSpec, offsets: TensorSpec,
              default_index: TensorSpec | None = None,
              per_sample_weights: TensorSpec | None = None) -> list[TensorSpec]:
        return _offsets_infer(attrs.reduction, emb_table, indices, offsets, default_index,
                              per_sample_weights)

    @staticmethod
    def run(attrs, emb_table, indices, offsets, default_index=None, per_sample_weights=None):
        if per_sample_weights is not None and attrs.reduction == "mean":
            fail("per_sample_weights is only supported with reduction 'sum', got reduction "
                 "'mean'")
        return _offsets_run(attrs.reduction, emb_table, indices, offsets, default_index,
                            per_sample_weights)


@register("EmbeddingBagPackedSum", since=3, category="sparse")
class EmbeddingBagPackedSum3:
    @staticmethod
    def infer(attrs, emb_table: TensorSpec, indices: TensorSpec,
              per_sample_weights: TensorSpec | None = None) -> list[TensorSpec]:
        return _packed_infer("sum", emb_table, indices, per_sample_weights)

    @staticmethod
    def run(attrs, emb_table, indices, per_sample_weights=None):
        return _packed_run("sum", emb_table, indices, per_sample_weights)


@register("EmbeddingBagPacked", since=15, attrs=EmbeddingBagAttrs, category="sparse")
class EmbeddingBagPacked15:
    @staticmethod
    def infer(attrs, emb_table: TensorSpec, indices: TensorSpec,
              per_sample_weights: TensorSpec | None = None) -> list[TensorSpec]:
        return _packed_infer(attrs.reduction, emb_table, indices, per_sample_weights)

    @staticmethod
    def run(attrs, emb_table, indices, per_sample_weights=None):
        if per_sample_weights is not None and attrs.reduction == "mean":
            fail("per_sample_weights is only supported with reduction 'sum', got reduction "
                 "'mean'")
        return _packed_run(attrs.reduction, emb_table, indices, per_sample_weights)


# ------------------------------------------------------------------ SegmentMax

@dataclass(frozen=True)
class SegmentMaxAttrs:
    # Required (no default); OpenVINO writes it in lower case, the spec in upper case.
    fill_mode: Literal["zero", "lowest", "ZERO", "LOWEST"]


def _lowest(dtype: np.dtype):
    """std::numeric_limits<T>::lowest(): the most negative finite value."""
    if dtype == ml_dtypes.bfloat16:
        return ml_dtypes.finfo(ml_dtypes.bfloat16).min
    return np.finfo(dtype).min if dtype.kind == "f" else np.iinfo(dtype).min


def _segment_count(segment_ids: np.ndarray, num_segments: np.ndarray | None) -> int:
    if num_segments is not None:
        if num_segments.size != 1:
            fail(f"num_segments must be a scalar, got shape {list(num_segments.shape)}")
        count = int(num_segments.reshape(()))
        if count < 0:
            fail(f"num_segments is {count}, expected >= 0")
        return count
    return int(segment_ids[-1]) + 1 if segment_ids.size else 0


def _check_sorted_ids(segment_ids: np.ndarray) -> None:
    negative = np.flatnonzero(segment_ids < 0)
    if negative.size:
        i = int(negative[0])
        fail(f"segment_ids[{i}] is {segment_ids[i]}, expected >= 0")
    down = np.flatnonzero(segment_ids[1:] < segment_ids[:-1])
    if down.size:
        i = int(down[0]) + 1
        fail(f"segment_ids[{i}] is {segment_ids[i]}, smaller than segment_ids[{i - 1}] = "
             f"{segment_ids[i - 1]}: segment_ids must be sorted ascending")


@register("SegmentMax", since=16, attrs=SegmentMaxAttrs, category="arithmetic")
class SegmentMax16:
    @staticmethod
    def infer(attrs, data: TensorSpec, segment_ids: TensorSpec,
              num_segments: TensorSpec | None = None) -> list[TensorSpec]:
        if data.etype.kind not in ("float", "int", "uint"):
            fail(f"data must be of a numeric type, got {data.etype.name}")
        for name, spec in (("segment_ids", segment_ids), ("num_segments", num_segments)):
            if spec is not None and spec.etype.name not in _INDEX_TYPES:
                fail(f"{name} must be i32 or i64, got {spec.etype.name}")
        if data.shape is not None and len(data.shape) == 0:
            fail("data must have at least one dimension, got a scalar")
        if not _rank_compatible(segment_ids, 1):
            fail(f"segment_ids must be 1D, got {_rank_text(segment_ids)}")
        if data.shape is not None and segment_ids.shape is not None and \
                not data.shape[0].compatible(segment_ids.shape[0]):
            fail(f"segment_ids has {segment_ids.shape[0]} elements, expected the size of "
                 f"data's dim 0 ({data.shape[0]})")
        if num_segments is not None and num_segments.shape is not None and not (
                len(num_segments.shape) == 0 or (len(num_segments.shape) == 1 and
                                                 num_segments.shape[0].compatible(Dim.of(1)))):
            fail(f"num_segments must be a scalar, got {_rank_text(num_segments)}")
        if segment_ids.value is not None:
            try:
                _check_sorted_ids(segment_ids.value.reshape(-1))
            except OpProblem as e:        # a warning at load time, an error when run
                warn(f"constant {e.message}")
        count = None
        if num_segments is not None:
            count = _scalar_value(num_segments)
            if count is not None and count < 0:
                warn(f"num_segments is {count}: it must be >= 0, so running this layer fails")
                count = None
        elif segment_ids.value is not None:
            ids = segment_ids.value.reshape(-1)
            count = int(ids.max()) + 1 if ids.size else 0
        dim0 = Dim.of(count) if count is not None and count >= 0 else DYNAMIC
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        return [TensorSpec(data.etype, (dim0, *data.shape[1:]))]

    @staticmethod
    def run(attrs, data: np.ndarray, segment_ids: np.ndarray,
            num_segments: np.ndarray | None = None) -> tuple[np.ndarray]:
        if data.ndim == 0 or segment_ids.shape != data.shape[:1]:
            fail(f"segment_ids has shape {list(segment_ids.shape)}, expected "
                 f"[{data.shape[0] if data.ndim else '?'}] (data's dim 0)")
        _check_sorted_ids(segment_ids)
        count = _segment_count(segment_ids, num_segments)
        check_alloc((count, *data.shape[1:]), data.dtype, "the output")
        fill = 0 if attrs.fill_mode.lower() == "zero" else _lowest(data.dtype)
        out = np.full((count, *data.shape[1:]), fill, dtype=data.dtype)
        # Ids from num_segments on are left out (the spec); the ids are sorted, so they
        # are a tail of the lookups.
        used = int(np.searchsorted(segment_ids, count, side="left"))
        if used == 0 or out[0].size == 0:
            return (out,)
        from .segment_sum_loop import segment_max

        bounds = np.empty(count + 1, np.intp)
        _segment_bounds(segment_ids[:used], count, bounds)
        values = _rows(data[:used])
        halves = values.dtype == ml_dtypes.bfloat16 or values.dtype == np.float16
        if halves:      # exact in f32, which the compiled loop knows
            values, rows = values.astype(np.float32), _rows(out).astype(np.float32)
        else:
            rows = _rows(out)
        # A compiled loop, the segments split over the shared pool: NumPy's reduceat along
        # axis 0 is ~5x slower (measured). fmax: a NaN is passed over unless the whole
        # segment is NaN, and -inf is a value like any other (see docs/ops.md: the CPU plugin
        # starts from `lowest`, so it returns lowest for a segment of -inf or NaN).
        parallel(lambda first, last: segment_max(rows, values, bounds, first, last),
                 balanced_ranges(bounds, _workers(used * values.shape[1] // 16)))
        if halves:
            out[...] = rows.reshape(out.shape).astype(out.dtype)
        return (out,)


# ------------------------------------------------------------------ SparseFillEmptyRows

@register("SparseFillEmptyRows", since=16, category="sparse")
class SparseFillEmptyRows16:
    @staticmethod
    def infer(attrs, values: TensorSpec, dense_shape: TensorSpec, indices: TensorSpec,
              default_value: TensorSpec) -> list[TensorSpec]:
        if values.etype.kind not in ("float", "int", "uint"):
            fail(f"values must be of a numeric type, got {values.etype.name}")
        if default_value.etype != values.etype:
            fail(f"default_value must have the element type of values ({values.etype.name}), "
                 f"got {default_value.etype.name}")
        for name, spec in (("dense_shape", dense_shape), ("indices", indices)):
            if spec.etype.name not in _INDEX_TYPES:
                fail(f"{name} must be i32 or i64, got {spec.etype.name}")
        if indices.etype != dense_shape.etype:
            fail(f"indices and dense_shape must have one element type, got "
                 f"{indices.etype.name} and {dense_shape.etype.name}")
        if not _rank_compatible(values, 1):
            fail(f"values must be 1D, got {_rank_text(values)}")
        if not _rank_compatible(default_value, 0):
            fail(f"default_value must be a scalar, got {_rank_text(default_value)}")
        if not _rank_compatible(dense_shape, 1) or (
                dense_shape.shape is not None and not dense_shape.shape[0].compatible(Dim.of(2))):
            fail(f"dense_shape must be 1D with 2 elements, got {_rank_text(dense_shape)}")
        if not _rank_compatible(indices, 2) or (
                indices.shape is not None and not indices.shape[1].compatible(Dim.of(2))):
            fail(f"indices must be [M, 2], got {_rank_text(indices)}")
        m = DYNAMIC
        if values.shape is not None:
            m = values.shape[0]
        if indices.shape is not None:
            merged = m.merge(indices.shape[0])
            if merged is None:
                fail(f"indices has {indices.shape[0]} rows, expected one for each of the "
                     f"{m} values")
            m = merged
        rows = DYNAMIC
        if dense_shape.value is not None and dense_shape.value.size == 2:
            r = int(dense_shape.value.reshape(-1)[0])
            if r >= 0:
                rows = Dim.of(r)
        # M' = M + the number of empty rows: at most M + rows.
        total = Dim(m.lo, None if m.hi is None or rows.hi is None else m.hi + rows.hi)
        return [TensorSpec(indices.etype, (total, Dim.of(2))), TensorSpec(values.etype, (total,)),
                TensorSpec.make("boolean", (rows,))]

    @staticmethod
    def run(attrs, values, dense_shape, indices, default_value):
        if values.ndim != 1 or indices.shape != (values.shape[0], 2):
            fail(f"indices has shape {list(indices.shape)}, expected [{values.shape[0]}, 2] "
                 f"(one row for each value)")
        if dense_shape.shape != (2,):
            fail(f"dense_shape has shape {list(dense_shape.shape)}, expected [2]")
        rows, cols = int(dense_shape[0]), int(dense_shape[1])
        if rows < 0 or cols < 0:
            fail(f"dense_shape is {dense_shape.tolist()}, expected non-negative sizes")
        for axis, (name, limit) in enumerate((("rows", rows), ("columns", cols))):
            column = indices[:, axis]
            bad = np.flatnonzero((column < 0) | (column >= limit))
            if bad.size:
                i = int(bad[0])
                fail(f"indices[{i}, {axis}] is {column[i]}, expected in [0, {limit}) "
                     f"(dense_shape {name})")
        check_alloc((rows,), np.bool_, "empty_row_indicator")
        empty = np.ones(rows, dtype=bool)
        empty[indices[:, 0]] = False
        # The outputs hold a row for each value and each empty row, as dense_shape's value
        # says: checked before they (and the sort's int64 order, no larger than the
        # indices) are made.
        total = values.shape[0] + int(np.count_nonzero(empty))
        check_alloc((total, 2), indices.dtype, "output_indices")
        check_alloc((total,), values.dtype, "output_values")
        new_rows = np.flatnonzero(empty).astype(indices.dtype)
        all_indices = np.concatenate([indices, np.stack([new_rows, np.zeros_like(new_rows)], 1)])
        all_values = np.concatenate([values, np.full(new_rows.size, default_value.reshape(()),
                                                     dtype=values.dtype)])
        # Row-major order; entries at one position keep their input order (a stable sort;
        # the reference's std::sort leaves that order open).
        order = np.lexsort((all_indices[:, 1], all_indices[:, 0]))
        return (all_indices[order], all_values[order], empty)
