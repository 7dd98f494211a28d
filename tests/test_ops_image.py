"""Interpolate-1/4/11: spec examples, rules, and differential tests against OpenVINO's CPU
plugin over every mode, coordinate transformation and nearest mode."""
import tempfile

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from irrun.errors import ShapeError
from irrun.ir.shapes import Dim, TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1  # noqa: E402
import openvino.opset11 as o11  # noqa: E402
from test_ops_elementwise import S, infer, model, param, run_op  # noqa: E402

TRANSFORMS = ["half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"]


def V(values, etype):
    return TensorSpec.of_value(np.array(values, {"i64": np.int64, "i32": np.int32, "f32": np.float32}[etype]), etype)


def ov_outputs(outs, params, feed, tmp_path_factory):
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(model(outs, params), d)
        return oracle.ov_run(xml, feed), oracle.irrun_run(xml, feed)


# ---------------------------------------------------------------- spec examples and shapes

def test_interpolate11_spec_example_shape():
    # interpolate-11's example: bicubic_pillow, scales [0.5, 0.5]? The page gives [1,3,200,200]
    # -> [1,3,100,100] with scales on axes 2,3.
    (y,) = infer("Interpolate", {"mode": "bicubic_pillow", "shape_calculation_mode": "scales",
                                 "pads_begin": "0", "pads_end": "0"},
                 S("f32", [1, 3, 200, 200]), V([0.5, 0.5], "f32"), V([2, 3], "i64"), opset=11)
    assert format_shape(y.shape) == "[1,3,100,100]"


@pytest.mark.parametrize("opset, attrs, inputs, expected", [
    (4, {"mode": "linear", "shape_calculation_mode": "sizes", "pads_begin": "0,0,1,1", "pads_end": "0,0,1,1"},
     [S("f32", [1, 2, 48, 80]), V([50, 60], "i32"), V([0.5, 0.5], "f32"), V([2, 3], "i64")], "[1,2,50,60]"),
    (4, {"mode": "nearest", "shape_calculation_mode": "scales"},
     [S("f32", [1, 2, None, 10]), V([1, 1], "i32"), V([2.0, 0.7], "f32"), V([2, 3], "i64")], "[1,2,?,7]"),
    (11, {"mode": "nearest", "shape_calculation_mode": "scales"},
     [S("f32", [2, Dim(3, 5)]), V([1.5, 2.0], "f32")], "[3,6..10]"),
    (11, {"mode": "cubic", "shape_calculation_mode": "sizes", "pads_begin": "1"},
     [S("f32", [2, 4, 6]), V([9], "i64"), V([2], "i64")], "[3,4,9]"),   # pads fill with 0s
    (11, {"mode": "linear_onnx", "shape_calculation_mode": "sizes"},
     [S("f32", [1, 3, 8, 8]), S("i64", [2]), V([2, 3], "i64")], "[1,3,?,?]"),
    (1, {"axes": "2,3", "mode": "linear", "align_corners": "true"},
     [S("f32", [1, 3, 8, 8]), V([16, 4], "i64")], "[1,3,16,4]"),
])
def test_interpolate_shapes(opset, attrs, inputs, expected):
    (y,) = infer("Interpolate", attrs, *inputs, opset=opset)
    assert format_shape(y.shape) == expected


def test_scales_floor_like_openvino():
    # f32 product then floor with OpenVINO's small epsilon: 0.7 * 10 is 7; 0.29999 * 10 is 2.
    for s, n in [(0.7, 7), (0.299999, 3), (0.29999, 2), (1 / 3, 3)]:
        (y,) = infer("Interpolate", {"mode": "nearest", "shape_calculation_mode": "scales"},
                     S("f32", [10]), V([s], "f32"), opset=11)
        assert y.shape[0].value == n, s


