"""Bucketize-3: the spec example, every rule of semantics.md, and differential tests against
OpenVINO's CPU plugin over every pair of data / boundaries types it accepts."""
from __future__ import annotations

import bisect
import os

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun
from irrun.ui.cli import cli
from irrun.errors import IrrunError, OpError, ShapeError
from irrun.ir.etypes import element_type
from irrun.ops.condition import Bucketize3, BucketizeAttrs, bucketize
from irrun.ir.registry import parse_attrs
from irrun.ir.shapes import Dim, TensorSpec
from shipped import run_cli

MODEL_DIR = os.path.join(os.path.dirname(__file__), "..", "models", "bucketize_spec")

NUMERIC = ["f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8"]


def run(x, b, with_right_bound=True, output_type="i64"):
    attrs = BucketizeAttrs(output_type=output_type, with_right_bound=with_right_bound)
    return Bucketize3.run(attrs, np.asarray(x), np.asarray(b))[0]


def infer(data, boundaries, **attrs):
    return Bucketize3.infer(BucketizeAttrs(**attrs), data, boundaries)


# ------------------------------------------------------------------ spec example, verbatim

def test_spec_example():
    out = run(np.array([[3, 50], [10, -1]], np.float32), np.array([0, 5, 10], np.float32))
    assert out.dtype == np.int64
    assert out.tolist() == [[1, 3], [2, 0]]


def test_spec_example_left_edge_buckets():
    # with_right_bound=false: buckets [b[i-1], b[i]): 10 now falls past the last boundary.
    out = run(np.array([[3, 50], [10, -1]]), np.array([0, 5, 10]), with_right_bound=False)
    assert out.tolist() == [[1, 3], [3, 0]]


def test_spec_shape_example():
    (out,) = infer(TensorSpec.make("f32", [49, 11]), TensorSpec.make("f32", [5]))
    assert out.etype.name == "i64" and out.shape == (Dim.of(49), Dim.of(11))


def test_spec_model_runs_through_cli(tmp_path):
    got, expected = run_cli(MODEL_DIR, tmp_path)
    assert sorted(got) == ["out"]
    assert got["out"].dtype == expected["out"].dtype == np.int64
    np.testing.assert_array_equal(got["out"], expected["out"])
    np.testing.assert_array_equal(got["out"], [[1, 3], [2, 0]])


def test_spec_model_validates_clean():
    diags = irrun.validate(os.path.join(MODEL_DIR, "model.xml"))
    assert diags == [], [str(d) for d in diags]


# ------------------------------------------------------------------ rules (semantics.md)

@pytest.mark.parametrize("right", [True, False])
def test_empty_boundaries_give_zero(right):
    for shape in [(), (0,), (3,), (2, 3)]:
        x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 1
        out = run(x, np.zeros(0, np.float32), right, "i32")
        assert out.dtype == np.int32 and out.shape == shape
        assert not out.any()


def test_scalar_data():
    out = run(np.float32(7.5), np.array([0, 5, 10], np.float32))
    assert out.shape == () and out.dtype == np.int64 and int(out) == 2


@pytest.mark.parametrize("dt", ["f64", "f32", "f16", "bf16"])
@pytest.mark.parametrize("bt", ["f32", "i32", "u8", "f64"])
def test_nan_data(dt, bt):
    x = np.array([np.nan, 1, np.nan, 100], dtype=np.float64).astype(element_type(dt).dtype)
    b = np.array([0, 5, 10], element_type(bt).dtype)
    assert run(x, b, True).tolist() == [0, 1, 0, 3]      # lower_bound: NaN < nothing
    assert run(x, b, False).tolist() == [3, 1, 3, 3]     # upper_bound: NaN past the end


def test_infinities():
    x = np.array([-np.inf, np.inf, 5], np.float32)
    b = np.array([-np.inf, 5, np.inf], np.float32)
    assert run(x, b, True).tolist() == [0, 2, 1]
    assert run(x, b, False).tolist() == [1, 3, 2]


