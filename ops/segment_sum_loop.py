"""The compiled loops of the sparse ops (ops/sparse.py): EmbeddingSegmentsSum-3 and the
EmbeddingBag family share one, SegmentMax-16 has its own. Numba, because summing weighted table rows bag by bag is a
loop over lookups that NumPy can only express with an [n, d] gather (the intermediate the
specs promise to avoid) or a slower sparse product.

Every op hands the loop its bags as ranges of lookups: `bounds` of length bags + 1, bag s
being the lookups bounds[s]..bounds[s+1] (offsets plus the end for EmbeddingBagOffsets,
multiples of the bag size for EmbeddingBagPacked, the first lookup of each segment for
EmbeddingSegmentsSum, found by segment_bounds).

Imported on the op's first run, so loading models without these ops never imports numba.
"""
import numba
import numba.extending
import numpy as np
from llvmlite import ir
from numba.core import cgutils

from irrun.opkit.compiled import cached_loop

PREFETCH_AHEAD = 16                 # lookups (frozen into the loop when it is compiled)
REGISTER_WIDTHS = range(8, 257, 8)  # row widths with a loop of their own (see loop_for)


def loop_for(width: int):
    """The compiled loop for rows of `width` elements, called as sum_bags is (those of
    REGISTER_WIDTHS take the type of `acc` but sum in a row of their own).

    For the usual embedding widths (REGISTER_WIDTHS) the loop is compiled for that width:
    its row of sums is then a fixed-size block of its stack that LLVM keeps in vector
    registers across a segment's lookups. A row in memory must be stored and reloaded at
    every lookup, since it might alias the table: measured at width 64 with the table in
    cache, 5 ns a lookup instead of 6 (a row on a 64-byte boundary) or 12 (one straddling
    cache lines). Other widths share sum_bags, which sums in the row it is given.
    Each loop is compiled for each kind of table and index type on first use and cached on
    disk (numba's cache tells the widths apart by the value the loop closes over).
    """
    return _for_width(width, sum_bags, _fixed_width, _compile_for_width)


def _for_width(width: int, shared, compiled: dict, compile_for):
    """`shared` for an unusual width, else the loop compile_for(width) makes, once."""
    if width not in REGISTER_WIDTHS:
        return shared
    loop = compiled.get(width)
    if loop is None:
        loop = compiled[width] = compile_for(width)
    return loop


_fixed_width: dict = {}


def _compile_for_width(fixed):
    @cached_loop
    def sum_bags_of_width(acc, out, table, bf16, indices, bounds, order, weights, default,
                          mean, first, last):
        return _sum_in_registers(_stack_row(acc, fixed), out, table, bf16, indices, bounds,
                                 order, weights, default, mean, first, last)
    return sum_bags_of_width


def segments_loop_for(width: int):
    """The compiled _sum_segments for rows of `width` elements (those of REGISTER_WIDTHS
    summing in a row of their own, as loop_for's)."""
    return _for_width(width, sum_segments, _segments_fixed_width, _compile_segments_for_width)


_segments_fixed_width: dict = {}


def _compile_segments_for_width(fixed):
    @cached_loop
    def sum_segments_of_width(acc, out, table, bf16, indices, segment_ids, weights, default,
                              lo, hi, first, last):
        return _segments_in_registers(_stack_row(acc, fixed), out, table, bf16, indices,
                                      segment_ids, weights, default, lo, hi, first, last)
    return sum_segments_of_width


def _sum_bags(acc, out, table, bf16, indices, bounds, order, weights, default, mean,
              first, last):
    """out[s] = sum of weights[i] * table[indices[i]] over the lookups j of bag s, that is
    bounds[s] <= j < bounds[s+1] (i = order[j], or j when `order` is empty; a single weight
    is every lookup's), summed in `acc` (a row of the accumulation type) and divided by the
    bag's size when `mean` (float tables only), for the bags s in first..last; table[default]
    as it is for empty bags (0 if default < 0).

    The bounds are trusted (non-decreasing, within the lookups: the caller checked them).
    The indices are checked as the loop goes: it returns bounds[last], or the first lookup
    j whose index is not a row of the table (the bags it did not reach are not written).
    Table rows are unsigned, so a negative index fails the same comparison as one too
    large, and the compiled code has no wrap-around test for negative indexes.
    """
    width = acc.shape[0]
    row_bytes = width * _itemsize(table)     # a constant in the loops of REGISTER_WIDTHS
    num_emb = np.uintp(table.shape[0])
    ordered = order.size == 0
    one_weight = weights.size == 1
    stop = np.uintp(bounds[last])
    for s in range(first, last):
        j = np.uintp(bounds[s])
        end = np.uintp(bounds[s + 1])
        if j == end:
            _fill(out, s, s + 1, table, default)
            continue
        count = end - j
        for c in range(width):
            acc[c] = 0
        while j < end:
            # The time goes in waiting for table rows from memory: ask for the row needed
            # PREFETCH_AHEAD lookups later now, so several loads are under way at once.
            ahead = j + np.uintp(PREFETCH_AHEAD)
            if ahead < stop:
                later = np.uintp(indices[ahead if ordered else np.uintp(order[ahead])])
                if later < num_emb:
                    for offset in range(0, row_bytes, 64):     # each 64-byte cache line,
                        _prefetch(table, later, offset)
                    _prefetch(table, later, row_bytes - 1)     # and the last (rows straddle)
            i = j if ordered else np.uintp(order[j])
            row = np.uintp(indices[i])
            if row >= num_emb:
                return j
            w = _load(weights[np.uintp(0) if one_weight else i], acc, bf16)
            for c in range(width):
                acc[c] += w * _load(table[row, c], acc, bf16)
            j += np.uintp(1)
        if mean:
            for c in range(width):
                out[s, c] = _store(_divide(acc[c], count), out, bf16)
        else:
            for c in range(width):
                out[s, c] = _store(acc[c], out, bf16)
    return stop


