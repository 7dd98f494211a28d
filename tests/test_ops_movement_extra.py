"""GatherTree-1, SliceScatter-15, Unique-10: spec examples, shape rules, errors, and
differential tests against OpenVINO's CPU plugin."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun.ir.registry as R
from irrun.errors import OpError, ShapeError
from irrun.ir.etypes import from_dtype
from irrun.ir.registry import lookup
from irrun.ir.shapes import Dim, TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1
import openvino.opset10 as o10
import openvino.opset15 as o15

NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "i8": np.int8}


def op_attrs(type_, opset, data):
    op = lookup(type_, f"opset{opset}")
    a, problems, _ = R.parse_attrs(op.attrs, data)
    assert not problems, problems
    return op, a


def run_op(type_, opset, data, *arrays):
    op, a = op_attrs(type_, opset, data)
    specs = [TensorSpec.of_value(x, from_dtype(x.dtype)) for x in arrays]
    outs_spec = op.infer(a, *specs)
    outs = op.run(a, *arrays)
    for s, y in zip(outs_spec, outs):
        assert y.dtype == s.etype.dtype
        assert s.shape is None or all(d.contains(n) for d, n in zip(s.shape, y.shape))
    return outs


def infer(type_, opset, data, *specs):
    op, a = op_attrs(type_, opset, data)
    return op.infer(a, *specs)


def S(etype, shape):
    return TensorSpec.make(etype, shape)


def V(values, dtype=np.int64):
    v = np.array(values, dtype)
    return TensorSpec.of_value(v, from_dtype(v.dtype))


def compare(model, feed, tmp):
    return oracle.compare(model, feed, tmpdir=tmp)


# ---------------------------------------------------------------- GatherTree


def gather_tree_loops(step, parent, lens, end):
    """The spec's pseudocode, literally."""
    T, B, K = step.shape
    out = np.full(step.shape, end, step.dtype)
    for b in range(B):
        for k in range(K):
            m = min(T, int(lens[b]))
            if m == 0:
                continue
            p = parent[m - 1, b, k]
            out[m - 1, b, k] = step[m - 1, b, k]
            for level in reversed(range(m - 1)):
                out[level, b, k] = step[level, b, p]
                p = parent[level, b, p]
            finished = False
            for t in range(m):
                if finished:
                    out[t, b, k] = end
                elif out[t, b, k] == end:
                    finished = True
    return out


def test_gather_tree_small_example_and_spec_shape():
    step = np.array([[[1, 2, 3]], [[4, 5, 6]], [[7, 8, 9]]], np.int32)     # [T=3, B=1, K=3]
    parent = np.array([[[0, 0, 0]], [[0, 1, 1]], [[2, 1, 2]]], np.int32)
    (y,) = run_op("GatherTree", 1, {}, step, parent, np.array([3], np.int32), np.array(10, np.int32))
    # beam 0 ends in 7 at t=2, came from beam 2 at t=1 (6), whose parent is beam 1 at t=0 (2)
    assert y[:, 0, 0].tolist() == [2, 6, 7]
    np.testing.assert_array_equal(y, gather_tree_loops(step, parent, [3], 10))
    (s,) = infer("GatherTree", 1, {}, S("f32", [100, 1, 10]), S("f32", [100, 1, 10]), S("f32", [1]),
                 S("f32", []))
    assert format_shape(s.shape) == "[100,1,10]"


def test_gather_tree_end_token_and_lengths():
    step = np.array([[[5, 1]], [[3, 3]], [[9, 9]], [[4, 4]]], np.int32)
    parent = np.zeros((4, 1, 2), np.int32)
    parent[:, 0, 1] = 1
    (y,) = run_op("GatherTree", 1, {}, step, parent, np.array([3], np.int32), np.array(3, np.int32))
    # beam 0: 5, 3 (end), then end_token; beyond max_seq_len 3: end_token
    assert y[:, 0, 0].tolist() == [5, 3, 3, 3] and y[:, 0, 1].tolist() == [1, 3, 3, 3]
    (y,) = run_op("GatherTree", 1, {}, step, parent, np.array([0], np.int32), np.array(7, np.int32))
    assert (y == 7).all()


