"""Normalization ops (MVN-2, MVN-6, GroupNormalization-12, BatchNormInference-1/5, LRN-1,
NormalizeL2-1, GRN-1): differential tests against OpenVINO's CPU plugin, spec examples,
shape rules and errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irrun.errors import OpError, ShapeError
from irrun.ir.shapes import TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1
import openvino.opset2 as o2
import openvino.opset5 as o5
import openvino.opset6 as o6
import openvino.opset12 as o12
from test_ops_elementwise import DTYPES, infer, model, param, run_op

# Both sides compute means and variances with different summation orders in f32 (the CPU
# plugin) and f64 (irrun): a few ulp of f32 after the division; f16 rounds once more.
TOL = {"f32": 2e-5, "f16": 2e-3}


def S(etype, shape):
    return TensorSpec.make(etype, shape)


def i64(values):
    return oracle.i64(values)


def compare(outs, params, feed, etype, tmp_path_factory):
    oracle.compare(model(outs, params), feed, rtol=TOL[etype], atol=TOL[etype],
                   tmpdir=tmp_path_factory.getbasetemp())


# ------------------------------------------------------------------ OpenVINO differential

@pytest.mark.oracle
@settings(max_examples=15)
@given(shape=st.lists(st.integers(1, 5), min_size=2, max_size=4), etype=st.sampled_from(["f32", "f16"]),
       data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_mvn_matches_openvino(tmp_path_factory, shape, etype, data, seed):
    rng = np.random.default_rng(seed)
    rank = len(shape)
    x = (rng.standard_normal(shape) * 3 + 1).astype(DTYPES[etype])
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                              unique_by=lambda a: a % rank), label="axes")
    nv = data.draw(st.booleans(), label="normalize_variance")
    across = data.draw(st.booleans(), label="across_channels")
    px = param("x", shape, etype)
    outs = [o6.mvn(px, i64(axes), nv, 1e-3, "inside_sqrt"), o6.mvn(px, i64(axes), nv, 1e-3, "outside_sqrt")]
    if rank >= 3 or across:
        outs.append(o2.mvn(px, across_channels=across, normalize_variance=nv, eps=1e-4))
    compare(outs, [px], {"x": x}, etype, tmp_path_factory)


@pytest.mark.oracle
@settings(max_examples=15)
@given(n=st.integers(1, 3), groups=st.integers(1, 3), per_group=st.integers(1, 3),
       spatial=st.lists(st.integers(1, 4), max_size=2), etype=st.sampled_from(["f32", "f16"]),
       seed=st.integers(0, 2**32 - 1))
def test_group_and_batch_norm_match_openvino(tmp_path_factory, n, groups, per_group, spatial, etype, seed):
    rng = np.random.default_rng(seed)
    c = groups * per_group
    shape = [n, c] + spatial
    x = (rng.standard_normal(shape) * 2 - 1).astype(DTYPES[etype])
    scale, bias, mean = (rng.standard_normal(c).astype(DTYPES[etype]) for _ in range(3))
    var = rng.uniform(0.1, 3, c).astype(DTYPES[etype])
    px = param("x", shape, etype)
    ps, pb, pm, pv = (param(nm, [c], etype) for nm in ("s", "b", "m", "v"))
    outs = [o12.group_normalization(px, ps, pb, groups, 1e-5),
            o1.batch_norm_inference(px, ps, pb, pm, pv, 1e-3),
            o5.batch_norm_inference(px, ps, pb, pm, pv, 1e-3)]
    compare(outs, [px, ps, pb, pm, pv], {"x": x, "s": scale, "b": bias, "m": mean, "v": var},
            etype, tmp_path_factory)


@pytest.mark.oracle
@settings(max_examples=15)
@given(shape=st.lists(st.integers(1, 5), min_size=4, max_size=4), size=st.sampled_from([1, 2, 3, 4, 5]),
       across=st.booleans(), alpha=st.sampled_from([1e-4, 0.5, 2.0]), beta=st.sampled_from([0.75, 0.5, 1.0]),
       bias=st.sampled_from([1.0, 2.0]), seed=st.integers(0, 2**32 - 1))
def test_lrn_matches_openvino(tmp_path_factory, shape, size, across, alpha, beta, bias, seed):
    """The CPU plugin implements LRN across channels (axes [1]) and within a channel (axes
    [2, 3]) of 4-D data: the cases converters produce. Even sizes take (size - 1) // 2
    neighbours on each side there too."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    px = param("x", shape, "f32")
    axes = [1] if across else [2, 3]
    outs = [o1.lrn(px, i64(axes), alpha, beta, bias, size)]
    compare(outs, [px], {"x": x}, "f32", tmp_path_factory)


