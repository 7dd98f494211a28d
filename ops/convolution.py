"""Convolution-1, GroupConvolution-1, ConvolutionBackpropData-1 and
GroupConvolutionBackpropData-1 (spec pages: convolution/convolution-1, group-convolution-1,
convolution-backprop-data-1, group-convolution-backprop-data-1)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import (
    matmul,
    DYNAMIC, AutoPad, CompressedWeights, Dim, Fixed, TensorSpec, check_alloc, check_integer,
    check_spatial_rank, format_shape, check_window_attrs, compute_dtype, dilated, elements, fail,
    fixed_pads, is_static, numeric, register, resolve_pads, static_values, tap_slices,
    window_count, window_dim,
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


def _window_operands(attrs, data: TensorSpec, filters: TensorSpec, lead: int,
                     channels: str) -> int:
    """Checks the data and filters of a convolution-like op share; returns the number of
    spatial axes. `lead` filter dims come before the spatial ones; `channels` names them in
    the message ("GROUPS, C_OUT, C_IN")."""
    check_spatial_rank(data, "the data input")
    numeric(data, "the data input")
    if filters.rank is not None and filters.rank - lead not in (1, 2, 3):
        fail(f"the filters must have rank {lead + 1}, {lead + 2} or {lead + 3} "
             f"({channels} and 1 to 3 spatial axes); got {filters}")
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
    return num_spatial


def _conv_infer(attrs, data: TensorSpec, filters: TensorSpec, groups: Dim | None):
    """Shared shape rule; `groups` is None for Convolution (filters [C_OUT, C_IN, k...])."""
    lead = 2 if groups is None else 3     # filter dims before the spatial ones
    num_spatial = _window_operands(attrs, data, filters, lead,
                                   ("GROUPS, " if groups is not None else "") + "C_OUT, C_IN")
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
    pb, pe, counts = _geometry(attrs, x.shape, w.shape)
    acc_t = compute_dtype(x.dtype)
    if x.dtype == acc_t and acc_t.kind == "f":
        # Fast paths for f32/f64 (integers keep the per-tap path and its wrapping sums).
        if g == 1 and _fits_im2col(n, counts, kernel, cg, acc_t):
            return _conv_im2col(attrs, x, w[0], pb, pe, counts)
        if cg == 1 and og == 1:
            return _conv_depthwise(attrs, x, w, pb, pe, counts)
    xp = _zero_pad(x.astype(acc_t, copy=False), pb, pe)
    # [N, G, Cg, *S] -> [G, N, *S, Cg]
    xp = np.moveaxis(xp.reshape((n, g, cg) + xp.shape[2:]), (1, 2), (0, -1))
    wt = np.moveaxis(w.astype(acc_t, copy=False), 2, -1)       # [G, Og, *kernel, Cg]
    acc = np.zeros((g, n * math.prod(counts), og), dtype=acc_t)
    for tap in np.ndindex(*kernel):
        offsets = [t * d for t, d in zip(tap, attrs.dilations)]
        view = xp[(slice(None), slice(None)) + tap_slices(offsets, attrs.strides, counts)]
        w_tap = wt[(slice(None), slice(None)) + tap]              # [G, Og, Cg]
        acc += matmul(view.reshape(g, acc.shape[1], cg), np.swapaxes(w_tap, 1, 2))
    out = acc.reshape((g, n) + tuple(counts) + (og,))
    out = np.moveaxis(out, (0, -1), (1, 2)).reshape((n, g * og) + tuple(counts))
    # Integer results wrap like the C++ types; f16/bf16 are rounded once here.
    return np.ascontiguousarray(out).astype(x.dtype, copy=False)


def _geometry(attrs, data_shape, filters_shape):
    """(pads_begin, pads_end, output counts per spatial axis) of data [N, G*Cg, *spatial]
    by filters [G, Og, Cg, *kernel], refusing what the shapes cannot do."""
    c, spatial, kernel = data_shape[1], data_shape[2:], filters_shape[3:]
    g, cg = filters_shape[0], filters_shape[2]
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
    return pb, pe, counts


def _zero_pad(x: np.ndarray, pb, pe) -> np.ndarray:
    """x [N, C, *spatial] with zeros added before and after each spatial axis (x itself
    when there are none): np.pad's own bookkeeping took longer than the copy on the small
    maps of mobile networks."""
    if not any(pb) and not any(pe):
        return x
    shape = x.shape[:2] + tuple(d + b + e for d, b, e in zip(x.shape[2:], pb, pe))
    check_alloc(shape, x.dtype, "the zero-padded input")   # pads come from the file
    out = np.zeros(shape, x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(b, b + d) for b, d in zip(pb, x.shape[2:]))] = x
    return out


# im2col scratch (the patch matrix) above this many bytes falls back to one matmul per tap.
_IM2COL_MAX_BYTES = 64 << 20


def _fits_im2col(n, counts, kernel, c, dtype) -> bool:
    rows = n * math.prod(counts)
    return rows * math.prod(kernel) * c * dtype.itemsize <= _IM2COL_MAX_BYTES


def _conv_im2col(attrs, x, w, pb, pe, counts):
    """One convolution as one matmul of the filters as stored, [O, C*prod(k)] (a view, no
    re-layout), and a patch matrix [N, C*prod(k), P] (P output positions): one strided
    view of the NCHW input, copied once.

    The patch matrix is laid out with the output positions last because that copy's
    innermost run is then a row of windows (contiguous for stride 1), not a kernel row of
    3 or 7 taps: for 64 channels of a 16x16 map and a 3x3 kernel the copy took 0.36 ms
    the other way round and 0.06 ms this way.

    The product is [O, C*k] @ patches, NCHW already; see _product for the exception."""
    n, c = x.shape[:2]
    kernel = w.shape[2:]
    nd = len(kernel)
    o = w.shape[0]
    if nd == 2 and attrs.strides == (1, 1) and math.prod(kernel) > 1 and \
            x.shape[3] + pb[1] + pe[1] <= _FLAT_ROWS_MAX_WIDENING * counts[1]:
        return _conv_flat_rows(attrs, x, w, pb, pe, counts)
    ck = c * math.prod(kernel)
    patches = _patches(attrs, x, kernel, pb, pe, counts)
    return _product(w.reshape(o, ck), patches).reshape((n, o) + tuple(counts))


def _patches(attrs, x, kernel, pb, pe, counts) -> np.ndarray:
    """The patch matrix [N, C*prod(kernel), P] of x [N, C, *spatial] (P output positions)."""
    n, c = x.shape[:2]
    nd = len(kernel)
    p = math.prod(counts)
    # Sizes spelt out, never -1: a batch or channel count of 0 leaves -1 undefined.
    ck = c * math.prod(kernel)
    if ck != c and counts[-1] <= _GATHER_MAX_ROW and ck * p <= _GATHER_MAX_ELEMENTS:
        return _gathered_patches(attrs, x, kernel, pb, counts)     # reads x itself
    xp = _zero_pad(x, pb, pe)
    if xp.flags.c_contiguous and ck == c and p == math.prod(xp.shape[2:]):
        return xp.reshape(n, c, p)    # a 1x1 kernel at stride 1: the (padded) input
    st = xp.strides
    taps = tuple(st[2 + i] * attrs.dilations[i] for i in range(nd))
    steps = tuple(st[2 + i] * attrs.strides[i] for i in range(nd))
    return np.lib.stride_tricks.as_strided(
        xp, (n, c) + tuple(kernel) + tuple(counts), (st[0], st[1]) + taps + steps,
        writeable=False).reshape(n, ck, p)


# Kernels of more than one tap whose output rows have at most this many positions, in a
# patch matrix of at most this many elements (per batch item), take _gathered_patches.
_GATHER_MAX_ROW = 4
_GATHER_MAX_ELEMENTS = 1 << 16


def _gathered_patches(attrs, x, kernel, pb, counts):
    """The patch matrix [N, C*prod(k), P] as one np.take from the flattened input with a
    zero after it, which every padded tap reads (no padded copy either). For small output
    maps the strided copy moves rows of 2-4 elements at a time, which costs more than the
    elements: ResNet-18's 512-channel 2x2 layers took 72 us that way and 17 this way, its
    256-channel 4x4 ones 74 and 31 (the index, at most 512 KiB, is made once per shape)."""
    index = _patch_index(x.shape[1:], tuple(kernel), tuple(attrs.strides),
                         tuple(attrs.dilations), tuple(pb), tuple(counts))
    return _gather(x.reshape(x.shape[0], math.prod(x.shape[1:])), index)


def _gather(rows: np.ndarray, index: np.ndarray) -> np.ndarray:
    """np.take(rows, index, axis=1) from rows [R, S] with a zero after each: an index of S
    reads that zero (a tap that falls in the pads)."""
    flat = np.empty((rows.shape[0], rows.shape[1] + 1), rows.dtype)
    flat[:, :-1] = rows
    flat[:, -1] = 0
    return np.take(flat, index, axis=1)


@functools.lru_cache(maxsize=32)
def _patch_index(data_shape, kernel, strides, dilations, pb, counts) -> np.ndarray:
    """[C*prod(kernel), prod(counts)] positions in the flattened [C, *spatial] data of each
    patch element, the data's size (the zero after it) where the tap falls in the pads."""
    c, spatial = data_shape[0], data_shape[1:]
    grids = np.indices((c,) + kernel + counts, sparse=True)
    nd = len(kernel)
    position = grids[0] * math.prod(spatial)
    inside = True
    for i in range(nd):
        at = grids[1 + nd + i] * strides[i] + grids[1 + i] * dilations[i] - pb[i]
        inside = inside & (at >= 0) & (at < spatial[i])
        position = position + at * math.prod(spatial[i + 1:])
    index = np.where(inside, position, c * math.prod(spatial))
    index = index.reshape(c * math.prod(kernel), math.prod(counts)).astype(np.intp)
    index.flags.writeable = False
    return index