def test_interpolate_errors():
    with pytest.raises(ShapeError, match="axes has 4 at position 1, out of range for rank 4"):
        infer("Interpolate", {"mode": "nearest", "shape_calculation_mode": "sizes"},
              S("f32", [1, 1, 2, 2]), V([2, 2], "i64"), V([2, 4], "i64"), opset=11)
    with pytest.raises(ShapeError, match="sizes has 3 values but there are 2 axes"):
        infer("Interpolate", {"mode": "nearest", "shape_calculation_mode": "sizes"},
              S("f32", [1, 1, 2, 2]), V([2, 2, 2], "i64"), V([2, 3], "i64"), opset=11)
    with pytest.raises(ShapeError, match="scales must be of a floating-point type"):
        infer("Interpolate", {"mode": "nearest", "shape_calculation_mode": "scales"},
              S("f32", [1, 1, 2, 2]), V([2, 2], "i64"), V([2, 3], "i64"), opset=11)
    with pytest.raises(ShapeError, match="axes must be distinct"):
        infer("Interpolate", {"mode": "nearest", "shape_calculation_mode": "sizes"},
              S("f32", [1, 1, 2, 2]), V([2, 2], "i64"), V([3, -1], "i64"), opset=11)
    with pytest.raises(ShapeError, match="mode='area' is not computable"):
        infer("Interpolate", {"axes": "2,3", "mode": "area"}, S("f32", [1, 1, 2, 2]), V([4, 4], "i64"))
    from irrun.errors import IrrunError
    with pytest.raises(IrrunError, match="exactly two axes"):
        run_op("Interpolate", {"mode": "bilinear_pillow", "shape_calculation_mode": "sizes"},
               np.ones((2, 2, 2), np.float32), np.array([3, 3, 3]), np.array([0, 1, 2]), opset=11)


def test_linear_antialias_and_pillow_cube_coeff_follow_the_spec():
    # linear with antialias widens the triangle by 1/scale (the spec's and reference's
    # formula; the CPU plugin ignores antialias): 2 -> 1 at x=0 weighs 1 and 1/2, normalised.
    (y,) = run_op("Interpolate", {"mode": "linear", "shape_calculation_mode": "sizes",
                                  "coordinate_transformation_mode": "asymmetric", "antialias": "true"},
                  np.array([3.0, 6.0], np.float32), np.array([1]), np.array([0]), opset=11)
    np.testing.assert_allclose(y, [4.0], rtol=1e-6)
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    outs = [run_op("Interpolate", {"mode": "bicubic_pillow", "shape_calculation_mode": "sizes",
                                   "cube_coeff": c}, x, np.array([2, 9]), np.array([0, 1]), opset=11)[0]
            for c in ("-0.5", "-0.75")]
    assert np.max(np.abs(outs[0] - outs[1])) > 1e-3      # cube_coeff is used, as the page says


