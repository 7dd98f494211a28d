"""Signal ops: DFT-7, IDFT-7, RDFT-9, IRDFT-9, STFT-15, ISTFT-16 -- the spec's shape
examples, the spec's formula by direct summation, errors, and OpenVINO differential tests."""
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irrun.errors import ShapeError
from irrun.ir.etypes import from_dtype
from irrun.ir.registry import lookup
from irrun.ir.shapes import TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset9 as o9
import openvino.opset15 as o15
import openvino.opset16 as o16

from irrun.ir.registry import NoAttrs, parse_attrs


def op(type_, opset):
    return lookup(type_, f"opset{opset}")


def attrs(type_, opset, data=None):
    a, problems, _ = parse_attrs(op(type_, opset).attrs, data or {})
    assert not problems
    return a


def S(etype, shape):
    return TensorSpec.make(etype, shape)


def V(values):
    v = np.array(values, np.int64)
    return TensorSpec.of_value(v, from_dtype(v.dtype))


def shape_of(type_, opset, data, *specs):
    (s,) = op(type_, opset).infer(attrs(type_, opset, data), *specs)
    return format_shape(s.shape)


def c(v):
    return ov.op.Constant(np.array(v, np.int64))


# ---------------------------------------------------------------- spec shape examples

DFT_EXAMPLES = [  # (input, axes, signal_size, output) from dft-7 / idft-7
    ([1, 320, 320, 2], [1, 2], None, "[1,320,320,2]"),
    ([320, 320, 2], [0, 1], None, "[320,320,2]"),
    ([1, 320, 320, 2], [1, 2], [512, 100], "[1,512,100,2]"),
    ([320, 320, 2], [0, 1], [512, 100], "[512,100,2]"),
    ([16, 768, 580, 320, 2], [3, 1, 2], [170, -1, 1024], "[16,768,1024,170,2]"),
]
RDFT_EXAMPLES = [
    ([1, 320, 320], [1, 2], None, "[1,320,161,2]"),
    ([320, 320], [0, 1], None, "[320,161,2]"),
    ([1, 320, 320], [1, 2], [512, 100], "[1,512,51,2]"),
    ([320, 320], [0, 1], [512, 100], "[512,51,2]"),
    ([16, 768, 580, 320], [3, 1, 2], [170, -1, 1024], "[16,768,513,170,2]"),
]
IRDFT_EXAMPLES = [
    ([1, 161, 161, 2], [1, 2], None, "[1,161,320]"),
    ([161, 161, 2], [0, 1], None, "[161,320]"),
    ([1, 161, 161, 2], [1, 2], [512, 100], "[1,512,100]"),
    ([161, 161, 2], [0, 1], [512, 100], "[512,100]"),
    ([16, 768, 580, 320, 2], [3, 1, 2], [170, -1, 1024], "[16,768,1024,170]"),
    ([16, 768, 580, 320, 2], [3, 0, 2], [258, -1, 2056], "[16,768,2056,258]"),
]


@pytest.mark.parametrize("type_, opset, examples", [
    ("DFT", 7, DFT_EXAMPLES), ("IDFT", 7, DFT_EXAMPLES), ("RDFT", 9, RDFT_EXAMPLES),
    ("IRDFT", 9, IRDFT_EXAMPLES)])
def test_fft_spec_shape_examples(type_, opset, examples):
    for shape, axes, size, out in examples:
        specs = [S("f32", shape), V(axes)] + ([V(size)] if size is not None else [])
        assert shape_of(type_, opset, {}, *specs) == out


@pytest.mark.parametrize("transpose, signal, out", [
    (False, [56], "[16,6,2]"), (True, [56], "[6,16,2]"),
    (False, [3, 56], "[3,16,6,2]"), (True, [3, 56], "[3,6,16,2]")])
def test_stft_spec_shape_examples(transpose, signal, out):
    got = shape_of("STFT", 15, {"transpose_frames": str(transpose).lower()}, S("f32", signal), S("f32", [7]),
                   V(11), V(3))
    assert got == out


# With center and the default length the spec prints 45 ((16 - 1) * 3); OpenVINO's own
# shape inference (and CPU plugin) gives 46 = 15 * 3 + 11 - 2 * (11 // 2), as torch.istft.
# irrun follows OpenVINO, so the dims OpenVINO writes into IR files agree.
@pytest.mark.parametrize("center, data, length, out", [
    (False, [6, 16, 2], None, "[56]"), (False, [4, 6, 16, 2], None, "[4,56]"),
    (True, [6, 16, 2], None, "[46]"), (True, [4, 6, 16, 2], None, "[4,46]"),
    (False, [6, 16, 2], 48, "[48]"), (True, [4, 6, 16, 2], 60, "[4,60]")])
def test_istft_spec_shape_examples(center, data, length, out):
    specs = [S("f32", data), S("f32", [7]), V(11), V(3)] + ([V(length)] if length is not None else [])
    got = shape_of("ISTFT", 16, {"center": str(center).lower(), "normalized": "false"}, *specs)
    assert got == out


