"""The weight-compression element types u2, u3, u6, nf4, f4e2m1, f8e4m3, f8e5m2, f8e8m0:
packed as OpenVINO packs them (bytes compared with ov.save_model's), decompressed through
Convert as the CPU plugin does, and converted into them as OpenVINO's Convert does."""
import tempfile

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun
from irrun.ir.etypes import (
    ELEMENT_TYPES,
    NF4_VALUES,
    convert_into,
    decode,
    element_type,
    encode,
    from_dtype,
    nbytes,
)

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset8 as o8

TYPES = ["u2", "u3", "u6", "nf4", "f4e2m1", "f8e4m3", "f8e5m2", "f8e8m0"]
BYTE_FLOATS = {"f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
               "f8e8m0": ml_dtypes.float8_e8m0fnu}
BITS = {"u2": 2, "u3": 3, "u6": 6}


def sample(t, n, rng):
    """Values representable in type t, in irrun's representation of t."""
    et = element_type(t)
    if t in BITS:
        return rng.integers(0, 1 << BITS[t], n).astype(np.uint8)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    if t == "f8e8m0":
        # positive: negatives become 2**-127, an f32 denormal, which the CPU plugin's
        # arithmetic flushes to zero (irrun keeps denormals)
        x = np.abs(x) + np.float32(1e-3)
    return convert_into(x, et)


def ov_const(t, values):
    if t in BYTE_FLOATS:
        tensor = ov.Tensor(getattr(ov.Type, t), [values.size])
        tensor.data.view(np.uint8)[...] = values.view(np.uint8)
        return ov.op.Constant(tensor, shared_memory=False)
    return ov.op.Constant(getattr(ov.Type, t), ov.Shape([values.size]), values.astype(np.float32).tolist())


def test_types_are_known_and_map_back_from_their_dtypes():
    for t in TYPES:
        assert t in ELEMENT_TYPES and element_type(t.upper()).name == t
    assert element_type("F8E4M3").dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert from_dtype(ml_dtypes.float8_e5m2).name == "f8e5m2"
    assert from_dtype(ml_dtypes.float4_e2m1fn).name == "f4e2m1"
    assert from_dtype(np.float32).name == "f32" and from_dtype(np.uint8).name == "u8"
    assert [nbytes(element_type(t), 9) for t in ("u2", "u3", "u6", "nf4", "f4e2m1")] == [3, 6, 9, 5, 5]
    assert NF4_VALUES.size == 16 and NF4_VALUES[0] == -1 and NF4_VALUES[7] == 0 and NF4_VALUES[15] == 1


@pytest.mark.oracle
@settings(max_examples=8)
@given(t=st.sampled_from(TYPES), n=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_packing_is_byte_identical_to_openvino(tmp_path_factory, t, n, seed):
    rng = np.random.default_rng(seed)
    values = sample(t, n, rng)
    m = ov.Model([o8.result(o8.convert(ov_const(t, values), "f32"))], [])
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(m, d)
        with open(xml[:-4] + ".bin", "rb") as f:
            raw = f.read()
    ours = encode(values, element_type(t))
    assert raw == ours, (t, values)
    back = decode(np.frombuffer(ours, np.uint8), element_type(t), (n,))
    assert back.dtype == element_type(t).dtype
    np.testing.assert_array_equal(back.view(np.uint8) if t in BYTE_FLOATS or t == "f4e2m1" else back,
                                  values.view(np.uint8) if t in BYTE_FLOATS or t == "f4e2m1" else values)


@pytest.mark.oracle
@settings(max_examples=6)
@given(t=st.sampled_from(TYPES), n=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_decompression_pattern_matches_openvino(tmp_path_factory, t, n, seed):
    """Const(T) -> Convert(f32) -> Subtract(zero point) -> Multiply(scale), as NNCF writes
    compressed weights, and Convert(f16): the CPU plugin's values exactly."""
    rng = np.random.default_rng(seed)
    values = sample(t, n, rng)
    zp = o8.parameter([n], ov.Type.f32, name="zp")
    c = ov_const(t, values)
    y = o8.multiply(o8.subtract(o8.convert(c, "f32"), zp), ov.op.Constant(np.array(0.25, np.float32)))
    m = ov.Model([o8.result(y), o8.result(o8.convert(c, "f16"))], [zp])
    feed = {"zp": rng.integers(0, 4, n).astype(np.float32)}
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as d:
        xml = oracle.save(m, d)
        expected = oracle.ov_run(xml, feed)
        got = oracle.irrun_run(xml, feed)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g, e)         # NaN (f8e8m0's 0xFF) equals NaN here


EDGES = np.array([0, 0.3, -0.7, 1.6, 2.5, 3.49, 7.9, 300, -300, 1e6, np.nan, -np.nan, 0.013, 3.0, 6.0,
                  1.5, 0.75, 0.25, 5.0, -0.0, np.inf, -np.inf, 1e-40, 2**-127, 3e38, 0.5016634166240692,
                  0.5016635, -0.045525018125772476], np.float32)


@pytest.mark.oracle
@pytest.mark.parametrize("t", ["u2", "nf4", "f4e2m1", "f8e4m3", "f8e5m2", "f8e8m0"])
def test_convert_into_matches_openvino(tmp_path, t):
    """f32 -> T -> f32 through the CPU plugin (it cannot convert into u3/u6) against
    convert_into, on edge values (ties, overflow, NaN of both signs, zero, negatives) and
    random ones."""
    rng = np.random.default_rng(7)
    x = np.concatenate([EDGES, (rng.standard_normal(200) * 4).astype(np.float32),
                        rng.uniform(-1, 1, 200).astype(np.float32)])
    p = o8.parameter([x.size], ov.Type.f32, name="x")
    m = ov.Model([o8.result(o8.convert(o8.convert(p, t), "f32"))], [p])
    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        (expected,) = oracle.ov_run(oracle.save(m, d), {"x": x})
    got = convert_into(x, element_type(t)).astype(np.float32)
    np.testing.assert_array_equal(got, expected)


def test_convert_into_integers_keep_the_low_bits():
    for t, bits in BITS.items():
        y = convert_into(np.array([0, 5, 300, -1, -300, 2**40 + 3], np.int64), element_type(t))
        assert y.dtype == np.uint8
        assert y.tolist() == [v & ((1 << bits) - 1) for v in (0, 5, 300, -1, -300, 2**40 + 3)]
        y = convert_into(np.array([7.9, -0.7, np.nan, np.inf], np.float32), element_type(t))
        assert y.tolist() == [7 & ((1 << bits) - 1), 0, 0, 0]


def test_reading_a_compressed_model_from_the_cli_path(tmp_path):
    """An IR with u3 and nf4 weights reads and runs through irrun's public API."""
    rng = np.random.default_rng(3)
    w3, w4 = sample("u3", 10, rng), sample("nf4", 10, rng)
    p = o8.parameter([10], ov.Type.f32, name="x")
    y = o8.add(o8.multiply(o8.convert(ov_const("u3", w3), "f32"), p), o8.convert(ov_const("nf4", w4), "f32"))
    xml = oracle.save(ov.Model([o8.result(y)], [p]), tmp_path)
    model = irrun.read_model(xml)
    x = rng.standard_normal(10).astype(np.float32)
    (out,) = model.infer({"x": x}).values()
    np.testing.assert_array_equal(out, w3.astype(np.float32) * x + w4)
