"""Convolution-1, GroupConvolution-1, MaxPool-1/8, AvgPool-1: spec examples, rules, and
differential tests against OpenVINO's CPU plugin over every auto_pad mode."""
from __future__ import annotations

import os
import numpy as np

from irrun.opkit.problems import collect_warnings, stop_collecting
import pytest
from hypothesis import assume, given, strategies as st

import irrun
from irrun.ir.registry import lookup, parse_attrs
from irrun.ir.shapes import Dim, TensorSpec

import irrun.ops  # noqa: F401  (registers the kernels)

AUTO_PADS = ["explicit", "same_upper", "same_lower", "valid", "notset"]


def op(type_, opset, **data):
    """(kernel class, parsed attrs) from IR-style <data> strings."""
    opdef = lookup(type_, f"opset{opset}")
    attrs, problems, unknown = parse_attrs(opdef.attrs, {k.replace("exclude_pad", "exclude-pad"): str(v)
                                                         for k, v in data.items()})
    assert not problems and not unknown, (problems, unknown)
    return opdef.impl, attrs


def dims(spec):
    return [str(d) for d in spec.shape]


# ---------------------------------------------------------------- spec examples (MaxPool-8)

X3 = np.array([[[[-1, 2, 3], [4, 5, -6], [-7, 8, 9]]]], np.float32)


@pytest.mark.parametrize("attrs, x, values, indices", [
    # Example 1: explicit pads. The spec prints -6 (index 5) at [1, 3], but that window holds
    # 3 and -6: the maximum is 3 (index 2), which OpenVINO's CPU plugin also gives.
    (dict(strides="1,1", pads_begin="1,1", pads_end="1,1", kernel="2,2", auto_pad="explicit"), X3,
     [[-1, 2, 3, 3], [4, 5, 5, 3], [4, 8, 9, 9], [-7, 8, 9, 9]],
     [[0, 1, 2, 2], [3, 4, 4, 2], [3, 7, 8, 8], [6, 7, 8, 8]]),
    # Example 2: 1-D, valid
    (dict(strides="1", kernel="3", auto_pad="valid"),
     np.array([[[-1, 2, 3, 5, -7, 9, 1]]], np.float32), [3, 5, 5, 9, 9], [2, 3, 3, 5, 5]),
    # Example 3: same_lower
    (dict(strides="1,1", kernel="2,2", auto_pad="same_lower"), X3,
     [[-1, 2, 3], [4, 5, 5], [4, 8, 9]], [[0, 1, 2], [3, 4, 4], [3, 7, 8]]),
    # Example 4: same_upper, two channels (indices count across channels)
    (dict(strides="1,1", kernel="2,2", auto_pad="same_upper"),
     np.array([[[[-1, 2, 3], [4, 5, -6], [-7, 8, 9]], [[2, -1, 5], [6, -7, 1], [8, 2, -3]]]], np.float32),
     [[[5, 5, 3], [8, 9, 9], [8, 9, 9]], [[6, 5, 5], [8, 2, 1], [8, 2, -3]]],
     [[[4, 4, 2], [7, 8, 8], [7, 8, 8]], [[12, 11, 11], [15, 16, 14], [15, 16, 17]]]),
    # Example 5: valid with ceil rounding
    (dict(strides="2,2", kernel="2,2", rounding_type="ceil", auto_pad="valid"), X3,
     [[5, 3], [8, 9]], [[4, 2], [7, 8]]),
    # Example 6: dilations
    (dict(strides="1,1", kernel="2,2", dilations="2,2", pads_begin="1,1", pads_end="1,1"),
     np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3),
     [[5, 6, 5], [8, 9, 8], [5, 6, 5]], [[4, 5, 4], [7, 8, 7], [4, 5, 4]]),
    # Example 7: axis=2, indices restart in each channel
    (dict(strides="1,1", kernel="2,2", dilations="1,1", pads_begin="0,0", pads_end="0,0", axis=2),
     np.arange(1, 19, dtype=np.float32).reshape(1, 2, 3, 3),
     [[[5, 6], [8, 9]], [[14, 15], [17, 18]]], [[[4, 5], [7, 8]], [[4, 5], [7, 8]]]),
])
def test_maxpool8_spec_examples(attrs, x, values, indices):
    impl, a = op("MaxPool", 8, **attrs)
    (out_spec, idx_spec) = impl.infer(a, TensorSpec.of_value(x, "f32"))
    got_v, got_i = impl.run(a, x)
    expected_v = np.array(values, np.float32).reshape(got_v.shape)
    np.testing.assert_array_equal(got_v, expected_v)
    np.testing.assert_array_equal(got_i, np.array(indices).reshape(got_i.shape))
    assert got_i.dtype == np.int64 and idx_spec.etype.name == "i64"
    assert list(got_v.shape) == [d.value for d in out_spec.shape]


@pytest.mark.parametrize("data, expected", [
    (dict(auto_pad="same_upper", kernel="2,2", pads_begin="1,1", pads_end="1,1", strides="2,2"), [1, 3, 32, 32]),
    (dict(auto_pad="explicit", kernel="2,2", pads_begin="1,1", pads_end="1,1", strides="2,2"), [1, 3, 17, 17]),
    (dict(auto_pad="valid", kernel="2,2", pads_begin="1,1", pads_end="1,1", strides="2,2"), [1, 3, 16, 16]),
])
def test_maxpool8_spec_xml_shapes(data, expected):
    # Note the first example: same_upper with stride 2 on 32 keeps 32 in the spec text, but
    # the shape rule (and OpenVINO) give ceil(32 / 2) = 16; the spec's XML is wrong there.
    impl, a = op("MaxPool", 8, **data)
    out, idx = impl.infer(a, TensorSpec.make("f32", [1, 3, 32, 32]))
    want = [1, 3, 16, 16] if data["auto_pad"] == "same_upper" else expected
    assert dims(out) == dims(idx) == [str(v) for v in want]


@pytest.mark.parametrize("data, expected", [
    (dict(auto_pad="same_upper", exclude_pad="true", kernel="2,2", pads_begin="0,0", pads_end="1,1", strides="2,2"), 16),
    (dict(auto_pad="same_upper", exclude_pad="false", kernel="5,5", pads_begin="0,0", pads_end="1,1", strides="2,2"), 16),
    (dict(auto_pad="explicit", exclude_pad="true", kernel="5,5", pads_begin="1,1", pads_end="1,1", strides="3,3"), 10),
    (dict(auto_pad="explicit", exclude_pad="false", kernel="5,5", pads_begin="1,1", pads_end="1,1", strides="2,2"), 15),
    (dict(auto_pad="valid", exclude_pad="true", kernel="5,5", pads_begin="1,1", pads_end="1,1", strides="2,2"), 14),
])
def test_avgpool_spec_xml_shapes(data, expected):
    # The spec's same_upper examples also say 32 with stride 2; the shape rule gives 16.
    impl, a = op("AvgPool", 1, **data)
    (out,) = impl.infer(a, TensorSpec.make("f32", [1, 3, 32, 32]))
    assert dims(out) == ["1", "3", str(expected), str(expected)]


@pytest.mark.parametrize("data, x, w, expected", [
    (dict(dilations="1", pads_begin="0", pads_end="0", strides="2", auto_pad="valid"),
     [1, 5, 128], [16, 5, 4], [1, 16, 63]),
    (dict(dilations="1,1", pads_begin="2,2", pads_end="2,2", strides="1,1", auto_pad="explicit"),
     [1, 3, 224, 224], [64, 3, 5, 5], [1, 64, 224, 224]),
    (dict(dilations="2,2,2", pads_begin="0,0,0", pads_end="0,0,0", strides="3,3,3", auto_pad="explicit"),
     [1, 7, 320, 320, 320], [32, 7, 3, 3, 3], [1, 32, 106, 106, 106]),
])
def test_convolution_spec_xml_shapes(data, x, w, expected):
    impl, a = op("Convolution", 1, **data)
    (out,) = impl.infer(a, TensorSpec.make("f32", x), TensorSpec.make("f32", w))
    assert dims(out) == [str(v) for v in expected]


