"""The compiled loop of EmbeddingSegmentsSum-3 (ops/sparse.py): numba, because summing
weighted table rows segment by segment is a loop over lookups that NumPy can only express
with an [n, d] gather (the intermediate the spec promises to avoid) or a slower sparse product.

Imported on the op's first run, so loading models without the op never imports numba.
"""
import numba
import numba.extending
import numpy as np
from llvmlite import ir
from numba.core import cgutils

PREFETCH_AHEAD = 16               # lookups (frozen into the loop when it is compiled)

# ------------------------------------------------------------------ the compiled loop
# cache=True keeps the machine code beside this file, or in the user's cache directory
# (NUMBA_CACHE_DIR, else ~/.cache/numba) when the package's folder is read-only; each kind
# of table and index type is compiled on its first use.

@numba.njit(nogil=True, cache=True)
def sum_lookups(acc, out, table, bf16, indices, segment_ids, order, weights, start, stop,
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
