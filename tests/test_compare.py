"""`irrun compare` and irrun.compare(): per-tensor statistics, tolerances, the first divergent
layer, the reference-file mode, the HTML page, and the runs against OpenVINO's CPU plugin
(a model where the plugin is known to be wrong, and every model in models/)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
from irrun.tools import plugin_int8
from irrun.ui.cli import cli
from irrun.tools.comparing import (
    DEFAULT_TOLERANCES,
    FIRST_COLOR,
    OPENVINO_MISSING,
    CompareResult,
    compare_tensor,
    generated_inputs,
    split_exposable,
    tolerance_for,
)

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
MODELS = sorted(MODELS_DIR.glob("*/model.xml"))

F32 = tolerance_for("f32")


def invoke(*args):
    return CliRunner().invoke(cli, ["compare", *map(str, args)])


# ---------------------------------------------------------------- one tensor

def test_float_statistics_and_worst_index():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    b = a.copy()
    b[1, 0] = 3.5
    s = compare_tensor(a, b, F32)
    assert s["status"] == "differ" and s["mismatches"] == 1 and s["size"] == 4
    assert s["worst_index"] == [1, 0]
    assert (s["irrun_value"], s["other_value"]) == (3.0, 3.5)
    assert s["max_abs"] == pytest.approx(0.5)
    assert s["max_rel"] == pytest.approx(0.5 / 3.5)
    expected_cos = float(np.dot(a.ravel(), b.ravel()) / np.linalg.norm(a) / np.linalg.norm(b))
    assert s["cosine"] == pytest.approx(expected_cos)


def test_float_tolerance_boundary():
    rtol, atol = DEFAULT_TOLERANCES["f32"]
    a = np.array([100.0, 0.0], np.float64)
    inside = a + np.array([atol + rtol * 100.0 * 0.99, atol * 0.99])
    outside = a + np.array([atol + rtol * 100.0 * 1.5, 0.0])
    assert compare_tensor(a, inside, tolerance_for("f64", rtol, atol))["status"] == "agree"
    s = compare_tensor(a, outside, tolerance_for("f64", rtol, atol))
    assert s["status"] == "differ" and s["mismatches"] == 1 and s["worst_index"] == [0]


def test_nan_matches_nan_and_infinities_match_themselves():
    a = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    assert compare_tensor(a, a.copy(), F32)["status"] == "agree"
    b = np.array([1.0, np.inf, np.inf, 1.0], np.float32)
    s = compare_tensor(a, b, F32)
    assert s["mismatches"] == 2 and s["max_abs"] == np.inf


def test_integers_and_booleans_are_exact():
    assert tolerance_for("i32") == {"exact": True}
    assert tolerance_for("boolean") == {"exact": True}
    a = np.array([5, 7, 9], np.int64)
    s = compare_tensor(a, np.array([5, 8, 9], np.int64), tolerance_for("i64"))
    assert s["status"] == "differ" and s["mismatches"] == 1 and s["worst_index"] == [1]
    assert (s["irrun_value"], s["other_value"]) == (7, 8) and s.get("cosine") is None
    flags = np.array([True, False])
    assert compare_tensor(flags, ~flags, tolerance_for("boolean"))["mismatches"] == 2


def test_tolerances_per_element_type_and_overrides():
    assert tolerance_for("f16") == {"etype": "f16", "rtol": 1e-2, "atol": 1e-3}
    assert tolerance_for("bf16")["rtol"] > tolerance_for("f16")["rtol"] > F32["rtol"]
    assert tolerance_for("f32", rtol=0.5)["rtol"] == 0.5
    assert tolerance_for("f32", atol=0.0)["atol"] == 0.0
    # as-compiled in bf16: an f32 tensor is held to bf16's tolerance, and says so.
    assert tolerance_for("f32", computed_in="bf16")["etype"] == "bf16"
    assert tolerance_for("f32", computed_in="f32")["etype"] == "f32"


def test_bf16_tensors_compare():
    import ml_dtypes
    a = np.array([1.0, 2.0, 3.0], ml_dtypes.bfloat16)
    assert compare_tensor(a, a.copy(), tolerance_for("bf16"))["status"] == "agree"
    b = np.array([1.0, 2.5, 3.0], ml_dtypes.bfloat16)
    assert compare_tensor(a, b, tolerance_for("bf16"))["worst_index"] == [1]


# ---------------------------------------------------------------- the ESS model

def _ess_model(directory: Path, inputs: bool = True) -> Path:
    """x -> MatMul -> EmbeddingSegmentsSum with UNSORTED segment_ids -> ReLU.

    OpenVINO's CPU plugin assumes sorted segment_ids; the spec does not ask for them, and
    irrun computes the scatter-add (docs/ops.md, "Where irrun chooses a rule").
    """
    ov = pytest.importorskip("openvino")
    import openvino.opset8 as o

    rng = np.random.default_rng(0)
    x = o.parameter([4, 3], ov.Type.f32, name="x")
    w = o.constant(rng.standard_normal((3, 5)).astype(np.float32))
    mm = o.matmul(x, w, False, False, name="mm")
    ess = o.embedding_segments_sum(mm, o.constant(np.array([0, 1, 2, 3, 1, 0], np.int32)),
                                   o.constant(np.array([2, 0, 1, 0, 2, 1], np.int32)),
                                   o.constant(np.array(3, np.int32)), name="ess")
    relu = o.relu(ess, name="relu")
    path = directory / "model.xml"
    ov.save_model(ov.Model([relu], [x], "ess_unsorted"), str(path), compress_to_fp16=False)
    if inputs:
        np.savez(directory / "inputs.npz",
                 x=np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32))
    return path


def _line_of(xml: Path, name: str) -> int:
    for number, text in enumerate(xml.read_text().splitlines(), 1):
        if f'name="{name}"' in text and "<layer" in text:
            return number
    raise AssertionError(name)


@pytest.mark.oracle
def test_unsorted_segment_ids_name_the_ess_layer_not_the_relu(tmp_path):
    xml = _ess_model(tmp_path)
    result = invoke(xml)
    assert result.exit_code == 1, result.output
    line = _line_of(xml, "ess")
    first = (f"{xml}:{line}: layer 'ess' (EmbeddingSegmentsSum-opset3): first divergent layer: "
             "given OpenVINO's values of its inputs, irrun's kernel does not reproduce its output")
    assert first in result.output
    # Both values at the worst index are printed.
    detail = result.output.split(first, 1)[1].splitlines()[1]
    assert "worst at [" in detail and "irrun " in detail and "OpenVINO " in detail
    assert "layer 'relu'" not in result.output          # differs, but because of its input
    # The report says what each tensor was held to.
    assert "rtol 0.0001, atol 1e-05 (f32)" in result.output

    data = json.loads(invoke(xml, "--format", "json").output)
    assert data["ok"] is False and data["first_divergent"]["layer"] == "ess"
    assert [d["layer"] for d in data["divergences"]] == ["ess"]
    status = {t["layer"]: t["status"] for t in data["tensors"]}
    # The ReLU differs too, but irrun's ReLU on OpenVINO's ESS output gives OpenVINO's ReLU
    # output: it only carries the difference.
    assert status == {"mm": "agree", "ess": "differ", "relu": "drift"}
    iso = {t["layer"]: t["isolated"] for t in data["tensors"]}
    assert iso["relu"]["status"] == "agree" and iso["ess"]["status"] == "differ"
    assert iso["mm"] is None and data["drift"] == 1 and data["differ"] == 1
    assert data["first_divergent"]["isolated"] is True


@pytest.mark.oracle
def test_python_api(tmp_path):
    xml = _ess_model(tmp_path)
    feed = {"x": np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)}
    result = irrun.compare(xml, feed)
    assert isinstance(result, CompareResult) and not result.ok
    assert result.first_divergent.layer == "ess"
    assert result.inputs == "given by the caller"
    t = {t.layer: t for t in result.tensors}["ess"]
    assert t.shape == [3, 5] and t.dtype == "f32" and t.tolerance["etype"] == "f32"
    assert 0 < t.mismatches <= 15 and t.cosine < 1.0
    # irrun's side is the spec's scatter-add: OpenVINO's is the wrong one.
    mm = feed["x"] @ np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    truth = np.zeros((3, 5), np.float64)
    np.add.at(truth, np.array([2, 0, 1, 0, 2, 1]), mm[[0, 1, 2, 3, 1, 0]])
    assert t.irrun_value == pytest.approx(truth[tuple(t.worst_index)], rel=1e-5)
    assert t.other_value != pytest.approx(truth[tuple(t.worst_index)], rel=1e-3)
    # Loosening the tolerance enough makes every tensor agree.
    assert irrun.compare(xml, feed, atol=100.0).ok


@pytest.mark.oracle
def test_layers_outputs_and_pattern(tmp_path):
    xml = _ess_model(tmp_path)
    data = json.loads(invoke(xml, "--layers", "outputs", "--format", "json").output)
    assert [t["layer"] for t in data["tensors"]] == ["relu"]
    # The divergence is seen at the output, with the uncompared input named as a suspect.
    assert data["first_divergent"]["layer"] == "relu"
    assert data["first_divergent"]["unchecked_inputs"] == ["ess:0"]
    data = json.loads(invoke(xml, "--layers", "m*", "--format", "json").output)
    assert [t["layer"] for t in data["tensors"]] == ["mm", "relu"]


@pytest.mark.oracle
def test_html_page_colours_layers_and_outlines_the_first_divergent(tmp_path):
    xml = _ess_model(tmp_path)
    page = tmp_path / "report.html"
    result = invoke(xml, "--html", page)
    assert result.exit_code == 1 and f"wrote {page}" in result.output
    text = page.read_text()
    assert "<svg" in text and "<script" not in text and 'href="http' not in text
    ess_id = irrun.read_model(xml).program.nodes
    lid = next(k for k, n in ess_id.items() if n.layer.name == "ess")
    assert f'g.node[id="L{lid}"] > rect {{ stroke: {FIRST_COLOR}' in text
    # The layer's tooltip gives the comparison.
    tooltip = text.split(f'<g class="node" id="L{lid}"><title>', 1)[1].split("</title>", 1)[0]
    assert "ess:0: " in tooltip and " of 15 elements differ" in tooltip


@pytest.mark.oracle
def test_generated_inputs_are_seeded_and_said(tmp_path):
    xml = _ess_model(tmp_path, inputs=False)
    result = invoke(xml)
    assert "inputs: generated (no sample inputs beside the model): random, seed 0" in result.output
    m = irrun.read_model(xml)
    f1, _ = generated_inputs(m)
    f2, _ = generated_inputs(m)
    np.testing.assert_array_equal(f1["x"], f2["x"])
    assert f1["x"].shape == (4, 3) and f1["x"].dtype == np.float32
    assert -1 <= f1["x"].min() and f1["x"].max() < 1


@pytest.mark.oracle
def test_as_compiled_precision_is_reported(tmp_path):
    xml = MODELS_DIR / "bucketize_spec" / "model.xml"
    data = json.loads(invoke(xml, "--precision", "as-compiled", "--format", "json").output)
    assert "as compiled: inference precision" in data["other"]
    floats = [t for t in data["tensors"] if t["dtype"] == "f32"]
    assert floats and all(t["tolerance"]["etype"] in ("f32", "f16", "bf16") for t in floats)


# ---------------------------------------------------------------- --reference

def _reference_case(tmp_path):
    xml = _ess_model(tmp_path)
    m = irrun.read_model(xml)
    feed = {"x": np.load(tmp_path / "inputs.npz")["x"]}
    return xml, m.infer(feed, intermediate=True), m


def test_reference_file_agrees_with_irrun_itself(tmp_path):
    xml, values, m = _reference_case(tmp_path)
    ref = tmp_path / "ref.npz"
    # An output name, a layer name and a layer:port name.
    np.savez(ref, **{m.outputs[0].name: values["relu:0"], "mm": values["mm:0"],
                     "ess:0": values["ess:0"]})
    result = invoke(xml, "--reference", ref, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["other"] == f"reference {ref}"
    assert [t["layer"] for t in data["tensors"]] == ["mm", "ess", "relu"]


def test_reference_divergence_and_taint(tmp_path):
    xml, values, _ = _reference_case(tmp_path)
    ref = tmp_path / "ref.npz"
    mm = values["mm:0"].copy()
    mm[2, 1] += 1.0
    relu = values["relu:0"] + 1.0
    # mm differs; ess is not given; relu differs but an uncompared input downstream of mm
    # explains it, so mm is the only divergence.
    np.savez(ref, **{"mm:0": mm, "relu": relu})
    result = invoke(xml, "--reference", ref, "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert [d["layer"] for d in data["divergences"]] == ["mm"]
    t = {t["layer"]: t for t in data["tensors"]}["mm"]
    assert t["worst_index"] == [2, 1] and t["mismatches"] == 1
    assert t["other_value"] == pytest.approx(t["irrun_value"] + 1.0)


def test_reference_unknown_name_is_one_error(tmp_path):
    xml, _, _ = _reference_case(tmp_path)
    ref = tmp_path / "ref.npz"
    np.savez(ref, nosuch=np.zeros(3, np.float32))
    result = invoke(xml, "--reference", ref)
    assert result.exit_code == 1
    assert "'nosuch', which name no output, tensor or layer of the model" in result.output


def test_reference_shape_mismatch_is_a_difference(tmp_path):
    xml, values, _ = _reference_case(tmp_path)
    ref = tmp_path / "ref.npz"
    np.savez(ref, mm=values["mm:0"][:2])
    data = json.loads(invoke(xml, "--reference", ref, "--format", "json").output)
    t = data["tensors"][0]
    assert t["status"] == "differ" and "shape [4,5] in irrun, [2,5] in reference" in t["reason"]


def test_without_openvino_one_clear_error(tmp_path, monkeypatch):
    xml, _, _ = _reference_case(tmp_path)
    monkeypatch.setitem(sys.modules, "openvino", None)     # import openvino -> ImportError
    result = invoke(xml)
    assert result.exit_code == 1
    assert result.output.strip().endswith(OPENVINO_MISSING)
    assert "pip install irrun[openvino]" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_help_lists_the_options():
    out = CliRunner().invoke(cli, ["compare", "--help"]).output
    for option in ("--inputs", "--device", "--layers", "--rtol", "--atol", "--precision",
                   "--format", "--html", "--reference"):
        assert option in out


# ---------------------------------------------------------------- every model in models/

@pytest.mark.oracle
@pytest.mark.parametrize("xml", MODELS, ids=[p.parent.name for p in MODELS])
def test_every_model_agrees_layer_by_layer(xml):
    pytest.importorskip("openvino")
    result = invoke(xml, "--layers", "all", "--format", "json")
    data = json.loads(result.output) if result.output.startswith("{") else None
    assert result.exit_code == 0, (result.output if data is None else
                                   "\n".join(f"{t['layer']}:{t['port']} {t['op']}: "
                                             f"{t['max_abs']} {t['reason'] or ''}"
                                             for t in data["tensors"] if t["status"] != "agree"))
    # Only OpenVINO's saturated int8 sums, on a CPU without VNNI, are explained away.
    if not plugin_int8.host_saturates():
        assert data["explained"] == 0
    # Every op port irrun ran is compared or listed with a reason; none silently dropped.
    m = irrun.read_model(xml)
    ran = set(m.run_order())
    ports = {(n.layer.name, i) for n in m.program.nodes.values()
             if n.kind == "op" and n.layer.name in ran for i in range(len(n.specs))}
    seen = {(t["layer"], t["port"]) for t in data["tensors"]} | \
        {(x["layer"], x["port"]) for x in data["missing"]}
    assert ports <= seen
    assert data["compared"] >= len(m.outputs)


# ---------------------------------------------------------------- outputs a plugin refuses

def test_split_exposable_finds_the_refused_candidates():
    calls = []

    def works(subset):
        calls.append(list(subset))
        return not ({3, 6} & set(subset))

    kept, refused = split_exposable(list(range(8)), works)
    assert sorted(refused) == [3, 6] and sorted(kept) == [0, 1, 2, 4, 5, 7]
    assert len(calls) < 16
    assert split_exposable([1, 2], lambda s: True) == ([1, 2], [])


@pytest.mark.oracle
def test_outputs_the_plugin_refuses_are_listed(tmp_path, monkeypatch):
    ov = pytest.importorskip("openvino")
    xml = _ess_model(tmp_path)
    real = ov.Core

    class RefusesMatMulOutputs:
        """A Core whose compile_model fails when MatMul's output is a model output."""

        def __init__(self):
            self.core = real()

        def read_model(self, *args):
            return self.core.read_model(*args)

        def compile_model(self, model, *args):
            for r in model.get_results():
                if r.input_value(0).get_node().get_type_name() == "MatMul":
                    raise RuntimeError("Exception from src/x.cpp:1:\nrefused output")
            return self.core.compile_model(model, *args)

    monkeypatch.setattr(ov, "Core", RefusesMatMulOutputs)
    from irrun.tools import comparing

    monkeypatch.setattr(comparing, "OPENVINO_IN_CHILD", False)     # the fake Core is here
    data = json.loads(invoke(xml, "--format", "json").output)
    assert [t["layer"] for t in data["tensors"]] == ["ess", "relu"]
    assert [(m["layer"], m["port"]) for m in data["missing"]] == [("mm", 0)]
    assert "plugin cannot compile the model with it as an output (refused output)" in \
        data["missing"][0]["reason"]
    # ess's input was not compared: it is still the first divergent layer, with mm a suspect.
    assert data["first_divergent"]["layer"] == "ess"
    assert data["first_divergent"]["unchecked_inputs"] == ["mm:0"]


