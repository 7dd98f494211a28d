"""Pad-1/12 and the space/depth moves: spec examples, rules, and differential tests against
OpenVINO's CPU plugin."""
import tempfile

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from irrun.errors import ShapeError
from irrun.shapes import TensorSpec, format_shape

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
    from irrun.registry import lookup, parse_attrs
    op = lookup("Pad", "opset12")
    a, _, _ = parse_attrs(op.attrs, {"pad_mode": "reflect"})
    with pytest.raises(IrrunError, match="reflect padding needs pads below the dim: axis 0 has size 3 and pads 3,0"):
        op.run(a, DATA, np.array([3, 0]), np.array([0, 0]))
    a, _, _ = parse_attrs(op.attrs, {"pad_mode": "constant"})
    with pytest.raises(ResourceError, match="the Pad output"):
        op.run(a, DATA, np.array([1 << 40, 0]), np.array([0, 0]))


@pytest.mark.oracle
@settings(max_examples=20)
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
