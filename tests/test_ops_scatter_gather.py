"""Gathers and scatters: GatherND-5/8, GatherElements-6, NonZero-3, ReverseSequence-1,
ScatterUpdate-3, ScatterNDUpdate-4/15, ScatterElementsUpdate-3/12, OneHot-1/16, Identity-16
-- spec examples, shape rules, index errors, differential tests against OpenVINO."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun
from irrun.errors import IrrunError, OpError
from irrun.opkit import Dim, OpProblem, TensorSpec
from irrun.ops.scatter_gather import (
    GatherElements6,
    GatherElementsAttrs,
    GatherND,
    GatherND8Attrs,
    GatherNDAttrs,
    Identity16,
    NonZero3,
    NonZeroAttrs,
    OneHot,
    OneHot16Attrs,
    OneHotAttrs,
    ReverseSequence1,
    ReverseSequenceAttrs,
    ScatterElementsUpdate,
    ScatterElementsUpdate12Attrs,
    ScatterElementsUpdateAttrs,
    ScatterNDUpdate,
    ScatterNDUpdate15Attrs,
    ScatterNDUpdateAttrs,
    ScatterUpdate3,
)
from irrun.ir.registry import NoAttrs

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1
import openvino.opset3 as o3
import openvino.opset4 as o4
import openvino.opset5 as o5
import openvino.opset6 as o6
import openvino.opset8 as o8
import openvino.opset12 as o12
import openvino.opset15 as o15
import openvino.opset16 as o16
from oracle import NP_TYPE, i64, param

A = np.array


def spec(shape, etype="f32", value=None):
    return TensorSpec.make(etype, shape, value)


def dims(*xs):
    return tuple(Dim.of(x) for x in xs)


def check(tmp_path, results, params, feed):
    return oracle.compare(ov.Model(results, params, "t"), feed, tmpdir=tmp_path)


def values(shape, dtype, rng):
    """Small values, so integer sums and products stay exact and ties are common."""
    if dtype == "boolean":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "u8":
        return rng.integers(0, 4, shape).astype(np.uint8)
    if dtype in ("i32", "i64"):
        return rng.integers(-5, 6, shape).astype(NP_TYPE[dtype])
    return rng.integers(-8, 9, shape).astype(NP_TYPE[dtype]) / NP_TYPE[dtype](4)


# ---------------------------------------------------------------- GatherND: spec examples


def gnd(b=0, v=8):
    return (GatherND8Attrs if v == 8 else GatherNDAttrs)(batch_dims=b)


@pytest.mark.parametrize("v", [5, 8])
def test_gather_nd_spec_examples_1_to_3(v):
    data = A([[1, 2], [3, 4]])
    assert GatherND.run(gnd(0, v), data, A([[0, 0], [1, 0]]))[0].tolist() == [1, 3]
    assert GatherND.run(gnd(0, v), data, A([[1], [0]]))[0].tolist() == [[3, 4], [1, 2]]
    assert GatherND.run(gnd(0, v), data, A([[[1]], [[0]]]))[0].tolist() == [[[3, 4]], [[1, 2]]]


@pytest.mark.parametrize("v", [5, 8])
def test_gather_nd_spec_examples_4_5(v):
    out = GatherND.run(gnd(1, v), A([[1, 2], [3, 4]]), A([[1], [0]]))[0]
    assert out.tolist() == [2, 3] and out.shape == (2,)
    data = np.arange(1, 25).reshape(2, 3, 4)
    out = GatherND.run(gnd(1, v), data, A([[1], [0]]))[0]
    assert out.tolist() == [[5, 6, 7, 8], [13, 14, 15, 16]]


def test_gather_nd_spec_example_6_both_versions():
    data = np.arange(1, 25).reshape(2, 3, 4)
    idx = A([[[[1]], [[0]], [[2]]], [[[0]], [[2]], [[2]]]])
    out8 = GatherND.run(gnd(2, 8), data, idx)[0]
    assert out8.tolist() == [[[2], [5], [11]], [[13], [19], [23]]] and out8.shape == (2, 3, 1)
    out5 = GatherND.run(gnd(2, 5), data, idx)[0]
    assert out5.tolist() == [[2], [5], [11], [13], [19], [23]] and out5.shape == (6, 1)


def test_gather_nd8_spec_example_7():
    data = np.arange(1, 17).reshape(1, 2, 2, 4)
    idx = A([[[[1], [0]], [[3], [2]]]])
    out = GatherND.run(gnd(3, 8), data, idx)[0]
    assert out.tolist() == [[[2, 5], [12, 15]]] and out.shape == (1, 2, 2)


@pytest.mark.parametrize("b, d, i, want", [
    (0, [1000, 256, 10, 15], [25, 125, 3], [25, 125, 15]),
    (2, [30, 2, 100, 35], [30, 2, 3, 1], [30, 2, 3, 35]),
    (3, [1, 64, 64, 320], [1, 64, 64, 1, 1], [1, 64, 64, 1]),
])
def test_gather_nd8_spec_xml_shapes(b, d, i, want):
    out = GatherND.infer(gnd(b, 8), spec(d), spec(i, "i64"))[0]
    assert out.shape == tuple(Dim.of(x) for x in want)


def test_gather_nd_shape_rule_dynamic_and_v5_flattening():
    out = GatherND.infer(gnd(1, 5), spec([Dim(2, 4), 3, 5]), spec([-1, 7, 2], "i32"))[0]
    assert out.shape == (Dim(2, 4), Dim.of(7))
    out = GatherND.infer(gnd(2, 5), spec([2, 3, 5]), spec([2, 3, 1], "i32"))[0]
    assert out.shape == (Dim.of(6),)
    assert GatherND.infer(gnd(0, 8), spec([2, 3]), spec([4, -1], "i32"))[0].shape is None
    with pytest.raises(OpProblem, match="batch dim 0"):
        GatherND.infer(gnd(1, 8), spec([1, 3]), spec([2, 1], "i64"))
    with pytest.raises(OpProblem, match="exceeds the data rank"):
        GatherND.infer(gnd(0, 8), spec([2, 3]), spec([4, 3], "i64"))
    with pytest.raises(OpProblem, match="batch_dims 2 is out of range"):
        GatherND.infer(gnd(2, 8), spec([2, 3]), spec([2, 1], "i64"))


def test_gather_nd_out_of_range_names_position_and_value():
    with pytest.raises(OpProblem, match=r"indices\[1,0\] = 2 is out of range \[-2, 1\] for "
                                        r"data dim 0 of size 2"):
        GatherND.run(gnd(), np.zeros((2, 3)), A([[1, 2], [2, 0]]))
    with pytest.raises(OpProblem, match=r"indices\[0,1\] = -4 .* data dim 1 of size 3"):
        GatherND.run(gnd(), np.zeros((2, 3)), A([[1, -4]]))


idx_types = st.sampled_from(["i32", "i64"])


@pytest.mark.oracle
@settings(max_examples=15)
@given(v=st.sampled_from([5, 8]), dtype=st.sampled_from(["f32", "i32", "i64", "u8"]),
       it=idx_types, data=st.data())
def test_gather_nd_matches_openvino(tmp_path_factory, v, dtype, it, data):
    b = data.draw(st.integers(0, 2))
    batch = data.draw(st.lists(st.integers(1, 3), min_size=b, max_size=b))
    rest = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    k = data.draw(st.integers(1, len(rest)))
    lead = data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    dshape, ishape = batch + rest, batch + lead + [k]
    rng = np.random.default_rng(len(dshape) * 7 + k)
    bounds = np.array(rest[:k])
    idx = (rng.integers(-bounds, bounds, size=tuple(ishape))).astype(NP_TYPE[it])
    p = param(dshape, dtype)
    q = param(ishape, it, "i")
    node = (o8 if v == 8 else o5).gather_nd(p, q, b)
    check(tmp_path_factory.mktemp("g"), [node], [p, q],
          {"x": values(dshape, dtype, rng), "i": idx})


# ---------------------------------------------------------------- GatherElements


def test_gather_elements_spec_examples():
    run = GatherElements6.run
    assert run(GatherElementsAttrs(0), A([[1, 2], [3, 4]]), A([[0, 1], [0, 0]]))[0].tolist() == \
        [[1, 4], [1, 2]]
    assert run(GatherElementsAttrs(1), A([[1, 7], [4, 3]]), A([[1, 1, 0], [1, 0, 1]]))[0].tolist() \
        == [[7, 7, 1], [3, 4, 3]]
    assert run(GatherElementsAttrs(0), A([[1, 2, 3], [4, 5, 6], [7, 8, 9]]),
               A([[1, 0, 1], [1, 2, 0]]))[0].tolist() == [[4, 2, 6], [4, 8, 3]]


def test_gather_elements_spec_xml_shape_and_errors():
    out = GatherElements6.infer(GatherElementsAttrs(1), spec([3, 7, 5]), spec([3, 10, 5], "i32"))[0]
    assert out.shape == tuple(Dim.of(x) for x in (3, 10, 5))
    out = GatherElements6.infer(GatherElementsAttrs(-1), spec([-1, 7]), spec([3, -1], "i32"))[0]
    assert out.shape == (Dim.of(3), Dim.of(-1))
    with pytest.raises(OpProblem, match="must agree except on axis 1"):
        GatherElements6.infer(GatherElementsAttrs(1), spec([3, 7]), spec([4, 7], "i32"))
    with pytest.raises(OpProblem, match=r"indices\[1,0\] = 7 is out of range \[-7, 6\] "
                                        r"for data axis 1 of size 7"):
        GatherElements6.run(GatherElementsAttrs(1), np.zeros((2, 7)), A([[0], [7]]))


@pytest.mark.oracle
@settings(max_examples=12)
@given(dtype=st.sampled_from(["f32", "i32", "u8", "boolean"]), it=idx_types, data=st.data())
def test_gather_elements_matches_openvino(tmp_path_factory, dtype, it, data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = list(shape)
    ishape[axis] = data.draw(st.integers(1, 5))
    rng = np.random.default_rng(sum(shape) + axis)
    n = shape[axis]
    idx = rng.integers(-n, n, size=tuple(ishape)).astype(NP_TYPE[it])
    p, q = param(shape, dtype), param(ishape, it, "i")
    check(tmp_path_factory.mktemp("ge"), [o6.gather_elements(p, q, axis)], [p, q],
          {"x": values(shape, dtype, rng), "i": idx})


# ---------------------------------------------------------------- NonZero


def test_non_zero_spec_description_example():
    out = NonZero3.run(NonZeroAttrs(), A([[1, 0], [1, 1]]))[0]
    assert out.tolist() == [[0, 1, 1], [0, 0, 1]] and out.dtype == np.int64
    assert NonZero3.run(NonZeroAttrs("i32"), A([0.0, np.nan, -0.0]))[0].tolist() == [[1]]


def test_non_zero_spec_xml_shape_with_upper_bound():
    out = NonZero3.infer(NonZeroAttrs("i64"), spec([3, 10, 100, 200]))[0]
    assert out.shape == (Dim.of(4), Dim(0, 600000)) and out.etype.name == "i64"
    assert NonZero3.infer(NonZeroAttrs("i32"), spec([2, -1]))[0].shape == (Dim.of(2), Dim(0, None))
    assert NonZero3.infer(NonZeroAttrs(), spec([]))[0].shape == (Dim.of(1), Dim(0, 1))


@pytest.mark.oracle
@settings(max_examples=12)
@given(dtype=st.sampled_from(["f32", "i32", "u8", "boolean"]), out=st.sampled_from(["i32", "i64"]),
       shape=st.lists(st.integers(0, 4), min_size=0, max_size=3))
def test_non_zero_matches_openvino(tmp_path_factory, dtype, out, shape):
    rng = np.random.default_rng(len(shape))
    x = values(shape, dtype, rng)
    p = param(shape, dtype, dynamic=bool(shape) and shape[0] % 2 == 0)
    check(tmp_path_factory.mktemp("nz"), [o3.non_zero(p, out)], [p], {"x": x})


# ---------------------------------------------------------------- ReverseSequence


def test_reverse_sequence_spec_xml_shape_and_values():
    attrs = ReverseSequenceAttrs(0, 1)
    out = ReverseSequence1.infer(attrs, spec([4, 10, 100, 200]), spec([4], "i32"))[0]
    assert out.shape == tuple(Dim.of(x) for x in (4, 10, 100, 200))
    x = np.arange(40).reshape(4, 10)
    y = ReverseSequence1.run(attrs, x, A([2, 4, 8, 10]))[0]
    for row, n in zip(range(4), (2, 4, 8, 10)):
        assert y[row].tolist() == x[row, :n][::-1].tolist() + x[row, n:].tolist()


def test_reverse_sequence_errors():
    attrs = ReverseSequenceAttrs(0, 1)
    with pytest.raises(OpProblem, match=r"seq_lengths\[1\] = 4 is out of range \[0, 3\]"):
        ReverseSequence1.run(attrs, np.zeros((2, 3)), A([1, 4]))
    with pytest.raises(OpProblem, match="name the same dim 1"):
        ReverseSequence1.infer(ReverseSequenceAttrs(1, -1), spec([2, 3]), spec([3], "i32"))
    with pytest.raises(OpProblem, match="data's batch dim 0 is 2"):
        ReverseSequence1.infer(attrs, spec([2, 3]), spec([3], "i32"))


@pytest.mark.oracle
@settings(max_examples=12)
@given(dtype=st.sampled_from(["f32", "i32", "u8"]), lt=st.sampled_from(["i32", "i64", "f32"]),
       data=st.data())
def test_reverse_sequence_matches_openvino(tmp_path_factory, dtype, lt, data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=2, max_size=4))
    r = len(shape)
    b, s = data.draw(st.permutations(range(r)))[:2]
    b -= data.draw(st.sampled_from([0, r]))
    rng = np.random.default_rng(sum(shape))
    lengths = rng.integers(0, shape[s] + 1, size=shape[b]).astype(NP_TYPE[lt])
    p, q = param(shape, dtype), param([shape[b]], lt, "s")
    check(tmp_path_factory.mktemp("rs"), [o1.reverse_sequence(p, q, b, s)], [p, q],
          {"x": values(shape, dtype, rng), "s": lengths})


# ---------------------------------------------------------------- ScatterUpdate


def test_scatter_update_spec_example_2_and_xml_shape():
    data = A([[-1.0, 1.0, -1.0, 3.0, 4.0], [-1.0, 6.0, -1.0, 8.0, 9.0],
              [-1.0, 11.0, 1.0, 13.0, 14.0]], np.float32)
    upd = A([[1.0, 1.0], [1.0, 1.0], [1.0, 2.0]], np.float32)
    out = ScatterUpdate3.run(NoAttrs(), data, A([0, 2]), upd, A([1]))[0]
    assert out.tolist() == [[1, 1, 1, 3, 4], [1, 6, 1, 8, 9], [1, 11, 2, 13, 14]]
    out = ScatterUpdate3.infer(NoAttrs(), spec([1000, 256, 10, 15]), spec([125, 20], "i64"),
                               spec([1000, 125, 20, 10, 15]), spec([1], "i64", A([1])))[0]
    assert out.shape == tuple(Dim.of(x) for x in (1000, 256, 10, 15))


def test_scatter_update_errors():
    with pytest.raises(OpProblem, match=r"updates has shape \[1000,125,20,10\], expected"):
        ScatterUpdate3.infer(NoAttrs(), spec([1000, 256, 10, 15]), spec([125, 20], "i64"),
                             spec([1000, 125, 20, 10]), spec([1], "i64", A([1])))
    # Negative indices are refused, as OpenVINO's CPU plugin does for ScatterUpdate-3.
    with pytest.raises(OpProblem, match=r"indices\[1\] = -1 is out of range \[0, 4\] for data "
                                        r"axis 1 of size 5"):
        ScatterUpdate3.run(NoAttrs(), np.zeros((3, 5)), A([0, -1]), np.zeros((3, 2)), A(1))


@pytest.mark.oracle
@settings(max_examples=12)
@given(dtype=st.sampled_from(["f32", "i32", "i64", "u8"]), it=idx_types, data=st.data())
def test_scatter_update_matches_openvino(tmp_path_factory, dtype, it, data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    # (The CPU plugin refuses 0-D indices.)
    ishape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))
    ax = axis % len(shape)
    ushape = shape[:ax] + ishape + shape[ax + 1:]
    rng = np.random.default_rng(sum(shape) + len(ishape))
    n = shape[ax]
    # Distinct indices: with repeats the CPU plugin's write order is its own business.
    count = int(np.prod(ishape))
    if count > n:
        ishape, ushape = [n], shape[:ax] + [n] + shape[ax + 1:]
        count = n
    idx = rng.permutation(n)[:count].reshape(ishape).astype(NP_TYPE[it])
    p, q, u = param(shape, dtype), param(ishape, it, "i"), param(ushape, dtype, "u")
    check(tmp_path_factory.mktemp("su"), [o3.scatter_update(p, q, u, i64(axis))], [p, q, u],
          {"x": values(shape, dtype, rng), "i": idx, "u": values(ushape, dtype, rng)})


# ---------------------------------------------------------------- ScatterNDUpdate


def snd(reduction=None):
    return ScatterNDUpdateAttrs() if reduction is None else ScatterNDUpdate15Attrs(reduction)


SLICES_DATA = A([[[1, 2, 3, 4], [5, 6, 7, 8], [8, 7, 6, 5], [4, 3, 2, 1]],
                 [[1, 2, 3, 4], [5, 6, 7, 8], [8, 7, 6, 5], [4, 3, 2, 1]],
                 [[8, 7, 6, 5], [4, 3, 2, 1], [1, 2, 3, 4], [5, 6, 7, 8]],
                 [[8, 7, 6, 5], [4, 3, 2, 1], [1, 2, 3, 4], [5, 6, 7, 8]]])
SLICES_UPD = A([[[5, 5, 5, 5], [6, 6, 6, 6], [7, 7, 7, 7], [8, 8, 8, 8]],
                [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3], [4, 4, 4, 4]]])
SLICES_OUT = [[[5, 5, 5, 5], [6, 6, 6, 6], [7, 7, 7, 7], [8, 8, 8, 8]],
              [[1, 2, 3, 4], [5, 6, 7, 8], [8, 7, 6, 5], [4, 3, 2, 1]],
              [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3], [4, 4, 4, 4]],
              [[8, 7, 6, 5], [4, 3, 2, 1], [1, 2, 3, 4], [5, 6, 7, 8]]]


@pytest.mark.parametrize("attrs", [snd(), snd("none")])
def test_scatter_nd_update_spec_examples(attrs):
    data = A([1, 2, 3, 4, 5, 6, 7, 8])
    out = ScatterNDUpdate.run(snd(), data, A([[4], [3], [1], [7]]), A([9, 10, 11, 12]))[0]
    assert out.tolist() == [1, 11, 3, 10, 9, 6, 7, 12]
    assert ScatterNDUpdate.run(attrs, SLICES_DATA, A([[0], [2]]), SLICES_UPD)[0].tolist() == \
        SLICES_OUT


def test_scatter_nd_update15_spec_examples():
    out = ScatterNDUpdate.run(snd("none"), A([1, 2, 3, 4, 5, 6, 7, 8]),
                              A([[4], [3], [1], [7], [-2], [-4]]), A([9, 10, 11, 12, 13, 14]))[0]
    # The page's example 1 prints [1, 11, 3, 10, 4, 6, 13, 12]; index -4 is 4 of 8, which
    # takes 14 after 9 (the last write wins in OpenVINO): the page's 4 at position 4 is a
    # misprint (OpenVINO gives 14, see test_scatter_nd_update15_spec_misprints).
    assert out.tolist() == [1, 11, 3, 10, 14, 6, 13, 12]
    data, idx, upd = A([1, 2, 3, 4]), A([[0], [2], [-3], [-3], [0]]), A([10, 20, 30, 40, 50])
    assert ScatterNDUpdate.run(snd("sum"), data, idx, upd)[0].tolist() == [61, 72, 23, 4]
    assert ScatterNDUpdate.run(snd("sub"), data, idx, upd)[0].tolist() == [-59, -68, -17, 4]


def test_scatter_nd_update15_spec_misprints(tmp_path):
    """Three of the page's printed outputs disagree with its own formula; OpenVINO agrees
    with the formula and with irrun: example 1 gives 14 at position 4 (page: 4), none gives
    [50, 40, 20, 4] (page: [50, 20, 20, 4]) and prod [500, 2400, 60, 4] (page:
    [500, 3600, 40, 4])."""
    data, idx, upd = A([1, 2, 3, 4], np.int32), A([[0], [2], [-3], [-3], [0]]), \
        A([10, 20, 30, 40, 50], np.int32)
    expect = {"none": [50, 40, 20, 4], "prod": [500, 2400, 60, 4]}
    for reduction, want in expect.items():
        p, q, u = param([4], "i32"), param([5, 1], "i64", "i"), param([5], "i32", "u")
        got, _ = check(tmp_path, [o15.scatter_nd_update(p, q, u, reduction)], [p, q, u],
                         {"x": data, "i": idx, "u": upd})
        assert got[0].tolist() == want
    p, q, u = param([8], "i32"), param([6, 1], "i64", "i"), param([6], "i32", "u")
    got, _ = check(tmp_path, [o15.scatter_nd_update(p, q, u, "none")], [p, q, u],
                   {"x": A([1, 2, 3, 4, 5, 6, 7, 8], np.int32), "i": A([[4], [3], [1], [7], [-2], [-4]]),
                    "u": A([9, 10, 11, 12, 13, 14], np.int32)})
    assert got[0].tolist() == [1, 11, 3, 10, 14, 6, 13, 12]


def test_scatter_nd_update_spec_xml_shape_and_errors():
    out = ScatterNDUpdate.infer(snd(), spec([1000, 256, 10, 15]), spec([25, 125, 3], "i32"),
                                spec([25, 125, 15]))[0]
    assert out.shape == tuple(Dim.of(x) for x in (1000, 256, 10, 15))
    with pytest.raises(OpProblem, match=r"updates has shape \[25,125,16\], expected \[25,125,15\]"):
        ScatterNDUpdate.infer(snd(), spec([1000, 256, 10, 15]), spec([25, 125, 3], "i32"),
                              spec([25, 125, 16]))
    # A 1-element updates may stand for a 0-D one.
    assert ScatterNDUpdate.infer(snd(), spec([2, 3]), spec([2], "i32"), spec([1]))[0].shape == \
        dims(2, 3)
    out = ScatterNDUpdate.run(snd(), np.zeros((2, 3)), A([1, 2]), A([7.0]))[0]
    assert out.tolist() == [[0, 0, 0], [0, 0, 7]]
    with pytest.raises(OpProblem, match="must be i32 or i64"):
        ScatterNDUpdate.infer(snd(), spec([4]), spec([2, 1], "u8"), spec([2]))
    with pytest.raises(OpProblem, match=r"indices\[2,1\] = 3 is out of range \[-3, 2\] for "
                                        r"data dim 1 of size 3"):
        ScatterNDUpdate.run(snd("sum"), np.zeros((2, 3)), A([[0, 0], [1, 2], [1, 3]]),
                            np.zeros(3))


def test_scatter_nd_update15_boolean_reductions_are_or_xor_and():
    data = A([True, True, False, False])
    idx = A([[0], [1], [1], [2], [3], [3]])
    upd = A([True, True, True, False, True, True])
    run = ScatterNDUpdate.run
    assert run(snd("sum"), data, idx, upd)[0].tolist() == [True, True, False, True]
    assert run(snd("sub"), data, idx, upd)[0].tolist() == [False, True, False, False]
    assert run(snd("prod"), data, idx, upd)[0].tolist() == [True, True, False, False]


def test_scatter_nd_update_duplicates_last_write_wins(tmp_path):
    """Reduction none with a repeated index: OpenVINO's reference and CPU plugin write in
    order, so the last update wins; irrun does the same (the spec leaves it undefined)."""
    p, q, u = param([4], "f32"), param([3, 1], "i64", "i"), param([3], "f32", "u")
    feed = {"x": A([0, 1, 2, 3], np.float32), "i": A([[1], [1], [1]]),
            "u": A([10, 20, 30], np.float32)}
    got, _ = check(tmp_path, [o4.scatter_nd_update(p, q, u)], [p, q, u], feed)
    assert got[0].tolist() == [0, 30, 2, 3]


ND_REDUCTIONS = ["none", "sum", "sub", "prod", "min", "max"]


@pytest.mark.oracle
@settings(max_examples=20)
@given(v=st.sampled_from([4, 15]), reduction=st.sampled_from(ND_REDUCTIONS),
       dtype=st.sampled_from(["f32", "i32", "i64", "u8", "boolean"]), it=idx_types,
       data=st.data())
def test_scatter_nd_update_matches_openvino(tmp_path_factory, v, reduction, dtype, it, data):
    if v == 4:
        reduction = "none"
    if dtype == "boolean" and reduction == "sub":
        # The page's boolean sub is XOR; the CPU plugin subtracts bytes without making them
        # booleans between repeated updates (0 - 1 - 0 - 1 is true there): tested on its own.
        reduction = "max"
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    k = data.draw(st.integers(1, len(shape)))
    lead = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))
    rng = np.random.default_rng(sum(shape) * 3 + k)
    dims = np.array(shape[:k])
    m = int(np.prod(lead))
    if reduction == "none":
        # Distinct targets (the CPU plugin may write repeated ones in parallel).
        cells = int(np.prod(dims))
        m = min(m, cells)
        lead = [m]
        flat = rng.permutation(cells)[:m]
        idx = np.stack(np.unravel_index(flat, tuple(dims)), -1)
        idx = np.where(rng.integers(0, 2, idx.shape) == 1, idx - dims, idx)
    else:
        idx = rng.integers(-dims, dims, size=tuple(lead) + (k,))
    ushape = lead + shape[k:]
    p, q, u = param(shape, dtype), param(lead + [k], it, "i"), param(ushape, dtype, "u")
    node = o4.scatter_nd_update(p, q, u) if v == 4 else o15.scatter_nd_update(p, q, u, reduction)
    check(tmp_path_factory.mktemp("snd"), [node], [p, q, u],
          {"x": values(shape, dtype, rng), "i": idx.astype(NP_TYPE[it]),
           "u": values(ushape, dtype, rng)})


# ---------------------------------------------------------------- ScatterElementsUpdate


def seu(reduction="none", init=True):
    return ScatterElementsUpdate12Attrs(reduction, init)


@pytest.mark.parametrize("reduction, init, data, idx, upd, axis, want", [
    ("sum", True, [2, 3, 4, 6], [1, 0, 0, -2, -1, 2], [10, 20, 30, 40, 70, 60], 0,
     [52, 13, 104, 76]),
    ("sum", False, [2, 3, 4, 6], [1, 0, 0, 2, 3, 2], [10, 20, 30, 40, 70, 60], 0,
     [50, 10, 100, 70]),
    ("none", True, [[0] * 4] * 3, [[1, 2], [0, 3]], [[11, 12], [13, 14]], 1,
     [[0, 11, 12, 0], [13, 0, 0, 14], [0, 0, 0, 0]]),
    ("sum", True, [[1] * 4] * 3, [[1, 1], [0, 3]], [[11, 12], [13, 14]], 1,
     [[1, 24, 1, 1], [14, 1, 1, 15], [1, 1, 1, 1]]),
    ("prod", True, [[2] * 4] * 3, [[1, 1], [0, 3]], [[11, 12], [13, 14]], 1,
     [[2, 264, 2, 2], [26, 2, 2, 28], [2, 2, 2, 2]]),
])
def test_scatter_elements_update12_spec_examples(reduction, init, data, idx, upd, axis, want):
    out = ScatterElementsUpdate.run(seu(reduction, init), A(data, np.float32), A(idx),
                                    A(upd, np.float32), A([axis]))[0]
    assert out.tolist() == want


def test_scatter_elements_update12_mean_rounds_integers_down():
    out = ScatterElementsUpdate.run(seu("mean", True), A([1, -4, 0]), A([0, 1, 1, 0]),
                                    A([2, 1, 0, 3]), A(0))[0]
    assert out.tolist() == [2, -1, 0]     # (1+2+3)/3 = 2; (-4+1+0)/3 = -1
    out = ScatterElementsUpdate.run(seu("mean", False), A([1, -4, 0]), A([1, 1]), A([-3, 0]),
                                    A(0))[0]
    assert out.tolist() == [1, -2, 0]     # floor(-3 / 2)
    with pytest.raises(OpProblem, match="mean is not defined for boolean"):
        ScatterElementsUpdate.infer(seu("mean"), spec([3], "boolean"), spec([1], "i32"),
                                    spec([1], "boolean"), spec([], "i32", A(0)))


def test_scatter_elements_update_shape_rule_and_errors():
    attrs = ScatterElementsUpdateAttrs()
    out = ScatterElementsUpdate.infer(attrs, spec([1000, 256, 7, 100]), spec([125, 20, 7, 6], "i32"),
                                      spec([125, 20, 7, 6]), spec([], "i64", A(0)))[0]
    assert out.shape == tuple(Dim.of(x) for x in (1000, 256, 7, 100))
    with pytest.raises(OpProblem, match="must be equal"):
        ScatterElementsUpdate.infer(attrs, spec([4, 4]), spec([2, 2], "i32"), spec([2, 3]),
                                    spec([], "i64", A(0)))
    with pytest.raises(OpProblem, match="indices dim 1 is 5, more than data's 4"):
        ScatterElementsUpdate.infer(attrs, spec([4, 4]), spec([2, 5], "i32"), spec([2, 5]),
                                    spec([], "i64", A(0)))
    with pytest.raises(OpProblem, match=r"indices\[0,1\] = -5 is out of range \[-4, 3\] for "
                                        r"data axis 0 of size 4"):
        ScatterElementsUpdate.run(attrs, np.zeros((4, 4)), A([[0, -5]]), np.zeros((1, 2)), A(0))


SE_REDUCTIONS = ["none", "sum", "prod", "min", "max", "mean"]


@pytest.mark.oracle
@settings(max_examples=20)
@given(v=st.sampled_from([3, 12]), reduction=st.sampled_from(SE_REDUCTIONS),
       init=st.booleans(), dtype=st.sampled_from(["f32", "i32", "i64", "u8", "boolean"]),
       it=idx_types, data=st.data())
def test_scatter_elements_update_matches_openvino(tmp_path_factory, v, reduction, init, dtype,
                                                  it, data):
    if v == 3:
        reduction, init = "none", True
    if dtype == "boolean" and reduction == "mean":
        reduction = "min"     # mean is not defined for booleans
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ax = axis % len(shape)
    ishape = [data.draw(st.integers(1, d)) for d in shape]
    rng = np.random.default_rng(sum(shape) * 5 + ax)
    n = shape[ax]
    if reduction == "none":
        # Distinct targets along the axis for each line (see ScatterNDUpdate above).
        ishape[ax] = min(ishape[ax], n)
        perm = np.argsort(rng.random(tuple(ishape[:ax]) + (n,) + tuple(ishape[ax + 1:])), axis=ax)
        idx = np.take(perm, np.arange(ishape[ax]), axis=ax)
        idx = np.where(rng.integers(0, 2, idx.shape) == 1, idx - n, idx)
    else:
        ishape[ax] = data.draw(st.integers(1, 5))
        idx = rng.integers(-n, n, size=tuple(ishape))
    p, q, u = param(shape, dtype), param(ishape, it, "i"), param(ishape, dtype, "u")
    if v == 3:
        node = o3.scatter_elements_update(p, q, u, i64(axis))
    else:
        node = o12.scatter_elements_update(p, q, u, i64(axis), reduction, init)
    # Float sums and means: the CPU plugin may add in another order (values are exact
    # quarters, so sums are exact; a mean's division rounds once either way).
    check(tmp_path_factory.mktemp("seu"), [node], [p, q, u],
          {"x": values(shape, dtype, rng), "i": idx.astype(NP_TYPE[it]),
           "u": values(ishape, dtype, rng)})


def _written_in_order(data, indices, updates, ax):
    """Reduction none as OpenVINO's reference writes it: update by update, row-major."""
    out = data.copy()
    for pos in np.ndindex(indices.shape):
        target = list(pos)
        target[ax] = indices[pos] % data.shape[ax]
        out[tuple(target)] = updates[pos]
    return out


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_scatter_elements_update_repeated_targets_last_write_wins(data):
    # Repeated targets take the last update in row-major order: counted over the axis
    # (targets within 4x the updates) or sorted (few updates into a long axis).
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    ax = data.draw(st.integers(0, len(shape) - 1))
    shape[ax] = data.draw(st.sampled_from([shape[ax], 200]))
    ishape = [data.draw(st.integers(1, d)) for d in shape]
    ishape[ax] = data.draw(st.integers(1, 8))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    n = shape[ax]
    idx = rng.integers(-n, n, ishape) if data.draw(st.booleans(), label="spread") else \
        rng.integers(0, min(n, 2), ishape)
    x = rng.standard_normal(shape).astype(np.float32)
    u = rng.standard_normal(ishape).astype(np.float32)
    for attrs in (ScatterElementsUpdateAttrs(), ScatterElementsUpdate12Attrs()):
        (y,) = ScatterElementsUpdate.run(attrs, x, idx, u, np.array(ax))
        np.testing.assert_array_equal(y, _written_in_order(x, idx, u, ax))