# ---------------------------------------------------------------- the formulas


def dft_sum(x, axes, inverse=False):
    """The spec's sum, computed directly (small sizes only)."""
    z = x[..., 0] + 1j * x[..., 1]
    for a in axes:
        n = z.shape[a]
        k = np.arange(n)
        w = np.exp((2j if inverse else -2j) * np.pi * np.outer(k, k) / n)
        z = np.moveaxis(np.tensordot(w, np.moveaxis(z, a, 0), axes=(1, 0)), 0, a)
        if inverse:
            z = z / n
    return np.stack([z.real, z.imag], axis=-1)


def test_dft_and_idft_follow_the_spec_sum_with_signal_size():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5, 2))
    (y,) = op("DFT", 7).run(NoAttrs(), x, np.array([2, -3]))
    np.testing.assert_allclose(y, dft_sum(x, [2, 0]), atol=1e-12)
    (y,) = op("IDFT", 7).run(NoAttrs(), x, np.array([1]))
    np.testing.assert_allclose(y, dft_sum(x, [1], inverse=True), atol=1e-12)
    # signal_size trims (axis 0 to 2) and pads with zeros (axis 2 to 7)
    (y,) = op("DFT", 7).run(NoAttrs(), x, np.array([0, 2]), np.array([2, 7]))
    d = np.zeros((2, 4, 7, 2))
    d[:, :, :5] = x[:2]
    np.testing.assert_allclose(y, dft_sum(d, [0, 2]), atol=1e-12)
    # IDFT undoes DFT; RDFT/IRDFT likewise
    (back,) = op("IDFT", 7).run(NoAttrs(), op("DFT", 7).run(NoAttrs(), x, np.array([0, 1, 2]))[0],
                                np.array([0, 1, 2]))
    np.testing.assert_allclose(back, x, atol=1e-12)
    r = rng.standard_normal((4, 6)).astype(np.float32)
    (f,) = op("RDFT", 9).run(NoAttrs(), r, np.array([0, 1]))
    assert f.shape == (4, 4, 2) and f.dtype == np.float32
    (g,) = op("IRDFT", 9).run(NoAttrs(), f, np.array([0, 1]))
    np.testing.assert_allclose(g, r, atol=1e-5)


def test_stft_istft_round_trip():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 64))
    window = np.hanning(16) + 0.1
    (spec,) = op("STFT", 15).run(attrs("STFT", 15, {"transpose_frames": "true"}), x, window,
                                 np.array(16), np.array(4))
    assert spec.shape == (2, 9, 13, 2)
    (back,) = op("ISTFT", 16).run(attrs("ISTFT", 16, {"center": "false", "normalized": "false"}), spec,
                                  window, np.array(16), np.array(4))
    assert back.shape == (2, 64)
    np.testing.assert_allclose(back, x, atol=1e-12)
    # a frame of the STFT is the rfft of the windowed slice
    (plain,) = op("STFT", 15).run(attrs("STFT", 15, {"transpose_frames": "false"}), x[0], window,
                                  np.array(16), np.array(4))
    f = np.fft.rfft(x[0, 8:24] * window)
    np.testing.assert_allclose(plain[2, :, 0] + 1j * plain[2, :, 1], f, atol=1e-12)


def test_errors():
    with pytest.raises(ShapeError, match="last dim of 2"):
        shape_of("DFT", 7, {}, S("f32", [3, 3]), V([0]))
    with pytest.raises(ShapeError, match=r"axes \(input 1\) value 1 is out of range \[-1, 0\]"):
        shape_of("IDFT", 7, {}, S("f32", [3, 2]), V([1]))
    with pytest.raises(ShapeError, match=r"name dim 0 twice"):
        shape_of("RDFT", 9, {}, S("f32", [3, 2]), V([0, -2]))
    with pytest.raises(ShapeError, match=r"signal_size \(input 2\) has 1 elements, axes has 2"):
        shape_of("IRDFT", 9, {}, S("f32", [3, 3, 2]), V([0, 1]), V([4]))
    with pytest.raises(ShapeError, match="must be a floating-point tensor"):
        shape_of("DFT", 7, {}, S("i32", [3, 2]), V([0]))
    with pytest.raises(ShapeError, match="window .* has 9 values, more than frame_size 8"):
        shape_of("STFT", 15, {"transpose_frames": "false"}, S("f32", [20]), S("f32", [9]), V(8), V(2))
    with pytest.raises(ShapeError, match="frame_step .* must be positive"):
        shape_of("STFT", 15, {"transpose_frames": "false"}, S("f32", [20]), S("f32", [4]), V(8), V(0))
    with pytest.raises(ShapeError, match="frame_size 30 is larger than the signal"):
        shape_of("STFT", 15, {"transpose_frames": "false"}, S("f32", [20]), S("f32", [4]), V(30), V(2))
    with pytest.raises(ShapeError, match="has 4 fft results, frame_size 8 needs 5"):
        shape_of("ISTFT", 16, {"center": "false", "normalized": "false"}, S("f32", [4, 6, 2]), S("f32", [8]),
                 V(8), V(2))
    assert shape_of("DFT", 7, {}, S("f32", [None, 3, 2]), S("i64", [1])) == "[?,?,2]"
    assert shape_of("RDFT", 9, {}, S("f32", None), V([0])) == "[...]"


