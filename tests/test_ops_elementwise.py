"""Element-wise binary, logical, Select and unary math ops: differential tests against
OpenVINO's CPU plugin, shape-inference rules and the rules where the CPU plugin is not the
reference (integer floor division, wrap-around, errors)."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import irrun
from irrun.errors import OpError, ShapeError, UnsupportedError
from irrun.ir.etypes import from_dtype
from irrun.ir.registry import lookup
from irrun.ir.shapes import Dim, TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1
import openvino.opset8 as o8

import irrun.ops.elementwise as E

DTYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i32": np.int32,
          "i64": np.int64, "i8": np.int8, "u8": np.uint8}


# ------------------------------------------------------------------ helpers shared by the op tests

def ov_type(name):
    return ov.Type(np.dtype(DTYPES[name])) if name in DTYPES else getattr(ov.Type, name)


def param(name, shape, etype):
    return o8.parameter(list(shape), ov_type(etype) if isinstance(etype, str) else etype, name=name)


def model(outputs, params):
    return ov.Model([o8.result(x) for x in outputs], params, "t")


@st.composite
def broadcastable_shapes(draw, n=2, max_rank=4, max_side=4):
    """n shapes that broadcast with numpy rules: dims of a common shape, some set to 1,
    some leading dims dropped."""
    rank = draw(st.integers(0, max_rank))
    base = draw(st.lists(st.integers(1, max_side), min_size=rank, max_size=rank))
    shapes = []
    for _ in range(n):
        r = draw(st.integers(0, rank))
        dims = base[rank - r:]
        ones = draw(st.lists(st.booleans(), min_size=r, max_size=r))
        shapes.append(tuple(1 if one else d for d, one in zip(dims, ones)))
    return shapes


def values(rng, shape, etype, lo=-10, hi=10, grid=4):
    """Random values on a grid of 1/grid steps (exact in every float type, with ties)."""
    dtype = DTYPES[etype]
    if np.dtype(dtype).kind in "iu":
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
    return (rng.integers(lo * grid, hi * grid, size=shape, endpoint=True) / grid).astype(dtype)


FLOAT_RTOL = {"f32": 1e-6, "f16": 1e-3, "f64": 1e-6}   # the CPU plugin runs f64 as f32


# ------------------------------------------------------------------ binary arithmetic

ARITH = [("add", "Add"), ("subtract", "Subtract"), ("multiply", "Multiply"),
         ("maximum", "Maximum"), ("minimum", "Minimum"), ("squared_difference", "SquaredDifference")]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]


@pytest.mark.oracle
@given(shapes=broadcastable_shapes(), etype=st.sampled_from(list(DTYPES)), seed=st.integers(0, 2**32 - 1),
       pythondiv=st.booleans())
def test_binary_family_matches_openvino(tmp_path_factory, shapes, etype, seed, pythondiv):
    rng = np.random.default_rng(seed)
    unsigned = etype == "u8"
    small = etype in ("i8", "u8")
    lo, hi = (0, 11) if unsigned else (-11, 11) if small else (-100, 100)
    a = values(rng, shapes[0], etype, lo, hi)
    b = values(rng, shapes[1], etype, lo, hi)
    pa, pb = param("a", a.shape, etype), param("b", b.shape, etype)
    pd = param("d", b.shape, etype)        # a divisor without zeros
    pe = param("e", b.shape, etype)        # a small exponent
    pp = param("p", a.shape, etype)        # a positive base
    d = values(rng, b.shape, etype, 1, 9)
    if not unsigned:
        d = np.where(rng.integers(0, 2, b.shape) == 1, d, -d).astype(d.dtype)
    e = values(rng, b.shape, etype, 0, 3, grid=1)
    p = values(rng, a.shape, etype, 1, 5, grid=2)
    outs = []
    for fn, _ in ARITH:
        if unsigned and fn in ("subtract", "squared_difference"):
            continue   # u8 wraps in irrun (C++), saturates in the CPU plugin: see the rule test
        if small and fn in ("multiply", "squared_difference"):
            continue   # i8/u8 products overflow: same
        outs.append(getattr(o8, fn)(pa, pb))
    outs += [getattr(o8, fn)(pa, pb) for fn in COMPARE]
    num = pa
    if pythondiv and etype not in ("f32", "f16", "f64"):
        # The CPU plugin ignores m_pythondiv for integers (it truncates): compare where
        # floor and truncation agree, and test flooring with negative operands below.
        num, dv = o8.abs(pa), o8.abs(pd)
    else:
        dv = pd
    div = o1.divide(num, dv)
    div.set_attribute("m_pythondiv", pythondiv)
    outs.append(div)
    if not small:
        outs.append(o8.power(pp, pe))
    feed = {"a": a, "b": b, "d": d, "e": e, "p": p}
    m = model(outs, [pa, pb, pd, pe, pp])
    oracle.compare(m, feed, rtol=FLOAT_RTOL.get(etype), tmpdir=tmp_path_factory.getbasetemp())


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 4), max_size=3), seed=st.integers(0, 2**32 - 1))
def test_auto_broadcast_none_logical_and_select_match_openvino(tmp_path_factory, shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, shape).astype(bool)
    b = rng.integers(0, 2, shape).astype(bool)
    x = values(rng, shape, "f32")
    y = values(rng, shape, "f32")
    pa, pb = param("a", shape, ov.Type.boolean), param("b", shape, ov.Type.boolean)
    px, py = param("x", shape, "f32"), param("y", shape, "f32")
    outs = [o8.logical_and(pa, pb), o8.logical_or(pa, pb), o8.logical_xor(pa, pb), o8.logical_not(pa),
            o8.add(px, py, auto_broadcast="none"), o8.less(px, py, auto_broadcast="none"),
            o8.equal(pa, pb), o8.select(pa, px, py, auto_broadcast="none")]
    oracle.compare(model(outs, [pa, pb, px, py]), {"a": a, "b": b, "x": x, "y": y},
                   tmpdir=tmp_path_factory.getbasetemp())


@pytest.mark.oracle
@given(shapes=broadcastable_shapes(n=3), etype=st.sampled_from(["f32", "i32", "i64", "f16", "u8"]),
       seed=st.integers(0, 2**32 - 1))
def test_select_and_logical_broadcast_match_openvino(tmp_path_factory, shapes, etype, seed):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 2, shapes[0]).astype(bool)
    t = values(rng, shapes[1], etype, 0, 50)
    f = values(rng, shapes[2], etype, 0, 50)
    pc, pt, pf = param("c", c.shape, ov.Type.boolean), param("t", t.shape, etype), param("f", f.shape, etype)
    pc2 = param("c2", f.shape, ov.Type.boolean)
    c2 = rng.integers(0, 2, f.shape).astype(bool)
    outs = [o1.select(pc, pt, pf), o8.logical_or(pc, pc2), o8.logical_xor(pc, pc2)]
    oracle.compare(model(outs, [pc, pt, pf, pc2]), {"c": c, "t": t, "f": f, "c2": c2},
                   tmpdir=tmp_path_factory.getbasetemp())


@pytest.mark.oracle
@given(shapes=broadcastable_shapes(), etype=st.sampled_from(["f32", "f16", "i32", "i64", "u8", "i8"]),
       seed=st.integers(0, 2**32 - 1))
def test_xor1_and_logical_not_of_any_type_match_openvino(tmp_path_factory, shapes, etype, seed):
    # Xor-1 is opset1's LogicalXor (NodeFactory is the only way to build it); LogicalNot of a
    # number is x == 0 in x's type in OpenVINO (NaN -> 0).
    from openvino.utils.node_factory import NodeFactory
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, shapes[0]).astype(bool)
    b = rng.integers(0, 2, shapes[1]).astype(bool)
    x = values(rng, shapes[0], etype, 0 if etype == "u8" else -2, 2)
    if etype in ("f32", "f16") and x.size:
        x.reshape(-1)[rng.integers(0, x.size)] = np.nan
    pa, pb = param("a", a.shape, ov.Type.boolean), param("b", b.shape, ov.Type.boolean)
    px = param("x", x.shape, etype)
    xor = NodeFactory("opset1").create("Xor", [pa.output(0), pb.output(0)],
                                       {"auto_broadcast": "numpy"})
    outs = [xor, o1.logical_not(px)]
    oracle.compare(model(outs, [pa, pb, px]), {"a": a, "b": b, "x": x},
                   tmpdir=tmp_path_factory.getbasetemp())


TEXT = st.lists(st.sampled_from(["a", "b", "é", "\u4e2d", "\U0001f600", " "]), max_size=4).map("".join)


@pytest.mark.oracle
@given(shapes=broadcastable_shapes(max_rank=2), data=st.data())
def test_comparisons_of_strings(tmp_path_factory, shapes, data):
    """OpenVINO's type rules take strings in every comparison (its CPU plugin has no string
    kernel: "unsupported src_prc: string"): irrun reads the file OpenVINO writes, infers what
    OpenVINO infers, and compares by code point (the order of the UTF-8 bytes)."""
    a = np.array(data.draw(st.lists(TEXT, min_size=int(np.prod(shapes[0])),
                                    max_size=int(np.prod(shapes[0])))), dtype=object)
    b = np.array(data.draw(st.lists(TEXT, min_size=int(np.prod(shapes[1])),
                                    max_size=int(np.prod(shapes[1])))), dtype=object)
    a, b = a.reshape(shapes[0]), b.reshape(shapes[1])
    pa, pb = param("a", a.shape, ov.Type.string), param("b", b.shape, ov.Type.string)
    outs = [getattr(o8, fn)(pa, pb) for fn in COMPARE]
    d = tmp_path_factory.mktemp("strcmp")
    xml = oracle.save(model(outs, [pa, pb]), d)
    m = irrun.read_model(xml)       # raises on any error
    got = m.infer({"a": a, "b": b})
    want = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal]
    for fn, node, out in zip(want, outs, m.outputs):
        assert got[out.name].dtype == np.bool_
        assert list(got[out.name].shape) == list(node.get_output_shape(0))
        byte_order = np.vectorize(lambda u, v, f=fn: f(u.encode(), v.encode()), otypes=[bool])(a, b)
        np.testing.assert_array_equal(got[out.name], byte_order)


# ------------------------------------------------------------------ unary

UNARY_FLOAT = ["abs", "negative", "floor", "ceiling", "exp", "erf", "sin", "cos", "sign"]


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 5), max_size=3), etype=st.sampled_from(["f32", "f16", "f64"]),
       seed=st.integers(0, 2**32 - 1))
def test_unary_float_matches_openvino(tmp_path_factory, shape, etype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(DTYPES[etype])
    pos = (rng.random(shape) * 50 + 0.01).astype(DTYPES[etype])
    px, pp = param("x", shape, etype), param("pos", shape, etype)
    outs = [getattr(o8, fn)(px) for fn in UNARY_FLOAT] + [o8.sqrt(pp), o8.log(pp)]
    feed = {"x": x, "pos": pos}
    with __import__("tempfile").TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(model(outs, [px, pp]), d)
        expected = oracle.ov_run(xml, feed)
        got = oracle.irrun_run(xml, feed)
    # The CPU plugin's exp/erf/sin/cos/log are a few ulp off; near zeros of sin/cos/log an
    # absolute tolerance of a few ulp of the argument is the right scale.
    rtol = {"f32": 4e-6, "f16": 2e-3, "f64": 4e-6}[etype]
    atol = {"f32": 4e-6, "f16": 2e-3, "f64": 4e-6}[etype]
    for g, e in zip(got, expected):
        oracle.assert_same(g, e, rtol=rtol, atol=atol)


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 5), max_size=3), etype=st.sampled_from(["i32", "i64", "i8"]),
       seed=st.integers(0, 2**32 - 1))
def test_unary_integer_matches_openvino(tmp_path_factory, shape, etype, seed):
    """Integer inputs: exact ops stay exact, float functions round to nearest."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 4, shape, endpoint=True).astype(DTYPES[etype])  # exp(4) fits i8
    pos = rng.integers(1, 100, shape).astype(DTYPES[etype])
    px, pp = param("x", shape, etype), param("pos", shape, etype)
    outs = [getattr(o8, fn)(px) for fn in UNARY_FLOAT] + [o8.sqrt(pp), o8.log(pp)]
    oracle.compare(model(outs, [px, pp]), {"x": x, "pos": pos}, tmpdir=tmp_path_factory.getbasetemp())


