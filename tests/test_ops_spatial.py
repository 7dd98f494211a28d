"""Pad-1/12 and the space/depth moves: spec examples, rules, and differential tests against
OpenVINO's CPU plugin."""
import tempfile

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from irrun.errors import ShapeError
from irrun.ir.shapes import TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1  # noqa: E402
import openvino.opset12 as o12  # noqa: E402
from test_ops_elementwise import DTYPES, S, infer, model, param, run_op  # noqa: E402

DATA = np.arange(1, 13, dtype=np.float32).reshape(3, 4)


def V(values, etype="i64"):
    """A spec with a known value (a Const input)."""
    return TensorSpec.of_value(np.array(values, DTYPES[etype]), etype)


def ov_compare(outs, params, feed, tmp_path_factory, **tol):
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(model(outs, params), d)
        expected = oracle.ov_run(xml, feed)
        got = oracle.irrun_run(xml, feed)
    for g, e in zip(got, expected):
        oracle.assert_same(g, e, **tol)


# ---------------------------------------------------------------- Pad

PAD_EXAMPLES = {  # Pad-12's page, verbatim
    ((0, 1), (2, 3)): {
        "constant": [[0, 1, 2, 3, 4, 0, 0, 0], [0, 5, 6, 7, 8, 0, 0, 0], [0, 9, 10, 11, 12, 0, 0, 0],
                     [0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]],
        "edge": [[1, 1, 2, 3, 4, 4, 4, 4], [5, 5, 6, 7, 8, 8, 8, 8], [9, 9, 10, 11, 12, 12, 12, 12],
                 [9, 9, 10, 11, 12, 12, 12, 12], [9, 9, 10, 11, 12, 12, 12, 12]],
        "reflect": [[2, 1, 2, 3, 4, 3, 2, 1], [6, 5, 6, 7, 8, 7, 6, 5], [10, 9, 10, 11, 12, 11, 10, 9],
                    [6, 5, 6, 7, 8, 7, 6, 5], [2, 1, 2, 3, 4, 3, 2, 1]],
        "symmetric": [[1, 1, 2, 3, 4, 4, 3, 2], [5, 5, 6, 7, 8, 8, 7, 6], [9, 9, 10, 11, 12, 12, 11, 10],
                      [9, 9, 10, 11, 12, 12, 11, 10], [5, 5, 6, 7, 8, 8, 7, 6]],
    },
    ((-1, -1), (-1, -1)): {m: [[6, 7]] for m in ("constant", "edge", "reflect", "symmetric")},
    ((2, -1), (-1, 3)): {
        "constant": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [2, 3, 4, 0, 0, 0], [6, 7, 8, 0, 0, 0]],
        "edge": [[2, 3, 4, 4, 4, 4], [2, 3, 4, 4, 4, 4], [2, 3, 4, 4, 4, 4], [6, 7, 8, 8, 8, 8]],
        "reflect": [[10, 11, 12, 11, 10, 9], [6, 7, 8, 7, 6, 5], [2, 3, 4, 3, 2, 1], [6, 7, 8, 7, 6, 5]],
        "symmetric": [[6, 7, 8, 8, 7, 6], [2, 3, 4, 4, 3, 2], [2, 3, 4, 4, 3, 2], [6, 7, 8, 8, 7, 6]],
    },
}


@pytest.mark.parametrize("pads, mode", [(p, m) for p in PAD_EXAMPLES for m in PAD_EXAMPLES[p]])
def test_pad12_spec_examples(pads, mode):
    b, e = (np.array(v, np.int64) for v in pads)
    (y,) = run_op("Pad", {"pad_mode": mode}, DATA, b, e, opset=12)
    assert y.tolist() == PAD_EXAMPLES[pads][mode]
    (spec,) = infer("Pad", {"pad_mode": mode}, S("f32", [3, 4]), V(b), V(e), opset=12)
    assert [d.value for d in spec.shape] == list(y.shape)
    if min(pads[0] + pads[1]) >= 0:
        (y1,) = run_op("Pad", {"pad_mode": mode}, DATA, b, e)     # Pad-1: the same
        assert y1.tolist() == y.tolist()


