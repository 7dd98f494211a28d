"""Element types: IR names, port precisions, NumPy dtypes and sub-byte unpacking."""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import UnsupportedError


@dataclass(frozen=True)
class ElementType:
    name: str          # IR name: "f32", "i64", "boolean", "u4", ...
    dtype: np.dtype    # how irrun holds the values (sub-byte types are unpacked to one byte)
    bits: int          # bits per element in the .bin
    kind: str          # "float" | "int" | "uint" | "bool" | "string"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "float")

    def __str__(self) -> str:
        return self.name


def _et(name, dtype, bits, kind):
    return ElementType(name, np.dtype(dtype), bits, kind)


ELEMENT_TYPES: dict[str, ElementType] = {e.name: e for e in [
    _et("f64", np.float64, 64, "float"),
    _et("f32", np.float32, 32, "float"),
    _et("f16", np.float16, 16, "float"),
    _et("bf16", ml_dtypes.bfloat16, 16, "float"),
    _et("i64", np.int64, 64, "int"),
    _et("i32", np.int32, 32, "int"),
    _et("i16", np.int16, 16, "int"),
    _et("i8", np.int8, 8, "int"),
    _et("u64", np.uint64, 64, "uint"),
    _et("u32", np.uint32, 32, "uint"),
    _et("u16", np.uint16, 16, "uint"),
    _et("u8", np.uint8, 8, "uint"),
    _et("boolean", np.bool_, 8, "bool"),
    _et("u1", np.uint8, 1, "uint"),
    _et("u4", np.uint8, 4, "uint"),
    _et("i4", np.int8, 4, "int"),
    _et("u2", np.uint8, 2, "uint"),
    _et("u3", np.uint8, 3, "uint"),
    _et("u6", np.uint8, 6, "uint"),
    # The weight-compression float types: held as ml_dtypes' types, one byte per value.
    _et("f8e4m3", ml_dtypes.float8_e4m3fn, 8, "float"),
    _et("f8e5m2", ml_dtypes.float8_e5m2, 8, "float"),
    _et("f8e8m0", ml_dtypes.float8_e8m0fnu, 8, "float"),
    _et("f4e2m1", ml_dtypes.float4_e2m1fn, 4, "float"),
    # nf4 codes index NF4_VALUES; irrun holds the f32 values they stand for.
    _et("nf4", np.float32, 4, "float"),
    # string: held as a NumPy object array of Python str (see decode_strings); `bits` is the
    # size of one reference, what check_alloc counts before the strings themselves exist.
    _et("string", object, 64, "string"),
]}

# Types OpenVINO knows that irrun reads but cannot compute with yet.
UNSUPPORTED: tuple[str, ...] = ()

# The 16 values of the nf4 codes (QLoRA's NormalFloat4, as OpenVINO's ConvertNF4 has them),
# and the 15 boundaries between neighbours a value is quantized against (x > boundary, in f64).
NF4_VALUES = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236023, 1.0], dtype=np.float32)
NF4_BOUNDARIES = np.array([
    -0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
    -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
    0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
    0.5016634166240692, 0.6427869200706482, 0.8614784181118011], dtype=np.float64)

# Port `precision` spellings (upper case) mapped to IR element type names.
PRECISIONS = {
    "FP64": "f64", "FP32": "f32", "FP16": "f16", "BF16": "bf16",
    "I64": "i64", "I32": "i32", "I16": "i16", "I8": "i8",
    "U64": "u64", "U32": "u32", "U16": "u16", "U8": "u8",
    "BOOL": "boolean", "BOOLEAN": "boolean", "BIN": "u1", "U1": "u1", "U4": "u4", "I4": "i4",
    "U2": "u2", "U3": "u3", "U6": "u6", "NF4": "nf4", "F8E4M3": "f8e4m3",
    "F8E5M2": "f8e5m2", "F8E8M0": "f8e8m0", "F4E2M1": "f4e2m1", "STRING": "string",
}

_BY_DTYPE = {}
for _e in ELEMENT_TYPES.values():
    if _e.bits >= 8:
        _BY_DTYPE.setdefault(_e.dtype, _e)
_BY_DTYPE[np.dtype(ml_dtypes.float4_e2m1fn)] = ELEMENT_TYPES["f4e2m1"]   # its own dtype


def is_known(name: str) -> bool:
    return name in ELEMENT_TYPES or name in UNSUPPORTED


