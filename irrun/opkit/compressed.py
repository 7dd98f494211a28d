"""Weights kept compressed: the f16 Const behind a decompression Convert, handed to the
kernels that read halves themselves instead of the f32 array folding would have made.

Why: a model that `save_model` compressed ships f16 weights and a Convert to f32 after
each. Folded at load, every weight is written again in f32: twice the memory, most of the
load (ResNet-18: 47 MB of f32 pages to fault in and fill), and twice the bytes a
memory-bound product reads at every run. A kernel whose op lists an input port in its
class's COMPRESSED_INPUTS takes a CompressedWeights there, and the loader keeps a Convert
compressed (irrun.run.decompress.compressed_source) when every layer it feeds takes it so, it
is large (COMPRESSED_MIN_ELEMENTS), and the process has LLVM loaded already (the kernels
that read halves are compiled by it; loading it for them would cost more than they save).

The object stands for the Convert's f32 output: `shape`, `dtype` (float32), `size`, `ndim`
are that output's, so shape rules and the executor's bookkeeping see what inference
promised. `source` is the f16 array (the Const's, read-only). `decompressed()` is the f32
array, converted on first call and kept (a kernel that cannot use the halves for some
input shapes asks for it: those runs then cost what a folded Convert costs). Anything that
wants a plain array (a listener, a model output, np.asarray) gets a fresh f32 copy.
"""
from __future__ import annotations

import threading

import numpy as np

# Weights of fewer elements are decompressed at load as before: a product over at most 2 MB
# of halves (this machine's L2) is not the run's bottleneck, and only large products gain
# from reading half the bytes.
COMPRESSED_MIN_ELEMENTS = 1 << 20


class CompressedWeights:
    __slots__ = ("source", "shape", "_f32", "_lock", "__weakref__")
    dtype = np.dtype(np.float32)

    def __init__(self, source: np.ndarray):
        self.source = source
        self.shape = source.shape
        self._f32 = None
        self._lock = threading.Lock()

    @property
    def ndim(self) -> int:
        return self.source.ndim

    @property
    def size(self) -> int:
        return self.source.size

    @property
    def nbytes(self) -> int:
        """What it holds: the halves, and the f32 copy once a kernel asked for it."""
        return self.source.nbytes + (0 if self._f32 is None else self._f32.nbytes)

    def decompressed(self) -> np.ndarray:
        """The f32 values, read-only, converted once (every later call returns the same)."""
        if self._f32 is None:
            with self._lock:
                if self._f32 is None:
                    self._f32 = _frozen(self._convert())
        return self._f32

    def __array__(self, dtype=None, copy=None):
        out = self._f32.copy() if self._f32 is not None else self._convert()
        return out if dtype is None else out.astype(dtype, copy=False)

    def _convert(self) -> np.ndarray:
        """A new f32 array of the values, within the memory limit: the loader did not
        allocate it, so the limit is asked here (the executor names the layer)."""
        from irrun.ir.weights import check_alloc

        from .numeric import convert_array

        check_alloc(self.shape, self.dtype, "the decompressed weights")
        return convert_array(self.source, "f32")      # what the Convert's kernel computes

    def __repr__(self) -> str:
        return f"CompressedWeights(f16 -> f32, shape={list(self.shape)})"


def plain(value):
    """`value` as an array: a CompressedWeights' f32 values, anything else as it is."""
    return np.asarray(value) if isinstance(value, CompressedWeights) else value


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