def test_linear_onnx_and_nearest_by_hand():
    x = np.array([[1.0, 2.0, 4.0]], np.float32)
    # pytorch_half_pixel, x2: coords (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, ... clipped at 0
    (y,) = run_op("Interpolate", {"mode": "linear_onnx", "shape_calculation_mode": "scales",
                                  "coordinate_transformation_mode": "pytorch_half_pixel"},
                  x, np.array([2.0], np.float32), np.array([1]), opset=11)
    np.testing.assert_allclose(y, [[1, 1.25, 1.75, 2.5, 3.5, 4]], rtol=1e-6)
    (y,) = run_op("Interpolate", {"mode": "nearest", "shape_calculation_mode": "scales",
                                  "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
                  x, np.array([2.0], np.float32), np.array([1]), opset=11)
    assert y.tolist() == [[1, 1, 2, 2, 4, 4]]
    # align_corners linear: the corners stay
    (y,) = run_op("Interpolate", {"mode": "linear", "shape_calculation_mode": "sizes",
                                  "coordinate_transformation_mode": "align_corners"},
                  x, np.array([5]), np.array([1]), opset=11)
    np.testing.assert_allclose(y, [[1, 1.5, 2, 3, 4]], rtol=1e-6)


@pytest.mark.oracle
@settings(max_examples=14)
@given(rank=st.integers(1, 4), seed=st.integers(0, 2**31), data=st.data(),
       mode=st.sampled_from(["nearest", "linear", "linear_onnx", "cubic", "bilinear_pillow", "bicubic_pillow"]),
       ctm=st.sampled_from(TRANSFORMS), nearest=st.sampled_from(NEAREST), antialias=st.booleans(),
       by_sizes=st.booleans(), v4=st.booleans())
def test_interpolate_matches_openvino(tmp_path_factory, rank, seed, data, mode, ctm, nearest, antialias,
                                      by_sizes, v4):
    rng = np.random.default_rng(seed)
    shape = data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    # Where OpenVINO 2026.4's CPU plugin is right: it returns uninitialised memory for cubic
    # over 3+ axes or over non-trailing axes, and ignores antialias in linear mode and
    # cube_coeff in bicubic_pillow (always -0.5); irrun follows the spec and the reference.
    if mode in ("bilinear_pillow", "bicubic_pillow"):
        assume(rank >= 2 and not v4)
        axes = [rank - 2, rank - 1]
    elif mode == "linear_onnx":
        # OpenVINO's linear_onnx takes all axes, or all but N and C of a 4-D/5-D input
        assume(rank >= 2)
        axes = list(range(2, rank)) if rank >= 4 else list(range(rank))
    else:
        k = data.draw(st.integers(1, min(rank, 2) if mode == "cubic" else rank))
        axes = list(range(rank - k, rank))
    antialias = antialias and mode != "linear"
    cube = -0.5 if mode == "bicubic_pillow" else data.draw(st.sampled_from([-0.75, -0.5, -0.6]))
    x = rng.standard_normal(shape).astype(np.float32)
    if by_sizes:
        sizes = [data.draw(st.integers(1, 9)) for _ in axes]
        given_ = o1.constant(np.array(sizes, np.int64))
        scales = np.array([s / shape[a] for s, a in zip(sizes, axes)], np.float32)
    else:
        scales = np.array([data.draw(st.sampled_from([0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0])) for _ in axes], np.float32)
        assume(all(np.floor(s * shape[a] + 1e-5) >= 1 for s, a in zip(scales, axes)))
        given_ = o1.constant(scales)
    px = param("x", shape, "f32")
    kw = dict(mode=mode, shape_calculation_mode="sizes" if by_sizes else "scales",
              coordinate_transformation_mode=ctm, nearest_mode=nearest, antialias=antialias,
              cube_coeff=cube)
    if v4:
        # openvino.opset4.interpolate builds Interpolate-1: make Interpolate-4 with the factory.
        from openvino.utils.node_factory import NodeFactory
        ins = [px, o1.constant(np.array(sizes if by_sizes else [1] * len(axes), np.int64)),
               o1.constant(scales), o1.constant(np.array(axes, np.int64))]
        node = NodeFactory("opset4").create("Interpolate", [i.output(0) for i in ins],
                                            dict(kw, pads_begin=[0] * rank, pads_end=[0] * rank))
    else:
        # pads (zeros added before resampling) with sizes; with scales they would change the
        # rounding of the output size, which the assume() above does not cover
        pads = [[data.draw(st.integers(0, 1)) if by_sizes else 0 for _ in range(rank)] for _ in range(2)]
        node = o11.interpolate(px, given_, axes=o1.constant(np.array(axes, np.int64)),
                               pads_begin=pads[0], pads_end=pads[1], **kw)
    try:
        expected, got = ov_outputs([node], [px], {"x": x}, tmp_path_factory)
    except RuntimeError as e:
        assume("Exception from src/inference" not in str(e))   # the CPU plugin refuses some
        raise
    # Sums of a few f32 products in another order: a few ulp of the values (order 1).
    oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-5)


# Axes longer than 32 inputs: resampled tap by tap (the non-zero weights of each row gathered),
# or skipped where the weights are the identity (an image resampled to its own size).
LONG_AXES = [   # mode, transform, input [N, C, H, W], output (H, W)
    ("linear_onnx", "pytorch_half_pixel", (1, 3, 40, 48), (40, 48)),     # identity: skipped
    ("linear_onnx", "pytorch_half_pixel", (1, 2, 40, 36), (75, 90)),
    ("linear_onnx", "asymmetric", (2, 2, 33, 64), (17, 40)),
    ("linear_onnx", "align_corners", (1, 2, 33, 40), (66, 79)),
    ("linear_onnx", "half_pixel", (1, 1, 50, 34), (50, 100)),           # one axis identity
    ("cubic", "half_pixel", (1, 2, 36, 40), (80, 33)),
    ("cubic", "asymmetric", (1, 1, 40, 40), (40, 40)),                  # identity: skipped
    ("linear", "half_pixel", (1, 2, 40, 40), (64, 90)),
    ("bilinear_pillow", "half_pixel", (1, 2, 40, 36), (80, 72)),
    ("bicubic_pillow", "half_pixel", (1, 1, 40, 36), (60, 50)),
    ("nearest", "asymmetric", (1, 2, 40, 36), (80, 72)),
]