@pytest.mark.oracle
def test_scatter_elements_update_repeats_and_model_shape_match_openvino(tmp_path_factory):
    # torch_fasterrcnn's merge of ROIAlign levels ([150, 32, 7, 7], axis 0, every target
    # once), and a small one where each target is written three times.
    rng = np.random.default_rng(3)
    perm = rng.permutation(150).astype(np.int32)
    idx = np.broadcast_to(perm[:, None, None, None], (150, 32, 7, 7)).copy()
    p, q, u = param([150, 32, 7, 7], "f32"), param([150, 32, 7, 7], "i32", "i"), \
        param([150, 32, 7, 7], "f32", "u")
    check(tmp_path_factory.mktemp("a"), [o12.scatter_elements_update(p, q, u, i64(0), "none", True)], [p, q, u],
          {"x": values([150, 32, 7, 7], "f32", rng), "i": idx,
           "u": values([150, 32, 7, 7], "f32", rng)})
    p, q, u = param([4, 3], "f32"), param([3, 3], "i64", "i"), param([3, 3], "f32", "u")
    feed = {"x": values([4, 3], "f32", rng), "i": A([[1, 2, -1], [1, 2, 3], [1, -2, 3]]),
            "u": A(np.arange(9).reshape(3, 3), np.float32)}
    got, _ = check(tmp_path_factory.mktemp("b"), [o3.scatter_elements_update(p, q, u, i64(0))], [p, q, u], feed)
    assert (got[0][1, 0], got[0][2, 1], got[0][3, 2]) == (6, 7, 8)     # the last of three


