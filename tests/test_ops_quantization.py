"""FakeQuantize-1: the spec's example and formula, rules, and differential tests against
OpenVINO's CPU plugin."""
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from irrun.errors import ShapeError
from irrun.ir.shapes import format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1  # noqa: E402
from test_ops_elementwise import S, infer, model, param, run_op  # noqa: E402


def test_spec_example_shapes():
    lim = [1, 64, 1, 1]
    (y,) = infer("FakeQuantize", {"levels": "2"}, S("f32", [1, 64, 56, 56]),
                 *[S("f32", lim)] * 2, S("f32", [1, 1, 1, 1]), S("f32", [1, 1, 1, 1]))
    assert format_shape(y.shape) == "[1,64,56,56]"
    (y,) = infer("FakeQuantize", {"levels": "256"}, S("f32", [None, 3, 4]), *[S("f32", [])] * 4)
    assert format_shape(y.shape) == "[?,3,4]"
    # Limits broadcast into X's shape; OpenVINO lets them grow it.
    (y,) = infer("FakeQuantize", {"levels": "256"}, S("f32", [3, 1]), S("f32", [4]), *[S("f32", [])] * 3)
    assert format_shape(y.shape) == "[3,4]"


def test_spec_formula_and_branches():
    x = np.array([-2.0, -1.0, -0.99, -0.34, 0.0, 0.2, 0.5, 0.99, 1.0, 1.5], np.float32)
    il, ih, ol, oh = (np.float32(v) for v in (-1, 1, 0, 3))
    (y,) = run_op("FakeQuantize", {"levels": "4"}, x, il, ih, ol, oh)
    ref = []
    for v in x.tolist():
        if v <= -1:
            ref.append(0.0)
        elif v > 1:
            ref.append(3.0)
        else:
            ref.append(round((v + 1) / 2 * 3) / 3 * 3)
    np.testing.assert_allclose(y, ref, rtol=1e-6)
    assert y.dtype == np.float32
    # Half to even (std::nearbyint): (0 + 1) / 2 * 2 = 1.0 exactly, levels 3 -> 1; 0.5 -> 1.5 -> 2
    (y,) = run_op("FakeQuantize", {"levels": "3"}, np.array([0.0, -0.5, 0.5], np.float32),
                  il, ih, np.float32(0), np.float32(2))
    assert y.tolist() == [1.0, 0.0, 2.0]     # -0.5 -> 0.25*2 = 0.5 -> 0 (to even)
    # Binarization: input_low == input_high
    (y,) = run_op("FakeQuantize", {"levels": "2"}, np.array([-1, 0, 0.1], np.float32),
                  np.float32(0), np.float32(0), np.float32(-1), np.float32(1))
    assert y.tolist() == [-1, -1, 1]


def _spec_selection(x, il, ih, ol, oh, levels):
    """The spec's formula and selection as written, each step in the input's precision."""
    lm1 = x.dtype.type(levels - 1)
    with np.errstate(all="ignore"):
        q = np.rint((x - il) / (ih - il) * lm1) / lm1 * (oh - ol) + ol
        return np.where(x <= np.minimum(il, ih), ol, np.where(x > np.maximum(il, ih), oh, q))


@settings(max_examples=300)
@given(st.data())
def test_clipping_first_gives_the_spec_selection_bit_for_bit(data):
    """fake_quantize clips x to the limits first where that is exact (checked on the limits):
    every output, zeros' signs and NaN included, is the spec's selection's, for limits drawn
    per tensor or per channel, inverted, equal, or with output limits that do not round-trip."""
    from irrun.ops.quantization import fake_quantize

    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    channels = data.draw(st.integers(1, 4))
    lim_shape = data.draw(st.sampled_from([(), (1, 1, 1), (1, channels, 1)]))
    small = st.floats(-8, 8, width=32) | st.sampled_from([0.0, -0.0, 1e-8, -1e-8, 3e4])
    limits = [np.array(data.draw(st.lists(small, min_size=channels, max_size=channels))[
        :max(1, int(np.prod(lim_shape)))], dtype).reshape(lim_shape) for _ in range(4)]
    il, ih, ol, oh = limits
    if data.draw(st.booleans(), label="ordered"):
        il, ih = np.minimum(il, ih), np.maximum(il, ih)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = (rng.standard_normal((2, channels, 5)) * 6).astype(dtype)
    # Values exactly at the limits, and NaN.
    x[0, :, 0] = np.broadcast_to(il, (1, channels, 1))[0, :, 0]
    x[0, :, 1] = np.broadcast_to(ih, (1, channels, 1))[0, :, 0]
    x[1, 0, 0] = np.nan
    levels = data.draw(st.sampled_from([2, 3, 16, 255, 256]))
    got = fake_quantize(x, il, ih, ol, oh, levels)
    want = _spec_selection(x, il, ih, ol, oh, levels)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@settings(max_examples=300)