# ------------------------------------------------------------------ rules the CPU plugin does not follow

def run_op(type_, attrs, *arrays, opset=1):
    op = lookup(type_, f"opset{opset}")
    import irrun.ir.registry as R
    a, problems, _ = R.parse_attrs(op.attrs, attrs)
    assert not problems, problems
    specs = [TensorSpec.of_value(x, from_dtype(x.dtype)) for x in arrays]
    out_specs = op.infer(a, *specs)
    outs = op.run(a, *arrays)
    for s, y in zip(out_specs, outs):
        assert isinstance(y, np.ndarray)
        assert y.dtype == s.etype.dtype
        assert s.shape is None or len(s.shape) == y.ndim and all(d.contains(n) for d, n in zip(s.shape, y.shape))
    return outs


def test_integer_divide_floors_with_pythondiv_and_truncates_without():
    a = np.array([7, -7, 7, -7, 6, -6, 0], np.int32)
    b = np.array([2, 2, -2, -2, -3, 3, -5], np.int32)
    (floor,) = run_op("Divide", {"m_pythondiv": "true"}, a, b)
    (trunc,) = run_op("Divide", {"m_pythondiv": "false"}, a, b)
    np.testing.assert_array_equal(floor, [3, -4, -4, 3, -2, -2, 0])
    np.testing.assert_array_equal(trunc, [3, -3, -3, 3, -2, -2, 0])
    np.testing.assert_array_equal(floor, np.floor_divide(a, b))
    # the default is m_pythondiv=true
    np.testing.assert_array_equal(run_op("Divide", {}, a, b)[0], floor)