@pytest.mark.oracle
@pytest.mark.parametrize("mode, ctm, shape, sizes", LONG_AXES)
def test_interpolate_long_axes_match_openvino(tmp_path_factory, mode, ctm, shape, sizes):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    px = param("x", shape, "f32")
    node = o11.interpolate(px, o1.constant(np.array(sizes, np.int64)),
                           axes=o1.constant(np.array([2, 3], np.int64)), mode=mode,
                           shape_calculation_mode="sizes", coordinate_transformation_mode=ctm,
                           cube_coeff=-0.5 if mode == "bicubic_pillow" else -0.75)
    expected, got = ov_outputs([node], [px], {"x": x}, tmp_path_factory)
    oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-5)
    if shape[2:] == sizes:
        np.testing.assert_array_equal(got[0], x)       # the identity gives the input's bits


def test_interpolate_long_axes_take_taps_and_skip_identities():
    from irrun.ops import image

    plans = {}
    for mode, ctm, shape, sizes in LONG_AXES:
        x = np.ones(shape, np.float32)
        run_op("Interpolate", {"mode": mode, "shape_calculation_mode": "sizes",
                               "coordinate_transformation_mode": ctm},
               x, np.array(sizes), np.array([2, 3]), opset=11)
        for n_in, n_out in zip(shape[2:], sizes):
            plan = image._axis_plan(*_plan_key(image, mode, ctm, n_in, n_out))
            plans[(mode, n_in, n_out)] = None if plan is None else plan[0]
    assert plans[("linear_onnx", 40, 40)] is None and plans[("cubic", 40, 40)] is None
    assert plans[("linear_onnx", 40, 75)] == "taps" and plans[("cubic", 36, 80)] == "taps"
    assert plans[("bilinear_pillow", 40, 80)] == "taps"


def _plan_key(image, mode, ctm, n_in, n_out):
    attrs = image.Interpolate11Attrs(mode=mode, shape_calculation_mode="sizes",
                                     coordinate_transformation_mode=ctm)
    scale = float(np.float32(n_out) / np.float32(n_in))
    return attrs, mode, n_in, n_out, scale, np.float32(1), mode == "linear"


@pytest.mark.oracle
@settings(max_examples=8)
@given(rank=st.integers(3, 4), seed=st.integers(0, 2**31), data=st.data(),
       mode=st.sampled_from(["nearest", "linear", "cubic"]), align=st.booleans())
def test_interpolate1_matches_openvino(tmp_path_factory, rank, seed, data, mode, align):
    rng = np.random.default_rng(seed)
    shape = data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    axes = list(range(2, rank))
    sizes = [data.draw(st.integers(1, 9)) for _ in axes]
    x = rng.standard_normal(shape).astype(np.float32)
    px = param("x", shape, "f32")
    node = o1.interpolate(px, o1.constant(np.array(sizes, np.int64)),
                          {"axes": axes, "mode": mode, "align_corners": align, "antialias": False,
                           "pads_begin": [0] * rank, "pads_end": [0] * rank})
    try:
        expected, got = ov_outputs([node], [px], {"x": x}, tmp_path_factory)
    except RuntimeError as e:
        assume("Exception from src/inference" not in str(e))
        raise
    oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- NV12/I420 to RGB/BGR

import openvino.opset8 as o8  # noqa: E402


@pytest.mark.parametrize("type_, shapes, out", [
    # The pages' examples
    ("NV12toRGB", [[1, 720, 640, 1]], "[1,480,640,3]"),
    ("NV12toBGR", [[1, 480, 640, 1], [1, 240, 320, 2]], "[1,480,640,3]"),
    ("I420toRGB", [[1, 720, 640, 1]], "[1,480,640,3]"),
    ("I420toBGR", [[1, 480, 640, 1], [1, 240, 320, 1], [1, 240, 320, 1]], "[1,480,640,3]"),
    ("NV12toRGB", [[None, 6, None, 1]], "[?,4,?,3]"),
])
def test_color_spec_shapes(type_, shapes, out):
    (y,) = infer(type_, {}, *[S("u8", s) for s in shapes], opset=8)
    assert format_shape(y.shape) == out and y.etype.name == "u8"


