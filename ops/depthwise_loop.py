"""The compiled loops of depthwise GroupConvolution-1 (ops/convolution.py): one channel
per group, 2-D, f32 or f64. Numba, because NumPy can only do a depthwise layer tap by tap
over whole maps (a multiply and an add per tap, each a pass over the output through
memory) or as a product over a patch copy.

Three loops. Stride-1 layers with output rows of 16 positions or more run a loop compiled
for their kernel (_fixed_loop): each output summed in a register over the zero-padded
input. Other layers whose maps are at least 3x wider than they have channels run planar
(_depthwise: an output row kept in cache across the taps, each tap a vectorised run along
it; at column strides above 1 each input row is first split into its phases, so that every
tap reads contiguously); the others channel-last (_depthwise_last, the inner loop over the
channels).

Each output element is summed as the NumPy tap loop summed it: from zero, tap by tap in
row-major order, one multiply and one add each (no fused multiply-add: numba leaves
contraction off), so the results are the same bits. (_depthwise and _depthwise_last leave
out a tap that falls in the pads instead of adding x * 0: the same sum, unless a weight is
inf or NaN, or every tap so far gave -0.0.)

Imported on the op's first run, so loading models without depthwise layers never imports numba.
"""
import numpy as np

from irrun.opkit import check_alloc, even_ranges, parallel, workers
from irrun.opkit.compiled import cached_loop

# Multiply-adds per thread below which the loop runs on the calling thread alone. The loops
# are bound by memory, not arithmetic: on a 2-core AMD EPYC (AVX2) no layer measured gained
# from a second thread (0.9M to 14.5M multiply-adds, stride 1 and 2: 0.3x to 1.1x), and in
# whole models (Faster R-CNN, SSDlite) the split layers took 2.5x their one-thread time,
# the halves of the input and output crossing between the cores' caches.
MIN_WORK_PER_THREAD = 1 << 24