def test_repeated_boundaries():
    b = np.array([1, 2, 2, 2, 3])
    x = np.array([2, 1, 3, 0, 4])
    assert run(x, b, True).tolist() == [1, 0, 4, 0, 5]     # first b >= x
    assert run(x, b, False).tolist() == [4, 1, 5, 0, 5]    # first b > x


def test_exact_edges():
    b = np.array([0, 5, 10])
    x = np.array([0, 5, 10, 4, 6])
    assert run(x, b, True).tolist() == [0, 1, 2, 1, 2]     # (b[i-1], b[i]]
    assert run(x, b, False).tolist() == [1, 2, 3, 1, 2]    # [b[i-1], b[i])


def test_i64_data_against_f32_boundaries_compares_in_f32():
    # 2**24 + 1 becomes 2**24 in f32 and then equals the boundary; NumPy would compare in f64.
    x = np.array([2**24 + 1], np.int64)
    b = np.array([2**24], np.float32)
    assert run(x, b, True).tolist() == [0]
    assert run(x, b, False).tolist() == [1]
    assert run(x, b.astype(np.float64), True).tolist() == [1]     # f64: exact here


def test_f64_side_compares_in_f64():
    x = np.array([2**53 + 1], np.int64)
    assert run(x, np.array([2**53], np.float64), True).tolist() == [0]     # equal in f64
    assert run(x, np.array([2**53], np.int64), True).tolist() == [1]       # exact integers


def test_f16_data_against_integer_boundaries_compares_in_f32():
    # 2049 rounds to 2048 in f16 but is exact in f32: upper_bound(2048) must stop before it.
    assert run(np.array([2048], np.float16), np.array([2049], np.int32), False).tolist() == [0]
    assert run(np.array([1.0], ml_dtypes.bfloat16), np.array([1.0000001], np.float32),
               True).tolist() == [0]


def test_u64_against_signed_is_exact():
    x = np.array([0, 2**63, 2**64 - 1, 5, 2**63 - 1], np.uint64)
    b = np.array([-5, 0, 2**63 - 1], np.int64)
    assert run(x, b, True).tolist() == [1, 3, 3, 2, 2]
    assert run(x, b, False).tolist() == [2, 3, 3, 2, 3]
    x = np.array([-1, 0, 5, 2**63 - 1, -(2**63)], np.int64)
    b = np.array([0, 2**63, 2**64 - 1], np.uint64)
    assert run(x, b, True).tolist() == [0, 0, 1, 1, 0]
    assert run(x, b, False).tolist() == [0, 1, 1, 1, 0]


def test_output_type_i32():
    out = run(np.arange(4), np.array([1, 2]), output_type="i32")
    assert out.dtype == np.int32 and out.tolist() == [0, 0, 1, 2]


def test_unsorted_boundaries_error():
    with pytest.raises(OpError, match=r"boundaries\[1\] = 5 > boundaries\[2\] = 2"):
        run(np.array([1.0]), np.array([0, 5, 2, 7]))


def test_nan_boundaries_error():
    with pytest.raises(OpError, match=r"boundaries\[1\] is NaN"):
        run(np.array([1.0]), np.array([0, np.nan, 7], np.float32))


def test_boolean_inputs_rejected():
    with pytest.raises(ShapeError, match="data must be of a numeric type; got boolean"):
        infer(TensorSpec.make("boolean", [3]), TensorSpec.make("f32", [3]))
    with pytest.raises(ShapeError, match="boundaries must be of a numeric type; got boolean"):
        infer(TensorSpec.make("f32", [3]), TensorSpec.make("boolean", [3]))


@pytest.mark.parametrize("shape", [[], [3, 1], [1, 1, 1]])
def test_boundaries_must_be_1d(shape):
    with pytest.raises(ShapeError, match="boundaries must be a 1-D tensor"):
        infer(TensorSpec.make("f32", [2]), TensorSpec.make("f32", shape))


