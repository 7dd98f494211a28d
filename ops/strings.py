"""The string ops (spec pages: type/string-tensor-pack-15, type/string-tensor-unpack-15).

irrun holds a string tensor as a NumPy object array of Python str; a string's bytes are its
UTF-8 encoding with 'surrogateescape', so bytes that are not UTF-8 (which OpenVINO's
byte strings may hold) survive Pack and Unpack unchanged. Making or encoding one Python
object per string is the one per-element loop (a list comprehension); the offsets are
NumPy.
"""
from __future__ import annotations

import numpy as np

from irrun.opkit import DYNAMIC, Dim, NoAttrs, TensorSpec, check_alloc, fail, register

_INT32_MAX = (1 << 31) - 1


def _utf8(values: np.ndarray, what: str) -> list[bytes]:
    """The UTF-8 bytes of each string of `values` (C order), held to the memory budget before
    they are made: a tensor of many references to one long string (a Tile or Broadcast of
    it, 8 bytes an element) can stand for far more bytes than memory holds. A character is 1
    to 4 bytes (a surrogate escape one), so the characters are counted and checked first:
    what is then made is at most 4 times the budget, and the caller checks its exact size
    before joining it."""
    flat = values.reshape(-1).tolist()
    try:
        chars = sum(map(len, flat))       # str and bytes, at C speed
    except TypeError:
        chars = sum(len(v) if isinstance(v, (str, bytes)) else len(str(v)) for v in flat)
    check_alloc([chars], np.uint8, what)
    return [v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape")
            for v in flat]


def _merged_shape(a: TensorSpec, b: TensorSpec):
    """begins' and ends' shape merged; fail when they cannot be equal."""
    if a.shape is None:
        return b.shape
    if b.shape is None:
        return a.shape
    merged = [x.merge(y) for x, y in zip(a.shape, b.shape)] if len(a.shape) == len(b.shape) \
        else None
    if merged is None or any(d is None for d in merged):
        fail(f"expected begins and ends of the same shape, got {a} and {b}")
    return tuple(merged)


@register("StringTensorUnpack", since=15, attrs=NoAttrs, category="string")
class StringTensorUnpack15:
    @staticmethod
    def infer(attrs, data: TensorSpec) -> list[TensorSpec]:
        if data.etype.kind != "string":
            fail(f"expected a string tensor for data, got {data.etype.name}")
        symbols = DYNAMIC
        if data.value is not None:
            symbols = Dim.of(sum(map(len, _utf8(np.asarray(data.value), "symbols (output 2)"))))
        return [TensorSpec.make("i32", data.shape), TensorSpec.make("i32", data.shape),
                TensorSpec.make("u8", (symbols,))]

    @staticmethod
    def run(attrs, data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parts = _utf8(data, "symbols (output 2)")
        lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        ends = np.cumsum(lengths)
        total = int(ends[-1]) if ends.size else 0
        if total > _INT32_MAX:
            # begins and ends are i32 (the spec's only type): larger offsets cannot be given.
            fail(f"expected at most {_INT32_MAX} bytes of strings (i32 offsets), got {total}")
        check_alloc([total], np.uint8, "symbols (output 2)")
        symbols = np.frombuffer(b"".join(parts), dtype=np.uint8).copy()
        begins = (ends - lengths).astype(np.int32).reshape(data.shape)
        return begins, ends.astype(np.int32).reshape(data.shape), symbols


@register("StringTensorPack", since=15, attrs=NoAttrs, category="string")
class StringTensorPack15:
    @staticmethod
    def infer(attrs, begins: TensorSpec, ends: TensorSpec, symbols: TensorSpec) -> list[TensorSpec]:
        if begins.etype.name not in ("i32", "i64") or ends.etype != begins.etype:
            fail(f"expected begins and ends of one type, i32 or i64, got {begins.etype.name} "
                 f"and {ends.etype.name}")
        if symbols.etype.name != "u8":
            fail(f"expected u8 symbols, got {symbols.etype.name}")
        if symbols.shape is not None and len(symbols.shape) != 1:
            fail(f"expected 1D symbols, got {symbols}")
        return [TensorSpec.make("string", _merged_shape(begins, ends))]

    @staticmethod
    def run(attrs, begins: np.ndarray, ends: np.ndarray,
            symbols: np.ndarray) -> tuple[np.ndarray]:
        if begins.shape != ends.shape:
            fail(f"expected begins and ends of the same shape, got {list(begins.shape)} and "
                 f"{list(ends.shape)}")
        b = begins.reshape(-1).astype(np.int64)
        e = ends.reshape(-1).astype(np.int64)
        # OpenVINO's shape inference refuses begins or ends that are not ascending (in C
        # order), a negative first index and a last one past the symbols; its reference then
        # reads symbols[begin:end] unchecked. irrun refuses the same, and any range that is
        # not inside the symbols (an end before its begin included).
        for name, values in (("begins", b), ("ends", e)):
            down = np.flatnonzero(np.diff(values) < 0)
            if down.size:
                i = int(down[0]) + 1
                pos = ", ".join(str(int(k)) for k in np.unravel_index(i, begins.shape))
                fail(f"expected ascending {name} (as OpenVINO requires), got {name}[{pos}] = "
                     f"{int(values[i])} after {int(values[i - 1])}")
        n = symbols.size
        for name, values, lo, bad in (("begins", b, np.zeros_like(b), (b < 0) | (b > n)),
                                      ("ends", e, b, (e < b) | (e > n))):
            where = np.flatnonzero(bad)
            if where.size:
                i = int(where[0])
                pos = ", ".join(str(int(k)) for k in np.unravel_index(i, begins.shape)) \
                    if begins.ndim else ""
                fail(f"expected {name} in [{int(lo[i])}, {n}] (the symbols' size is {n}), got "
                     f"{name}[{pos}] = {int(values[i])}")
        # Ranges may overlap (every string the whole symbols, say): the strings can hold far
        # more bytes than the inputs. Their total is held to the memory budget before any is
        # made (Python keeps 1 to 4 bytes a character, about one a byte for most text).
        # (Summed in f64: exact below 2**53, never wrapping around as int64 could.)
        check_alloc([int(np.sum(e - b, dtype=np.float64))], np.uint8,
                    "the strings' bytes (the sum of ends - begins; ranges may overlap)")
        data = symbols.tobytes()
        out = np.empty(b.size, dtype=object)
        out[:] = [data[x:y].decode("utf-8", "surrogateescape")
                  for x, y in zip(b.tolist(), e.tolist())]
        return (out.reshape(begins.shape),)