# ---------------------------------------------------------------- OneHot


def test_one_hot_spec_examples():
    out = OneHot.run(OneHot16Attrs(-1, "normalize"), A([0, -5, -2, 2]), A(3), A(1), A(2))[0]
    assert out.tolist() == [[1, 2, 2], [2, 2, 2], [2, 1, 2], [2, 2, 1]]
    out = OneHot.run(OneHotAttrs(-1), A([0, 3, 1, 2]), A(3), A(1), A(2))[0]
    assert out.tolist() == [[1, 2, 2], [2, 2, 2], [2, 1, 2], [2, 2, 1]]
    for attrs in (OneHotAttrs(1), OneHot16Attrs(1)):
        out = OneHot.run(attrs, A([[0, 3, 1], [1, 2, 4]]), A(3), A(1), A(0))[0]
        assert out.tolist() == [[[1, 0, 0], [0, 0, 1], [0, 0, 0]],
                                [[0, 0, 0], [1, 0, 0], [0, 1, 0]]]
    # ignore-negative (and OneHot-1): a negative index is an all-off row.
    out = OneHot.run(OneHot16Attrs(0), A([-1, 1]), A(2), A(5.0), A(0.0))[0]
    assert out.tolist() == [[0, 0], [0, 5]]


def test_one_hot_shape_rule_and_errors():
    s = OneHot.infer(OneHot16Attrs(1), spec([2, 3], "i32"), spec([], "i32", A(3, np.int32)),
                     spec([], "f32"), spec([], "f32"))[0]
    assert s.shape == tuple(Dim.of(x) for x in (2, 3, 3)) and s.etype.name == "f32"
    s = OneHot.infer(OneHotAttrs(0), spec([4], "i64"), spec([], "i64"), spec([], "u8"),
                     spec([], "u8"))[0]
    assert s.shape == (Dim.of(-1), Dim.of(4))
    with pytest.raises(OpProblem, match="same element type"):
        OneHot.infer(OneHotAttrs(0), spec([4], "i64"), spec([], "i64"), spec([], "u8"),
                     spec([], "f32"))
    with pytest.raises(OpProblem, match="axis 3 is out of range"):
        OneHot.infer(OneHotAttrs(3), spec([4], "i64"), spec([], "i64"), spec([], "u8"),
                     spec([], "u8"))
    with pytest.raises(OpProblem, match="depth must be non-negative, got -2"):
        OneHot.run(OneHotAttrs(0), A([1]), A(-2), A(1), A(0))
    with pytest.raises(IrrunError, match="OneHot output"):
        OneHot.run(OneHotAttrs(0), A([1]), A(1 << 40), A(1), A(0))