def test_pad_spec_xml_shapes_and_pad_value():
    # Pad-1's page: [1,3,32,40] with pads [0,5,2,1] and [1,0,3,7] gives [2,8,37,48], pad_value 15
    (spec,) = infer("Pad", {"pad_mode": "constant"}, S("f32", [1, 3, 32, 40]), V([0, 5, 2, 1]),
                    V([1, 0, 3, 7]), S("f32", []))
    assert format_shape(spec.shape) == "[2,8,37,48]"
    (y,) = run_op("Pad", {"pad_mode": "constant"}, np.ones((1, 2), np.float32), np.array([0, 1]),
                  np.array([0, 0]), np.float32(15))
    assert y.tolist() == [[15, 1, 1]]
    # Dynamic data dims and unknown pads
    (spec,) = infer("Pad", {"pad_mode": "edge"}, S("f32", [None, 3]), V([1, 1]), V([1, -2]), opset=12)
    assert format_shape(spec.shape) == "[2..,2]"
    (spec,) = infer("Pad", {"pad_mode": "edge"}, S("f32", [4, 3]), S("i64", [2]), V([1, 1]), opset=12)
    assert format_shape(spec.shape) == "[?,?]"
    (spec,) = infer("Pad", {"pad_mode": "edge"}, S("f32", [4, 3]), V([0, -5]), V([0, 1]), opset=12)
    assert format_shape(spec.shape) == "[4,0]"       # max(.., 0)


def test_pad_errors():
    with pytest.raises(ShapeError, match="reflect padding needs pads below the dim: axis 1 has size 4 and pads 4,0"):
        infer("Pad", {"pad_mode": "reflect"}, S("f32", [3, 4]), V([0, 4]), V([0, 0]), opset=12)
    with pytest.raises(ShapeError, match="symmetric padding needs pads at most the dim"):
        infer("Pad", {"pad_mode": "symmetric"}, S("f32", [3, 4]), V([0, 0]), V([4, 0]), opset=12)
    with pytest.raises(ShapeError, match="Pad-1 pads_end must be non-negative"):
        infer("Pad", {"pad_mode": "constant"}, S("f32", [3, 4]), V([0, 0]), V([-1, 0]))
    with pytest.raises(ShapeError, match=r"pads_begin \(input 1\) has 3 elements but the data has rank 2"):
        infer("Pad", {"pad_mode": "constant"}, S("f32", [3, 4]), V([0, 0, 0]), V([0, 0]), opset=12)
    from irrun.opkit.problems import collect_warnings, stop_collecting
    sink = []
    token = collect_warnings(sink)
    try:
        infer("Pad", {"pad_mode": "edge"}, S("f32", [3]), V([0]), V([0]), V(1.5, "f32"), opset=12)
    finally:
        stop_collecting(token)
    assert sink == [("value", "Pad pad_value (input 3) is ignored with pad_mode='edge'")]
    with pytest.raises(ShapeError, match="must have an integer element type"):
        infer("Pad", {"pad_mode": "edge"}, S("f32", [3]), S("f32", [1]), V([0]), opset=12)


def test_pad_kernel_checks_values_and_allocation():
    from irrun.errors import IrrunError
    from irrun.opkit import ResourceError
    from irrun.ir.registry import lookup, parse_attrs
    op = lookup("Pad", "opset12")
    a, _, _ = parse_attrs(op.attrs, {"pad_mode": "reflect"})
    with pytest.raises(IrrunError, match="reflect padding needs pads below the dim: axis 0 has size 3 and pads 3,0"):
        op.run(a, DATA, np.array([3, 0]), np.array([0, 0]))
    a, _, _ = parse_attrs(op.attrs, {"pad_mode": "constant"})
    with pytest.raises(ResourceError, match="the Pad output"):
        op.run(a, DATA, np.array([1 << 40, 0]), np.array([0, 0]))