def test_gather_tree_errors():
    step = np.zeros((2, 1, 2), np.int32)
    with pytest.raises(OpError, match=r"parent_ids \(input 1\) points to beam 5 at position \[1, 0, 1\]"):
        bad = np.zeros((2, 1, 2), np.int32)
        bad[1, 0, 1] = 5
        run_op("GatherTree", 1, {}, step, bad, np.array([2], np.int32), np.array(0, np.int32))
    with pytest.raises(OpError, match=r"max_seq_len \(input 2\) is -1 at position \[0\]"):
        run_op("GatherTree", 1, {}, step, step, np.array([-1], np.int32), np.array(0, np.int32))
    with pytest.raises(ShapeError, match=r"end_token \(input 3\) must have rank 0"):
        infer("GatherTree", 1, {}, S("i32", [2, 1, 2]), S("i32", [2, 1, 2]), S("i32", [1]), S("i32", [1]))
    with pytest.raises(ShapeError, match=r"max_seq_len \[3\] must have BATCH_SIZE"):
        infer("GatherTree", 1, {}, S("i32", [2, 1, 2]), S("i32", [2, 1, 2]), S("i32", [3]), S("i32", []))
    with pytest.raises(ShapeError, match="differ in dim 2"):
        infer("GatherTree", 1, {}, S("i32", [2, 1, 2]), S("i32", [2, 1, 3]), S("i32", [1]), S("i32", []))
    with pytest.raises(ShapeError, match="element types differ"):
        infer("GatherTree", 1, {}, S("i32", [2, 1, 2]), S("f32", [2, 1, 2]), S("i32", [1]), S("i32", []))
    (s,) = infer("GatherTree", 1, {}, S("i32", None), S("i32", [None, 2, Dim(1, 4)]), S("i32", [2]), S("i32", []))
    assert format_shape(s.shape) == "[?,2,1..4]"


@pytest.mark.oracle
@settings(max_examples=8)
@given(T=st.integers(1, 6), B=st.integers(1, 3), K=st.integers(1, 4), et=st.sampled_from(["i32", "f32"]),
       seed=st.integers(0, 2**32 - 1))
def test_gather_tree_matches_openvino(tmp_path_factory, T, B, K, et, seed):
    rng = np.random.default_rng(seed)
    step = rng.integers(0, 8, (T, B, K)).astype(NP[et])
    parent = rng.integers(0, K, (T, B, K)).astype(NP[et])
    # length 0 is left out: the CPU plugin leaves such beams uninitialised (the spec, and
    # irrun, fill them with end_token); lengths beyond MAX_TIME are clamped by both
    lens = rng.integers(1, T + 3, B).astype(NP[et])
    end = np.array(rng.integers(0, 8), NP[et])
    np.testing.assert_array_equal(run_op("GatherTree", 1, {}, step, parent, lens, end)[0],
                                  gather_tree_loops(step, parent.astype(np.int64), lens, end))
    ps = [o1.parameter(list(a.shape), getattr(ov.Type, et), name=n) for n, a in zip("sple", (step, parent, lens, end))]
    compare(ov.Model([o1.result(o1.gather_tree(*ps))], ps), dict(zip("sple", (step, parent, lens, end))),
            tmp_path_factory.getbasetemp())


# ---------------------------------------------------------------- SliceScatter


def test_slice_scatter_spec_examples():
    data = np.array([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]], np.float32)
    i32 = lambda v: np.array(v, np.int32)
    (y,) = run_op("SliceScatter", 15, {}, data, np.array([[10, 20, 30, 40, 50]], np.float32),
                  i32([0]), i32([1]), i32([1]), i32([0]))
    assert y.tolist() == [[10, 20, 30, 40, 50], [5, 6, 7, 8, 9]]
    (y,) = run_op("SliceScatter", 15, {}, data, np.array([[10, 20, 30], [40, 50, 60]], np.float32),
                  i32([-25]), i32([25]), i32([2]), i32([1]))
    assert y.tolist() == [[10, 1, 20, 3, 30], [40, 6, 50, 8, 60]]
    data3 = np.arange(15, dtype=np.float32).reshape(3, 5)
    (y,) = run_op("SliceScatter", 15, {}, data3, np.array([[50, 60], [70, 80]], np.float32),
                  i32([0, 1]), i32([3, 5]), i32([2, 2]))
    assert y.tolist() == [[0, 50, 2, 60, 4], [5, 6, 7, 8, 9], [10, 70, 12, 80, 14]]
    assert data3[0, 1] == 1      # the input is not changed