@pytest.mark.oracle
def test_ports_of_every_kind_are_matched(tmp_path):
    """Several outputs per op, f16 and bf16 tensors, a Parameter straight to a Result, an
    unused Parameter, and two layers sharing a name (paired by op type).

    The values (halves, times 1.5 in f16 and 3 in bf16) are exact in every type: on CPUs
    without AVX512-BF16 the plugin computes bf16 ops in f32 and rounds only what it hands
    back, so a bf16 Multiply that rounds would differ there for that reason alone."""
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as o

    x = o.parameter([2, 6], ov.Type.f32, name="x")
    unused = o.parameter([3], ov.Type.f32, name="unused")
    z = o.parameter([-1], ov.Type.i32, name="z")
    split = o.split(x, o.constant(np.int64(1)), 3, name="split")
    half = o.multiply(o.convert(o.add(split.output(1), split.output(2), name="add"), "f16",
                                name="to_half"), o.constant(np.array(1.5, np.float16)),
                      name="mul_half")
    bf = o.convert(half, "bf16", name="to_bf16")
    back = o.convert(o.multiply(bf, o.convert(o.constant(np.float32(3.0)), "bf16"),
                                name="mul_bf16"), "f32", name="back")
    topk = o.topk(x, o.constant(np.int64(3)), 1, "max", "value", name="topk")
    relu, sig = o.relu(back, name="dup"), o.sigmoid(back, name="dup")
    outs = [split.output(0), relu.output(0), sig.output(0), topk.output(0), topk.output(1),
            z.output(0)]
    xml = tmp_path / "model.xml"
    ov.save_model(ov.Model(outs, [x, unused, z], "kinds"), str(xml), compress_to_fp16=False)
    rng = np.random.default_rng(0)
    feed = {"x": (rng.permutation(12).reshape(2, 6) / 2 - 3).astype(np.float32),
            "unused": np.zeros(3, np.float32), "z": np.arange(4, dtype=np.int32)}
    result = irrun.compare(xml, feed)
    assert result.ok, result.report()
    got = {(t.layer, t.op, t.port): t for t in result.tensors}
    for key in [("split", "Split-opset1", 0), ("split", "Split-opset1", 2),
                ("topk", "TopK-opset11", 1), ("mul_half", "Multiply-opset1", 0),
                ("mul_bf16", "Multiply-opset1", 0), ("dup", "ReLU-opset1", 0),
                ("dup", "Sigmoid-opset1", 0), ("z", "Parameter-opset1", 0)]:
        assert key in got, key
    assert got[("mul_half", "Multiply-opset1", 0)].tolerance["etype"] == "f16"
    assert got[("mul_bf16", "Multiply-opset1", 0)].tolerance["etype"] == "bf16"
    assert got[("topk", "TopK-opset11", 1)].tolerance == {"exact": True}
    assert not result.missing