@given(a=st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=20),
       b=st.integers(-2**31, 2**31 - 1).filter(lambda v: v != 0))
def test_integer_divide_agrees_with_python_semantics(a, b):
    x, y = np.array(a, np.int32), np.array(b, np.int32)
    (floor,) = run_op("Divide", {"m_pythondiv": "true"}, x, y)
    (trunc,) = run_op("Divide", {"m_pythondiv": "false"}, x, y)
    wrap = lambda v: (v + 2**31) % 2**32 - 2**31
    assert floor.tolist() == [wrap(v // b) for v in a]
    c_div = lambda v: abs(v) // abs(b) * (1 if (v < 0) == (b < 0) else -1)
    assert trunc.tolist() == [wrap(c_div(v)) for v in a]


def test_integer_division_by_zero_is_an_error_with_position(tmp_path):
    pa, pb = param("a", [2, 3], "i32"), param("b", [3], "i32")
    xml = oracle.save(model([o8.divide(pa, pb)], [pa, pb]), tmp_path)
    m = irrun.read_model(xml)
    with pytest.raises(OpError, match=r"division by zero: input 1 is 0 at position \[2\]") as info:
        m.infer({"a": np.ones((2, 3), np.int32), "b": np.array([1, 2, 0], np.int32)})
    assert "Divide" in str(info.value) and ".xml:" in str(info.value)
    # float division by zero is IEEE: inf and nan
    (y,) = run_op("Divide", {}, np.array([1, -1, 0], np.float32), np.zeros(3, np.float32))
    assert np.isinf(y[0]) and y[0] > 0 and np.isinf(y[1]) and y[1] < 0 and np.isnan(y[2])


def test_integer_arithmetic_wraps_like_cpp():
    u = np.array([200, 3], np.uint8)
    assert run_op("Add", {}, u, u)[0].tolist() == [144, 6]
    assert run_op("Subtract", {}, np.array([3], np.uint8), np.array([5], np.uint8))[0].tolist() == [254]
    i = np.array([2**31 - 1], np.int32)
    assert run_op("Multiply", {}, i, np.array([2], np.int32))[0].tolist() == [-2]
    assert run_op("Abs", {}, np.array([-2**31], np.int32))[0].tolist() == [-2**31]
    assert run_op("Negative", {}, np.array([1], np.uint8))[0].tolist() == [255]


def test_maximum_and_minimum_propagate_nan():
    a = np.array([np.nan, 1.0, np.nan], np.float32)
    b = np.array([1.0, np.nan, np.nan], np.float32)
    for t in ("Maximum", "Minimum"):
        assert np.isnan(run_op(t, {}, a, b)[0]).all()


def test_integer_power_rules():
    base = np.array([2, 3, -2, 0, 2, 1, -1, -1, 3], np.int64)
    exp = np.array([3, 2, 3, 0, -1, -5, -3, -2, 40], np.int64)
    (y,) = run_op("Power", {}, base, exp)
    assert y.tolist()[:8] == [8, 9, -8, 1, 0, 1, -1, 1]
    assert y[8] == np.int64(pow(3, 40, 2**64) - 2**64 if pow(3, 40, 2**64) >= 2**63 else pow(3, 40, 2**64))
    with pytest.raises(OpError, match="0 raised to a negative power"):
        run_op("Power", {}, np.array([0], np.int32), np.array([-1], np.int32))


def test_results_keep_dtype_for_scalars_and_bf16():
    bf = np.array([1.5, -2.25, 3.0], ml_dtypes.bfloat16)
    for t in ("Add", "Multiply", "Subtract", "Maximum", "Divide", "SquaredDifference", "Power"):
        (y,) = run_op(t, {}, bf, bf)
        assert y.dtype == bf.dtype
        ref = {"Add": np.add, "Multiply": np.multiply, "Subtract": np.subtract, "Maximum": np.maximum,
               "Divide": np.divide, "SquaredDifference": lambda p, q: (p - q) ** 2,
               "Power": np.power}[t]
        with np.errstate(invalid="ignore"):   # (-2.25) ** -2.25 is NaN in both
            ref = ref(bf.astype(np.float32), bf.astype(np.float32))
        np.testing.assert_array_equal(y.astype(np.float32), ref.astype(ml_dtypes.bfloat16).astype(np.float32))
    for t in ("Exp", "Erf", "Sqrt", "Abs"):
        (y,) = run_op(t, {}, np.abs(bf))
        assert y.dtype == bf.dtype
    (y,) = run_op("Add", {}, np.array(2, np.int32), np.array(3, np.int32))
    assert y.shape == () and y.dtype == np.int32 and y == 5
    (y,) = run_op("Less", {}, np.array(2.0, np.float16), np.array([3.0, 1.0], np.float16))
    assert y.dtype == np.bool_ and y.tolist() == [True, False]


def test_erf_is_accurate_to_an_ulp_in_f64():
    import math
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 1e-300, 0.84375, 1.25, 1 / 0.35, 6.0, 27.0]])
    ref = np.array([math.erf(v) for v in x])
    got = E.erf(x)
    np.testing.assert_allclose(got, ref, rtol=3e-16, atol=0)
    y = E.erf(np.array([np.inf, -np.inf, np.nan, -0.0]))
    assert y[0] == 1 and y[1] == -1 and np.isnan(y[2]) and np.signbit(y[3])


