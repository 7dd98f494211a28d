"""What OpenVINO's CPU plugin computes for an int8 Convolution or MatMul on an x86 CPU
without VNNI, so that `irrun compare` can tell that arithmetic from a real divergence.

OpenVINO runs a Convolution or MatMul whose data input is a FakeQuantize and whose weights
are i8 Consts (Convert, Multiply by a scale) in int8. On CPUs with VNNI (AVX512-VNNI,
AVX-VNNI, AMX) its u8 x i8 dot products are exact. Without it (AVX2, or AVX-512 without
VNNI: AMD EPYC before Zen 4, Intel before Cascade Lake) they add the products of each two
neighbouring input channels in 16 bits, saturating at -32768..32767, before the 32-bit sum
(vpmaddubsw); signed activations are moved to u8 first (+128) and the shift is taken out
afterwards, exactly. Measured with OpenVINO 2026.4.1 on an AMD EPYC with AVX2: a 1x1
convolution of 64 channels of u8 activations and full-range i8 weights came out 3.2 off
the exact sum, and this module's sums gave the plugin's values to 1e-6 on every int8
Convolution and MatMul of models/mobilenet_v3_small_int8 (the depthwise GroupConvolutions
are exact there: their kernel widens to 32 bits first).

irrun computes the exact sum, as OpenVINO's reference does. This module gives the
plugin's sum for compare's isolated check only, never for a model's outputs.
"""
from __future__ import annotations

import functools
import platform

import numpy as np

from irrun.opkit.llvm import cpu_flags
from irrun.opkit.window import dilated, resolve_pads

# /proc/cpuinfo flags of the instructions that make the plugin's int8 sums exact
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
# Largest temporary of the emulated sums, in elements (a chunk of output channels at a time)
CHUNK_ELEMENTS = 1 << 22

CAUSE = ("OpenVINO's CPU plugin runs this layer in int8, and on a CPU without VNNI it adds "
         "each two neighbouring channels' u8 x i8 products in 16 bits, saturating at "
         "+-32767; irrun computes the exact sum, and reproduces OpenVINO's with that "
         "arithmetic")


@functools.lru_cache(maxsize=None)
def host_saturates() -> bool:
    """Whether this machine's CPU plugin sums int8 products in saturated 16-bit pairs: an
    x86-64 CPU whose flags name no VNNI instruction (False when the flags are unknown)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    flags = cpu_flags()
    return bool(flags) and not any(flag in flags for flag in VNNI_FLAGS)


def plugin_output(program, node, args: list, values: dict) -> np.ndarray | None:
    """The CPU plugin's output of `node` (a Convolution or MatMul) on input values `args`
    when it runs the layer in int8 on a CPU without VNNI, or None when the layer is not of
    the form it runs so (or its inputs are not on the int8 grid). `values` holds irrun's
    values by (layer id, port), for the FakeQuantize's and the weights' Consts."""
    kind = node.layer.type
    if kind not in ("Convolution", "MatMul") or len(args) != 2:
        return None
    grid = _activation_grid(program, node.inputs[0], values)
    weights = _int8_weights(program, node.inputs[1], values)
    if grid is None or weights is None:
        return None
    lo, step, levels = grid
    wi, scale = weights
    x = np.asarray(args[0], np.float64)
    u = np.rint((x - lo) / step)
    # The data must sit on the FakeQuantize's grid (it is the other side's FakeQuantize
    # output): else this is not the layer the plugin ran in int8.
    if not (np.all((u >= 0) & (u <= levels - 1))
            and np.allclose(lo + step * u, x, rtol=1e-5, atol=1e-6 * max(abs(lo), step))):
        return None
    u = u.astype(np.int64)
    if kind == "MatMul":
        return _matmul(node.attrs, u, lo, step, wi, scale, x.shape)
    return _convolution(node.attrs, u, lo, step, wi, scale)


def _value(program, source, values):
    """The value at `source` (layer id, port): irrun's, or a Const's data."""
    source = tuple(source)
    if source in values:
        return values[source]
    node = program.nodes[source[0]]
    return None if node.kind != "const" or node.const_value is None else np.asarray(
        node.const_value)


def _activation_grid(program, source, values):
    """(output_low, step, levels) of the per-tensor FakeQuantize behind `source` (through
    Reshapes), or None."""
    lid, port = tuple(source)
    node = program.nodes[lid]
    while node.kind == "op" and node.layer.type == "Reshape":
        lid, port = tuple(node.inputs[0])
        node = program.nodes[lid]
    if node.kind != "op" or node.layer.type != "FakeQuantize" or node.attrs.levels > 256:
        return None
    low, high = (_value(program, node.inputs[k], values) for k in (3, 4))
    if low is None or high is None or np.size(low) != 1 or np.size(high) != 1:
        return None
    lo, hi = float(np.asarray(low).reshape(())), float(np.asarray(high).reshape(()))
    levels = node.attrs.levels
    if not hi > lo or levels < 2:
        return None
    return lo, (hi - lo) / (levels - 1), levels


def _int8_weights(program, source, values):
    """(i8 weights as int64, scale) of weights made as Multiply(Convert(i8 Const), scale
    Const), as NNCF and OpenVINO's converters write symmetric int8 weights, or None."""
    node = program.nodes[tuple(source)[0]]
    if node.kind != "op" or node.layer.type != "Multiply":
        return None
    for a, b in ((0, 1), (1, 0)):
        convert = program.nodes[tuple(node.inputs[a])[0]]
        scale = _value(program, node.inputs[b], values)
        if convert.kind != "op" or convert.layer.type != "Convert" or scale is None:
            continue
        raw = _value(program, convert.inputs[0], values)
        if raw is not None and np.asarray(raw).dtype in (np.int8, np.uint8):
            return np.asarray(raw).astype(np.int64), np.asarray(scale, np.float64)
    return None