@pytest.mark.oracle
@settings(max_examples=12)
@given(v=st.sampled_from([1, 16]), mode=st.sampled_from(["ignore_negative", "normalize"]),
       it=idx_types, ot=st.sampled_from(["f32", "i32", "u8"]), data=st.data())
def test_one_hot_matches_openvino(tmp_path_factory, v, mode, it, ot, data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=0, max_size=3))
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    depth = data.draw(st.integers(1, 5))
    rng = np.random.default_rng(sum(shape) + depth)
    idx = rng.integers(-depth - 2, depth + 2, size=tuple(shape)).astype(NP_TYPE[it])
    if v == 1:
        idx = np.abs(idx)      # OneHot-1 leaves negative indices undefined
    p = param(shape, it, "i")
    on = ov.op.Constant(np.array(3, NP_TYPE[ot]))
    off = ov.op.Constant(np.array(1, NP_TYPE[ot]))
    dep = ov.op.Constant(np.array(depth, NP_TYPE[it]))
    node = o1.one_hot(p, dep, on, off, axis) if v == 1 else \
        o16.one_hot(p, dep, on, off, axis, mode)
    check(tmp_path_factory.mktemp("oh"), [node], [p], {"i": idx})


# ---------------------------------------------------------------- Identity


def test_identity_spec_example_and_value_passing(tmp_path):
    s = Identity16.infer(NoAttrs(), spec([3, 3]))[0]
    assert s.shape == (Dim.of(3), Dim.of(3)) and s.etype.name == "f32"
    v = Identity16.infer(NoAttrs(), spec([2], "i64", A([4, 5])))[0]
    assert v.value.tolist() == [4, 5]
    p = param([3, 3], "f32")
    check(tmp_path, [o16.identity(p)], [p], {"x": np.arange(9, dtype=np.float32).reshape(3, 3)})


