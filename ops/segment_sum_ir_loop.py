"""The f32 and f16 loops of ops/segment_sum_loop.py, written in LLVM's IR
(irrun.opkit.llvm): the weighted sums of EmbeddingBag* and of EmbeddingSegmentsSum's sorted
path, for f32 or f16 tables whose rows are a whole number of 8-element vectors (8..256
elements) and i32 or i64 ids. f16 values are extended to f32 (exact), summed in f32 and
rounded to f16 once at the end (to nearest even), as the numba loop does.

Why a second copy: numba's loop was 1.23x PyTorch's embedding_bag on one thread and on two,
and nothing changed in it moved that; this loop, doing the same work in the same order,
is 1.02-1.04x (bench/ir_embedding_bag.py). Same order means the same sums, bit for bit:
each lookup's row is multiplied by its weight and added to the row of sums (fmul then fadd,
never a fused multiply-add), the bag's sum divided by its size for a mean, an empty bag
the default row or zeros. The sums live in registers, as <16 x float> vectors (<8 x float>
for widths that are an odd number of 8s).

Each function tells the caller what its numba twin does (the caller's checks and
fallbacks are the same): -1 when all was summed; else, for the bag loops, the first lookup
whose index is not a row of the table (or a bag whose own offsets are wrong), for
`segments` the first lookup that breaks the sorted-ids promise or has such an index. Ids are compared as unsigned 64-bit numbers after sign extension, as the
numba loops compare np.uintp values: a negative one is a huge one.

The ops call @bag_chunks and @segment_chunks (see _chunks_ir), which run @bags and
@segments over chunks that each thread claims as it goes. @segments finds each segment's
end as it goes, one id at a time.

`loops_for(width, index_dtype, streaming, table_dtype, group, table_bytes)` gives the
functions of one group (_GROUPS: "segments", "bags", "offsets" or "packed"), compiled once
per process per width, index type, store kind, group and prefetch plan (far_stage), or
None (no llvmlite, or the width is not one of these): the caller then takes the numba
loop. Streaming loops write the output with non-temporal stores, which skip reading each
output line into the cache before overwriting it (about a tenth of the memory traffic
when the output is large): only for an output on a 64-byte boundary (they store whole
aligned vectors) that is too large to be read back from the cache anyway. They end with
an sfence, so the rows are visible to the thread that waits for the call.
"""
from __future__ import annotations

import ctypes
import functools
import re

import numpy as np

from irrun.opkit.llvm import compile_ir, host_has

# How far ahead the loops ask for rows, in two stages: into L2 about FAR_BYTES of rows
# ahead, and from there into L1 about NEAR_BYTES ahead (within the lookup bounds given,
# so a narrow row, whose lookup takes less time, is asked for more lookups ahead). Why
# two: a prefetch into L1 holds one of the core's few L1 miss buffers until its line comes
# from memory, so however far ahead the loop asks, only that many lines are on the way;
# L2 keeps many more misses under way. Measured in alternating turns against PyTorch on
# an AMD EPYC (Zen 4; bench/run.py's case, 2 threads, bit-identical sums), one stage into
# L1 (12 KiB ahead: 48 lookups of 64 f32, the best single stage on Zen 5) against these two: EmbeddingSegmentsSum with rows of 64 f32 1.07x -> 0.46-0.56x, of
# 64 f16 1.27x -> 0.55-0.77x; the bag loop 1.01x -> 0.59x; rows of 16 f32 1.17x -> 0.71x,
# of 128 f32 0.55x -> 0.40x; a 5 MB table 1.02x -> 0.81x (such tables now keep the near
# stage only: FAR_TABLE_BYTES, measured after). One stage
# 48 KiB ahead into L1 was no better than 12 KiB; into L2 only, or 80 KiB ahead, about
# the same as these. (Not yet measured on an Intel CPU.)
NEAR_BYTES, NEAR_LOOKUPS = 8 << 10, (8, 64)
FAR_BYTES, FAR_LOOKUPS = 40 << 10, (32, 640)
# Tables of up to this many bytes get the near stage only: the caches hold much of them,
# and the far stage then only adds instructions. Measured on the Zen 4 machine above
# (1 MiB of L2 a core, 32 MiB of L3), EmbeddingSegmentsSum on one thread with the far
# stage against without, in alternating turns: tables of 0.25-3.5 MB took 7-24% longer
# with it (100k and 1M lookups); of 5-10 MB anything from 18% less to 24% more, by the
# number of lookups and the run; of 16 MB 24-31% less, of 50 MB 47-48% less.
FAR_TABLE_BYTES = 8 << 20


def far_stage(table_bytes: int | None) -> bool:
    """Whether the loops over a table of `table_bytes` (None: unknown, taken as large)
    have the far stage."""
    return table_bytes is None or table_bytes > FAR_TABLE_BYTES


