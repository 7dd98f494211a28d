"""out = W @ X for a product with few columns, W [M, K] read as stored (f16, widened to f32
as it is loaded, or f32) and X given transposed, [N, K]: the convolutions of a network's
last stages, whose weights are megabytes and whose output maps have a handful of positions.

Why not BLAS: such a product is bound by reading W, once. OpenBLAS packs W into its own
layout first (a second pass over it) and needs it in f32 (twice the bytes of the f16
weights a compressed model ships). Read in place, as halves, ResNet-18's 512x4608 by 4
products took 590-680 us in the model's runs against OpenBLAS's 760-880.

The loop, in LLVM's IR (irrun.opkit.llvm): a block of ROWS rows of W times every column of
X, 16 elements of K at a time: each row's 16 weights are loaded once and multiplied into
one <16 x float> accumulator per column (llvm.fmuladd: fused where the CPU has FMA), so
ROWS x N accumulators live in registers (N <= 4: at most 16), and each is summed across its
lanes at the end of the row. The sums are f32 throughout; their order is this loop's, not
BLAS's (the results agree to f32 rounding, not bit for bit). K must be a positive
multiple of 16.

`product_for(columns, half)` gives (rows4, rows1): fn(w, x, out, K, lo, hi) filling
out[lo:hi] (a C-contiguous [M, columns] f32 array) for rows lo..hi of W (hi - lo a
multiple of 4 for rows4), compiled once per process per column count and weight type; or
None (no llvmlite, or LLVM failed): the caller decompresses and takes BLAS.
"""
from __future__ import annotations

import ctypes
import functools

from irrun.opkit.llvm import compile_ir

MAX_COLUMNS = 4        # accumulators: 4 rows x 4 columns of <16 x float>, half the registers
ROWS = 4

_P, _I = ctypes.c_void_p, ctypes.c_int64
_SIGNATURE = (None, _P, _P, _P, _I, _I, _I)     # (w, x, out, K, lo, hi)


@functools.lru_cache(maxsize=None)
def product_for(columns: int, half: bool):
    if not 1 <= columns <= MAX_COLUMNS:
        return None
    ir = "\n".join([_HEADER, _rows_function("rows4", ROWS, columns, half),
                    _rows_function("rows1", 1, columns, half)])
    fns = compile_ir(ir, {"rows4": _SIGNATURE, "rows1": _SIGNATURE})
    return None if fns is None else (fns["rows4"], fns["rows1"])


_HEADER = """\
declare <16 x float> @llvm.fmuladd.v16f32(<16 x float>, <16 x float>, <16 x float>)
declare float @llvm.vector.reduce.fadd.v16f32(float, <16 x float>)
"""


def _rows_function(name: str, rows: int, columns: int, half: bool) -> str:
    """define void @name(w, x, out, K, lo, hi): rows lo, lo + rows, ... < hi, `rows` at a
    time. Both loops test at their end: the caller passes lo < hi and K >= 16."""
    et, align = ("half", 2) if half else ("float", 4)
    rs, cs = range(rows), range(columns)
    lines = [f"define void @{name}(ptr %w, ptr %x, ptr %out, i64 %K, i64 %lo, i64 %hi) {{",
             "entry:",
             "  %blocks = lshr i64 %K, 4",
             "  br label %row",
             "row:",
             "  %m = phi i64 [%lo, %entry], [%m_next, %row_end]"]
    for r in rs:
        lines += [f"  %m{r} = add i64 %m, {r}",
                  f"  %w_row{r} = mul i64 %m{r}, %K"]
    lines += ["  br label %k",
              "k:",
              "  %b = phi i64 [0, %row], [%b_next, %k]"]
    for r in rs:
        for c in cs:
            lines.append(f"  %acc{r}_{c} = phi <16 x float> [zeroinitializer, %row], "
                         f"[%sum{r}_{c}, %k]")
    lines.append("  %at = shl i64 %b, 4")
    for r in rs:
        # Unaligned loads: NumPy aligns a Const's weights to their element only.
        lines += [f"  %wi{r} = add i64 %w_row{r}, %at",
                  f"  %wp{r} = getelementptr {et}, ptr %w, i64 %wi{r}",
                  f"  %wl{r} = load <16 x {et}>, ptr %wp{r}, align {align}"]
        lines.append(f"  %wv{r} = fpext <16 x half> %wl{r} to <16 x float>" if half
                     else f"  %wv{r} = bitcast <16 x float> %wl{r} to <16 x float>")
    for c in cs:
        lines += [f"  %xr{c} = mul i64 %K, {c}",
                  f"  %xj{c} = add i64 %xr{c}, %at",
                  f"  %xp{c} = getelementptr float, ptr %x, i64 %xj{c}",
                  f"  %xv{c} = load <16 x float>, ptr %xp{c}, align 4"]
        for r in rs:
            lines.append(f"  %sum{r}_{c} = call <16 x float> @llvm.fmuladd.v16f32("
                         f"<16 x float> %wv{r}, <16 x float> %xv{c}, <16 x float> %acc{r}_{c})")
    lines += ["  %b_next = add i64 %b, 1",
              "  %more_k = icmp ult i64 %b_next, %blocks",
              "  br i1 %more_k, label %k, label %row_end",
              "row_end:"]
    for r in rs:
        for c in cs:
            lines += [f"  %s{r}_{c} = call reassoc float @llvm.vector.reduce.fadd.v16f32("
                      f"float -0.0, <16 x float> %sum{r}_{c})",
                      f"  %o{r}_{c}a = mul i64 %m{r}, {columns}",
                      f"  %o{r}_{c} = add i64 %o{r}_{c}a, {c}",
                      f"  %op{r}_{c} = getelementptr float, ptr %out, i64 %o{r}_{c}",
                      f"  store float %s{r}_{c}, ptr %op{r}_{c}, align 4"]
    lines += [f"  %m_next = add i64 %m, {rows}",
              "  %more_rows = icmp ult i64 %m_next, %hi",
              "  br i1 %more_rows, label %row, label %done",
              "done:",
              "  ret void",
              "}"]
    return "\n".join(lines)
