"""Reductions and TopK.

Spec pages: reduction/ (ReduceSum-1, ReduceMean-1, ReduceMax-1, ReduceMin-1, ReduceProd-1,
ReduceLogicalAnd-1, ReduceLogicalOr-1, ReduceL1-4, ReduceL2-4) and sort/ (TopK-1, TopK-3,
TopK-11).

Reductions: the axes input holds i32/i64 axes, negative ones count from the back, repeats
are merged, and an empty axes list returns the input unchanged. Floats accumulate in f64
and round once; integers wrap like the C++ types (sum, prod) and divide by truncation
(mean), as OpenVINO does. Empty reductions: sum 0, prod 1, max the type's lowest value
(-inf), min its highest (+inf), mean NaN for floats and an error for integers.

TopK: ties go to the lower index (what OpenVINO's CPU plugin does, and what stable=true
requires); sort="none" gives the same order as sort="value". NaN is ordered above every
number (so mode=max picks NaNs first, mode=min last): OpenVINO leaves NaN unspecified.
k must be in [0, dim]: k=0 gives an empty result; k > dim is an error (OpenVINO fails).
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import Dim, TensorSpec, as_dtype, fail, format_shape, register


@dataclass(frozen=True)
class ReduceAttrs:
    keep_dims: bool = False


def _axes_values(axes: TensorSpec | np.ndarray) -> list[int]:
    return np.asarray(axes).reshape(-1).tolist()


def normalize_axes(values, rank: int, what="axes") -> list[int]:
    out = []
    for v in (int(a) for a in values):
        if not -rank <= v < max(rank, 1) or (rank == 0 and v not in (0, -1)):
            raise ValueError(f"{what} value {v} is out of range [{-rank}, {rank - 1}] "
                             f"for data of rank {rank}")
        out.append(v % rank if rank else 0)
    return sorted(set(out))


def reduce_infer(name: str, attrs, data: TensorSpec, axes: TensorSpec, kinds) -> list[TensorSpec]:
    if data.etype.kind not in kinds:
        fail(f"{name} does not accept element type {data.etype.name} (accepts {', '.join(kinds)})")
    if not axes.etype.is_integer:
        fail(f"{name} axes (input 1) must be i32 or i64, got {axes.etype.name}")
    if axes.shape is not None and len(axes.shape) > 1:
        fail(f"{name} axes (input 1) must be a scalar or 1-D, got shape {format_shape(axes.shape)}")
    if data.shape is None:
        return [TensorSpec(data.etype, None)]
    rank = len(data.shape)
    if axes.value is None:
        if attrs.keep_dims:
            # Each dim is either kept or becomes 1.
            return [TensorSpec(data.etype, tuple(
                Dim(min(d.lo, 1), None if d.hi is None else max(d.hi, 1)) for d in data.shape))]
        return [TensorSpec(data.etype, None)]
    try:
        reduced = normalize_axes(_axes_values(axes.value), rank)
    except ValueError as e:
        fail(f"{name}: {e}")
    out = []
    for i, d in enumerate(data.shape):
        if i in reduced:
            if attrs.keep_dims:
                out.append(Dim.of(1))
        else:
            out.append(d)
    return [TensorSpec(data.etype, tuple(out))]


def _int_mean(x, axes, keep):
    count = math.prod(x.shape[a] for a in axes)
    if count == 0:
        fail("ReduceMean of an integer tensor over an empty axis (division by zero)")
    s = np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
    # C++ integer division truncates toward zero.
    q = np.abs(s.astype(np.int64) if x.dtype.kind == "i" else s) // count
    return np.where(s < 0, -q, q)


def _float_acc(x):
    return x.astype(np.float64)


def _extreme(fn, x, axes, keep, lowest: bool):
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        init = info.min if lowest else info.max
        return fn(x, axis=axes, keepdims=keep, initial=init)
    init = -np.inf if lowest else np.inf
    return fn(_float_acc(x), axis=axes, keepdims=keep, initial=init)


def _l2(x, axes, keep):
    if x.dtype.kind in "iu":
        s = np.sum(x.astype(np.float64) ** 2, axis=axes, keepdims=keep)
        return np.trunc(np.sqrt(s))   # the integer result truncates, as OpenVINO's does
    return np.sqrt(np.sum(_float_acc(x) ** 2, axis=axes, keepdims=keep))


def _sum(x, axes, keep):
    if x.dtype.kind in "iu":
        return np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
    return np.sum(_float_acc(x), axis=axes, keepdims=keep)


def _prod(x, axes, keep):
    if x.dtype.kind in "iu":
        return np.prod(x, axis=axes, keepdims=keep, dtype=x.dtype)
    return np.prod(_float_acc(x), axis=axes, keepdims=keep)


def _mean(x, axes, keep):
    if x.dtype.kind in "iu":
        return _int_mean(x, axes, keep)
    count = math.prod(x.shape[a] for a in axes)
    # np.add.reduce is what np.sum calls, without its Python wrapper (a fifth of a small
    # ReduceMean); the quotient goes to x's type here, as reduce_run would convert it.
    mean = np.add.reduce(_float_acc(x), axis=axes, keepdims=keep) / count  # 0/0 is NaN
    return mean.astype(x.dtype) if type(mean) is np.ndarray else mean


def _l1(x, axes, keep):
    if x.dtype.kind in "iu":
        return np.sum(np.abs(x), axis=axes, keepdims=keep, dtype=x.dtype)
    return np.sum(np.abs(_float_acc(x)), axis=axes, keepdims=keep)


_NUM = ("float", "int", "uint")
# name -> (since, kernel(x, axes tuple, keep_dims), accepted kinds)
REDUCTIONS = {
    "ReduceSum": (1, _sum, _NUM),
    "ReduceMean": (1, _mean, _NUM),
    "ReduceProd": (1, _prod, _NUM),
    "ReduceMax": (1, lambda x, a, k: _extreme(np.max, x, a, k, lowest=True), _NUM),
    "ReduceMin": (1, lambda x, a, k: _extreme(np.min, x, a, k, lowest=False), _NUM),
    "ReduceL1": (4, _l1, _NUM),
    "ReduceL2": (4, _l2, _NUM),
    "ReduceLogicalAnd": (1, lambda x, a, k: np.all(x, axis=a, keepdims=k), ("bool",)),
    "ReduceLogicalOr": (1, lambda x, a, k: np.any(x, axis=a, keepdims=k), ("bool",)),
}


_AXES: dict = {}      # (axes values, rank) -> normalize_axes' answer


def reduce_run(name: str, attrs, data: np.ndarray, axes: np.ndarray):
    key = (tuple(_axes_values(axes)), data.ndim)
    reduced = _AXES.get(key)
    if reduced is None:
        try:
            reduced = normalize_axes(key[0], data.ndim)
        except ValueError as e:
            fail(f"{name}: {e}")
        if len(_AXES) >= 1024:
            _AXES.clear()
        _AXES[key] = reduced
    if not reduced:
        return (data.copy(),)   # the spec: an empty axes list is a no-op
    kernel = REDUCTIONS[name][1]
    # (Overflow and 0/0 warnings are silenced by the executor for the whole run.)
    y = kernel(data, tuple(reduced), attrs.keep_dims)
    if type(y) is np.ndarray and y.dtype == data.dtype:
        return (y,)
    return (as_dtype(y, data.dtype),)


def reduce_prepare(name: str, attrs, inputs, values):
    """reduce_run for axes the plan knows: the kernel with its axes normalised once."""
    if values[1] is None or inputs[0].shape is None:
        return None
    try:
        axes = tuple(normalize_axes(_axes_values(values[1]), len(inputs[0].shape)))
    except ValueError:
        return None
    if not axes:
        return None
    kernel, keep, dtype = REDUCTIONS[name][1], attrs.keep_dims, inputs[0].etype.dtype
    shape = inputs[0].shape
    if name == "ReduceMean" and dtype.kind == "f" and all(shape[a].is_static for a in axes):
        # _mean of floats (an RMSNorm's), its count known: the same sum and quotient.
        count, add = math.prod(shape[a].value for a in axes), np.add.reduce

        def mean(data):
            return (add(_float_acc(data), axis=axes, keepdims=keep) / count).astype(dtype)
        return mean, (0,)

    def reduce(data):
        y = kernel(data, axes, keep)
        return y if type(y) is np.ndarray and y.dtype == dtype else as_dtype(y, dtype)
    return reduce, (0,)


def _make_reduce(name: str, since: int, kinds):
    def infer(attrs, data, axes):
        return reduce_infer(name, attrs, data, axes, kinds)

    def run(attrs, data, axes):
        return reduce_run(name, attrs, data, axes)

    def prepare(attrs, inputs, values):
        return reduce_prepare(name, attrs, inputs, values)

    cls = type(f"{name}{since}", (), {"infer": staticmethod(infer), "run": staticmethod(run),
                                      "prepare": staticmethod(prepare),
                                      "__doc__": f"{name}-{since}: reduce over the axes input."})
    return register(name, since=since, attrs=ReduceAttrs, category="reduction")(cls)


for _name, (_since, _kernel, _kinds) in REDUCTIONS.items():
    globals()[f"{_name}{_since}"] = _make_reduce(_name, _since, _kinds)


# ------------------------------------------------------------------ TopK

@dataclass(frozen=True)
class TopKAttrs:
    axis: int
    mode: Literal["max", "min"]
    sort: Literal["value", "index", "none"]
    index_element_type: Literal["i32", "i64"] = "i32"


@dataclass(frozen=True)
class TopK11Attrs:
    axis: int
    mode: Literal["max", "min"]
    sort: Literal["value", "index", "none"]
    stable: bool = False
    index_element_type: Literal["i32", "i64"] = "i32"


def _k_of(k: np.ndarray) -> int:
    flat = np.asarray(k).reshape(-1)
    if flat.size != 1:
        raise ValueError(f"k (input 1) must hold one value, got {flat.size}")
    return int(flat[0])


def topk_infer(attrs, data: TensorSpec, k: TensorSpec) -> list[TensorSpec]:
    if data.etype.kind == "bool":
        fail("TopK does not accept boolean data")
    if not k.etype.is_integer:
        fail(f"TopK k (input 1) must be an integer scalar, got {k.etype.name}")
    if k.shape is not None and not (len(k.shape) == 0 or (len(k.shape) == 1 and k.shape[0].contains(1))):
        fail(f"TopK k (input 1) must be a scalar, got shape {format_shape(k.shape)}")
    idx = TensorSpec.make(attrs.index_element_type, None)
    if data.shape is None:
        return [TensorSpec(data.etype, None), idx]
    rank = len(data.shape)
    if rank == 0:
        fail("TopK data (input 0) must have rank >= 1, got a scalar")
    if not -rank <= attrs.axis < rank:
        fail(f"TopK axis {attrs.axis} is out of range [{-rank}, {rank - 1}] for data of rank {rank}")
    axis = attrs.axis % rank
    dim = data.shape[axis]
    if k.value is not None:
        kv = _k_of(k.value)
        if kv < 0:
            fail(f"TopK k must be >= 0, got {kv}")
        if dim.hi is not None and kv > dim.hi:
            fail(f"TopK k={kv} exceeds dim {axis} of data {format_shape(data.shape)}")
        out_dim = Dim.of(kv)
    else:
        out_dim = Dim(0, dim.hi)
    shape = tuple(out_dim if i == axis else d for i, d in enumerate(data.shape))
    return [TensorSpec(data.etype, shape), TensorSpec.make(attrs.index_element_type, shape)]


def _descending_order(x: np.ndarray) -> np.ndarray:
    """Indices along the last axis: values descending, ties by ascending index, NaN first."""
    n = x.shape[-1]
    rev = np.argsort(x[..., ::-1], axis=-1, kind="stable")
    return (n - 1 - rev)[..., ::-1]


def _few_of_one_row(x: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """The first k of the full order of one row x (the largest descending, NaN first, or
    the smallest ascending, NaN last; equal values by ascending index), without sorting
    the row: the k-th value found by a partition, the values beyond it and the first of
    those equal to it taken in index order, and only those sorted."""
    n = x.size
    nan = np.isnan(x) if x.dtype.kind == "f" else None
    if largest:
        t = np.partition(x, n - k)[n - k]        # NaN counts as the largest, as here
        if nan is not None and np.isnan(t):
            better, equal = np.zeros(n, bool), nan
        else:
            better = x > t if nan is None else (x > t) | nan
            equal = x == t
    else:
        t = np.partition(x, k - 1)[k - 1]
        if nan is not None and np.isnan(t):
            better, equal = ~nan, nan            # every number, then NaNs by index
        else:
            better, equal = x < t, x == t
    above = np.flatnonzero(better)
    chosen = np.sort(np.concatenate([above, np.flatnonzero(equal)[:k - above.size]]))
    sub = x[chosen]
    return chosen[_descending_order(sub) if largest else np.argsort(sub, kind="stable")]


def topk_run(attrs, data: np.ndarray, k: np.ndarray):
    kv = _k_of(k)
    if not -data.ndim <= attrs.axis < data.ndim:   # only reachable when the rank was unknown
        fail(f"TopK axis {attrs.axis} is out of range for data of shape {list(data.shape)}")
    axis = attrs.axis % data.ndim
    n = data.shape[axis]
    if not 0 <= kv <= n:
        fail(f"TopK k={kv} is out of range [0, {n}] for dim {axis} of data {list(data.shape)}")
    x = np.moveaxis(data, axis, -1)
    keys = x.astype(np.float32) if x.dtype.kind == "V" else x  # bf16 sorts through f32
    if keys.size == n and n >= 64 and 0 < kv and 4 * kv <= n:
        order = _few_of_one_row(keys.reshape(n), kv, attrs.mode == "max").reshape(
            x.shape[:-1] + (kv,))
    elif attrs.mode == "max":
        order = _descending_order(keys)[..., :kv]
    else:
        order = np.argsort(keys, axis=-1, kind="stable")[..., :kv]
    if attrs.sort == "index":
        order = np.sort(order, axis=-1)
    values = np.take_along_axis(x, order, axis=-1)
    index_dtype = np.int32 if attrs.index_element_type == "i32" else np.int64
    return (np.ascontiguousarray(np.moveaxis(values, -1, axis)),
            np.ascontiguousarray(np.moveaxis(order, -1, axis)).astype(index_dtype))


@register("TopK", since=1, attrs=TopKAttrs, category="sort")
class TopK1:
    @staticmethod
    def infer(attrs, data, k):
        return topk_infer(attrs, data, k)

    @staticmethod
    def run(attrs, data, k):
        return topk_run(attrs, data, k)


@register("TopK", since=3, attrs=TopKAttrs, category="sort")
class TopK3:
    infer = TopK1.infer
    run = TopK1.run


@register("TopK", since=11, attrs=TopK11Attrs, category="sort")
class TopK11:
    @staticmethod
    def infer(attrs, data, k):
        if attrs.stable and attrs.sort == "none":
            # OpenVINO's validation rejects this combination.
            fail("TopK stable=true needs sort='value' or sort='index', got sort='none'")
        return topk_infer(attrs, data, k)

    # Ties already keep their input order, so stable=true and false give the same result.
    run = TopK1.run