def prefetch_ahead(row_bytes: int) -> tuple[int, int]:
    """(near, far): how many lookups ahead the loops ask for rows of `row_bytes` bytes
    into L1 and into L2."""
    def lookups(bytes_: int, bounds: tuple[int, int]) -> int:
        return min(bounds[1], max(bounds[0], bytes_ // row_bytes))
    return lookups(NEAR_BYTES, NEAR_LOOKUPS), lookups(FAR_BYTES, FAR_LOOKUPS)


WIDTHS = range(1, 257)              # row widths with a loop here (elements)

_P, _I = ctypes.c_void_p, ctypes.c_int64
_SIGNATURES = {
    # The bag and segment loops over all bags or segments, in `count` chunks that the
    # calling threads claim one by one from the shared i64 at `next` (see _chunks_ir):
    # (table, rows, indices, bounds, weights, one_weight, out, default, mean, n, bags,
    #  count, next) and (table, rows, indices, segment_ids, weights, one_weight, out,
    #  default, n, segments, count, next)
    "bag_chunks": (_I, _P, _I, _P, _P, _P, _I, _P, _I, _I, _I, _I, _I, _P),
    "segment_chunks": (_I, _P, _I, _P, _P, _P, _I, _P, _I, _I, _I, _I, _P),
    # @bag_chunks over the op's own offsets (of the index type), checked as it goes:
    # (table, rows, indices, offsets, weights, one_weight, out, default, mean, n, bags,
    #  count, next)
    "offset_bag_chunks": (_I, _P, _I, _P, _P, _P, _I, _P, _I, _I, _I, _I, _I, _P),
    # and over packed bags of per_bag lookups each, the offsets pointer being per_bag
    "packed_bag_chunks": (_I, _P, _I, _P, _I, _P, _I, _P, _I, _I, _I, _I, _I, _P),
}


# Each op compiles only the functions it calls (a module of all of them took 65-100 ms
# to build, against 20-50 for one group): group -> (the functions in its module, the
# ones it exports).
_GROUPS = {
    "segments": (("segments", "share", "segment_cut", "segment_chunks"), ("segment_chunks",)),
    "bags": (("bags", "share", "bag_cut", "bag_chunks"), ("bag_chunks",)),
    "offsets": (("offset_bags", "share", "offset_cut", "offset_bag_chunks"),
                ("offset_bag_chunks",)),
    "packed": (("packed_bags", "share", "packed_bag_chunks"), ("packed_bag_chunks",)),
}


def loops_for(width: int, index_dtype: np.dtype, streaming: bool = False,
              table_dtype: np.dtype = np.dtype(np.float32), group: str = "segments",
              table_bytes: int | None = None):
    """The loops `group` exports ({"segment_chunks": fn} for "segments"; see _GROUPS) for
    rows of `width` elements of `table_dtype` (f32, or f16 where the CPU converts halves
    itself: F16C) and ids of `index_dtype` (int32 or int64), with streaming stores or
    not, for a table of `table_bytes` (its prefetch plan: far_stage), or None (see the
    module's docstring)."""
    if width not in WIDTHS or index_dtype not in (np.int32, np.int64):
        return None
    streaming = streaming and width % 8 == 0     # see _ir: whole vectors, each aligned
    if table_dtype == np.float16:
        if not host_has("f16c"):
            return None       # LLVM would call a library routine per half
    elif table_dtype != np.float32:
        return None
    return _compiled(width, np.dtype(index_dtype).itemsize * 8, bool(streaming),
                     table_dtype == np.float16, group, far_stage(table_bytes))


@functools.lru_cache(maxsize=None)
def _compiled(width: int, index_bits: int, streaming: bool, half: bool, group: str,
              far: bool):
    return compile_ir(_ir(width, index_bits, streaming, half, group, far),
                      {name: _SIGNATURES[name] for name in _GROUPS[group][1]})


def _ir(width: int, index_bits: int, streaming: bool = False, half: bool = False,
        group: str = "segments", far: bool = True) -> str:
    et, esize = ("half", 2) if half else ("float", 4)     # the table's (and output's) type
    row_bytes = width * esize
    near, far_ahead = prefetch_ahead(row_bytes)
    ix = f"i{index_bits}"
    # The row as vectors: (first element, lanes) each. Streaming loops store whole vectors
    # on their own boundary, so their rows (a multiple of 8 elements: loops_for) are
    # vectors of one size, 16 lanes (a 512-bit register of f32) or 8; other loops take as
    # many 16s as fit, then one each of 8, 4, 2 and 1 where needed.
    if streaming:
        size = 16 if width % 16 == 0 else 8
        chunks = [(at, size) for at in range(0, width, size)]
    else:
        chunks, at = [], 0
        for size in (16, 8, 4, 2, 1):
            while width - at >= size:
                chunks.append((at, size))
                at += size
    # How a vector of the output is stored ({align}: filled in per vector by each), and
    # what precedes each ret.
    out_store = "align {align}, !nontemporal !0" if streaming else "align {align}"
    fence = "  call void @llvm.x86.sse.sfence()\n" if streaming else ""

    def widen(name: str, value: str, type_: str) -> str:
        """%name = %value as f32 (an f16 value is extended: exact)."""
        if not half:
            return f"  %{name} = bitcast {type_} %{value} to {type_}"   # a new name only
        wide = "<{lanes} x float>" if "<" in type_ else "float"
        return f"  %{name} = fpext {type_} %{value} to {wide}"

    def narrow(name: str, value: str) -> str:
        """%name = the f32 vector %value in the output's type (to nearest even for f16)."""
        if not half:
            return f"  %{name} = bitcast <{{lanes}} x float> %{value} to <{{lanes}} x float>"
        return f"  %{name} = fptrunc <{{lanes}} x float> %{value} to <{{lanes}} x half>"

    def each(template: str) -> str:
        """The template once per vector of the row: {k} its number, {at} its first
        element, {lanes} its size, {align} the alignment its output store may assume."""
        return "\n".join(template.format(k=k, at=at, lanes=lanes,
                                          align=lanes * esize if streaming else esize)
                         for k, (at, lanes) in enumerate(chunks))

    def splat(name: str, scalar: str) -> str:
        """%name_L = the float %scalar in every lane of a vector, for each vector size L
        of the row (one each: their users share it)."""
        return "\n".join(
            f"  %{name}_one_{lanes} = insertelement <{lanes} x float> poison, float %{scalar}, i64 0\n"
            f"  %{name}_{lanes} = shufflevector <{lanes} x float> %{name}_one_{lanes}, "
            f"<{lanes} x float> poison, <{lanes} x i32> zeroinitializer"
            for lanes in sorted({lanes for _, lanes in chunks}))

    def load_index(name: str, array: str, position: str) -> str:
        """%name = the id array[position], sign-extended to i64."""
        return (f"  %{name}_at = getelementptr {ix}, ptr %{array}, i64 %{position}\n"
                f"  %{name}_raw = load {ix}, ptr %{name}_at, align {index_bits // 8}\n"
                + (f"  %{name} = sext {ix} %{name}_raw to i64" if index_bits < 64
                   else f"  %{name} = add i64 %{name}_raw, 0"))

    def prefetch(tag: str, lookup: str, stop: str, done: str, ahead: int,
                 locality: int) -> str:
        """Ask for the row of lookup `lookup` + `ahead`, if there is one and it is a row of
        the table, into L1 (`locality` 3) or L2 (2), then go on at label `done`."""
        lines = [o for o in range(0, row_bytes, 64)] + [row_bytes - 1]
        asks = "\n".join(
            f"  %{tag}_line{i} = getelementptr i8, ptr %{tag}_row, i64 {o}\n"
            f"  call void @llvm.prefetch.p0(ptr %{tag}_line{i}, i32 0, i32 {locality}, i32 1)"
            for i, o in enumerate(lines))
        return f"""  %{tag}_ahead = add i64 %{lookup}, {ahead}
  %{tag}_some = icmp ult i64 %{tag}_ahead, %{stop}
  br i1 %{tag}_some, label %{tag}_read, label %{done}
{tag}_read:
{load_index(tag + "_later", "indices", tag + "_ahead")}
  %{tag}_in = icmp ult i64 %{tag}_later, %rows
  br i1 %{tag}_in, label %{tag}_ask, label %{done}
{tag}_ask:
  %{tag}_off = mul i64 %{tag}_later, {row_bytes}
  %{tag}_row = getelementptr i8, ptr %table, i64 %{tag}_off
{asks}
  br label %{done}"""

    def add_row(tag: str, lookup: str, acc: str, new: str) -> str:
        """%new{k} = %acc{k} + weight * table[index of lookup], k over the row's vectors."""
        return f"""  %{tag}_off = mul i64 %{tag}_index, {row_bytes}
  %{tag}_row = getelementptr i8, ptr %table, i64 %{tag}_off
  %{tag}_wj = select i1 %single, i64 0, i64 %{lookup}
  %{tag}_w_at = getelementptr {et}, ptr %weights, i64 %{tag}_wj
  %{tag}_w_raw = load {et}, ptr %{tag}_w_at, align {esize}
{widen(tag + "_w", tag + "_w_raw", et)}
{splat(tag + "_wv", tag + "_w")}
""" + each(f"""  %{tag}_at{{k}} = getelementptr {et}, ptr %{tag}_row, i64 {{at}}
  %{tag}_raw{{k}} = load <{{lanes}} x {et}>, ptr %{tag}_at{{k}}, align {esize}
{widen(tag + "_v{k}", tag + "_raw{k}", "<{lanes} x " + et + ">")}
  %{tag}_m{{k}} = fmul <{{lanes}} x float> %{tag}_wv_{{lanes}}, %{tag}_v{{k}}
  %{new}{{k}} = fadd <{{lanes}} x float> %{acc}{{k}}, %{tag}_m{{k}}""")

    def fill(tag: str, s: str, done: str) -> str:
        """out[s] = table[default] (or zeros when default < 0), then go on at `done`."""
        return f"""  %{tag}_out_off = mul i64 %{s}, {width}
  %{tag}_out = getelementptr {et}, ptr %out, i64 %{tag}_out_off
  %{tag}_has_default = icmp sge i64 %default, 0
  br i1 %{tag}_has_default, label %{tag}_copy, label %{tag}_zero
{tag}_copy:
  %{tag}_d_off = mul i64 %default, {row_bytes}
  %{tag}_d_row = getelementptr i8, ptr %table, i64 %{tag}_d_off
""" + each(f"""  %{tag}_d_at{{k}} = getelementptr {et}, ptr %{tag}_d_row, i64 {{at}}
  %{tag}_d{{k}} = load <{{lanes}} x {et}>, ptr %{tag}_d_at{{k}}, align {esize}
  %{tag}_o_at{{k}} = getelementptr {et}, ptr %{tag}_out, i64 {{at}}
  store <{{lanes}} x {et}> %{tag}_d{{k}}, ptr %{tag}_o_at{{k}}, {out_store}""") + f"""
  br label %{done}
{tag}_zero:
""" + each(f"""  %{tag}_z_at{{k}} = getelementptr {et}, ptr %{tag}_out, i64 {{at}}
  store <{{lanes}} x {et}> zeroinitializer, ptr %{tag}_z_at{{k}}, {out_store}""") + f"""
  br label %{done}"""

    def store(tag: str, s: str, values: str) -> str:
        return f"""  %{tag}_out_off = mul i64 %{s}, {width}
  %{tag}_out = getelementptr {et}, ptr %out, i64 %{tag}_out_off
""" + each(f"""  %{tag}_at{{k}} = getelementptr {et}, ptr %{tag}_out, i64 {{at}}
{narrow(tag + "_n{k}", values + "{k}")}
  store <{{lanes}} x {et}> %{tag}_n{{k}}, ptr %{tag}_at{{k}}, {out_store}""")

    def lookups(enter: str, first: str, end: str, stop: str, done: str) -> str:
        """Blocks lookup, current and summed: %sum{k} = the weighted rows of lookups
        %first..%end (entered from block `enter`), prefetching up to %stop; a lookup whose
        index is not a row goes to %bad, the end to block `done`."""
        if far:
            asks = (prefetch("p", "j", stop, "far", near, 3) + "\nfar:\n"
                    + prefetch("q", "j", stop, "current", far_ahead, 2))
        else:
            asks = prefetch("p", "j", stop, "current", near, 3)
        return f"""lookup:
  %j = phi i64 [%{first}, %{enter}], [%j_next, %summed]
{each(f"  %acc{{k}} = phi <{{lanes}} x float> [zeroinitializer, %{enter}], [%sum{{k}}, %summed]")}
{asks}

current:
{load_index("r_index", "indices", "j")}
  %r_in = icmp ult i64 %r_index, %rows
  br i1 %r_in, label %summed, label %bad

summed:
{add_row("r", "j", "acc", "sum")}
  %j_next = add i64 %j, 1
  %more = icmp ult i64 %j_next, %{end}
  br i1 %more, label %lookup, label %{done}"""

    def own_bags(name: str, mode: str) -> str:
        """The bag loop over bags first..last, for one way of stating the bags (`mode`):
        "bounds", an i64 array of bags + 1 starts (bag s is bounds[s]..bounds[s+1],
        checked by the caller); or a bag op's own description, so that the caller builds
        no i64 bounds and makes no NumPy pass over them (0.2-0.3 ms of a 7 ms call, after
        the kernel has emptied the caches): "offsets" of the index type, bag s being
        offsets[s]..offsets[s+1] (the last one up to n), checked as it goes; or "packed",
        bag s being lookups s * per_bag..(s + 1) * per_bag. It returns -1 when every bag
        was summed, else s for a bag whose offsets are not 0 <= lo <= hi <= n, or the
        first lookup whose index is not a row (the caller then words the error, or takes
        the bounds path)."""
        if mode == "bounds":
            where = "ptr %bounds"
            stop = """  %stop_at = getelementptr i64, ptr %bounds, i64 %last
  %stop = load i64, ptr %stop_at, align 8
  %any = icmp slt i64 %first, %last
  br i1 %any, label %bag, label %finished
"""
            bounds = """bag:
  %s = phi i64 [%first, %entry], [%s_next, %next_bag]
  %lo_at = getelementptr i64, ptr %bounds, i64 %s
  %lo = load i64, ptr %lo_at, align 8
  %s_next = add i64 %s, 1
  %hi_at = getelementptr i64, ptr %bounds, i64 %s_next
  %hi = load i64, ptr %hi_at, align 8
  br label %checked
"""
        elif mode == "packed":
            where = "i64 %per_bag"
            stop = """  %stop = mul i64 %last, %per_bag
  %any = icmp slt i64 %first, %last
  br i1 %any, label %bag, label %finished
"""
            bounds = """bag:
  %s = phi i64 [%first, %entry], [%s_next, %next_bag]
  %s_next = add i64 %s, 1
  %lo = mul i64 %s, %per_bag
  %hi = add i64 %lo, %per_bag
  br label %checked
"""
        else:
            where = "ptr %offsets"
            stop = f"""  %to_end = icmp sge i64 %last, %bags
  br i1 %to_end, label %stop_set, label %stop_read

stop_read:
{load_index("stop_raw", "offsets", "last")}
  br label %stop_set

stop_set:
  ; where the prefetches stop: the start of bag `last`, at most n
  %stop_any = phi i64 [%n, %entry], [%stop_raw, %stop_read]
  %stop_past = icmp ugt i64 %stop_any, %n
  %stop = select i1 %stop_past, i64 %n, i64 %stop_any
  %any = icmp slt i64 %first, %last
  br i1 %any, label %bag, label %finished
"""
            bounds = f"""bag:
  %s = phi i64 [%first, %stop_set], [%s_next, %next_bag]
{load_index("lo", "offsets", "s")}
  %s_next = add i64 %s, 1
  %is_last = icmp sge i64 %s_next, %bags
  br i1 %is_last, label %bounded, label %hi_read

hi_read:
{load_index("hi_raw", "offsets", "s_next")}
  br label %bounded

bounded:
  %hi = phi i64 [%n, %bag], [%hi_raw, %hi_read]
  %lo_below = icmp slt i64 %lo, 0
  %back = icmp slt i64 %hi, %lo
  %past = icmp sgt i64 %hi, %n
  %wrong = or i1 %lo_below, %back
  %broken = or i1 %wrong, %past
  br i1 %broken, label %bad_offsets, label %checked

bad_offsets:
{fence}  ret i64 %s
"""
        return f"""
define i64 @{name}(ptr %table, i64 %rows, ptr %indices, {where}, ptr %weights,
                   i64 %one_weight, ptr %out, i64 %default, i64 %mean, i64 %n, i64 %bags,
                   i64 %first, i64 %last) {{
entry:
  %single = icmp ne i64 %one_weight, 0
{stop}
{bounds}
checked:
  %filled = icmp ne i64 %lo, %hi
  br i1 %filled, label %lookup, label %empty

empty:
{fill("e", "s", "next_bag")}

{lookups("checked", "lo", "hi", "stop", "bag_done")}

bag_done:
  %want_mean = icmp ne i64 %mean, 0
  br i1 %want_mean, label %divide, label %keep

divide:
  %count = sub i64 %hi, %lo
  %count_f = uitofp i64 %count to float
{splat("count_v", "count_f")}
{each("  %mean{k} = fdiv <{lanes} x float> %sum{k}, %count_v_{lanes}")}
  br label %keep

keep:
{each("  %final{k} = phi <{lanes} x float> [%sum{k}, %bag_done], [%mean{k}, %divide]")}
{store("o", "s", "final")}
  br label %next_bag

next_bag:
  %more_bags = icmp slt i64 %s_next, %last
  br i1 %more_bags, label %bag, label %finished

finished:
{fence}  ret i64 -1

bad:
{fence}  ret i64 %j
}}
"""
    bags = (own_bags("bags", "bounds") + own_bags("offset_bags", "offsets")
            + own_bags("packed_bags", "packed"))
    segments = f"""
define i64 @segments(ptr %table, i64 %rows, ptr %indices, ptr %segment_ids, ptr %weights,
                     i64 %one_weight, ptr %out, i64 %default, i64 %lo, i64 %hi, i64 %first,
                     i64 %last) {{
entry:
  %single = icmp ne i64 %one_weight, 0
  %any = icmp slt i64 %first, %last
  br i1 %any, label %segment, label %finished

segment:
  %s = phi i64 [%first, %entry], [%s_next, %next_segment]
  %start = phi i64 [%lo, %entry], [%after, %next_segment]
  %s_next = add i64 %s, 1
  ; The ids 1 KiB past the segment's start (a dozen segments ahead, or more) are asked
  ; for too, as the rows are: in alternating turns on an AMD EPYC (Zen 5), 2.5% faster
  ; with f32 rows and i64 ids, 9% with f16 rows, 1.6% with i32 ids (2 KiB: no better).
  ; A prefetch never faults, so the array's end needs no test.
  %ids_here = getelementptr {ix}, ptr %segment_ids, i64 %start
  %ids_ahead = getelementptr i8, ptr %ids_here, i64 1024
  call void @llvm.prefetch.p0(ptr %ids_ahead, i32 0, i32 3, i32 1)
  br label %scan

scan:
  ; The segment's end: the first lookup from %pos on whose id is not %s, one at a time.
  ; (Sixteen i32 ids at a time, so that a segment of up to 15 lookups cost one
  ; well-predicted branch here and not a mispredicted loop exit, was 5% faster on an
  ; Intel Xeon and 11.5% slower on an AMD EPYC (Zen 5, in alternating turns in one
  ; process); for i64 ids it was 5-17% slower on the Intel machine too. One loop for both, the simpler one.)
  %pos = phi i64 [%start, %segment], [%pos_1, %same]
  %inside = icmp ult i64 %pos, %hi
  br i1 %inside, label %scan_id, label %scanned

scan_id:
{load_index("id", "segment_ids", "pos")}
  %is_s = icmp eq i64 %id, %s
  br i1 %is_s, label %same, label %other

same:
  %pos_1 = add i64 %pos, 1
  br label %scan

other:
  %earlier = icmp ult i64 %id, %s
  br i1 %earlier, label %bad_end, label %scanned

scanned:
  %filled = icmp ne i64 %start, %pos
  br i1 %filled, label %lookup, label %empty

empty:
{fill("e", "s", "next_segment")}

{lookups("scanned", "start", "pos", "hi", "segment_done")}

segment_done:
{store("o", "s", "sum")}
  br label %next_segment

next_segment:
  %after = phi i64 [%start, %e_copy], [%start, %e_zero], [%pos, %segment_done]
  %more_segments = icmp slt i64 %s_next, %last
  br i1 %more_segments, label %segment, label %finished

finished:
  %last_j = phi i64 [%lo, %entry], [%after, %next_segment]
  %left_over = icmp ult i64 %last_j, %hi
  %result = select i1 %left_over, i64 %last_j, i64 -1
{fence}  ret i64 %result

bad_end:
{fence}  ret i64 %pos

bad:
{fence}  ret i64 %j
}}
"""
    functions = _functions(bags + segments + _chunks_ir(ix))
    return ("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)\n"
            "declare void @llvm.x86.sse.sfence()\n"
            + "".join(functions[name] for name in _GROUPS[group][0])
            + "!0 = !{i32 1}\n")


def _functions(text: str) -> dict[str, str]:
    """The IR text's function definitions by name, each with the comment lines above it."""
    found = {}
    for piece in re.split(r"\n(?=(?:;[^\n]*\n)*define )", text):
        name = re.search(r"^define [^@\n]*@(\w+)\(", piece, re.M)
        if name:
            found[name.group(1)] = piece.rstrip("\n") + "\n\n"
    return found


def _chunks_ir(ix: str) -> str:
    """@bag_chunks and @segment_chunks: @bags and @segments over chunks of the bags or
    segments that each calling thread claims, one after another, until none is left.

    Why: with one span per thread fixed in advance, a thread that starts late (a pool
    thread woken from sleep: 20-250 us) or runs slower (the VM's other core serves its
    interrupts) left the caller waiting 0.4 ms in a 10 ms call; claimed chunks even that
    out. Each thread finds its chunk's ends itself (a binary search of the bounds or the
    ids), so the caller's Python does no work per chunk.

    Chunk c of `count` aims at lookup @share(n, c, count) onwards (chunks that shrink
    towards the end). For bags it starts at the bag holding that lookup (balanced_ranges'
    rule); for segments at the first lookup of that
    lookup's segment (the ids' lower bound, ids compared as unsigned after sign extension),
    and at that segment. Sorted ids give rising cuts, so the chunks cover every lookup and
    segment once; an id past the segments, or cuts that fall back (unsorted ids), stop the
    thread with the lookup's position, as a lookup that breaks the promise inside a chunk
    does. They return -1 when every chunk they took was whole, else what the loop
    returned for the first one that was not: the thread takes no more
    chunks, the others go on, and the caller, which waits for all of them, takes its
    checking path."""
    def claim(name: str, params: str, work: str, more: str = "") -> str:
        """@name(params, ..., i64 %count, ptr %next): its threads claim chunks c of %count
        from the shared counter at %next until none is left. `work` is one chunk's IR,
        which sets %stop (-1 when the chunk was whole) and may branch to blocks of its
        own (`more`)."""
        return f"""
define i64 @{name}({params}, i64 %count, ptr %next) {{
entry:
  br label %claim

claim:
  %c = atomicrmw add ptr %next, i64 1 monotonic
  %left = icmp slt i64 %c, %count
  br i1 %left, label %work, label %done

work:
  %c_next = add i64 %c, 1
{work}
  %whole = icmp slt i64 %stop, 0
  br i1 %whole, label %claim, label %broken
{more}
broken:
  ret i64 %stop

done:
  ret i64 -1
}}
"""

    def bag_cut(name: str, array: str, total: str, load_start: str) -> str:
        """@name(ptr %array, i64 %n, i64 %bags, c, count): the first bag of chunk c, the
        one holding lookup @share(total, c, count) (balanced_ranges' rule); bags whose
        starts fall back (bad offsets) give some cut, which each bag's own check catches."""
        return f"""
define i64 @{name}(ptr %{array}, i64 %n, i64 %bags, i64 %c, i64 %count) {{
entry:
  %is_first = icmp eq i64 %c, 0
  br i1 %is_first, label %zero, label %inner

zero:
  ret i64 0

inner:
  %is_end = icmp sge i64 %c, %count
  br i1 %is_end, label %all, label %aim

all:
  ret i64 %bags

aim:
{total}
  %target = call i64 @share(i64 %total, i64 %c, i64 %count)
  br label %search

search:
  ; the first bag b in [0, bags) that starts past the target; the cut is b - 1
  %lo = phi i64 [0, %aim], [%lo_next, %step]
  %hi = phi i64 [%bags, %aim], [%hi_next, %step]
  %open = icmp slt i64 %lo, %hi
  br i1 %open, label %step, label %found

step:
  %sum = add i64 %lo, %hi
  %mid = lshr i64 %sum, 1
{load_start}
  %after = icmp sgt i64 %start, %target
  %mid_up = add i64 %mid, 1
  %lo_next = select i1 %after, i64 %lo, i64 %mid_up
  %hi_next = select i1 %after, i64 %mid, i64 %hi
  br label %search

found:
  %cut = sub i64 %lo, 1
  %low = icmp slt i64 %cut, 0
  %cut_0 = select i1 %low, i64 0, i64 %cut
  ret i64 %cut_0
}}
"""

    loop_params = "ptr %table, i64 %rows, ptr %indices, {}, ptr %weights, i64 %one_weight, " \
                  "ptr %out, i64 %default"
    loop_args = ("ptr %table, i64 %rows, ptr %indices, {}, ptr %weights, i64 %one_weight, "
                 "ptr %out, i64 %default")

    def bag_chunks(name: str, loop: str, where: str, cut: str | None) -> str:
        """@name over the bag loop @loop (own_bags), its chunks cut by @cut (None: bags
        of one size, cut evenly)."""
        if cut is None:
            ends = """  %first = call i64 @share(i64 %bags, i64 %c, i64 %count)
  %last = call i64 @share(i64 %bags, i64 %c_next, i64 %count)"""
        else:
            array = where.split()[1]
            ends = f"""  %first = call i64 @{cut}(ptr {array}, i64 %n, i64 %bags, i64 %c, i64 %count)
  %last = call i64 @{cut}(ptr {array}, i64 %n, i64 %bags, i64 %c_next, i64 %count)"""
        work = f"""{ends}
  %stop = call i64 @{loop}({loop_args.format(where)}, i64 %mean, i64 %n, i64 %bags,
                           i64 %first, i64 %last)"""
        return claim(name, loop_params.format(where) + ", i64 %mean, i64 %n, i64 %bags", work)

    segment_work = """  %from = call {i64, i64} @segment_cut(ptr %segment_ids, i64 %n, i64 %segments, i64 %c,
                                       i64 %count)
  %to = call {i64, i64} @segment_cut(ptr %segment_ids, i64 %n, i64 %segments,
                                     i64 %c_next, i64 %count)
  %lo = extractvalue {i64, i64} %from, 0
  %first = extractvalue {i64, i64} %from, 1
  %hi = extractvalue {i64, i64} %to, 0
  %last = extractvalue {i64, i64} %to, 1
  ; a cut past the segments, or cuts that fall back: ids that break the promise
  %bad_first = icmp slt i64 %first, 0
  %bad_last = icmp slt i64 %last, 0
  %back_lookups = icmp ult i64 %hi, %lo
  %back_segments = icmp slt i64 %last, %first
  %bad_1 = or i1 %bad_first, %bad_last
  %bad_2 = or i1 %back_lookups, %back_segments
  %bad = or i1 %bad_1, %bad_2
  br i1 %bad, label %cut_broken, label %sum

sum:
  %stop = call i64 @segments(""" + loop_args.format("ptr %segment_ids") + """,
                             i64 %lo, i64 %hi, i64 %first, i64 %last)"""
    segment_broken = """
cut_broken:
  %where = select i1 %bad_first, i64 %lo, i64 %hi
  ret i64 %where
"""
    return ("\n" + """; Where chunk c of `count` starts in `total` (lookups or bags): total - total * (1 - c /
; count)^2, so that the chunks shrink from the first to the last. The last ones end the
; call, and a thread that claims one late keeps the others waiting for at most that
; long (equal chunks: half of 1/32 of the work, 0.12 ms of 8). Two divisions keep every
; product below 2^63 for totals below 2^40.
define i64 @share(i64 %total, i64 %c, i64 %count) {
entry:
  %rest = sub i64 %count, %c
  %wide = mul i64 %total, %rest
  %once = sdiv i64 %wide, %count
  %twice_wide = mul i64 %once, %rest
  %twice = sdiv i64 %twice_wide, %count
  %start = sub i64 %total, %twice
  ret i64 %start
}

"""
            + bag_cut("bag_cut", "bounds", "  %total_at = getelementptr i64, ptr %bounds, i64 %bags\n"
                      "  %total = load i64, ptr %total_at, align 8",
                      "  %mid_at = getelementptr i64, ptr %bounds, i64 %mid\n"
                      "  %start = load i64, ptr %mid_at, align 8")
            + bag_chunks("bag_chunks", "bags", "ptr %bounds", "bag_cut")
            + bag_cut("offset_cut", "offsets", "  %total = add i64 %n, 0",
                      _load_id("start", "mid", ix, "offsets"))
            + bag_chunks("offset_bag_chunks", "offset_bags", "ptr %offsets", "offset_cut")
            + bag_chunks("packed_bag_chunks", "packed_bags", "i64 %per_bag", None)
            + f"""
define {{i64, i64}} @segment_cut(ptr %segment_ids, i64 %n, i64 %segments, i64 %c,
                                i64 %count) {{
entry:
  %is_first = icmp eq i64 %c, 0
  br i1 %is_first, label %zero, label %inner

zero:
  ret {{i64, i64}} zeroinitializer

inner:
  %is_end = icmp sge i64 %c, %count
  br i1 %is_end, label %all, label %aim

all:
  %all_1 = insertvalue {{i64, i64}} poison, i64 %n, 0
  %all_2 = insertvalue {{i64, i64}} %all_1, i64 %segments, 1
  ret {{i64, i64}} %all_2

aim:
  %at = call i64 @share(i64 %n, i64 %c, i64 %count)
  ; (a share rounds up to n itself for a few lookups and many chunks: that chunk and
  ; those after it are empty, as at the end)
  %at_end = icmp sge i64 %at, %n
  br i1 %at_end, label %all, label %aimed

aimed:
{_load_id("id", "at", ix)}
  %in_range = icmp ult i64 %id, %segments
  br i1 %in_range, label %search, label %outside

outside:
  ; (lookup, -1): the id at `at` is past the segments (or negative)
  %out_1 = insertvalue {{i64, i64}} poison, i64 %at, 0
  %out_2 = insertvalue {{i64, i64}} %out_1, i64 -1, 1
  ret {{i64, i64}} %out_2

search:
  ; the first lookup in [0, at] whose id is not below this one
  %lo = phi i64 [0, %aimed], [%lo_next, %step]
  %hi = phi i64 [%at, %aimed], [%hi_next, %step]
  %open = icmp ult i64 %lo, %hi
  br i1 %open, label %step, label %found

step:
  %sum = add i64 %lo, %hi
  %mid = lshr i64 %sum, 1
{_load_id("mid_id", "mid", ix)}
  %below = icmp ult i64 %mid_id, %id
  %mid_up = add i64 %mid, 1
  %lo_next = select i1 %below, i64 %mid_up, i64 %lo
  %hi_next = select i1 %below, i64 %hi, i64 %mid
  br label %search

found:
  %cut_1 = insertvalue {{i64, i64}} poison, i64 %lo, 0
  %cut_2 = insertvalue {{i64, i64}} %cut_1, i64 %id, 1
  ret {{i64, i64}} %cut_2
}}

"""
            + claim("segment_chunks", loop_params.format("ptr %segment_ids")
                    + ", i64 %n, i64 %segments", segment_work, segment_broken))


def _load_id(name: str, position: str, ix: str, array: str = "segment_ids") -> str:
    """%name = array[%position] sign-extended to i64 (as _ir's load_index)."""
    bits = int(ix[1:])
    return (f"  %{name}_at = getelementptr {ix}, ptr %{array}, i64 %{position}\n"
            f"  %{name}_raw = load {ix}, ptr %{name}_at, align {bits // 8}\n"
            + (f"  %{name} = sext {ix} %{name}_raw to i64" if bits < 64
               else f"  %{name} = add i64 %{name}_raw, 0"))