def test_slice_scatter_shape_rules_and_errors():
    (s,) = infer("SliceScatter", 15, {}, S("f32", [None, 5]), S("f32", [2, 3]), S("i64", [1]),
                 S("i64", [1]), S("i64", [1]))
    assert format_shape(s.shape) == "[?,5]"
    with pytest.raises(ShapeError, match=r"must have the slice's shape \[2, 3\] \(dim 1\)"):
        infer("SliceScatter", 15, {}, S("f32", [2, 5]), S("f32", [2, 2]), V([0]), V([5]), V([2]), V([1]))
    with pytest.raises(ShapeError, match="same length, got 2, 1, 1 and 2"):
        infer("SliceScatter", 15, {}, S("f32", [2, 5]), S("f32", [2, 2]), V([0, 0]), V([5]), V([2]), V([0, 1]))
    with pytest.raises(ShapeError, match=r"axes \[1, -1\] name dim 1 twice"):
        infer("SliceScatter", 15, {}, S("f32", [2, 2]), S("f32", [2, 2]), V([0, 0]), V([2, 2]), V([1, 1]),
              V([1, -1]))
    with pytest.raises(ShapeError, match="step is 0 for axis 0"):
        infer("SliceScatter", 15, {}, S("f32", [2, 2]), S("f32", [2, 2]), V([0]), V([2]), V([0]))
    with pytest.raises(ShapeError, match="element types differ"):
        infer("SliceScatter", 15, {}, S("f32", [2]), S("f16", [2]), V([0]), V([2]), V([1]))
    with pytest.raises(OpError, match=r"updates \(input 1\) \[3\] must have the slice's shape \[2\]"):
        run_op("SliceScatter", 15, {}, np.zeros(4, np.float32), np.zeros(3, np.float32),
               np.array([0]), np.array([4]), np.array([2]))


@pytest.mark.oracle
@settings(max_examples=8)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data(),
       et=st.sampled_from(["f32", "i32", "u8", "i64"]), with_axes=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_slice_scatter_matches_openvino(tmp_path_factory, shape, data, et, with_axes, seed):
    rank = len(shape)
    n = data.draw(st.integers(1, rank))
    axes = data.draw(st.permutations(range(rank)))[:n] if with_axes else list(range(n))
    axes = [a - rank if data.draw(st.booleans()) else a for a in axes]
    starts, stops, steps = [], [], []
    for a in axes:
        d = shape[a]
        step = data.draw(st.sampled_from([1, 2, 3, -1, -2]))
        starts.append(data.draw(st.integers(-d - 2, d + 2)))
        stops.append(data.draw(st.integers(-d - 2, d + 2)))
        steps.append(step)
    index = [slice(None)] * rank
    for a, b, e, s in zip(axes, starts, stops, steps):
        index[a] = slice(b, e, s)
    upd_shape = np.empty(shape)[tuple(index)].shape
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 100, shape).astype(NP[et])
    u = rng.integers(100, 200, upd_shape).astype(NP[et])
    px = o15.parameter(shape, getattr(ov.Type, et), name="x")
    pu = o15.parameter(list(upd_shape), getattr(ov.Type, et), name="u")
    c = lambda v: ov.op.Constant(np.array(v, np.int64))
    args = [c(starts), c(stops), c(steps)] + ([c(axes)] if with_axes else [])
    compare(ov.Model([o15.result(o15.slice_scatter(px, pu, *args))], [px, pu]), {"x": x, "u": u},
            tmp_path_factory.getbasetemp())


# ---------------------------------------------------------------- Unique


def test_unique_spec_shape_examples():
    out = infer("Unique", 10, {"sorted": "false", "index_element_type": "i32"}, S("f32", [3, 3]), V([0]))
    assert [s.etype.name for s in out] == ["f32", "i32", "i32", "i64"]
    assert [format_shape(s.shape) for s in out] == ["[1..3,3]", "[1..3]", "[3]", "[1..3]"]
    out = infer("Unique", 10, {}, S("f32", [3, 3]))
    assert [s.etype.name for s in out] == ["f32", "i64", "i64", "i64"]
    assert [format_shape(s.shape) for s in out] == ["[1..9]", "[1..9]", "[9]", "[1..9]"]
    out = infer("Unique", 10, {"sorted": "false", "index_element_type": "i32", "count_element_type": "i32"},
                S("f32", [3, 3]))
    assert [s.etype.name for s in out] == ["f32", "i32", "i32", "i32"]