def test_group_convolution_spec_shape():
    # group-convolution-1 example: data [1,12,224,224], filters [4,1,3,5,5] -> [1,4,224,224]
    impl, a = op("GroupConvolution", 1, dilations="1,1", pads_begin="2,2", pads_end="2,2",
                 strides="1,1", auto_pad="explicit")
    (out,) = impl.infer(a, TensorSpec.make("f32", [1, 12, 224, 224]), TensorSpec.make("f32", [4, 1, 3, 5, 5]))
    assert dims(out) == ["1", "4", "224", "224"]


# ---------------------------------------------------------------- rules and errors


def naive_conv(x, w, strides, dil, pb, pe):
    """Textbook loops over output pixels; only for cross-checking small cases."""
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(zip(pb, pe)))
    n, c = x.shape[:2]
    k = w.shape[2:]
    out_sp = [(x.shape[2 + i] - ((k[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(len(k))]
    out = np.zeros((n, w.shape[0], *out_sp))
    for o in np.ndindex(*out_sp):
        idx = tuple(slice(o[i] * strides[i], o[i] * strides[i] + (k[i] - 1) * dil[i] + 1, dil[i])
                    for i in range(len(k)))
        patch = x[(slice(None), slice(None)) + idx]
        out[(slice(None), slice(None)) + o] = np.tensordot(patch, w, axes=(range(1, patch.ndim), range(1, w.ndim)))
    return out


def test_convolution_matches_textbook_loops_for_integers():
    rng = np.random.default_rng(0)
    x = rng.integers(-50, 50, (2, 3, 7, 6)).astype(np.int32)
    w = rng.integers(-5, 5, (4, 3, 3, 2)).astype(np.int32)
    impl, a = op("Convolution", 1, strides="2,1", dilations="1,2", pads_begin="1,0", pads_end="2,1")
    (got,) = impl.run(a, x, w)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, naive_conv(x, w, (2, 1), (1, 2), (1, 0), (2, 1)))


def test_same_modes_ignore_stored_pads():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    _, trusted = op("Convolution", 1, strides="2,2", dilations="1,1", pads_begin="0,0",
                    pads_end="0,0", auto_pad="same_upper")
    impl, garbage = op("Convolution", 1, strides="2,2", dilations="1,1", pads_begin="7,7",
                       pads_end="9,9", auto_pad="same_upper")
    (a,) = impl.run(trusted, x, w)
    (b,) = impl.run(garbage, x, w)
    np.testing.assert_array_equal(a, b)
    # 5 rows, stride 2, kernel 3: total pad 2 -> (1, 1); 6 columns: total 1 -> (0, 1) upper.
    np.testing.assert_allclose(a, naive_conv(x, w, (2, 2), (1, 1), (1, 0), (1, 1)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("type_, opset, data, x, w, message", [
    ("Convolution", 1, dict(strides="1,1", dilations="1,1", pads_begin="0,0", pads_end="0,0"),
     [1, 3, 4, 4], [2, 4, 3, 3], "channels"),
    ("Convolution", 1, dict(strides="1", dilations="1,1", pads_begin="0,0", pads_end="0,0"),
     [1, 3, 4, 4], [2, 3, 3, 3], "strides has 1 values"),
    ("Convolution", 1, dict(strides="1,1", dilations="1,1", pads_begin="0,0", pads_end="0,0"),
     [1, 3, 2, 4], [2, 3, 3, 3], "larger than the padded input"),
    ("Convolution", 1, dict(strides="0,1", dilations="1,1", pads_begin="0,0", pads_end="0,0"),
     [1, 3, 4, 4], [2, 3, 3, 3], "below 1"),
    ("Convolution", 1, dict(strides="1,1", dilations="1,1"),
     [1, 3, 4, 4], [2, 3, 3], "rank"),
    ("GroupConvolution", 1, dict(strides="1,1", dilations="1,1", pads_begin="0,0", pads_end="0,0"),
     [1, 6, 4, 4], [4, 1, 2, 3, 3], "channels"),
])
def test_convolution_shape_errors(type_, opset, data, x, w, message):
    impl, a = op(type_, opset, **data)
    with pytest.raises(irrun.errors.ShapeError, match=message):
        impl.infer(a, TensorSpec.make("f32", x), TensorSpec.make("f32", w))


def test_pool_shape_errors():
    impl, a = op("MaxPool", 8, strides="1,1", kernel="3,3", axis=4)
    with pytest.raises(irrun.errors.ShapeError, match="axis=4 is out of range"):
        impl.infer(a, TensorSpec.make("f32", [1, 1, 4, 4]))
    impl, a = op("MaxPool", 1, strides="1", kernel="3,3")
    with pytest.raises(irrun.errors.ShapeError, match="strides has 1 values"):
        impl.infer(a, TensorSpec.make("f32", [1, 1, 4, 4]))
    impl, a = op("AvgPool", 1, strides="1,1", kernel="5,3", exclude_pad="true")
    with pytest.raises(irrun.errors.ShapeError, match="larger than the padded input"):
        impl.infer(a, TensorSpec.make("f32", [1, 1, 4, 4]))
    with pytest.raises(irrun.errors.ShapeError, match="kernel has 2 values"):
        impl.infer(a, TensorSpec.make("f32", [1, 1, 4]))
    with pytest.raises(irrun.errors.ShapeError, match="numeric"):
        impl.infer(a, TensorSpec.make("boolean", [1, 1, 8, 8]))
    impl, a = op("AvgPool", 1, strides="1", kernel="2", pads_begin="2", pads_end="0", exclude_pad="true")
    with pytest.raises(irrun.errors.ShapeError, match="larger than each pad"):
        impl.infer(a, TensorSpec.make("f32", [1, 1, 4]))
    impl, a = op("AvgPool", 1, strides="1", kernel="2", pads_begin="2", pads_end="0", exclude_pad="false")
    assert dims(impl.infer(a, TensorSpec.make("f32", [1, 1, 4]))[0]) == ["1", "1", "5"]


def test_pool_window_over_padding_only():
    """Ceil rounding can place a last window entirely in the end padding: MaxPool gives the
    lowest value and the channel's first index, AvgPool 0 (OpenVINO's reference), and
    inference warns about it."""
    x = np.arange(1, 11, dtype=np.float32).reshape(1, 2, 5)
    impl, a = op("MaxPool", 8, strides="3", kernel="1", rounding_type="ceil")
    warnings = []
    token = collect_warnings(warnings)
    try:
        (spec, _) = impl.infer(a, TensorSpec.make("f32", [1, 2, 5]))
    finally:
        stop_collecting(token)
    assert dims(spec) == ["1", "2", "3"]
    assert warnings and warnings[0][0] == "empty-window" and "window(s) 2" in warnings[0][1]
    v, i = impl.run(a, x)
    np.testing.assert_array_equal(v, [[[1, 4, np.finfo(np.float32).min], [6, 9, np.finfo(np.float32).min]]])
    np.testing.assert_array_equal(i, [[[0, 3, 0], [5, 8, 5]]])
    # The CPU plugin starts float maxima at the lowest f32 and rounds: -inf in f16 and bf16.
    import ml_dtypes
    for dtype in (np.float16, ml_dtypes.bfloat16):
        v, _ = impl.run(a, x.astype(dtype))
        assert v.dtype == dtype and np.isneginf(v[..., 2].astype(np.float32)).all()
    v, _ = impl.run(a, x.astype(np.int8))
    assert (v[..., 2] == -128).all()
    impl, a = op("AvgPool", 1, strides="3", kernel="1", rounding_type="ceil", exclude_pad="true")
    (m,) = impl.run(a, x)
    np.testing.assert_array_equal(m, [[[1, 4, 0], [6, 9, 0]]])


def test_maxpool_ties_and_nan():
    """The first maximum in row-major tap order wins; NaN never wins (strict > scan)."""
    impl, a = op("MaxPool", 8, strides="1", kernel="2")
    v, i = impl.run(a, np.array([[[3, 3, 2, 2]]], np.float32))
    np.testing.assert_array_equal(i, [[[0, 1, 2]]])
    v, i = impl.run(a, np.array([[[np.nan, 1, 2, np.nan]]], np.float32))
    np.testing.assert_array_equal(v, [[[1, 2, 2]]])
    np.testing.assert_array_equal(i, [[[1, 2, 2]]])


def test_integer_avg_rounds_half_to_even():
    impl, a = op("AvgPool", 1, strides="1", kernel="2", exclude_pad="true")
    (m,) = impl.run(a, np.array([[[5, 1, 2, 7, -4]]], np.int32))
    np.testing.assert_array_equal(m, [[[3, 2, 4, 2]]])
    assert m.dtype == np.int32


def test_dynamic_dims_in_shape_inference():
    impl, a = op("Convolution", 1, strides="2,2", dilations="1,1", pads_begin="1,0",
                 pads_end="1,0", auto_pad="explicit")
    (out,) = impl.infer(a, TensorSpec.make("f32", [None, 3, Dim(5, 9), None]),
                        TensorSpec.make("f32", [8, 3, 3, 3]))
    assert dims(out) == ["?", "8", "3..5", "1.."]
    impl, a = op("Convolution", 1, strides="2,2", dilations="1,1", auto_pad="same_lower")
    (out,) = impl.infer(a, TensorSpec.make("f32", [2, 3, Dim(5, 9), None]),
                        TensorSpec.make("f32", [8, 3, 3, 3]))
    assert dims(out) == ["2", "8", "3..5", "?"]
    impl, a = op("MaxPool", 8, strides="2,2", kernel="2,2", auto_pad="same_upper")
    out, idx = impl.infer(a, TensorSpec.make("f32", [2, 3, Dim(5, 9), 6]))
    assert dims(out) == dims(idx) == ["2", "3", "?", "3"]
    (out,) = impl.infer(a, TensorSpec.make("f32", None))[:1]
    assert out.shape is None or len(out.shape) == 4


# ---------------------------------------------------------------- against OpenVINO

def _oracle():
    return pytest.importorskip("oracle")   # tests/oracle.py; skips when openvino is absent


def _ov():
    return pytest.importorskip("openvino")


@st.composite
def windows(draw, max_kernel=3, dilate=True):
    """Spatial rank, sizes, kernel, strides, dilations, pads and auto_pad that OpenVINO accepts."""
    ns = draw(st.integers(1, 3))
    cap = {1: 9, 2: 7, 3: 5}[ns]
    kernel = draw(st.lists(st.integers(1, max_kernel), min_size=ns, max_size=ns))
    dil = draw(st.lists(st.integers(1, 2), min_size=ns, max_size=ns)) if dilate else [1] * ns
    strides = draw(st.lists(st.integers(1, 3), min_size=ns, max_size=ns))
    pb = draw(st.lists(st.integers(0, 2), min_size=ns, max_size=ns))
    pe = draw(st.lists(st.integers(0, 2), min_size=ns, max_size=ns))
    auto_pad = draw(st.sampled_from(AUTO_PADS))
    sizes = []
    for i in range(ns):
        extent = (kernel[i] - 1) * dil[i] + 1
        lo = max(1, extent - (pb[i] + pe[i] if auto_pad in ("explicit", "notset") else 0))
        sizes.append(draw(st.integers(lo, max(lo, cap))))
    return dict(sizes=sizes, kernel=kernel, dil=dil, strides=strides, pb=pb, pe=pe, auto_pad=auto_pad)


def _ov_pad(auto_pad):
    return "explicit" if auto_pad == "notset" else auto_pad


def _compare(nodes, params, feed):
    ov = _ov()
    model = ov.Model(nodes, params)
    _oracle().compare(model, feed)


def _with_notset(xml_path, auto_pad):
    """OpenVINO's Python API cannot spell notset; patch it into the saved IR."""
    if auto_pad == "notset":
        text = open(xml_path).read().replace('auto_pad="explicit"', 'auto_pad="notset"')
        open(xml_path, "w").write(text)


def _compare_patched(model, feed, auto_pad, tmp_path, rtol=None, atol=0.0, ov_may_refuse=False):
    o = _oracle()
    xml = o.save(model, tmp_path)
    try:
        expected = o.ov_run(xml, feed)
    except RuntimeError as e:
        # The CPU plugin has no integer AvgPool kernel for some window settings: nothing to compare.
        if ov_may_refuse and "getSupportedPrimitiveDescriptors" in str(e):
            assume(False)
        raise
    _with_notset(xml, auto_pad)
    got = o.irrun_run(xml, feed)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        o.assert_same(g, e, rtol=rtol, atol=atol)


@pytest.mark.oracle
@given(w=windows(), n=st.integers(1, 2), cin=st.integers(1, 3), cout=st.integers(1, 3),
       dtype=st.sampled_from([np.float32, np.float32, np.float16]), seed=st.integers(0, 2**16))
def test_convolution_against_openvino(tmp_path_factory, w, n, cin, cout, dtype, seed):
    ov = _ov()
    import openvino.opset1 as o1
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, *w["sizes"])).astype(dtype)
    f = rng.standard_normal((cout, cin, *w["kernel"])).astype(dtype)
    p = o1.parameter(list(x.shape), dtype, name="x")
    conv = o1.convolution(p, o1.constant(f), w["strides"], w["pb"], w["pe"], w["dil"], _ov_pad(w["auto_pad"]))
    # f16 sums are accumulated in f32 by both and rounded once: one f16 ulp apart at most.
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=2e-3, atol=2e-3)
    _compare_patched(ov.Model([conv], [p]), {"x": x}, w["auto_pad"], tmp_path_factory.mktemp("c"), **tol)


@pytest.mark.oracle
@given(w=windows(), n=st.integers(1, 2), groups=st.integers(1, 3), cg=st.integers(1, 2),
       og=st.integers(1, 2), seed=st.integers(0, 2**16))
def test_group_convolution_against_openvino(tmp_path_factory, w, n, groups, cg, og, seed):
    ov = _ov()
    import openvino.opset1 as o1
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, groups * cg, *w["sizes"])).astype(np.float32)
    f = rng.standard_normal((groups, og, cg, *w["kernel"])).astype(np.float32)
    p = o1.parameter(list(x.shape), np.float32, name="x")
    conv = o1.group_convolution(p, o1.constant(f), w["strides"], w["pb"], w["pe"], w["dil"],
                                _ov_pad(w["auto_pad"]))
    _compare_patched(ov.Model([conv], [p]), {"x": x}, w["auto_pad"], tmp_path_factory.mktemp("g"),
                     rtol=1e-4, atol=1e-5)