def test_unary_integer_results_not_representable_are_errors():
    with pytest.raises(OpError, match=r"Sqrt of integer input 0 at position \[1\] \(value -4\)"):
        run_op("Sqrt", {}, np.array([4, -4], np.int32))
    with pytest.raises(OpError, match="Log of integer"):
        run_op("Log", {}, np.array([0], np.int32))


# ------------------------------------------------------------------ shape and type inference

def infer(type_, attrs, *specs, opset=1):
    import irrun.ir.registry as R
    op = lookup(type_, f"opset{opset}")
    a, problems, _ = R.parse_attrs(op.attrs, attrs)
    assert not problems, problems
    return op.infer(a, *specs)


def S(etype, shape):
    return TensorSpec.make(etype, shape)


@pytest.mark.parametrize("a, b, out", [
    ([2, 3], [3], "[2,3]"),
    ([2, 1, 4], [3, 1], "[2,3,4]"),
    ([None, 3], [4, 1, 3], "[4,?,3]"),          # ? may be 1: the result takes the other dim... or equals it
    ([None], [5], "[5]"),
    ([Dim(2, 8)], [Dim(4, 10)], "[4..8]"),       # neither may be 1: the intersection
    ([Dim(1, 8)], [Dim(4, 10)], "[4..10]"),      # a may be 1: b decides
    ([Dim(1, 8)], [Dim(0, 3)], "[..8]"),
    ([], [2, 2], "[2,2]"),
])
def test_numpy_broadcast_inference_with_interval_dims(a, b, out):
    (spec,) = infer("Add", {}, S("f32", a), S("f32", b))
    assert format_shape(spec.shape) == out
    (spec,) = infer("Greater", {}, S("i64", b), S("i64", a))
    assert spec.etype.name == "boolean" and format_shape(spec.shape) == out