def test_json_is_strict_with_nan_and_inf(tmp_path):
    xml, values, _ = _reference_case(tmp_path)
    ref = tmp_path / "ref.npz"
    mm = values["mm:0"].copy()
    mm[0, 0] = np.nan
    np.savez(ref, mm=mm)
    result = invoke(xml, "--reference", ref, "--format", "json")

    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    data = json.loads(result.output, parse_constant=refuse)
    t = data["tensors"][0]
    assert t["max_abs"] == "inf" and t["other_value"] == "nan" and t["worst_index"] == [0, 0]


@pytest.mark.oracle
def test_layers_sharing_a_name_pair_by_tensor_name(tmp_path):
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as o

    x = o.parameter([4], ov.Type.f32, name="x")
    a = o.relu(x, name="dup")
    a.output(0).set_names({"a"})
    b = o.relu(o.negative(x, name="neg"), name="dup")
    b.output(0).set_names({"b"})
    c = o.multiply(b, o.constant(np.float32(2)), name="c")
    xml = tmp_path / "model.xml"
    ov.save_model(ov.Model([c.output(0), a.output(0)], [x], "dup"), str(xml))
    result = irrun.compare(xml, {"x": np.array([1, -2, 3, -4], np.float32)})
    assert result.ok, result.report()
    dups = [t for t in result.tensors if t.layer == "dup"]
    assert sorted(t.names[0] for t in dups) == ["a", "b"] and not result.missing


