"""Bitwise ops (BitwiseAnd/Or/Xor/Not-13, BitwiseLeftShift/RightShift-15) and the value
classifiers (IsNaN/IsInf/IsFinite-10): differential tests against OpenVINO's CPU plugin,
spec examples, shape rules and errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irrun.errors import OpError, ShapeError, UnsupportedError
from irrun.ir.shapes import TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset10 as o10
import openvino.opset13 as o13
import openvino.opset15 as o15
from test_ops_elementwise import broadcastable_shapes, infer, model, param, run_op

INT_TYPES = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "i32": np.int32,
             "u32": np.uint32, "i64": np.int64, "u64": np.uint64}


def S(etype, shape):
    return TensorSpec.make(etype, shape)


def ints(rng, shape, etype):
    # The CPU plugin computes 64-bit integers and u32 as i32: stay in the range of i32 there.
    info = np.iinfo(np.int32 if etype in ("i64", "u64", "u32") else INT_TYPES[etype])
    lo = 0 if etype.startswith("u") else info.min
    return rng.integers(lo, info.max, size=shape, endpoint=True).astype(INT_TYPES[etype])


# ------------------------------------------------------------------ OpenVINO differential

@pytest.mark.oracle
@settings(max_examples=20)
@given(shapes=broadcastable_shapes(), etype=st.sampled_from(["boolean", "i8", "u8", "i32", "i64", "u16"]),
       seed=st.integers(0, 2**32 - 1))
def test_bitwise_logic_matches_openvino(tmp_path_factory, shapes, etype, seed):
    rng = np.random.default_rng(seed)
    if etype == "boolean":
        a, b = (rng.integers(0, 2, s).astype(bool) for s in shapes)
        t = ov.Type.boolean
    else:
        a, b = (ints(rng, s, etype) for s in shapes)
        t = etype
    pa, pb = param("a", a.shape, t), param("b", b.shape, t)
    outs = [o13.bitwise_and(pa, pb), o13.bitwise_or(pa, pb), o13.bitwise_xor(pa, pb),
            o13.bitwise_not(pa)]
    oracle.compare(model(outs, [pa, pb]), {"a": a, "b": b}, tmpdir=tmp_path_factory.getbasetemp())


@pytest.mark.oracle
@settings(max_examples=20)
@given(shapes=broadcastable_shapes(), etype=st.sampled_from(["i8", "u8", "i32", "u32", "i16"]),
       seed=st.integers(0, 2**32 - 1))
def test_shifts_match_openvino(tmp_path_factory, shapes, etype, seed):
    """Counts inside [0, bits): left shifts that overflow wrap, right shifts of negative
    numbers fill with the sign, in both. (i64 is left out: the CPU plugin shifts it as i32;
    test_64_bit_shifts_agree_with_python checks it.)"""
    rng = np.random.default_rng(seed)
    bits = np.dtype(INT_TYPES[etype]).itemsize * 8
    a = ints(rng, shapes[0], etype)
    b = rng.integers(0, bits, size=shapes[1]).astype(INT_TYPES[etype])
    pa, pb = param("a", a.shape, etype), param("b", b.shape, etype)
    outs = [o15.bitwise_left_shift(pa, pb), o15.bitwise_right_shift(pa, pb)]
    oracle.compare(model(outs, [pa, pb]), {"a": a, "b": b}, tmpdir=tmp_path_factory.getbasetemp())


@pytest.mark.oracle
@settings(max_examples=15)
@given(shape=st.lists(st.integers(1, 5), max_size=3), etype=st.sampled_from(["f32", "f16"]),
       neg=st.booleans(), pos=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_classifiers_match_openvino(tmp_path_factory, shape, etype, neg, pos, seed):
    """f64 is left out: the CPU plugin narrows it to f32 saturating, so IsFinite(-inf) is
    true there; test_spec_examples checks f64."""
    rng = np.random.default_rng(seed)
    dtype = {"f32": np.float32, "f16": np.float16, "f64": np.float64}[etype]
    # 1e30 is inf in f16 only
    x = rng.choice(np.array([0.0, -1.5, 2.0, np.inf, -np.inf, np.nan, 1e30, -6e4]), size=shape)
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    px = param("x", shape, etype)
    outs = [o10.is_nan(px), o10.is_finite(px),
            o10.is_inf(px, {"detect_negative": neg, "detect_positive": pos})]
    oracle.compare(model(outs, [px]), {"x": x}, tmpdir=tmp_path_factory.getbasetemp())


# ------------------------------------------------------------------ spec examples

def test_spec_examples():
    a, b = np.array([True, False, False]), np.array([True, True, False])
    assert run_op("BitwiseAnd", {}, a, b, opset=13)[0].tolist() == [True, False, False]
    (y,) = run_op("BitwiseAnd", {}, np.array([21, 120], np.uint8), np.array([3, 37], np.uint8), opset=13)
    assert y.dtype == np.uint8 and y.tolist() == [1, 32]
    (y,) = run_op("BitwiseOr", {}, np.array([21, 120], np.uint8), np.array([3, 37], np.uint8), opset=13)
    assert y.tolist() == [23, 125]
    (y,) = run_op("BitwiseXor", {}, np.array([21, 120], np.uint8), np.array([3, 37], np.uint8), opset=13)
    assert y.tolist() == [22, 93]
    assert run_op("BitwiseNot", {}, np.array([True, False]), opset=13)[0].tolist() == [False, True]
    (y,) = run_op("BitwiseNot", {}, np.array([1, 3], np.uint8), opset=13)
    assert y.tolist() == [254, 252]
    # the XML examples are shapes: [256,56] with itself, and [8,1,6,1] with [7,1,5]
    for t, opset in (("BitwiseAnd", 13), ("BitwiseOr", 13), ("BitwiseXor", 13),
                     ("BitwiseLeftShift", 15), ("BitwiseRightShift", 15)):
        (spec,) = infer(t, {}, S("i32", [256, 56]), S("i32", [256, 56]), opset=opset)
        assert format_shape(spec.shape) == "[256,56]"
        (spec,) = infer(t, {}, S("i32", [8, 1, 6, 1]), S("i32", [7, 1, 5]), opset=opset)
        assert format_shape(spec.shape) == "[8,7,6,5]"
    (spec,) = infer("BitwiseNot", {}, S("i32", [256, 56]), opset=13)
    assert format_shape(spec.shape) == "[256,56]"
    for t in ("IsNaN", "IsFinite", "IsInf"):
        (spec,) = infer(t, {}, S("f32", [256, 56]), opset=10)
        assert format_shape(spec.shape) == "[256,56]" and spec.etype.name == "boolean"
    x = np.array([np.nan, 2.1, 3.7, np.inf], np.float32)              # IsFinite example 2
    assert run_op("IsFinite", {}, x, opset=10)[0].tolist() == [False, True, True, False]
    for dtype in (np.float64, np.float16):
        x = np.array([np.nan, np.inf, -np.inf, 0.0, 1e300 if dtype == np.float64 else 6e4], dtype)
        assert run_op("IsNaN", {}, x, opset=10)[0].tolist() == [True, False, False, False, False]
        assert run_op("IsFinite", {}, x, opset=10)[0].tolist() == [False, False, False, True, True]
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0], np.float32)
    assert run_op("IsInf", {}, x, opset=10)[0].tolist() == [False, True, True, False, False]
    assert run_op("IsInf", {"detect_negative": "false"}, x, opset=10)[0].tolist() == \
        [False, True, False, False, False]
    assert not run_op("IsInf", {"detect_negative": "false", "detect_positive": "false"}, x,
                      opset=10)[0].any()


def test_shifts_wrap_and_fill_with_the_sign():
    (y,) = run_op("BitwiseLeftShift", {}, np.array([100, -1, 1], np.int8), np.array([1, 7, 7], np.int8), opset=15)
    assert y.tolist() == [-56, -128, -128]
    (y,) = run_op("BitwiseRightShift", {}, np.array([-128, -1, 127], np.int8), np.array([7, 3, 6], np.int8), opset=15)
    assert y.tolist() == [-1, -1, 1]
    (y,) = run_op("BitwiseRightShift", {}, np.array([2**63], np.uint64), np.array([63], np.uint64), opset=15)
    assert y.tolist() == [1]


@given(a=st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=8), b=st.integers(0, 63))
def test_64_bit_shifts_agree_with_python(a, b):
    x, n = np.array(a, np.int64), np.array(b, np.int64)
    (left,) = run_op("BitwiseLeftShift", {}, x, n, opset=15)
    (right,) = run_op("BitwiseRightShift", {}, x, n, opset=15)
    wrap = lambda v: (v + 2**63) % 2**64 - 2**63
    assert left.tolist() == [wrap(v << b) for v in a]
    assert right.tolist() == [v >> b for v in a]       # Python's >> is arithmetic
    (u,) = run_op("BitwiseLeftShift", {}, x.view(np.uint64), n.astype(np.uint64), opset=15)
    assert u.tolist() == [(v % 2**64 << b) % 2**64 for v in a]


# ------------------------------------------------------------------ rules and errors

def test_shift_counts_out_of_range_are_errors():
    with pytest.raises(OpError, match=r"shift count \(input 1\) is 8 at position \[1\]; it must lie in \[0, 7\]"):
        run_op("BitwiseLeftShift", {}, np.array([1, 2], np.uint8), np.array([1, 8], np.uint8), opset=15)
    with pytest.raises(OpError, match=r"shift count \(input 1\) is -1 at position \[0, 1\]"):
        run_op("BitwiseRightShift", {}, np.ones((2, 2), np.int32), np.array([0, -1], np.int32), opset=15)


def test_type_rules():
    with pytest.raises(ShapeError, match="BitwiseAnd needs integer or boolean inputs, got f32"):
        infer("BitwiseAnd", {}, S("f32", [2]), S("f32", [2]), opset=13)
    with pytest.raises(ShapeError, match="BitwiseLeftShift needs integer inputs, got boolean"):
        infer("BitwiseLeftShift", {}, S("boolean", [2]), S("boolean", [2]), opset=15)
    with pytest.raises(ShapeError, match="element types differ: input 0 is i32, input 1 is i64"):
        infer("BitwiseOr", {}, S("i32", [2]), S("i64", [2]), opset=13)
    with pytest.raises(UnsupportedError, match="sub-byte type u4"):
        infer("BitwiseNot", {}, S("u4", [2]), opset=13)
    (spec,) = infer("BitwiseXor", {}, S("u4", [2]), S("u4", [2]), opset=13)
    assert spec.etype.name == "u4"
    with pytest.raises(ShapeError, match="IsNaN needs a floating-point input"):
        infer("IsNaN", {}, S("i32", [2]), opset=10)
    (spec,) = infer("IsInf", {}, S("bf16", [None, 3]), opset=10)
    assert spec.etype.name == "boolean" and format_shape(spec.shape) == "[?,3]"


def test_broadcast_rules():
    (spec,) = infer("BitwiseAnd", {}, S("i32", [None, 1, 4]), S("i32", [3, 1]), opset=13)
    assert format_shape(spec.shape) == "[?,3,4]"
    with pytest.raises(ShapeError, match="auto_broadcast='none' needs equal shapes"):
        infer("BitwiseOr", {"auto_broadcast": "none"}, S("i32", [2, 3]), S("i32", [3]), opset=13)
    with pytest.raises(ShapeError, match="shapes do not broadcast"):
        infer("BitwiseXor", {}, S("u8", [2, 3]), S("u8", [4]), opset=13)
    (spec,) = infer("BitwiseNot", {}, S("i64", None), opset=13)
    assert spec.shape is None