# Products of at least this many multiply-adds are split over the kit's pool
# (irrun.opkit.matmul: by batch, else by rows).
_SPLIT_MACS = 8_000_000
# With fewer output channels than this, such a product runs as patches^T @ w^T.
_IM2COL_MIN_ROWS = 32


def _product(wm, patches):
    """wm [O, K] @ patches [N, K, P] -> [N, O, P].

    As one BLAS call (BLAS runs at one thread during runs, irrun.opkit.pool) the direct
    product is the fastest: torch_ssdlite's [16, 8] @ [8, 25600] took 191 us, 250 as
    patches^T @ w^T. Large products are split over the kit's pool by rows, which leaves a
    few rows of O to each part when O is small: there the transposed product, whose rows
    are the P positions, splits well (raft_small's [16, 147] @ [147, 4096]: 371 us
    transposed, 701 direct). (The transposed form was once used for every small O, while
    OpenBLAS ran its own threads and handled few rows badly.)"""
    o, k = wm.shape
    n, p = patches.shape[0], patches.shape[2]
    if o < _IM2COL_MIN_ROWS and p > o and n * o * k * p >= _SPLIT_MACS:
        return np.ascontiguousarray(matmul(patches.transpose(0, 2, 1), wm.T).transpose(0, 2, 1))
    return matmul(wm, patches)