@given(st.data())
def test_per_tensor_loop_gives_the_spec_selection_bit_for_bit(data):
    """Single-value limits on f32/f64 run the compiled loop (ops/fake_quantize_loop.py):
    every output is the spec's selection's, zeros' signs, NaN and infinities included, for
    limits inverted, equal, or not round-tripping, of X's rank or larger; limits that are
    not finite fall back to the NumPy path with the same result."""
    from irrun.ops import fake_quantize_loop

    calls = []
    real = fake_quantize_loop._by_channel
    fake_quantize_loop._by_channel = lambda *a: calls.append(1) or real(*a)
    try:
        dtype = data.draw(st.sampled_from([np.float32, np.float64]))
        rank = data.draw(st.integers(0, 3))
        lim_rank = data.draw(st.integers(0, 4))
        small = st.floats(-8, 8, width=32) | st.sampled_from([0.0, -0.0, 1e-8, 3e4])
        values = [data.draw(small) for _ in range(4)]
        if data.draw(st.booleans(), label="equal input limits"):
            values[1] = values[0]
        if data.draw(st.integers(0, 9)) == 0:
            values[data.draw(st.integers(0, 3))] = data.draw(st.sampled_from([np.inf, -np.inf, np.nan]))
        il, ih, ol, oh = (np.array(v, dtype).reshape((1,) * lim_rank) for v in values)
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        x = (rng.standard_normal((3, 4, 5)[:rank]) * 6).astype(dtype)
        flat = x.reshape(-1)
        for i, v in enumerate([values[0], values[1], 0.0, -0.0, np.nan, np.inf, -np.inf][:flat.size]):
            flat[i] = v
        levels = data.draw(st.sampled_from([2, 3, 16, 255, 256]))
        (got,) = run_op("FakeQuantize", {"levels": str(levels)}, x, il, ih, ol, oh)
        want = _spec_selection(x, il, ih, ol, oh, levels)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))
        assert bool(calls) == bool(np.isfinite(values).all())
    finally:
        fake_quantize_loop._by_channel = real


@settings(max_examples=300)
@given(st.data())
def test_per_channel_loop_gives_the_spec_selection_bit_for_bit(data):
    """Limits that vary along one axis of X (any axis, each limit per channel or a single
    value, of X's rank or larger) run the compiled loop too: every output is the spec's
    selection's, zeros' signs, NaN and infinities in X included, for channels whose limits
    are inverted, equal or do not round-trip; a limit that is not finite anywhere sends the
    layer to the NumPy path, with the same result. Limits varying along two axes take the
    NumPy path."""
    from irrun.ops import fake_quantize_loop

    calls = []
    real = fake_quantize_loop._by_channel
    fake_quantize_loop._by_channel = lambda *a: calls.append(1) or real(*a)
    try:
        dtype = data.draw(st.sampled_from([np.float32, np.float64]))
        shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
        axis = data.draw(st.integers(0, len(shape) - 1))
        extra = data.draw(st.integers(0, 1), label="extra leading dims of the limits")
        channel = tuple(d if i == axis else 1 for i, d in enumerate(shape))
        second = data.draw(st.booleans(), label="a second axis") and \
            any(d > 1 for i, d in enumerate(shape) if i != axis)
        small = st.floats(-8, 8, width=32) | st.sampled_from([0.0, -0.0, 1e-8, 3e4])
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        limits = []
        for k in range(4):
            lshape = channel if data.draw(st.booleans(), label=f"limit {k} per channel") else ()
            if k == 3 and second:
                lshape = shape
            n = int(np.prod(lshape))
            v = np.array(data.draw(st.lists(small, min_size=n, max_size=n)), dtype)
            limits.append(v.reshape((1,) * extra + lshape if lshape else ()))
        if data.draw(st.booleans(), label="equal input limits"):
            limits[1] = limits[0].copy()
        il, ih, ol, oh = limits
        if data.draw(st.integers(0, 9)) == 0:
            pick = limits[data.draw(st.integers(0, 3))]
            pick.flat[0] = data.draw(st.sampled_from([np.inf, -np.inf, np.nan]))
        x = (rng.standard_normal(shape) * 6).astype(dtype)
        flat = x.reshape(-1)
        odd = [il.flat[0], ih.flat[0], 0.0, -0.0, np.nan, np.inf, -np.inf]
        flat[:min(flat.size, 7)] = odd[:flat.size]
        levels = data.draw(st.sampled_from([2, 3, 16, 255, 256]))
        (got,) = run_op("FakeQuantize", {"levels": str(levels)}, x, il, ih, ol, oh)
        want = _spec_selection(x, il, ih, ol, oh, levels)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))
        finite = all(np.isfinite(v).all() for v in limits)
        rank = max(v.ndim for v in limits + [x])
        varying = {i for v in limits for i, d in enumerate(v.shape, rank - v.ndim) if d > 1}
        assert bool(calls) == (finite and len(varying) <= 1)
    finally:
        fake_quantize_loop._by_channel = real