@pytest.mark.oracle
@settings(max_examples=12)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), seed=st.integers(0, 2**32 - 1),
       mode=st.sampled_from(["constant", "edge", "reflect", "symmetric"]),
       etype=st.sampled_from(["f32", "i32"]), v12=st.booleans(), data=st.data())
def test_pad_matches_openvino(tmp_path_factory, shape, seed, mode, etype, v12, data):
    rng = np.random.default_rng(seed)
    hi = {"reflect": lambda s: s - 1, "symmetric": lambda s: s}.get(mode, lambda s: 3)
    lo = (lambda s: -s) if v12 else (lambda s: 0)
    b = [data.draw(st.integers(lo(s), hi(s))) for s in shape]
    e = [data.draw(st.integers(lo(s), hi(s))) for s in shape]
    assume(all(s + p + q >= 1 for s, p, q in zip(shape, b, e)))   # the CPU plugin refuses empty outputs
    x = (rng.integers(-100, 100, shape)).astype(DTYPES[etype])
    px = param("x", shape, etype)
    args = [px, oracle.i64(b), oracle.i64(e), mode]
    if mode == "constant" and data.draw(st.booleans()):
        args.append(o1.constant(np.array(7, DTYPES[etype])))
    out = (o12 if v12 else o1).pad(*args)
    ov_compare([out], [px], {"x": x}, tmp_path_factory)


@pytest.mark.oracle
@pytest.mark.parametrize("b, e, value", [
    ([0, 0, 0], [0, 0, 0], 0.0),           # torch_fasterrcnn's: the data as it is
    ([0, -2, -1], [0, -1, -3], 0.0),       # crops only
    ([1, -2, 3], [0, 2, -1], np.nan),      # both, a NaN pad value
])
def test_pad_constant_zero_crop_and_mixed_match_openvino(b, e, value, tmp_path_factory):
    x = np.random.default_rng(4).standard_normal((3, 6, 7)).astype(np.float32)
    px = param("x", [3, 6, 7], "f32")
    out = o12.pad(px, oracle.i64(b), oracle.i64(e), "constant", o1.constant(np.array(value, np.float32)))
    ov_compare([out], [px], {"x": x}, tmp_path_factory)


# ---------------------------------------------------------------- DepthToSpace, SpaceToDepth,
# BatchToSpace, SpaceToBatch, ShuffleChannels, Roll, ExtractImagePatches, Squeeze-15

import openvino.opset2 as o2  # noqa: E402
import openvino.opset3 as o3  # noqa: E402
import openvino.opset7 as o7  # noqa: E402


@pytest.mark.parametrize("type_, opset, attrs, shapes, out", [
    # The pages' XML examples
    ("DepthToSpace", 1, {"block_size": "2", "mode": "blocks_first"}, [[5, 28, 2, 3]], "[5,7,4,6]"),
    ("SpaceToDepth", 1, {"block_size": "2", "mode": "blocks_first"}, [[5, 7, 4, 6]], "[5,28,2,3]"),
    ("ShuffleChannels", 1, {"axis": "1", "group": "3"}, [[5, 12, 200, 400]], "[5,12,200,400]"),
    ("ExtractImagePatches", 3, {"sizes": "3,3", "strides": "5,5", "rates": "1,1", "auto_pad": "valid"},
     [[64, 3, 10, 10]], "[64,27,2,2]"),
    ("ExtractImagePatches", 3, {"sizes": "4,4", "strides": "8,8", "rates": "1,1", "auto_pad": "valid"},
     [[1, 1, 10, 10]], "[1,16,1,1]"),
    ("ExtractImagePatches", 3, {"sizes": "4,4", "strides": "9,9", "rates": "1,1", "auto_pad": "same_upper"},
     [[1, 1, 10, 10]], "[1,16,2,2]"),
    ("ExtractImagePatches", 3, {"sizes": "3,3", "strides": "5,5", "rates": "2,2", "auto_pad": "valid"},
     [[1, 1, 10, 10]], "[1,9,2,2]"),
    ("DepthToSpace", 1, {"block_size": "2", "mode": "depth_first"}, [[None, 8, 3]], "[?,4,6]"),
])
def test_move_spec_shapes(type_, opset, attrs, shapes, out):
    (y,) = infer(type_, attrs, *[S("f32", s) for s in shapes], opset=opset)
    assert format_shape(y.shape) == out