# A stride-1 2-D convolution whose padded rows are at most this much wider than its
# output's takes _conv_flat_rows (the product then computes that many more columns).
_FLAT_ROWS_MAX_WIDENING = 1.25


def _conv_flat_rows(attrs, x, w, pb, pe, counts):
    """A stride-1 2-D convolution as im2col over flat rows: the output is computed on the
    padded input's grid, [N, O, OH, Wp] (Wp the padded width), and its last Wp - OW columns
    are dropped. On that grid every tap (di, dj) reads, for all positions at once, one
    contiguous run of each channel's flattened plane, OH*Wp elements from di*dh*Wp + dj*dw,
    so the patch matrix is copied in runs of OH*Wp instead of rows of OW windows: for
    ResNet-18's 64-channel 16x16 layers the copy took 22 us instead of 63 (at 1.125x the
    product's columns), for its 128-channel 8x8 ones 24 instead of 82 (1.25x)."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    dh, dw = attrs.dilations
    oh, ow = counts
    hp, wp = x.shape[2] + pb[0] + pe[0], x.shape[3] + pb[1] + pe[1]
    # The runs of the last taps go (kw - 1) * dw elements past the plane: zero rows below it.
    rows = hp + -(-(kw - 1) * dw // wp)
    check_alloc((n, c, rows, wp), x.dtype, "the zero-padded input")   # pads come from the file
    xp = np.zeros((n, c, rows, wp), x.dtype)
    xp[:, :, pb[0]:pb[0] + x.shape[2], pb[1]:pb[1] + x.shape[3]] = x
    size, plane, run = x.dtype.itemsize, rows * wp, oh * wp
    patches = np.ndarray((n, c, kh, kw, run), x.dtype, buffer=xp,
                         strides=(c * plane * size, plane * size, dh * wp * size, dw * size, size))
    out = _product(w.reshape(o, c * kh * kw), patches.reshape(n, c * kh * kw, run))
    return np.ascontiguousarray(out.reshape(n, o, oh, wp)[..., :ow])


def _conv_depthwise(attrs, x, w, pb, pe, counts):
    """Depthwise (one channel per group). 1-D and 2-D: the compiled loop of
    ops/depthwise_loop.py (imported here, at the first such layer), which sums each output
    as the tap loop below does. 3-D: per kernel tap, a strided view of the padded input
    times that tap's per-channel weight, summed in place."""
    n, c = x.shape[:2]
    kernel = w.shape[3:]
    wc = w.reshape((c,) + tuple(kernel))
    if len(kernel) in (1, 2):
        from .depthwise_loop import depthwise2d

        if len(kernel) == 2:
            return depthwise2d(x, wc, attrs.strides, attrs.dilations, pb, counts)
        out = depthwise2d(x[:, :, np.newaxis], wc[:, np.newaxis], (1,) + tuple(attrs.strides),
                          (1,) + tuple(attrs.dilations), (0,) + tuple(pb), (1,) + tuple(counts))
        return out.reshape((n, c) + tuple(counts))
    xp = _zero_pad(x, pb, pe)
    acc = np.zeros((n, c) + tuple(counts), dtype=x.dtype)
    tmp = np.empty_like(acc)
    bshape = (1, c) + (1,) * len(kernel)
    for tap in np.ndindex(*kernel):
        offsets = [t * d for t, d in zip(tap, attrs.dilations)]
        view = xp[(slice(None), slice(None)) + tap_slices(offsets, attrs.strides, counts)]
        np.multiply(view, wc[(slice(None),) + tap].reshape(bshape), out=tmp)
        acc += tmp
    return acc


# Compressed filters (f16, kept so by the loader: irrun.opkit.compressed) are read as
# halves by the narrow product (ops/narrow_product_ir_loop.py) when the convolution is
# one product of at most this many columns (batch x output positions): bound by reading
# the weights, it reads half the bytes, in place. Wider products are bound by arithmetic,
# where OpenBLAS wins: they take the f32 weights, decompressed once at the first such run.
NARROW_MAX_COLUMNS = 4