def test_unique_values_sorted_and_unsorted():
    x = np.array([5, 1, 5, 3, 1, 1], np.int32)
    u, first, inv, cnt = run_op("Unique", 10, {"sorted": "true"}, x)
    assert u.tolist() == [1, 3, 5] and first.tolist() == [1, 3, 0] and inv.tolist() == [2, 0, 2, 1, 0, 0]
    assert cnt.tolist() == [3, 1, 2] and first.dtype == np.int64
    u, first, inv, cnt = run_op("Unique", 10, {"sorted": "false", "index_element_type": "i32"}, x)
    assert u.tolist() == [5, 1, 3] and first.tolist() == [0, 1, 3] and inv.tolist() == [0, 1, 0, 2, 1, 1]
    assert cnt.tolist() == [2, 3, 1] and first.dtype == np.int32
    m = np.array([[1, 2], [0, 9], [1, 2]], np.float16)
    u, first, inv, cnt = run_op("Unique", 10, {"sorted": "false"}, m, np.array(0, np.int64))
    assert u.dtype == np.float16 and u.tolist() == [[1, 2], [0, 9]] and inv.tolist() == [0, 1, 0]
    u, first, inv, cnt = run_op("Unique", 10, {}, m, np.array([-1], np.int32))
    assert u.tolist() == m.tolist() and cnt.tolist() == [1, 1]   # columns [1,0,1], [2,9,2]
    u, first, inv, cnt = run_op("Unique", 10, {}, m[:, ::-1].copy(), np.array([-1], np.int32))
    assert u.tolist() == m.tolist() and first.tolist() == [1, 0] and inv.tolist() == [1, 0]
    u, *_ = run_op("Unique", 10, {}, np.zeros((0, 3), np.float32), np.array(0))
    assert u.shape == (0, 3)


def test_unique_each_nan_is_its_own_value():
    # Values compare with ==, as OpenVINO's: every NaN is a unique value of its own, -0
    # equals 0 (the first one's sign is kept). Sorted, the NaNs follow the numbers in the
    # order they occur (docs/ops.md, "Where irrun chooses a rule").
    nan = np.nan
    x = np.array([1, nan, 2, nan, 1, -0.0, 0.0, nan], np.float32)
    u, first, inv, cnt = run_op("Unique", 10, {"sorted": "false"}, x)
    assert np.array_equal(u, [1, nan, 2, nan, 0, nan], equal_nan=True) and np.signbit(u[4])
    assert first.tolist() == [0, 1, 2, 3, 5, 7] and inv.tolist() == [0, 1, 2, 3, 0, 4, 4, 5]
    assert cnt.tolist() == [2, 1, 1, 1, 2, 1]
    u, first, inv, cnt = run_op("Unique", 10, {"sorted": "true"}, x.astype(np.float16))
    assert u.dtype == np.float16 and np.array_equal(u, [0, 1, 2, nan, nan, nan], equal_nan=True)
    assert first.tolist() == [5, 0, 2, 1, 3, 7] and inv.tolist() == [1, 3, 2, 4, 1, 0, 0, 5]
    assert cnt.tolist() == [2, 2, 1, 1, 1, 1]
    rows = np.array([[1, nan], [1, nan], [0.0, 2], [-0.0, 2], [nan, 1]], np.float32)
    u, first, inv, cnt = run_op("Unique", 10, {"sorted": "true"}, rows, np.array(0))
    assert first.tolist() == [2, 0, 1, 4] and inv.tolist() == [1, 2, 0, 0, 3]
    assert cnt.tolist() == [2, 1, 1, 1]


@pytest.mark.oracle
@settings(max_examples=10)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(),
       et=st.sampled_from(["f32", "f16"]), seed=st.integers(0, 2**32 - 1))
def test_unique_with_nans_matches_openvino(tmp_path_factory, shape, data, et, seed):
    # Unsorted: OpenVINO's CPU plugin takes values (and slices) in order and compares them
    # with ==. Sorted, its order of NaNs is not defined (a sort by <), so not compared here.
    rng = np.random.default_rng(seed)
    x = rng.choice(np.array([0.0, -0.0, 1.0, np.nan], NP[et]), shape)
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    p = o10.parameter(shape, getattr(ov.Type, et), name="x")
    if axis is None:
        u = o10.unique(p, sorted=False)
    else:
        u = o10.unique(p, ov.op.Constant(np.array(axis, np.int64)), False)
    compare(ov.Model([o10.result(u.output(i)) for i in range(4)], [p]), {"x": x}, tmp_path_factory.getbasetemp())


def test_unique_errors():
    with pytest.raises(ShapeError, match=r"axis \(input 1\) 2 is out of range \[-2, 1\]"):
        infer("Unique", 10, {}, S("f32", [3, 3]), V(2))
    with pytest.raises(ShapeError, match=r"axis \(input 1\) must be a constant"):
        infer("Unique", 10, {}, S("f32", [3, 3]), S("i64", []))
    with pytest.raises(ShapeError, match=r"axis \(input 1\) must be i32 or i64, got u8"):
        infer("Unique", 10, {}, S("f32", [3, 3]), V(0, np.uint8))
    op = lookup("Unique", "opset10")
    _, problems, _ = R.parse_attrs(op.attrs, {"index_element_type": "u8"})
    assert problems and "index_element_type='u8'" in problems[0][1]


