"""End-to-end smoke test of the pipeline on a file written by ov.save_model."""
import numpy as np
import pytest

import irrun

oracle = pytest.importorskip("oracle")


@pytest.mark.parametrize("compress", [True, False])
def test_convert_chain_matches_openvino(tmp_path, compress):
    ov = oracle.ov
    import openvino.opset8 as o
    p = o.parameter([-1, 3], ov.Type.f32, name="x")
    c = o.constant(np.array([1.5, 2.5, -3.25], np.float32))
    m = ov.Model([o.result(o.convert(p, "i32")), o.result(o.convert(c, "f16"))], [p], "t")
    xml = oracle.save(m, tmp_path, compress_to_fp16=compress)
    feed = {"x": np.array([[1.7, -2.2, 3.0], [0, 9, -9]], np.float32)}
    model = irrun.read_model(xml)
    assert [i.name for i in model.inputs] == ["x"]
    assert model.inputs[0].element_type == "f32"
    got = oracle.irrun_run(xml, feed)
    expected = oracle.ov_run(xml, feed)
    for g, e in zip(got, expected):
        oracle.assert_same(g, e)