def _narrow_conv(attrs, x: np.ndarray, w: CompressedWeights) -> np.ndarray | None:
    """The convolution of x by compressed filters [O, C, *kernel] as the narrow product,
    or None where it does not apply (see NARROW_MAX_COLUMNS)."""
    filters = w.source
    if x.dtype != np.float32 or x.ndim != filters.ndim or x.ndim < 3:
        return None
    n, c, o = x.shape[0], x.shape[1], filters.shape[0]
    kernel = filters.shape[2:]
    pb, pe, counts = _geometry(attrs, x.shape, (1,) + filters.shape)
    columns, ck = n * math.prod(counts), c * math.prod(kernel)
    if not 1 <= columns <= NARROW_MAX_COLUMNS or ck == 0 or ck % 16 or o == 0:
        return None         # (the loop reads 16 of K at least once: K must be whole 16s)
    from .narrow_product_ir_loop import ROWS, product_for

    loops = product_for(columns, True)
    if loops is None:
        return None
    rows4, rows1 = loops
    # [N, C*k, P] -> [N*P, C*k]: each column of the product one contiguous row.
    xt = np.ascontiguousarray(_patches(attrs, x, kernel, pb, pe, counts).transpose(0, 2, 1))
    out = np.empty((o, columns), np.float32)
    args = (filters.ctypes.data, xt.ctypes.data, out.ctypes.data, ck)
    split = o - o % ROWS
    if split:
        rows4(*args, 0, split)
    if split < o:
        rows1(*args, split, o)
    # [O, N*P] -> [N, O, *counts]
    return np.ascontiguousarray(
        out.reshape(o, n, -1).transpose(1, 0, 2)).reshape((n, o) + tuple(counts))


def _conv_prepare(attrs, data: TensorSpec, filters: np.ndarray | None):
    """_conv_run's fast paths (f32/f64 im2col, 2-D depthwise) for data of a static shape and
    filters [G, Og, Cg, *kernel] the plan knows, with the geometry, the path and the
    filters' layout worked out once (irrun.opkit.prepared): the same calls as the kernel
    makes, so the same bits. None keeps the kernel (and _geometry's refusals are its)."""
    if filters is None or not is_static(data.shape):
        return None
    dtype = data.etype.dtype
    if compute_dtype(dtype) != dtype or dtype.kind != "f" or filters.dtype != dtype:
        return None
    shape = static_values(data.shape)
    pb, pe, counts = _geometry(attrs, shape, filters.shape)
    n, c = shape[:2]
    g, og, cg = filters.shape[:3]
    kernel = filters.shape[3:]
    if g == 1 and _fits_im2col(n, counts, kernel, cg, dtype):
        w = filters[0]
        o = w.shape[0]
        if len(kernel) == 2 and attrs.strides == (1, 1) and math.prod(kernel) > 1 and \
                shape[3] + pb[1] + pe[1] <= _FLAT_ROWS_MAX_WIDENING * counts[1]:
            return functools.partial(_flat_rows_prepared, attrs=attrs, pb=pb, pe=pe,
                                     counts=counts), (0, Fixed(w))
        return functools.partial(_im2col_prepared, attrs=attrs, kernel=kernel, pb=pb, pe=pe,
                                 counts=counts, shape=(n, o) + tuple(counts)), \
            (0, Fixed(w.reshape(o, c * math.prod(kernel))))
    if cg == 1 and og == 1 and len(kernel) == 2:
        from .depthwise_loop import depthwise2d

        return functools.partial(depthwise2d, strides=attrs.strides, dilations=attrs.dilations,
                                 pads_begin=pb, counts=counts), \
            (0, Fixed(filters.reshape((c,) + tuple(kernel))))
    return None


def _flat_rows_prepared(x, w, attrs, pb, pe, counts):
    return _conv_flat_rows(attrs, x, w, pb, pe, counts)


def _im2col_prepared(x, wm, attrs, kernel, pb, pe, counts, shape):
    """_conv_im2col's product, the filters already the matrix wm [O, C*prod(kernel)]."""
    return _product(wm, _patches(attrs, x, kernel, pb, pe, counts)).reshape(shape)


@register("Convolution", since=1, attrs=ConvolutionAttrs, category="convolution")
class Convolution1:
    COMPRESSED_INPUTS = (1,)      # filters: see NARROW_MAX_COLUMNS

    @staticmethod
    def infer(attrs, data: TensorSpec, filters: TensorSpec):
        return _conv_infer(attrs, data, filters, None)

    @staticmethod
    def run(attrs, data, filters):
        if isinstance(filters, CompressedWeights):
            out = _narrow_conv(attrs, data, filters)
            if out is not None:
                return (out,)
            filters = filters.decompressed()
        return (_conv_run(attrs, data, filters[np.newaxis]),)

    @staticmethod
    def prepare(attrs, inputs, values):
        return _conv_prepare(attrs, inputs[0], None if values[1] is None else values[1][np.newaxis])


@register("GroupConvolution", since=1, attrs=ConvolutionAttrs, category="convolution")
class GroupConvolution1:
    """Filters [GROUPS, C_OUT/GROUPS, C_IN/GROUPS, k...]; each group sees its slice of channels."""

    @staticmethod
    def infer(attrs, data: TensorSpec, filters: TensorSpec):
        # (No shape, or a scalar: the rank check in _conv_infer words it.)
        groups = filters.shape[0] if filters.shape else DYNAMIC
        return _conv_infer(attrs, data, filters, groups)

    @staticmethod
    def run(attrs, data, filters):
        return (_conv_run(attrs, data, filters),)

    @staticmethod
    def prepare(attrs, inputs, values):
        return _conv_prepare(attrs, inputs[0], values[1])