@pytest.mark.oracle
@given(w=windows(), n=st.integers(1, 2), c=st.integers(1, 3), ceil=st.booleans(),
       version=st.sampled_from([1, 8]), index_type=st.sampled_from(["i32", "i64"]),
       axis_pick=st.integers(0, 100), dtype=st.sampled_from([np.float32, np.int32, np.float16]),
       seed=st.integers(0, 2**16))
def test_maxpool_against_openvino(tmp_path_factory, w, n, c, ceil, version, index_type, axis_pick,
                                  dtype, seed):
    ov = _ov()
    import openvino.opset1 as o1
    import openvino.opset8 as o8
    rng = np.random.default_rng(seed)
    shape = (n, c, *w["sizes"])
    # Small integer ranges make ties common, so first-maximum-wins is exercised.
    x = rng.integers(-4, 5, shape).astype(dtype)
    p = o1.parameter(list(shape), dtype, name="x")
    rounding = "ceil" if ceil else "floor"
    if version == 1:
        dil = [1] * len(w["sizes"])
        pool = o1.max_pool(p, w["strides"], w["pb"], w["pe"], w["kernel"], rounding, _ov_pad(w["auto_pad"]))
        outs = [pool]
    else:
        dil = w["dil"]
        rank = len(shape)
        axis = axis_pick % (2 * rank) - rank
        pool = o8.max_pool(p, w["strides"], dil, w["pb"], w["pe"], w["kernel"], rounding,
                           _ov_pad(w["auto_pad"]), index_type, axis)
        outs = [pool.output(0), pool.output(1)]
    assume(_fits(w, dil, ceil))
    _compare_patched(ov.Model(outs, [p]), {"x": x}, w["auto_pad"], tmp_path_factory.mktemp("m"))