@pytest.mark.oracle
@settings(max_examples=15)
@given(shape=st.lists(st.integers(1, 5), min_size=2, max_size=4), etype=st.sampled_from(["f32", "f16"]),
       data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_normalize_l2_and_grn_match_openvino(tmp_path_factory, shape, etype, data, seed):
    rng = np.random.default_rng(seed)
    rank = len(shape)
    x = rng.standard_normal(shape).astype(DTYPES[etype])
    axes = data.draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True), label="axes")
    mode = data.draw(st.sampled_from(["add", "max"]), label="eps_mode")
    eps = data.draw(st.sampled_from([1e-6, 0.5, 4.0]), label="eps")
    px = param("x", shape, etype)
    outs = [o1.normalize_l2(px, i64(axes), eps, mode), o1.grn(px, 0.5)]
    compare(outs, [px], {"x": x}, etype, tmp_path_factory)


# ------------------------------------------------------------------ spec examples

def test_spec_examples_keep_shapes():
    (s,) = infer("MVN", {"across_channels": "true", "eps": "1e-9", "normalize_variance": "true"},
                 S("f32", [6, 12, 10, 24]), opset=2)
    assert format_shape(s.shape) == "[6,12,10,24]"
    (s,) = infer("MVN", {"reduction_axes": "2,3", "eps": "1e-9", "normalize_variance": "true"},
                 S("f32", [6, 12, 10, 24]), opset=2)
    assert format_shape(s.shape) == "[6,12,10,24]"
    (s,) = infer("MVN", {"eps": "1e-9", "eps_mode": "inside_sqrt", "normalize_variance": "true"},
                 S("f32", [6, 12, 10, 24]), TensorSpec.of_value(np.array([0, 2, 3], np.int64), "i64"),
                 opset=6)
    assert format_shape(s.shape) == "[6,12,10,24]"
    (s,) = infer("GroupNormalization", {"epsilon": "1e-5", "num_groups": "4"},
                 S("f32", [3, 12, 100, 100]), S("f32", [12]), S("f32", [12]), opset=12)
    assert format_shape(s.shape) == "[3,12,100,100]"
    (s,) = infer("GRN", {"bias": "1e-4"}, S("f32", [1, 20, 224, 224]), opset=1)
    assert format_shape(s.shape) == "[1,20,224,224]"
    one = TensorSpec.of_value(np.array([1], np.int64), "i64")
    (s,) = infer("LRN", {"alpha": "1.0e-04", "beta": "0.75", "size": "5", "bias": "1"},
                 S("f32", [6, 12, 10, 24]), one)
    assert format_shape(s.shape) == "[6,12,10,24]"
    for axes in ([1], [1, 2, 3]):
        ax = TensorSpec.of_value(np.array(axes, np.int64), "i64")
        (s,) = infer("NormalizeL2", {"eps": "1e-8", "eps_mode": "add"}, S("f32", [6, 12, 10, 24]), ax)
        assert format_shape(s.shape) == "[6,12,10,24]"
    for data, c, opset in (([10, 128], 128, 1), ([1, 3, 224, 224], 3, 1), ([10, 128], 128, 5),
                           ([1, 3, 224, 224], 3, 5)):
        p = S("f32", [c])
        ins = (p, p, S("f32", data), p, p) if opset == 1 else (S("f32", data), p, p, p, p)
        (s,) = infer("BatchNormInference", {"epsilon": "9.99e-06"}, *ins, opset=opset)
        assert format_shape(s.shape) == format_shape(S("f32", data).shape)


def test_mvn_values_and_eps_modes():
    x = np.array([[1.0, 2.0, 3.0, 6.0]], np.float32)
    axes = np.array([1], np.int64)
    d = x - 3.0
    var = np.mean(d * d)
    (inside,) = run_op("MVN", {"eps": "0.5", "eps_mode": "inside_sqrt", "normalize_variance": "true"},
                       x, axes, opset=6)
    (outside,) = run_op("MVN", {"eps": "0.5", "eps_mode": "OUTSIDE_SQRT", "normalize_variance": "true"},
                        x, axes, opset=6)
    (centred,) = run_op("MVN", {"eps": "0.5", "eps_mode": "inside_sqrt", "normalize_variance": "false"},
                        x, axes, opset=6)
    np.testing.assert_allclose(inside, d / np.sqrt(var + 0.5), rtol=1e-6)
    np.testing.assert_allclose(outside, d / (np.sqrt(var) + 0.5), rtol=1e-6)
    np.testing.assert_array_equal(centred, d)
    # Empty axes: x - ReduceMean(x, []) is 0 (the CPU plugin returns x; see docs/ops.md).
    (empty,) = run_op("MVN", {"eps": "0.5", "eps_mode": "inside_sqrt", "normalize_variance": "true"},
                      x, np.array([], np.int64), opset=6)
    assert not empty.any() and empty.shape == x.shape