def test_known_limits_are_prepared_once_with_the_kernels_bits():
    """Limits the plan knows (Consts) are tabled once (a prepared kernel, irrun.opkit.prepared):
    the layer computes what its kernel does, bit for bit, per tensor and per channel."""
    from irrun.run.executor import Plan
    from irrun.tools.builder import GraphBuilder

    rng = np.random.default_rng(3)
    g = GraphBuilder("fq")
    x = g.parameter("x", "f32", [2, 4, 3, 3])
    c = lambda a: g.constant(np.asarray(a, np.float32))
    lo = -rng.uniform(0.5, 2, (1, 4, 1, 1))
    per_channel = g.op("FakeQuantize", [x, c(lo), c(-lo), c(lo * 2), c(-lo * 2)], levels=255,
                       name="per_channel")
    per_tensor = g.op("FakeQuantize", [per_channel, c(0), c(3), c(0), c(3)], levels=256,
                      name="per_tensor")
    g.result(per_tensor, name="y")
    m = g.model()
    plan = Plan(m.program, m._targets(None)[0])
    assert {s.node.layer.name for s in plan.steps if s.bare is not None} >= \
        {"per_channel", "per_tensor"}
    for _ in range(2):
        feed = {"x": (rng.standard_normal((2, 4, 3, 3)) * 3).astype(np.float32)}
        got = m.infer(feed)["y"]
        want = m.infer(feed, listener=lambda node, outputs, seconds: None)["y"]
        assert got.tobytes() == want.tobytes()


def test_per_channel_limits_and_errors():
    x = np.array([[[0, 3, 5], [4, 6, 10]]], np.float32)
    il = np.zeros((1, 2, 1), np.float32)
    ih = np.array([[[5.0], [10.0]]], np.float32)
    (y,) = run_op("FakeQuantize", {"levels": "2"}, x, il, ih, il, ih)
    assert y.tolist() == [[[0, 5, 5], [0, 10, 10]]]
    with pytest.raises(ShapeError, match="levels >= 2, got levels=1"):
        infer("FakeQuantize", {"levels": "1"}, *[S("f32", [2])] * 5)
    with pytest.raises(ShapeError, match=r"output_high \(input 4\) must have X's element type f32, got f16"):
        infer("FakeQuantize", {"levels": "3"}, *[S("f32", [2])] * 4, S("f16", [2]))
    with pytest.raises(ShapeError, match="must be of a floating-point type, got i32"):
        infer("FakeQuantize", {"levels": "3"}, *[S("i32", [2])] * 5)
    with pytest.raises(ShapeError, match="shapes do not broadcast"):
        infer("FakeQuantize", {"levels": "3"}, S("f32", [2, 3]), S("f32", [2]), *[S("f32", [])] * 3)
    with pytest.raises(ShapeError, match="auto_broadcast='none' needs equal shapes"):
        infer("FakeQuantize", {"levels": "3", "auto_broadcast": "none"}, S("f32", [2, 3]),
              *[S("f32", [])] * 4)


@pytest.mark.oracle
@settings(max_examples=10)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), seed=st.integers(0, 2**32 - 1),
       levels=st.sampled_from([2, 3, 16, 255, 256]), data=st.data())
def test_fake_quantize_matches_openvino(tmp_path_factory, shape, seed, levels, data):
    rng = np.random.default_rng(seed)
    rank = len(shape)

    def limit_shape():
        kind = data.draw(st.sampled_from(["scalar", "channel", "full", "ones"]))
        if kind == "scalar":
            return []
        if kind == "ones":
            return [1] * rank
        if kind == "full":
            return list(shape)
        return [1] + list(shape[1:2]) + [1] * max(rank - 2, 0) if rank > 1 else list(shape)

    s_in, s_out = limit_shape(), limit_shape()
    il = rng.uniform(-3, 0, s_in).astype(np.float32)
    ih = (il + rng.uniform(0.5, 4, s_in)).astype(np.float32)
    ol = rng.uniform(-2, 1, s_out).astype(np.float32)
    oh = (ol + rng.uniform(-3, 3, s_out)).astype(np.float32)   # may be inverted
    x = rng.uniform(-5, 5, shape).astype(np.float32)
    # The CPU plugin folds the formula into scales and shifts: keep values a little away from
    # the rounding boundaries between levels, where one ulp may pick the neighbour level.
    t = (x.astype(np.float64) - il) / (ih.astype(np.float64) - il) * (levels - 1)
    near = np.abs(t - np.floor(t) - 0.5) < 1e-3
    x = np.where(near, np.broadcast_to(il, x.shape), x).astype(np.float32)
    px = param("x", shape, "f32")
    out = o1.fake_quantize(px, *(o1.constant(a) for a in (il, ih, ol, oh)), levels)
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(model([out], [px]), d)
        expected = oracle.ov_run(xml, {"x": x})
        got = oracle.irrun_run(xml, {"x": x})
    oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- FakeConvert-13