def _fits(w, dil, ceil, no_empty=False):
    """The dilated kernel fits the padded input (OpenVINO rejects the rest), and optionally
    no window lies over padding only (OpenVINO's CPU AvgPool returns NaN or -0 there)."""
    from irrun.ops.convolution import resolve_pads, window_count
    pb, pe = resolve_pads(w["auto_pad"], w["sizes"], w["kernel"], dil, w["strides"], w["pb"], w["pe"])
    for i, size in enumerate(w["sizes"]):
        extent = (w["kernel"][i] - 1) * dil[i] + 1
        if size + pb[i] + pe[i] < extent:
            return False
        if no_empty:
            count = window_count(size, pb[i] + pe[i], extent, w["strides"][i], ceil)
            last = (count - 1) * w["strides"][i] - pb[i]
            if last >= size or pb[i] >= extent:
                return False
    return True


@pytest.mark.oracle
@given(w=windows(dilate=False), n=st.integers(1, 2), c=st.integers(1, 3), ceil=st.booleans(),
       exclude=st.booleans(), dtype=st.sampled_from([np.float32, np.float32, np.int32]),
       seed=st.integers(0, 2**16))
def test_avgpool_against_openvino(tmp_path_factory, w, n, c, ceil, exclude, dtype, seed):
    ov = _ov()
    import openvino.opset1 as o1
    assume(_fits(w, [1] * len(w["sizes"]), ceil, no_empty=True))
    if exclude and w["auto_pad"] in ("explicit", "notset"):
        # OpenVINO refuses exclude-pad with a pad as large as the kernel (tested elsewhere).
        assume(all(b < k and e < k for b, e, k in zip(w["pb"], w["pe"], w["kernel"])))
    rng = np.random.default_rng(seed)
    shape = (n, c, *w["sizes"])
    if dtype == np.int32:
        x = rng.integers(-20, 20, shape).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
    p = o1.parameter(list(shape), dtype, name="x")
    pool = o1.avg_pool(p, w["strides"], w["pb"], w["pe"], w["kernel"], exclude,
                       "ceil" if ceil else "floor", _ov_pad(w["auto_pad"]))
    _compare_patched(ov.Model([pool], [p]), {"x": x}, w["auto_pad"], tmp_path_factory.mktemp("a"),
                     rtol=1e-5, atol=1e-6, ov_may_refuse=dtype == np.int32)


def _ov_dims(partial_shape):
    out = []
    for d in partial_shape:
        hi = d.get_max_length()
        out.append((d.get_min_length(), None if hi < 0 else hi))
    return out


@pytest.mark.oracle
@given(w=windows(), kind=st.sampled_from(["conv", "group", "max", "avg"]), ceil=st.booleans(),
       dyn=st.lists(st.sampled_from(["static", "dynamic", "interval"]), min_size=5, max_size=5))
def test_partial_shape_inference_against_openvino(tmp_path_factory, w, kind, ceil, dyn):
    """irrun infers the same partial output shape as OpenVINO for dynamic and interval dims."""
    ov = _ov()
    import openvino.opset1 as o1
    import openvino.opset8 as o8
    dil = w["dil"] if kind in ("conv", "group", "max") else [1] * len(w["sizes"])
    assume(_fits(w, dil, ceil))
    shape = [2, 2, *w["sizes"]]
    pshape = []
    for d, mode in zip(shape, dyn):
        pshape.append(d if mode == "static" else -1 if mode == "dynamic" else ov.Dimension(d, d + 3))
    p = o1.parameter(ov.PartialShape(pshape), np.float32, name="x")
    pad = _ov_pad(w["auto_pad"])
    rounding = "ceil" if ceil else "floor"
    try:
        if kind == "conv":
            f = np.ones((3, 2, *w["kernel"]), np.float32)
            node = o1.convolution(p, o1.constant(f), w["strides"], w["pb"], w["pe"], dil, pad)
        elif kind == "group":
            f = np.ones((2, 2, 1, *w["kernel"]), np.float32)
            node = o1.group_convolution(p, o1.constant(f), w["strides"], w["pb"], w["pe"], dil, pad)
        elif kind == "max":
            node = o8.max_pool(p, w["strides"], dil, w["pb"], w["pe"], w["kernel"], rounding, pad).output(0)
        else:
            node = o1.avg_pool(p, w["strides"], w["pb"], w["pe"], w["kernel"], True, rounding, pad)
    except RuntimeError:
        # OpenVINO refuses these attributes for this shape (AvgPool with exclude-pad and a
        # pad as large as the kernel): irrun must refuse them too.
        assert kind == "avg"
        join = lambda v: ",".join(map(str, v))  # noqa: E731
        impl, a = op("AvgPool", 1, strides=join(w["strides"]), kernel=join(w["kernel"]),
                     pads_begin=join(w["pb"]), pads_end=join(w["pe"]), exclude_pad="true",
                     rounding_type=rounding, auto_pad=w["auto_pad"])
        spec = TensorSpec.make("f32", [Dim(d.get_min_length(), d.get_max_length()) if d.get_max_length() >= 0
                                       else None for d in ov.PartialShape(pshape)])
        with pytest.raises(irrun.errors.ShapeError, match="larger than each pad"):
            impl.infer(a, spec)
        return
    model = ov.Model([node], [p])
    o = _oracle()
    xml = o.save(model, tmp_path_factory.mktemp("s"))
    _with_notset(xml, w["auto_pad"])
    m = irrun.read_model(xml)
    got = [(d.lo, d.hi) for d in m.outputs[0].shape]
    assert got == _ov_dims(model.output(0).partial_shape)


def test_padding_only_windows_arithmetic_agrees_with_the_taps():
    import itertools

    from irrun.ops.pooling import _padding_only_windows, _window_positions
    for size, pb, k, d, stride, count in itertools.product(range(1, 6), range(0, 5), range(1, 4),
                                                           range(1, 4), range(1, 3), range(1, 7)):
        pos = _window_positions(size, pb, count, k, d, stride)
        want = np.flatnonzero(~((pos >= 0) & (pos < size)).any(axis=1))
        np.testing.assert_array_equal(_padding_only_windows(size, pb, count, k, d, stride), want)