@pytest.mark.oracle
@settings(max_examples=8)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(),
       et=st.sampled_from(["f32", "i32", "u8", "i64"]), sorted_=st.booleans(),
       idx=st.sampled_from(["i32", "i64"]), cnt=st.sampled_from(["i32", "i64"]), seed=st.integers(0, 2**32 - 1))
def test_unique_matches_openvino(tmp_path_factory, shape, data, et, sorted_, idx, cnt, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, shape).astype(NP[et])          # few values: many repeats
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    if et == "u8" and axis is not None:
        # The CPU plugin's unsorted Unique along an axis of 8-bit data returns uninitialised
        # indices and counts ([1, 0, 1] gives first indices [-698417152, 32608]).
        sorted_ = True
    p = o10.parameter(shape, getattr(ov.Type, et), name="x")
    if axis is None:
        u = o10.unique(p, sorted=sorted_, index_element_type=idx, count_element_type=cnt)
    else:
        u = o10.unique(p, ov.op.Constant(np.array(axis, np.int64)), sorted_, idx, cnt)
    compare(ov.Model([o10.result(u.output(i)) for i in range(4)], [p]), {"x": x}, tmp_path_factory.getbasetemp())


# ---------------------------------------------------------------- Reverse


def test_reverse_spec_example_shape_and_rules():
    (out,) = infer("Reverse", 1, {"mode": "index"}, S("f32", [3, 10, 100, 200]), S("i64", [1]))
    assert format_shape(out.shape) == "[3,10,100,200]" and out.etype.name == "f32"
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (y,) = run_op("Reverse", 1, {"mode": "index"}, x, np.array([0, -1, 0], np.int64))
    np.testing.assert_array_equal(y, x[::-1, :, ::-1])     # a repeated axis flips once
    (y,) = run_op("Reverse", 1, {"mode": "mask"}, x, np.array([False, True, False]))
    np.testing.assert_array_equal(y, x[:, ::-1, :])
    (y,) = run_op("Reverse", 1, {"mode": "index"}, x, np.zeros(0, np.int32))
    np.testing.assert_array_equal(y, x)
    with pytest.raises(OpError, match=r"axis \(input 1\) 3 is out of range \[-3, 2\]"):
        run_op("Reverse", 1, {"mode": "index"}, x, np.array([3], np.int64))
    with pytest.raises(ShapeError, match="one boolean per data axis"):
        infer("Reverse", 1, {"mode": "mask"}, S("f32", [2, 3]), S("boolean", [3]))
    with pytest.raises(ShapeError, match="must be boolean in mode='mask'"):
        infer("Reverse", 1, {"mode": "mask"}, S("f32", [2, 3]), S("i64", [2]))
    with pytest.raises(ShapeError, match="integer element type in mode='index'"):
        infer("Reverse", 1, {"mode": "index"}, S("f32", [2, 3]), S("boolean", [2]))


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data(),
       etype=st.sampled_from(["f32", "i32", "u8", "i64"]), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_reverse_matches_openvino(tmp_path_factory, shape, data, etype, seed):
    # OpenVINO's Python API has no reverse(): opset1's NodeFactory builds it, as its ONNX
    # frontend does for ArgMax/ArgMin with select_last_index.
    from openvino.utils.node_factory import NodeFactory
    rank = len(shape)
    mode = data.draw(st.sampled_from(["index", "mask"]))
    if mode == "index":
        axes = np.array(data.draw(st.lists(st.integers(-rank, rank - 1), max_size=rank + 1)),
                        dtype=np.int64)
        dtype = data.draw(st.sampled_from([np.int64, np.int32, np.uint8]))
        axes = (axes % rank if dtype == np.uint8 else axes).astype(dtype)
    else:
        axes = np.array(data.draw(st.lists(st.booleans(), min_size=rank, max_size=rank)))
    x = np.random.default_rng(seed).integers(0, 100, shape).astype(NP[etype])
    p = o1.parameter(shape, ov.Type(np.dtype(NP[etype])), name="x")
    node = NodeFactory("opset1").create("Reverse", [p.output(0), ov.op.Constant(axes).output(0)],
                                        {"mode": mode})
    oracle.compare(ov.Model([node], [p]), {"x": x}, tmpdir=tmp_path_factory.getbasetemp())
