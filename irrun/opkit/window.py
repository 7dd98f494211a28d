"""Sliding-window geometry shared by convolutions and pooling: pads, window counts, taps."""
from __future__ import annotations

from typing import Literal

import numpy as np

from irrun.ir.shapes import Dim, TensorSpec

from .problems import fail

AutoPad = Literal["explicit", "same_upper", "same_lower", "valid", "notset"]

def dilated(kernel: int, dilation: int) -> int:
    """Extent of a kernel with holes: (k - 1) * d + 1."""
    return (kernel - 1) * dilation + 1


def same_pads(size: int, kernel: int, dilation: int, stride: int, upper: bool) -> tuple[int, int]:
    """(begin, end) pads that make the output ceil(size / stride) long.

    Stored pads are ignored for same_* modes: OpenVINO writes whatever its constructor got
    (ov.save_model writes "0, 0" for a padded same_upper Convolution), so they are
    recomputed from the input size, like OpenVINO's shape inference does. The odd pixel goes
    to the end for same_upper and to the beginning for same_lower.
    """
    out = -(-size // stride)
    total = max((out - 1) * stride + dilated(kernel, dilation) - size, 0)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def resolve_pads(auto_pad: str, sizes, kernel, dilations, strides, pads_begin, pads_end):
    """Concrete (pads_begin, pads_end) for concrete spatial sizes and kernel."""
    n = len(sizes)
    if auto_pad in ("same_upper", "same_lower"):
        pairs = [same_pads(sizes[i], kernel[i], dilations[i], strides[i], auto_pad == "same_upper")
                 for i in range(n)]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    # explicit / notset (OpenVINO's NOTSET is EXPLICIT); empty pads mean zeros, as in OpenVINO.
    return fixed_pads(auto_pad, n, pads_begin, pads_end)


def fixed_pads(auto_pad: str, n: int, pads_begin, pads_end):
    """Pads that do not depend on the input size (explicit, notset, valid)."""
    if auto_pad == "valid":
        return (0,) * n, (0,) * n
    return tuple(pads_begin) or (0,) * n, tuple(pads_end) or (0,) * n


def window_count(size: int, pad_total: int, extent: int, stride: int, ceil: bool = False) -> int:
    """Number of window positions: (size + pads - extent) / stride + 1, rounded down or up."""
    span = size + pad_total - extent
    return (-(-span // stride) if ceil else span // stride) + 1


def window_dim(dim: Dim, pad_total: int, extent: int, stride: int, axis: int, ceil: bool = False) -> Dim:
    """window_count over an interval dim; a too-small static size is a shape error."""
    if dim.hi is not None and dim.hi + pad_total < extent:
        fail(f"the kernel after dilation ({extent}) is larger than the padded input "
             f"({dim if dim.is_static else f'at most {dim.hi}'} + pads {pad_total}) "
             f"at spatial axis {axis}")
    lo = window_count(max(dim.lo + pad_total, extent) - pad_total, pad_total, extent, stride, ceil)
    hi = None if dim.hi is None else window_count(dim.hi, pad_total, extent, stride, ceil)
    return Dim(lo, hi)


def check_window_attrs(num_spatial: int, **lists) -> None:
    """Every per-axis attribute has one value per spatial axis (empty pads are allowed: zeros)."""
    for name, values in lists.items():
        if name.startswith("pads") and len(values) == 0:
            continue
        if len(values) != num_spatial:
            fail(f"attribute {name} has {len(values)} values ({','.join(map(str, values))}) "
                 f"but the input has {num_spatial} spatial axes")
    for name in ("strides", "dilations"):
        if name in lists and any(v <= 0 for v in lists[name]):
            fail(f"attribute {name}={','.join(map(str, lists[name]))} has a value below 1")
    for name in ("pads_begin", "pads_end"):
        if name in lists and any(v < 0 for v in lists[name]):
            fail(f"attribute {name}={','.join(map(str, lists[name]))} has a negative value")


def check_rank(spec: TensorSpec, what: str) -> None:
    if spec.rank is not None and spec.rank not in (3, 4, 5):
        fail(f"{what} must have rank 3, 4 or 5 (N, C and 1 to 3 spatial axes); "
             f"got rank {spec.rank} {spec}")


def numeric(spec: TensorSpec, what: str) -> None:
    if spec.etype.kind == "bool":
        fail(f"{what} must be of a numeric element type; got {spec.etype.name}")


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """Where sums are accumulated: f16/bf16 in f32 (rounded once at the end), ints in 64 bits."""
    kind = np.dtype(dtype).kind
    if kind == "f" and np.dtype(dtype).itemsize == 8:
        return np.dtype(np.float64)
    if kind in "iu":
        return np.dtype(np.int64) if kind == "i" else np.dtype(np.uint64)
    return np.dtype(np.float32)   # f32, f16 and bf16 (whose numpy kind is 'V')


def tap_slices(offsets, strides, counts) -> tuple[slice, ...]:
    """Per spatial axis, the strided slice of the padded input one kernel tap sees."""
    return tuple(slice(o, o + s * (c - 1) + 1, s) for o, s, c in zip(offsets, strides, counts))
