"""The IR writer (irrun.save_model / Model.save), the graph builder, `irrun extract` and
`irrun reduce`: what irrun writes OpenVINO reads and computes the same with; an OpenVINO-written
file written again is the same graph, layer for layer."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from lxml import etree

import irrun
from irrun.tools.builder import GraphBuilder
from irrun.ui.cli import cli
from irrun.ir.writer import encode

ov = pytest.importorskip("openvino")

MODELS = sorted((Path(__file__).resolve().parent.parent / "models").glob("*/model.xml"))


def ov_outputs(xml, feed):
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    result = compiled.create_infer_request().infer(feed)
    return [np.asarray(result[o]) for o in compiled.outputs]


# ---------------------------------------------------------------- structural equality

def _canon(el) -> tuple:
    """An element as a comparable tree: tag, attributes, children (Const offsets left out:
    the writer lays the .bin out anew)."""
    attrs = dict(el.attrib)
    if el.tag == "data" and el.getparent() is not None and \
            (el.getparent().get("type") or "").lower() == "const":
        attrs.pop("offset", None)
    children = tuple(_canon(c) for c in el if isinstance(c.tag, str))
    return el.tag, tuple(sorted(attrs.items())), (el.text or "").strip(), children


def layers_of(xml: Path) -> tuple[dict, set]:
    root = etree.parse(str(xml)).getroot()
    layers = {el.get("id"): _canon(el) for el in root.find("layers")}
    edges = {tuple(sorted(e.attrib.items())) for e in root.find("edges")}
    return layers, edges


@pytest.mark.parametrize("xml", MODELS, ids=[p.parent.name for p in MODELS])
def test_every_model_written_again_is_the_same_graph_and_computes_the_same(xml, tmp_path):
    m = irrun.read_model(xml)
    out, bin_path = m.save(tmp_path / "again.xml")
    assert os.path.exists(bin_path)
    want_layers, want_edges = layers_of(xml)
    got_layers, got_edges = layers_of(Path(out))
    assert got_edges == want_edges
    assert got_layers.keys() == want_layers.keys()
    for lid in want_layers:
        assert got_layers[lid] == want_layers[lid], f"layer {lid} differs"
    feed = dict(np.load(xml.with_name("inputs.npz")))
    for got, want in zip(ov_outputs(out, feed), ov_outputs(xml, feed)):
        np.testing.assert_array_equal(got, want)
    again = irrun.read_model(out).infer(feed)
    for name, want in m.infer(feed).items():
        np.testing.assert_array_equal(again[name], want)


def test_consts_are_deduplicated_and_aligned(tmp_path):
    g = GraphBuilder("dedup")
    x = g.parameter("x", "f32", [3])
    a = g.constant(np.array([1, 2, 3], np.float32), name="a")
    b = g.constant(np.array([1, 2, 3], np.float32), name="b")
    c = g.constant(np.array([7], np.int8), name="c")
    s = g.op("Add", [g.op("Add", [x, a]), b])
    g.result(g.op("Multiply", [s, g.op("Convert", [c], destination_type="f32")]), name="y")
    xml, bin_path = g.save(tmp_path / "d.xml")
    root = etree.parse(xml).getroot()
    offsets = {el.get("name"): int(el.find("data").get("offset"))
               for el in root.iter("layer") if el.get("type") == "Const"}
    assert offsets["a"] == offsets["b"] and offsets["c"] % 64 == 0 and offsets["c"] > 0
    assert os.path.getsize(bin_path) == offsets["c"] + 1
    feed = {"x": np.array([1, -2, 0.5], np.float32)}
    np.testing.assert_array_equal(ov_outputs(xml, feed)[0], (feed["x"] + 2 * np.array([1, 2, 3])) * 7)


def test_sub_byte_and_half_constants_pack_as_openvino_reads_them(tmp_path):
    import ml_dtypes

    rng = np.random.default_rng(0)
    cases = {"u4": rng.integers(0, 16, 7), "i4": rng.integers(-8, 8, 7), "u1": rng.integers(0, 2, 11),
             "f16": rng.standard_normal(5).astype(np.float16),
             "bf16": rng.standard_normal(5).astype(ml_dtypes.bfloat16)}
    for etype, value in cases.items():
        g = GraphBuilder(etype)
        g.result(g.op("Convert", [g.constant(value, etype)], destination_type="f32"), name="y")
        xml, _ = g.save(tmp_path / f"{etype}.xml")
        np.testing.assert_array_equal(ov_outputs(xml, {})[0], value.astype(np.float32))
        np.testing.assert_array_equal(irrun.read_model(xml).infer({})["y"],
                                      value.astype(np.float32))
    assert encode(np.array([1, 0, 1, 1, 0, 0, 0, 0, 1]), "u1") == bytes([0b10110000, 0b10000000])
    assert encode(np.array([1, 2, 3]), "u4") == bytes([0x21, 0x03])


def test_builder_makes_a_model_irrun_and_openvino_run(tmp_path):
    g = GraphBuilder("tiny")
    x = g.parameter("x", "f32", [None, 4])
    w = g.constant(np.arange(8, dtype=np.float32).reshape(4, 2) / 8)
    y = g.op("MatMul", [x, w], transpose_a=False, transpose_b=False)
    g.result(g.op("ReLU", [y]), name="y")
    xml, _ = g.save(tmp_path / "tiny.xml")
    assert irrun.validate(xml) == []
    feed = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
    want = np.maximum(feed["x"] @ (np.arange(8, dtype=np.float32).reshape(4, 2) / 8), 0)
    np.testing.assert_allclose(ov_outputs(xml, feed)[0], want, rtol=1e-6)
    np.testing.assert_allclose(irrun.read_model(xml).infer(feed)["y"], want, rtol=1e-6)
    assert 'names="y"' in Path(xml).read_text()


# ---------------------------------------------------------------- extract

def resnet_block_model(directory: Path) -> Path:
    """stem conv -> [conv -> relu -> conv] + skip -> relu -> conv -> global pool."""
    import openvino.opset8 as o

    rng = np.random.default_rng(5)

    def conv(x, cin, cout, name):
        w = o.constant((rng.standard_normal((cout, cin, 3, 3)) / (3 * cin ** 0.5)).astype(np.float32))
        return o.convolution(x, w, [1, 1], [1, 1], [1, 1], [1, 1], name=name)

    x = o.parameter([1, 3, 16, 16], ov.Type.f32, name="image")
    stem = o.relu(conv(x, 3, 8, "stem/conv"), name="stem/relu")
    a = o.relu(conv(stem, 8, 8, "block/conv1"), name="block/relu1")
    b = conv(a, 8, 8, "block/conv2")
    out = o.relu(o.add(b, stem, name="block/add"), name="block/relu2")
    head = o.reduce_mean(conv(out, 8, 4, "head/conv"), o.constant(np.array([2, 3])), False,
                         name="gap")
    path = directory / "resnetish.xml"
    ov.save_model(ov.Model([head], [x], "resnetish"), str(path))   # f16 weights + Converts
    np.savez(directory / "resnetish.inputs.npz",
             image=rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
    return path


def test_extract_a_middle_block_runs_in_openvino_on_the_recorded_cut_values(tmp_path):
    xml = resnet_block_model(tmp_path)
    sub = tmp_path / "block.xml"
    r = CliRunner().invoke(cli, ["extract", str(xml), "--outputs", "block/relu2", "--inputs",
                                 "stem/relu", "--inputs-data",
                                 str(tmp_path / "resnetish.inputs.npz"), "-o", str(sub)])
    assert r.exit_code == 0, r.output
    cut = dict(np.load(tmp_path / "block.inputs.npz"))
    assert list(cut) == ["stem/relu:0"] and cut["stem/relu:0"].shape == (1, 8, 16, 16)
    m = irrun.read_model(sub)
    kinds = sorted(layer.type for layer in m.program.doc.layers
                   if layer.type not in ("Const", "Convert"))
    assert kinds == ["Add", "Convolution", "Convolution", "Parameter", "ReLU", "ReLU", "Result"]
    full = irrun.read_model(xml).infer(dict(np.load(tmp_path / "resnetish.inputs.npz")),
                                       intermediate=True)
    (got,) = m.infer(cut).values()
    np.testing.assert_array_equal(got, full["block/relu2:0"])
    (ov_got,) = ov_outputs(sub, cut)
    np.testing.assert_allclose(ov_got, got, rtol=1e-5, atol=1e-5)


def test_extract_names_a_missing_layer_with_a_suggestion(tmp_path):
    xml = resnet_block_model(tmp_path)
    r = CliRunner().invoke(cli, ["extract", str(xml), "--outputs", "block/relu3", "-o",
                                 str(tmp_path / "x.xml")])
    assert r.exit_code == 1
    assert "no layer or tensor named 'block/relu3'; did you mean block/relu2" in r.output


# ---------------------------------------------------------------- reduce

def ess_behind_matmul_and_gather(directory: Path) -> Path:
    """x -> MatMul -> Gather -> EmbeddingSegmentsSum (unsorted segment ids) -> ReLU -> Multiply.

    OpenVINO's CPU plugin gets EmbeddingSegmentsSum wrong for unsorted segment_ids (docs/ops.md);
    everything else agrees, so the reproducer is the ESS layer alone.
    """
    import openvino.opset8 as o

    rng = np.random.default_rng(0)
    x = o.parameter([6, 3], ov.Type.f32, name="x")
    mm = o.matmul(x, o.constant(rng.standard_normal((3, 5)).astype(np.float32)), False, False,
                  name="mm")
    table = o.gather(mm, o.constant(np.array([5, 4, 3, 2, 1, 0], np.int32)),
                     o.constant(np.array(0, np.int32)), name="gather")
    ess = o.embedding_segments_sum(table, o.constant(np.array([0, 1, 2, 3, 1, 0], np.int32)),
                                   o.constant(np.array([2, 0, 1, 0, 2, 1], np.int32)),
                                   o.constant(np.array(3, np.int32)), name="ess")
    relu = o.relu(ess, name="relu")
    out = o.multiply(relu, o.constant(np.float32(2.0)), name="scale")
    path = directory / "model.xml"
    ov.save_model(ov.Model([out], [x], "ess_deep"), str(path), compress_to_fp16=False)
    np.savez(directory / "inputs.npz", x=rng.standard_normal((6, 3)).astype(np.float32))
    return path


def test_reduce_until_diverges_writes_a_small_repro_that_still_diverges(tmp_path):
    xml = ess_behind_matmul_and_gather(tmp_path)
    repro = tmp_path / "repro"
    r = CliRunner().invoke(cli, ["reduce", str(xml), "-i", str(tmp_path / "inputs.npz"),
                                 "--until", "diverges", "-o", str(repro)])
    assert r.exit_code == 0, r.output
    for name in ("model.xml", "model.bin", "inputs.npz", "irrun_outputs.npz",
                 "openvino_outputs.npz", "README.txt"):
        assert (repro / name).exists(), name
    m = irrun.read_model(repro / "model.xml")
    ops = [layer.type for layer in m.program.doc.layers
           if layer.type not in ("Parameter", "Const", "Result")]
    assert 1 <= len(ops) <= 4 and "EmbeddingSegmentsSum" in ops, ops
    assert "irrun compare" in (repro / "README.txt").read_text()
    result = irrun.compare(str(repro / "model.xml"), str(repro / "inputs.npz"), layers="outputs")
    assert not result.ok
    assert not any(p.name.startswith(".") for p in repro.iterdir())


def test_reduce_with_a_command_condition(tmp_path):
    xml = ess_behind_matmul_and_gather(tmp_path)
    repro = tmp_path / "repro"
    # "The problem": the model contains a Gather (grep exits 0 when found; the command must
    # fail while the problem is there, so invert it).
    r = CliRunner().invoke(cli, ["reduce", str(xml), "-i", str(tmp_path / "inputs.npz"),
                                 "--command", "! grep -q 'type=\"Gather\"' {model}", "-q",
                                 "-o", str(repro)])
    assert r.exit_code == 0, r.output
    ops = [layer.type for layer in irrun.read_model(repro / "model.xml").program.doc.layers
           if layer.type not in ("Parameter", "Const", "Result")]
    assert "Gather" in ops and len(ops) <= 2, ops


def test_reduce_refuses_a_model_without_the_problem(tmp_path):
    xml = resnet_block_model(tmp_path)
    r = CliRunner().invoke(cli, ["reduce", str(xml), "-i", str(tmp_path / "resnetish.inputs.npz"),
                                 "--until", "diverges", "-o", str(tmp_path / "repro"), "-q"])
    assert r.exit_code == 1
    assert "the condition does not hold for the whole model" in r.output


def test_graph_builder_takes_the_newest_version_and_names_no_temporary_file():
    import irrun
    from irrun.tools.builder import GraphBuilder

    g = GraphBuilder("tiny")
    x = g.parameter("x", "f32", [None, 4])
    g.op("SoftMax", [x], axis=1)
    assert g._layers[-1].version == "opset8"            # SoftMax-1 and SoftMax-8: the newest
    g.op("SoftMax", [x], version="opset1", axis=1)
    assert g._layers[-1].version == "opset1"
    with pytest.raises(irrun.IrrunError, match="unknown op type 'SofMax'; did you mean SoftMax"):
        g.op("SofMax", [x])
    g.result(g.op("MatMul", [x, x], transpose_b="maybe"), name="y")
    with pytest.raises(irrun.ModelError) as e:
        g.model()
    text = str(e.value.diagnostics[0])
    assert text.startswith("GraphBuilder 'tiny': error: layer 'MatMul_")
    assert "draft" not in text and "/tmp" not in text and "transpose_b='maybe'" in text
