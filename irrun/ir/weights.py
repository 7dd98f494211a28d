"""Const data: a read-only memory map of model.bin (or a private copy), decoded per Const without a copy."""
from __future__ import annotations

import errno
import mmap as _mmap
import os
import stat

import numpy as np

from ..config import config
from ..errors import ConfigError, ReadError, ResourceError, UnsupportedError
from .etypes import ElementType, decode, element_type, nbytes

INT64_MAX = (1 << 63) - 1
MAX_RANK = 64          # NumPy's limit on ndarray dims (numpy.core's NPY_MAXDIMS)


def max_tensor_bytes() -> int:
    """The largest tensor irrun allocates: IRRUN_MAX_BYTES, else half of the memory available
    (see irrun.config).

    A declared shape must never make irrun allocate without bound (a "memory bomb"): a
    Const, a Parameter, an input array or a kernel output above this is refused before
    anything is allocated.
    """
    try:
        return config().max_bytes    # cheap during a load or a run: see config.pinned
    except ConfigError as e:
        # Kept a ResourceError for callers of this function (a budget that cannot be read
        # is a budget problem); the CLI checks the settings first and exits 2.
        raise ResourceError(e.message) from None


def _bits(dtype) -> int:
    """Bits per element of a NumPy dtype, an ElementType or an IR type name."""
    if isinstance(dtype, ElementType):
        return dtype.bits
    if isinstance(dtype, str):
        try:
            return element_type(dtype).bits
        except (ValueError, UnsupportedError):
            pass
    return np.dtype(dtype).itemsize * 8


def _dtype_name(dtype) -> str:
    return dtype.name if isinstance(dtype, ElementType) else str(np.dtype(dtype)) \
        if not isinstance(dtype, str) else dtype


_MALLOC_TUNED = False
# glibc's mallopt parameters, and what irrun sets them to.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20     # glibc's own upper bound for the threshold it adjusts itself
TRIM_THRESHOLD = 64 << 20


