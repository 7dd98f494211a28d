"""MatMul-1 (spec page: matrix/MatMul_1).

A rank-1 A is a row vector [1, K] and a rank-1 B a column vector [K, 1], whatever the
transpose attributes say; the added dim is removed from the result. transpose_a/b swap the
two innermost dims of inputs of rank >= 2. Batch dims broadcast with numpy rules.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from irrun.opkit import (
    matmul,
    Dim, Fixed, TensorSpec, as_dtype, broadcast_shapes, fail, format_shape, is_static, register,
    same_etype, static_values,
)


@dataclass(frozen=True)
class MatMulAttrs:
    transpose_a: bool = False
    transpose_b: bool = False


def _matrix_shape(shape, transpose: bool, is_b: bool):
    """The shape as a matrix stack [..., rows, cols], and whether a dim was added."""
    if len(shape) == 1:
        one = Dim.of(1)
        return ((shape[0], one) if is_b else (one, shape[0])), True
    if transpose:
        return tuple(shape[:-2]) + (shape[-1], shape[-2]), False
    return tuple(shape), False


# Products of fewer multiply-adds than this skip irrun.opkit.matmul's check for a split over
# the worker pool (far below its threshold; the check cost as much as the product).
SMALL_MACS = 1 << 15


@register("MatMul", since=1, attrs=MatMulAttrs, category="matrix")
class MatMul1:
    @staticmethod
    def infer(attrs, a: TensorSpec, b: TensorSpec):
        et = same_etype(a, b, names=("A (input 0)", "B (input 1)"))
        if et.kind == "bool":
            fail("MatMul does not accept boolean inputs")
        for name, s in (("A", a), ("B", b)):
            if s.shape is not None and len(s.shape) == 0:
                fail(f"MatMul input {name} must have rank >= 1, got a scalar")
        if a.shape is None or b.shape is None:
            return [TensorSpec(et, None)]
        ma, a_vec = _matrix_shape(a.shape, attrs.transpose_a, is_b=False)
        mb, b_vec = _matrix_shape(b.shape, attrs.transpose_b, is_b=True)
        k = ma[-1].merge(mb[-2])
        if k is None:
            fail(f"MatMul inner dims differ: A {format_shape(a.shape)} (transpose_a="
                 f"{str(attrs.transpose_a).lower()}) gives K={ma[-1]}, B {format_shape(b.shape)} "
                 f"(transpose_b={str(attrs.transpose_b).lower()}) gives K={mb[-2]}")
        batch = broadcast_shapes(ma[:-2], mb[:-2], names=["A batch dims", "B batch dims"])
        out = tuple(batch)
        if not a_vec:
            out += (ma[-2],)
        if not b_vec:
            out += (mb[-1],)
        return [TensorSpec(et, out)]

    @staticmethod
    def run(attrs, a, b):
        if (a.ndim >= 2 and b.ndim == 2 and a.dtype == b.dtype and a.dtype.kind == "f"
                and a.dtype.itemsize >= 4):
            # f32/f64 data times a matrix (a recurrent cell's products, a decoder's
            # projections of [1, 1, E]): the checks below, shortly (the matrix has no batch
            # dims to disagree); a small product is one np.matmul, as irrun.opkit.matmul
            # would make it anyway.
            x = np.swapaxes(a, -1, -2) if attrs.transpose_a else a
            y = b.T if attrs.transpose_b else b
            if x.shape[-1] == y.shape[0]:
                if x.size * y.shape[1] < SMALL_MACS:
                    return (np.matmul(x, y),)
                return (matmul(x, y),)
        if a.ndim == 0 or b.ndim == 0:
            fail(f"MatMul inputs must have rank >= 1, got shapes {list(a.shape)} and {list(b.shape)}")
        x = np.swapaxes(a, -1, -2) if attrs.transpose_a and a.ndim >= 2 else a
        y = np.swapaxes(b, -1, -2) if attrs.transpose_b and b.ndim >= 2 else b
        if x.shape[-1] != y.shape[-2 if y.ndim >= 2 else 0]:
            fail(f"MatMul inner dims differ: A {list(a.shape)} and B {list(b.shape)} "
                 f"(transpose_a={attrs.transpose_a}, transpose_b={attrs.transpose_b})")
        if x.ndim > 2 and y.ndim > 2:     # else one side has no batch dims to disagree
            try:
                np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
            except ValueError:
                fail(f"MatMul batch dims do not broadcast: A {list(a.shape)} and B "
                     f"{list(b.shape)}")
        if a.dtype.kind in "fV" and a.dtype.itemsize == 2:
            # f16/bf16 accumulate in f32 and round once, as the CPU plugin does.
            return (as_dtype(matmul(x.astype(np.float32), y.astype(np.float32)), a.dtype),)
        with np.errstate(all="ignore"):   # integer products wrap like C++
            return (as_dtype(matmul(x, y), a.dtype),)

    @staticmethod
    def prepare(attrs, inputs, values):
        # run's first case (f32/f64 data times a matrix), its choices made once; a weight
        # the plan knows is handed over transposed as run transposes it (a view).
        a, b = inputs
        if not (is_static(a.shape) and is_static(b.shape)):
            return None
        if (len(a.shape) > 2 and len(b.shape) > 2 and a.etype == b.etype
                and a.etype.dtype.char in "fd" and not attrs.transpose_a
                and not attrs.transpose_b):
            # Batches of products (a rotary embedding's positions times frequencies): run's
            # general case, whose checks inference made.
            return matmul, (0, 1)
        if (len(a.shape) < 2 or len(b.shape) != 2 or a.etype != b.etype
                or a.etype.dtype.char not in "fd" or attrs.transpose_a):
            return None
        sa, sb = static_values(a.shape), static_values(b.shape)
        rows, cols = (sb[1], sb[0]) if attrs.transpose_b else sb
        if sa[-1] != rows:
            return None
        product = np.matmul if math.prod(sa) * cols < SMALL_MACS else matmul
        if values[1] is not None:
            return product, (0, Fixed(values[1].T if attrs.transpose_b else values[1]))
        if not attrs.transpose_b:
            return product, (0, 1)
        return None
