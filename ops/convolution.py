"""Convolution-1 and GroupConvolution-1 (spec pages: convolution/convolution-1,
convolution/group-convolution-1), plus the sliding-window geometry shared with pooling.py."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irrun.opkit import (
    DYNAMIC, AutoPad, Dim, TensorSpec, check_spatial_rank, check_window_attrs, compute_dtype,
    dilated, fail, fixed_pads, numeric, register, resolve_pads, tap_slices, window_count,
    window_dim,
)

# ---------------------------------------------------------------- window geometry


# ---------------------------------------------------------------- convolution


@dataclass(frozen=True)
class ConvolutionAttrs:
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...] = ()
    pads_end: tuple[int, ...] = ()
    auto_pad: AutoPad = "explicit"


def _conv_infer(attrs, data: TensorSpec, filters: TensorSpec, groups: Dim | None):
    """Shared shape rule; `groups` is None for Convolution (filters [C_OUT, C_IN, k...])."""
    check_spatial_rank(data, "the data input")
    numeric(data, "the data input")
    lead = 2 if groups is None else 3     # filter dims before the spatial ones
    if filters.rank is not None and filters.rank - lead not in (1, 2, 3):
        fail(f"the filters must have rank {lead + 1}, {lead + 2} or {lead + 3} "
             f"({'GROUPS, ' if groups is not None else ''}C_OUT, C_IN and 1 to 3 spatial axes); "
             f"got {filters}")
    if data.etype != filters.etype:
        fail(f"the data ({data.etype.name}) and the filters ({filters.etype.name}) must have "
             "the same element type")
    if data.rank is not None and filters.rank is not None and filters.rank != data.rank + lead - 2:
        fail(f"the filters must have rank {data.rank + lead - 2} for data of rank {data.rank}; "
             f"got {filters}")
    if data.rank is not None:
        num_spatial = data.rank - 2
    elif filters.rank is not None:
        num_spatial = filters.rank - lead
    else:
        num_spatial = len(attrs.strides)
    check_window_attrs(num_spatial, strides=attrs.strides, dilations=attrs.dilations,
                       pads_begin=attrs.pads_begin, pads_end=attrs.pads_end)
    in_dims = data.shape if data.shape is not None else (DYNAMIC,) * (num_spatial + 2)
    f_dims = filters.shape if filters.shape is not None else (DYNAMIC,) * (num_spatial + lead)
    if groups is None:
        c_out, c_in = f_dims[0], f_dims[1]
    else:
        c_out, c_in = f_dims[0] * f_dims[1], f_dims[0] * f_dims[2]
    if not in_dims[1].compatible(c_in):
        what = "the filters' input channels" if groups is None else "groups x the filters' input channels"
        fail(f"the data has {in_dims[1]} channels but {what} give {c_in} "
             f"(data {data}, filters {filters})")
    out = [in_dims[0], c_out]
    for i in range(num_spatial):
        dim, k = in_dims[2 + i], f_dims[lead + i]
        if attrs.auto_pad in ("same_upper", "same_lower"):
            # Same padding keeps ceil(size / stride) positions, whatever the kernel.
            hi = None if dim.hi is None else -(-dim.hi // attrs.strides[i])
            out.append(Dim(-(-dim.lo // attrs.strides[i]), hi))
        elif not k.is_static:
            out.append(DYNAMIC)
        else:
            b, e = fixed_pads(attrs.auto_pad, num_spatial, attrs.pads_begin, attrs.pads_end)
            out.append(window_dim(dim, b[i] + e[i], dilated(k.value, attrs.dilations[i]),
                                  attrs.strides[i], i))
    return [TensorSpec(data.etype, tuple(out))]


def _conv_run(attrs, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Grouped cross-correlation: one batched matmul per kernel tap (no loop over pixels).

    x is [N, G*Cg, *spatial]; w is [G, Og, Cg, *kernel]. The input is padded once and made
    channel-last per group, so each tap is a strided view [G, N*P, Cg] times w_tap [G, Cg, Og].
    """
    n, c = x.shape[:2]
    spatial, kernel = x.shape[2:], w.shape[3:]
    g, og, cg = w.shape[:3]
    if c != g * cg:
        fail(f"the data has {c} channels but the filters expect {g * cg} "
             f"({g} group(s) x {cg})")
    pb, pe = resolve_pads(attrs.auto_pad, spatial, kernel, attrs.dilations, attrs.strides,
                          attrs.pads_begin, attrs.pads_end)
    counts = []
    for i, size in enumerate(spatial):
        extent = dilated(kernel[i], attrs.dilations[i])
        if size + pb[i] + pe[i] < extent:
            fail(f"the kernel after dilation ({extent}) is larger than the padded input "
                 f"({size} + pads {pb[i] + pe[i]}) at spatial axis {i}")
        counts.append(window_count(size, pb[i] + pe[i], extent, attrs.strides[i]))
    acc_t = compute_dtype(x.dtype)
    xp = np.pad(x.astype(acc_t, copy=False), [(0, 0), (0, 0)] + list(zip(pb, pe)))
    # [N, G, Cg, *S] -> [G, N, *S, Cg]
    xp = np.moveaxis(xp.reshape((n, g, cg) + xp.shape[2:]), (1, 2), (0, -1))
    wt = np.moveaxis(w.astype(acc_t, copy=False), 2, -1)       # [G, Og, *kernel, Cg]
    acc = np.zeros((g, n * int(np.prod(counts, dtype=np.int64)), og), dtype=acc_t)
    for tap in np.ndindex(*kernel):
        offsets = [t * d for t, d in zip(tap, attrs.dilations)]
        view = xp[(slice(None), slice(None)) + tap_slices(offsets, attrs.strides, counts)]
        w_tap = wt[(slice(None), slice(None)) + tap]              # [G, Og, Cg]
        acc += np.matmul(view.reshape(g, -1, cg), np.swapaxes(w_tap, 1, 2))
    out = acc.reshape((g, n) + tuple(counts) + (og,))
    out = np.moveaxis(out, (0, -1), (1, 2)).reshape((n, g * og) + tuple(counts))
    # Integer results wrap like the C++ types; f16/bf16 are rounded once here.
    return np.ascontiguousarray(out).astype(x.dtype, copy=False)


@register("Convolution", since=1, attrs=ConvolutionAttrs, category="convolution")
class Convolution1:
    @staticmethod
    def infer(attrs, data: TensorSpec, filters: TensorSpec):
        return _conv_infer(attrs, data, filters, None)

    @staticmethod
    def run(attrs, data, filters):
        return (_conv_run(attrs, data, filters[np.newaxis]),)


@register("GroupConvolution", since=1, attrs=ConvolutionAttrs, category="convolution")
class GroupConvolution1:
    """Filters [GROUPS, C_OUT/GROUPS, C_IN/GROUPS, k...]; each group sees its slice of channels."""

    @staticmethod
    def infer(attrs, data: TensorSpec, filters: TensorSpec):
        groups = filters.shape[0] if filters.shape is not None else DYNAMIC
        return _conv_infer(attrs, data, filters, groups)

    @staticmethod
    def run(attrs, data, filters):
        return (_conv_run(attrs, data, filters),)