# ---------------------------------------------------------------- transposed convolution
# Spec pages: convolution/convolution-backprop-data-1, group-convolution-backprop-data-1.


@dataclass(frozen=True)
class BackpropAttrs:
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...] = ()
    pads_end: tuple[int, ...] = ()
    auto_pad: AutoPad = "explicit"
    output_padding: tuple[int, ...] = ()


def _output_padding(attrs, n: int) -> tuple[int, ...]:
    op = tuple(attrs.output_padding) or (0,) * n
    if len(op) != n:
        fail(f"attribute output_padding has {len(op)} values ({','.join(map(str, op))}) "
             f"but the input has {n} spatial axes")
    if any(v < 0 for v in op):
        fail(f"attribute output_padding={','.join(map(str, op))} has a negative value")
    return op


def _backprop_pads(attrs, sizes, kernel, out_sizes, out_pad):
    """(pads_begin, pads_end) as OpenVINO resolves them (its shape inference and CPU plugin).

    With an output_shape input, same_upper/same_lower split max(total, 0) for total =
    stride * (X - 1) + dilated kernel - output + output_padding (the odd one at the begin for
    same_upper); explicit keeps the attribute pads and valid uses zeros. The page says pads
    are always computed from the output_shape; OpenVINO (and so irrun) does so only for same_*.
    Without output_shape every mode but explicit uses zero pads.
    """
    n = len(sizes)
    if attrs.auto_pad in ("same_upper", "same_lower") and out_sizes is not None:
        pb, pe = [], []
        for i in range(n):
            total = max((sizes[i] - 1) * attrs.strides[i] + dilated(kernel[i], attrs.dilations[i])
                        - out_sizes[i] + out_pad[i], 0)
            small = total // 2
            b, e = (total - small, small) if attrs.auto_pad == "same_upper" else (small, total - small)
            pb.append(b)
            pe.append(e)
        return tuple(pb), tuple(pe)
    if attrs.auto_pad == "explicit" or attrs.auto_pad == "notset":
        return fixed_pads("explicit", n, attrs.pads_begin, attrs.pads_end)
    return (0,) * n, (0,) * n


def _backprop_infer(attrs, data: TensorSpec, filters: TensorSpec, out_shape: TensorSpec | None,
                    grouped: bool):
    lead = 3 if grouped else 2
    n = _window_operands(attrs, data, filters, lead,
                         ("GROUPS, " if grouped else "") + "C_IN, C_OUT")
    out_pad = _output_padding(attrs, n)
    d = data.shape if data.shape is not None else (DYNAMIC,) * (n + 2)
    f = filters.shape if filters.shape is not None else (DYNAMIC,) * (n + lead)
    c_in, c_out = (f[0] * f[1], f[0] * f[2]) if grouped else (f[0], f[1])
    if not d[1].compatible(c_in):
        what = "groups x the filters' input channels" if grouped else "the filters' input channels (dim 0)"
        fail(f"the data has {d[1]} channels but {what} give {c_in} (data {data}, filters {filters})")
    if out_shape is not None:
        check_integer(out_shape, "output_shape (input 2)")
        if out_shape.rank is not None and out_shape.rank != 1:
            fail(f"output_shape (input 2) must be 1-D, got {out_shape}")
        if out_shape.shape is not None and out_shape.shape[0].is_static and out_shape.shape[0].value != n:
            fail(f"output_shape (input 2) must hold {n} spatial dims, got {out_shape.shape[0].value}")
        el = elements(out_shape)
        if el is not None and len(el) == n:
            for i, v in enumerate(el):
                if v.is_static and v.value < 0:
                    fail(f"output_shape (input 2) has the negative dim {v.value} at position {i}")
            spatial = tuple(v if v.lo >= 0 else DYNAMIC for v in el)
        else:
            spatial = (DYNAMIC,) * n
        return [TensorSpec(data.etype, (d[0], c_out) + spatial)]
    pb, pe = _backprop_pads(attrs, [0] * n, [1] * n, None, out_pad)
    spatial = []
    for i in range(n):
        x, k = d[2 + i], f[lead + i]
        if not (k.is_static and x.is_static):
            extra = out_pad[i] - pb[i] - pe[i]
            if k.is_static:
                lo = max((max(x.lo, 1) - 1) * attrs.strides[i] + dilated(k.value, attrs.dilations[i]) + extra, 0)
                hi = None if x.hi is None else max((x.hi - 1) * attrs.strides[i]
                                                   + dilated(k.value, attrs.dilations[i]) + extra, 0)
                spatial.append(Dim(lo, hi))
            else:
                spatial.append(DYNAMIC)
            continue
        size = ((x.value - 1) * attrs.strides[i] + dilated(k.value, attrs.dilations[i])
                - pb[i] - pe[i] + out_pad[i])
        if size < 0:
            fail(f"the output would have the negative size {size} at spatial axis {i} "
                 f"(input {x.value}, kernel {k.value}, stride {attrs.strides[i]}, pads {pb[i]},{pe[i]})")
        spatial.append(Dim.of(size))
    return [TensorSpec(data.etype, (d[0], c_out) + tuple(spatial))]