# ---------------------------------------------------------------- located errors


@pytest.mark.parametrize("make", [
    lambda p: o8.gather_nd(p, i64([[0, 3]])),
    lambda p: o6.gather_elements(p, i64([[0, -4], [1, 1]]), 1),
    lambda p: o3.scatter_update(p, i64([2]), ov.op.Constant(np.zeros((1, 3), np.float32)), i64(0)),
    lambda p: o4.scatter_nd_update(p, i64([[1, 3]]), ov.op.Constant(np.zeros(1, np.float32))),
    lambda p: o12.scatter_elements_update(p, i64([[3]]), ov.op.Constant(np.zeros((1, 1), np.float32)),
                                          i64(1), "sum"),
    lambda p: o1.reverse_sequence(p, i64([1, 4]), 0, 1),
])
def test_constant_indices_out_of_range_fail_at_load(tmp_path, make):
    p = param([2, 3], "f32")
    xml = oracle.save(ov.Model([make(p)], [p], "t"), tmp_path)
    with pytest.raises(IrrunError, match=r"model\.xml:\d+: .*out of range"):
        irrun.read_model(xml)



def test_out_of_range_index_is_a_located_op_error(tmp_path):
    p, q = param([2, 3], "f32"), param([2, 1], "i64", "i")
    xml = oracle.save(ov.Model([o8.gather_nd(p, q)], [p, q], "t"), tmp_path)
    m = irrun.read_model(xml)
    with pytest.raises(OpError, match=r"GatherND.*indices\[1,0\] = 2 is out of range"):
        m.infer({"x": np.zeros((2, 3), np.float32), "i": A([[0], [2]])})