@pytest.mark.oracle
def test_errors_are_one_located_line(tmp_path):
    xml = _ess_model(tmp_path)
    result = invoke(xml, "--device", "NOPE")
    assert result.exit_code == 1
    assert result.output.startswith(f"{xml}: error: OpenVINO cannot compile the model for NOPE")
    result = invoke(tmp_path / "nosuch.xml")
    assert result.exit_code == 1 and "no such model file" in result.output
    np.savez(tmp_path / "bad.npz", y=np.zeros(3, np.float32))
    result = invoke(xml, "--inputs", tmp_path / "bad.npz")
    assert result.exit_code == 1 and "'y'" in result.output and "x: f32[4,3]" in result.output


def _round_model(directory: Path) -> Path:
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as o

    x = o.parameter([3], ov.Type.f32, name="x")
    scaled = o.multiply(x, o.constant(np.float32(1.0)), name="scaled")
    rounded = o.round(scaled, "half_to_even", name="rounded")
    xml = directory / "model.xml"
    ov.save_model(ov.Model([rounded], [x], "round"), str(xml), compress_to_fp16=False)
    return xml


def test_a_step_op_at_a_tie_may_round_either_way(tmp_path):
    """Round(2.5) is 2 (half to even); a reference saying 3 is within rounding noise of the
    tie: irrun's kernel on a slightly larger input gives 3, so the difference is not a
    divergence. A reference saying 4 is."""
    xml = _round_model(tmp_path)
    feed = {"x": np.array([2.5, 1.0, -0.5], np.float32)}
    ref = {"scaled": feed["x"], "rounded": np.array([3.0, 1.0, -0.0], np.float32)}
    result = irrun.compare(xml, feed, reference=ref)
    assert result.ok, result.report()
    t = {t.layer: t for t in result.tensors}["rounded"]
    assert t.status == "drift" and t.isolated["stepped"] == 1 and t.worst_index == [0]
    ref["rounded"] = np.array([4.0, 1.0, -0.0], np.float32)
    result = irrun.compare(xml, feed, reference=ref)
    assert not result.ok and result.first_divergent.layer == "rounded"
    assert result.first_divergent.isolated


