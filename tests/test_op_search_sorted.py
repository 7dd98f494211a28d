"""SearchSorted-15: the spec example's shapes, the shape rules, errors, NumPy's searchsorted
per row as a reference, mixed types compared as Bucketize compares them, and differential
tests against OpenVINO's CPU plugin."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irrun.errors import OpError, ShapeError
from irrun.opkit.problems import collect_warnings, stop_collecting
from irrun.ops.condition import Bucketize3, BucketizeAttrs, SearchSorted15, SearchSortedAttrs
from irrun.ir.shapes import DYNAMIC, Dim, TensorSpec

LEFT, RIGHT = SearchSortedAttrs(False), SearchSortedAttrs(True)


def search(seq, values, right=False):
    return SearchSorted15.run(RIGHT if right else LEFT, np.asarray(seq), np.asarray(values))[0]


def test_spec_example_shapes():
    (out,) = SearchSorted15.infer(RIGHT, TensorSpec.make("f32", [7, 256, 200, 200]),
                                  TensorSpec.make("f32", [7, 256, 200, 10]))
    assert out.etype.name == "i64" and out.shape == tuple(map(Dim.of, (7, 256, 200, 10)))


def test_left_and_right_modes():
    seq = np.array([1, 3, 3, 5], np.float32)
    assert search(seq, [0, 3, 4, 6]).tolist() == [0, 1, 3, 4]           # first i: v <= seq[i]
    assert search(seq, [0, 3, 4, 6], right=True).tolist() == [0, 3, 3, 4]


def test_batched_rows():
    seq = np.array([[1, 3, 5, 7, 9], [2, 4, 6, 8, 10]], np.int32)
    values = np.array([[3, 6, 9], [3, 6, 9]], np.int32)
    assert search(seq, values).tolist() == [[1, 3, 4], [1, 2, 4]]
    assert search(seq, values, right=True).tolist() == [[2, 3, 5], [1, 3, 4]]


def test_one_dimensional_sequence_takes_any_values_shape():
    out = search(np.array([0., 5., 10.]), np.array([[3, 50], [10, -1]], np.float64))
    assert out.shape == (2, 2) and out.tolist() == [[1, 3], [2, 0]]
    assert search(np.array([1, 2, 3]), np.array(2)).tolist() == 1


def test_shares_bucketize_kernel_and_rules():
    seq = np.array([0, 5, 10], np.float32)
    x = np.array([[3, 50], [10, -1], [np.nan, 5]], np.float32)
    for right in (False, True):
        (b,) = Bucketize3.run(BucketizeAttrs("i64", not right), x, seq)
        np.testing.assert_array_equal(search(seq, x, right), b)


def test_mixed_types_compare_as_bucketize():
    # i64 values against f32 sequence compare in f32: 2**24 + 1 equals 2**24 there.
    assert search(np.array([2.0**24], np.float32), np.array([2**24 + 1], np.int64)).tolist() == [0]
    x = np.array([0, 2**63, 2**64 - 1, 5], np.uint64)
    seq = np.array([-5, 0, 2**63 - 1], np.int64)
    assert search(seq, x).tolist() == [1, 3, 3, 2]
    sink = []
    token = collect_warnings(sink)
    try:
        SearchSorted15.infer(LEFT, TensorSpec.make("f32", [3]), TensorSpec.make("i64", [2]))
    finally:
        stop_collecting(token)
    assert any("different element types, which OpenVINO refuses" in m for _, m in sink)


@settings(max_examples=25)
@given(st.data())
def test_random_rows_match_numpy(data):
    rows, n, k = data.draw(st.integers(1, 4)), data.draw(st.integers(0, 9)), data.draw(st.integers(0, 6))
    seq = np.sort(np.array(data.draw(st.lists(st.integers(-20, 20), min_size=rows * n,
                                              max_size=rows * n))).reshape(rows, n), axis=1)
    values = np.array(data.draw(st.lists(st.integers(-22, 22), min_size=rows * k,
                                         max_size=rows * k))).reshape(rows, k)
    right = data.draw(st.booleans())
    out = search(seq, values, right)
    expected = [np.searchsorted(seq[r], values[r], side="right" if right else "left")
                for r in range(rows)]
    np.testing.assert_array_equal(out, np.array(expected).reshape(rows, k))


def test_large_batched_input_uses_the_threads(monkeypatch):
    from irrun.ops import condition
    monkeypatch.setattr(condition, "_PARALLEL_MIN", 1000)
    monkeypatch.setattr(condition, "_BLOCK", 777)
    rng = np.random.default_rng(2)
    seq = np.sort(rng.standard_normal((6, 100)), axis=1)
    values = rng.standard_normal((6, 5000))
    out = search(seq, values, True)
    expected = [np.searchsorted(seq[r], values[r], side="right") for r in range(6)]
    np.testing.assert_array_equal(out, expected)


_KINDS = {
    "f32": st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 3.0, 1e30]),
    "i64": st.sampled_from([np.iinfo(np.int64).min, -3, 0, 2, 7, np.iinfo(np.int64).max]),
    "u64": st.sampled_from([0, 2, 7, 2**63, 2**64 - 1]),
    "u8": st.integers(0, 255),
}
_DTYPES = {"f32": np.float32, "i64": np.int64, "u64": np.uint64, "u8": np.uint8}


@given(st.data())
def test_small_inputs_take_ndarray_searchsorted_with_the_same_answers(data):
    """Up to _SMALL_VALUES values in up to _SMALL_ROWS rows, ndarray.searchsorted answers
    row by row; above, the padded vectorised search. Both must give the same positions, NaN
    values (std::lower_bound puts them at 0), -0.0 against 0.0, infinities, and the
    mixed u64/i64 pairs included."""
    from irrun.ops import condition

    seq_kind = data.draw(st.sampled_from(sorted(_KINDS)), label="sequence type")
    val_kind = data.draw(st.sampled_from(sorted(_KINDS)), label="values type")
    rows = data.draw(st.integers(1, 4), label="rows")
    m = data.draw(st.integers(1, 12), label="sequence length")
    k = data.draw(st.integers(1, 12), label="values per row")
    seq = np.sort(np.array(data.draw(st.lists(_KINDS[seq_kind].filter(lambda v: v == v),
                                              min_size=rows * m, max_size=rows * m)),
                           _DTYPES[seq_kind]).reshape(rows, m), axis=1)
    values = np.array(data.draw(st.lists(_KINDS[val_kind], min_size=rows * k,
                                         max_size=rows * k)),
                      _DTYPES[val_kind]).reshape(rows, k)
    lower = data.draw(st.booleans(), label="lower")
    small = condition.search_sorted(seq, values, lower, np.int64)
    # (a MonkeyPatch context, not the fixture: hypothesis refuses function-scoped fixtures)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(condition, "_SMALL_VALUES", 0)
        padded = condition.search_sorted(seq, values, lower, np.int64)
    np.testing.assert_array_equal(small, padded)


# ------------------------------------------------------------------ errors and shapes

def test_unsorted_sequence_fails_naming_the_position():
    with pytest.raises(OpError, match=r"sorted_sequence\[1, 2\] = 7 > sorted_sequence\[1, 3\] = 2"):
        search(np.array([[0, 1, 2, 3], [0, 5, 7, 2]]), np.zeros((2, 1), np.int64))
    with pytest.raises(OpError, match=r"sorted_sequence\[1\] is NaN"):
        search(np.array([0, np.nan]), np.zeros(1))


def test_run_refuses_rows_that_do_not_match():
    with pytest.raises(OpError, match=r"values has shape \[3, 1\], expected \[2, ...\]"):
        search(np.zeros((2, 4)), np.zeros((3, 1)))


def test_shape_rules():
    spec = TensorSpec.make
    (out,) = SearchSorted15.infer(LEFT, spec("f32", [None, 5]), spec("f32", [3, Dim(1, 4)]))
    assert out.shape == (Dim.of(3), Dim(1, 4))
    (out,) = SearchSorted15.infer(LEFT, spec("f32", [5]), spec("f32", None))
    assert out.shape is None
    (out,) = SearchSorted15.infer(LEFT, spec("f32", [2, 5]), spec("f32", None))
    assert out.shape == (Dim.of(2), DYNAMIC)
    (out,) = SearchSorted15.infer(LEFT, spec("i32", None), spec("i32", [4, 2]))
    assert out.shape == (Dim.of(4), Dim.of(2))
    with pytest.raises(ShapeError, match="sorted_sequence cannot be a scalar"):
        SearchSorted15.infer(LEFT, spec("f32", []), spec("f32", [2]))
    with pytest.raises(ShapeError, match="values is a scalar, so sorted_sequence must be 1D"):
        SearchSorted15.infer(LEFT, spec("f32", [2, 3]), spec("f32", []))
    with pytest.raises(ShapeError, match="so values must have that rank"):
        SearchSorted15.infer(LEFT, spec("f32", [2, 3]), spec("f32", [2, 3, 1]))
    with pytest.raises(ShapeError, match=r"dim 0 of sorted_sequence \(2\) and of values \(3\)"):
        SearchSorted15.infer(LEFT, spec("f32", [2, 3]), spec("f32", [3, 3]))
    with pytest.raises(ShapeError, match="values must be of a numeric type; got boolean"):
        SearchSorted15.infer(LEFT, spec("f32", [3]), spec("boolean", [3]))


# ------------------------------------------------------------------ OpenVINO CPU plugin

ov = pytest.importorskip("openvino")
oracle = pytest.importorskip("oracle")


@pytest.mark.oracle
@settings(max_examples=20)
@given(st.data())
def test_oracle_random(data):
    etype = data.draw(st.sampled_from(["f32", "i32", "i64", "u8"]), label="type")
    rank = data.draw(st.integers(1, 3), label="sorted rank")
    lead = data.draw(st.lists(st.integers(1, 3), min_size=rank - 1, max_size=rank - 1))
    n = data.draw(st.integers(1, 8), label="sequence length")
    if rank == 1:
        vshape = data.draw(st.lists(st.integers(1, 4), min_size=0, max_size=3), label="values shape")
    else:
        vshape = [*lead, data.draw(st.integers(1, 5))]
    lo = 0 if etype == "u8" else -50
    seq = np.sort(np.array(data.draw(st.lists(st.integers(lo, 50), min_size=int(np.prod(lead)) * n,
                                              max_size=int(np.prod(lead)) * n))).reshape(*lead, n),
                  axis=-1)
    size = int(np.prod(vshape))
    values = np.array(data.draw(st.lists(st.integers(lo, 52), min_size=size, max_size=size)))
    dtype = oracle.NP_TYPE[etype]
    seq, values = seq.astype(dtype), values.astype(dtype).reshape(vshape)
    if etype == "f32":
        seq, values = seq / 4, values / 4
    right = data.draw(st.booleans(), label="right_mode")
    params = [oracle.param(list(seq.shape), etype, "seq"), oracle.param(vshape, etype, "values")]
    # output_type (i32/i64) is not on the spec page, and OpenVINO's Python API has no
    # argument for it: the NodeFactory sets it. OpenVINO writes it into every file.
    from openvino.utils.node_factory import NodeFactory
    output_type = data.draw(st.sampled_from(["i64", "i32"]), label="output_type")
    node = NodeFactory("opset15").create("SearchSorted", [p.output(0) for p in params],
                                         {"right_mode": right, "output_type": output_type})
    oracle.compare(ov.Model([node], params, "search"), {"seq": seq, "values": values})