# A Loop body writes its step into a TensorList with a ScatterUpdate of one index: a basic
# index then, with the same results and the same errors.


@pytest.mark.oracle
@pytest.mark.parametrize("axis,ishape,index", [(0, [1], 2), (0, [1, 1], 0), (1, [1], 3),
                                               (-1, [1], 4), (1, [1, 1], 0)])
def test_scatter_update_of_one_index_matches_openvino(tmp_path, axis, ishape, index):
    shape = [3, 4, 5]
    ax = axis % 3
    ushape = shape[:ax] + ishape + shape[ax + 1:]
    rng = np.random.default_rng(index)
    p, q, u = param(shape, "f32"), param(ishape, "i64", "i"), param(ushape, "f32", "u")
    check(tmp_path, [o3.scatter_update(p, q, u, i64(axis))], [p, q, u],
          {"x": values(shape, "f32", rng), "i": np.full(ishape, index, np.int64),
           "u": values(ushape, "f32", rng)})


def test_scatter_update_of_one_index_out_of_range_is_refused():
    for bad in (5, -1):
        with pytest.raises(OpProblem, match=rf"indices\[0\] = {bad} is out of range \[0, 4\]"):
            ScatterUpdate3.run(NoAttrs(), np.zeros((3, 5)), A([bad]), np.zeros((3, 1)), A(1))
    data = np.zeros((2, 3), np.float32)
    out = ScatterUpdate3.run(NoAttrs(), data, A([[1]]), np.ones((2, 1, 1), np.float32), A(-1))[0]
    assert out.tolist() == [[0, 1, 0], [0, 1, 0]] and not data.any()    # data untouched