def test_dynamic_rank_propagates():
    (spec,) = infer("Multiply", {}, S("f32", None), S("f32", [3]))
    assert spec.shape is None


def test_incompatible_broadcast_names_both_shapes():
    with pytest.raises(ShapeError) as info:
        infer("Add", {}, S("f32", [2, 3]), S("f32", [4, 3]))
    msg = str(info.value)
    assert "input 0 [2,3]" in msg and "input 1 [4,3]" in msg and "2 vs 4" in msg
    with pytest.raises(ShapeError, match=r"2\.\.3 vs 5"):
        infer("Add", {}, S("f32", [Dim(2, 3)]), S("f32", [5]))


def test_auto_broadcast_none_needs_equal_shapes_and_pdpd_is_unsupported():
    (spec,) = infer("Subtract", {"auto_broadcast": "none"}, S("f32", [2, None]), S("f32", [None, 3]))
    assert format_shape(spec.shape) == "[2,3]"
    with pytest.raises(ShapeError, match=r"needs equal shapes, got input 0 \[2,3\] and input 1 \[3\]"):
        infer("Subtract", {"auto_broadcast": "none"}, S("f32", [2, 3]), S("f32", [3]))
    with pytest.raises(UnsupportedError, match="pdpd"):
        infer("Add", {"auto_broadcast": "pdpd"}, S("f32", [2, 3]), S("f32", [3]))


def test_type_rules():
    with pytest.raises(ShapeError, match="input 0 is f32, input 1 is i32"):
        infer("Add", {}, S("f32", [2]), S("i32", [2]))
    with pytest.raises(ShapeError, match="does not accept element type boolean"):
        infer("Add", {}, S("boolean", [2]), S("boolean", [2]))
    with pytest.raises(ShapeError, match="does not accept element type f32"):
        infer("LogicalAnd", {}, S("f32", [2]), S("f32", [2]))
    with pytest.raises(ShapeError, match="does not accept element type string"):
        infer("LogicalNot", {}, S("string", [2]))
    (spec,) = infer("LogicalNot", {}, S("i32", [2]))     # any type, as OpenVINO
    assert spec.etype.name == "i32"
    with pytest.raises(ShapeError, match="does not accept element type i32"):
        infer("Xor", {}, S("i32", [2]), S("i32", [2]))
    (spec,) = infer("Equal", {}, S("boolean", [2]), S("boolean", [1]))
    assert spec.etype.name == "boolean"


def test_select_inference():
    (spec,) = infer("Select", {}, S("boolean", [None, 1]), S("i64", [3]), S("i64", [2, 1, 1]))
    assert spec.etype.name == "i64" and format_shape(spec.shape) == "[2,?,3]"
    with pytest.raises(ShapeError, match="then \\(input 1\\) is f32, else \\(input 2\\) is f16"):
        infer("Select", {}, S("boolean", [1]), S("f32", [3]), S("f16", [3]))
    with pytest.raises(ShapeError, match="boolean condition"):
        infer("Select", {}, S("f32", [1]), S("f32", [3]), S("f32", [3]))
    with pytest.raises(ShapeError, match=r"cond \[2\] and then \[3\] and else \[3\]"):
        infer("Select", {}, S("boolean", [2]), S("f32", [3]), S("f32", [3]))


def test_attribute_schema_reports_bad_values():
    import irrun.ir.registry as R
    op = lookup("Divide", "opset1")
    _, problems, _ = R.parse_attrs(op.attrs, {"m_pythondiv": "maybe", "auto_broadcast": "numpy"})
    assert problems and "m_pythondiv='maybe'" in problems[0][1]
    _, problems, _ = R.parse_attrs(op.attrs, {"auto_broadcast": "explicit"})
    assert problems and "auto_broadcast='explicit'" in problems[0][1] and "none, numpy, pdpd" in problems[0][1]
    a, problems, _ = R.parse_attrs(lookup("Add", "opset13").attrs, {"auto_broadcast": "NUMPY"})
    assert not problems and a.auto_broadcast == "numpy"