def element_type(name: str) -> ElementType:
    """The ElementType for an IR name (`f32`) or a port precision (`FP32`)."""
    if isinstance(name, ElementType):
        return name
    key = name if name in ELEMENT_TYPES else PRECISIONS.get(name.upper(), name.lower())
    if key in ELEMENT_TYPES:
        return ELEMENT_TYPES[key]
    if key in UNSUPPORTED:
        raise UnsupportedError(f"element type '{name}' is not supported yet "
                               f"(supported: {', '.join(ELEMENT_TYPES)})")
    raise ValueError(f"unknown element type '{name}' (known: "
                     f"{', '.join([*ELEMENT_TYPES, *UNSUPPORTED])})")


def normalize_precision(precision: str) -> str | None:
    """A port precision as an IR element type name, or None when it is not one."""
    key = PRECISIONS.get(precision.upper())
    if key is None and precision.lower() in ELEMENT_TYPES:
        key = precision.lower()
    if key is None and precision.lower() in UNSUPPORTED:
        key = precision.lower()
    return key


def from_dtype(dtype) -> ElementType:
    """The element type irrun uses for a NumPy dtype (byte-sized types only)."""
    try:
        return _BY_DTYPE[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise ValueError(f"no OpenVINO element type for NumPy dtype {dtype}") from None


def nbytes(et: ElementType, count: int) -> int:
    """Bytes that `count` elements take in the .bin (sub-byte types are packed; u3 and u6
    in whole groups of 3 bytes, 8 or 4 values each, as OpenVINO writes them). For strings,
    the bytes of the packed layout's header only (the count and count + 1 offsets): the
    symbols after it are as long as its last offset says (see decode_strings)."""
    if et.kind == "string":
        return 4 * (count + 2)
    if et.bits == 3:
        return -(-count // 8) * 3
    if et.bits == 6:
        return -(-count // 4) * 3
    return (count * et.bits + 7) // 8


def decode(raw: np.ndarray, et: ElementType, shape: tuple[int, ...]) -> np.ndarray:
    """Values of `shape` from the raw uint8 bytes of a Const, without a copy when byte-sized."""
    if et.kind == "string":
        return decode_strings(raw, shape)
    count = int(np.prod(shape, dtype=np.int64))
    if et.bits >= 8:
        return np.frombuffer(raw, dtype=et.dtype, count=count).reshape(shape)
    packed = np.frombuffer(raw, dtype=np.uint8, count=nbytes(et, count))
    if et.bits == 1:
        # u1: the most significant bit of each byte comes first.
        values = np.unpackbits(packed, bitorder="big")[:count]
    elif et.bits == 2:
        # u2: four per byte, the lowest two bits first.
        values = np.stack([(packed >> s) & 3 for s in (0, 2, 4, 6)], axis=1).reshape(-1)[:count]
    elif et.bits == 3:
        values = _decode_u3(packed, count)
    elif et.bits == 6:
        values = _decode_u6(packed, count)
    else:
        # u4/i4/nf4/f4e2m1: the low nibble of each byte comes first.
        values = np.empty(packed.size * 2, dtype=np.uint8)
        values[0::2] = packed & 0x0F
        values[1::2] = packed >> 4
        values = values[:count]
        if et.name == "i4":
            values = ((values.astype(np.int8) ^ 8) - 8).astype(np.int8)
        elif et.name == "nf4":
            values = NF4_VALUES[values]
        elif et.name == "f4e2m1":
            values = values.view(ml_dtypes.float4_e2m1fn)
    return values.astype(et.dtype, copy=False).reshape(shape)


def decode_strings(raw: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A string Const from OpenVINO's packed layout: an i32 count, then count + 1 i32 byte
    offsets into the symbols that follow (string i is symbols[offset[i]:offset[i + 1]]).

    Strings are held as a NumPy object array of Python str, decoded from UTF-8 with
    'surrogateescape' so that bytes which are not UTF-8 round-trip exactly (OpenVINO's
    strings are bytes). Raises ValueError saying what is wrong with the layout."""
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    raw = np.asarray(raw, dtype=np.uint8).reshape(-1)
    header = 4 * (count + 2)
    if raw.size < header:
        raise ValueError(f"the packed strings need at least {header} bytes for {count} "
                         f"strings (a count and {count + 1} offsets), got {raw.size}")
    ints = raw[:header].view("<i4")
    if int(ints[0]) != count:
        raise ValueError(f"the packed strings hold {int(ints[0])} strings, shape "
                         f"{list(shape)} needs {count}")
    offsets = ints[1:].astype(np.int64)
    symbols = raw[header:]
    bad = np.flatnonzero((offsets < 0) | (offsets > symbols.size))
    if bad.size:
        raise ValueError(f"offset {int(bad[0])} of the packed strings is {int(offsets[bad[0]])}, "
                         f"outside the {symbols.size} bytes of symbols")
    down = np.flatnonzero(np.diff(offsets) < 0)
    if down.size:
        raise ValueError(f"offsets of the packed strings decrease at string {int(down[0])} "
                         f"({int(offsets[down[0]])} to {int(offsets[down[0] + 1])})")
    return strings_from_bytes(symbols, offsets[:-1], offsets[1:], shape)


def strings_from_bytes(symbols: np.ndarray, begins: np.ndarray, ends: np.ndarray,
                       shape) -> np.ndarray:
    """An object array of `shape` of the str in symbols[begins[i]:ends[i]] (checked bounds).

    Making one Python object per string is the one per-element loop here: a list
    comprehension over slices of one bytes object."""
    data = bytes(np.asarray(symbols, dtype=np.uint8).data)
    out = np.empty(len(begins), dtype=object)
    out[:] = [data[b:e].decode("utf-8", "surrogateescape")
              for b, e in zip(begins.tolist(), ends.tolist())]
    return out.reshape(shape)


def strings_to_bytes(values: np.ndarray) -> list[bytes]:
    """The UTF-8 bytes of each string of an object array, in C order (the inverse of
    strings_from_bytes: surrogate escapes become the bytes they stand for)."""
    return [s.encode("utf-8", "surrogateescape") for s in np.asarray(values).reshape(-1).tolist()]


def encode_strings(values: np.ndarray) -> bytes:
    """OpenVINO's packed layout of a string tensor (the inverse of decode_strings)."""
    parts = strings_to_bytes(values)
    offsets = np.zeros(len(parts) + 2, dtype="<i4")
    offsets[0] = len(parts)
    offsets[2:] = np.cumsum([len(b) for b in parts], dtype=np.int64)
    return offsets.tobytes() + b"".join(parts)


def _groups(packed: np.ndarray, count: int, per: int, size: int) -> np.ndarray:
    """The bytes as rows of `size` bytes, each holding `per` values (the last row padded)."""
    rows = -(-count // per)
    full = np.zeros(rows * size, dtype=np.uint8)
    full[:packed.size] = packed[:rows * size]
    return full.reshape(rows, size)


def _decode_u3(packed: np.ndarray, count: int) -> np.ndarray:
    """u3, as OpenVINO packs it: per 8 values 3 bytes; two bytes of the values' low two bits
    (four per byte, first value in the top bits), then one byte of their third bit (first
    value in the top bit)."""
    g = _groups(packed, count, 8, 3)
    low = np.stack([(g[:, :2] >> s) & 3 for s in (6, 4, 2, 0)], axis=2).reshape(-1, 8)
    high = np.stack([(g[:, 2] >> s) & 1 for s in range(7, -1, -1)], axis=1)
    return ((high << 2) | low).reshape(-1)[:count].astype(np.uint8)


def _decode_u6(packed: np.ndarray, count: int) -> np.ndarray:
    """u6, as OpenVINO packs it: per 4 values 3 bytes; two bytes of the values' low four
    bits (two per byte, first value in the high nibble), then one byte of their top two bits
    (first value in the top bits)."""
    g = _groups(packed, count, 4, 3)
    low = np.stack([g[:, :2] >> 4, g[:, :2] & 0xF], axis=2).reshape(-1, 4)
    high = np.stack([(g[:, 2] >> s) & 3 for s in (6, 4, 2, 0)], axis=1)
    return ((high << 4) | low).reshape(-1)[:count].astype(np.uint8)


def encode(values: np.ndarray, et: ElementType) -> bytes:
    """The .bin bytes for `values` (the inverse of decode); used by tests and tools."""
    if et.kind == "string":
        return encode_strings(values)
    flat = np.ascontiguousarray(values, dtype=et.dtype).reshape(-1)
    if et.bits >= 8:
        return flat.tobytes()
    if et.bits == 1:
        return np.packbits(flat.astype(np.uint8) & 1, bitorder="big").tobytes()
    if et.bits in (2, 3, 6):
        return _encode_packed(flat.astype(np.uint8), et.bits)
    if et.name == "nf4":
        codes = nf4_codes(flat)
    elif et.name == "f4e2m1":
        codes = flat.view(np.uint8)
    else:
        codes = flat.astype(np.uint8)
    nib = codes & 0x0F
    if nib.size % 2:
        nib = np.append(nib, np.uint8(0))
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()


def _encode_packed(v: np.ndarray, bits: int) -> bytes:
    if bits == 2:
        v = np.append(v, np.zeros(-v.size % 4, np.uint8)).reshape(-1, 4) & 3
        return (v[:, 0] | (v[:, 1] << 2) | (v[:, 2] << 4) | (v[:, 3] << 6)).astype(np.uint8).tobytes()
    per = 8 if bits == 3 else 4
    v = np.append(v, np.zeros(-v.size % per, np.uint8)).reshape(-1, per)
    if bits == 3:
        low, high = v & 3, (v >> 2) & 1
        b0 = (low[:, 0] << 6) | (low[:, 1] << 4) | (low[:, 2] << 2) | low[:, 3]
        b1 = (low[:, 4] << 6) | (low[:, 5] << 4) | (low[:, 6] << 2) | low[:, 7]
        b2 = np.zeros(len(v), np.uint8)
        for i in range(8):
            b2 |= high[:, i] << (7 - i)
    else:
        low, high = v & 0xF, (v >> 4) & 3
        b0 = (low[:, 0] << 4) | low[:, 1]
        b1 = (low[:, 2] << 4) | low[:, 3]
        b2 = (high[:, 0] << 6) | (high[:, 1] << 4) | (high[:, 2] << 2) | high[:, 3]
    return np.stack([b0, b1, b2], axis=1).astype(np.uint8).tobytes()


def nf4_codes(values: np.ndarray) -> np.ndarray:
    """The nf4 code of each value: how many boundaries it exceeds (NaN exceeds none), as
    OpenVINO's ConvertNF4 quantizes (its boundaries are doubles: compared in f64)."""
    x = np.asarray(values, dtype=np.float64)
    codes = np.searchsorted(NF4_BOUNDARIES, x, side="left").astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(0), codes)


def convert_into(x: np.ndarray, et: ElementType) -> np.ndarray:
    """Values converted to one of the weight-compression types as OpenVINO's Convert does:
    u2/u3/u6 keep the low bits of the C++ integer (floats truncate toward zero first); nf4
    takes the nearest code's value; f8e4m3/f8e5m2 round to nearest even through f16, as the
    CPU plugin does (overflow gives NaN and inf); f4e2m1 rounds to nearest even and saturates at +-6, NaN included (by its
    sign); f8e8m0 rounds the exponent to nearest even, with zero and negatives giving its
    smallest value 2**-127, +inf and overflow its largest 2**127 and a positive NaN NaN."""
    x = np.asarray(x)
    if et.name in ("u2", "u3", "u6"):
        if x.dtype.kind in "fV":
            f = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0))
            v = np.clip(f, -2.0**63, 2.0**63 - 1024).astype(np.int64)
        else:
            v = x.astype(np.int64)
        return np.asarray(v & ((1 << et.bits) - 1), dtype=np.uint8)
    if et.name == "nf4":
        return NF4_VALUES[nf4_codes(x)].reshape(x.shape)
    f = x.astype(np.float32)
    if et.name == "f4e2m1":
        y = np.where(np.isnan(f), np.copysign(np.float32(6), f), f)
        return np.asarray(y.astype(ml_dtypes.float4_e2m1fn))
    if et.name == "f8e8m0":
        bits = f.view(np.uint32)
        sign, exp, mant = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
        up = (mant > 0x400000) | ((mant == 0x400000) & ((exp & 1) == 1))
        code = np.minimum(exp + up, 254)
        code = np.where(exp == 0, np.where(mant > 0x600000, 1, 0), code)   # below 2**-126
        code = np.where(exp == 255, np.where(mant != 0, 255, 254), code)  # NaN, +inf
        code = np.where((sign == 1) | (f == 0), 0, code)
        return np.asarray(code.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu))
    # f8e4m3/f8e5m2: through f16, as the CPU plugin converts (so a value just above a tie
    # of the f8 type can round down: two roundings, not one).
    with np.errstate(over="ignore"):        # beyond f16: inf, then NaN (e4m3) or inf (e5m2)
        return np.asarray(f.astype(np.float16).astype(et.dtype))