def test_dynamic_shapes():
    (out,) = infer(TensorSpec.make("f16", None), TensorSpec.make("i8", None), output_type="i32")
    assert out.shape is None and out.etype.name == "i32"
    (out,) = infer(TensorSpec.make("u8", [Dim(1, 5), None]), TensorSpec.make("i64", [None]))
    assert out.shape == (Dim(1, 5), Dim(0, None))


def test_output_type_attribute_is_checked():
    attrs, problems, _ = parse_attrs(BucketizeAttrs, {"output_type": "f32"})
    message = problems[0][1]
    assert attrs is None and "output_type='f32'" in message and "i32" in message and "i64" in message
    attrs, problems, _ = parse_attrs(BucketizeAttrs, {"with_right_bound": "maybe"})
    assert attrs is None and "not a boolean" in problems[0][1]
    attrs, problems, _ = parse_attrs(BucketizeAttrs, {})
    assert attrs == BucketizeAttrs("i64", True)


# ------------------------------------------------------------------ errors, located, end to end

ov = pytest.importorskip("openvino")
import openvino.opset3 as o3  # noqa: E402


def _model(data_type, b_type, data_shape, b_shape, output_type="i64", right=True, b_const=None):
    x = o3.parameter(data_shape, getattr(ov.Type, data_type), name="data")
    if b_const is not None:
        if b_const.dtype == ml_dtypes.bfloat16:   # values exact in bf16, so no rounding
            b = o3.constant(b_const.astype(np.float32), dtype=ov.Type.bf16, name="boundaries")
        else:
            b = o3.constant(b_const, name="boundaries")
        params = [x]
    else:
        b = o3.parameter(b_shape, getattr(ov.Type, b_type), name="boundaries")
        params = [x, b]
    node = o3.bucketize(x, b, output_type, right, name="bucketize")
    return ov.Model([node], params, "bucketize")


def test_unsorted_boundaries_error_is_located(tmp_path):
    xml = str(tmp_path / "m.xml")
    ov.save_model(_model("f32", "f32", [3], [4]), xml)
    m = irrun.read_model(xml)
    with pytest.raises(IrrunError) as e:
        m.infer({"data": np.zeros(3, np.float32), "boundaries": np.array([0, 5, 2, 7], np.float32)})
    text = str(e.value)
    assert "layer 'bucketize'" in text and "Bucketize" in text
    assert "boundaries[1] = 5.0 > boundaries[2] = 2.0" in text


def test_constant_unsorted_boundaries_warn_in_validate(tmp_path):
    xml = str(tmp_path / "m.xml")
    ov.save_model(_model("f32", None, [3], None, b_const=np.array([3, 1], np.int32)), xml)
    diags = irrun.validate(xml)
    assert any(d.severity == "warning" and "boundaries[0] = 3 > boundaries[1] = 1" in d.message
               for d in diags), [str(d) for d in diags]
    result = CliRunner().invoke(cli, ["validate", xml])
    assert "boundaries must be sorted ascending" in result.output


def test_bad_output_type_in_xml_is_reported(tmp_path):
    xml = str(tmp_path / "m.xml")
    ov.save_model(_model("f32", "f32", [3], [4]), xml)
    text = open(xml).read().replace('output_type="i64"', 'output_type="f32"')
    open(xml, "w").write(text)
    result = CliRunner().invoke(cli, ["validate", xml])
    assert result.exit_code == 1
    line = next(i for i, s in enumerate(text.splitlines(), 1) if 'output_type="f32"' in s)
    assert f"m.xml:{line}: error:" in result.output and "output_type='f32'" in result.output


# ------------------------------------------------------------------ large inputs (threaded path)

def _reference(x, b, right):
    """Exact comparisons one element at a time, in the type C++ would compare in: f64 if
    either side is f64, else f32 if either is a float, else exact (Python) integers."""
    xs, bs = np.asarray(x), np.asarray(b)
    names = {xs.dtype.name, bs.dtype.name}
    if "float64" in names:
        key = float
    elif names & {"float32", "float16", "bfloat16"}:
        key = lambda v: float(np.float32(v))  # noqa: E731
    else:
        key = int
    keys = [key(v) for v in bs.reshape(-1)]
    out = []
    for v in xs.reshape(-1):
        k = key(v)
        if k != k:   # NaN
            out.append(0 if right else len(keys))
        else:
            out.append((bisect.bisect_left if right else bisect.bisect_right)(keys, k))
    return np.array(out, np.int64).reshape(xs.shape)