def _backprop_run(attrs, x: np.ndarray, w: np.ndarray, out_shape) -> np.ndarray:
    """Transposed grouped convolution: every input pixel scatters kernel x its channels into
    the full output (size stride*(X-1) + dilated kernel per axis), one batched matmul per
    kernel tap (no loop over pixels); the result is the window [pads_begin, +output) of it,
    zeros where that runs past its end (output_padding, a large output_shape).

    x is [N, G*Cg, *X]; w is [G, Cg, Og, *K]."""
    n, c = x.shape[:2]
    g, cg, og = w.shape[:3]
    sizes, kernel = x.shape[2:], w.shape[3:]
    ns = len(sizes)
    if c != g * cg:
        fail(f"the data has {c} channels but the filters expect {g * cg} ({g} group(s) x {cg})")
    out_pad = _output_padding(attrs, ns)
    out_sizes = None
    if out_shape is not None:
        out_sizes = [int(v) for v in np.asarray(out_shape).reshape(-1)]
        if len(out_sizes) != ns:
            fail(f"output_shape (input 2) must hold {ns} spatial dims, got {len(out_sizes)}")
        if any(v < 0 for v in out_sizes):
            fail(f"output_shape (input 2) has a negative dim: {out_sizes}")
    pb, pe = _backprop_pads(attrs, sizes, kernel, out_sizes, out_pad)
    full = [(s - 1) * st + dilated(k, d) for s, k, st, d in zip(sizes, kernel, attrs.strides, attrs.dilations)]
    if out_sizes is None:
        out_sizes = [f - b - e + p for f, b, e, p in zip(full, pb, pe, out_pad)]
        for i, v in enumerate(out_sizes):
            if v < 0:
                fail(f"the output would have the negative size {v} at spatial axis {i}")
    acc_t = compute_dtype(x.dtype)
    check_alloc([n, g * og] + out_sizes, x.dtype, "the ConvolutionBackpropData output")
    check_alloc([g, n] + full + [og], acc_t, "the ConvolutionBackpropData accumulator")
    acc = np.zeros((g, n) + tuple(full) + (og,), dtype=acc_t)
    if x.size and w.size:
        # [N, G, Cg, *X] -> [G, N*X, Cg]
        xs = np.moveaxis(x.astype(acc_t, copy=False).reshape((n, g, cg) + tuple(sizes)), (1, 2), (0, -1))
        xs = xs.reshape(g, -1, cg)
        wt = w.astype(acc_t, copy=False)
        for tap in np.ndindex(*kernel):
            contrib = np.matmul(xs, wt[(slice(None), slice(None), slice(None)) + tap])   # [G, N*X, Og]
            offsets = [t * d for t, d in zip(tap, attrs.dilations)]
            view = acc[(slice(None), slice(None)) + tap_slices(offsets, attrs.strides, sizes)]
            view += contrib.reshape(view.shape)
    # The output window of the full result.
    out = np.zeros((g, n) + tuple(out_sizes) + (og,), dtype=acc_t)
    src, dst = [], []
    for f, b, o in zip(full, pb, out_sizes):
        length = max(min(o, f - b), 0)
        src.append(slice(b, b + length))
        dst.append(slice(0, length))
    out[(slice(None), slice(None)) + tuple(dst)] = acc[(slice(None), slice(None)) + tuple(src)]
    out = np.moveaxis(out, (0, -1), (1, 2)).reshape((n, g * og) + tuple(out_sizes))
    return np.ascontiguousarray(out).astype(x.dtype, copy=False)


@register("ConvolutionBackpropData", since=1, attrs=BackpropAttrs, category="convolution")
class ConvolutionBackpropData1:
    """Filters [C_IN, C_OUT, k...]; optional output_shape (spatial dims only)."""

    @staticmethod
    def infer(attrs, data: TensorSpec, filters: TensorSpec, output_shape: TensorSpec | None = None):
        return _backprop_infer(attrs, data, filters, output_shape, grouped=False)

    @staticmethod
    def run(attrs, data, filters, output_shape=None):
        return (_backprop_run(attrs, data, filters[np.newaxis], output_shape),)


@register("GroupConvolutionBackpropData", since=1, attrs=BackpropAttrs, category="convolution")
class GroupConvolutionBackpropData1:
    """Filters [GROUPS, C_IN/GROUPS, C_OUT/GROUPS, k...]."""

    @staticmethod
    def infer(attrs, data: TensorSpec, filters: TensorSpec, output_shape: TensorSpec | None = None):
        return _backprop_infer(attrs, data, filters, output_shape, grouped=True)

    @staticmethod
    def run(attrs, data, filters, output_shape=None):
        return (_backprop_run(attrs, data, filters, output_shape),)


# ---------------------------------------------------------------- DeformableConvolution
# Spec pages: convolution/deformable-convolution-1, deformable-convolution-8.


@dataclass(frozen=True)
class DeformableConv1Attrs:
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...] = ()
    pads_end: tuple[int, ...] = ()
    auto_pad: AutoPad = "explicit"
    group: int = 1
    deformable_group: int = 1