def _topk_model(tmp_path, stable: bool = False) -> Path:
    """x f32[2, 8] -> TopK-11 (k 4 along axis 1, max, sorted by value) -> values, indices."""
    from irrun.tools.builder import GraphBuilder

    g = GraphBuilder("ties")
    x = g.parameter("x", "f32", [2, 8])
    k = g.constant(np.int64(4))
    values, indices = g.op("TopK", [x, k], name="topk", outputs=2, axis=1, mode="max",
                           sort="value", stable=stable, index_element_type="i32")
    g.result(values, name="values")
    g.result(indices, name="indices")
    xml = tmp_path / "ties.xml"
    g.save(xml)
    np.savez(tmp_path / "ties.inputs.npz",
             x=np.array([[1, 5, 5, 5, 2, 5, 0, 3], [7, 7, 7, 7, 7, 7, 7, 7]], np.float32))
    return xml


def test_tie_order_of_topk_is_not_a_divergence(tmp_path):
    """The other side takes equal values in another order (as OpenVINO's CPU plugin does on
    some CPUs): compare says so and exits 0. A reference that picks another value differs."""
    xml = _topk_model(tmp_path)
    m = irrun.read_model(xml)
    ours = m.infer(dict(np.load(tmp_path / "ties.inputs.npz")))
    values, indices = ours["values"], ours["indices"]
    assert values.tolist() == [[5, 5, 5, 5], [7, 7, 7, 7]]
    swapped = indices[:, ::-1].copy()                       # the ties the other way round
    np.savez(tmp_path / "ref.npz", **{"topk:0": values, "topk:1": swapped})
    r = invoke(xml, "--reference", tmp_path / "ref.npz", "--inputs",
               tmp_path / "ties.inputs.npz")
    assert r.exit_code == 0, r.output
    assert "equal ones taken in another order" in r.output
    assert "no layer diverges on its own" in r.output
    wrong = indices.copy()
    wrong[0, 0] = 0                                         # x[0, 0] is 1, not 5
    np.savez(tmp_path / "bad.npz", **{"topk:0": values, "topk:1": wrong})
    r = invoke(xml, "--reference", tmp_path / "bad.npz", "--inputs",
               tmp_path / "ties.inputs.npz")
    assert r.exit_code == 1 and "first divergent layer" in r.output
    # stable=true fixes the order: another order is a divergence.
    stable = _topk_model(tmp_path / "s" if (tmp_path / "s").mkdir() is None else tmp_path,
                         stable=True)
    r = invoke(stable, "--reference", tmp_path / "ref.npz", "--inputs",
               tmp_path / "ties.inputs.npz")
    assert r.exit_code == 1