def test_constant_folding_computes_values(tmp_path):
    """All-constant inputs are folded at load time: the value reaches shape inference."""
    c1 = o8.constant(np.array([2, 3], np.int64))
    c2 = o8.constant(np.array([4, 5], np.int64))
    pa = param("a", [1], "f32")
    m = model([o8.multiply(c1, c2), o8.add(pa, pa)], [pa])
    xml = oracle.save(m, tmp_path)
    out = oracle.irrun_run(xml, {"a": np.ones(1, np.float32)})
    assert out[0].tolist() == [8, 15]


# ------------------------------------------------------------------ trigonometric and hyperbolic unary ops

TRIG = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]
TRIG_TYPES = {"Tan": 1, "Asin": 1, "Acos": 1, "Atan": 1, "Sinh": 1, "Cosh": 1,
              "Asinh": 4, "Acosh": 4, "Atanh": 4}


def test_tan_spec_examples():
    (y,) = run_op("Tan", {}, np.array([0.0, 0.25, -0.25, 0.5, -0.5], np.float32))
    np.testing.assert_allclose(y, [0.0, 0.25534192, -0.25534192, 0.54630249, -0.54630249], rtol=1e-7)
    (y,) = run_op("Tan", {}, np.array([-2, -1, 0, 1, 2], np.int32))
    assert y.tolist() == [2, -2, 0, 2, -2]


def test_trig_versions_and_integer_rules():
    for t, since in TRIG_TYPES.items():
        assert lookup(t, f"opset{since}").label == f"{t}-{since}"
        if since > 1:
            with pytest.raises(Exception, match="no kernel|not"):
                lookup(t, "opset3")
    # the spec's Atanh rule for integers: saturate outside (-1, 1)
    (y,) = run_op("Atanh", {}, np.array([-5, -1, 0, 1, 7], np.int32), opset=4)
    assert y.tolist() == [-2**31, -2**31, 0, 2**31 - 1, 2**31 - 1]
    (y,) = run_op("Atanh", {}, np.array([0, 1, 200], np.uint8), opset=4)
    assert y.tolist() == [0, 255, 255]
    # a result outside the domain is a located value error for integers, NaN for floats
    with pytest.raises(OpError, match=r"Acos of integer input 0 at position \[1\] \(value 2\) is nan"):
        run_op("Acos", {}, np.array([1, 2], np.int64))
    assert np.isnan(run_op("Acosh", {}, np.array([0.5], np.float32), opset=4)[0][0])
    (spec,) = infer("Cosh", {}, S("f16", [None, Dim(2, 5)]))
    assert spec.etype.name == "f16" and format_shape(spec.shape) == "[?,2..5]"
    with pytest.raises(ShapeError, match="Asin does not accept element type boolean"):
        infer("Asin", {}, S("boolean", [2]))


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 5), max_size=3), etype=st.sampled_from(["f32", "f16", "i32", "i64"]),
       seed=st.integers(0, 2**32 - 1))
def test_trig_matches_openvino(tmp_path_factory, shape, etype, seed):
    rng = np.random.default_rng(seed)
    dt = DTYPES[etype]
    if etype.startswith("f"):
        unit = rng.uniform(-0.95, 0.95, shape).astype(dt)      # the domain of asin/acos/atanh
        big = rng.uniform(1.05, 4, shape).astype(dt)           # acosh
        wide = rng.uniform(-4, 4, shape).astype(dt)
    else:
        # Integers: the CPU plugin rounds f32 results; inside each function's domain only
        # (it returns garbage for Atanh of integers, where irrun follows the spec's rule).
        unit = rng.integers(-1, 1, shape, endpoint=True).astype(dt)
        big = rng.integers(1, 9, shape, endpoint=True).astype(dt)
        wide = rng.integers(-5, 5, shape, endpoint=True).astype(dt)
    pu, pb, pw = param("u", shape, etype), param("b", shape, etype), param("w", shape, etype)
    outs = [o8.asin(pu), o8.acos(pu), o8.atan(pw), o8.sinh(pw), o8.cosh(pw), o8.asinh(pw),
            o8.acosh(pb), o8.tan(pu)]
    if etype.startswith("f"):
        outs.append(o8.atanh(pu))
    feed = {"u": unit, "b": big, "w": wide}
    with __import__("tempfile").TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(model(outs, [pu, pb, pw]), d)
        expected = oracle.ov_run(xml, feed)
        got = oracle.irrun_run(xml, feed)
    # irrun rounds the f64 result once; the CPU plugin's f32 functions are a few ulp off.
    tol = {"f32": 4e-6, "f16": 2e-3}.get(etype)
    for g, e in zip(got, expected):
        oracle.assert_same(g, e, rtol=tol, atol=tol or 0.0)


# ------------------------------------------------------------------ FloorMod and Mod