# ---------------------------------------------------------------- OpenVINO


def run_both(model, feed, tmp):
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        xml = oracle.save(model, d)
        return oracle.ov_run(xml, feed), oracle.irrun_run(xml, feed)


# The CPU plugin computes in f32 and sums in another order: a relative tolerance on the
# scale of the largest output value.
def close(got, expected, scale_tol=2e-5):
    assert got.shape == expected.shape and got.dtype == expected.dtype
    scale = max(1.0, float(np.abs(expected).max(initial=0)))
    np.testing.assert_allclose(got, expected, rtol=0, atol=scale_tol * scale)


@pytest.mark.oracle
@settings(max_examples=8)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_fft_family_matches_openvino(tmp_path_factory, shape, data, seed):
    rank = len(shape)
    n_axes = data.draw(st.integers(1, rank))
    axes = data.draw(st.permutations(range(rank)))[:n_axes]
    axes = [a - rank if data.draw(st.booleans()) else a for a in axes]
    # signal sizes: trims and pads for DFT/IDFT; trims only for RDFT/IRDFT, and no -1 for
    # IRDFT: the CPU plugin refuses RDFT padding, returns uninitialised memory for IRDFT
    # padding and crashes on IRDFT's -1 (irrun zero-pads, as the spec says).
    sizes = [data.draw(st.sampled_from([-1, 1, 2, shape[a], shape[a] + 2])) for a in axes]
    trims = [data.draw(st.integers(1, shape[a])) for a in axes]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape + [2]).astype(np.float32)
    r = rng.standard_normal(shape).astype(np.float32)
    px = o9.parameter(shape + [2], ov.Type.f32, name="x")
    pr = o9.parameter(shape, ov.Type.f32, name="r")
    # IRDFT's halved last axis: its input holds n // 2 + 1 bins, so n <= 2 * (dim - 1)
    irdft_sizes = list(trims)
    last = axes[-1] % rank
    irdft_sizes[-1] = data.draw(st.integers(1, max(1, 2 * (shape[last] - 1))))
    outs = [o9.dft(px, c(axes)), o9.idft(px, c(axes)), o9.dft(px, c(axes), c(sizes)),
            o9.idft(px, c(axes), c(sizes)), o9.rdft(pr, c(axes)), o9.rdft(pr, c(axes), c(trims)),
            o9.irdft(px, c(axes), c(irdft_sizes))]
    expected, got = run_both(ov.Model([o9.result(o) for o in outs], [px, pr]), {"x": x, "r": r},
                             tmp_path_factory.getbasetemp())
    for g, e in zip(got, expected):
        close(g, e)


@pytest.mark.oracle
@settings(max_examples=8)
@given(batch=st.sampled_from([None, 1, 3]), frame=st.integers(2, 12), step=st.integers(1, 6), data=st.data(),
       transpose=st.booleans(), center=st.booleans(), normalized=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_stft_and_istft_match_openvino(tmp_path_factory, batch, frame, step, data, transpose, center,
                                       normalized, seed):
    rng = np.random.default_rng(seed)
    length = data.draw(st.integers(frame, 40))
    wlen = data.draw(st.integers(1, frame))
    lead = [] if batch is None else [batch]
    sig = rng.standard_normal(lead + [length]).astype(np.float32)
    win = (rng.random(wlen) + 0.5).astype(np.float32)
    frames = (length - frame) // step + 1
    spec = rng.standard_normal(lead + [frame // 2 + 1, frames, 2]).astype(np.float32)
    out_len = data.draw(st.none() | st.integers(0, 50))
    ps = o15.parameter(lead + [length], ov.Type.f32, name="s")
    pw = o15.parameter([wlen], ov.Type.f32, name="w")
    pd = o16.parameter(list(spec.shape), ov.Type.f32, name="d")
    # ISTFT windows must overlap everywhere for the CPU plugin's division to be defined;
    # the full window (no zero padding) with step <= its length keeps every sum positive
    pf = o16.parameter([frame], ov.Type.f32, name="f")
    full = (rng.random(frame) + 0.5).astype(np.float32)
    step_i = min(step, frame)
    extra = [] if out_len is None else [c(out_len)]
    outs = [o15.stft(ps, pw, c(frame), c(step), transpose),
            o16.istft(pd, pf, c(frame), c(step_i), center, normalized, *extra)]
    expected, got = run_both(ov.Model([o16.result(o) for o in outs], [ps, pw, pd, pf]),
                             {"s": sig, "w": win, "d": spec, "f": full}, tmp_path_factory.getbasetemp())
    for g, e in zip(got, expected):
        close(g, e, 1e-4)
