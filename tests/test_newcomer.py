"""A newcomer's first hour: pipes, typos, dims that behave as ints, OVDict-style outputs, a
subset of outputs, .npy and random inputs, and a start-up that does not import everything."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
from irrun.tools.builder import GraphBuilder
from irrun.ui.cli import cli

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
CRNN = MODELS / "crnn" / "model.xml"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


LLAMA = MODELS / "tiny_llama" / "model.xml"


@pytest.mark.parametrize("args", [["--help"], ["ops"], ["info", str(CRNN)], [str(CRNN)],
                                  [str(LLAMA)], ["info", str(LLAMA)],
                                  ["validate", *map(str, sorted(MODELS.glob("*/model.xml")))]])
def test_a_closed_pipe_is_a_quiet_normal_end(args):
    # `irrun ... | head -1`: the reader is gone after one line, or before irrun writes. A
    # closed pipe ends irrun with status 0 whatever the size of its output (click alone
    # exits 1 where the output outgrows the pipe's buffer).
    for lines in (0, 1):
        p = subprocess.Popen([sys.executable, "-m", "irrun", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        for _ in range(lines):
            p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode()
        p.wait(timeout=120)
        p.stderr.close()
        assert "internal error" not in err and "Traceback" not in err and "BrokenPipe" not in err
        assert p.returncode == 0, err


def test_a_misspelt_subcommand_is_suggested():
    r = invoke("valdate", CRNN)
    assert r.exit_code == 2
    assert "no command 'valdate'; did you mean 'validate'?" in r.output
    # A model path is still run, even one without a suffix that exists.
    assert invoke("nosuchmodel.xml").exit_code == 1


def test_static_dims_behave_as_ints_and_dynamic_ones_say_so():
    m = irrun.read_model(CRNN)
    shape = m.inputs[0].shape            # image: f32[1,1,32,?]
    assert shape[2] == 32 and int(shape[2]) == 32 and list(range(shape[0])) == [0]
    assert np.zeros(shape[:3]).shape == (1, 1, 32)
    assert shape[3] != 32 and not shape[3].is_static
    with pytest.raises(TypeError, match=r"dim \? is dynamic: it has no single value"):
        int(shape[3])
    assert m.inputs[0].partial_shape == "[1,1,32,?]"


def test_outputs_by_position_by_port_info_and_a_subset():
    m = irrun.read_model(CRNN)
    feed = dict(np.load(CRNN.with_name("inputs.npz")))
    out = m.infer(feed)
    assert list(out) == [o.name for o in m.outputs]
    np.testing.assert_array_equal(out[0], out[m.outputs[0].name])
    np.testing.assert_array_equal(out[m.outputs[1]], out["decoded_lengths"])
    assert m.outputs[1] in out
    with pytest.raises(IndexError, match="output 2 does not exist: there are 2 outputs"):
        out[2]
    with pytest.raises(irrun.FeedError, match="no output named 'nope'"):
        m.infer(feed, outputs=["nope"])


def test_a_subset_of_outputs_runs_only_what_it_needs(tmp_path):
    g = GraphBuilder("two")
    x = g.parameter("x", "f32", [4])
    g.result(g.op("Sigmoid", [x]), name="s")
    g.result(g.op("Exp", [g.op("Negative", [x])]), name="e")
    m = irrun.read_model(g.save(tmp_path / "two.xml")[0])
    ran = []
    feed = {"x": np.arange(4, dtype=np.float32)}
    only = m.infer(feed, outputs=["e"], listener=lambda node, outs, t: ran.append(node.layer.type))
    assert list(only) == ["e"] and "Sigmoid" not in ran and "Exp" in ran
    # irrun computes exp in f64 and rounds once: within an ulp of NumPy's f32 exp.
    np.testing.assert_allclose(only[0], np.exp(-feed["x"]), rtol=2e-7)
    assert list(m.infer(feed, outputs=[m.outputs[0], 1])) == ["s", "e"]


def one_input_model(tmp_path) -> Path:
    g = GraphBuilder("one")
    x = g.parameter("x", "f32", [None, 3])
    g.result(g.op("Sigmoid", [x]), name="y")
    xml, _ = g.save(tmp_path / "one.xml")
    return Path(xml)


def test_npy_inputs_for_a_one_input_model(tmp_path):
    xml = one_input_model(tmp_path)
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    r = invoke(xml, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npz")
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(tmp_path / "y.npz")["y"], 1 / (1 + np.exp(-x)), rtol=1e-6)
    r = invoke(MODELS / "ctr_wide_deep" / "model.xml", "-i", tmp_path / "x.npy")
    assert r.exit_code == 1
    assert "a .npy file holds one array, not an .npz of named arrays, but the model has 4 inputs" in r.output


def test_random_inputs_with_a_shape(tmp_path):
    xml = one_input_model(tmp_path)
    r = invoke(xml, "--random-inputs", "--shape", "x[5,3]", "-o", tmp_path / "y.npz")
    assert r.exit_code == 0, r.output
    assert "random, seed 0" in r.output
    assert np.load(tmp_path / "y.npz")["y"].shape == (5, 3)
    same = invoke(xml, "--random-inputs", "--shape", "[5,3]", "-o", tmp_path / "z.npz")
    assert same.exit_code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "z.npz")["y"], np.load(tmp_path / "y.npz")["y"])
    bad = invoke(xml, "--random-inputs", "--shape", "x[5,4]")
    assert bad.exit_code == 1 and "--shape x[5, 4] does not fit the input x: f32[?,3]" in bad.output
    assert invoke(xml, "--shape", "x[5,3]").exit_code == 2
    assert "is not NAME[D,D,...]" in invoke(xml, "--random-inputs", "--shape", "x(5)").output


def test_start_up_imports_neither_networkx_nor_the_executor():
    script = ("import sys, irrun.ui.cli\n"
              "heavy = [m for m in ('networkx', 'irrun.run.executor', 'irrun.run.model', 'dask') "
              "if m in sys.modules]\n"
              "print(heavy)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    # The lazy names still resolve.
    assert irrun.read_model is not None and callable(irrun.compare) and callable(irrun.batch)


def test_progress_counts_kernel_layers_and_shows_no_eta():
    import io
    from types import SimpleNamespace

    from irrun.run import inspect

    class TTY(io.StringIO):
        def isatty(self):
            return True

    tty = TTY()
    p = inspect.Progress(2, tty, delay=0)
    for kind in ("parameter", "const", "op", "result", "op"):
        p(SimpleNamespace(kind=kind), (), 0.0)
    p.close()
    out = tty.getvalue()
    assert "running layers" in out and "2/2" in out and "3/2" not in out
    assert "eta" not in out.lower()
    # The total the bar counts to is every layer that runs a kernel: as many as a run
    # reports to its listener with kind "op" (layers on the fast path and folded ones too).
    m = irrun.read_model(CRNN)
    ran = []
    m.infer(dict(np.load(CRNN.parent / "inputs.npz")),
            listener=lambda node, outputs, seconds: ran.append(node.kind))
    assert len(m.run_order(ops_only=True)) == ran.count("op") > 0
    assert len(m.run_order(ops_only=True)) < len(m.run_order())


def test_info_shows_what_it_can_of_a_model_that_cannot_run(tmp_path):
    import shutil

    # No .bin beside it, and an op irrun does not know.
    text = CRNN.read_text().replace('type="ReLU"', 'type="ReLUX"')
    (tmp_path / "m.xml").write_text(text)
    r = invoke("info", tmp_path / "m.xml")
    assert r.exit_code == 0, r.output
    assert "image: f32[1,1,32,?]" in r.output
    assert "decoded_classes: i32[1,?] (declared)" in r.output
    assert "ReLUX-opset1 (no kernel)" in r.output and "Convolution-1" in r.output
    assert "problems: " in r.output and "unknown op type 'ReLUX'" in r.output
    assert "cannot read the weights file" in r.output
    shutil.copy(CRNN.with_suffix(".bin"), tmp_path / "m.bin")
    assert "cannot read the weights file" not in invoke("info", tmp_path / "m.xml").output


def test_layer_name_typos_are_suggested(tmp_path):
    r = invoke(CRNN, "--until", "relu3")
    assert r.exit_code == 1
    assert "no layer named 'relu3' in the model; did you mean relu2 or relu1?" in r.output
    r = invoke(CRNN, "--dump", tmp_path / "d", "--dump-layers", "relu3")
    assert r.exit_code == 1
    assert "--dump-layers 'relu3' matches no layer; did you mean relu2 or relu1?" in r.output
    assert invoke(CRNN, "--dump", tmp_path / "e", "--dump-layers", "relu*").exit_code == 0


def test_output_path_is_written_exactly_or_gets_npz_without_a_suffix(tmp_path):
    r = invoke(CRNN, "-o", tmp_path / "out")
    assert r.exit_code == 0 and f"to {tmp_path / 'out.npz'}" in r.output
    assert (tmp_path / "out.npz").exists() and not (tmp_path / "out").exists()
    r = invoke(CRNN, "-o", tmp_path / "out.npy")      # an .npz under another suffix: said
    assert r.exit_code == 0 and f"to {tmp_path / 'out.npy'}" in r.output
    assert f"did you mean '{tmp_path / 'out.npz'}'?" in r.output
    assert set(np.load(tmp_path / "out.npy")) == {"decoded_classes", "decoded_lengths"}
    r = invoke(CRNN, "-o", tmp_path / "missing" / "out.npz")
    assert r.exit_code == 1 and "the directory" in r.output and "does not exist" in r.output
    assert "internal error" not in r.output


@pytest.mark.oracle
def test_viewer_colours_layers_by_agreement_with_openvino(tmp_path):
    pytest.importorskip("openvino")
    import re

    sys.path.insert(0, str(Path(__file__).parent))
    from test_compare import _ess_model

    xml = _ess_model(tmp_path)
    r = invoke("graph", xml, "-o", tmp_path / "page.html", "--compare")
    assert r.exit_code == 0, r.output
    page = (tmp_path / "page.html").read_text()
    fills = dict(re.findall(r'data-name="(\w+)"[^>]*><rect[^>]*fill="([^"]+)"', page))
    # ESS is wrong on its own account (red), the ReLU after it only through its input (amber).
    assert fills["ess"] == "#ffb3b3" and fills["relu"] == "#ffe0a0" and fills["mm"] == "#c8f0c8"
    assert "coloured by agreement with OpenVINO" in page


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "irrun", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_the_wrong_file_is_recognised_and_the_message_says_what_to_do(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"\x08\x07\x12\x07pytorch")
    (tmp_path / "unnamed").write_bytes(b"\x08\x08\x12\x04onnx")
    (tmp_path / "x.tflite").write_bytes(b"\x1c\x00\x00\x00TFL3rest")
    (tmp_path / "m.pdmodel").write_bytes(b"\x0a\x05paddle")
    (tmp_path / "k.h5").write_bytes(b"\x89HDF\r\n\x1a\nrest")
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "saved_model.pb").write_bytes(b"\x08\x01")
    (tmp_path / "model.xml").write_text(CRNN.read_text())
    (tmp_path / "model.bin").write_bytes((CRNN.parent / "model.bin").read_bytes())
    expected = {
        "m.onnx": "this is an ONNX model; irrun reads OpenVINO IR: convert it with `ovc m.onnx`",
        "unnamed": "this looks like an ONNX model;",
        "x.tflite": "this is a TensorFlow Lite model; irrun reads OpenVINO IR",
        "m.pdmodel": "this is a PaddlePaddle model;",
        "k.h5": "this is a Keras model;",
        "saved": "this is a TensorFlow SavedModel directory;",
        "model.bin": "this is the weights file of an IR model: pass its .xml",
        str(MODELS / "genai_llama"): "this is an OpenVINO GenAI model folder: run it with "
                                     "`irrun generate",
    }
    for name, message in expected.items():
        # Every command reads through the same reader: all of them for one file.
        for command in ([], ["validate"], ["info"]) if name == "m.onnx" else ([],):
            done = _cli(*command, name, cwd=tmp_path)
            assert done.returncode == 1, (name, command, done.stderr)
            said = done.stdout + done.stderr        # validate reports on stdout
            assert message in said, (name, command, said)
            assert "Traceback" not in said and "not well formed" not in said


def test_output_with_another_suffix_is_written_and_warned_about(tmp_path):
    done = _cli(CRNN, "-o", tmp_path / "out3.txt")
    assert done.returncode == 0
    assert done.stderr.startswith("warning: --output writes an .npz archive; ")
    assert "did you mean" in done.stderr and "out3.npz" in done.stderr
    assert (tmp_path / "out3.txt").exists()
    assert _cli(CRNN, "-o", tmp_path / "out").returncode == 0
    assert (tmp_path / "out.npz").exists()


def test_importing_from_the_folder_above_a_checkout_named_irrun(tmp_path):
    """From the parent of a checkout named `irrun`, the checkout would shadow the package as
    an empty namespace package; its root __init__.py hands over to the installed irrun."""
    (tmp_path / "irrun").symlink_to(ROOT, target_is_directory=True)
    script = ("import irrun, irrun.opkit, irrun.ops.sparse\n"
              "print(callable(irrun.read_model), irrun.__file__)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "True"
    assert done.stdout.split()[1].endswith(os.path.join("irrun", "__init__.py"))


def test_info_tells_weights_parameters_name_and_producer_and_speaks_json(tmp_path):
    import json

    done = _cli("info", MODELS / "tiny_llama" / "model.xml")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "name: Model0" in lines or any(line.startswith("name: ") for line in lines)
    weights = next(line for line in lines if line.startswith("weights: "))
    assert "f16" in weights and "parameters" in weights
    assert "  conversion_parameters/framework: pytorch" in lines
    data = json.loads(_cli("info", "--format", "json", MODELS / "tiny_llama" / "model.xml").stdout)
    assert data["inputs"][0]["name"] == "input_ids" and data["inputs"][0]["element_type"] == "i64"
    assert data["rt_info"]["conversion_parameters/framework"] == "pytorch"
    # Every byte of the .bin belongs to some Const (the converter packs them), and the f16
    # weights alone hold half their bytes' worth of parameters.
    weights = data["weights"]
    assert weights["bytes"] == (MODELS / "tiny_llama" / "model.bin").stat().st_size
    assert weights["parameters"] >= weights["by_element_type"]["f16"] // 2
    assert data["opsets"] and data["ops"]["MatMul-1"] == 15 and data["problems"] == []
    # A model with problems still shows what it can, with its errors, in JSON too.
    text = (MODELS / "crnn" / "model.xml").read_text().replace('type="ReLU"', 'type="ReLUX"')
    (tmp_path / "m.xml").write_text(text)
    broken = json.loads(_cli("info", "--format", "json", tmp_path / "m.xml").stdout)
    assert broken["inputs"] and broken["problems"]


def test_dump_leaves_weights_out_unless_a_pattern_names_them(tmp_path):
    """A converted model's decompression Converts are folded into constants at load: they
    are weights, not the run's tensors, and are dumped only when a pattern names them."""
    import json

    xml = MODELS / "tiny_llama" / "model.xml"
    m = irrun.read_model(xml)
    folded = {n.layer.name for n in m.program.nodes.values() if n.folded is not None}
    assert folded
    done = _cli(xml, "--dump", tmp_path / "all")
    assert done.returncode == 0, done.stderr
    dumped = {e["layer"] for e in json.loads((tmp_path / "all" / "index.json").read_text())}
    assert dumped and not dumped & folded
    one = sorted(folded)[0]
    done = _cli(xml, "--dump", tmp_path / "one", "--dump-layers", one)
    assert done.returncode == 0, done.stderr
    assert {e["layer"] for e in json.loads((tmp_path / "one" / "index.json").read_text())} == {one}