def test_floormod_and_mod_sign_rules():
    a = np.array([7, -7, 7, -7, 0, 6], np.int32)
    b = np.array([3, 3, -3, -3, 5, -3], np.int32)
    assert run_op("FloorMod", {}, a, b)[0].tolist() == [1, 2, -2, -1, 0, 0]   # sign of divisor
    assert run_op("Mod", {}, a, b)[0].tolist() == [1, -1, 1, -1, 0, 0]        # sign of dividend
    f = a.astype(np.float32) + np.float32(0.5)
    g = b.astype(np.float32)
    np.testing.assert_array_equal(run_op("FloorMod", {}, f, g)[0], np.remainder(f, g))
    np.testing.assert_array_equal(run_op("Mod", {}, f, g)[0], np.fmod(f, g))
    # the wrap-around case of C++: INT_MIN % -1 is 0
    m = np.array([-2**31], np.int32)
    assert run_op("Mod", {}, m, np.array([-1], np.int32))[0].tolist() == [0]
    assert run_op("FloorMod", {}, m, np.array([-1], np.int32))[0].tolist() == [0]
    # f16 and bf16 keep their type
    h = np.array([5.5, -5.5], np.float16)
    (y,) = run_op("FloorMod", {}, h, np.array([2, 2], np.float16))
    assert y.dtype == np.float16 and y.tolist() == [1.5, 0.5]


def test_integer_modulo_by_zero_is_a_located_error():
    for t in ("FloorMod", "Mod"):
        with pytest.raises(OpError, match=r"integer modulo by zero: input 1 is 0 at position \[1, 0\]"):
            run_op(t, {}, np.ones((2, 2), np.int64), np.array([[1, 2], [0, 3]], np.int64))
    # floats follow IEEE: NaN
    assert np.isnan(run_op("Mod", {}, np.array([1.0], np.float32), np.array([0.0], np.float32))[0][0])


def test_floormod_and_mod_spec_shape_examples():
    (spec,) = infer("FloorMod", {"auto_broadcast": "none"}, S("f32", [256, 56]), S("f32", [256, 56]))
    assert format_shape(spec.shape) == "[256,56]"
    (spec,) = infer("Mod", {"auto_broadcast": "numpy"}, S("f32", [8, 1, 6, 1]), S("f32", [7, 1, 5]))
    assert format_shape(spec.shape) == "[8,7,6,5]"
    (spec,) = infer("FloorMod", {"auto_broadcast": "numpy"}, S("f32", [8, 1, 6, 1]), S("f32", [7, 1, 5]))
    assert format_shape(spec.shape) == "[8,7,6,5]"
    with pytest.raises(ShapeError, match="needs equal shapes"):
        infer("Mod", {"auto_broadcast": "none"}, S("i32", [2]), S("i32", [3]))


@pytest.mark.oracle
@given(shapes=broadcastable_shapes(), etype=st.sampled_from(["f32", "i32", "i64", "i8", "u8"]),
       seed=st.integers(0, 2**32 - 1))
def test_floormod_and_mod_match_openvino(tmp_path_factory, shapes, etype, seed):
    rng = np.random.default_rng(seed)
    dt = DTYPES[etype]
    if etype == "f32":
        a = (rng.standard_normal(shapes[0]) * 10).astype(dt)
        b = rng.uniform(0.5, 6, shapes[1]).astype(dt)
    else:
        a = rng.integers(0 if etype == "u8" else -100, 100, shapes[0]).astype(dt)
        b = rng.integers(1, 9, shapes[1]).astype(dt)
    if etype != "u8":
        b = np.where(rng.integers(0, 2, b.shape) == 1, b, -b).astype(dt)
    pa, pb = param("a", a.shape, etype), param("b", b.shape, etype)
    oracle.compare(model([o8.floor_mod(pa, pb), o8.mod(pa, pb)], [pa, pb]), {"a": a, "b": b},
                   rtol=1e-6 if etype == "f32" else None, atol=1e-5 if etype == "f32" else 0.0,
                   tmpdir=tmp_path_factory.getbasetemp())


# ------------------------------------------------------------------ Round

def test_round_spec_example():
    x = np.array([-4.5, -1.9, -1.5, 0.5, 0.9, 1.5, 2.3, 2.5], np.float32)
    assert run_op("Round", {"mode": "half_to_even"}, x, opset=5)[0].tolist() == \
        [-4.0, -2.0, -2.0, 0.0, 1.0, 2.0, 2.0, 2.0]
    assert run_op("Round", {"mode": "half_away_from_zero"}, x, opset=5)[0].tolist() == \
        [-5.0, -2.0, -2.0, 1.0, 1.0, 2.0, 2.0, 3.0]
    assert run_op("Round", {}, x, opset=5)[0].tolist()[-1] == 2.0      # the default is half_to_even
    (spec,) = infer("Round", {"mode": "half_to_even"}, S("f32", [256, 56]), opset=5)
    assert format_shape(spec.shape) == "[256,56]"