@pytest.mark.oracle
def test_compare_with_openvino_on_ties_exits_0_on_any_cpu(tmp_path):
    pytest.importorskip("openvino")
    xml = _topk_model(tmp_path)
    r = invoke(xml, "--inputs", tmp_path / "ties.inputs.npz")
    assert r.exit_code == 0, r.output


def test_normalising_ops_are_held_relative_to_the_tensors_magnitude():
    from irrun.tools.comparing import compare_tensor, tolerance_for

    y = np.array([4.0, -3.0, 0.02], np.float32)
    x = y + np.array([0, 0, 2e-5], np.float32)      # a mean's rounding, on a small element
    tol = tolerance_for("f32")
    assert compare_tensor(x, y, tol)["status"] == "differ"
    assert compare_tensor(x, y, dict(tol, whole=True))["status"] == "agree"
    assert compare_tensor(x + 1e-3, y, dict(tol, whole=True))["status"] == "differ"


def test_a_crash_of_openvino_is_a_located_error_not_the_end_of_irrun(tmp_path, monkeypatch):
    """OpenVINO runs in a child process: a plugin that dies of a signal (as OpenVINO's does
    on some small files: a Range with extreme bounds, SIGFPE) is reported on the model."""
    pytest.importorskip("openvino")
    xml = MODELS_DIR / "crnn" / "model.xml"
    from irrun.tools import comparing

    monkeypatch.setattr(comparing, "_CHILD", "import os, signal; os.kill(os.getpid(), "
                                              "signal.SIGSEGV)")
    r = invoke(xml)
    assert r.exit_code == 1
    assert r.output.strip() == (f"{xml}: error: OpenVINO's CPU plugin crashed (SIGSEGV) on this "
                                "model; irrun's run of it completed, so this is OpenVINO's "
                                "failure (compare it with `irrun MODEL` alone)")


def test_verdicts_count_in_good_english(tmp_path):
    from irrun.tools.comparing import CompareResult, TensorResult

    def result(statuses):
        r = CompareResult("m.xml", "reference", "reference", "given")
        r.tensors = [TensorResult(status=s, layer="l", layer_id=str(i), port=0, op="ReLU-opset1",
                                  line=1, names=[], shape=[1], dtype="f32", other_shape=[1],
                                  other_dtype="f32", tolerance={"exact": True}, size=1,
                                  mismatches=0) for i, s in enumerate(statuses)]
        return r.verdict()

    assert result(["agree"]) == "the one compared tensor agrees"
    assert result(["agree", "agree"]) == "all 2 compared tensors agree"
    assert result(["agree", "drift"]).startswith(
        "no layer diverges on its own: 1 of 2 compared tensors agrees, 1 differs only")
