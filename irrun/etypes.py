"""Element types: IR names, port precisions, NumPy dtypes and sub-byte unpacking."""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .errors import UnsupportedError


@dataclass(frozen=True)
class ElementType:
    name: str          # IR name: "f32", "i64", "boolean", "u4", ...
    dtype: np.dtype    # how irrun holds the values (sub-byte types are unpacked to one byte)
    bits: int          # bits per element in the .bin
    kind: str          # "float" | "int" | "uint" | "bool"

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
]}

# Types OpenVINO knows that irrun reads but cannot compute with yet.
UNSUPPORTED = ("u2", "u3", "u6", "nf4", "f8e4m3", "f8e5m2", "f8e8m0", "f4e2m1", "string")

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
    raise ValueError(f"unknown element type '{name}' (known: {', '.join(ELEMENT_TYPES)}, "
                     f"{', '.join(UNSUPPORTED)})")


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
    """Bytes that `count` elements take in the .bin (sub-byte types are packed)."""
    return (count * et.bits + 7) // 8


def decode(raw: np.ndarray, et: ElementType, shape: tuple[int, ...]) -> np.ndarray:
    """Values of `shape` from the raw uint8 bytes of a Const, without a copy when byte-sized."""
    count = int(np.prod(shape, dtype=np.int64))
    if et.bits >= 8:
        return np.frombuffer(raw, dtype=et.dtype, count=count).reshape(shape)
    packed = np.frombuffer(raw, dtype=np.uint8, count=nbytes(et, count))
    if et.bits == 1:
        # u1: the most significant bit of each byte comes first.
        values = np.unpackbits(packed, bitorder="big")[:count]
    else:
        # u4/i4: the low nibble of each byte comes first.
        values = np.empty(packed.size * 2, dtype=np.uint8)
        values[0::2] = packed & 0x0F
        values[1::2] = packed >> 4
        values = values[:count]
        if et.name == "i4":
            values = ((values.astype(np.int8) ^ 8) - 8).astype(np.int8)
    return values.astype(et.dtype, copy=False).reshape(shape)


def encode(values: np.ndarray, et: ElementType) -> bytes:
    """The .bin bytes for `values` (the inverse of decode); used by tests and tools."""
    flat = np.ascontiguousarray(values, dtype=et.dtype).reshape(-1)
    if et.bits >= 8:
        return flat.tobytes()
    if et.bits == 1:
        return np.packbits(flat.astype(np.uint8) & 1, bitorder="big").tobytes()
    nib = flat.astype(np.uint8) & 0x0F
    if nib.size % 2:
        nib = np.append(nib, np.uint8(0))
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()
