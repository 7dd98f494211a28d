"""Signal ops: discrete Fourier transforms and the short-time Fourier transform.

Spec pages: signals/dft-7, signals/idft-7, signals/rdft-9, signals/irdft-9, signals/stft-15,
signals/istft-16. Complex tensors are real tensors with a last dim of 2 (real, imaginary).
Transforms compute with numpy.fft in f64 and round once to the input's element type.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irrun.opkit import (
    DYNAMIC,
    Dim,
    NoAttrs,
    TensorSpec,
    check_alloc,
    fail,
    format_shape,
    known_ints,
    register,
)

# ---------------------------------------------------------------- shared checks


def _check_float(spec: TensorSpec, what: str) -> None:
    if spec.etype.kind != "float":
        fail(f"{what} must be a floating-point tensor, got {spec.etype.name}")


def _check_index_input(spec: TensorSpec, what: str, ranks=(1,)) -> None:
    if spec.etype.name not in ("i32", "i64"):
        fail(f"{what} must be i32 or i64, got {spec.etype.name}")
    if spec.rank is not None and spec.rank not in ranks:
        fail(f"{what} must have rank {' or '.join(map(str, ranks))}, got {format_shape(spec.shape)}")


def _norm_axes(axes: list[int], rank: int, what="axes (input 1)") -> list[int]:
    """Axes in [-rank, rank - 1] (rank counts the dims a transform may use), distinct."""
    out = []
    for a in axes:
        if not -rank <= a < rank:
            fail(f"{what} value {a} is out of range [{-rank}, {rank - 1}]")
        a = a + rank if a < 0 else a
        if a in out:
            fail(f"{what} {list(axes)} name dim {a} twice")
        out.append(a)
    return out


def _signal_sizes(sizes: list[int] | None, n_axes: int) -> list[int]:
    if sizes is None:
        return [-1] * n_axes
    if len(sizes) != n_axes:
        fail(f"signal_size (input 2) has {len(sizes)} elements, axes has {n_axes}")
    for s in sizes:
        if s != -1 and s < 1:
            fail(f"signal_size (input 2) values must be -1 or positive, got {s}")
    return sizes


# ---------------------------------------------------------------- DFT, IDFT, RDFT, IRDFT
#
# kind: "dft" / "idft" (complex -> complex), "rdft" (real -> complex), "irdft" (complex -> real)


def _fft_infer(kind: str, data: TensorSpec, axes: TensorSpec, size: TensorSpec | None):
    _check_float(data, "data (input 0)")
    _check_index_input(axes, "axes (input 1)")
    if size is not None:
        _check_index_input(size, "signal_size (input 2)")
    complex_in = kind != "rdft"
    if data.shape is None:
        return [TensorSpec(data.etype, None)]
    rank = len(data.shape)
    if complex_in:
        if rank < 2:
            fail(f"data (input 0) must have rank >= 2 with a last dim of 2, got {format_shape(data.shape)}")
        if not data.shape[-1].compatible(Dim.of(2)):
            fail(f"data (input 0) must have a last dim of 2 (real, imaginary), got {format_shape(data.shape)}")
    elif rank < 1:
        fail("data (input 0) must have rank >= 1, got a scalar")
    space = data.shape[:-1] if complex_in else data.shape     # the dims axes refer to
    ax_values = known_ints(axes)
    if ax_values is not None and len(ax_values) > len(space):
        fail(f"axes (input 1) has {len(ax_values)} elements for {len(space)} signal dims")
    sizes = None if size is None else known_ints(size)
    if ax_values is None or (size is not None and sizes is None):
        out = tuple(DYNAMIC for _ in space)
    else:
        ax = _norm_axes(ax_values, len(space))
        sz = _signal_sizes(sizes, len(ax))
        out = list(space)
        for i, (a, s) in enumerate(zip(ax, sz)):
            last = i == len(ax) - 1
            d = space[a] if s == -1 else Dim.of(s)
            if kind == "rdft" and last:
                # (An empty axis stays empty, as OpenVINO's CPU plugin returns.)
                d = Dim(d.lo and d.lo // 2 + 1, None if d.hi is None else d.hi and d.hi // 2 + 1)
            elif kind == "irdft" and last and s == -1:
                if d.hi is not None and d.hi < 2:
                    fail(f"irdft needs at least 2 elements along axis {a} without a signal_size, "
                         f"got {d}")
                d = Dim(2 * (max(d.lo, 1) - 1), None if d.hi is None else 2 * (d.hi - 1))
            out[a] = d
        out = tuple(out)
    if kind == "irdft":
        return [TensorSpec(data.etype, out)]
    return [TensorSpec(data.etype, out + (Dim.of(2),))]


def _fft_run(kind: str, data: np.ndarray, axes: np.ndarray, size: np.ndarray | None):
    complex_in = kind != "rdft"
    if complex_in and (data.ndim < 2 or data.shape[-1] != 2):
        fail(f"data (input 0) must have a last dim of 2 (real, imaginary), got shape {list(data.shape)}")
    if not complex_in and data.ndim < 1:
        fail("data (input 0) must have rank >= 1, got a scalar")
    space = data.shape[:-1] if complex_in else data.shape
    ax_values = [int(v) for v in axes.reshape(-1).tolist()]
    if len(ax_values) > len(space):
        fail(f"axes (input 1) has {len(ax_values)} elements for {len(space)} signal dims")
    ax = _norm_axes(ax_values, len(space))
    sz = _signal_sizes(None if size is None else [int(v) for v in size.reshape(-1).tolist()], len(ax))
    wide = data.astype(np.float64)
    x = wide[..., 0] + 1j * wide[..., 1] if complex_in else wide
    s = [space[a] if n == -1 else n for a, n in zip(ax, sz)]
    if kind == "irdft" and sz and sz[-1] == -1:
        s[-1] = 2 * (space[ax[-1]] - 1)
        if s[-1] < 1:
            fail(f"irdft needs at least 2 elements along axis {ax[-1]} without a signal_size, "
                 f"got {space[ax[-1]]}")
    out_shape = list(space)
    for a, n in zip(ax, s):
        out_shape[a] = n
    check_alloc(out_shape + [2], np.complex128, f"{kind.upper()} output")
    if 0 in s:
        # A transform over an empty axis has no point to compute: an empty output (numpy.fft
        # refuses 0 points); RDFT's empty last axis stays empty, as OpenVINO's CPU plugin returns.
        if kind == "rdft":
            out_shape[ax[-1]] = s[-1] and s[-1] // 2 + 1
        return (np.zeros(out_shape if kind == "irdft" else out_shape + [2], data.dtype),)
    if not ax:
        y = x.astype(np.complex128) if kind != "irdft" else x.real
    elif kind == "dft":
        y = np.fft.fftn(x, s=s, axes=ax)
    elif kind == "idft":
        y = np.fft.ifftn(x, s=s, axes=ax)
    elif kind == "rdft":
        y = np.fft.rfftn(x, s=s, axes=ax)
    else:
        y = np.fft.irfftn(x, s=s, axes=ax)
    if kind == "irdft":
        return (np.asarray(y.real, dtype=np.float64).astype(data.dtype),)
    return (np.stack([y.real, y.imag], axis=-1).astype(data.dtype),)


def _make_fft(type_: str, since: int, kind: str):
    def infer(attrs, data, axes, signal_size=None):
        return _fft_infer(kind, data, axes, signal_size)

    def run(attrs, data, axes, signal_size=None):
        return _fft_run(kind, data, axes, signal_size)

    cls = type(f"{type_}{since}", (), {"infer": staticmethod(infer), "run": staticmethod(run),
                                       "__doc__": f"{type_}-{since}: numpy.fft.{kind}-like transform."})
    return register(type_, since=since, attrs=NoAttrs, category="signals")(cls)


DFT7 = _make_fft("DFT", 7, "dft")
IDFT7 = _make_fft("IDFT", 7, "idft")
RDFT9 = _make_fft("RDFT", 9, "rdft")
IRDFT9 = _make_fft("IRDFT", 9, "irdft")


# ---------------------------------------------------------------- STFT, ISTFT


def _scalar_int(spec: TensorSpec, what: str) -> int | None:
    if spec.etype.name not in ("i32", "i64"):
        fail(f"{what} must be i32 or i64, got {spec.etype.name}")
    if spec.shape is not None and not (len(spec.shape) == 0 or (
            len(spec.shape) == 1 and spec.shape[0].compatible(Dim.of(1)))):
        fail(f"{what} must be a scalar, got {format_shape(spec.shape)}")
    v = known_ints(spec)
    return None if v is None or len(v) != 1 else v[0]


def _padded_window(window: np.ndarray, frame_size: int) -> np.ndarray:
    """The window centred in a frame: (frame_size - length) // 2 zeros before it."""
    check_alloc((frame_size,), np.float64, "the window padded to frame_size")
    w = np.zeros(frame_size, np.float64)
    left = (frame_size - window.size) // 2
    w[left:left + window.size] = window
    return w