def test_batch_space_spec_shapes_and_values():
    (y,) = infer("BatchToSpace", {}, S("f32", [48, 3, 3, 1, 3]), V([1, 2, 4, 3, 1]), V([0, 3, 1, 0, 0]),
                 V([0, 1, 0, 0, 0]), opset=2)
    assert format_shape(y.shape) == "[2,2,11,3,3]"
    (y,) = infer("SpaceToBatch", {}, S("f32", [2, 6, 4, 3]), V([1, 2, 4, 3]), V([0, 1, 0, 3]),
                 V([0, 3, 0, 0]), opset=2)
    assert format_shape(y.shape) == "[48,5,1,2]"
    x = np.arange(2 * 6 * 4 * 3, dtype=np.float32).reshape(2, 6, 4, 3)
    (z,) = run_op("SpaceToBatch", {}, x, np.array([1, 2, 4, 3]), np.array([0, 1, 0, 3]), np.array([0, 3, 0, 0]), opset=2)
    (back,) = run_op("BatchToSpace", {}, z, np.array([1, 2, 4, 3]), np.array([0, 1, 0, 3]), np.array([0, 3, 0, 0]), opset=2)
    np.testing.assert_array_equal(back, x)                     # the two are inverses
    x = np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1)
    (d,) = run_op("DepthToSpace", {"block_size": "2", "mode": "blocks_first"}, x)
    (s,) = run_op("SpaceToDepth", {"block_size": "2", "mode": "blocks_first"}, d)
    np.testing.assert_array_equal(s, x)


def test_move_errors():
    with pytest.raises(ShapeError, match=r"channels \(6\) are not divisible by block_size\^2 = 4"):
        infer("DepthToSpace", {"block_size": "2", "mode": "blocks_first"}, S("f32", [1, 6, 2, 2]))
    with pytest.raises(ShapeError, match="block_shape .* must start with 1"):
        infer("BatchToSpace", {}, S("f32", [4, 2]), V([2, 2]), V([0, 0]), V([0, 0]), opset=2)
    with pytest.raises(ShapeError, match=r"batch \(5\) is not divisible"):
        infer("BatchToSpace", {}, S("f32", [5, 2]), V([1, 2]), V([0, 0]), V([0, 0]), opset=2)
    with pytest.raises(ShapeError, match=r"padded dim 1 \(5\) is not divisible by block 2"):
        infer("SpaceToBatch", {}, S("f32", [1, 4]), V([1, 2]), V([0, 1]), V([0, 0]), opset=2)
    with pytest.raises(ShapeError, match=r"dim 1 \(12\) is not divisible by group 5"):
        infer("ShuffleChannels", {"axis": "1", "group": "5"}, S("f32", [1, 12]))
    with pytest.raises(ShapeError, match="Roll axes value 2 is out of range"):
        infer("Roll", {}, S("f32", [3, 4]), V([1]), V([2]), opset=7)
    with pytest.raises(ShapeError, match="attribute sizes needs 2 values"):
        infer("ExtractImagePatches", {"sizes": "3", "strides": "1,1", "rates": "1,1", "auto_pad": "valid"},
              S("f32", [1, 1, 4, 4]), opset=3)


