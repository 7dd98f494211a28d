"""Const data: a read-only memory map of model.bin, decoded per Const without a copy."""
from __future__ import annotations

import mmap
import os

import numpy as np

from .etypes import decode, nbytes

# Refuse tensors larger than this many bytes (IRRUN_MAX_BYTES overrides): a declared
# shape must never make irrun allocate without bound (a "memory bomb").
def max_tensor_bytes() -> int:
    env = os.environ.get("IRRUN_MAX_BYTES")
    if env:
        return int(env)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return total // 2


class Weights:
    """The .bin file, memory-mapped once; slices are views into the map."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                self.buffer = np.zeros(0, dtype=np.uint8)
            else:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                self.buffer = np.frombuffer(self._map, dtype=np.uint8)
        self.size = size

    def slice(self, offset: int, size: int) -> np.ndarray:
        return self.buffer[offset:offset + size]


def const_value(weights: Weights | None, et, shape: tuple[int, ...], offset: int, size: int):
    """Decode one Const. The caller has checked offset/size against the file and shape."""
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    need = nbytes(et, count)
    if need == 0 or weights is None:
        return decode(np.zeros(need, dtype=np.uint8), et, shape)
    return decode(weights.slice(offset, need), et, shape)