def test_color_formula_and_errors():
    y = np.full((1, 2, 2, 1), 16 + 100, np.float32)
    uv = np.array([[[[128 + 10, 128 - 20]]]], np.float32)
    (rgb,) = run_op("NV12toRGB", {}, y, uv, opset=8)
    c, d, e = 100.0, 10.0, -20.0
    np.testing.assert_allclose(rgb[0, 0, 0], [1.164 * c + 1.596 * e, 1.164 * c - 0.391 * d - 0.813 * e,
                                              1.164 * c + 2.018 * d], rtol=1e-6)
    (bgr,) = run_op("NV12toBGR", {}, y, uv, opset=8)
    np.testing.assert_array_equal(bgr[..., ::-1], rgb)
    (u8,) = run_op("I420toRGB", {}, np.full((1, 3, 2, 1), 255, np.uint8), opset=8)
    assert u8.dtype == np.uint8 and u8.max() == 255                # clamped
    with pytest.raises(ShapeError, match="not divisible by 3"):
        infer("NV12toRGB", {}, S("u8", [1, 7, 4, 1]), opset=8)
    with pytest.raises(ShapeError, match="width must be even"):
        infer("NV12toRGB", {}, S("u8", [1, 6, 3, 1]), opset=8)
    with pytest.raises(ShapeError, match=r"input 1 must be \[N, H/2, W/2, 2\]"):
        infer("NV12toRGB", {}, S("u8", [1, 4, 4, 1]), S("u8", [1, 2, 2, 1]), opset=8)
    with pytest.raises(ShapeError, match="takes u8 or floating-point planes"):
        infer("I420toRGB", {}, S("i32", [1, 6, 4, 1]), opset=8)


@pytest.mark.oracle
@settings(max_examples=8)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 2), h=st.integers(1, 4), w=st.integers(1, 4),
       kind=st.sampled_from(["nv12_rgb", "nv12_bgr", "i420_rgb", "i420_bgr"]), single=st.booleans(),
       etype=st.sampled_from(["u8", "f32"]))
def test_color_matches_openvino(tmp_path_factory, seed, n, h, w, kind, single, etype):
    rng = np.random.default_rng(seed)
    H, W = 2 * h, 2 * w
    dt = np.uint8 if etype == "u8" else np.float32
    fn = {"nv12_rgb": o8.nv12_to_rgb, "nv12_bgr": o8.nv12_to_bgr, "i420_rgb": o8.i420_to_rgb,
          "i420_bgr": o8.i420_to_bgr}[kind]
    if single:
        shapes = [[n, H * 3 // 2, W, 1]]
    elif kind.startswith("nv12"):
        shapes = [[n, H, W, 1], [n, h, w, 2]]
    else:
        shapes = [[n, H, W, 1], [n, h, w, 1], [n, h, w, 1]]
    params = [param(f"p{i}", s, etype) for i, s in enumerate(shapes)]
    feed = {f"p{i}": rng.integers(0, 256, s).astype(dt) for i, s in enumerate(shapes)}
    expected, got = ov_outputs([fn(*params)], params, feed, tmp_path_factory)
    if etype == "u8":
        # f32 sums of three products: a value at a rounding half may go either way: at most 1.
        assert got[0].dtype == expected[0].dtype and got[0].shape == expected[0].shape
        assert np.abs(got[0].astype(int) - expected[0].astype(int)).max() <= 1
    else:
        oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- GridSample-9

import openvino.opset9 as o9  # noqa: E402


def test_grid_sample_shapes_and_errors():
    # The page's example: data [1,2,3,5], grid [1,10,8,2] -> [1,2,10,8]
    (y,) = infer("GridSample", {"align_corners": "true", "mode": "nearest", "padding_mode": "border"},
                 S("f32", [1, 2, 3, 5]), S("f32", [1, 10, 8, 2]), opset=9)
    assert format_shape(y.shape) == "[1,2,10,8]"
    (y,) = infer("GridSample", {}, S("f32", [None, 2, 3, 5]), S("f32", [4, None, 8, 2]), opset=9)
    assert format_shape(y.shape) == "[4,2,?,8]"
    with pytest.raises(ShapeError, match="grid's last dim must be 2"):
        infer("GridSample", {}, S("f32", [1, 2, 3, 5]), S("f32", [1, 4, 4, 3]), opset=9)
    with pytest.raises(ShapeError, match="batch 1 and grid batch 2 differ"):
        infer("GridSample", {}, S("f32", [1, 2, 3, 5]), S("f32", [2, 4, 4, 2]), opset=9)
    # corners with align_corners: -1 and 1 land on the first and last pixels
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    (y,) = run_op("GridSample", {"align_corners": "true"}, x,
                  np.array([[[[-1, -1], [1, 1], [0, 0]]]], np.float32), opset=9)
    np.testing.assert_allclose(y, [[[[0, 5, 2.5]]]], rtol=1e-6)


@pytest.mark.oracle
@settings(max_examples=10)
@given(seed=st.integers(0, 2**31), shape=st.lists(st.integers(1, 4), min_size=4, max_size=4),
       out=st.lists(st.integers(1, 4), min_size=2, max_size=2), mode=st.sampled_from(["bilinear", "bicubic", "nearest"]),
       pad=st.sampled_from(["zeros", "border", "reflection"]), align=st.booleans())
def test_grid_sample_matches_openvino(tmp_path_factory, seed, shape, out, mode, pad, align):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.uniform(-1.6, 1.6, [shape[0]] + out + [2]).astype(np.float32)
    px, pg = param("x", shape, "f32"), param("g", g.shape, "f32")
    node = o9.grid_sample(px, pg, {"align_corners": align, "mode": mode, "padding_mode": pad})
    expected, got = ov_outputs([node], [px, pg], {"x": x, "g": g}, tmp_path_factory)
    oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-5)


# raft_small's correlation lookups: many batches of one channel, 7x7 samples each; and
# several channels, where the samples are gathered as rows of C values.
@pytest.mark.oracle
@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("shape, out", [((64, 1, 8, 8), (7, 7)), ((2, 5, 9, 11), (6, 13))])
def test_grid_sample_batches_and_channels_match_openvino(tmp_path_factory, mode, pad, shape, out):
    rng = np.random.default_rng(shape[1])
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.uniform(-1.3, 1.3, [shape[0], *out, 2]).astype(np.float32)
    px, pg = param("x", shape, "f32"), param("g", g.shape, "f32")
    for align in (False, True):
        node = o9.grid_sample(px, pg, {"align_corners": align, "mode": mode, "padding_mode": pad})
        expected, got = ov_outputs([node], [px, pg], {"x": x, "g": g}, tmp_path_factory)
        assert got[0].flags.c_contiguous
        oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-5)