def test_batch_norm_input_orders_differ_between_versions():
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
    g, b = np.array([2.0, 3.0], np.float32), np.array([1.0, -1.0], np.float32)
    m, v = np.array([1.0, 2.0], np.float32), np.array([4.0, 9.0], np.float32)
    want = (x - m[:, None]) / np.sqrt(v[:, None]) * g[:, None] + b[:, None]
    (y1,) = run_op("BatchNormInference", {"epsilon": "0"}, g, b, x, m, v, opset=1)
    (y5,) = run_op("BatchNormInference", {"epsilon": "0"}, x, g, b, m, v, opset=5)
    np.testing.assert_allclose(y1, want, rtol=1e-6)
    np.testing.assert_allclose(y5, want, rtol=1e-6)
    with pytest.raises(OpError, match=r"variance is -9.0 at channel 1: variance \+ epsilon is negative"):
        run_op("BatchNormInference", {"epsilon": "5"}, x, g, b, m, -v, opset=5)
    with pytest.raises(ShapeError, match=r"gamma \(input 1\) has 3 values but data has 2 channels"):
        infer("BatchNormInference", {"epsilon": "0"}, S("f32", [1, 2, 4]), S("f32", [3]), S("f32", [2]),
              S("f32", [2]), S("f32", [2]), opset=5)
    with pytest.raises(ShapeError, match=r"data \(input 2\) must be floating-point"):
        infer("BatchNormInference", {"epsilon": "0"}, S("i32", [2]), S("i32", [2]), S("i32", [1, 2, 4]),
              S("i32", [2]), S("i32", [2]), opset=1)


def test_lrn_window_and_normalize_l2_empty_axes():
    x = np.array([[[[1.0]], [[2.0]], [[3.0]], [[4.0]]]], np.float32)     # [1, 4, 1, 1]
    (y,) = run_op("LRN", {"alpha": "3", "beta": "1", "bias": "1", "size": "3"}, x, np.array([1], np.int64))
    sq = np.array([1 + 4, 1 + 4 + 9, 4 + 9 + 16, 9 + 16])                  # clipped windows
    np.testing.assert_allclose(y.reshape(-1), [1, 2, 3, 4] / (1 + 1.0 * sq), rtol=1e-6)
    x = np.array([-2.0, 0.0, 3.0], np.float32)
    (y,) = run_op("NormalizeL2", {"eps": "1e-6", "eps_mode": "add"}, x, np.array([], np.int64))
    assert y.tolist() == [1.0, 0.0, 1.0]
    (y,) = run_op("NormalizeL2", {"eps": "100", "eps_mode": "max"}, x, np.array(0, np.int32))
    np.testing.assert_allclose(y, x / 10, rtol=1e-6)


# ------------------------------------------------------------------ rules and errors

def test_axes_and_type_errors():
    ax = TensorSpec.of_value(np.array([0, 3], np.int64), "i64")
    with pytest.raises(ShapeError, match=r"axes \(input 1\) value 3 is out of range \[-3, 2\]"):
        infer("MVN", {"eps": "1e-9", "eps_mode": "inside_sqrt", "normalize_variance": "true"},
              S("f32", [2, 3, 4]), ax, opset=6)
    rep = TensorSpec.of_value(np.array([1, -2], np.int64), "i64")
    with pytest.raises(ShapeError, match=r"repeats axis -2"):
        infer("NormalizeL2", {"eps": "1e-9", "eps_mode": "add"}, S("f32", [2, 3, 4]), rep)
    with pytest.raises(ShapeError, match=r"MVN data \(input 0\) must be floating-point"):
        infer("MVN", {"eps": "1e-9", "across_channels": "true"}, S("i32", [2, 3, 4]), opset=2)
    with pytest.raises(ShapeError, match=r"attribute reduction_axes value 5 is out of range"):
        infer("MVN", {"eps": "1e-9", "reduction_axes": "1,5"}, S("f32", [2, 3, 4]), opset=2)
    with pytest.raises(ShapeError, match=r"the 6 channels do not divide into num_groups=4"):
        infer("GroupNormalization", {"epsilon": "1e-5", "num_groups": "4"},
              S("f32", [1, 6, 3]), S("f32", [6]), S("f32", [6]), opset=12)
    with pytest.raises(ShapeError, match=r"bias \(input 2\) has 5 values but data has 6 channels"):
        infer("GroupNormalization", {"epsilon": "1e-5", "num_groups": "3"},
              S("f32", [1, 6, 3]), S("f32", [6]), S("f32", [5]), opset=12)
    with pytest.raises(ShapeError, match=r"GRN data \(input 0\) must have rank 2 or 3 or 4"):
        infer("GRN", {"bias": "1"}, S("f32", [1, 2, 3, 4, 5]))
    with pytest.raises(ShapeError, match="LRN size must be a positive integer, got 0"):
        infer("LRN", {"alpha": "1", "beta": "1", "bias": "1", "size": "0"}, S("f32", [1, 2]), S("i64", [1]))
    (s,) = infer("GroupNormalization", {"epsilon": "1e-5", "num_groups": "3"},
                 S("f16", [None, None, 3]), S("f16", [None]), S("f16", [6]), opset=12)
    assert format_shape(s.shape) == "[?,?,3]" and s.etype.name == "f16"