def test_an_output_of_several_names_is_known_by_each_as_in_openvino(tmp_path):
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as ops

    p = ops.parameter([2], np.float32, name="x")
    r = ops.relu(p)
    r.get_output_tensor(0).set_names({"last_hidden_state", "316"})
    r.set_friendly_name("encoder_out")
    xml = tmp_path / "names.xml"
    ov.save_model(ov.Model([r], [p], "m"), xml)
    theirs = ov.Core().read_model(xml)
    m = irrun.read_model(xml)
    assert m.outputs[0].name == theirs.outputs[0].get_any_name()
    x = {"x": np.array([-1, 2], np.float32)}
    for name in ("316", "last_hidden_state", "encoder_out"):
        out = m.infer(x, outputs=[name])
        assert list(out) == [m.outputs[0].name] and out[name].tolist() == [0, 2]
        assert m.infer(x, until=name)[name].tolist() == [0, 2]
    np.savez(tmp_path / "in.npz", **x)
    np.savez(tmp_path / "ref.npz", last_hidden_state=np.array([0, 2], np.float32))
    done = _cli("compare", xml, "--reference", tmp_path / "ref.npz", "-i", tmp_path / "in.npz")
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_input_name_in_another_case_gets_a_did_you_mean(tmp_path):
    feed = dict(np.load(CRNN.parent / "inputs.npz"))
    np.savez(tmp_path / "case.npz", Image=feed["image"], sequence_length=feed["sequence_length"])
    done = _cli(CRNN, "-i", tmp_path / "case.npz")
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith("did you mean 'image' for 'Image'?")
    with pytest.raises(irrun.FeedError, match="did you mean 'image' for 'IMAGE'"):
        irrun.read_model(CRNN).infer({"IMAGE": feed["image"],
                                      "sequence_length": feed["sequence_length"]})