def _bilinear_numpy(x, g, pad, align):
    """GridSample's bilinear mode step by step in NumPy, in x's type (the loop's reference)."""
    from irrun.ops import image

    t = x.dtype.type
    n, c, h, w = x.shape
    gx, gy = g[..., 0], g[..., 1]
    if align:
        xd, yd = (gx + t(1)) * (t(w) - t(1)) / t(2), (gy + t(1)) * (t(h) - t(1)) / t(2)
    else:
        xd, yd = ((gx + t(1)) * t(w) - t(1)) / t(2), ((gy + t(1)) * t(h) - t(1)) / t(2)
    y0, x0 = np.floor(yd), np.floor(xd)
    dy, dx = (yd - y0)[:, None], (xd - x0)[:, None]
    y0, x0 = y0.astype(np.int64), x0.astype(np.int64)
    attrs = image.GridSampleAttrs(align_corners=align, padding_mode=pad)

    def at(yi, xi):
        yy, my = image._grid_taps(attrs, yi, h)
        xx, mx = image._grid_taps(attrs, xi, w)
        v = np.moveaxis(x[np.arange(n).reshape(n, 1, 1), :, yy, xx], -1, 1)
        return v if my is None else np.where((my & mx)[:, None], v, 0)

    q0 = (1 - dx) * at(y0, x0) + dx * at(y0, x0 + 1)
    q1 = (1 - dx) * at(y0 + 1, x0) + dx * at(y0 + 1, x0 + 1)
    return dy * q1 + (1 - dy) * q0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("shape", [(9, 1, 5, 7), (2, 3, 1, 4), (3, 2, 6, 1)])
def test_grid_sample_bilinear_loop_gives_numpys_bits(monkeypatch, dtype, pad, shape):
    from irrun.ops import grid_sample_loop

    rng = np.random.default_rng(shape[0])
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.uniform(-3, 3, (shape[0], 4, 6, 2)).astype(dtype)
    g[0, 0, 0] = [1e15, -1e15]        # far outside: padded as any outside coordinate
    for align in (False, True):
        attrs = dict(align_corners="true" if align else "false", padding_mode=pad)
        (got,) = run_op("GridSample", attrs, x, g, opset=9)
        assert got.dtype == dtype
        want = _bilinear_numpy(x, g, pad, align)
        np.testing.assert_array_equal(got, want)
        # Split over the pool, batch by batch: the same bits.
        monkeypatch.setattr(grid_sample_loop, "MIN_WORK_PER_THREAD", 1)
        np.testing.assert_array_equal(run_op("GridSample", attrs, x, g, opset=9)[0], got)
        monkeypatch.undo()