@dataclass(frozen=True)
class DeformableConv8Attrs(DeformableConv1Attrs):
    bilinear_interpolation_pad: bool = False


def _deform_infer(attrs, data, offsets, filters, mask):
    if attrs.group < 1 or attrs.deformable_group < 1:
        fail(f"group and deformable_group must be >= 1, got {attrs.group} and {attrs.deformable_group}")
    for s, what in ((data, "data"), (offsets, "offsets (input 1)"), (filters, "filters (input 2)")) + \
            (((mask, "mask (input 3)"),) if mask is not None else ()):
        if s.rank is not None and s.rank != 4:
            fail(f"DeformableConvolution {what} must be 4-D (2 spatial axes), got {format_shape(s.shape)}")
        if s.etype != data.etype:
            fail(f"DeformableConvolution {what} must have the data's element type {data.etype.name}, got {s.etype.name}")
    if not data.etype.is_float:
        fail(f"DeformableConvolution takes floating-point data, got {data.etype.name}")
    g = attrs.group
    f = filters.shape if filters.shape is not None else (DYNAMIC,) * 4
    if f[0].is_static and f[0].value % g:
        fail(f"the filters' output channels ({f[0].value}) are not divisible by group {g}")
    og = Dim(-(-f[0].lo // g), None if f[0].hi is None else f[0].hi // g)
    grouped = TensorSpec(filters.etype, (Dim.of(g), og, f[1], f[2], f[3]))
    (out,) = _conv_infer(attrs, data, grouped, Dim.of(g))
    k = f[2] * f[3]
    dg = attrs.deformable_group
    for s, per, what in ((offsets, 2, "offsets (input 1)"), (mask, 1, "mask (input 3)")):
        if s is None or s.shape is None:
            continue
        want = k * (2 * dg if per == 2 else dg)
        if not s.shape[1].compatible(want):
            fail(f"DeformableConvolution {what} must have {want} channels "
                 f"({'2 x ' if per == 2 else ''}deformable_group x kernel taps), got {s.shape[1]}")
        if out.shape is not None:
            for i in (2, 3):
                if not s.shape[i].compatible(out.shape[i]):
                    fail(f"DeformableConvolution {what} spatial dims {format_shape(s.shape)} must be "
                         f"the output's {format_shape(out.shape)}")
    return [out]


def _deform_run(attrs, x, offsets, w, mask, use_pad: bool):
    n, c, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    g, dg = attrs.group, attrs.deformable_group
    if c != g * cg or cout % g:
        fail(f"the data has {c} channels; the filters {list(w.shape)} with group {g} expect {g * cg}")
    if c % dg:
        fail(f"the data's {c} channels are not divisible by deformable_group {dg}")
    pb, pe = resolve_pads(attrs.auto_pad, (h, wd), (kh, kw), attrs.dilations, attrs.strides,
                          attrs.pads_begin, attrs.pads_end)
    ho = window_count(h, pb[0] + pe[0], dilated(kh, attrs.dilations[0]), attrs.strides[0])
    wo = window_count(wd, pb[1] + pe[1], dilated(kw, attrs.dilations[1]), attrs.strides[1])
    K = kh * kw
    if offsets.shape != (n, 2 * dg * K, ho, wo):
        fail(f"DeformableConvolution offsets must be {[n, 2 * dg * K, ho, wo]}, got {list(offsets.shape)}")
    if mask is not None and mask.shape != (n, dg * K, ho, wo):
        fail(f"DeformableConvolution mask must be {[n, dg * K, ho, wo]}, got {list(mask.shape)}")
    acc_t = np.float64 if x.dtype == np.float64 else np.float32
    check_alloc([n, c, K, ho, wo], acc_t, "the DeformableConvolution sampled columns")
    off = offsets.astype(acc_t).reshape(n, dg, K, 2, ho, wo)
    ki, kj = np.divmod(np.arange(K), kw)
    base_y = (np.arange(ho) * attrs.strides[0] - pb[0])[None, :, None] + (ki * attrs.dilations[0])[:, None, None]
    base_x = (np.arange(wo) * attrs.strides[1] - pb[1])[None, None, :] + (kj * attrs.dilations[1])[:, None, None]
    y = base_y.astype(acc_t) + off[:, :, :, 0]           # [N, dg, K, Ho, Wo]
    xx = base_x.astype(acc_t) + off[:, :, :, 1]
    # A NaN or infinite offset puts its sample outside the input (0), as OpenVINO's CPU plugin
    # treats an infinite one: a coordinate of -2 is outside in both modes.
    finite = np.isfinite(y) & np.isfinite(xx)
    if not finite.all():
        y, xx = np.where(finite, y, acc_t(-2)), np.where(finite, xx, acc_t(-2))
    if use_pad:
        # A sample counts when trunc(coordinate) is inside the input: (-1, size); corners
        # outside read 0.
        valid = (np.trunc(y) > -1) & (np.trunc(y) < h) & (np.trunc(xx) > -1) & (np.trunc(xx) < wd)
        y1, x1 = np.floor(y), np.floor(xx)
        y2, x2 = y1 + 1, x1 + 1
    else:
        # A sample counts when it is inside [0, size); the corners clamp to the input.
        valid = (y >= 0) & (y < h) & (xx >= 0) & (xx < wd)
        y1, x1 = np.maximum(np.floor(y), 0), np.maximum(np.floor(xx), 0)
        y2, x2 = np.minimum(np.ceil(y), h - 1), np.minimum(np.ceil(xx), wd - 1)
    dy, dx = y - y1, xx - x1
    xr = x.astype(acc_t).reshape(n, dg, c // dg, h, wd)
    bi = np.arange(n).reshape(n, 1, 1, 1, 1)
    gi = np.arange(dg).reshape(1, dg, 1, 1, 1)

    def corner(cy, cx):
        inside = (cy >= 0) & (cy < h) & (cx >= 0) & (cx < wd)
        v = xr[bi, gi, :, np.clip(cy, 0, h - 1).astype(np.int64), np.clip(cx, 0, wd - 1).astype(np.int64)]
        return np.where(inside[..., None], v, 0)          # [N, dg, K, Ho, Wo, c/dg]

    s = ((1 - dx) * (1 - dy))[..., None] * corner(y1, x1) + ((1 - dx) * dy)[..., None] * corner(y2, x1) \
        + (dx * (1 - dy))[..., None] * corner(y1, x2) + (dx * dy)[..., None] * corner(y2, x2)
    weight = valid.astype(acc_t)
    if mask is not None:
        weight = weight * mask.astype(acc_t).reshape(n, dg, K, ho, wo)
    s = s * weight[..., None]
    # [N, dg, K, Ho, Wo, c/dg] -> [N, C, K, Ho*Wo] -> per group [N, g, Cg*K, P]
    s = np.moveaxis(s, -1, 2).reshape(n, c, K, ho * wo).reshape(n, g, cg * K, ho * wo)
    wt = w.astype(acc_t).reshape(g, cout // g, cg * K)
    out = np.matmul(wt[None], s)                          # [N, g, Og, P]
    return out.reshape(n, cout, ho, wo).astype(x.dtype)


@register("DeformableConvolution", since=(1, 8), attrs=(DeformableConv1Attrs, DeformableConv8Attrs),
          category="convolution")
class DeformableConvolution1:
    """Inputs: data [N, C, H, W], offsets [N, 2 * deformable_group * kh * kw, Ho, Wo] (y, x per
    tap), filters [C_OUT, C / group, kh, kw]; v8 adds an optional mask
    [N, deformable_group * kh * kw, Ho, Wo] and bilinear_interpolation_pad."""

    @staticmethod
    def infer(attrs, data, offsets, filters, mask=None):
        return _deform_infer(attrs, data, offsets, filters, mask)

    @staticmethod
    def run(attrs, data, offsets, filters, mask=None):
        return (_deform_run(attrs, data, offsets, filters, mask,
                            getattr(attrs, "bilinear_interpolation_pad", False)),)


# ---------------------------------------------------------------- BinaryConvolution
# Spec page: convolution/binary-convolution-1.


@dataclass(frozen=True)
class BinaryConvAttrs:
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    mode: Literal["xnor-popcount"]
    pad_value: float
    pads_begin: tuple[int, ...] = ()
    pads_end: tuple[int, ...] = ()
    auto_pad: AutoPad = "explicit"


@register("BinaryConvolution", since=1, attrs=BinaryConvAttrs, category="convolution")
class BinaryConvolution1:
    """xnor-popcount: an input element matches a filter bit when it equals it exactly (0 or 1,
    as OpenVINO's reference compares them), so each tap adds +1 (match) or -1; the padding
    holds pad_value. Computed as 2 * (conv(x == 1, w) + conv(x == 0, 1 - w)) - C_IN * taps."""

    @staticmethod
    def infer(attrs, data: TensorSpec, filters: TensorSpec):
        if filters.etype.name != "u1":
            fail(f"BinaryConvolution filters must be u1, got {filters.etype.name}")
        return _conv_infer(attrs, data, TensorSpec(data.etype, filters.shape), None)

    @staticmethod
    def run(attrs, data, filters):
        spatial, kernel = data.shape[2:], filters.shape[2:]
        pb, pe = resolve_pads(attrs.auto_pad, spatial, kernel, attrs.dilations, attrs.strides,
                              attrs.pads_begin, attrs.pads_end)
        check_alloc([s + a + b for s, a, b in zip(spatial, pb, pe)] + list(data.shape[:2]),
                    np.float32, "the padded BinaryConvolution input")
        xp = np.pad(data.astype(np.float32), [(0, 0), (0, 0)] + list(zip(pb, pe)),
                    constant_values=np.float32(attrs.pad_value).astype(data.dtype).astype(np.float32)
                    if data.dtype.kind == "f" else float(attrs.pad_value))
        valid = ConvolutionAttrs(attrs.strides, attrs.dilations, (0,) * len(spatial), (0,) * len(spatial), "explicit")
        w = (filters != 0).astype(np.float32)
        ones = _conv_run(valid, (xp == 1).astype(np.float32), w[np.newaxis])
        zeros = _conv_run(valid, (xp == 0).astype(np.float32), (1 - w)[np.newaxis])
        bits = int(np.prod(filters.shape[1:]))
        return ((2 * (ones + zeros) - bits).astype(data.dtype),)
