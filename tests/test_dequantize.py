"""Weight decompression chains (NNCF's int4/int8: Convert -> f16, Subtract zero point,
Multiply scale, Reshape, Convert -> f32) computed in f32, as OpenVINO's CPU plugin does
(irrun/run/dequantize.py), against the plugin with hypothesis; and as written with
fold=False."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset8 as o8

RANGE = {"u4": (0, 15), "i4": (-8, 7), "u8": (0, 255), "i8": (-128, 127)}


def build(etype, rows, groups, group, batch, zero_point, seed):
    """x[batch, rows*...]: MatMul(x, W^T), W [rows, groups*group] decompressed per group."""
    rng = np.random.default_rng(seed)
    lo, hi = RANGE[etype]
    w = rng.integers(lo, hi, (rows, groups, group), endpoint=True)
    scale = (rng.uniform(0.001, 0.05, (rows, groups, 1))
             * rng.choice([-1, 1], (rows, groups, 1))).astype(np.float16)
    t = getattr(ov.Type, etype)
    wc = ov.op.Constant(t, ov.Shape(list(w.shape)), w.reshape(-1).tolist())
    x = o8.convert(wc, "f16")
    zp = np.zeros((rows, groups, 1), np.int64)
    if zero_point:
        zp = rng.integers(lo, hi, (rows, groups, 1), endpoint=True)
        zc = ov.op.Constant(t, ov.Shape(list(zp.shape)), zp.reshape(-1).tolist())
        x = o8.subtract(x, o8.convert(zc, "f16"))
    x = o8.multiply(x, o8.constant(scale))
    x = o8.reshape(x, o8.constant(np.array([rows, groups * group], np.int64)), False)
    weights = o8.convert(x, "f32")
    p = o8.parameter([batch, groups * group], ov.Type.f32, name="x")
    y = o8.matmul(p, weights, False, True)
    feed = {"x": rng.standard_normal((batch, groups * group)).astype(np.float32)}
    return ov.Model([y], [p], "int_weights"), feed, (w, zp, scale)


@pytest.mark.oracle
@given(etype=st.sampled_from(list(RANGE)), rows=st.integers(1, 48), groups=st.integers(1, 4),
       group=st.sampled_from([8, 16, 32, 64]), batch=st.integers(1, 3), zero_point=st.booleans(),
       seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_decompression_in_f32_matches_the_cpu_plugin(tmp_path_factory, etype, rows, groups,
                                                    group, batch, zero_point, seed):
    model, feed, _ = build(etype, rows, groups, group, batch, zero_point, seed)
    xml = oracle.save(model, tmp_path_factory.mktemp("dq"))
    (want,) = oracle.ov_run(xml, feed, {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"})
    m = irrun.read_model(xml)
    (got,) = m.infer(feed).values()
    # The same products (w - zp) * scale, exact in f32; only the MatMul's summation order
    # differs.
    scale = np.abs(feed["x"]).sum() * 0.05 * RANGE[etype][1] * 2
    np.testing.assert_allclose(got, want, rtol=0, atol=scale * 2e-7 + 1e-6)


def test_the_folded_weights_are_the_f32_products_and_fold_false_keeps_f16(tmp_path):
    model, feed, (w, zp, scale) = build("u4", 16, 2, 32, 1, True, 3)
    xml = oracle.save(model, tmp_path)
    folded = irrun.read_model(xml)
    literal = irrun.read_model(xml, fold=False)
    exact = ((w.astype(np.float32) - zp.astype(np.float32)) * scale.astype(np.float32))
    x = feed["x"]
    (got,) = folded.infer(feed).values()
    np.testing.assert_allclose(got, x @ exact.reshape(16, 64).T, rtol=1e-6, atol=1e-6)
    rounded = ((w.astype(np.float16) - zp.astype(np.float16)) * scale).astype(np.float32)
    (as_written,) = literal.infer(feed).values()
    np.testing.assert_allclose(as_written, x @ rounded.reshape(16, 64).T, rtol=1e-6, atol=1e-6)
    assert not np.array_equal(exact, rounded)