def test_absurd_pads_are_refused_without_allocating(tmp_path, monkeypatch):
    # A fuzzed file with pads_end=1e9 once made the shape rule build a [count, kernel] array.
    import tracemalloc

    import irrun
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = os.path.join(root, "models", "crnn")
    text = open(os.path.join(src, "model.xml")).read()
    bad = text.replace('pads_end="0, 0" kernel="2, 2"', 'pads_end="1000000000, 0" kernel="2, 2"', 1)
    assert bad != text
    (tmp_path / "model.xml").write_text(bad)
    (tmp_path / "model.bin").write_bytes(open(os.path.join(src, "model.bin"), "rb").read())
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1G")
    tracemalloc.start()
    diags = irrun.validate(tmp_path / "model.xml")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20
    errors = [d for d in diags if d.severity == "error"]
    assert errors and "needs" in errors[0].message and errors[0].layer_name == "pool1"


# ---------------------------------------------------------------- ConvolutionBackpropData-1,
# GroupConvolutionBackpropData-1

from hypothesis import settings  # noqa: E402


@pytest.mark.parametrize("type_, data, x, w, out_shape, expected", [
    # The pages' examples, verbatim
    ("ConvolutionBackpropData", dict(dilations="1,1", pads_begin="1,1", pads_end="1,1", strides="2,2",
                                     output_padding="0,0", auto_pad="explicit"),
     [1, 20, 224, 224], [20, 10, 3, 3], None, [1, 10, 447, 447]),
    ("ConvolutionBackpropData", dict(dilations="1,1", pads_begin="0,0", pads_end="0,0", strides="3,3",
                                     output_padding="2,2", auto_pad="explicit"),
     [1, 20, 2, 2], [20, 10, 3, 3], None, [1, 10, 8, 8]),
    ("ConvolutionBackpropData", dict(dilations="1,1", pads_begin="1,1", pads_end="1,1", strides="1,1",
                                     output_padding="0,0", auto_pad="valid"),
     [1, 20, 224, 224], [20, 10, 3, 3], [450, 450], [1, 10, 450, 450]),
    ("GroupConvolutionBackpropData", dict(dilations="1", pads_begin="1", pads_end="1", strides="2"),
     [1, 20, 224], [4, 5, 2, 3], None, [1, 8, 447]),
    ("GroupConvolutionBackpropData", dict(dilations="1,1", pads_begin="1,1", pads_end="1,1", strides="2,2"),
     [1, 20, 224, 224], [4, 5, 2, 3, 3], None, [1, 8, 447, 447]),
    ("GroupConvolutionBackpropData", dict(dilations="1,1,1", pads_begin="1,1,1", pads_end="1,1,1",
                                          strides="2,2,2"),
     [1, 20, 224, 224, 224], [4, 5, 2, 3, 3, 3], None, [1, 8, 447, 447, 447]),
    # dynamic dims: batch passes, a spatial interval maps through the formula
    ("ConvolutionBackpropData", dict(dilations="1", pads_begin="0", pads_end="0", strides="2"),
     [None, 3, (2, 5)], [3, 4, 3], None, [None, 4, (5, 11)]),
])
def test_backprop_spec_shapes(type_, data, x, w, out_shape, expected):
    impl, a = op(type_, 1, **data)
    args = [TensorSpec.make("f32", [Dim(*d) if isinstance(d, tuple) else d for d in x]),
            TensorSpec.make("f32", w)]
    if out_shape is not None:
        args.append(TensorSpec.of_value(np.array(out_shape, np.int64), "i64"))
    (out,) = impl.infer(a, *args)
    want = TensorSpec.make("f32", [Dim(*d) if isinstance(d, tuple) else d for d in expected])
    assert dims(out) == dims(want)


def naive_backprop(x, w, strides, dil, pb, out_sizes):
    """Textbook scatter loops over input pixels, cropped at pads_begin to out_sizes."""
    n, cin = x.shape[:2]
    cout, k = w.shape[1], w.shape[2:]
    full = [(x.shape[2 + i] - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 for i in range(len(k))]
    acc = np.zeros((n, cout, *[max(f, p + o) for f, p, o in zip(full, pb, out_sizes)]))
    for i in np.ndindex(*x.shape[2:]):
        for t in np.ndindex(*k):
            o = tuple(i[a] * strides[a] + t[a] * dil[a] for a in range(len(k)))
            acc[(slice(None), slice(None)) + o] += x[(slice(None), slice(None)) + i] @ w[(slice(None), slice(None)) + t]
    return acc[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(pb, out_sizes))]


def test_backprop_matches_textbook_loops():
    rng = np.random.default_rng(3)
    x = rng.integers(-9, 9, (2, 3, 4, 3)).astype(np.int32)
    w = rng.integers(-3, 3, (3, 2, 3, 2)).astype(np.int32)
    impl, a = op("ConvolutionBackpropData", 1, strides="2,3", dilations="1,2", pads_begin="1,0",
                 pads_end="2,1", output_padding="1,0")
    (got,) = impl.run(a, x, w)
    assert got.dtype == np.int32 and got.shape == (2, 2, 7, 8)
    np.testing.assert_array_equal(got, naive_backprop(x, w, (2, 3), (1, 2), (1, 0), (7, 8)))
    # output_shape with same_upper: total = 2*3+3-6 = 3 on axis 0 -> begin 2 (the odd one first)
    impl, a = op("ConvolutionBackpropData", 1, strides="2,3", dilations="1,2", auto_pad="same_upper")
    (got,) = impl.run(a, x, w, np.array([6, 12]))
    np.testing.assert_array_equal(got, naive_backprop(x, w, (2, 3), (1, 2), (2, 0), (6, 12)))


def test_backprop_errors():
    impl, a = op("ConvolutionBackpropData", 1, strides="1,1", dilations="1,1", output_padding="1")
    with pytest.raises(irrun.errors.ShapeError, match="output_padding has 1 values"):
        impl.infer(a, TensorSpec.make("f32", [1, 2, 4, 4]), TensorSpec.make("f32", [2, 3, 3, 3]))
    impl, a = op("ConvolutionBackpropData", 1, strides="1,1", dilations="1,1")
    with pytest.raises(irrun.errors.ShapeError, match=r"the filters' input channels \(dim 0\) give 3"):
        impl.infer(a, TensorSpec.make("f32", [1, 2, 4, 4]), TensorSpec.make("f32", [3, 3, 3, 3]))
    with pytest.raises(irrun.errors.ShapeError, match="must hold 2 spatial dims, got 3"):
        impl.infer(a, TensorSpec.make("f32", [1, 2, 4, 4]), TensorSpec.make("f32", [2, 3, 3, 3]),
                   TensorSpec.make("i64", [3]))
    impl, a = op("ConvolutionBackpropData", 1, strides="1", dilations="1", pads_begin="5", pads_end="5")
    with pytest.raises(irrun.errors.ShapeError, match="negative size -6"):
        impl.infer(a, TensorSpec.make("f32", [1, 2, 2]), TensorSpec.make("f32", [2, 3, 3]))
    impl, a = op("ConvolutionBackpropData", 1, strides="1", dilations="1")
    from irrun.opkit import ResourceError
    with pytest.raises(ResourceError, match="ConvolutionBackpropData output"):
        impl.run(a, np.ones((1, 2, 2), np.float32), np.ones((2, 3, 3), np.float32), np.array([1 << 40]))


@pytest.mark.oracle
@settings(max_examples=12)
@given(w=windows(), n=st.integers(1, 2), groups=st.integers(1, 2), cg=st.integers(1, 3),
       og=st.integers(1, 3), seed=st.integers(0, 2**31), grouped=st.booleans(),
       with_shape=st.booleans(), data=st.data())
