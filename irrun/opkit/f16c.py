"""f16 -> f32 with the CPU's conversion instructions (F16C), through a loop compiled once
per process by llvmlite (numba's compiler, already installed with it).

Why: NumPy's f16 -> f32 cast has no SIMD path (its casts are compiled for the x86-64-v2
baseline, which has no F16C) and runs at ~2 ns an element; it was most of the time
irrun takes to read an f16-compressed model, whose decompression Converts are folded at
load. `vcvtph2ps` converts 16 halves per instruction, so the loop is bound by memory.

What it costs: importing llvmlite's LLVM library and compiling the loop, about 50 ms,
once per process. numeric._cast therefore only builds it once NumPy has spent about that
long on such casts in this process (the ski-rental rule: rent until the rent paid equals
the price, then buy), so a one-shot `irrun model.xml` never pays more than twice the
better choice, and a process that loads many or large models gets the fast loop.

Exact: F16C's conversion is IEEE's, like NumPy's (every finite value, the infinities and
the signed zeros bit for bit). NaNs stay NaNs; a signalling NaN comes out quieted, where
NumPy keeps its payload bits as they are.

`load()` gives the compiled loops (Loops: `convert(src, dst)` writes f32(src) into dst,
both contiguous and of one length; `convert_many(pairs)` does that for several pairs in
one call), or None where they cannot be built (no F16C on this CPU, no llvmlite, or any
failure in LLVM): the caller then keeps NumPy's cast.
"""
from __future__ import annotations

import ctypes
import threading

# The loop, in LLVM's IR: blocks of 16 halves extended to floats as one vector, then the
# remaining 0-15 one at a time. Loads and stores say align 2 / align 4: NumPy's buffers are
# aligned to their element only.
_IR = r"""
define void @f16_to_f32(ptr %src, ptr %dst, i64 %n) {
entry:
  %blocks = lshr i64 %n, 4
  %has_blocks = icmp ne i64 %blocks, 0
  br i1 %has_blocks, label %block, label %tail_start

block:
  %b = phi i64 [0, %entry], [%b_next, %block]
  %at = shl i64 %b, 4
  %in = getelementptr half, ptr %src, i64 %at
  %h16 = load <16 x half>, ptr %in, align 2
  %f16 = fpext <16 x half> %h16 to <16 x float>
  %out = getelementptr float, ptr %dst, i64 %at
  store <16 x float> %f16, ptr %out, align 4
  %b_next = add i64 %b, 1
  %more = icmp ult i64 %b_next, %blocks
  br i1 %more, label %block, label %tail_start

tail_start:
  %first = shl i64 %blocks, 4
  %has_tail = icmp ult i64 %first, %n
  br i1 %has_tail, label %tail, label %done

tail:
  %i = phi i64 [%first, %tail_start], [%i_next, %tail]
  %tin = getelementptr half, ptr %src, i64 %i
  %h = load half, ptr %tin, align 2
  %f = fpext half %h to float
  %tout = getelementptr float, ptr %dst, i64 %i
  store float %f, ptr %tout, align 4
  %i_next = add i64 %i, 1
  %tail_more = icmp ult i64 %i_next, %n
  br i1 %tail_more, label %tail, label %done

done:
  ret void
}

; Several arrays in one call (one release of the GIL for all): srcs[k] -> dsts[k], counts[k]
; elements each.
define void @f16_to_f32_many(ptr %srcs, ptr %dsts, ptr %counts, i64 %arrays) {
entry:
  %any = icmp ne i64 %arrays, 0
  br i1 %any, label %each, label %done

each:
  %k = phi i64 [0, %entry], [%k_next, %each]
  %at_src = getelementptr ptr, ptr %srcs, i64 %k
  %src = load ptr, ptr %at_src, align 8
  %at_dst = getelementptr ptr, ptr %dsts, i64 %k
  %dst = load ptr, ptr %at_dst, align 8
  %at_count = getelementptr i64, ptr %counts, i64 %k
  %count = load i64, ptr %at_count, align 8
  call void @f16_to_f32(ptr %src, ptr %dst, i64 %count)
  %k_next = add i64 %k, 1
  %more = icmp ult i64 %k_next, %arrays
  br i1 %more, label %each, label %done

done:
  ret void
}
"""

# What building the loop costs, in seconds (measured: 45-51 ms on a 2-core Xeon VM, most of
# it loading LLVM's shared library), and what NumPy's casts have cost this process so far.
PRICE_SECONDS = 0.05
_rent_paid = 0.0

_lock = threading.Lock()
_built: list = []          # [] until load() ran once; then [Loops or None]


def pay_rent(seconds: float) -> None:
    """Count `seconds` spent by NumPy on a cast the loop could have done."""
    global _rent_paid
    _rent_paid += seconds


def loop():
    """The compiled loops once NumPy's casts have cost this process PRICE_SECONDS (they
    are built then), else None."""
    if _built:
        return _built[0]
    return load() if _rent_paid >= PRICE_SECONDS else None


def load():
    """The compiled loops (Loops), or None (built once; see the module's docstring)."""
    with _lock:
        if not _built:
            _built.append(_build())
        return _built[0]


class Loops:
    """The two compiled entry points; both release the GIL while they convert."""

    def __init__(self, one, many):
        self._one, self._many = one, many

    def convert(self, src, dst) -> None:
        """dst[:] = f32(src) for contiguous f16 src and f32 dst of one length."""
        self._one(src.ctypes.data, dst.ctypes.data, src.size)

    def convert_many(self, pairs) -> None:
        """convert(src, dst) for each (src, dst) of `pairs`, in one call."""
        n = len(pairs)
        srcs = (ctypes.c_void_p * n)(*[src.ctypes.data for src, _ in pairs])
        dsts = (ctypes.c_void_p * n)(*[dst.ctypes.data for _, dst in pairs])
        counts = (ctypes.c_int64 * n)(*[src.size for src, _ in pairs])
        self._many(srcs, dsts, counts, n)


def _build():
    from .llvm import compile_ir, host_has

    if not host_has("f16c"):
        return None           # LLVM would emit a library call per element: no gain
    pointer, count = ctypes.c_void_p, ctypes.c_int64
    fns = compile_ir(_IR, {"f16_to_f32": (None, pointer, pointer, count),
                           "f16_to_f32_many": (None, pointer, pointer, pointer, count)})
    if fns is None:           # no llvmlite, an LLVM that rejects the IR: NumPy's cast stays
        return None
    return Loops(fns["f16_to_f32"], fns["f16_to_f32_many"])
