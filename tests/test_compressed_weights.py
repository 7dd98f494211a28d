"""Weights kept compressed (irrun.opkit.compressed): which decompression Converts stay f16,
the narrow product that reads them (ops/narrow_product_ir_loop.py), and that everything
outside the Convolution that reads them sees the f32 values the Convert computes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import irrun
import irrun.run.decompress as decompress
from irrun.tools.builder import GraphBuilder
from irrun.run.inspect import profile_table
from irrun.opkit import CompressedWeights


def _loops(columns, half):
    from irrun.ops.narrow_product_ir_loop import product_for

    loops = product_for(columns, half)
    if loops is None:
        pytest.skip("llvmlite cannot build the narrow product here: BLAS runs instead")
    return loops


@pytest.mark.parametrize("half", [True, False])
@pytest.mark.parametrize("columns", [1, 2, 3, 4])
@pytest.mark.parametrize("m, k", [(4, 16), (5, 48), (37, 144), (64, 4608)])
def test_narrow_product_is_the_matrix_product(half, columns, m, k):
    rows4, rows1 = _loops(columns, half)
    rng = np.random.default_rng(m * k + columns)
    w = rng.standard_normal((m, k)).astype(np.float16 if half else np.float32)
    x = rng.standard_normal((k, columns)).astype(np.float32)
    xt = np.ascontiguousarray(x.T)
    out = np.full((m + 1, columns), 7.0, np.float32)    # a row after it: never written
    split = m - m % 4
    args = (w.ctypes.data, xt.ctypes.data, out.ctypes.data, k)
    if split:
        rows4(*args, 0, split)
    if split < m:
        rows1(*args, split, m)
    exact = w.astype(np.float64) @ x.astype(np.float64)
    scale = np.abs(w.astype(np.float64)) @ np.abs(x.astype(np.float64))
    # f32 sums in another order than the exact one: within a few ulps of the sum of |terms|.
    assert np.all(np.abs(out[:m] - exact) <= 4 * k ** 0.5 * 2.0 ** -24 * scale + 1e-30)
    assert np.all(out[m] == 7.0)


def _conv_model(tmp_path, name="conv", out_channels=64, channels=32, also_result=False):
    """x [?, C, ?, ?] -> Convolution 3x3 (pads 1) with f16 weights behind a Convert."""
    rng = np.random.default_rng(0)
    g = GraphBuilder(name)
    x = g.parameter("x", "f32", [None, channels, None, None])
    w16 = g.constant((0.1 * rng.standard_normal((out_channels, channels, 3, 3))).astype(np.float16),
                     name="w16")
    w = g.op("Convert", [w16], destination_type="f32", name="w")
    y = g.op("Convolution", [x, w], strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1],
             dilations=[1, 1], auto_pad="explicit", name="conv")
    g.result(g.op("Relu", [y], name="relu"), name="y")
    if also_result:
        g.result(w, name="w_out")
    xml, _ = g.save(tmp_path / f"{name}.xml")
    return xml


@pytest.fixture
def small_threshold(monkeypatch):
    """Keep weights of 1,024 elements and more compressed (the tests' models are small),
    in a process that has LLVM loaded (the rule's other half: see compressed_source)."""
    monkeypatch.setattr(decompress, "COMPRESSED_MIN_ELEMENTS", 1024)
    try:
        import llvmlite.binding  # noqa: F401
    except ImportError:
        pass                      # nothing is kept: the tests that need it skip


def _kept(model) -> set[str]:
    return {n.layer.name for n in model.program.nodes.values()
            if n.folded is not None and isinstance(n.folded[0], CompressedWeights)}


def _feed(n, h, w, channels=32, seed=1):
    return {"x": np.random.default_rng(seed).standard_normal((n, channels, h, w)).astype(np.float32)}


def test_a_large_convolution_weight_stays_compressed(tmp_path, small_threshold):
    pytest.importorskip("llvmlite")
    xml = _conv_model(tmp_path)
    kept = irrun.read_model(xml)
    folded = irrun.read_model(xml, fold=False)
    if not _kept(kept):
        from irrun.opkit.llvm import host_has
        assert not host_has("f16c"), "this CPU has F16C, yet the weights were decompressed"
        pytest.skip("no F16C here: the weights are decompressed at load")
    assert _kept(kept) == {"w"} and _kept(folded) == set()
    weights = next(n.folded[0] for n in kept.program.nodes.values() if n.layer.name == "w")
    assert weights.source.dtype == np.float16 and weights.shape == (64, 32, 3, 3)
    # 1x1 and 2x2 maps are products of 1 and 4 columns: read as halves, agreeing with the
    # f32 product to rounding; nothing decompressed.
    for h, w_ in ((1, 1), (2, 2), (1, 4)):
        feed = _feed(1, h, w_)
        got, want = kept.infer(feed)["y"], folded.infer(feed)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert weights._f32 is None, "a narrow product decompressed the weights"
    # A wider map (9 columns) takes BLAS on the f32 weights, made once: the same values as
    # the model folded in f32, bit for bit.
    feed = _feed(1, 3, 3)
    np.testing.assert_array_equal(kept.infer(feed)["y"], folded.infer(feed)["y"])
    first = weights.decompressed()
    assert weights.decompressed() is first and not first.flags.writeable
    np.testing.assert_array_equal(first, weights.source.astype(np.float32))
    # Batches count as columns: 2 images of 1x2 are 4 columns.
    feed = _feed(2, 1, 2)
    np.testing.assert_allclose(kept.infer(feed)["y"], folded.infer(feed)["y"], rtol=1e-5, atol=1e-5)


def test_a_convert_with_another_reader_is_folded_as_before(tmp_path, small_threshold):
    xml = _conv_model(tmp_path, also_result=True)
    m = irrun.read_model(xml)
    assert _kept(m) == set()
    out = m.infer(_feed(1, 2, 2))
    assert out["w_out"].dtype == np.float32


def test_small_weights_are_folded_as_before(tmp_path):
    m = irrun.read_model(_conv_model(tmp_path))       # 18,432 elements: under the threshold
    assert _kept(m) == set()


def test_views_see_the_f32_values_of_a_kept_convert(tmp_path, small_threshold):
    from irrun.run.inspect import trace_lines

    xml = _conv_model(tmp_path)
    m = irrun.read_model(xml)
    if not _kept(m):
        pytest.skip("the weights are decompressed at load here (no llvmlite or F16C)")
    feed = _feed(1, 2, 2)
    want = irrun.read_model(xml, fold=False).infer(feed, until="w")
    # Run up to it, with every intermediate, under a listener, profiled: plain f32 arrays.
    got = m.infer(feed, until="w")
    (value,) = got.values()
    assert type(value) is np.ndarray and value.dtype == np.float32
    np.testing.assert_array_equal(value, next(iter(want.values())))
    every = m.infer(feed, intermediate=True)
    assert type(every["w:0"]) is np.ndarray
    np.testing.assert_array_equal(every["w:0"], value)
    seen = {}
    m.infer(feed, listener=lambda node, outputs, seconds: seen.setdefault(node.layer.name, outputs))
    assert type(seen["w"][0]) is np.ndarray and seen["w"][0].dtype == np.float32
    rows = {r["name"]: r for r in m.profile(feed)}
    assert "folded" in rows["w"] and "Convert-opset1 (folded)" in profile_table(list(rows.values()))
    node = next(n for n in m.program.nodes.values() if n.layer.name == "w")
    assert "(folded at load:" in trace_lines(node, seen["w"])[0]
    # np.asarray of the object gives a copy: the model's own halves stay as they are.
    copy = np.asarray(node.folded[0])
    copy[...] = 0
    assert np.any(np.asarray(node.folded[0]) != 0)


def test_without_llvmlite_nothing_is_kept(tmp_path, small_threshold, without_llvmlite):
    xml = _conv_model(tmp_path)
    m = irrun.read_model(xml)
    assert _kept(m) == set()
    feed = _feed(1, 2, 2)
    np.testing.assert_array_equal(m.infer(feed)["y"], irrun.read_model(xml, fold=False).infer(feed)["y"])


def test_kept_weights_match_openvino(tmp_path, small_threshold):
    oracle = pytest.importorskip("oracle")
    xml = _conv_model(tmp_path)
    for h, w in ((2, 2), (1, 3), (5, 5)):
        feed = _feed(1, h, w)
        expected = oracle.ov_run(xml, feed)[0]
        np.testing.assert_allclose(irrun.read_model(xml).infer(feed)["y"], expected,
                                   rtol=1e-5, atol=1e-5)


def test_decompressing_later_is_checked_against_the_memory_limit(tmp_path, small_threshold,
                                                                 monkeypatch):
    xml = _conv_model(tmp_path)
    m = irrun.read_model(xml)
    if not _kept(m):
        pytest.skip("the weights are decompressed at load here (no llvmlite or F16C)")
    monkeypatch.setenv("IRRUN_MAX_BYTES", "60000")      # the f32 weights take 73,728 bytes
    m.infer(_feed(1, 2, 2))                             # the halves: nothing decompressed
    with pytest.raises(irrun.IrrunError) as info:
        m.infer(_feed(1, 3, 3))
    text = str(info.value)
    assert "the decompressed weights" in text and "conv" in text, text


def test_a_process_without_llvm_loaded_folds_them(tmp_path):
    """The rule's other half, in fresh processes: a one-shot run that has not loaded LLVM
    folds the weights to f32 as before; one that has keeps them."""
    import subprocess
    import sys

    pytest.importorskip("llvmlite")
    xml = _conv_model(tmp_path)
    script = (
        "import sys, numpy as np, irrun, irrun.run.decompress as d\n"
        "d.COMPRESSED_MIN_ELEMENTS = 1024\n"
        "if sys.argv[2] == 'load': import llvmlite.binding\n"
        "from irrun.opkit import CompressedWeights\n"
        "m = irrun.read_model(sys.argv[1])\n"
        "w = next(n for n in m.program.nodes.values() if n.layer.name == 'w')\n"
        "print(type(w.folded[0]).__name__, 'llvmlite.binding' in sys.modules)\n")
    import os

    def run(how, keep=""):
        env = dict(os.environ, IRRUN_KEEP_COMPRESSED=keep)
        return subprocess.run([sys.executable, "-c", script, str(xml), how], capture_output=True,
                              text=True, check=True, env=env).stdout.split()
    from irrun.opkit.llvm import host_has
    kept = "CompressedWeights" if host_has("f16c") else "ndarray"
    assert run("plain") == ["ndarray", "False"]            # nor did the load import it
    assert run("load") == [kept, "True"]
    # The switch makes it the same in every process: 1 always (loading LLVM), 0 never.
    assert run("plain", "1") == [kept, "True"]
    assert run("load", "0") == ["ndarray", "True"]
    assert run("plain", "auto") == ["ndarray", "False"]


def test_the_switch_refuses_other_values(tmp_path, monkeypatch):
    monkeypatch.setenv("IRRUN_KEEP_COMPRESSED", "yes")
    with pytest.raises(irrun.IrrunError, match="IRRUN_KEEP_COMPRESSED='yes' is not auto, 0 or 1"):
        irrun.read_model(_conv_model(tmp_path))


@given(data=st.data())
def test_narrow_convolutions_match_openvino_and_the_folded_model(data):
    """Any geometry whose product has at most 4 columns: kernels, strides, dilations, pads
    and batches drawn; the kept model against the same model folded to f32 (BLAS) and
    against OpenVINO's CPU plugin."""
    import tempfile
    from pathlib import Path

    pytest.importorskip("llvmlite")
    oracle = pytest.importorskip("oracle")
    channels = data.draw(st.sampled_from([16, 32, 48]), label="channels")
    # More than FOLD_MAX_ELEMENTS weights: smaller Consts are folded by shape inference.
    out_channels = data.draw(st.integers(257, 270), label="out_channels")
    kh, kw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    strides = [data.draw(st.integers(1, 2)) for _ in range(2)]
    dilations = [data.draw(st.integers(1, 2)) for _ in range(2)]
    pads = [data.draw(st.integers(0, 1)) for _ in range(4)]
    batch = data.draw(st.integers(1, 2), label="batch")
    extent = [(k - 1) * d + 1 for k, d in zip((kh, kw), dilations)]
    oh = data.draw(st.integers(1, 4 // batch), label="oh")
    ow = data.draw(st.integers(1, 4 // batch // oh), label="ow")
    # Input sizes giving those output sizes (the pads may make some taps read zeros only).
    h = max(1, (oh - 1) * strides[0] + extent[0] - pads[0] - pads[2])
    w = max(1, (ow - 1) * strides[1] + extent[1] - pads[1] - pads[3])
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31), label="seed"))
    g = GraphBuilder("narrow")
    x = g.parameter("x", "f32", [None, channels, None, None])
    w16 = g.constant((0.1 * rng.standard_normal((out_channels, channels, kh, kw))).astype(np.float16))
    conv = g.op("Convolution", [x, g.op("Convert", [w16], destination_type="f32", name="w")],
                strides=strides, dilations=dilations, pads_begin=pads[:2], pads_end=pads[2:],
                auto_pad="explicit", name="conv")
    g.result(conv, name="y")
    feed = {"x": rng.standard_normal((batch, channels, h, w)).astype(np.float32)}
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(decompress, "COMPRESSED_MIN_ELEMENTS", 1)
        import llvmlite.binding  # noqa: F401  (the rule keeps weights where LLVM is loaded)
        xml, _ = g.save(Path(tmp) / "narrow.xml")
        kept = irrun.read_model(xml)
        got = kept.infer(feed)["y"]
        folded = irrun.read_model(xml, fold=False).infer(feed)["y"]
        expected = oracle.ov_run(xml, feed)[0]
    assert got.shape == folded.shape == expected.shape
    columns = batch * got.shape[2] * got.shape[3]
    weights = next(n.folded[0] for n in kept.program.nodes.values() if n.layer.name == "w")
    from irrun.opkit.llvm import host_has
    assert isinstance(weights, CompressedWeights) == host_has("f16c")
    if isinstance(weights, CompressedWeights) and columns <= 4:     # C*kh*kw: whole 16s
        assert weights._f32 is None, "the narrow product did not run"
    np.testing.assert_allclose(got, folded, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
