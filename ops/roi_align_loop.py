"""The compiled loop of ROIAlign-3/9 (ops/detection.py). Numba, because NumPy spends a
call per step on every box: its sample grid, four fancy-indexed gathers of [C, ph * sy,
pw * sx] and the blend, some 40 calls a box, where torch_fasterrcnn's 150 boxes of 7x7
bins took 18 ms a layer.

For each box the loop works out the sample positions, corner indices and bilinear weights
in f32 as the OpenVINO reference does (a sample outside [-1, size] has weights 0, a sample
past the last row or column reads it twice), and blends each sample's four corners in the
reference's order and types (((w00 * v00 + w01 * v01) + w10 * v10) + w11 * v11, each weight
the product of the two axes' weights), each product and sum rounded on its own (numba
contracts nothing into FMAs). A bin's average adds its samples divided by their count one
by one from 0, in row-major order, as the reference does (NumPy's sum over the sample axes,
which irrun used before, picks its own order: the two differ by an ulp at times). A bin's
maximum keeps a NaN (the reference's comparison would skip it) and is raised to 0.

A box's sample corners and weights are worked out once for all channels. Where the
samples outnumber the pixels of the maps they read, the loop reads the maps channels last
([N, H * W, C], transposed once a call) and each sample blends the C channels of its four
corners side by side, which the compiler turns into vector instructions; else (a few boxes
on large maps) it reads them as they come, channel by channel.

Imported on the op's first run, so loading models without ROIAlign never imports numba.
"""
import numpy as np

from irrun.opkit import even_ranges, parallel, workers
from irrun.opkit.compiled import cached_loop

# Samples (times channels) per thread below which the loop runs on the calling thread alone.
MIN_WORK_PER_THREAD = 1 << 16


@cached_loop
def _axis(start, bin_size, pooled, ratio, size, low, high, w0, w1):
    """Sample positions along one axis of one box, written to low/high (corner indices)
    and w0/w1 (their weights, 0 for a sample outside [-1, size]), each [pooled * ratio]:
    as ROIAlign3.run worked them out in NumPy, step by step in f32."""
    one = np.float32(1)
    zero = np.float32(0)
    half = np.float32(0.5)
    fsize = np.float32(size)
    dist = bin_size / np.float32(ratio)
    k = 0
    for b in range(pooled):
        for s in range(ratio):
            pos = (start + np.float32(b) * bin_size) + dist * (np.float32(s) + half)
            valid = (pos >= -one) and (pos <= fsize)
            if pos < zero:  # noqa: PLR1730 (np.maximum: a NaN stays NaN)
                pos = zero
            lo = np.int64(pos) if valid else np.int64(0)
            if lo >= size - 1:
                lo = size - 1
                hi = size - 1
                pos = np.float32(lo)
            else:
                hi = lo + 1
            lw = pos - np.float32(lo)
            keep = one if valid else zero
            low[k] = lo
            high[k] = hi
            w0[k] = (one - lw) * keep
            w1[k] = lw * keep
            k += 1


@cached_loop
def _table(x1, y1, bw, bh, ph, pw, rx, ry, h, w):
    """One box's samples in bin order (bins row by row, a bin's samples row by row): each
    sample's four corners as offsets into an [H, W] plane, taps [S, 4], and their bilinear
    weights, weights [S, 4] (f32, the reference's products of the two axes' weights)."""
    ny, nx = ph * ry, pw * rx
    yl = np.empty(ny, np.int64)
    yh = np.empty(ny, np.int64)
    wy0 = np.empty(ny, np.float32)
    wy1 = np.empty(ny, np.float32)
    xl = np.empty(nx, np.int64)
    xh = np.empty(nx, np.int64)
    wx0 = np.empty(nx, np.float32)
    wx1 = np.empty(nx, np.float32)
    _axis(y1, bh, ph, ry, h, yl, yh, wy0, wy1)
    _axis(x1, bw, pw, rx, w, xl, xh, wx0, wx1)
    taps = np.empty((ph * pw * ry * rx, 4), np.int64)
    weights = np.empty((ph * pw * ry * rx, 4), np.float32)
    k = 0
    for a in range(ph):
        for b in range(pw):
            for s in range(a * ry, (a + 1) * ry):
                for t in range(b * rx, (b + 1) * rx):
                    taps[k, 0] = yl[s] * w + xl[t]
                    taps[k, 1] = yl[s] * w + xh[t]
                    taps[k, 2] = yh[s] * w + xl[t]
                    taps[k, 3] = yh[s] * w + xh[t]
                    weights[k, 0] = wy0[s] * wx0[t]
                    weights[k, 1] = wy0[s] * wx1[t]
                    weights[k, 2] = wy1[s] * wx0[t]
                    weights[k, 3] = wy1[s] * wx1[t]
                    k += 1
    return taps, weights


