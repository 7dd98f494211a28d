"""irrun.tools.plugin_int8: OpenVINO's CPU plugin's int8 sums on CPUs without VNNI, which `irrun
compare` uses to explain int8 layers that differ there."""
from __future__ import annotations

import numpy as np
import pytest

import irrun
from irrun.tools import plugin_int8


def _int8_conv(tmp_path, x_low, channels=64, seed=0, wq=None):
    """A FakeQuantize (256 levels of [x_low, x_low + 2.55]) into a 1x1 Convolution of
    full-range i8 weights (Convert, Multiply by 0.01), saved as IR: (xml, x, wq, step)."""
    ov = pytest.importorskip("openvino")
    import openvino.opset8 as o
    rng = np.random.default_rng(seed)
    step = 0.01
    x = (x_low + rng.integers(0, 256, (1, channels, 3, 3)) * step).astype(np.float32)
    if wq is None:
        wq = rng.integers(-127, 128, (16, channels, 1, 1)).astype(np.int8)
    p = o.parameter([1, channels, 3, 3], np.float32, name="x")
    lo, hi = o.constant(np.float32(x_low)), o.constant(np.float32(x_low + 255 * step))
    fq = o.fake_quantize(p, lo, hi, lo, hi, 256)
    w = o.multiply(o.convert(o.constant(wq), np.float32),
                   o.constant(np.full((16, 1, 1, 1), 0.01, np.float32)))
    y = o.convolution(fq, w, [1, 1], [0, 0], [0, 0], [1, 1], name="conv")
    xml = tmp_path / "int8.xml"
    ov.save_model(ov.Model([y], [p], "int8"), str(xml), compress_to_fp16=False)
    return xml, x, wq, step


def _exact(x, wq):
    return np.einsum("nchw,kc->nkhw", x.astype(np.float64), wq[:, :, 0, 0] * 0.01)


def _conv_node(model):
    program = model.program
    return program, next(n for n in program.nodes.values() if n.layer.type == "Convolution")


def test_pairs_saturate_at_16_bits_and_the_rest_is_exact(tmp_path):
    """Two channels of u8 255 times i8 127 make 64770, which the plugin's pair sum holds at
    32767; with small products the plugin's sum is the exact one."""
    wq = np.zeros((16, 4, 1, 1), np.int8)
    wq[0, :2] = 127                                 # output 0: the pair overflows
    wq[1, :2], wq[1, 2:] = 127, 1                   # output 1: one pair overflows, one not
    wq[2, 0], wq[2, 1] = 127, -127                  # output 2: they cancel
    xml, x, wq, step = _int8_conv(tmp_path, 0.0, channels=4, wq=wq)
    program, node = _conv_node(irrun.read_model(xml))
    x = np.zeros_like(x)
    x[:, :2] = 255 * step                           # channels 0 and 1 at the top level
    w = wq.astype(np.float32) * 0.01
    got = plugin_int8.plugin_output(program, node, [x, w], {})
    assert got is not None and got.shape == (1, 16, 3, 3)
    scale = step * 0.01
    np.testing.assert_allclose(got[0, 0], 32767 * scale, rtol=1e-6)
    np.testing.assert_allclose(got[0, 1], 32767 * scale, rtol=1e-6)   # x is 0 in 2-3
    np.testing.assert_allclose(got[0, 2], 0, atol=1e-9)
    np.testing.assert_allclose(got[0, 3:], 0, atol=1e-9)
    # The exact sum, which irrun's own kernel gives, is 64770.
    exact = irrun.read_model(xml).infer({"x": x})
    assert np.allclose(next(iter(exact.values()))[0, 0], 64770 * scale, rtol=1e-5)


def test_inputs_off_the_grid_or_weights_not_int8_are_not_explained(tmp_path):
    xml, x, wq, step = _int8_conv(tmp_path, 0.0)
    program, node = _conv_node(irrun.read_model(xml))
    w = wq.astype(np.float32) * 0.01
    assert plugin_int8.plugin_output(program, node, [x + step / 3, w], {}) is None
    assert plugin_int8.plugin_output(program, node, [x - 1.0, w], {}) is None   # below level 0


@pytest.mark.oracle
@pytest.mark.parametrize("x_low", [0.0, -1.28], ids=["u8", "s8"])
def test_the_cpu_plugin_sums_as_this_host_is_said_to(tmp_path, x_low):
    """On a CPU without VNNI the plugin's output is plugin_output's (and 0.2 or more off
    the exact sum for these full-range weights); with VNNI it is the exact sum."""
    import oracle
    xml, x, wq, step = _int8_conv(tmp_path, x_low)
    (theirs,) = oracle.ov_run(str(xml), {"x": x})
    program, node = _conv_node(irrun.read_model(xml))
    emulated = plugin_int8.plugin_output(program, node, [x, wq.astype(np.float32) * 0.01], {})
    exact = _exact(x, wq)
    if plugin_int8.host_saturates():
        np.testing.assert_allclose(theirs, emulated, rtol=1e-5, atol=1e-5)
        assert np.abs(theirs - exact).max() > 0.2
    else:
        np.testing.assert_allclose(theirs, exact, rtol=1e-5, atol=1e-5)


@pytest.mark.oracle
def test_compare_explains_the_saturated_layer_and_only_on_such_a_host(tmp_path):
    xml, x, wq, step = _int8_conv(tmp_path, 0.0)
    result = irrun.compare(xml, {"x": x})
    conv = next(t for t in result.tensors if t.layer == "conv")
    assert result.ok, result.report()
    if plugin_int8.host_saturates():
        assert conv.status == "explained" and conv.cause == plugin_int8.CAUSE
        report = result.report()
        assert "without VNNI" in report and "1 differs for the reason given above" in report
        assert result.to_dict()["explained"] == 1
    else:
        assert conv.status == "agree" and not result.explained
