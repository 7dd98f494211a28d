"""Constant folding at load (irrun.run.program.fold_node): what folds, the budget, the switches,
and that the inspection tools still show folded layers."""
from __future__ import annotations

import numpy as np
import pytest

import irrun
from irrun.tools.builder import GraphBuilder
from irrun.run.inspect import profile_table


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
    from irrun.run.inspect import trace_lines

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


# ------------------------------------------------------------- decompression ahead

@pytest.fixture
def f16c_built(monkeypatch):
    """The compiled F16C loops, as a process that has bought them has them."""
    from irrun.opkit import f16c

    monkeypatch.setattr(f16c, "_built", [])
    monkeypatch.setattr(f16c, "PRICE_SECONDS", 0.0)
    if f16c.loop() is None:
        pytest.skip("no F16C loop on this machine: decompression stays in the fold")
    return f16c


def _decompression_model(tmp_path):
    """Two large f16 weights decompressed by Convert (one then transposed, itself folded:
    that fold reads a batch output), a small one (below the batch's size), into MatMuls."""
    rng = np.random.default_rng(3)
    g = GraphBuilder("ahead")
    x = g.parameter("x", "f32", [3, 256])
    w1 = g.op("Convert", [g.constant(rng.standard_normal((256, 512)).astype(np.float16),
                                     name="w1_16")], destination_type="f32", name="w1")
    w2 = g.op("Convert", [g.constant(rng.standard_normal((256, 512)).astype(np.float16),
                                     name="w2_16")], destination_type="f32", name="w2")
    w2t = g.op("Transpose", [w2, g.constant(np.array([1, 0], np.int64))], name="w2t")
    w3 = g.op("Convert", [g.constant(rng.standard_normal((256, 4)).astype(np.float16),
                                     name="w3_16")], destination_type="f32", name="w3")
    h = g.op("MatMul", [g.op("MatMul", [x, w1], name="mm1"), w2t], name="mm2")
    g.result(g.op("MatMul", [h, w3], name="mm3"), name="y")
    xml, _ = g.save(tmp_path / "ahead.xml")
    return xml, {"x": rng.standard_normal((3, 256)).astype(np.float32)}


def test_decompression_ahead_gives_the_folds_values(tmp_path, monkeypatch, f16c_built):
    from irrun.run import decompress

    xml, feed = _decompression_model(tmp_path)
    monkeypatch.setenv("IRRUN_THREADS", "1")         # the fold's own casts, no batch
    started = []
    start = decompress.start
    monkeypatch.setattr(decompress, "start", lambda *a: started.append(start(*a)) or started[-1])
    plain = irrun.read_model(xml)
    assert started == [None]
    monkeypatch.setenv("IRRUN_THREADS", "2")
    ahead = irrun.read_model(xml)
    batch = started[-1]
    assert batch is not None and set(batch.outputs) == {
        n.id for n in ahead.program.nodes.values() if n.layer.name in ("w1", "w2")}
    for name in ("w1", "w2", "w2t", "w3"):
        a, b = (next(n for n in m.program.nodes.values() if n.layer.name == name)
                for m in (plain, ahead))
        assert b.folded is not None and np.array_equal(a.folded[0], b.folded[0]), name
        assert not b.folded[0].flags.writeable
    assert all(ahead.program.nodes[lid].fold_seconds > 0 for lid in batch.outputs)
    assert np.array_equal(plain.infer(feed)["y"], ahead.infer(feed)["y"])


def test_decompression_ahead_reports_a_bad_const_once(tmp_path, monkeypatch, f16c_built):
    """The batch reads the Consts quietly; the loader meets them again and reports."""
    xml, _ = _decompression_model(tmp_path)
    text = open(xml).read()
    first = text.index('size="262144"')
    open(xml, "w").write(text[:first] + 'size="262142"' + text[first + len('size="262144"'):])
    monkeypatch.setenv("IRRUN_THREADS", "2")
    program = irrun.run.program.load_program(xml)
    sizes = [d for d in program.diagnostics if d.code == "const-size"]
    assert len(sizes) == 1 and "smaller than the 262144 bytes" in sizes[0].message, \
        program.diagnostics