def test_backprop_against_openvino(tmp_path_factory, w, n, groups, cg, og, seed, grouped, with_shape, data):
    import openvino.opset1 as o1
    rng = np.random.default_rng(seed)
    ns = len(w["sizes"])
    groups = groups if grouped else 1
    # output_padding below the stride (or dilation), as converters write it
    out_pad = [data.draw(st.integers(0, max(s, d) - 1)) for s, d in zip(w["strides"], w["dil"])]
    x = rng.standard_normal([n, groups * cg] + w["sizes"]).astype(np.float32)
    filt = rng.standard_normal(([groups] if grouped else []) + [cg, og] + w["kernel"]).astype(np.float32)
    full = [(s - 1) * st_ + (k - 1) * d + 1 for s, k, st_, d in zip(w["sizes"], w["kernel"], w["strides"], w["dil"])]
    out_shape = None
    if with_shape:
        out_shape = o1.constant(np.array([data.draw(st.integers(max(1, f - 3), f + 3)) for f in full], np.int64))
    else:
        auto = _ov_pad(w["auto_pad"])
        pb, pe = (w["pb"], w["pe"]) if auto == "explicit" else ([0] * ns, [0] * ns)
        assume(all(f - b - e + p >= 1 for f, b, e, p in zip(full, pb, pe, out_pad)))
    p = o1.parameter(x.shape, _ov().Type.f32, name="x")
    make = o1.group_convolution_backprop_data if grouped else o1.convolution_backprop_data
    node = make(p, o1.constant(filt), w["strides"], output_shape=out_shape, pads_begin=w["pb"],
                pads_end=w["pe"], dilations=w["dil"], auto_pad=_ov_pad(w["auto_pad"]),
                output_padding=out_pad)
    model = _ov().Model([node], [p])
    o = _oracle()
    with __import__("tempfile").TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = o.save(model, d)
        try:
            expected = o.ov_run(xml, {"x": x})
        except RuntimeError as e:
            # oneDNN has no deconvolution for some small grouped 1-D cases: nothing to compare.
            assume("could not create a primitive descriptor" not in str(e))
            raise
        _with_notset(xml, w["auto_pad"])
        got = o.irrun_run(xml, {"x": x})
    o.assert_same(got[0], expected[0], rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- MaxPool-14, AvgPool-14/16,
# AdaptiveAvgPool-8, AdaptiveMaxPool-8


@pytest.mark.parametrize("type_, opset, data, expected", [
    # The pages' XML examples (same_upper with stride 2 gives 16, not the 32 printed there)
    ("MaxPool", 14, dict(auto_pad="same_upper", kernel="2,2", pads_begin="1,1", pads_end="1,1", strides="2,2"), 16),
    ("MaxPool", 14, dict(auto_pad="explicit", kernel="2,2", pads_begin="1,1", pads_end="1,1", strides="2,2"), 17),
    ("MaxPool", 14, dict(auto_pad="valid", kernel="2,2", pads_begin="1,1", pads_end="1,1", strides="2,2"), 16),
    ("AvgPool", 14, dict(auto_pad="explicit", exclude_pad="true", kernel="5,5", pads_begin="1,1", pads_end="1,1", strides="3,3"), 10),
    ("AvgPool", 14, dict(auto_pad="explicit", exclude_pad="false", kernel="5,5", pads_begin="1,1", pads_end="1,1", strides="2,2"), 15),
    ("AvgPool", 16, dict(auto_pad="valid", exclude_pad="true", kernel="5,5", dilations="1,1", pads_begin="1,1", pads_end="1,1", strides="2,2"), 14),
    ("AvgPool", 16, dict(auto_pad="explicit", exclude_pad="false", kernel="5,5", dilations="2,2", pads_begin="1,1", pads_end="1,1", strides="2,2"), 13),
    # ceil_torch: 5 + pads 0,1 with kernel 2 stride 2: ceil gives 3 windows, the last starts
    # at 4 < 5: kept. 5 + pads 1,1: ceil gives 4, the last starts at 6 - 1 = 5, in the end
    # padding: dropped (3); 4 + pads 1,1: 3 windows, the last starts at 3: kept
    ("MaxPool", 14, dict(kernel="2,2", pads_begin="0,0", pads_end="1,1", strides="2,2", rounding_type="ceil_torch"), None),
])
def test_pool14_16_spec_shapes(type_, opset, data, expected):
    impl, a = op(type_, opset, **data)
    if expected is None:
        (out, _) = impl.infer(a, TensorSpec.make("f32", [1, 3, 5, 4]))
        assert dims(out)[2:] == ["3", "2"]
        impl, a = op(type_, opset, **dict(data, pads_begin="1,1"))
        (out, _) = impl.infer(a, TensorSpec.make("f32", [1, 3, 5, 4]))
        assert dims(out)[2:] == ["3", "3"]
        impl, a = op(type_, opset, **dict(data, pads_begin="1,1", rounding_type="ceil"))
        (out, _) = impl.infer(a, TensorSpec.make("f32", [1, 3, 5, 4]))
        assert dims(out)[2:] == ["4", "3"]
        impl, a = op(type_, opset, **dict(data, pads_begin="1,1"))
        v, _ = impl.run(a, np.arange(20, dtype=np.float32).reshape(1, 1, 5, 4))
        assert v.shape == (1, 1, 3, 3)
        return
    outs = impl.infer(a, TensorSpec.make("f32", [1, 3, 32, 32]))
    assert all(dims(o) == ["1", "3", str(expected), str(expected)] for o in outs)


def test_ceil_torch_only_from_v14():
    from irrun.ir.registry import lookup, parse_attrs
    _, problems, _ = parse_attrs(lookup("MaxPool", "opset8").attrs,
                                 {"strides": "1", "kernel": "1", "rounding_type": "ceil_torch"})
    assert problems
    _, problems, _ = parse_attrs(lookup("AvgPool", "opset14").attrs,
                                 {"strides": "1", "kernel": "1", "exclude-pad": "true", "rounding_type": "ceil_torch"})
    assert not problems


def test_huge_kernel_is_vectorised():
    # kernel="200000" used to run a Python loop over every tap (7 s); now one window view per axis.
    impl, a = op("MaxPool", 8, strides="1", kernel="200000")
    x = np.random.default_rng(0).standard_normal((1, 1, 200010)).astype(np.float32)
    v, i = impl.run(a, x)
    ref = np.lib.stride_tricks.sliding_window_view(x[0, 0], 200000)
    np.testing.assert_array_equal(v[0, 0], ref.max(axis=-1))
    np.testing.assert_array_equal(i[0, 0], ref.argmax(axis=-1) + np.arange(11))


def test_adaptive_pools_by_hand_and_spec_shapes():
    impl, a = op("AdaptiveAvgPool", 8)
    (out,) = impl.infer(a, TensorSpec.make("f32", [1, 3, 32, 32]), TensorSpec.of_value(np.array([16, 16]), "i64"))
    assert dims(out) == ["1", "3", "16", "16"]
    x = np.array([[[1.0, 2.0, 3.0, 4.0, 5.0]]], np.float32)
    (y,) = impl.run(a, x, np.array([3]))
    # bins [0, 2), [1, 4), [3, 5)
    np.testing.assert_allclose(y, [[[1.5, 3.0, 4.5]]], rtol=1e-6)
    impl, a = op("AdaptiveMaxPool", 8, index_element_type="i32")
    v, i = impl.run(a, np.array([[[[1, 9], [9, 2]]]], np.float32), np.array([1, 1]))
    assert v.tolist() == [[[[9]]]] and i.tolist() == [[[[1]]]] and i.dtype == np.int32   # first in row-major
    with pytest.raises(irrun.errors.ShapeError, match="output_size .* has 1 values but the data has 2 spatial axes"):
        impl.infer(a, TensorSpec.make("f32", [1, 3, 4, 4]), TensorSpec.make("i64", [1]))
    with pytest.raises(irrun.errors.ShapeError, match="floating-point type"):
        impl.infer(a, TensorSpec.make("i32", [1, 3, 4, 4]), TensorSpec.make("i64", [2]))


@pytest.mark.oracle
@settings(max_examples=12)
@given(w=windows(), n=st.integers(1, 2), c=st.integers(1, 3), rounding=st.sampled_from(["floor", "ceil", "ceil_torch"]),
       kind=st.sampled_from(["max14", "avg14", "avg16"]), exclude=st.booleans(), seed=st.integers(0, 2**31))
def test_pool14_16_against_openvino(tmp_path_factory, w, n, c, rounding, kind, exclude, seed):
    import openvino.opset14 as o14
    import openvino.opset16 as o16
    ns = len(w["sizes"])
    dil = w["dil"] if kind != "avg14" else [1] * ns
    auto = _ov_pad(w["auto_pad"])
    # Stay where both are defined: no window entirely in the padding (the CPU plugin gives
    # NaN/-0 for AvgPool there), and pads below the kernel.
    assume(all(p < k and q < k for p, q, k in zip(w["pb"], w["pe"], w["kernel"])))
    assume(_fits(dict(w, dil=dil), dil, rounding != "floor", no_empty=True))
    x = np.random.default_rng(seed).standard_normal([n, c] + w["sizes"]).astype(np.float32)
    import openvino.opset8 as o8
    p = o8.parameter(list(x.shape), _ov().Type.f32, name="x")
    if kind == "max14":
        node = o14.max_pool(p, w["strides"], dil, w["pb"], w["pe"], w["kernel"], rounding, auto)
        nodes = [node.output(0), node.output(1)]
    elif kind == "avg14":
        nodes = [o14.avg_pool(p, w["strides"], w["pb"], w["pe"], w["kernel"], exclude, rounding, auto)]
    else:
        nodes = [o16.avg_pool(p, w["strides"], w["pb"], w["pe"], w["kernel"], exclude, rounding, auto, dilations=dil)]
    model = _ov().Model([o8.result(nd) for nd in nodes], [p])
    with __import__("tempfile").TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        try:
            _compare_patched(model, {"x": x}, w["auto_pad"], d, rtol=1e-5, atol=1e-6)
        except RuntimeError as e:
            assume("Exception from src/inference" not in str(e))
            raise


@pytest.mark.oracle
@settings(max_examples=10)
@given(ns=st.integers(1, 3), n=st.integers(1, 2), c=st.integers(1, 2), seed=st.integers(0, 2**31), data=st.data())
def test_adaptive_pools_against_openvino(tmp_path_factory, ns, n, c, seed, data):
    import openvino.opset8 as o8
    sizes = data.draw(st.lists(st.integers(1, 7), min_size=ns, max_size=ns))
    outs = data.draw(st.lists(st.integers(1, 7), min_size=ns, max_size=ns))
    x = np.random.default_rng(seed).standard_normal([n, c] + sizes).astype(np.float32)
    p = o8.parameter(list(x.shape), _ov().Type.f32, name="x")
    shape = o8.constant(np.array(outs, np.int64))
    mx = o8.adaptive_max_pool(p, shape, "i32")
    model = _ov().Model([o8.result(o8.adaptive_avg_pool(p, shape)), o8.result(mx.output(0)),
                         o8.result(mx.output(1))], [p])
    with __import__("tempfile").TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        _compare_patched(model, {"x": x}, "explicit", d, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- DeformableConvolution-1/8

DEF = dict(dilations="1,1", pads_begin="0,0", pads_end="0,0", strides="1,1", auto_pad="explicit", group="1")


@pytest.mark.parametrize("opset, dg, shapes", [
    # The pages' examples
    (1, "1", [[1, 4, 224, 224], [1, 50, 220, 220], [64, 4, 5, 5]]),
    (1, "4", [[1, 4, 224, 224], [1, 200, 220, 220], [64, 4, 5, 5]]),
    (8, "1", [[1, 4, 224, 224], [1, 50, 220, 220], [64, 4, 5, 5], [1, 25, 220, 220]]),
])
def test_deformable_spec_shapes(opset, dg, shapes):
    impl, a = op("DeformableConvolution", opset, deformable_group=dg, **DEF)
    (out,) = impl.infer(a, *[TensorSpec.make("f32", s) for s in shapes])
    assert dims(out) == ["1", "64", "220", "220"]


def test_deformable_zero_offsets_is_convolution_and_errors():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    impl, a = op("DeformableConvolution", 8, dilations="1,1", pads_begin="1,0", pads_end="1,1",
                 strides="2,1", group="2", deformable_group="2")
    off = np.zeros((1, 2 * 2 * 6, 3, 5), np.float32)
    (got,) = impl.run(a, x, off, np.concatenate([w, w]))
    cimpl, ca = op("GroupConvolution", 1, dilations="1,1", pads_begin="1,0", pads_end="1,1", strides="2,1")
    (ref,) = cimpl.run(ca, x, np.stack([w, w]))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    # an offset of exactly one row reads the next row
    off1 = off.copy()
    off1[:, 0::2] = 1.0
    (shifted,) = impl.run(a, x, off1, np.concatenate([w, w]))
    assert not np.allclose(shifted, got)
    with pytest.raises(irrun.errors.ShapeError, match="offsets .* must have 24 channels"):
        impl.infer(a, TensorSpec.make("f32", [1, 4, 6, 5]), TensorSpec.make("f32", [1, 12, 3, 5]),
                   TensorSpec.make("f32", [6, 2, 3, 2]))
    with pytest.raises(irrun.errors.ShapeError, match="must be 4-D"):
        impl.infer(a, TensorSpec.make("f32", [1, 4, 6]), TensorSpec.make("f32", [1, 12, 3]),
                   TensorSpec.make("f32", [6, 2, 3]))


@pytest.mark.oracle
@settings(max_examples=10)
@given(seed=st.integers(0, 2**31), data=st.data(), v8=st.booleans(), use_pad=st.booleans(), use_mask=st.booleans())
def test_deformable_against_openvino(tmp_path_factory, seed, data, v8, use_pad, use_mask):
    import openvino.opset1 as o1
    import openvino.opset8 as o8
    draw = data.draw
    rng = np.random.default_rng(seed)
    g, dg = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    cg = dg * draw(st.integers(1, 2))
    c, og, n = g * cg, draw(st.integers(1, 2)), draw(st.integers(1, 2))
    h, w = draw(st.integers(2, 5)), draw(st.integers(2, 5))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    s = [draw(st.integers(1, 2)) for _ in range(2)]
    d = [draw(st.integers(1, 2)) for _ in range(2)]
    pb = [draw(st.integers(0, 1)) for _ in range(2)]
    pe = [draw(st.integers(0, 1)) for _ in range(2)]
    ho = (h + pb[0] + pe[0] - ((kh - 1) * d[0] + 1)) // s[0] + 1
    wo = (w + pb[1] + pe[1] - ((kw - 1) * d[1] + 1)) // s[1] + 1
    assume(ho >= 1 and wo >= 1)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    off = (rng.standard_normal((n, 2 * dg * kh * kw, ho, wo)) * 1.5).astype(np.float32)
    filt = rng.standard_normal((og * g, cg, kh, kw)).astype(np.float32)
    m = rng.uniform(0, 1, (n, dg * kh * kw, ho, wo)).astype(np.float32)
    px = o8.parameter(list(x.shape), _ov().Type.f32, name="x")
    po = o8.parameter(list(off.shape), _ov().Type.f32, name="o")
    if v8:
        node = o8.deformable_convolution(px, po, o8.constant(filt), s, pb, pe, d,
                                         mask=o8.constant(m) if use_mask else None, group=g,
                                         deformable_group=dg, bilinear_interpolation_pad=use_pad)
    else:
        node = o1.deformable_convolution(px, po, o8.constant(filt), s, pb, pe, d, group=g, deformable_group=dg)
    model = _ov().Model([node], [px, po])
    with __import__("tempfile").TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as dd:
        _compare_patched(model, {"x": x, "o": off}, "explicit", dd, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- BinaryConvolution-1


def test_binary_convolution_spec_shape_and_textbook_loops():
    impl, a = op("BinaryConvolution", 1, dilations="1,1", pads_begin="2,2", pads_end="2,2", strides="1,1",
                 mode="xnor-popcount", pad_value="0", auto_pad="explicit")
    (out,) = impl.infer(a, TensorSpec.make("f32", [1, 3, 224, 224]), TensorSpec.make("u1", [64, 3, 5, 5]))
    assert dims(out) == ["1", "64", "224", "224"]          # the page's example
    rng = np.random.default_rng(2)
    x = rng.integers(0, 2, (2, 3, 5, 4)).astype(np.float32)
    w = rng.integers(0, 2, (2, 3, 3, 2)).astype(np.uint8)
    impl, a = op("BinaryConvolution", 1, dilations="1,2", pads_begin="1,0", pads_end="1,1", strides="2,1",
                 mode="xnor-popcount", pad_value="1")
    (got,) = impl.run(a, x, w)
    # The spec's algorithm by hand: pad with pad_value, count equal bits B, output 2 * P - B.
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (0, 1)], constant_values=1)
    ref = np.zeros(got.shape)
    for n, o, i, j in np.ndindex(*got.shape):
        patch = xp[n, :, i * 2:i * 2 + 3, j:j + 3:2]
        p = int((patch == w[o]).sum())
        ref[n, o, i, j] = 2 * p - w[o].size
    np.testing.assert_array_equal(got, ref)
    with pytest.raises(irrun.errors.ShapeError, match="filters must be u1"):
        impl.infer(a, TensorSpec.make("f32", [1, 3, 5, 5]), TensorSpec.make("f32", [2, 3, 3, 3]))


@given(w=windows(max_kernel=4), dtype=st.sampled_from(["float32", "float16", "int8", "uint8"]),
       seed=st.integers(0, 2**16))
def test_maxpool_values_are_the_per_tap_maximum(w, dtype, seed):
    """The separable, flat-buffer maximum (and MaxPool-1's values-only run) against the
    definition: the fmax over every tap's strided view, from the start value."""
    from irrun.ops.pooling import _geometry, _lowest, max_pool

    rng = np.random.default_rng(seed)
    x = rng.standard_normal([2, 3] + w["sizes"]) * 50
    if dtype.startswith("float"):
        x[rng.random(x.shape) < 0.1] = np.nan
        x[rng.random(x.shape) < 0.05] = -np.inf
    x = np.clip(x, -128, 127).astype(dtype) if dtype == "int8" else x.astype(dtype) \
        if dtype != "uint8" else np.abs(np.nan_to_num(x)).clip(0, 255).astype(dtype)
    text = lambda v: ",".join(map(str, v))  # noqa: E731
    impl, a = op("MaxPool", 8, strides=text(w["strides"]), kernel=text(w["kernel"]),
                 dilations=text(w["dil"]), pads_begin=text(w["pb"]), pads_end=text(w["pe"]),
                 auto_pad=w["auto_pad"])
    pb, counts, dil = _geometry(a, x)
    low = _lowest(x.dtype)
    # The definition, tap by tap, over an input padded with the start value.
    ns = x.ndim - 2
    lengths = [(counts[i] - 1) * a.strides[i] + (a.kernel[i] - 1) * dil[i] + 1 for i in range(ns)]
    padded = np.full(x.shape[:2] + tuple(lengths), low, x.dtype)
    inside = tuple(slice(max(pb[i], 0), min(pb[i] + x.shape[2 + i], lengths[i])) for i in range(ns))
    src = tuple(slice(s.start - pb[i], s.stop - pb[i]) for i, s in enumerate(inside))
    padded[(slice(None), slice(None)) + inside] = x[(slice(None), slice(None)) + src]
    want = np.full(x.shape[:2] + tuple(counts), low, x.dtype)
    for tap in np.ndindex(*a.kernel):
        view = padded[(slice(None), slice(None)) + tuple(
            slice(t * dil[i], t * dil[i] + (counts[i] - 1) * a.strides[i] + 1, a.strides[i])
            for i, t in enumerate(tap))]
        want = np.fmax(want, view)
    (values,) = max_pool(a, x, indices=False)
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(impl.run(a, x)[0], want)
    np.testing.assert_array_equal(impl.run_first(a, x)[0], want)


# 2-D AvgPool on f32/f64 runs the compiled loop of ops/pool_loop.py; the NumPy path (taken
# here by lowering MAX_AVG_KERNEL to 0) is the reference, bit for bit: zeros' signs, NaN
# and infinities included, over pads, ceil mode, auto_pad and both exclude-pad rules.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_avgpool_loop_gives_the_numpy_paths_bits(monkeypatch, dtype):
    from irrun.ops import pool_loop

    rng = np.random.default_rng(4)
    calls = []
    real = pool_loop._avg
    monkeypatch.setattr(pool_loop, "_avg", lambda *a: calls.append(1) or real(*a))
    for _ in range(150):
        k = [int(v) for v in rng.integers(1, 8, 2)]
        s = [int(v) for v in rng.integers(1, 4, 2)]
        pb = [int(rng.integers(0, k[0])), int(rng.integers(0, k[1]))]
        pe = [int(rng.integers(0, k[0])), int(rng.integers(0, k[1]))]
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(k[0], 14)),
                 int(rng.integers(k[1], 14)))
        x = (rng.standard_normal(shape) * 3).astype(dtype)
        x.reshape(-1)[rng.integers(0, x.size, 6)] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -0.0]
        join = lambda v: ",".join(map(str, v))  # noqa: E731
        impl, a = op("AvgPool", 14, strides=join(s), kernel=join(k), pads_begin=join(pb),
                     pads_end=join(pe), exclude_pad=str(bool(rng.integers(0, 2))).lower(),
                     rounding_type=str(rng.choice(["floor", "ceil", "ceil_torch"])),
                     auto_pad=str(rng.choice(["explicit", "explicit", "same_upper", "valid"])))
        try:
            (got,) = impl.run(a, x)
        except Exception:       # a kernel larger than the padded input: refused either way
            with pytest.raises(Exception):
                monkeypatch.setattr(pool_loop, "MAX_AVG_KERNEL", 0)
                impl.run(a, x)
            monkeypatch.setattr(pool_loop, "MAX_AVG_KERNEL", 7)
            continue
        monkeypatch.setattr(pool_loop, "MAX_AVG_KERNEL", 0)
        (want,) = impl.run(a, x)
        monkeypatch.setattr(pool_loop, "MAX_AVG_KERNEL", 7)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))
    assert len(calls) > 100
    # Split over the pool, plane by plane: the same bits.
    impl, a = op("AvgPool", 1, strides="2,2", kernel="3,3", pads_begin="1,1", pads_end="1,1",
                 exclude_pad="false")
    x = rng.standard_normal((4, 8, 16, 16)).astype(dtype)
    whole = impl.run(a, x)[0]
    monkeypatch.setattr(pool_loop, "MIN_WORK_PER_THREAD", 1)
    np.testing.assert_array_equal(impl.run(a, x)[0], whole)