def test_empty_and_half_inputs_keep_their_type():
    import ml_dtypes
    x = np.zeros((0, 3, 2), np.float32)
    (y,) = run_op("MVN", {"eps": "1e-9", "eps_mode": "inside_sqrt", "normalize_variance": "true"},
                  x, np.array([2], np.int64), opset=6)
    assert y.shape == (0, 3, 2)
    x = np.array([[1.0, 2.0], [3.0, 5.0]], ml_dtypes.bfloat16)
    (y,) = run_op("GRN", {"bias": "1"}, x)
    assert y.dtype == x.dtype
    np.testing.assert_allclose(y.astype(np.float64), np.array([[1, 2], [3, 5]]) /
                               np.sqrt(np.array([[5], [34]]) + 1), rtol=1e-2)


# MVN over trailing axes runs the compiled loop of ops/mvn_loop.py: rows long and short,
# one to three axes, f32 and f64, both eps modes, with and without the variance.
MVN_ROWS = [((2, 16, 64, 64), [2, 3]), ((1, 10, 64), [2]), ((2, 17, 13), [-1]),
            ((3, 4, 5, 6), [1, 2, 3]), ((2, 3, 7), [2, 1]), ((4, 9), [1])]


def _mvn_f64(x, axes, nv, eps, inside):
    """The NumPy path: every step in f64, rounded to x's type once."""
    w = x.astype(np.float64)
    d = w - w.mean(axis=tuple(axes), keepdims=True)
    if nv:
        var = np.mean(d * d, axis=tuple(axes), keepdims=True)
        d = d / (np.sqrt(var + eps) if inside else np.sqrt(var) + eps)
    return d.astype(x.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axes", MVN_ROWS)
def test_mvn_rows_loop_gives_the_f64_paths_bits(monkeypatch, shape, axes, dtype):
    from irrun.ops import mvn_loop

    calls = []
    real = mvn_loop._rows
    monkeypatch.setattr(mvn_loop, "_rows", lambda *a: calls.append(1) or real(*a))
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 3 + 1).astype(dtype)
    for nv in (True, False):
        for mode in ("inside_sqrt", "outside_sqrt"):
            attrs = {"eps": "1e-5", "eps_mode": mode, "normalize_variance": str(nv).lower()}
            (got,) = run_op("MVN", attrs, x, np.array(axes, np.int64), opset=6)
            assert got.dtype == dtype and got.shape == x.shape
            want = _mvn_f64(x, axes, nv, 1e-5, mode == "inside_sqrt")
            if dtype == np.float32:       # f64 sums in another order, rounded to f32: equal
                np.testing.assert_array_equal(got, want)
            else:                         # f64 results: a few f64 ulps apart
                np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    assert calls
    # Split over the pool row by row: the same bits.
    attrs = {"eps": "1e-5", "eps_mode": "inside_sqrt", "normalize_variance": "true"}
    whole = run_op("MVN", attrs, x, np.array(axes, np.int64), opset=6)[0]
    monkeypatch.setattr(mvn_loop, "MIN_WORK_PER_THREAD", 1)
    np.testing.assert_array_equal(run_op("MVN", attrs, x, np.array(axes, np.int64), opset=6)[0], whole)


@pytest.mark.oracle
@pytest.mark.parametrize("shape, axes", MVN_ROWS)
def test_mvn_rows_match_openvino(tmp_path_factory, shape, axes):
    x = (np.random.default_rng(sum(shape)).standard_normal(shape) * 3 + 1).astype(np.float32)
    px = param("x", shape, "f32")
    outs = [o6.mvn(px, i64(axes), True, 1e-5, "inside_sqrt"), o6.mvn(px, i64(axes), True, 1e-3, "outside_sqrt"),
            o6.mvn(px, i64(axes), False, 1e-5, "inside_sqrt")]
    compare(outs, [px], {"x": x}, "f32", tmp_path_factory)
