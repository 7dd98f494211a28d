"""EmbeddingBagOffsetsSum-3, EmbeddingBagPackedSum-3, EmbeddingBagOffsets-15,
EmbeddingBagPacked-15: the spec examples, shape rules, errors naming input, position and
value, a per-lookup reference, and differential tests against OpenVINO's CPU plugin."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun
from irrun.errors import OpError, ShapeError
from irrun.ir.etypes import element_type
from irrun.opkit.problems import collect_warnings, stop_collecting
from irrun.ops.sparse import (
    EmbeddingBagAttrs,
    EmbeddingBagOffsets15,
    EmbeddingBagOffsetsSum3,
    EmbeddingBagPacked15,
    EmbeddingBagPackedSum3,
)
from irrun.ir.shapes import DYNAMIC, Dim, TensorSpec

TABLE = np.array([[-0.2, -0.6], [-0.1, -0.4], [-1.9, -1.8], [-1., 1.5], [0.8, -0.7]], np.float32)
SUM, MEAN = EmbeddingBagAttrs("sum"), EmbeddingBagAttrs("mean")


def i32(values):
    return np.array(values, np.int32)


def f32(values):
    return np.array(values, np.float32)


# ------------------------------------------------------------------ spec examples, verbatim

def test_offsets_15_spec_example_1_default_index_0():
    (out,) = EmbeddingBagOffsets15.run(SUM, TABLE, i32([0, 2, 3, 4]), i32([0, 2, 2]), i32(0),
                                       f32([0.5, 0.5, 0.5, 0.5]))
    np.testing.assert_allclose(out, [[-1.05, -1.2], [-0.2, -0.6], [-0.1, 0.4]], rtol=1e-6)


def test_offsets_15_spec_example_2_default_index_minus_1():
    (out,) = EmbeddingBagOffsets15.run(SUM, TABLE, i32([0, 2, 3, 4]), i32([0, 2, 2]), i32(-1),
                                       f32([0.5, 0.2, -2, 1]))
    np.testing.assert_allclose(out, [[-0.48, -0.66], [0., 0.], [2.8, -3.7]], rtol=1e-6)


def test_offsets_15_spec_example_3_mean():
    (out,) = EmbeddingBagOffsets15.run(MEAN, TABLE, i32([0, 2, 3, 4]), i32([0, 2, 2]))
    np.testing.assert_allclose(out, [[-1.05, -1.2], [0., 0.], [-0.1, 0.4]], rtol=1e-6)


def test_offsets_sum_3_spec_example():
    (out,) = EmbeddingBagOffsetsSum3.run(None, TABLE, i32([0, 2, 3, 4]), i32([0, 2, 2]), i32(0),
                                         f32([0.5, 0.5, 0.5, 0.5]))
    np.testing.assert_allclose(out, [[-1.05, -1.2], [-0.2, -0.6], [-0.1, 0.4]], rtol=1e-6)


PACKED = i32([[0, 2], [1, 2], [3, 4]])


def test_packed_15_spec_example_1_sum():
    (out,) = EmbeddingBagPacked15.run(SUM, TABLE, PACKED)
    np.testing.assert_allclose(out, [[-2.1, -2.4], [-2., -2.2], [-0.2, 0.8]], rtol=1e-6)


def test_packed_15_spec_example_2_weights():
    (out,) = EmbeddingBagPacked15.run(SUM, TABLE, PACKED, f32([[0.5, 0.5], [0.3, 0.7], [2., -1.]]))
    np.testing.assert_allclose(out, [[-1.05, -1.2], [-1.36, -1.38], [-2.8, 3.7]], rtol=1e-6)


def test_packed_15_spec_example_3_mean():
    (out,) = EmbeddingBagPacked15.run(MEAN, TABLE, PACKED)
    np.testing.assert_allclose(out, [[-1.05, -1.2], [-1., -1.1], [-0.1, 0.4]], rtol=1e-6)


def test_packed_sum_3_spec_example():
    (out,) = EmbeddingBagPackedSum3.run(None, TABLE, PACKED, f32([[0.5, 0.5], [0.3, 0.7], [2., -1.]]))
    np.testing.assert_allclose(out, [[-1.05, -1.2], [-1.36, -1.38], [-2.8, 3.7]], rtol=1e-6)


# ------------------------------------------------------------------ rules

def reference(table, indices, bounds, weights=None, default=-1, mean=False):
    """One lookup at a time in float64 (floats) or exact Python integers wrapped to the
    table's width, divided toward zero (integers)."""
    table = np.asarray(table)
    is_int = table.dtype.kind in "iu"
    out = []
    for s in range(len(bounds) - 1):
        lo, hi = bounds[s], bounds[s + 1]
        if lo == hi:
            row = table[default] if default >= 0 else np.zeros(table.shape[1:], table.dtype)
            out.append(np.array(row.tolist(), dtype=object) if is_int else row.astype(np.float64))
            continue
        acc = 0
        for j in range(lo, hi):                # a test oracle, not a kernel
            w = 1 if weights is None else weights[j]
            row = table[indices[j]]
            acc = acc + (np.array(row.tolist(), dtype=object) * int(w) if is_int
                         else row.astype(np.float64) * float(w))
        if mean:
            if is_int:
                bits = table.dtype.itemsize * 8
                wrapped = np.array([int(v) % (1 << bits) for v in np.ravel(acc)], np.uint64)
                signed = wrapped.astype(table.dtype).astype(object)
                acc = np.array([int(v / (hi - lo)) if v >= 0 else -int(-v // (hi - lo))
                                for v in signed], dtype=object).reshape(np.shape(acc))
            else:
                acc = acc / (hi - lo)
        out.append(acc)
    shape = (len(bounds) - 1, *table.shape[1:])
    if not is_int:
        return np.array(out, np.float64).reshape(shape)
    bits = table.dtype.itemsize * 8
    flat = [int(v) % (1 << bits) for row in out for v in np.ravel(row)]
    return np.array(flat, np.uint64).astype(table.dtype).reshape(shape)


def test_mean_of_integers_rounds_toward_zero():
    table = i32([[7, -7], [0, 0], [-1, 1]])
    (out,) = EmbeddingBagOffsets15.run(MEAN, table, i32([0, 1, 2, 0, 2]), i32([0, 3, 3]))
    # [6, -6] / 3 = [2, -2]; empty bag: zeros; [6, -6] / 2 = [3, -3]
    assert out.tolist() == [[2, -2], [0, 0], [3, -3]]
    (out,) = EmbeddingBagOffsets15.run(MEAN, table, i32([2, 1]), i32([0]))
    assert out.tolist() == [[0, 0]]          # [-1, 1] / 2 -> 0, not -1 (C++ division)


def test_mean_of_a_large_bag_divides_the_wrapped_sum():
    # 128 lookups of -1 in i8: the sum wraps to -128 (as the C++ type does), / 128 = -1;
    # 130 lookups of 1: 130 wraps to -126, / 130 = 0; u8: 300 lookups of 1 -> 44 / 300 = 0.
    (out,) = EmbeddingBagOffsets15.run(MEAN, np.array([[-1], [1]], np.int8),
                                       np.array([0] * 128 + [1] * 130), i32([0, 128]))
    assert out.tolist() == [[-1], [0]]
    (out,) = EmbeddingBagPacked15.run(MEAN, np.array([[1], [255]], np.uint8),
                                      np.array([[0] * 300, [1] * 300]))
    assert out.tolist() == [[0], [(255 * 300 % 256) // 300]]


def test_empty_bags_take_the_default_row_unweighted_and_undivided():
    (out,) = EmbeddingBagOffsets15.run(MEAN, TABLE, i32([0, 1]), i32([0, 0, 2]), i32(3))
    np.testing.assert_allclose(out, [TABLE[3], (TABLE[0] + TABLE[1]) / 2, TABLE[3]], rtol=1e-6)
    (out,) = EmbeddingBagOffsetsSum3.run(None, TABLE, i32([0, 1]), i32([0, 0, 2]), i32(3),
                                         f32([2, 2]))
    np.testing.assert_allclose(out, [TABLE[3], 2 * (TABLE[0] + TABLE[1]), TABLE[3]], rtol=1e-6)


def test_default_minus_1_means_none_in_v3_and_v15():
    for op, attrs in ((EmbeddingBagOffsetsSum3, None), (EmbeddingBagOffsets15, SUM)):
        (out,) = op.run(attrs, TABLE, i32([4]), i32([0, 1]), i32(-1))
        np.testing.assert_array_equal(out, [TABLE[4], [0, 0]])


def test_offset_equal_to_length_is_an_empty_last_bag():
    (out,) = EmbeddingBagOffsets15.run(SUM, TABLE, i32([1, 2]), i32([0, 2, 2]))
    np.testing.assert_allclose(out, [TABLE[1] + TABLE[2], [0, 0], [0, 0]], rtol=1e-6)


def test_lookups_before_the_first_offset_are_in_no_bag():
    (out,) = EmbeddingBagOffsets15.run(SUM, TABLE, i32([1, 2, 3]), i32([1]))
    np.testing.assert_allclose(out, [TABLE[2] + TABLE[3]], rtol=1e-6)


def test_no_bags_and_no_lookups():
    (out,) = EmbeddingBagOffsets15.run(SUM, TABLE, i32([1, 2]), i32([]))
    assert out.shape == (0, 2)
    (out,) = EmbeddingBagOffsets15.run(MEAN, TABLE, i32([]), i32([0, 0]), i32(2))
    np.testing.assert_array_equal(out, [TABLE[2], TABLE[2]])
    (out,) = EmbeddingBagPacked15.run(MEAN, TABLE, np.zeros((3, 0), np.int64))
    np.testing.assert_array_equal(out, np.zeros((3, 2), np.float32))


@pytest.mark.parametrize("etype", ["f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_every_table_type_matches_the_reference(etype, reduction):
    rng = np.random.default_rng(3)
    dtype = element_type(etype).dtype
    table = rng.integers(-9 if etype[0] != "u" else 0, 10, (7, 3, 2)).astype(dtype)
    idx = rng.integers(0, 7, 40)
    offsets = np.sort(rng.integers(0, 41, 12))
    offsets[0] = 0
    bounds = [*offsets.tolist(), 40]
    weights = rng.integers(-2, 3, 40).astype(dtype) if reduction == "sum" and etype[0] != "u" else None
    (out,) = EmbeddingBagOffsets15.run(EmbeddingBagAttrs(reduction), table, idx, offsets,
                                       np.array(5), weights)
    expected = reference(table, idx, bounds, weights, 5, reduction == "mean")
    assert out.dtype == dtype and out.shape == (12, 3, 2)
    if etype in ("f16", "bf16"):
        # The sum in f32, then one rounding (to f16 / bf16): within half an ulp of it.
        np.testing.assert_allclose(out.astype(np.float64), expected, rtol=2 ** -7)
    elif element_type(etype).is_float:
        np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(out, expected)


@settings(max_examples=25)
@given(st.data())
def test_random_bags_match_the_reference(data):
    n = data.draw(st.integers(0, 30), label="lookups")
    bags = data.draw(st.integers(0, 8), label="bags")
    offsets = sorted(data.draw(st.lists(st.integers(0, n), min_size=bags, max_size=bags)))
    idx = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), np.int64)
    table = np.arange(18, dtype=np.float64).reshape(6, 3) - 7
    mean = data.draw(st.booleans(), label="mean")
    weights = None if mean else np.linspace(-1, 2, n)
    default = data.draw(st.sampled_from([-1, 0, 5]), label="default")
    (out,) = EmbeddingBagOffsets15.run(EmbeddingBagAttrs("mean" if mean else "sum"), table, idx,
                                       np.array(offsets, np.int64), np.array(default), weights)
    np.testing.assert_allclose(out, reference(table, idx, [*offsets, n], weights, default, mean),
                               rtol=1e-12, atol=1e-12)


def test_threads_split_bags_not_lookups(monkeypatch):
    from irrun.ops import sparse
    monkeypatch.setattr(sparse, "_workers", lambda n: 3)
    rng = np.random.default_rng(1)
    table = rng.standard_normal((50, 16)).astype(np.float32)
    idx = rng.integers(0, 50, 3000)
    offsets = np.sort(rng.integers(0, 3001, 200))
    offsets[:20] = 0          # empty bags at the start
    offsets[-5:] = 3000       # and at the end
    (out,) = EmbeddingBagOffsets15.run(MEAN, table, idx, offsets, np.array(7))
    expected = reference(table, idx, [*offsets.tolist(), 3000], None, 7, True)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ errors

def test_offsets_going_backwards_fail():
    with pytest.raises(OpError, match=r"offsets\[2\] is 1, smaller than offsets\[1\] = 3"):
        EmbeddingBagOffsets15.run(SUM, TABLE, i32([0, 1, 2, 3]), i32([0, 3, 1]))


@pytest.mark.parametrize("bad", [5, -1])
def test_offsets_beyond_indices_fail(bad):
    with pytest.raises(OpError, match=rf"offsets\[1\] is {bad}, expected in \[0, 4\]"):
        EmbeddingBagOffsetsSum3.run(None, TABLE, i32([0, 1, 2, 3]), i32([0, bad]))


@pytest.mark.parametrize("bad", [5, -1, 2**31 - 1])
def test_indices_out_of_range_fail(bad):
    with pytest.raises(OpError, match=rf"indices\[2\] is {bad}, expected in \[0, 5\)"):
        EmbeddingBagOffsets15.run(SUM, TABLE, i32([0, 1, bad, 3]), i32([0, 2]))
    with pytest.raises(OpError, match=rf"indices\[1\] is {bad}, expected in \[0, 5\)"):
        EmbeddingBagPackedSum3.run(None, TABLE, i32([[0, bad], [3, 4]]))


def test_default_index_out_of_range_fails_only_when_needed():
    (out,) = EmbeddingBagOffsets15.run(SUM, TABLE, i32([0, 1]), i32([0, 1]), i32(9))
    np.testing.assert_array_equal(out, TABLE[:2])
    with pytest.raises(OpError, match=r"default_index is 9, expected in \[0, 5\) .*or -1.*"
                                      r"empty bag 1"):
        EmbeddingBagOffsets15.run(SUM, TABLE, i32([0, 1]), i32([0, 2]), i32(9))
    with pytest.raises(OpError, match=r"default_index is -2"):
        EmbeddingBagOffsetsSum3.run(None, TABLE, i32([0, 1]), i32([0, 2]), i32(-2))


def test_weights_with_mean_fail():
    spec = TensorSpec.make
    with pytest.raises(ShapeError, match="per_sample_weights is only supported with reduction 'sum'"):
        EmbeddingBagOffsets15.infer(MEAN, spec("f32", [5, 2]), spec("i32", [4]), spec("i32", [3]),
                                    spec("i32", []), spec("f32", [4]))
    with pytest.raises(ShapeError, match="per_sample_weights is only supported"):
        EmbeddingBagPacked15.infer(MEAN, spec("f32", [5, 2]), spec("i32", [3, 2]), spec("f32", [3, 2]))
    with pytest.raises(OpError, match="per_sample_weights is only supported"):
        EmbeddingBagPacked15.run(MEAN, TABLE, PACKED, np.ones((3, 2), np.float32))


# ------------------------------------------------------------------ shape rules

def test_shape_rules():
    spec = TensorSpec.make
    (out,) = EmbeddingBagOffsets15.infer(SUM, spec("f32", [5, 2, 3]), spec("i64", [None]),
                                         spec("i64", [Dim(2, 9)]))
    assert out.shape == (Dim(2, 9), Dim.of(2), Dim.of(3)) and out.etype.name == "f32"
    (out,) = EmbeddingBagOffsetsSum3.infer(None, spec("bf16", [None, 4]), spec("i32", [10]),
                                           spec("i32", [3]), spec("i32", []), spec("bf16", [10]))
    assert out.shape == (Dim.of(3), Dim.of(4)) and out.etype.name == "bf16"
    (out,) = EmbeddingBagPacked15.infer(MEAN, spec("i8", [5, 7]), spec("i32", [3, None]))
    assert out.shape == (Dim.of(3), Dim.of(7)) and out.etype.name == "i8"
    (out,) = EmbeddingBagPackedSum3.infer(None, spec("f32", None), spec("i32", None))
    assert out.shape is None
    (out,) = EmbeddingBagPackedSum3.infer(None, spec("f32", [5, 4]), spec("i32", None))
    assert out.shape == (DYNAMIC, Dim.of(4))


@pytest.mark.parametrize("args, message", [
    (("f32", [5, 2], "i32", [4, 1], "i32", [3]), "INDICES must be 1D"),
    (("f32", [5, 2], "i32", [4], "i32", [3, 1]), "OFFSETS must be 1D"),
    (("f32", [5, 2], "i32", [4], "i64", [3]), r"OFFSETS element type \(i64\) must match indices"),
    (("f32", [5, 2], "f32", [4], "f32", [3]), "INDICES type must be i32 or i64, got f32"),
    (("f32", [], "i32", [4], "i32", [3]), "EMB_TABLE can't be a scalar"),
    (("boolean", [5, 2], "i32", [4], "i32", [3]), "emb_table must be of a numeric type, got boolean"),
])
def test_shape_rule_errors(args, message):
    tt, ts, it, ishape, ot, oshape = args
    spec = TensorSpec.make
    with pytest.raises(ShapeError, match=message):
        EmbeddingBagOffsets15.infer(SUM, spec(tt, ts), spec(it, ishape), spec(ot, oshape))


def test_shape_rule_weights_errors():
    spec = TensorSpec.make
    with pytest.raises(ShapeError, match="INDICES and PER_SAMPLE_WEIGHTS shape must be same"):
        EmbeddingBagPackedSum3.infer(None, spec("f32", [5, 2]), spec("i32", [3, 2]), spec("f32", [3, 3]))
    with pytest.raises(ShapeError, match=r"Per sample weight element type \(f16\) must match"):
        EmbeddingBagOffsetsSum3.infer(None, spec("f32", [5, 2]), spec("i32", [4]), spec("i32", [3]),
                                      spec("i32", []), spec("f16", [4]))


def test_constant_default_outside_the_table_warns():
    spec = TensorSpec.make
    sink = []
    token = collect_warnings(sink)
    try:
        EmbeddingBagOffsets15.infer(SUM, spec("f32", [5, 2]), spec("i32", [4]), spec("i32", [3]),
                                    TensorSpec.of_value(np.array(7, np.int32), "i32"))
    finally:
        stop_collecting(token)
    assert any("default_index 7 is outside [0, 5)" in m for _, m in sink), sink


def test_infer_agrees_with_run():
    rng = np.random.default_rng(0)
    for etype in ("f32", "f16", "bf16", "i32", "u8"):
        dtype = element_type(etype).dtype
        table = rng.integers(0, 5, (6, 2, 3)).astype(dtype)
        idx, offsets = np.array([0, 5, 2]), np.array([0, 1, 1])
        (spec,) = EmbeddingBagOffsets15.infer(SUM, TensorSpec.of_value(table, etype),
                                              TensorSpec.make("i64", [3]), TensorSpec.make("i64", [3]))
        (out,) = EmbeddingBagOffsets15.run(SUM, table, idx, offsets)
        assert out.dtype == spec.etype.dtype and out.shape == tuple(d.value for d in spec.shape)
        assert out.dtype == (ml_dtypes.bfloat16 if etype == "bf16" else dtype)


# ------------------------------------------------------------------ OpenVINO CPU plugin

ov = pytest.importorskip("openvino")
oracle = pytest.importorskip("oracle")
import openvino.opset3 as o3
import openvino.opset15 as o15

# The CPU plugin computes f32, i32, i8 and u8 tables (f16 / bf16 through f32, kept out of
# exact comparisons). Its region: every offset below the number of indices (it refuses an
# offset equal to it, see docs/ops.md), indices_per_bag >= 1 for the packed ops (with 0 it reads
# indices[0] of an empty bag).
_ORACLE_TYPES = {"f32": np.float32, "i32": np.int32, "i8": np.int8, "u8": np.uint8}


def _param(shape, etype, name):
    return ov.opset8.parameter(list(shape), oracle.ov_type(etype), name=name)


def _table(data, etype, rows, width):
    dtype = _ORACLE_TYPES[etype]
    if etype == "f32":
        values = data.draw(st.lists(st.integers(-64, 64), min_size=rows * width,
                                    max_size=rows * width))
        return (np.array(values, np.float32) / 8).reshape(rows, width)
    lo = 0 if etype == "u8" else -5
    values = data.draw(st.lists(st.integers(lo, 5), min_size=rows * width, max_size=rows * width))
    return np.array(values, dtype).reshape(rows, width)


@pytest.mark.oracle
@settings(max_examples=20)
@given(st.data())
def test_oracle_offsets(data):
    etype = data.draw(st.sampled_from(list(_ORACLE_TYPES)), label="table type")
    itype = data.draw(st.sampled_from(["i32", "i64"]), label="index type")
    version = data.draw(st.sampled_from([3, 15]), label="version")
    reduction = "sum" if version == 3 else data.draw(st.sampled_from(["sum", "mean"]))
    rows, width = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5))
    table = _table(data, etype, rows, width)
    n = data.draw(st.integers(1, 20), label="lookups")
    np_i = oracle.NP_TYPE[itype]
    idx = np.array(data.draw(st.lists(st.integers(0, rows - 1), min_size=n, max_size=n)), np_i)
    bags = data.draw(st.integers(1, 6), label="bags")
    offsets = np.array(sorted(data.draw(st.lists(st.integers(0, n - 1), min_size=bags,
                                                 max_size=bags))), np_i)
    default = data.draw(st.sampled_from([None, -1, 0, rows - 1]), label="default_index")
    weighted = reduction == "sum" and etype != "u8" and data.draw(st.booleans(), label="weights")
    if weighted and default is None:
        default = -1
    params = [_param([rows, width], etype, "emb"), oracle.param([n], itype, "idx"),
              oracle.param([bags], itype, "off")]
    feed = {"emb": table, "idx": idx, "off": offsets}
    args = [*params]
    if default is not None:
        args.append(ov.op.Constant(np.array(default, np_i)))
    if weighted:
        w = _table(data, etype, 1, n).reshape(n)
        params.append(_param([n], etype, "w"))
        args.append(params[-1])
        feed["w"] = w
    if version == 3:
        node = o3.embedding_bag_offsets_sum(*args)
    else:
        node = o15.embedding_bag_offsets(*args[:3], *(args[3:4] or [None]), *(args[4:5] or [None]),
                                         reduction=reduction)
    oracle.compare(ov.Model([node], params, "bag"), feed)


@pytest.mark.oracle
@settings(max_examples=15)
@given(st.data())
def test_oracle_packed(data):
    etype = data.draw(st.sampled_from(list(_ORACLE_TYPES)), label="table type")
    itype = data.draw(st.sampled_from(["i32", "i64"]), label="index type")
    version = data.draw(st.sampled_from([3, 15]), label="version")
    reduction = "sum" if version == 3 else data.draw(st.sampled_from(["sum", "mean"]))
    rows, width = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5))
    table = _table(data, etype, rows, width)
    bags, per_bag = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    idx = np.array(data.draw(st.lists(st.integers(0, rows - 1), min_size=bags * per_bag,
                                      max_size=bags * per_bag)), oracle.NP_TYPE[itype])
    idx = idx.reshape(bags, per_bag)
    params = [_param([rows, width], etype, "emb"), oracle.param([bags, per_bag], itype, "idx")]
    feed = {"emb": table, "idx": idx}
    if reduction == "sum" and etype != "u8" and data.draw(st.booleans(), label="weights"):
        params.append(_param([bags, per_bag], etype, "w"))
        feed["w"] = _table(data, etype, bags, per_bag)
    if version == 3:
        node = o3.embedding_bag_packed_sum(*params)
    else:
        node = o15.embedding_bag_packed(*params, *([None] if len(params) == 2 else []),
                                        reduction=reduction)
    oracle.compare(ov.Model([node], params, "bag"), feed)


def test_bad_offsets_are_located_in_a_model(tmp_path):
    params = [oracle.param([5, 2], "f32", "emb"), oracle.param([4], "i32", "idx"),
              oracle.param([3], "i32", "off")]
    node = o15.embedding_bag_offsets(*params, name="bag")
    xml = oracle.save(ov.Model([node], params, "bag"), tmp_path)
    m = irrun.read_model(xml)
    with pytest.raises(OpError) as e:
        m.infer({"emb": TABLE, "idx": i32([0, 1, 2, 3]), "off": i32([0, 3, 2])})
    text = str(e.value)
    assert "layer 'bag'" in text and "EmbeddingBagOffsets" in text
    assert "offsets[2] is 2, smaller than offsets[1] = 3" in text