def test_roll_and_squeeze15():
    x = np.arange(6).reshape(2, 3)
    (y,) = run_op("Roll", {}, x, np.array([1, 1]), np.array([1, 1]), opset=7)
    assert y.tolist() == np.roll(x, 2, axis=1).tolist()            # repeated axes add
    (y,) = run_op("Roll", {}, x, np.array(10**12 + 1), np.array([0, 1]), opset=7)
    assert y.tolist() == np.roll(x, (1, 2), axis=(0, 1)).tolist()  # one shift for all axes, mod each dim
    # Squeeze-15: allow_axis_skip makes a maybe-1 dynamic dim give a dynamic rank
    (s,) = infer("Squeeze", {"allow_axis_skip": "true"}, S("f32", [2, None, 3]), V([1]), opset=15)
    assert s.shape is None
    (s,) = infer("Squeeze", {"allow_axis_skip": "false"}, S("f32", [2, None, 3]), V([1]), opset=15)
    assert format_shape(s.shape) == "[2,3]"
    (s,) = infer("Squeeze", {"allow_axis_skip": "true"}, S("f32", [1, 3, 1, 2]), V([0, 2]), opset=15)
    assert format_shape(s.shape) == "[3,2]"                       # the page's example


@pytest.mark.oracle
@settings(max_examples=16)
@given(seed=st.integers(0, 2**31), data=st.data(),
       kind=st.sampled_from(["d2s", "s2d", "b2s", "s2b", "shuffle", "roll", "patches", "squeeze"]))
def test_moves_match_openvino(tmp_path_factory, seed, data, kind):
    import openvino.opset15 as o15
    rng = np.random.default_rng(seed)
    draw = data.draw
    if kind in ("d2s", "s2d"):
        k, b = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        mode = draw(st.sampled_from(["blocks_first", "depth_first"]))
        sp = [draw(st.integers(1, 3)) * (b if kind == "s2d" else 1) for _ in range(k)]
        shape = [draw(st.integers(1, 2)), draw(st.integers(1, 2)) * (b ** k if kind == "d2s" else 1)] + sp
        px = param("x", shape, "f32")
        out = (o1.depth_to_space if kind == "d2s" else o1.space_to_depth)(px, mode, b)
    elif kind in ("b2s", "s2b"):
        rank = draw(st.integers(2, 4))
        block = [1] + [draw(st.integers(1, 3)) for _ in range(rank - 1)]
        if kind == "b2s":
            sp = [draw(st.integers(1, 3)) for _ in range(rank - 1)]
            shape = [int(np.prod(block)) * draw(st.integers(1, 2))] + sp
            cb = [0] + [draw(st.integers(0, s * b - 1)) for s, b in zip(sp, block[1:])]
            ce = [0] + [draw(st.integers(0, s * b - 1 - c)) for s, b, c in zip(sp, block[1:], cb[1:])]
            px = param("x", shape, "f32")
            out = o2.batch_to_space(px, oracle.i64(block), oracle.i64(cb), oracle.i64(ce))
        else:
            pb = [0] + [draw(st.integers(0, 2)) for _ in range(rank - 1)]
            pe = [0] + [draw(st.integers(0, 2)) for _ in range(rank - 1)]
            sp = [b * draw(st.integers(1, 3)) - p - q for b, p, q in zip(block[1:], pb[1:], pe[1:])]
            assume(all(s >= 1 for s in sp))
            shape = [draw(st.integers(1, 2))] + sp
            px = param("x", shape, "f32")
            out = o2.space_to_batch(px, oracle.i64(block), oracle.i64(pb), oracle.i64(pe))
    elif kind == "shuffle":
        rank = draw(st.integers(1, 4))
        axis = draw(st.integers(-rank, rank - 1))
        g = draw(st.integers(1, 3))
        shape = [draw(st.integers(1, 3)) for _ in range(rank)]
        shape[axis] *= g
        px = param("x", shape, "f32")
        out = o3.shuffle_channels(px, axis, g)
    elif kind == "roll":
        rank = draw(st.integers(1, 4))
        shape = [draw(st.integers(1, 4)) for _ in range(rank)]
        axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=3))
        shift = draw(st.lists(st.integers(-7, 7), min_size=len(axes), max_size=len(axes)))
        px = param("x", shape, "f32")
        out = o7.roll(px, oracle.i64(shift), oracle.i64(axes))
    elif kind == "patches":
        shape = [draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 7)), draw(st.integers(1, 7))]
        sizes = [draw(st.integers(1, 3)) for _ in range(2)]
        strides = [draw(st.integers(1, 3)) for _ in range(2)]
        rates = [draw(st.integers(1, 2)) for _ in range(2)]
        pad = draw(st.sampled_from(["valid", "same_upper", "same_lower"]))
        if pad == "valid":
            assume(all(s >= (k - 1) * r + 1 for s, k, r in zip(shape[2:], sizes, rates)))
        px = param("x", shape, "f32")
        out = o3.extract_image_patches(px, sizes, strides, rates, pad)
    else:
        shape = [draw(st.sampled_from([1, 2, 3])) for _ in range(draw(st.integers(1, 4)))]
        ones = [i for i, d in enumerate(shape) if d == 1]
        axes = draw(st.lists(st.sampled_from(ones), max_size=2, unique=True)) if ones else []
        px = param("x", shape, "f32")
        out = o15.squeeze(px, oracle.i64(axes), draw(st.booleans())) if axes else o15.squeeze(px)
    x = rng.standard_normal(shape).astype(np.float32)
    ov_compare([out], [px], {"x": x}, tmp_path_factory)


