"""Constant folding at load (irrun.program.fold_node): what folds, the budget, the switches,
and that the inspection tools still show folded layers."""
from __future__ import annotations

import numpy as np
import pytest

import irrun
from irrun.builder import GraphBuilder
from irrun.inspect import profile_table


def _weights_model(tmp_path):
    """f16 weights decompressed by Convert, u8 weights with zero point and scale, a
    Broadcast of a scalar to a big shape (over the budget) and a ShapeOf of a static input."""
    rng = np.random.default_rng(0)
    g = GraphBuilder("fold")
    x = g.parameter("x", "f32", [2, 64])
    w16 = g.constant(rng.standard_normal((64, 64)).astype(np.float16), name="w16")
    w = g.op("Convert", [w16], destination_type="f32", name="w")
    q = g.constant(rng.integers(0, 255, (64, 64), dtype=np.uint8), name="q")
    qf = g.op("Convert", [q], destination_type="f32", name="qf")
    zp = g.op("Subtract", [qf, g.constant(np.float32(128))], name="zp")
    dq = g.op("Multiply", [zp, g.constant(np.float32(0.01))], name="dq")
    y = g.op("MatMul", [g.op("MatMul", [x, w], name="mm1"), dq], name="mm2")
    big = g.op("Broadcast", [g.constant(np.float32(1.0)), g.constant(np.array([4, 2, 64, 64]))],
               name="big")
    shape = g.op("ShapeOf", [x], version="opset3", name="shape")
    g.result(g.op("Add", [g.op("Reshape", [y, shape], special_zero=False, name="r"),
                          g.op("ReduceSum", [big, g.constant(np.array([0, 3]))], name="s")],
                  name="sum"), name="y")
    g.result(w, name="w_out")
    xml, _ = g.save(tmp_path / "fold.xml")
    return xml, {"x": rng.standard_normal((2, 64)).astype(np.float32)}


def _folded(model) -> set[str]:
    return {n.layer.name for n in model.program.nodes.values() if n.folded is not None}


def test_folds_const_subgraphs_and_keeps_results(tmp_path):
    xml, feed = _weights_model(tmp_path)
    m = irrun.read_model(xml)
    lazy = irrun.read_model(xml, fold=False)
    assert {"w", "qf", "zp", "dq", "shape"} <= _folded(m)
    assert "big" not in _folded(m)          # 4*2*64*64*4 bytes from a 4-byte scalar: lazy
    assert "mm1" not in _folded(m)
    assert _folded(lazy) == set()
    a, b = m.infer(feed), lazy.infer(feed)
    np.testing.assert_array_equal(a["y"], b["y"])
    np.testing.assert_array_equal(a["w_out"], b["w_out"])
    # The Consts behind folded layers no longer run.
    assert "w16" not in m.run_order() and "w16" in lazy.run_order()
    # A folded output is shared by every run: it cannot be changed through an output.
    with pytest.raises(ValueError):
        m.infer(feed)["w_out"][0, 0] = 5.0


def test_env_switch_turns_folding_off(tmp_path, monkeypatch):
    xml, _ = _weights_model(tmp_path)
    monkeypatch.setenv("IRRUN_FOLD", "0")
    assert _folded(irrun.read_model(xml)) == set()
    monkeypatch.setenv("IRRUN_FOLD", "maybe")
    with pytest.raises(irrun.IrrunError, match="IRRUN_FOLD='maybe' is not 0 or 1"):
        irrun.read_model(xml)


def test_profile_and_trace_mark_folded_layers(tmp_path):
    from irrun.inspect import trace_lines

    xml, feed = _weights_model(tmp_path)
    m = irrun.read_model(xml)
    rows = m.profile(feed)
    by_name = {r["name"]: r for r in rows}
    assert by_name["w"]["folded"] >= 0.0 and "folded" not in by_name["mm1"]
    text = profile_table(rows)
    assert "Convert-opset1 (folded)" in text
    assert "computed once when the model was read" in text
    node = next(n for n in m.program.nodes.values() if n.layer.name == "w")
    assert "(folded at load:" in trace_lines(node, node.folded)[0]
