"""Hostile input against the tools: files that are not what they claim, paths that the shell
or a planted link would misread, names with OpenVINO's escaped commas."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import irrun
from irrun.tools.surgery import Condition

ROOT = Path(__file__).resolve().parent.parent
RESNETISH = ROOT / "models" / "resnetish"


def irrun_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "irrun", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_inputs_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "in.npz"
    os.mkfifo(fifo)
    for args in ([RESNETISH / "model.xml", "-i", fifo],
                 ["compare", RESNETISH / "model.xml", "--reference", fifo, "-i", fifo]):
        done = irrun_cli(*args)
        assert done.returncode == 1, done.stderr
        assert "is not a regular file (a FIFO, socket or device)" in done.stdout + done.stderr


def test_extract_refuses_to_overwrite_its_own_source(tmp_path):
    for name in ("model.xml", "model.bin"):
        shutil.copy(RESNETISH / name, tmp_path / name)
    before = (tmp_path / "model.xml").read_bytes(), (tmp_path / "model.bin").read_bytes()
    done = irrun_cli("extract", "model.xml", "--outputs", "block1/relu2", "-o", "model.xml",
                     cwd=tmp_path)
    assert done.returncode == 1
    assert "would overwrite the model it is cut from" in done.stderr
    assert ((tmp_path / "model.xml").read_bytes(), (tmp_path / "model.bin").read_bytes()) == before
    # Another name in the same folder is fine.
    assert irrun_cli("extract", "model.xml", "--outputs", "block1/relu2", "-o", "sub.xml",
                     cwd=tmp_path).returncode == 0


def test_reduce_command_paths_are_one_word_never_interpreted(tmp_path):
    folder = tmp_path / "a b$(touch PWNED)"
    folder.mkdir()
    xml, inputs = folder / "m.xml", folder / "in.npz"
    xml.write_text("<net/>")
    inputs.write_bytes(b"")
    record = tmp_path / "seen.txt"
    condition = Condition("command", f"printf '%s|%s' {{model}} {{inputs}} > {record}; false")
    assert condition.holds(str(xml), str(inputs))
    assert record.read_text() == f"{xml}|{inputs}"
    assert not list(tmp_path.rglob("PWNED")) and not (Path.cwd() / "PWNED").exists()


def test_batch_manifest_is_never_written_through_a_planted_link(tmp_path):
    pytest.importorskip("dask")
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    out = tmp_path / "scores"
    out.mkdir()
    # The manifest, its temporary file, the output and where a worker writes it first.
    for planted in ("manifest.json", "manifest.json.tmp", "part0.npz", ".part0.npz.part"):
        (out / planted).symlink_to(target)
    feed = dict(np.load(ROOT / "models" / "ctr_wide_deep" / "inputs.npz"))
    np.savez(tmp_path / "part0.npz", **feed)
    done = irrun_cli("batch", ROOT / "models" / "ctr_wide_deep" / "model.xml",
                     tmp_path / "part0.npz", "--out", out, "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "keep me"
    assert not (out / "manifest.json").is_symlink() and not (out / "part0.npz").is_symlink()
    assert json.loads((out / "manifest.json").read_text())
    assert sorted(np.load(out / "part0.npz")) == ["score"]


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_a_failing_shard_is_one_line_on_stderr_without_dasks_traceback(tmp_path, scheduler):
    """Dask logged "Compute Failed" with the worker's traceback for every try of a shard whose
    file is corrupt (and tried it again twice): one line now, and the reason in the manifest."""
    pytest.importorskip("distributed")
    ctr = ROOT / "models" / "ctr_wide_deep"
    np.savez(tmp_path / "part0.npz", **dict(np.load(ctr / "inputs.npz")))
    (tmp_path / "part1.npz").write_bytes(b"not a zip file at all")
    out = tmp_path / "scores"
    done = irrun_cli("batch", ctr / "model.xml", tmp_path / "part0.npz", tmp_path / "part1.npz",
                     "--out", out, "--workers", "1", "--scheduler", scheduler)
    assert done.returncode == 1, done.stderr
    reason = (f"{tmp_path / 'part1.npz'}: error: the inputs file is not an .npz (a zip of .npy "
              "arrays): File is not a zip file")
    assert done.stderr.splitlines() == [f"part1: failed: {reason}"]
    assert "2 shards: 1 done, 0 already done, 1 failed" in done.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["shards"]["part1"]["status"] == "failed"
    assert manifest["shards"]["part1"]["error"] == reason
    assert sorted(os.listdir(out)) == ["manifest.json", "part0.npz"]


def test_reduce_readme_is_never_written_through_a_planted_link(tmp_path):
    from irrun.tools.surgery import Reduced, write_repro

    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    for name in ("model.xml", "model.bin", "inputs.npz"):
        shutil.copy(RESNETISH / name, tmp_path / name)
    (tmp_path / "README.txt").symlink_to(target)
    write_repro(str(tmp_path), Reduced(str(tmp_path / "model.xml"),
                                       str(tmp_path / "inputs.npz"), 3, 1), "irrun ...")
    assert target.read_text() == "keep me"
    assert "irrun reduce" in (tmp_path / "README.txt").read_text()


def test_escaped_commas_in_tensor_names_are_openvinos(tmp_path):
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as ops

    p = ops.parameter([2], np.float32, name="x")
    r = ops.relu(p)
    r.output(0).get_tensor().set_names({"y,z", "a\\b"})
    xml = tmp_path / "esc.xml"
    ov.save_model(ov.Model([r], [p], "m"), xml)
    theirs = ov.Core().read_model(xml).outputs[0].get_names()
    m = irrun.read_model(xml)
    assert set(m.outputs[0].names) == set(theirs) == {"y,z", "a\\b"}
    out = tmp_path / "again.xml"
    irrun.save_model(m, out)
    assert set(ov.Core().read_model(out).outputs[0].get_names()) == {"y,z", "a\\b"}


def test_a_layer_with_100000_attributes_is_refused_unread(tmp_path):
    """libxml2 finds each attribute's value by scanning the element's attributes: reading
    100,000 of them took minutes. They are counted (one pass) and refused, located."""
    attrs = " ".join(f'a{i}="{i}"' for i in range(100_000))
    xml = tmp_path / "attrs.xml"
    xml.write_text(
        '<?xml version="1.0"?>\n<net name="x" version="11"><layers>\n'
        f'<layer id="0" name="x" type="Parameter" version="opset1"><data shape="2" '
        f'element_type="f32" {attrs}/>\n'
        '<output><port id="0" precision="FP32" names="x"><dim>2</dim></port></output></layer>\n'
        '<layer id="1" name="y" type="Result" version="opset1"><input><port id="0" '
        'precision="FP32"><dim>2</dim></port></input></layer>\n'
        '</layers><edges><edge from-layer="0" from-port="0" to-layer="1" to-port="0"/></edges>'
        '</net>\n')
    done = subprocess.run([sys.executable, "-m", "irrun", "validate", str(xml)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert (f"{xml}:3: error: layer 'x' (Parameter-opset1): <data> has 100002 attributes; "
            "no op has more than a few dozen (irrun reads at most 1024)") in done.stdout