@pytest.mark.parametrize("dt,bt", [("f32", "f32"), ("u64", "i64"), ("i64", "u64"), ("f16", "i64")])
def test_large_input_matches_reference(dt, bt):
    rng = np.random.default_rng(5)
    n = 300_000   # above the threading threshold
    if dt == "u64":
        x = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
        b = np.unique(rng.integers(-(2**63), 2**63 - 1, 700, dtype=np.int64))
    elif dt == "i64":
        x = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
        b = np.unique(rng.integers(0, 2**64 - 1, 700, dtype=np.uint64, endpoint=True))
    else:
        x = (rng.standard_normal(n) * 100).astype(element_type(dt).dtype)
        x[::997] = np.nan
        b = np.unique((rng.standard_normal(1000) * 100).astype(element_type(bt).dtype))
    sample = slice(0, n, 37)
    for right in (True, False):
        got = run(x, b, right)
        want = _reference(x[sample], b, right)
        np.testing.assert_array_equal(got[sample], want)
        # The threaded result equals the single-block result everywhere.
        np.testing.assert_array_equal(got, bucketize(x, b, right, np.int64))


def _cast(raw, t):
    """Python numbers as type t: floats round (overflow to inf), integers saturate."""
    et = element_type(t)
    if et.is_float:
        with np.errstate(over="ignore"):
            return np.array([float(v) for v in raw], np.float64).astype(et.dtype)
    lo, hi = int(np.iinfo(et.dtype).min), int(np.iinfo(et.dtype).max)
    clip = lambda v: hi if v == float("inf") else lo if v == float("-inf") else min(max(int(v), lo), hi)  # noqa: E731
    return np.array([clip(v) for v in raw], et.dtype)


# Numbers that sit where the types disagree: around 2**24 (f32), 2**53 (f64), 2**63, 2**64.
_NUMBERS = st.one_of(
    st.integers(-300, 300),
    st.sampled_from([2**24, 2**53, 2**63, 2**64, -(2**63)]).flatmap(
        lambda c: st.integers(c - 3, c + 3)),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=True, width=64),
)


@settings(max_examples=25)
@given(st.data())
def test_rule_reference_any_types(data):
    """Any pair of numeric types, values anywhere in their ranges (beyond OpenVINO's region):
    data and boundaries are drawn from one set of numbers, so they meet in near-ties."""
    dt = data.draw(st.sampled_from(NUMERIC), label="data type")
    bt = data.draw(st.sampled_from(NUMERIC), label="boundaries type")
    numbers = data.draw(st.lists(_NUMBERS, min_size=1, max_size=8), label="numbers")
    x = _cast(data.draw(st.lists(st.sampled_from(numbers), min_size=1, max_size=12)), dt)
    if element_type(dt).is_float and data.draw(st.booleans(), label="NaN"):
        x[0] = np.nan
    b = np.sort(_cast(data.draw(st.lists(st.sampled_from(numbers), max_size=8)), bt))
    right = data.draw(st.booleans(), label="with_right_bound")
    np.testing.assert_array_equal(run(x, b, right), _reference(x, b, right))


def test_infer_agrees_with_run():
    rng = np.random.default_rng(0)
    for dt in NUMERIC:
        for shape in [(), (0,), (4,), (2, 3)]:
            x = rng.integers(0, 9, shape).astype(element_type(dt).dtype)
            for ot in ("i32", "i64"):
                (spec,) = infer(TensorSpec.of_value(x, dt), TensorSpec.make("i8", [3]), output_type=ot)
                out = run(x, np.array([1, 4, 7], np.int8), output_type=ot)
                assert out.dtype == spec.etype.dtype and out.shape == shape


# ------------------------------------------------------------------ OpenVINO CPU plugin

oracle = pytest.importorskip("oracle")