def _check_frames(frame_size: int, frame_step: int, window_len: int | None):
    if frame_size < 1:
        fail(f"frame_size (input 2) must be positive, got {frame_size}")
    if frame_step < 1:
        fail(f"frame_step (input 3) must be positive, got {frame_step}")
    if window_len is not None and window_len > frame_size:
        fail(f"window (input 1) has {window_len} values, more than frame_size {frame_size}")


@dataclass(frozen=True)
class STFTAttrs:
    transpose_frames: bool


@register("STFT", since=15, attrs=STFTAttrs, category="signals")
class STFT15:
    @staticmethod
    def infer(attrs, signal: TensorSpec, window: TensorSpec, frame_size: TensorSpec,
              frame_step: TensorSpec):
        _check_float(signal, "signal (input 0)")
        if window.etype != signal.etype:
            fail(f"window (input 1) must be {signal.etype.name} like the signal, got {window.etype.name}")
        if signal.rank is not None and signal.rank not in (1, 2):
            fail(f"signal (input 0) must be 1-D or 2-D, got {format_shape(signal.shape)}")
        if window.rank is not None and window.rank != 1:
            fail(f"window (input 1) must be 1-D, got {format_shape(window.shape)}")
        n = _scalar_int(frame_size, "frame_size (input 2)")
        step = _scalar_int(frame_step, "frame_step (input 3)")
        wlen = window.shape[0].value if window.shape is not None else None
        if n is not None and step is not None:
            _check_frames(n, step, wlen)
        if signal.shape is None:
            return [TensorSpec(signal.etype, None)]
        length = signal.shape[-1]
        if n is not None and length.hi is not None and length.hi < n:
            fail(f"frame_size {n} is larger than the signal ({length})")
        frames = DYNAMIC
        if n is not None and step is not None and length.is_static:
            frames = Dim.of((length.value - n) // step + 1)
        bins = Dim.of(n // 2 + 1) if n is not None else DYNAMIC
        inner = (bins, frames) if attrs.transpose_frames else (frames, bins)
        return [TensorSpec(signal.etype, signal.shape[:-1] + inner + (Dim.of(2),))]

    @staticmethod
    def run(attrs, signal, window, frame_size, frame_step):
        n, step = int(frame_size.reshape(-1)[0]), int(frame_step.reshape(-1)[0])
        _check_frames(n, step, window.size)
        if signal.shape[-1] < n:
            fail(f"frame_size {n} is larger than the signal ({signal.shape[-1]})")
        lead, count, bins = signal.shape[:-1], (signal.shape[-1] - n) // step + 1, n // 2 + 1
        if 0 in lead:
            # No signal, however long its rows say they are: nothing to compute.
            inner = (bins, count) if attrs.transpose_frames else (count, bins)
            return (np.zeros(lead + inner + (2,), signal.dtype),)
        # The frames, windowed in f64, and their spectra (complex128) are larger than the
        # output (f32 or f16 pairs): held to the memory budget before they are made.
        check_alloc(lead + (count, n), np.float64, "STFT's windowed frames")
        check_alloc(lead + (count, bins), np.complex128, "STFT's spectra")
        frames = np.lib.stride_tricks.sliding_window_view(signal.astype(np.float64), n, axis=-1)
        frames = frames[..., ::step, :] * _padded_window(window.astype(np.float64), n)
        y = np.fft.rfft(frames, axis=-1)                     # [..., frames, bins]
        if attrs.transpose_frames:
            y = np.swapaxes(y, -1, -2)
        return (np.stack([y.real, y.imag], axis=-1).astype(signal.dtype),)


def _default_length(attrs, frames: int, n: int, step: int) -> int:
    """The signal length without a signal_length input. With center, OpenVINO (its shape
    inference and CPU plugin, as torch.istft) drops n // 2 samples at each end:
    (frames - 1) * step + n - 2 * (n // 2); the spec's text says (frames - 1) * step, which
    differs by one for odd frame sizes. irrun follows OpenVINO, so IR files agree. No frames
    give the length of one (as OpenVINO's shape inference does)."""
    full = max(frames - 1, 0) * step + n
    return full - 2 * (n // 2) if attrs.center else full


@dataclass(frozen=True)
class ISTFTAttrs:
    center: bool
    normalized: bool


@register("ISTFT", since=16, attrs=ISTFTAttrs, category="signals")
class ISTFT16:
    @staticmethod
    def infer(attrs, data: TensorSpec, window: TensorSpec, frame_size: TensorSpec,
              frame_step: TensorSpec, signal_length: TensorSpec | None = None):
        _check_float(data, "data (input 0)")
        if window.etype != data.etype:
            fail(f"window (input 1) must be {data.etype.name} like the data, got {window.etype.name}")
        if window.rank is not None and window.rank != 1:
            fail(f"window (input 1) must be 1-D, got {format_shape(window.shape)}")
        if data.rank is not None and data.rank not in (3, 4):
            fail(f"data (input 0) must be [fft_results, frames, 2] or [batch, fft_results, frames, 2], "
                 f"got {format_shape(data.shape)}")
        if data.shape is not None and not data.shape[-1].compatible(Dim.of(2)):
            fail(f"data (input 0) must have a last dim of 2, got {format_shape(data.shape)}")
        n = _scalar_int(frame_size, "frame_size (input 2)")
        step = _scalar_int(frame_step, "frame_step (input 3)")
        wlen = window.shape[0].value if window.shape is not None and len(window.shape) == 1 else None
        if n is not None and step is not None:
            _check_frames(n, step, wlen)
        if n is not None and data.shape is not None and not data.shape[-3].compatible(Dim.of(n // 2 + 1)):
            fail(f"data (input 0) has {data.shape[-3]} fft results, frame_size {n} needs {n // 2 + 1}")
        length = None if signal_length is None else _scalar_int(signal_length, "signal_length (input 4)")
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        lead = data.shape[:-3]
        if signal_length is not None:
            out = Dim.of(length) if length is not None else DYNAMIC
            if length is not None and length < 0:
                fail(f"signal_length (input 4) must be non-negative, got {length}")
        elif n is not None and step is not None and data.shape[-2].is_static:
            out = Dim.of(_default_length(attrs, data.shape[-2].value, n, step))
        else:
            out = DYNAMIC
        return [TensorSpec(data.etype, lead + (out,))]

    @staticmethod
    def run(attrs, data, window, frame_size, frame_step, signal_length=None):
        n, step = int(frame_size.reshape(-1)[0]), int(frame_step.reshape(-1)[0])
        if window.ndim != 1:
            fail(f"window (input 1) must be 1-D, got shape {list(window.shape)}")
        _check_frames(n, step, window.size)
        if data.ndim not in (3, 4) or data.shape[-1] != 2:
            fail(f"data (input 0) must be [fft_results, frames, 2] or [batch, fft_results, frames, 2], "
                 f"got shape {list(data.shape)}")
        if data.shape[-3] != n // 2 + 1:
            fail(f"data (input 0) has {data.shape[-3]} fft results, frame_size {n} needs {n // 2 + 1}")
        nframes = data.shape[-2]
        full = max(nframes - 1, 0) * step + n     # (no frames: zeros, as no window reaches)
        if signal_length is not None:
            length = int(signal_length.reshape(-1)[0])
            if length < 0:
                fail(f"signal_length (input 4) must be non-negative, got {length}")
        else:
            length = _default_length(attrs, nframes, n, step)
        lead = data.shape[:-3]
        check_alloc(lead + (max(full, length),), np.float64, "ISTFT output")
        if 0 in lead:
            # No data, however many frames it says it has: silence, nothing to compute.
            return (np.zeros(lead + (length,), data.dtype),)
        # The frames in f64 (and, per frame and sample, the overlap-add positions and the
        # squared window): held to the memory budget before they are made.
        check_alloc(lead + (nframes, n), np.float64, "ISTFT's frames")
        wide = data.astype(np.float64)
        spec = np.swapaxes(wide[..., 0] + 1j * wide[..., 1], -1, -2)    # [..., frames, bins]
        frames = np.fft.irfft(spec, n=n, axis=-1)                         # [..., frames, n]
        # Overlap-add of the windowed frames, divided by the overlap-added squared window,
        # as torch.istft and OpenVINO's CPU plugin compute it (the reference kernel divides
        # the unwindowed frames by the window sum instead); 0 where no window reaches.
        win = _padded_window(window.astype(np.float64), n)
        pos = (np.arange(nframes)[:, None] * step + np.arange(n)[None, :]).reshape(-1)
        acc = np.zeros(lead + (full,), np.float64)
        np.add.at(acc, (..., pos), (frames * win).reshape(lead + (-1,)))
        wsum = np.zeros(full, np.float64)
        np.add.at(wsum, pos, np.tile(win * win, nframes))
        scale = np.sqrt(n) if attrs.normalized else 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.where(wsum != 0, acc * scale / np.where(wsum != 0, wsum, 1), 0.0)
        margin = n // 2 if attrs.center else 0
        out = np.zeros(lead + (length,), np.float64)
        take = max(0, min(length, full - margin))
        out[..., :take] = y[..., margin:margin + take]
        return (out.astype(data.dtype),)