@cached_loop
def _channels_last(fm, h, w, box, ids, bw, bh, sx, sy, out, first, last, is_max):
    """out[i] for the boxes i in [first, last): fm [N, H * W, C] f32 (the feature maps
    with channels last, so that a sample blends its channels side by side), h and w the
    maps' height and width, box [R, 4] (x1, y1, x2, y2 in feature-map pixels, f32), ids
    [R] (batch index, int64), bw/bh [R] (bin sizes, f32), sx/sy [R] (samples per bin along
    x and y, int64; a box with one of them <= 0 stays 0), out [R, C, ph, pw] f32 of zeros.

    A bin's average adds its samples, each divided by their count, one by one from 0 in
    row-major order (the reference's order). Its maximum is NaN if a sample is, else the
    largest sample or 0, whichever is larger (a maximum of 0 or -0 gives 0)."""
    c = fm.shape[2]
    ph, pw = out.shape[2], out.shape[3]
    zero = np.float32(0)
    acc = np.empty(c, np.float32)
    for i in range(first, last):
        ry, rx = sy[i], sx[i]
        if ry <= 0 or rx <= 0:
            continue
        taps, weights = _table(box[i, 0], box[i, 1], bw[i], bh[i], ph, pw, rx, ry, h, w)
        per_bin = ry * rx
        count = np.float32(per_bin)
        f = fm[ids[i]]              # [H * W, C]: a sample's channels side by side
        k = 0
        for a in range(ph):
            for b in range(pw):
                for j in range(k, k + per_bin):
                    w0, w1, w2, w3 = weights[j, 0], weights[j, 1], weights[j, 2], weights[j, 3]
                    f0, f1, f2, f3 = f[taps[j, 0]], f[taps[j, 1]], f[taps[j, 2]], f[taps[j, 3]]
                    if is_max:
                        for ch in range(c):
                            v = ((w0 * f0[ch] + w1 * f1[ch]) + w2 * f2[ch]) + w3 * f3[ch]
                            m = acc[ch]
                            if j == k or v > m or (np.isnan(v) and not np.isnan(m)):
                                acc[ch] = v
                    else:
                        for ch in range(c):
                            v = ((w0 * f0[ch] + w1 * f1[ch]) + w2 * f2[ch]) + w3 * f3[ch]
                            acc[ch] = (zero if j == k else acc[ch]) + v / count
                for ch in range(c):
                    m = acc[ch]
                    if is_max and m <= zero:        # a NaN stays NaN, -0 gives 0
                        m = zero
                    out[i, ch, a, b] = m
                k += per_bin


@cached_loop
def _channels_first(fm, h, w, box, ids, bw, bh, sx, sy, out, first, last, is_max):
    """_channels_last's output from fm [N, C, H * W] as it comes, channel by channel: for
    few samples on large maps, where transposing the maps would cost more than the
    samples."""
    c = fm.shape[1]
    ph, pw = out.shape[2], out.shape[3]
    zero = np.float32(0)
    for i in range(first, last):
        ry, rx = sy[i], sx[i]
        if ry <= 0 or rx <= 0:
            continue
        taps, weights = _table(box[i, 0], box[i, 1], bw[i], bh[i], ph, pw, rx, ry, h, w)
        per_bin = ry * rx
        count = np.float32(per_bin)
        f = fm[ids[i]]
        for ch in range(c):
            fc = f[ch]
            k = 0
            for a in range(ph):
                for b in range(pw):
                    acc = zero
                    for j in range(k, k + per_bin):
                        v = (((weights[j, 0] * fc[taps[j, 0]] + weights[j, 1] * fc[taps[j, 1]])
                              + weights[j, 2] * fc[taps[j, 2]]) + weights[j, 3] * fc[taps[j, 3]])
                        if is_max:
                            if j == k or v > acc or (np.isnan(v) and not np.isnan(acc)):
                                acc = v
                        else:
                            acc += v / count
                    if is_max and acc <= zero:      # a NaN stays NaN, -0 gives 0
                        acc = zero
                    out[i, ch, a, b] = acc
                    k += per_bin


def roi_align(fm, box, ids, bw, bh, sx, sy, pooled_h, pooled_w, is_max):
    """ROIAlign's output [R, C, pooled_h, pooled_w] f32 (see _channels_last)."""
    r, c = box.shape[0], fm.shape[1]
    out = np.zeros((r, c, pooled_h, pooled_w), np.float32)
    if out.size == 0:
        return out
    n, _, h, w = fm.shape
    samples = int(np.maximum(sx, 0) @ np.maximum(sy, 0)) * pooled_h * pooled_w
    # Channels last when the samples outnumber the pixels of the maps they read (the
    # transposition reads and writes each once); else the maps as they come.
    images = np.unique(ids).size
    if samples >= images * h * w:
        loop = _channels_last
        maps = np.ascontiguousarray(fm.transpose(0, 2, 3, 1), np.float32).reshape(n, h * w, c)
    else:
        loop = _channels_first
        maps = np.ascontiguousarray(fm, np.float32).reshape(n, c, h * w)
    arrays = (maps, h, w, np.ascontiguousarray(box, np.float32),
              np.ascontiguousarray(ids, np.int64), np.ascontiguousarray(bw, np.float32),
              np.ascontiguousarray(bh, np.float32), np.ascontiguousarray(sx, np.int64),
              np.ascontiguousarray(sy, np.int64), out)
    parts = min(workers(samples * c, MIN_WORK_PER_THREAD), r)
    if parts < 2:
        loop(*arrays, 0, r, bool(is_max))
    else:
        parallel(lambda lo, hi: loop(*arrays, lo, hi, bool(is_max)), even_ranges(r, parts))
    return out
