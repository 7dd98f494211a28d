"""Activations and softmax: differential tests against OpenVINO's CPU plugin, and rules."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from irrun.errors import ShapeError
from irrun.ir.shapes import TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1  # noqa: E402
import openvino.opset2 as o2  # noqa: E402
import openvino.opset4 as o4  # noqa: E402
import openvino.opset5 as o5  # noqa: E402
import openvino.opset7 as o7  # noqa: E402
import openvino.opset8 as o8  # noqa: E402
from test_ops_elementwise import DTYPES, S, infer, model, param, run_op, values  # noqa: E402

FLOATS = ["f32", "f16", "f64"]
# The CPU plugin's transcendentals are a few ulp off; f64 runs as f32 there.
RTOL = {"f32": 5e-6, "f16": 2e-3, "f64": 5e-6}


def compare(outs, params, feed, etype, tmp_path_factory, scale=1.0):
    import tempfile
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(model(outs, params), d)
        expected = oracle.ov_run(xml, feed)
        got = oracle.irrun_run(xml, feed)
    for g, e in zip(got, expected):
        oracle.assert_same(g, e, rtol=RTOL.get(etype, 0), atol=RTOL.get(etype, 0) * scale)


def swish_without_beta(x):
    """opset4.swish() always adds an f32 beta Const; the one-input form needs the factory."""
    from openvino.utils.node_factory import NodeFactory
    return NodeFactory("opset4").create("Swish", [x.output(0)], {})


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 5), max_size=4), etype=st.sampled_from(FLOATS),
       seed=st.integers(0, 2**32 - 1), lo=st.floats(-4, 1, width=16), width=st.floats(0, 5, width=16),
       mode=st.sampled_from(["erf", "tanh"]))
def test_activations_match_openvino(tmp_path_factory, shape, etype, seed, lo, width, mode):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4).astype(DTYPES[etype])
    beta = np.array(rng.uniform(0.25, 2), DTYPES[etype])
    px, pb = param("x", shape, etype), param("beta", [], etype)
    hi = float(np.float16(lo + width))
    outs = [o8.relu(px), o8.sigmoid(px), o8.tanh(px), o8.clamp(px, float(lo), hi),
            o2.gelu(px), o7.gelu(px, mode), swish_without_beta(px), o4.swish(px, pb), o4.hswish(px)]
    compare(outs, [px, pb], {"x": x, "beta": beta}, etype, tmp_path_factory, scale=4)


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 5), max_size=4), etype=st.sampled_from(["i32", "i64", "i8", "u8"]),
       seed=st.integers(0, 2**32 - 1), lo=st.integers(-80, 80), width=st.integers(0, 120))
def test_integer_relu_and_clamp_match_openvino(tmp_path_factory, shape, etype, seed, lo, width):
    """Integer Clamp: ceil(min) and floor(max) as the spec says. Bounds on a 1/4 grid: the
    CPU plugin holds them as f32, so a bound like 1e-141 would become 0 there."""
    lo, width = lo / 4, width / 4
    rng = np.random.default_rng(seed)
    x = values(rng, shape, etype, 0 if etype == "u8" else -50, 50)
    px = param("x", shape, etype)
    if etype == "u8":
        lo = abs(lo)
    compare([o8.relu(px), o8.clamp(px, lo, lo + width)], [px], {"x": x}, etype, tmp_path_factory)


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), etype=st.sampled_from(FLOATS),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_softmax_family_matches_openvino(tmp_path_factory, shape, etype, seed, data):
    rng = np.random.default_rng(seed)
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1), label="axis")
    # Large offsets check the max-subtraction: exp(300) alone would overflow.
    x = (rng.standard_normal(shape) * 5 + data.draw(st.sampled_from([0, 60, -60]), label="offset"))
    x = x.astype(DTYPES[etype])
    px = param("x", shape, etype)
    outs = [o1.softmax(px, axis % rank), o8.softmax(px, axis), o5.log_softmax(px, axis)]
    compare(outs, [px], {"x": x}, etype, tmp_path_factory, scale=4)


# ------------------------------------------------------------------ rules

def test_softmax_is_stable_for_huge_inputs():
    x = np.array([[1000.0, 1000.0, -1000.0]], np.float32)
    (y,) = run_op("SoftMax", {"axis": "1"}, x)
    np.testing.assert_allclose(y, [[0.5, 0.5, 0.0]])
    (y,) = run_op("LogSoftmax", {"axis": "-1"}, x, opset=5)
    np.testing.assert_allclose(y, [[-np.log(2), -np.log(2), -2000 - np.log(2)]], rtol=1e-6)


def test_softmax_axis_rules():
    with pytest.raises(ShapeError, match=r"SoftMax-1 axis -1 is out of range \[0, 1\]"):
        infer("SoftMax", {"axis": "-1"}, S("f32", [2, 3]))
    (spec,) = infer("SoftMax", {"axis": "-1"}, S("f32", [2, None]), opset=8)
    assert format_shape(spec.shape) == "[2,?]"
    with pytest.raises(ShapeError, match=r"axis 2 is out of range \[-2, 1\]"):
        infer("LogSoftmax", {"axis": "2"}, S("f32", [2, 3]), opset=5)


def test_clamp_rules():
    x = np.array([-5, -2, 0, 2, 3, 7], np.int32)
    (y,) = run_op("Clamp", {"min": "-2.5", "max": "2.7"}, x)
    assert y.tolist() == [-2, -2, 0, 2, 2, 2]          # ceil(-2.5) = -2, floor(2.7) = 2
    (y,) = run_op("Clamp", {"min": "-1000", "max": "1000"}, np.array([0, 255], np.uint8))
    assert y.tolist() == [0, 255]                       # bounds saturate at the type's range
    (y,) = run_op("Clamp", {"min": "0.1", "max": "0.2"}, np.array([0.0, np.nan, 1.0], np.float16))
    assert y.dtype == np.float16 and y[0] == np.float16(0.1) and np.isnan(y[1]) and y[2] == np.float16(0.2)
    with pytest.raises(ShapeError, match="min <= max, got min=3.0 and max=1.0"):
        infer("Clamp", {"min": "3", "max": "1"}, S("f32", [2]))


def test_gelu_and_swish_reject_integers_and_check_beta():
    with pytest.raises(ShapeError, match="Gelu needs a floating-point input"):
        infer("Gelu", {}, S("i32", [2]), opset=7)
    with pytest.raises(ShapeError, match="beta .* must have the input's type f32, got f16"):
        infer("Swish", {}, S("f32", [2]), S("f16", []), opset=4)
    with pytest.raises(ShapeError, match="beta .* must be a scalar"):
        infer("Swish", {}, S("f32", [2]), S("f32", [3]), opset=4)


def test_gelu_modes_agree_with_their_formulas():
    import math
    x = np.linspace(-6, 6, 49)
    (erf_mode,) = run_op("Gelu", {"approximation_mode": "ERF"}, x, opset=7)
    (tanh_mode,) = run_op("Gelu", {"approximation_mode": "tanh"}, x, opset=7)
    ref = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x]
    np.testing.assert_allclose(erf_mode, ref, rtol=1e-14, atol=1e-300)
    z = lambda v: math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)  # noqa: E731
    # The formula as written cancels in 1 + tanh(z) for x << 0 (irrun uses sigmoid(2z)):
    # compare with it where it is accurate, and with the equal e/(1+e), e = exp(2z), far left.
    ref_t = [0.5 * v * (1 + math.tanh(z(v))) for v in x]
    np.testing.assert_allclose(tanh_mode[x > -4], np.array(ref_t)[x > -4], rtol=1e-10)
    far = x < -5
    np.testing.assert_allclose(tanh_mode[far], [v * math.exp(2 * z(v)) / (1 + math.exp(2 * z(v))) for v in x[far]],
                               rtol=1e-13)
    assert np.max(np.abs(erf_mode - tanh_mode)) > 1e-5   # the two modes really differ


def test_bf16_and_integer_inputs_keep_their_type():
    x = np.array([-2.5, 0.0, 1.75], ml_dtypes.bfloat16)
    for t, opset in [("ReLU", 1), ("Sigmoid", 1), ("Tanh", 1), ("HSwish", 4), ("Swish", 4), ("Gelu", 7)]:
        (y,) = run_op(t, {}, x, opset=opset)
        assert y.dtype == x.dtype
    (y,) = run_op("Sigmoid", {}, np.array([-3, 0, 1, 3], np.int32))
    assert y.dtype == np.int32 and y.tolist() == [0, 0, 1, 1]    # round(0.5) is 0: to even
    (y,) = run_op("ReLU", {}, np.array([-2**62 - 1, 2**62 + 1], np.int64))
    assert y.tolist() == [0, 2**62 + 1]                        # exact, no trip through float


def test_activations_keep_dynamic_shapes():
    (spec,) = infer("Sigmoid", {}, TensorSpec.make("f32", [None, 3]))
    assert format_shape(spec.shape) == "[?,3]" and spec.etype.name == "f32"
    (spec,) = infer("Swish", {}, TensorSpec.make("f16", None), opset=4)
    assert spec.shape is None


# ------------------------------------------------------------------ Elu, Selu, HardSigmoid, HSigmoid,
# Mish, PRelu, SoftPlus, SoftSign

import openvino.opset9 as o9  # noqa: E402


@pytest.mark.parametrize("type_, opset, attrs, shapes, out", [
    # The spec pages' examples, shapes as written there.
    ("Elu", 1, {"alpha": "1.0"}, [[1, 128]], [1, 128]),
    ("HSigmoid", 5, {}, [[256]], [256]),
    ("HardSigmoid", 1, {}, [[256, 56], [], []], [256, 56]),
    ("Mish", 4, {}, [[256, 56]], [256, 56]),
    ("Selu", 1, {}, [[256, 56], [1], [1]], [256, 56]),
    ("SoftPlus", 4, {}, [[256, 56]], [256, 56]),
    ("SoftSign", 9, {}, [[256, 56]], [256, 56]),
    ("PRelu", 1, {}, [[128], [1]], [128]),
    ("PRelu", 1, {}, [[20, 128], [128]], [20, 128]),
    ("PRelu", 1, {}, [[1, 20, 128, 128], [20]], [1, 20, 128, 128]),
    ("PRelu", 1, {}, [[1, 20, 128, 128], [128]], [1, 20, 128, 128]),
    # dynamic dims pass through
    ("Mish", 4, {}, [[None, 3]], [None, 3]),
    ("PRelu", 1, {}, [[None, 4, None], [4]], [None, 4, None]),
])
def test_new_activation_spec_shapes(type_, opset, attrs, shapes, out):
    (spec,) = infer(type_, attrs, *[S("f32", s) for s in shapes], opset=opset)
    assert format_shape(spec.shape) == format_shape(S("f32", out).shape) and spec.etype.name == "f32"


def test_new_activation_formulas():
    x = np.array([-30.0, -2.0, -0.5, 0.0, 0.5, 2.0, 30.0])
    (y,) = run_op("Elu", {"alpha": "0.5"}, x)
    np.testing.assert_allclose(y, np.where(x > 0, x, 0.5 * np.expm1(x)), rtol=1e-15)
    (y,) = run_op("Selu", {}, x, np.array([1.67]), np.array([1.05]))
    np.testing.assert_allclose(y, 1.05 * np.where(x > 0, x, 1.67 * np.expm1(x)), rtol=1e-15)
    (y,) = run_op("HardSigmoid", {}, x, np.array(0.2), np.array(0.5))
    np.testing.assert_allclose(y, np.clip(0.2 * x + 0.5, 0, 1), rtol=1e-15)
    (y,) = run_op("HSigmoid", {}, x, opset=5)
    np.testing.assert_allclose(y, np.clip(x + 3, 0, 6) / 6, rtol=1e-15)
    (y,) = run_op("SoftPlus", {}, x, opset=4)
    np.testing.assert_allclose(y, np.log1p(np.exp(x)), rtol=1e-15)
    (y,) = run_op("Mish", {}, x, opset=4)
    np.testing.assert_allclose(y, x * np.tanh(np.log1p(np.exp(x))), rtol=1e-15)
    (y,) = run_op("SoftSign", {}, x, opset=9)
    np.testing.assert_allclose(y, x / (1 + np.abs(x)), rtol=1e-15)
    (y,) = run_op("SoftPlus", {}, np.array([100.0, -200.0], np.float32), opset=4)
    assert y.tolist() == [100.0, 0.0]            # no overflow of e^x


def test_prelu_channel_and_numpy_slopes():
    x = -np.ones((1, 2, 3, 2), np.float32)
    (y,) = run_op("PRelu", {}, x, np.array([2, 3], np.float32))            # per channel (dim 1)
    assert y[0, :, 0, 0].tolist() == [-2, -3]
    (y,) = run_op("PRelu", {}, -np.ones((2, 3, 3), np.float32), np.array([1, 2, 3], np.float32))
    assert y[0, 0].tolist() == [-1, -1, -1]                                 # dim 1 wins over the last
    (y,) = run_op("PRelu", {}, -np.ones((2, 2, 3), np.float32), np.array([1, 2, 3], np.float32))
    assert y[0, 0].tolist() == [-1, -2, -3]                                 # numpy: the last dim
    (y,) = run_op("PRelu", {}, np.array([-3, 4], np.int8), np.array([50], np.int8))
    assert y.dtype == np.int8 and y.tolist() == [106, 4]                    # -150 wraps as in C++


def test_new_activation_type_errors():
    for type_, opset in [("Mish", 4), ("SoftPlus", 4), ("SoftSign", 9)]:
        with pytest.raises(ShapeError, match=f"{type_} needs a floating-point input"):
            infer(type_, {}, S("i32", [2]), opset=opset)
    with pytest.raises(ShapeError, match="Selu needs a floating-point input"):
        infer("Selu", {}, S("i32", [2]), S("i32", [1]), S("i32", [1]))
    with pytest.raises(ShapeError, match=r"HardSigmoid alpha \(input 1\) must hold one element"):
        infer("HardSigmoid", {}, S("f32", [2]), S("f32", [2]), S("f32", []))
    with pytest.raises(ShapeError, match=r"Selu lambda \(input 2\) must have the data's element type f32, got f16"):
        infer("Selu", {}, S("f32", [2]), S("f32", [1]), S("f16", [1]))
    with pytest.raises(ShapeError, match="Elu does not accept element type boolean"):
        infer("Elu", {"alpha": "1"}, S("boolean", [2]))
    with pytest.raises(ShapeError, match="shapes do not broadcast"):
        infer("PRelu", {}, S("f32", [2, 3, 4]), S("f32", [5]))
    with pytest.raises(ShapeError, match="rank 1 or more"):
        infer("PRelu", {}, S("f32", [2, 3]), S("f32", []))
    with pytest.raises(ShapeError, match="higher rank than the data"):
        infer("PRelu", {}, S("f32", [3]), S("f32", [2, 3]))


def test_zero_scalars_are_used_as_given():
    # OpenVINO 2026.4's CPU plugin replaces a zero alpha/beta/lambda Const by ONNX's default
    # (HardSigmoid(0.754; 0, 0) gives 0.6508 there); the spec and the reference use the value.
    x = np.array([0.754, -1.0], np.float32)
    assert run_op("HardSigmoid", {}, x, np.float32(0), np.float32(0))[0].tolist() == [0, 0]
    assert run_op("Selu", {}, x, np.zeros(1, np.float32), np.zeros(1, np.float32))[0].tolist() == [0, 0]


def test_new_activations_on_integers_round_like_the_cpu_plugin():
    # Seen on OpenVINO 2026.4's CPU plugin: f64 results rounded half to even.
    x = np.array([-7, -3, -2, -1, 0, 1, 2, 5], np.int32)
    assert run_op("Elu", {"alpha": "3"}, x)[0].tolist() == [-3, -3, -3, -2, 0, 1, 2, 5]
    assert run_op("HSigmoid", {}, x, opset=5)[0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert run_op("HardSigmoid", {}, x, np.int32(1), np.int32(1))[0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]


@pytest.mark.oracle
@settings(max_examples=12)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), etype=st.sampled_from(["f32", "f64"]),
       seed=st.integers(0, 2**32 - 1), alpha=st.floats(0.125, 3, width=16),
       beta=st.floats(-1, 1, width=16).filter(lambda b: abs(b) >= 1 / 16),
       slope_kind=st.sampled_from(["channel", "last", "one"]))
def test_new_activations_match_openvino(tmp_path_factory, shape, etype, seed, alpha, beta, slope_kind):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 6).astype(DTYPES[etype])
    ch = shape[1] if len(shape) > 1 else shape[0]
    n = {"channel": ch, "last": shape[-1], "one": 1}[slope_kind]
    slope = rng.uniform(-1, 2, [n]).astype(DTYPES[etype])
    # The CPU plugin needs Consts for HardSigmoid's and Selu's scalars, and takes a zero
    # there for "unset" (it then uses ONNX's defaults, e.g. alpha 0.2): keep them non-zero.
    px, ps = param("x", shape, etype), param("s", [n], etype)
    a0, b0 = (o8.constant(np.array(v, DTYPES[etype])) for v in (alpha, beta))
    a1, b1 = (o8.constant(np.array([v], DTYPES[etype])) for v in (alpha, abs(beta)))
    outs = [o1.elu(px, float(alpha)), o5.hsigmoid(px), o1.hard_sigmoid(px, a0, b0), o4.mish(px),
            o1.prelu(px, ps), o1.selu(px, a1, b1), o4.softplus(px), o9.softsign(px)]
    feed = {"x": x, "s": slope}
    compare(outs, [px, ps], feed, etype, tmp_path_factory, scale=6)


@pytest.mark.oracle
@settings(max_examples=10)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), seed=st.integers(0, 2**32 - 1),
       alpha=st.sampled_from([0.5, 1.0, 2.2, 3.0]))
def test_new_activations_on_integers_match_openvino(tmp_path_factory, shape, seed, alpha):
    rng = np.random.default_rng(seed)
    x = values(rng, shape, "i32", -8, 8)
    ch = shape[1] if len(shape) > 1 else shape[0]
    px = param("x", shape, "i32")
    slope = o8.constant(rng.integers(-3, 4, [ch]).astype(np.int32))
    outs = [o1.elu(px, alpha), o5.hsigmoid(px), o1.prelu(px, slope),
            o1.hard_sigmoid(px, o8.constant(np.int32(2)), o8.constant(np.int32(1)))]
    compare(outs, [px], {"x": x}, "i32", tmp_path_factory)


# Gelu's erf mode on f32/f64 runs the compiled loop of ops/gelu_loop.py: every range of
# fdlibm's erf (and the boundaries between them), zeros, infinities, NaN.
def _gelu_values(dtype):
    rng = np.random.default_rng(5)
    edges = [0.84375, 1.25, 1 / 0.35, 6.0]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-30, 40.0, -40.0]
    near = [e * np.sqrt(2.0) * s * f for e in edges for s in (1, -1) for f in (1 - 1e-7, 1, 1 + 1e-7)]
    return np.concatenate([rng.standard_normal(20000) * 3, rng.uniform(-12, 12, 5000), special,
                           near]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_erf_loop_gives_the_numpy_paths_values(monkeypatch, dtype):
    from irrun.opkit import float_unary
    from irrun.ops import activation, gelu_loop

    x = _gelu_values(dtype)
    want = float_unary(lambda v: activation.gelu(v, "erf"), x, "Gelu")
    for opset, attrs in ((2, {}), (7, {"approximation_mode": "erf"})):
        (got,) = run_op("Gelu", attrs, x, opset=opset)
        assert got.dtype == dtype
        if dtype == np.float32:      # the same f64 steps (exp aside), rounded to f32
            np.testing.assert_array_equal(got, want)
        else:                        # exp differs by an ulp; 1 + erf cancels for x << 0
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    # Split over the pool: the same bits; an N-D, non-contiguous input: its shape.
    monkeypatch.setattr(gelu_loop, "MIN_WORK_PER_THREAD", 1)
    np.testing.assert_array_equal(run_op("Gelu", {}, x, opset=2)[0], got)
    y = x[: 24 * 50].reshape(24, 50)[:, ::2]
    np.testing.assert_array_equal(run_op("Gelu", {}, y, opset=2)[0],
                                  float_unary(lambda v: activation.gelu(v, "erf"), y, "Gelu"))


@pytest.mark.oracle
def test_gelu_erf_loop_matches_openvino(tmp_path_factory):
    x = _gelu_values(np.float32)
    x = x[np.isfinite(x)]
    px = param("x", list(x.shape), "f32")
    compare([o2.gelu(px), o7.gelu(px, "erf")], [px], {"x": x}, "f32", tmp_path_factory, scale=4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hswish_loop_gives_the_numpy_formulas_bits(monkeypatch, dtype):
    # f32/f64 HSwish runs the compiled loop of ops/hswish_loop.py: the formula's steps in
    # the data's type, NumPy's maximum/minimum rules for NaN and signed zeros.
    from irrun.opkit import float_unary
    from irrun.ops import activation, hswish_loop

    rng = np.random.default_rng(9)
    x = np.concatenate([rng.standard_normal(30000) * 5, [-3.0, 3.0, -0.0, 0.0, np.nan, np.inf, -np.inf,
                                                           np.nextafter(-3.0, -4), 6.0, -6.0]]).astype(dtype)
    with np.errstate(invalid="ignore"):
        want = float_unary(activation.ACTIVATIONS["HSwish"], x, "HSwish")
    (got,) = run_op("HSwish", {}, x, opset=4)
    assert got.dtype == dtype
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    monkeypatch.setattr(hswish_loop, "MIN_WORK_PER_THREAD", 1)
    np.testing.assert_array_equal(run_op("HSwish", {}, x, opset=4)[0], got)
    # Integers keep the NumPy path (float, rounded to nearest).
    (i,) = run_op("HSwish", {}, np.array([-4, -1, 0, 2, 5], np.int32), opset=4)
    assert i.dtype == np.int32 and i.tolist() == [0, 0, 0, 2, 5]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_softmax_of_a_short_last_axis_gives_the_reductions_bits(data):
    # A last axis of up to SHORT_AXIS elements: maximum and sum slice by slice, the bits
    # of np.max and np.sum (NaN, infinities and signed zeros in the data), f32 and f64.
    from irrun.ops import activation

    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    n = data.draw(st.integers(1, activation.SHORT_AXIS + 2))
    lead = data.draw(st.lists(st.integers(1, 40), max_size=3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = (rng.standard_normal(lead + [n]) * 10.0 ** rng.uniform(-2, 3)).astype(dtype)
    if data.draw(st.booleans(), label="special values"):
        x.flat[rng.integers(0, x.size, 3)] = rng.choice(
            [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e38, -1e38], 3)
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        want = e / np.sum(e, axis=-1, keepdims=True)
        got = activation.softmax(x, x.ndim - 1)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_prepared_relu_hsigmoid_hswish_give_the_kernels_bits(dtype):
    # Layers of static shapes run a function prepared once (irrun.opkit.prepared): the
    # kernels' values bit for bit, NaN, infinities, signed zeros and the corners included.
    from irrun.run.executor import Plan
    from irrun.tools.builder import GraphBuilder

    g = GraphBuilder("acts")
    x = g.parameter("x", dtype, [4, 257])
    for op, version in (("ReLU", "opset1"), ("HSigmoid", "opset5"), ("HSwish", "opset4")):
        g.result(g.op(op, [x], version=version, name=op.lower()), name=op.lower())
    m = g.model()
    plan = Plan(m.program, m._targets(None)[0])
    assert {s.node.layer.name for s in plan.steps if s.bare is not None} == \
        {"relu", "hsigmoid", "hswish"}
    rng = np.random.default_rng(4)
    v = np.concatenate([rng.standard_normal(1016) * 5, [-3.0, 3.0, -0.0, 0.0, np.nan, np.inf,
                                                        -np.inf, np.nextafter(-3.0, -4), 6.0,
                                                        -6.0, 1e308, -1e308]])
    feed = {"x": v[:4 * 257].reshape(4, 257).astype(np.float32 if dtype == "f32" else np.float64)}
    with np.errstate(all="ignore"):
        got = m.infer(feed)
        want = m.infer(feed, listener=lambda node, outputs, seconds: None)
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].tobytes() == want[name].tobytes()