def reuse_memory() -> None:
    """Once per process, before its first load or run (IRRUN_REUSE_MEMORY=0 skips it): make
    glibc's malloc keep freed buffers below 32 MB for the next allocations instead of giving
    them back to the system. A run allocates and frees the same buffers layer after layer, and
    each one the system takes back has to be faulted in and zeroed again at its next use:
    ResNet-18 at 64x64 took 860 page faults a run and about a fifth of its time in them.
    Loads too: the weights folding decompresses take the pages a dropped model freed.
    onnxruntime's arena and OpenVINO's memory pools keep their buffers for the same reason.
    The cost is that up to 64 MB freed at the top of the heap stay with the process. Other
    C libraries' malloc (musl) and other systems are left as they are."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED = True
    if not config().reuse_memory:
        return
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def check_alloc(shape, dtype, what: str) -> int:
    """Refuse to allocate a tensor of `shape` (ints) and `dtype` that is too large.

    Call it before allocating any output whose size comes from input *values* (a
    num_segments, a Range's bounds, a target shape, repeats, pads, ...). Returns the
    element count; raises ResourceError naming `what`, the shape and the size (the executor
    adds the layer). A negative dim or a count that overflows int64 is refused too.
    """
    dims = [int(d) for d in shape]
    if len(dims) > MAX_RANK:
        raise ResourceError(f"{what}: shape of rank {len(dims)}; irrun's arrays (NumPy's) hold "
                            f"at most {MAX_RANK} dims")
    count = 1
    for d in dims:
        if d < 0:
            raise ResourceError(f"{what}: shape {dims} has a negative dimension")
        count *= d
    if count > INT64_MAX:
        raise ResourceError(f"{what}: shape {dims} has {count} elements, which overflows int64")
    if count == 0 and dims and max(dims) > INT64_MAX:
        # Even with no elements (another dim is 0), NumPy cannot make such a shape.
        raise ResourceError(f"{what}: shape {dims} has a dimension that overflows int64")
    bits = dtype.bits if isinstance(dtype, ElementType) else _bits(dtype)
    size = (count * bits + 7) // 8     # integer maths: no float overflow or rounding
    limit = max_tensor_bytes()
    if size > limit:
        raise ResourceError(f"{what}: shape {dims} of {_dtype_name(dtype)} needs {size} bytes, "
                            f"more than the limit of {limit} bytes (set IRRUN_MAX_BYTES to "
                            "change it)")
    return count


class Weights:
    """The .bin file, memory-mapped once (slices are views into the map), or with mmap=False
    read into a private, read-only copy.

    A mapped file that is truncated later would kill the process with SIGBUS when a Const is
    read, and one rewritten in place would silently change the results: `check()`, called
    at the start of every run, compares the file with what was mapped and raises a ReadError
    instead. A change during a run is not seen (docs/errors.md: "Reading IR files").
    """

    def __init__(self, path: str, mmap: bool = True):
        self.path = path
        self._map = None
        self._file = None
        # Check before open(): opening a FIFO blocks; /dev/zero never ends.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        f = open(path, "rb")
        try:
            st = os.fstat(f.fileno())
            size = st.st_size
            if size == 0:
                self.buffer = np.zeros(0, dtype=np.uint8)
            elif mmap:
                self._map = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ)
                self.buffer = np.frombuffer(self._map, dtype=np.uint8)
                self._file, f = f, None       # kept open: check() looks at the mapped file
                self._seen = _identity(st, os.stat(path))
            else:
                try:
                    check_alloc([size], np.uint8, "a private copy of the file (no memory map)")
                except ResourceError as e:    # reported where the .bin cannot be read
                    raise OSError(errno.ENOMEM, e.message, path) from None
                buffer = np.empty(size, dtype=np.uint8)
                view, got = memoryview(buffer), 0
                while got < size:
                    n = f.readinto(view[got:])
                    if not n:
                        raise OSError(errno.EIO, f"the file shrank to {got} bytes while it was "
                                      "read", path)
                    got += n
                buffer.flags.writeable = False
                self.buffer = buffer
        finally:
            if f is not None:
                f.close()
        self.size = size

    def check(self) -> None:
        """Raise ReadError if the mapped file was truncated, rewritten or replaced since it
        was read (its size, modification and change times, or the inode at its path)."""
        if self._file is None:
            return           # a private copy (or no data): nothing can change under it
        try:
            now = _identity(os.fstat(self._file.fileno()), os.stat(self.path))
        except OSError as e:
            now = (e.strerror or str(e),)
        if now != self._seen:
            raise ReadError("weights file changed since it was read (size, time or inode "
                            "differ); read the model again, or read it with mmap=False "
                            "(--no-mmap) to work on a private copy", file=self.path)

    def slice(self, offset: int, size: int) -> np.ndarray:
        return self.buffer[offset:offset + size]


def _identity(mapped: os.stat_result, at_path: os.stat_result) -> tuple:
    # The mapped file's size and times (a rewrite in place changes them; utime() cannot set
    # st_ctime back), and which file the path names now (a new file saved over it).
    return (mapped.st_size, mapped.st_mtime_ns, mapped.st_ctime_ns, at_path.st_dev,
            at_path.st_ino)


def const_value(weights: Weights | None, et, shape: tuple[int, ...], offset: int, size: int):
    """Decode one Const. The caller has checked offset/size against the file and shape."""
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    need = nbytes(et, count)
    if et.kind == "string" and weights is not None:
        # The packed strings (count, offsets, symbols) take all of `size`: the header says
        # how much of it the symbols are; decode checks it (ValueError).
        return decode(weights.slice(offset, size), et, shape)
    if need == 0 or weights is None:
        return decode(np.zeros(need, dtype=np.uint8), et, shape)
    return decode(weights.slice(offset, need), et, shape)


class LiveBudget:
    """The bytes of a run's live tensors, held against the same limit (IRRUN_MAX_BYTES).

    A per-tensor limit alone lets ten tensors of 95 MB through a 100 MB budget; the
    executor tells this what each slot holds and when it is freed. Memory NumPy allocated is
    counted once per buffer (views share their base's count); memory owned by something
    else (the .bin's map, a private copy of it, an input file's bytes) is not a run's
    allocation and is not counted.
    """

    # Buffers of at most this many bytes go uncounted when the run's slots could not hold
    # more than a quarter of the limit in them (see small_for): counting every tiny tensor
    # of a Loop body cost a sixth of its run.
    SMALL = 1 << 16

    def __init__(self, limit: int | None = None, slots: int | None = None):
        self.limit = max_tensor_bytes() if limit is None else limit
        self.live = 0
        # Each slot holds one array: n slots of small buffers are n * SMALL bytes at most.
        self.small = self.SMALL if slots is not None and slots * self.SMALL <= self.limit // 4 \
            else -1
        self._held: dict[int, list] = {}     # id(buffer) -> [buffer, slots holding it]
        self._slot: dict[int, int] = {}      # slot -> id(buffer)

    def before(self, expect) -> None:
        """Refuse a layer whose static outputs would take the run past the limit."""
        need = 0
        for dtype, shape in expect:
            if shape is not None:
                n = 1
                for d in shape:
                    n *= d
                need += n * dtype.itemsize
        if need and self.live + need > self.limit:
            self._refuse(need)

    def hold(self, slots, arrays) -> None:
        small = self.small
        for slot, a in zip(slots, arrays):
            if a.base is None and a.nbytes <= small:
                continue          # its own small buffer (a view could hold a large one)
            base = a
            while isinstance(base.base, np.ndarray):
                base = base.base
            if base.base is not None or base.nbytes <= small:
                continue          # not NumPy's memory, or a view of a small buffer (as above:
                                  # each slot holds one array, so at most SMALL bytes a slot)
            key = id(base)
            entry = self._held.get(key)
            if entry is None:
                if self.live + base.nbytes > self.limit:
                    self._refuse(base.nbytes)
                self._held[key] = [base, 1]
                self.live += base.nbytes
            else:
                entry[1] += 1
            self._slot[slot] = key

    def release(self, slot) -> None:
        key = self._slot.pop(slot, None)
        if key is None:
            return
        entry = self._held[key]
        entry[1] -= 1
        if entry[1] == 0:
            self.live -= entry[0].nbytes
            del self._held[key]

    def _refuse(self, need: int):
        raise ResourceError(f"the run's live tensors would need {self.live + need} bytes "
                            f"({self.live} alive, {need} for this layer's outputs), more than "
                            f"the limit of {self.limit} bytes (set IRRUN_MAX_BYTES to change it)")
