"""SegmentMax-16 and SparseFillEmptyRows-16: the spec examples, shape rules, errors, and
differential tests against OpenVINO's CPU plugin."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irrun.errors import OpError, ShapeError
from irrun.ops.sparse import SegmentMax16, SegmentMaxAttrs, SparseFillEmptyRows16
from irrun.ir.registry import parse_attrs
from irrun.ir.shapes import DYNAMIC, Dim, TensorSpec

ZERO, LOWEST = SegmentMaxAttrs("ZERO"), SegmentMaxAttrs("LOWEST")
DATA = np.array([1, 5, 2, 8, 3], np.float32)
IDS = np.array([0, 0, 2, 3, 3], np.int32)


def segment_max(attrs, data, ids, num=None):
    return SegmentMax16.run(attrs, data, ids, None if num is None else np.array(num, np.int64))[0]


# ------------------------------------------------------------------ spec examples

def test_spec_description_example():
    ids = np.array([0, 0, 0, 1, 1, 3, 5, 5])
    data = np.array([4, 1, 3, 7, 2, 9, 6, 8], np.float32)
    assert segment_max(ZERO, data, ids).tolist() == [4, 7, 0, 9, 0, 8]


def test_spec_example_1_fewer_segments_than_ids():
    out = segment_max(ZERO, DATA, IDS, 2)
    assert out.shape == (2,) and out.tolist() == [5, 0]


def test_spec_example_2_more_segments_than_ids():
    out = segment_max(ZERO, DATA, IDS, 8)
    assert out.tolist() == [5, 0, 2, 8, 0, 0, 0, 0]


def test_spec_example_3_2d_lowest_without_num_segments():
    data = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = segment_max(LOWEST, data, np.array([0, 1, 1], np.int64))
    assert out.dtype == np.int32 and out.tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]


def test_lowest_is_the_lowest_finite_value():
    out = segment_max(LOWEST, DATA, IDS, 5)
    assert out[1] == np.finfo(np.float32).min and out[4] == np.finfo(np.float32).min
    out = segment_max(LOWEST, DATA.astype(np.int8), IDS)
    assert out[1] == -128


def test_nan_and_minus_infinity():
    data = np.array([np.nan, 1, -np.inf, -np.inf, np.nan], np.float32)
    out = segment_max(ZERO, data, np.array([0, 0, 1, 1, 2]))
    # NaN is passed over unless the segment holds nothing else; -inf is a value.
    assert out[0] == 1 and out[1] == -np.inf and np.isnan(out[2])


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16", np.float64, np.uint64])
def test_other_types(dtype):
    import ml_dtypes
    dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    data = np.array([[1, 5], [2, 3], [7, 0]]).astype(dtype)
    out = segment_max(LOWEST, data, np.array([0, 0, 2]))
    assert out.dtype == np.dtype(dtype)
    lowest = ml_dtypes.finfo(dtype).min if dtype == ml_dtypes.bfloat16 else (
        np.finfo(dtype).min if np.dtype(dtype).kind == "f" else 0)
    assert out.astype(np.float64).tolist() == [[2, 5], [float(lowest)] * 2, [7, 0]]


def test_empty_ids():
    out = segment_max(ZERO, np.zeros((0, 3), np.float32), np.zeros(0, np.int32))
    assert out.shape == (0, 3)
    out = segment_max(LOWEST, np.zeros((0, 3), np.int32), np.zeros(0, np.int32), 2)
    assert out.tolist() == [[-2**31] * 3] * 2


@settings(max_examples=25)
@given(st.data())
def test_random_against_a_loop(data):
    n = data.draw(st.integers(0, 12))
    ids = np.array(sorted(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))), np.int64)
    values = np.array(data.draw(st.lists(st.integers(-50, 50), min_size=2 * n, max_size=2 * n)),
                      np.int16).reshape(n, 2)
    num = data.draw(st.one_of(st.none(), st.integers(0, 9)))
    out = segment_max(ZERO, values, ids, num)
    count = num if num is not None else (int(ids[-1]) + 1 if n else 0)
    expected = np.zeros((count, 2), np.int16)
    for s in range(count):              # a test oracle, not a kernel
        rows = values[ids == s]
        if len(rows):
            expected[s] = rows.max(axis=0)
    np.testing.assert_array_equal(out, expected)


# ------------------------------------------------------------------ errors and shapes

def test_unsorted_ids_fail():
    with pytest.raises(OpError, match=r"segment_ids\[2\] is 0, smaller than segment_ids\[1\] = 1"):
        segment_max(ZERO, DATA[:3], np.array([0, 1, 0]))


def test_negative_ids_fail():
    with pytest.raises(OpError, match=r"segment_ids\[0\] is -1, expected >= 0"):
        segment_max(ZERO, DATA[:2], np.array([-1, 0]))


def test_negative_num_segments_fails():
    with pytest.raises(OpError, match="num_segments is -2, expected >= 0"):
        segment_max(ZERO, DATA, IDS, -2)


def test_fill_mode_attribute():
    attrs, problems, _ = parse_attrs(SegmentMaxAttrs, {"fill_mode": "lowest"})
    assert attrs == SegmentMaxAttrs("lowest") and not problems
    attrs, problems, _ = parse_attrs(SegmentMaxAttrs, {"fill_mode": "max"})
    assert attrs is None and "fill_mode='max'" in problems[0][1]


def test_shape_rules():
    spec = TensorSpec.make
    (out,) = SegmentMax16.infer(ZERO, spec("f32", [5, 3]), spec("i32", [5]),
                                TensorSpec.of_value(np.array(8, np.int64), "i64"))
    assert out.shape == (Dim.of(8), Dim.of(3))
    (out,) = SegmentMax16.infer(ZERO, spec("f32", [5, None]),
                                TensorSpec.of_value(np.array([0, 0, 2, 3, 3], np.int32), "i32"))
    assert out.shape == (Dim.of(4), DYNAMIC)
    (out,) = SegmentMax16.infer(ZERO, spec("i8", [None, 2]), spec("i32", [None]), spec("i32", []))
    assert out.shape == (DYNAMIC, Dim.of(2)) and out.etype.name == "i8"
    (out,) = SegmentMax16.infer(ZERO, spec("f16", None), spec("i64", None))
    assert out.shape is None
    with pytest.raises(ShapeError, match=r"segment_ids has 4 elements, expected the size of data's dim 0 \(5\)"):
        SegmentMax16.infer(ZERO, spec("f32", [5]), spec("i32", [4]))
    with pytest.raises(ShapeError, match="segment_ids must be i32 or i64, got f32"):
        SegmentMax16.infer(ZERO, spec("f32", [5]), spec("f32", [5]))
    with pytest.raises(ShapeError, match="data must have at least one dimension"):
        SegmentMax16.infer(ZERO, spec("f32", []), spec("i32", [None]))


# ------------------------------------------------------------------ SparseFillEmptyRows

def fill(values, dense_shape, indices, default, itype=np.int64):
    return SparseFillEmptyRows16.run(None, np.asarray(values), np.array(dense_shape, itype),
                                     np.array(indices, itype).reshape(-1, 2),
                                     np.array(default, np.asarray(values).dtype))


def test_fill_spec_example_1():
    a, b, c, d = 10., 20., 30., 40.
    idx, vals, empty = fill(np.array([a, b, c, d]), [5, 6], [[0, 1], [0, 3], [2, 0], [3, 1]], -1.)
    assert idx.tolist() == [[0, 1], [0, 3], [1, 0], [2, 0], [3, 1], [4, 0]]
    assert vals.tolist() == [a, b, -1., c, d, -1.]
    assert empty.tolist() == [False, True, False, False, True]


def test_fill_spec_xml_example():
    idx, vals, empty = fill(np.array([1, 3], np.float32), [3, 3], [[0, 0], [2, 2]], 42, np.int32)
    assert idx.dtype == np.int32 and idx.tolist() == [[0, 0], [1, 0], [2, 2]]
    assert vals.dtype == np.float32 and vals.tolist() == [1, 42, 3]
    assert empty.tolist() == [False, True, False]


def test_fill_sorts_row_major_and_keeps_duplicates_in_order():
    idx, vals, empty = fill(np.array([1, 2, 3, 4]), [3, 4], [[2, 1], [0, 3], [0, 1], [0, 3]], 9)
    assert idx.tolist() == [[0, 1], [0, 3], [0, 3], [1, 0], [2, 1]]
    assert vals.tolist() == [3, 2, 4, 9, 1]
    assert empty.tolist() == [False, True, False]


def test_fill_no_values():
    idx, vals, empty = fill(np.zeros(0, np.int32), [2, 5], np.zeros((0, 2)), 7)
    assert idx.tolist() == [[0, 0], [1, 0]] and vals.tolist() == [7, 7] and empty.all()


@pytest.mark.parametrize("indices, message", [
    ([[0, 1], [3, 0]], r"indices\[1, 0\] is 3, expected in \[0, 3\) \(dense_shape rows\)"),
    ([[0, 4]], r"indices\[0, 1\] is 4, expected in \[0, 4\) \(dense_shape columns\)"),
    ([[-1, 0]], r"indices\[0, 0\] is -1, expected in \[0, 3\)"),
])
def test_fill_indices_out_of_range_fail(indices, message):
    with pytest.raises(OpError, match=message):
        fill(np.ones(len(indices)), [3, 4], indices, 0.)


def test_fill_shape_rules():
    spec = TensorSpec.make
    outs = SparseFillEmptyRows16.infer(None, spec("f32", [4]),
                                       TensorSpec.of_value(np.array([5, 6], np.int32), "i32"),
                                       spec("i32", [4, 2]), spec("f32", []))
    assert outs[0].shape == (Dim(4, 9), Dim.of(2)) and outs[0].etype.name == "i32"
    assert outs[1].shape == (Dim(4, 9),) and outs[2].shape == (Dim.of(5),)
    assert outs[2].etype.name == "boolean"
    outs = SparseFillEmptyRows16.infer(None, spec("i8", [None]), spec("i64", [2]),
                                       spec("i64", [None, 2]), spec("i8", []))
    assert outs[0].shape == (DYNAMIC, Dim.of(2)) and outs[2].shape == (DYNAMIC,)
    with pytest.raises(ShapeError, match="indices has 3 rows, expected one for each of the 4 values"):
        SparseFillEmptyRows16.infer(None, spec("f32", [4]), spec("i32", [2]), spec("i32", [3, 2]),
                                    spec("f32", []))
    with pytest.raises(ShapeError, match="default_value must have the element type of values"):
        SparseFillEmptyRows16.infer(None, spec("f32", [4]), spec("i32", [2]), spec("i32", [4, 2]),
                                    spec("f16", []))
    with pytest.raises(ShapeError, match="indices and dense_shape must have one element type"):
        SparseFillEmptyRows16.infer(None, spec("f32", [4]), spec("i64", [2]), spec("i32", [4, 2]),
                                    spec("f32", []))


# ------------------------------------------------------------------ OpenVINO CPU plugin

ov = pytest.importorskip("openvino")
oracle = pytest.importorskip("oracle")
import openvino.opset16 as o16


@pytest.mark.oracle
@settings(max_examples=20)
@given(st.data())
def test_oracle_segment_max(data):
    # The region: finite data (the plugin turns -inf and all-NaN segments into `lowest`,
    # see docs/ops.md), sorted non-negative ids.
    etype = data.draw(st.sampled_from(["f32", "i32", "i64", "u8"]), label="data type")
    itype = data.draw(st.sampled_from(["i32", "i64"]), label="ids type")
    n, width = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 3))
    ids = np.array(sorted(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))),
                   oracle.NP_TYPE[itype])
    lo = 0 if etype == "u8" else -100
    values = np.array(data.draw(st.lists(st.integers(lo, 100), min_size=n * width,
                                         max_size=n * width)))
    values = values.astype(oracle.NP_TYPE[etype]).reshape(n, width)
    # The plugin computes i64 data in i32, so its `lowest` is i32's: ZERO only for i64.
    fill_mode = data.draw(st.sampled_from(["ZERO"] if etype == "i64" else ["ZERO", "LOWEST"]),
                          label="fill_mode")
    num = data.draw(st.one_of(st.none(), st.integers(0, 9)), label="num_segments")
    params = [oracle.param([n, width], etype, "data"), oracle.param([n], itype, "ids")]
    feed = {"data": values, "ids": ids}
    if num is None:
        node = o16.segment_max(*params, fill_mode=fill_mode)
    else:
        params.append(oracle.param([], itype, "num"))
        feed["num"] = np.array(num, oracle.NP_TYPE[itype])
        node = o16.segment_max(*params, fill_mode=fill_mode)
    oracle.compare(ov.Model([node], params, "segment_max"), feed)


@pytest.mark.oracle
@settings(max_examples=15)
@given(st.data())
def test_oracle_sparse_fill_empty_rows(data):
    # The region: distinct positions (the reference's std::sort leaves the order of
    # duplicates open).
    itype = data.draw(st.sampled_from(["i32", "i64"]), label="index type")
    rows, cols = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5))
    cells = data.draw(st.lists(st.tuples(st.integers(0, rows - 1), st.integers(0, cols - 1)),
                               max_size=8, unique=True), label="positions")
    m = len(cells)
    indices = np.array(cells, oracle.NP_TYPE[itype]).reshape(m, 2)
    values = np.arange(1, m + 1, dtype=np.float32) * 1.5
    params = [oracle.param([m], "f32", "values"), oracle.param([2], itype, "shape"),
              oracle.param([m, 2], itype, "indices"), oracle.param([], "f32", "default")]
    node = o16.sparse_fill_empty_rows(*params)
    feed = {"values": values, "shape": np.array([rows, cols], oracle.NP_TYPE[itype]),
            "indices": indices, "default": np.array(-7, np.float32)}
    oracle.compare(ov.Model(node.outputs(), params, "fill"), feed)
