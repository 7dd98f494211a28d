"""ConvertPromoteTypes-14: the common-type rule against OpenVINO's own, for every pair of
byte-sized types and each attribute combination; spec examples; values against the CPU plugin."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun.ir.registry as R
from irrun.errors import ShapeError
from irrun.ir.etypes import element_type
from irrun.ir.registry import lookup
from irrun.ir.shapes import TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset14 as o14

TYPES = ["boolean", "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
NP = {"boolean": np.bool_, "f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
      "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16,
      "u32": np.uint32, "u64": np.uint64}


def attrs(**kw):
    op = lookup("ConvertPromoteTypes", "opset14")
    a, problems, _ = R.parse_attrs(op.attrs, {k: str(v).lower() if isinstance(v, bool) else v
                                              for k, v in kw.items()})
    assert not problems, problems
    return a


def infer(a, t0, t1, s0=(2,), s1=(3,)):
    return lookup("ConvertPromoteTypes", "opset14").infer(
        a, TensorSpec.make(t0, list(s0)), TensorSpec.make(t1, list(s1)))


def openvino_rule(t0, t1, unsafe, pytorch, target, s0, s1):
    p0 = o14.parameter(list(s0), getattr(ov.Type, t0))
    p1 = o14.parameter(list(s1), getattr(ov.Type, t1))
    try:
        n = o14.convert_promote_types(p0, p1, unsafe, pytorch, target)
    except RuntimeError:
        return None
    return n.get_output_element_type(0).get_type_name()


@pytest.mark.oracle
@pytest.mark.parametrize("unsafe, pytorch", list(itertools.product([False, True], [False, True])))
def test_common_type_agrees_with_openvino_for_every_pair(unsafe, pytorch):
    a = attrs(promote_unsafe=unsafe, pytorch_scalar_promotion=pytorch, u64_integer_promotion_target="f64")
    checked = 0
    for t0, t1 in itertools.product(TYPES, TYPES):
        for s0, s1 in (((2,), (3,)), ((), (3,)), ((2, 2), ())):
            want = openvino_rule(t0, t1, unsafe, pytorch, "f64", s0, s1)
            if want is None:
                with pytest.raises(ShapeError):
                    infer(a, t0, t1, s0, s1)
            else:
                got = infer(a, t0, t1, s0, s1)
                assert [s.etype.name for s in got] == [want, want], (t0, t1, s0, s1)
                assert [format_shape(s.shape) for s in got] == [format_shape(list(s0)), format_shape(list(s1))]
            checked += 1
    assert checked == len(TYPES) ** 2 * 3


def test_spec_examples():
    d = attrs()
    assert infer(d, "i8", "f32")[0].etype.name == "f32"
    assert infer(d, "i32", "u8")[0].etype.name == "i32"
    u = attrs(promote_unsafe=True)
    for pair, want in ((("f16", "i64"), "f16"), (("f64", "u64"), "f64"), (("i8", "u8"), "i16"),
                       (("f16", "bf16"), "f32"), (("u64", "i8"), "f32")):
        assert infer(u, *pair)[0].etype.name == want
        with pytest.raises(ShapeError):
            infer(d, *pair)
    pt = attrs(pytorch_scalar_promotion=True, promote_unsafe=True)
    assert infer(pt, "i64", "u8", (), (3,))[0].etype.name == "u8"
    assert infer(pt, "f16", "i8", (), (3,))[0].etype.name == "f16"
    # IR examples: f16 [256,56] and f32 [3]; i16 and u32 unsafe -> i64; i16 and u64 -> f32
    out = infer(d, "f16", "f32", (256, 56), (3,))
    assert [s.etype.name for s in out] == ["f32", "f32"]
    assert [format_shape(s.shape) for s in out] == ["[256,56]", "[3]"]
    assert infer(u, "i16", "u32")[0].etype.name == "i64"
    assert infer(u, "i16", "u64")[1].etype.name == "f32"


def test_errors_name_the_rule():
    d = attrs()
    with pytest.raises(ShapeError, match=r"integer input \(i32\) cannot be safely promoted to f32"):
        infer(d, "i32", "f32")
    with pytest.raises(ShapeError, match=r"unsigned input \(u64\) cannot be safely promoted"):
        infer(d, "u64", "i64")
    with pytest.raises(ShapeError, match=r"scalar input \(i64\) cannot be promoted PyTorch-like to u8"):
        infer(attrs(pytorch_scalar_promotion=True), "i64", "u8", (), (3,))
    with pytest.raises(ShapeError, match="pytorch_scalar_promotion needs the ranks"):
        lookup("ConvertPromoteTypes", "opset14").infer(
            attrs(pytorch_scalar_promotion=True), TensorSpec.make("i8", None), TensorSpec.make("i16", [2]))
    (s0, _s1) = lookup("ConvertPromoteTypes", "opset14").infer(
        attrs(), TensorSpec.make("i8", None), TensorSpec.make("i16", [2]))
    assert s0.etype.name == "i16" and s0.shape is None


@pytest.mark.oracle
@settings(max_examples=8)
@given(t0=st.sampled_from([t for t in TYPES if t != "bf16"]), t1=st.sampled_from([t for t in TYPES if t != "bf16"]),
       unsafe=st.booleans(), pytorch=st.booleans(), scalar=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_values_match_openvino(tmp_path_factory, t0, t1, unsafe, pytorch, scalar, seed):
    s0 = () if scalar else (2, 3)
    want = openvino_rule(t0, t1, unsafe, pytorch, "f32", s0, (4,))
    if want is None:
        return
    rng = np.random.default_rng(seed)

    def values(t, shape):
        if t == "boolean":
            return rng.integers(0, 2, shape).astype(bool)
        # small non-negative values: representable in every type, so conversions are exact
        return rng.integers(0, 100, shape).astype(NP[t])
    x, y = values(t0, s0), values(t1, (4,))
    p0 = o14.parameter(list(s0), getattr(ov.Type, t0), name="x")
    p1 = o14.parameter([4], getattr(ov.Type, t1), name="y")
    n = o14.convert_promote_types(p0, p1, unsafe, pytorch, "f32")
    m = ov.Model([o14.result(n.output(0)), o14.result(n.output(1))], [p0, p1])
    got, _expected = oracle.compare(m, {"x": x, "y": y}, tmpdir=tmp_path_factory.getbasetemp())
    assert got[0].dtype == element_type(want).dtype