def _sum_segments(acc, out, table, bf16, indices, segment_ids, weights, default, lo, hi,
                  first, last):
    """EmbeddingSegmentsSum's loop, finding its segments as it goes: lookups lo..hi, whose
    segment_ids must run non-decreasing through first..last-1, give out[first:last] (each
    segment's weighted sum as _sum_bags gives it; table[default], or 0 if default < 0, for
    a segment without lookups). No pass of its own over the ids to find where each segment
    starts: that pass was 15% of the op's time.

    Returns -1, or the first lookup j in lo..hi that breaks the promise (an id smaller
    than the one before it, or outside first..last-1) or whose index is not a row of the
    table; out[first:last] is then incomplete and the caller takes the checking path.
    """
    width = acc.shape[0]
    row_bytes = width * _itemsize(table)
    num_emb = np.uintp(table.shape[0])
    one_weight = weights.size == 1
    stop = np.uintp(hi)
    j = np.uintp(lo)
    for s in range(first, last):
        end = j
        while end < stop and np.uintp(segment_ids[end]) == np.uintp(s):
            end += np.uintp(1)
        # The lookup after segment s's must hold a later segment (a negative id wraps to
        # a huge one and is left over at the end).
        if end < stop and np.uintp(segment_ids[end]) < np.uintp(s):
            return np.intp(end)
        if j == end:
            _fill(out, s, s + 1, table, default)
            continue
        # The sum of _sum_bags, for one segment (a copy: shared through a helper, even an
        # inlined one, the row of sums no longer stayed in registers and both loops were
        # 1.5x slower).
        for c in range(width):
            acc[c] = 0
        while j < end:
            ahead = j + np.uintp(PREFETCH_AHEAD)
            if ahead < stop:
                later = np.uintp(indices[ahead])
                if later < num_emb:
                    for offset in range(0, row_bytes, 64):
                        _prefetch(table, later, offset)
                    _prefetch(table, later, row_bytes - 1)
            row = np.uintp(indices[j])
            if row >= num_emb:
                return np.intp(j)
            w = _load(weights[np.uintp(0) if one_weight else j], acc, bf16)
            for c in range(width):
                acc[c] += w * _load(table[row, c], acc, bf16)
            j += np.uintp(1)
        for c in range(width):
            out[s, c] = _store(acc[c], out, bf16)
    # Lookups left over hold ids from `last` on (or that wrapped from negative ones).
    return np.intp(j) if j < stop else np.intp(-1)


# The loop for any width sums in the row it is given; those of REGISTER_WIDTHS have the
# body inlined by numba, so that LLVM sees that their row lives on their own stack.
sum_bags = cached_loop(_sum_bags)
_sum_in_registers = numba.njit(inline="always")(_sum_bags)
sum_segments = cached_loop(_sum_segments)
_segments_in_registers = numba.njit(inline="always")(_sum_segments)


def _segment_bounds(segment_ids, segments, bounds, lo, hi):
    """bounds[s] = the first lookup of segment s (or of the next segment present), from ids
    sorted ascending, for the segments whose first lookup is in lo..hi (and those before
    the first id when lo is 0, after the last when hi is the end): -1, or the first
    position j in lo..hi whose id is smaller than the one before or outside
    [0, segments) (bounds is then not all written). Spans of lookups can run on several
    threads: each writes only the bounds of its own segments.
    """
    n = segment_ids.shape[0]
    limit = np.uintp(segments)
    previous = np.uintp(0)
    filled = np.uintp(0)
    if lo > 0:
        previous = np.uintp(segment_ids[lo - 1])   # a negative id wraps to a huge one
        filled = previous + np.uintp(1)
    for j in range(lo, hi):
        segment = np.uintp(segment_ids[j])
        if segment < previous or segment >= limit:
            return j
        while filled <= segment:
            bounds[filled] = j
            filled += np.uintp(1)
        previous = segment
    if hi == n:
        while filled <= limit:
            bounds[filled] = n
            filled += np.uintp(1)
    return -1