def test_round_edge_cases():
    # The largest float below 0.5 is not a half: it rounds to 0 in both modes (the CPU
    # plugin's floor(x + 0.5) gives 1 for half_away_from_zero; irrun follows the spec).
    x = np.array([np.nextafter(0.5, 0), -np.nextafter(0.5, 0), 2**52 + 1, np.inf, np.nan, -0.0])
    (y,) = run_op("Round", {"mode": "half_away_from_zero"}, x, opset=5)
    assert y[:4].tolist() == [0.0, 0.0, 2**52 + 1, np.inf] and np.isnan(y[4]) and np.signbit(y[5])
    i = np.array([-3, 7], np.int8)
    assert run_op("Round", {"mode": "half_away_from_zero"}, i, opset=5)[0].tolist() == [-3, 7]
    bf = np.array([2.5, -3.5], ml_dtypes.bfloat16)
    (y,) = run_op("Round", {}, bf, opset=5)
    assert y.dtype == bf.dtype and y.astype(np.float32).tolist() == [2.0, -4.0]
    import irrun.ir.registry as R
    _, problems, _ = R.parse_attrs(lookup("Round", "opset5").attrs, {"mode": "half_up"})
    assert problems and "mode='half_up'" in problems[0][1]
    with pytest.raises(ShapeError, match="Round does not accept element type boolean"):
        infer("Round", {}, S("boolean", [2]), opset=5)


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 6), max_size=3), etype=st.sampled_from(["f32", "f16", "i32"]),
       seed=st.integers(0, 2**32 - 1))
def test_round_matches_openvino(tmp_path_factory, shape, etype, seed):
    rng = np.random.default_rng(seed)
    # quarters: exact halves and non-halves (not the values just below a half, see above)
    x = values(rng, shape, etype, -20, 20, grid=4)
    px = param("x", shape, etype)
    outs = [o8.round(px, "half_to_even"), o8.round(px, "half_away_from_zero")]
    oracle.compare(model(outs, [px]), {"x": x}, tmpdir=tmp_path_factory.getbasetemp())


# ------------------------------------------------------------------ CumSum

CUMSUM_SPEC = [  # (exclusive, reverse, output) for input [1, 2, 3, 4, 5], axis 0
    (False, False, [1., 3., 6., 10., 15.]),
    (True, False, [0., 1., 3., 6., 10.]),
    (False, True, [15., 14., 12., 9., 5.]),
    (True, True, [14., 12., 9., 5., 0.]),
]


@pytest.mark.parametrize("exclusive, reverse, out", CUMSUM_SPEC)
def test_cumsum_spec_examples(exclusive, reverse, out):
    x = np.array([1., 2., 3., 4., 5.], np.float32)
    attrs = {"exclusive": str(int(exclusive)), "reverse": str(int(reverse))}
    (y,) = run_op("CumSum", attrs, x, np.array(0, np.int64), opset=3)
    assert y.tolist() == out
    (y,) = run_op("CumSum", attrs, x, opset=3)             # axis defaults to 0
    assert y.tolist() == out
    (spec,) = infer("CumSum", attrs, S("f32", [5]), TensorSpec.of_value(np.array(0, np.int64),
                                                                          from_dtype(np.int64)), opset=3)
    assert format_shape(spec.shape) == "[5]"


def test_cumsum_axes_types_and_errors():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    for axis in range(-3, 3):
        (y,) = run_op("CumSum", {}, x, np.array(axis, np.int32), opset=3)
        np.testing.assert_array_equal(y, np.cumsum(x, axis=axis))
    u = np.array([200, 100], np.uint8)
    assert run_op("CumSum", {}, u, opset=3)[0].tolist() == [200, 44]     # wraps like C++
    (spec,) = infer("CumSum", {}, S("f32", [None, 3]), S("i64", []), opset=3)   # unknown axis
    assert format_shape(spec.shape) == "[?,3]"
    with pytest.raises(ShapeError, match=r"CumSum axis \(input 1\) 3 is out of range \[-3, 2\]"):
        infer("CumSum", {}, S("f32", [2, 3, 4]), TensorSpec.of_value(np.array(3, np.int64),
                                                                      from_dtype(np.int64)), opset=3)
    with pytest.raises(ShapeError, match=r"must have rank 0"):
        infer("CumSum", {}, S("f32", [2]), S("i64", [1]), opset=3)
    with pytest.raises(ShapeError, match="must be i32 or i64, got u8"):
        infer("CumSum", {}, S("f32", [2]), S("u8", []), opset=3)
    with pytest.raises(ShapeError, match="rank >= 1"):
        infer("CumSum", {}, S("f32", []), opset=3)
    with pytest.raises(OpError, match=r"axis \(input 1\) -2 is out of range \[-1, 0\]"):
        run_op("CumSum", {}, np.ones(3, np.float32), np.array(-2, np.int64), opset=3)


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), etype=st.sampled_from(["f32", "i32", "i64"]),
       data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_cumsum_matches_openvino(tmp_path_factory, shape, etype, data, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, shape, etype, -50, 50)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    axis_type = data.draw(st.sampled_from([np.int32, np.int64]))
    exclusive, reverse = data.draw(st.booleans()), data.draw(st.booleans())
    px = param("x", shape, etype)
    outs = [o8.cumsum(px, ov.op.Constant(np.array(axis, axis_type)), exclusive, reverse)]
    oracle.compare(model(outs, [px]), {"x": x}, rtol=1e-6, tmpdir=tmp_path_factory.getbasetemp())