import ml_dtypes  # noqa: E402
import openvino.opset13 as o13  # noqa: E402


def test_fake_convert_spec_shapes_and_values():
    # The page's example: data [1, 64, 56, 56], scale and shift [1, 64, 1, 1]
    (y,) = infer("FakeConvert", {"destination_type": "f8e4m3"}, S("f32", [1, 64, 56, 56]),
                 S("f32", [1, 64, 1, 1]), S("f32", [1, 64, 1, 1]), opset=13)
    assert format_shape(y.shape) == "[1,64,56,56]"
    x = np.array([0.3, 1.06, 500.0, -1e6, 3.0], np.float32)
    (y,) = run_op("FakeConvert", {"destination_type": "f8e4m3"}, x, np.float32(1), opset=13)
    # f8e4m3 has 3 mantissa bits (0.3 -> 0.3125, 1.06 -> 1.0) and saturates at 448
    assert y.tolist() == [0.3125, 1.0, 448.0, -448.0, 3.0]
    (y,) = run_op("FakeConvert", {"destination_type": "f8e5m2"}, x, np.float32(2), np.float32(1), opset=13)
    ref = ((np.clip(x * 2 - 1, -57344, 57344)).astype(np.float16).astype(ml_dtypes.float8_e5m2)
           .astype(np.float32) + 1) / 2
    np.testing.assert_array_equal(y, ref)
    with pytest.raises(ShapeError, match="must be f32, f16 or bf16"):
        infer("FakeConvert", {}, S("f64", [2]), S("f64", []), opset=13)
    with pytest.raises(ShapeError, match="must match scale"):
        infer("FakeConvert", {}, S("f32", [2, 3]), S("f32", [1, 3]), S("f32", [3]), opset=13)


@pytest.mark.oracle
@settings(max_examples=8)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), seed=st.integers(0, 2**32 - 1),
       dest=st.sampled_from(["f8e4m3", "f8e5m2"]), per_channel=st.booleans(), with_shift=st.booleans())
def test_fake_convert_matches_openvino(tmp_path_factory, shape, seed, dest, per_channel, with_shift):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-6, 6, shape))).astype(np.float32)
    s_shape = [1] * len(shape)
    if per_channel and len(shape) > 1:
        s_shape[1] = shape[1]
    scale = rng.uniform(0.5, 4, s_shape).astype(np.float32)
    shift = rng.uniform(-1, 1, s_shape).astype(np.float32)
    px = param("x", shape, "f32")
    args = [px, o13.constant(scale)] + ([o13.constant(shift)] if with_shift else [])
    out = o13.fake_convert(*args, destination_type=dest)
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(model([out], [px]), d)
        expected = oracle.ov_run(xml, {"x": x})
        got = oracle.irrun_run(xml, {"x": x})
    oracle.assert_same(got[0], expected[0], rtol=1e-6, atol=0)


# ---------------------------------------------------------------- NNCF-style weight decompression


@pytest.mark.oracle
@settings(max_examples=6)
@given(seed=st.integers(0, 2**31), signed=st.booleans(), zero_point=st.booleans())
def test_int8_weight_decompression_matches_openvino(tmp_path_factory, seed, signed, zero_point):
    """Weights as NNCF writes them: an i8/u8 Const -> Convert f32 -> Subtract (zero point, itself
    a u8/i8 Const -> Convert) -> Multiply (per-channel scale) -> MatMul with the activations."""
    import openvino.opset8 as o8
    rng = np.random.default_rng(seed)
    dt = np.int8 if signed else np.uint8
    lo, hi = (-128, 128) if signed else (0, 256)
    w = rng.integers(lo, hi, (6, 5)).astype(dt)
    scale = rng.uniform(0.01, 0.1, (6, 1)).astype(np.float32)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    deq = o8.convert(o8.constant(w), "f32")
    if zero_point:
        zp = rng.integers(lo, hi, (6, 1)).astype(dt)
        deq = o8.subtract(deq, o8.convert(o8.constant(zp), "f32"))
    deq = o8.multiply(deq, o8.constant(scale))
    px = param("x", [3, 5], "f32")
    out = o8.matmul(px, deq, False, True)
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(model([out], [px]), d)
        expected = oracle.ov_run(xml, {"x": x})
        got = oracle.irrun_run(xml, {"x": x})
    oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-5)