segment_bounds = cached_loop(_segment_bounds)


def _segment_max(out, data, bounds, first, last):
    """out[s] = the elementwise fmax of data[bounds[s]:bounds[s+1]] for s in first..last
    (rows of empty segments are left as they are). fmax: a NaN is passed over unless the
    segment holds only NaN there."""
    for s in range(first, last):
        lo, hi = bounds[s], bounds[s + 1]
        if lo == hi:
            continue
        for c in range(data.shape[1]):
            out[s, c] = data[lo, c]
        for j in range(lo + 1, hi):
            for c in range(data.shape[1]):
                v = data[j, c]
                cur = out[s, c]
                if v > cur or cur != cur:      # noqa: PLR0124 (cur is NaN; ints compile too)
                    out[s, c] = v
    return last


segment_max = cached_loop(_segment_max)


def _divide(x, count):
    """A float bag's sum divided by its size (in the sum's type, as the CPU plugin does)."""


@numba.extending.overload(_divide)
def _divide_typed(x, count):
    if isinstance(x, numba.types.Float):
        kind = x
        return lambda x, count: x / kind(count)
    return lambda x, count: x          # integer means are taken by the caller (ops/sparse.py)


@numba.njit
def _fill(out, start, stop, table, default):
    """Rows start..stop of `out` (empty bags): table[default], or 0."""
    # Two loops, not a conditional expression: its two types would meet in float64, which
    # does not hold every int64 or uint64 bit pattern.
    if default >= 0:
        for s in range(start, stop):
            for c in range(out.shape[1]):
                out[s, c] = table[default, c]
    else:
        for s in range(start, stop):
            for c in range(out.shape[1]):
                out[s, c] = 0


def _itemsize(array):
    """The size of an element of `array`, a compile-time constant (array.itemsize is read
    from the array at run time)."""


@numba.extending.overload(_itemsize)
def _itemsize_typed(array):
    size = array.dtype.bitwidth // 8
    return lambda array: size


@numba.extending.intrinsic
def _stack_row(typingctx, like, width):
    """An array of `width` (a compile-time constant) elements of the type of the array
    `like`, on the stack of the calling loop: it cannot alias the table or the output, so
    its elements can live in registers for as long as the loop wants."""
    if not isinstance(width, numba.types.IntegerLiteral):
        return None
    size = width.literal_value
    row_type = numba.types.Array(like.dtype, 1, "C")

    def codegen(context, builder, sig, args):
        element = context.get_data_type(like.dtype)
        data = cgutils.alloca_once(builder, element, size=size)
        intp = numba.types.intp
        itemsize = context.get_constant(intp, context.get_abi_sizeof(element))
        row = context.make_array(row_type)(context, builder)
        context.populate_array(row, data=data, shape=[context.get_constant(intp, size)],
                               strides=[itemsize], itemsize=itemsize, meminfo=None)
        return row._getvalue()
    return row_type(like, width), codegen


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
    """A sum `x` (the accumulation type) as an element of `out` (as ops/sparse.py passes it)."""


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


@numba.extending.intrinsic
def _half_to_float(typingctx, bits):
    """IEEE half bits (uint16) to float32 by LLVM's own `fpext half`: exact for every value
    (one vcvtph2ps per 8 lanes where the CPU has F16C, about a quarter faster than decoding
    the bits by hand here)."""
    def codegen(context, builder, sig, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return numba.types.float32(numba.types.uint16), codegen


@numba.njit
def _f16_to_f32(bits):
    return _half_to_float(np.uint16(bits))


@numba.njit
def _bf16_to_f32(bits):
    """bfloat16 is the upper half of a float32."""
    return np.uint32(np.uint32(bits) << np.uint32(16)).view(np.float32)


@numba.extending.intrinsic
def _float_to_half(typingctx, value):
    """float32 to IEEE half bits by LLVM's own `fptrunc`: rounded to nearest even, inf past
    the range, a NaN kept NaN with the top of its payload (as NumPy's cast)."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return numba.types.uint16(numba.types.float32), codegen


@numba.njit
def _f32_to_f16(value):
    return _float_to_half(np.float32(value))


@numba.njit
def _f32_to_bf16(value):
    """float32 to bfloat16 bits, rounded to nearest even; a NaN becomes the quiet NaN of
    its sign, as ml_dtypes' conversion does."""
    bits = np.float32(value).view(np.uint32)
    if np.isnan(value):
        return np.uint16(((bits >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7FC0))
    odd = np.uint32((bits >> np.uint32(16)) & np.uint32(1))          # ties to even
    return np.uint16((bits + np.uint32(0x7FFF) + odd) >> np.uint32(16))