def _paired(products: np.ndarray, axis: int) -> np.ndarray:
    """Sum over `axis` (input channels) as the plugin does: each two neighbours in 16 bits,
    saturated, then the pairs (an odd count is padded with a zero channel)."""
    if products.shape[axis] % 2:
        pad = [(0, 0)] * products.ndim
        pad[axis] = (0, 1)
        products = np.pad(products, pad)
    even = np.take(products, range(0, products.shape[axis], 2), axis)
    odd = np.take(products, range(1, products.shape[axis], 2), axis)
    return np.clip(even + odd, -32768, 32767).sum(axis)


def _matmul(attrs, u, lo, step, wi, scale, x_shape):
    """y = x @ W for x on the grid u and W = wi * scale, wi [N, K] (transpose_b) or [K, N]."""
    if attrs.transpose_a or wi.ndim != 2 or u.ndim < 1:
        return None
    w = wi if attrs.transpose_b else wi.T                  # [N, K]
    s = scale.reshape(-1) if scale.size > 1 else np.full(w.shape[0], float(scale.reshape(())))
    if s.shape[0] != w.shape[0] or u.shape[-1] != w.shape[1]:
        return None
    rows = u.reshape(-1, w.shape[1])                        # [M, K]
    out = np.empty((rows.shape[0], w.shape[0]))
    per = max(1, CHUNK_ELEMENTS // max(1, w.size))
    for at in range(0, rows.shape[0], per):
        block = rows[at:at + per, None, :] * w[None]       # [m, N, K]
        out[at:at + per] = step * _paired(block, 2) + lo * w.sum(1)
    return (out * s).reshape(*x_shape[:-1], w.shape[0])


def _convolution(attrs, u, lo, step, wi, scale):
    """Convolution of the grid u [N, C, *spatial] with wi [K, C, *kernel] * scale, the
    padding being the value 0 (the grid point -lo / step, which must be one)."""
    if u.ndim != wi.ndim or u.shape[1] != wi.shape[1] or u.ndim < 3:
        return None
    k_out, channels, kernel = wi.shape[0], wi.shape[1], wi.shape[2:]
    s = scale.reshape(-1) if scale.size > 1 else np.full(k_out, float(scale.reshape(())))
    if s.shape[0] != k_out:
        return None
    n = len(kernel)
    sizes = u.shape[2:]
    begin, end = resolve_pads(attrs.auto_pad, sizes, kernel, attrs.dilations, attrs.strides,
                              attrs.pads_begin, attrs.pads_end)
    zero = -lo / step
    if (any(begin) or any(end)) and abs(zero - round(zero)) > 1e-6:
        return None
    padded = np.pad(u, [(0, 0), (0, 0)] + list(zip(begin, end)), constant_values=round(zero))
    outs = [(padded.shape[2 + i] - dilated(kernel[i], attrs.dilations[i])) // attrs.strides[i]
            + 1 for i in range(n)]
    if any(o <= 0 for o in outs):
        return None
    # Each kernel tap's view of the padded grid: [N, C, *outs]
    taps = []
    for tap in np.ndindex(*kernel):
        index = tuple(slice(tap[i] * attrs.dilations[i],
                            tap[i] * attrs.dilations[i] + (outs[i] - 1) * attrs.strides[i] + 1,
                            attrs.strides[i]) for i in range(n))
        taps.append(padded[(slice(None), slice(None)) + index])
    w_taps = wi.reshape(k_out, channels, -1)                # [K, C, T]
    total = np.zeros((u.shape[0], k_out, *outs), np.int64)
    per = max(1, CHUNK_ELEMENTS // max(1, u.shape[0] * channels * int(np.prod(outs))))
    for t, view in enumerate(taps):
        for at in range(0, k_out, per):
            w = w_taps[at:at + per, :, t]                   # [k, C]
            block = view[:, None] * w.reshape(1, *w.shape, *(1,) * n)   # [N, k, C, *outs]
            total[:, at:at + per] += _paired(block, 2)
    shape = (1, k_out) + (1,) * n
    return (step * total + lo * w_taps.sum((1, 2)).reshape(shape)) * s.reshape(shape)