def _compare(model, feed):
    """irrun against the CPU plugin (bf16 inputs go in bit for bit): oracle.compare."""
    got, _ = oracle.compare(model, feed)
    return got


# OpenVINO's CPU plugin compares i64 as i32 and everything else (f64, f16, bf16, small
# integers) as f32: the oracle region is values exact in every type, where all those
# comparisons agree. Halves below 64 and integers up to 200 are exact even in bf16.
def _pool(t):
    et = element_type(t)
    info = None if et.is_float else np.iinfo(et.dtype)
    ints = [v for v in range(-100, 201) if info is None or info.min <= v <= info.max]
    if et.is_float:
        return ints + [k / 2 for k in range(-127, 128, 2)] + [float("inf"), float("-inf")]
    return ints


@pytest.mark.oracle
@pytest.mark.parametrize("dt", NUMERIC)
def test_oracle_every_type_pair(dt):
    """All 144 (data, boundaries) type pairs; ties, edges, between and outside values."""
    for k, bt in enumerate(NUMERIC):
        right, ot = bool(k % 2), ("i32", "i64")[(k // 2) % 2]
        b_vals = [v for v in [0, 2, 5, 5, 9, 100, 127] if v in _pool(bt)]
        x_vals = [v for v in [-3, 0, 1, 2, 3, 5, 6, 9, 10, 99, 100, 127, 200] if v in _pool(dt)]
        x = np.array(x_vals, np.float64).astype(element_type(dt).dtype)
        b = np.array(b_vals, np.float64).astype(element_type(bt).dtype)
        got = _compare(_model(dt, bt, [len(x)], [len(b)], ot, right), {"data": x, "boundaries": b})
        np.testing.assert_array_equal(got[0], _reference(x, b, right))


@pytest.mark.oracle
@given(st.data())
def test_oracle_random(data):
    dt = data.draw(st.sampled_from(NUMERIC), label="data type")
    bt = data.draw(st.sampled_from(NUMERIC), label="boundaries type")
    shape = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=3), label="data shape")
    size = int(np.prod(shape))
    x = data.draw(st.lists(st.sampled_from(_pool(dt)), min_size=size, max_size=size))
    const = data.draw(st.booleans(), label="boundaries constant")
    # OpenVINO's Python API refuses to make an empty Constant, so constant boundaries are
    # drawn non-empty (test_empty_constant_boundaries covers irrun's own rule for those).
    b = sorted(data.draw(st.lists(st.sampled_from(_pool(bt)), min_size=int(const), max_size=10),
                         label="boundaries"))
    right = data.draw(st.booleans(), label="with_right_bound")
    ot = data.draw(st.sampled_from(["i32", "i64"]), label="output_type")
    x = np.array(x, np.float64).astype(element_type(dt).dtype).reshape(shape)
    b = np.array(b, np.float64).astype(element_type(bt).dtype)
    if const:
        model, feed = _model(dt, bt, shape, None, ot, right, b_const=b), {"data": x}
    else:
        model, feed = _model(dt, bt, shape, [len(b)], ot, right), {"data": x, "boundaries": b}
    _compare(model, feed)


@pytest.mark.parametrize("right", [True, False])
def test_empty_constant_boundaries(tmp_path, right):
    """Empty constant boundaries (outside what the oracle helpers can build): every element
    is in bucket 0, through a saved model as well as the kernel."""
    x = o3.parameter([2, 3], ov.Type.f32, name="data")
    node = o3.bucketize(x, ov.op.Constant(np.zeros(0, np.float32)), "i32", right)
    xml = str(tmp_path / "m.xml")
    ov.save_model(ov.Model([node], [x], "bucketize"), xml)
    # (OpenVINO writes an empty Constant with size=1, which irrun warns about; no errors.)
    assert not [d for d in irrun.validate(xml) if d.severity == "error"]
    (out,) = irrun.read_model(xml).infer({"data": np.arange(6, dtype=np.float32).reshape(2, 3)}).values()
    assert out.dtype == np.int32 and out.shape == (2, 3) and not out.any()