# ---------------------------------------------------------------- Col2Im-15

import openvino.opset15 as o15  # noqa: E402


def test_col2im_shapes_sum_and_errors():
    # The page's examples 1 and 4 (output 16x16, kernel 2x2): [3,12,225] -> [3,3,16,16] and
    # [12,225] -> [3,16,16]. (Examples 2 and 3 print inconsistent shapes.)
    (y,) = infer("Col2Im", {}, S("f32", [3, 12, 225]), V([16, 16], "i64"), V([2, 2], "i64"), opset=15)
    assert format_shape(y.shape) == "[3,3,16,16]"
    (y,) = infer("Col2Im", {}, S("f32", [12, 225]), V([16, 16], "i32"), V([2, 2], "i32"), opset=15)
    assert format_shape(y.shape) == "[3,16,16]"
    with pytest.raises(ShapeError, match="makes 15 x 15 = 225"):
        infer("Col2Im", {}, S("f32", [3, 12, 81]), V([16, 16], "i64"), V([2, 2], "i64"), opset=15)
    # overlapping blocks add up: a 2x2 kernel of ones over a 3x3 image counts the covers
    x = np.ones((1, 4, 4), np.float32)
    (y,) = run_op("Col2Im", {}, x, np.array([3, 3]), np.array([2, 2]), opset=15)
    assert y.tolist() == [[[[1, 2, 1], [2, 4, 2], [1, 2, 1]]]]


@pytest.mark.oracle
@settings(max_examples=8)
@given(seed=st.integers(0, 2**31), data=st.data(), batched=st.booleans())
def test_col2im_matches_openvino(tmp_path_factory, seed, data, batched):
    draw = data.draw
    out = [draw(st.integers(1, 6)) for _ in range(2)]
    k = [draw(st.integers(1, 3)) for _ in range(2)]
    st_ = [draw(st.integers(1, 2)) for _ in range(2)]
    dil = [draw(st.integers(1, 2)) for _ in range(2)]
    pb = [draw(st.integers(0, 1)) for _ in range(2)]
    pe = [draw(st.integers(0, 1)) for _ in range(2)]
    blocks = [(o + p + q - d * (kk - 1) - 1) // s + 1 for o, p, q, d, kk, s in zip(out, pb, pe, dil, k, st_)]
    assume(all(b >= 1 for b in blocks))
    c = draw(st.integers(1, 2))
    shape = ([draw(st.integers(1, 2))] if batched else []) + [c * k[0] * k[1], blocks[0] * blocks[1]]
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    px = param("x", shape, "f32")
    node = o15.col2im(px, o1.constant(np.array(out, np.int64)), o1.constant(np.array(k, np.int64)),
                      st_, dil, pb, pe)
    expected, got = ov_outputs([node], [px], {"x": x}, tmp_path_factory)
    oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-5)


@pytest.mark.oracle
@settings(max_examples=8)
@given(seed=st.integers(0, 2**31), data=st.data(), mode=st.sampled_from(["nearest", "linear", "linear_onnx", "cubic"]))
def test_interpolate_u8_images_match_openvino(tmp_path_factory, seed, data, mode):
    # u8 results: round half to even and saturate, as the CPU plugin does
    rng = np.random.default_rng(seed)
    shape = [1, data.draw(st.integers(1, 3)), data.draw(st.integers(2, 7)), data.draw(st.integers(2, 7))]
    sizes = [data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9))]
    x = rng.integers(0, 256, shape).astype(np.uint8)
    px = param("x", shape, "u8")
    node = o11.interpolate(px, o1.constant(np.array(sizes, np.int64)), mode=mode, shape_calculation_mode="sizes",
                           axes=o1.constant(np.array([2, 3], np.int64)))
    expected, got = ov_outputs([node], [px], {"x": x}, tmp_path_factory)
    oracle.assert_same(got[0], expected[0])