@pytest.mark.oracle
@settings(max_examples=14)
@given(seed=st.integers(0, 2**31), data=st.data(),
       kind=st.sampled_from(["pad", "d2s", "s2d", "interp", "backprop", "adaptive", "patches",
                             "maxpool14", "shuffle"]))
def test_partial_shapes_match_openvino(tmp_path_factory, seed, data, kind):
    """Dynamic and interval dims through the new ops: irrun infers OpenVINO's partial shape."""
    import irrun
    import openvino.opset8 as o8
    import openvino.opset11 as o11
    import openvino.opset14 as o14
    rng = np.random.default_rng(seed)
    shape = [int(v) for v in rng.integers(1, 6, 4)]
    shape[1] *= {"d2s": 4, "shuffle": 2}.get(kind, 1)
    if kind == "s2d":
        shape[2], shape[3] = shape[2] * 2, shape[3] * 2
    dims_ = [d if m == 0 else -1 if m == 1 else ov.Dimension(d, d + int(rng.integers(1, 5)))
             for d, m in zip(shape, rng.integers(0, 3, 4))]
    p = o1.parameter(ov.PartialShape(dims_), np.float32, name="x")
    if kind == "pad":
        node = o12.pad(p, oracle.i64(list(rng.integers(-1, 3, 4))), oracle.i64(list(rng.integers(-1, 3, 4))), "constant")
    elif kind == "d2s":
        node = o1.depth_to_space(p, "blocks_first", 2)
    elif kind == "s2d":
        node = o1.space_to_depth(p, "depth_first", 2)
    elif kind == "interp":
        scales = np.array([data.draw(st.sampled_from([0.5, 1.5, 2.0])), data.draw(st.sampled_from([0.75, 3.0]))], np.float32)
        node = o11.interpolate(p, o1.constant(scales), "nearest", "scales", axes=oracle.i64([2, 3]))
    elif kind == "backprop":
        assume(isinstance(dims_[1], int))
        node = o1.convolution_backprop_data(p, o1.constant(np.ones((shape[1], 3, 2, 3), np.float32)), [2, 1],
                                            pads_begin=[0, 1], pads_end=[1, 0], dilations=[1, 1])
    elif kind == "adaptive":
        node = o8.adaptive_avg_pool(p, oracle.i64([3, 2]))
    elif kind == "patches":
        node = o3.extract_image_patches(p, [2, 2], [2, 1], [1, 1], data.draw(st.sampled_from(["valid", "same_upper", "same_lower"])))
    elif kind == "maxpool14":
        node = o14.max_pool(p, [2, 2], [1, 1], [0, 1], [1, 1], [2, 2], "ceil_torch").output(0)
    else:
        node = o3.shuffle_channels(p, 1, 2)
    m = ov.Model([node], [p])
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(m, d)
        got = [(dd.lo, dd.hi) for dd in irrun.read_model(xml).outputs[0].shape]
    want = [(dd.get_min_length(), None if dd.get_max_length() < 0 else dd.get_max_length())
            for dd in m.output(0).partial_shape]
    assert got == want