@cached_loop
def _depthwise(x, w, out, first, last, sh, sw, dh, dw, ph, pw):
    """out[i] += the depthwise correlation of x[i] [H, W] by w[i % C] [KH, KW] for the
    planes i in [first, last) of x [N*C, H, W] and out [N*C, OH, OW] (zeros).

    The inner loops run over output columns with a start and a length, never an index that
    might be negative (numba would then check each one for wrapping around, and LLVM would
    not vectorise). At a column stride above 1 each input row is first split into its
    `sw` phases, phase r holding columns r, r + sw, ...: every tap then reads one phase
    contiguously."""
    h, wd = x.shape[1], x.shape[2]
    oh, ow = out.shape[1], out.shape[2]
    c, kh, kw = w.shape[0], w.shape[1], w.shape[2]
    wq = (wd + sw - 1) // sw
    # Phases from W on are empty (a stride from the file may be far wider than the map).
    phases = np.zeros((h, min(sw, wd), wq), x.dtype)
    for i in range(first, last):
        plane = x[i]
        taps = w[i % c]
        dst = out[i]
        if sw > 1:
            for iy in range(h):
                row_in = plane[iy]
                for r in range(min(sw, wd)):
                    ph_row = phases[iy, r]
                    for j in range((wd - r + sw - 1) // sw):
                        ph_row[j] = row_in[j * sw + r]
        for oy in range(oh):
            row = dst[oy]
            for ky in range(kh):
                iy = oy * sh - ph + ky * dh
                if iy < 0 or iy >= h:
                    continue
                for kx in range(kw):
                    off = kx * dw - pw
                    # The outputs whose input column ox * sw + off lies in [0, W).
                    lo = 0 if off >= 0 else (-off + sw - 1) // sw
                    hi = min((wd - 1 - off) // sw + 1 if wd - 1 - off >= 0 else 0, ow)
                    if hi <= lo:
                        continue
                    t = taps[ky, kx]
                    d = row[lo:hi]
                    if sw == 1:
                        s = plane[iy, lo + off:]
                    else:
                        q = off // sw
                        s = phases[iy, off - q * sw, lo + q:]
                    for j in range(hi - lo):
                        d[j] += s[j] * t


# Stride-1 layers with kernels and dilations of at most these sizes and output rows of at
# least FIXED_MIN_ROW positions run a loop compiled for their kernel (_fixed_loop).
FIXED_MAX_KERNEL = 7
FIXED_MAX_DILATION = 4
FIXED_MIN_ROW = 16
_fixed: dict = {}


def _fixed_loop(kh, kw, dh, dw):
    """The stride-1 loop compiled for one kernel (each made once, and cached on disk by
    numba, which tells them apart by the values they close over): with the taps' count and
    offsets constants, LLVM unrolls the taps and vectorises along the output row, each
    output summed in a register and stored once, where _depthwise loads and stores the row
    once per tap. Over the zero-padded input, from zero, tap by tap in row-major order,
    pads included: the NumPy tap loop's very sums. ssdlite's [1, 8, 160, 160] 3x3 layer:
    137 us against 279; its [1, 32, 40, 40] 5x5 ones 86 against 274. (Strided layers gained
    nothing this way: splitting the padded input into its phases cost more than it saved.)"""
    key = (kh, kw, dh, dw)
    loop = _fixed.get(key)
    if loop is None:
        loop = _fixed[key] = _compile_fixed(*key)
    return loop


def _compile_fixed(KH, KW, DH, DW):      # the loop's constants
    @cached_loop
    def depthwise_fixed(padded, w, out, first, last, zero):
        """out[i] for the planes i in [first, last): padded [P, Hp, Wp] (zero-padded
        planes), w [C, KH, KW], out [P, OH, OW]."""
        c = w.shape[0]
        oh, ow = out.shape[1], out.shape[2]
        for i in range(first, last):
            taps = w[i % c]
            for oy in range(oh):
                dst = out[i, oy]
                for ox in range(ow):
                    acc = zero
                    for ky in range(KH):
                        src = padded[i, oy + ky * DH]
                        for kx in range(KW):
                            acc += src[ox + kx * DW] * taps[ky, kx]
                    dst[ox] = acc
    return depthwise_fixed


def _depthwise_fixed(x, w, dilations, pads_begin, counts) -> np.ndarray:
    """depthwise2d's stride-1 path through _fixed_loop."""
    n, c, h, wd = x.shape
    kh, kw = w.shape[1:]
    oh, ow = counts
    dh, dw = dilations
    planes = n * c
    hp, wp = oh + (kh - 1) * dh, ow + (kw - 1) * dw       # as far as the windows reach
    check_alloc((planes, hp, wp), x.dtype, "the zero-padded input")
    padded = np.zeros((planes, hp, wp), x.dtype)
    rows, cols = max(0, min(h, hp - pads_begin[0])), max(0, min(wd, wp - pads_begin[1]))
    padded[:, pads_begin[0]:pads_begin[0] + rows, pads_begin[1]:pads_begin[1] + cols] = \
        x.reshape(planes, h, wd)[:, :rows, :cols]
    out = np.empty((n, c, oh, ow), x.dtype)
    loop = _fixed_loop(kh, kw, dh, dw)
    _split(loop, (padded, np.ascontiguousarray(w), out.reshape(planes, oh, ow)),
           (x.dtype.type(0),), planes, out.size * kh * kw)
    return out


@cached_loop
def _depthwise_last(x, w, out, first, last, sh, sw, dh, dw, ph, pw):
    """The same correlation channel-last: x [N, H, W, C], w [KH, KW, C], out [N, OH, OW, C]
    (zeros), for the output rows n * OH + oy in [first, last); the inner loop runs over
    the channels, for maps too small for long runs along a row."""
    h, wd, c = x.shape[1], x.shape[2], x.shape[3]
    oh, ow = out.shape[1], out.shape[2]
    kh, kw = w.shape[0], w.shape[1]
    for k in range(first, last):
        b = k // oh
        oy = k - b * oh
        for ox in range(ow):
            d = out[b, oy, ox]
            for ky in range(kh):
                iy = oy * sh - ph + ky * dh
                if iy < 0 or iy >= h:
                    continue
                for kx in range(kw):
                    ix = ox * sw - pw + kx * dw
                    if ix < 0 or ix >= wd:
                        continue
                    s = x[b, iy, ix]
                    t = w[ky, kx]
                    for j in range(c):
                        d[j] += s[j] * t[j]


# Maps at least this many times wider than they have channels run planar (NCHW): long runs
# along rows. Others run channel-last, with the inner loop over the channels: for
# ssdlite's 168-channel 20x20 layers 120 us against 310 planar, for its 24-channel 80x80
# ones 480 against 270 (3x3 taps; the transposes included).
PLANAR_MIN_WIDTH_PER_CHANNEL = 3


def depthwise2d(x: np.ndarray, w: np.ndarray, strides, dilations, pads_begin, counts) -> np.ndarray:
    """The depthwise correlation of x [N, C, H, W] by w [C, KH, KW] (same float dtype),
    [N, C, *counts], split over the kit's pool when there is enough work."""
    n, c, h, wd = x.shape
    kh, kw = w.shape[1:]
    oh, ow = counts
    args = (strides[0], strides[1], dilations[0], dilations[1], pads_begin[0], pads_begin[1])
    work = n * c * oh * ow * kh * kw
    if n * c * oh * ow == 0:
        return np.zeros((n, c, oh, ow), x.dtype)
    if (tuple(strides) == (1, 1) and ow >= FIXED_MIN_ROW and max(kh, kw) <= FIXED_MAX_KERNEL
            and max(dilations) <= FIXED_MAX_DILATION):
        return _depthwise_fixed(x, w, dilations, pads_begin, counts)
    if wd >= PLANAR_MIN_WIDTH_PER_CHANNEL * c:
        out = np.zeros((n, c, oh, ow), x.dtype)
        xs = np.ascontiguousarray(x).reshape(n * c, h, wd)
        _split(_depthwise, (xs, np.ascontiguousarray(w), out.reshape(n * c, oh, ow)), args,
               n * c, work)
        return out
    xt = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = np.zeros((n, oh, ow, c), x.dtype)
    _split(_depthwise_last, (xt, np.ascontiguousarray(w.transpose(1, 2, 0)), out), args,
           n * oh, work)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


# Parts per thread: a thread the machine pauses in the middle of a part holds up the
# layer for the rest of that part only (the caller takes back the parts not started).
# ssdlite's depthwise layers on this 2-core machine under a load of 16: 9.9 ms in one
# part per thread, 3.6 ms on one thread.
PARTS_PER_THREAD = 4


def _split(loop, arrays, args, items: int, work: int) -> None:
    """loop(*arrays, first, last, *args) over range(items), in parts over the pool."""
    threads = workers(work, MIN_WORK_PER_THREAD)
    if threads < 2 or items < 2:
        loop(*arrays, 0, items, *args)
    else:
        parallel(lambda lo, hi: loop(*arrays, lo, hi, *args),
                 even_ranges(items, min(items, PARTS_PER_THREAD * threads)))
