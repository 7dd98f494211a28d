"""The command line through click's CliRunner: run, info, ops, help, error lines."""
import os
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
import irrun.run.model  # noqa: F401  (monkeypatched below; the package loads it lazily)
from irrun.ui.cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CTR = os.path.join(ROOT, "models", "ctr_wide_deep")


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_run_exact_form_prints_outputs():
    r = run(os.path.join(CTR, "model.xml"), "--inputs", os.path.join(CTR, "inputs.npz"))
    assert r.exit_code == 0, r.output
    assert r.output.startswith("score: float32[10, 1]")


def test_run_writes_npz_keyed_by_output_name(tmp_path):
    out = tmp_path / "out.npz"
    r = run(os.path.join(CTR, "model.xml"), "--inputs", os.path.join(CTR, "inputs.npz"),
            "--output", str(out))
    assert r.exit_code == 0, r.output
    with np.load(out) as got, np.load(os.path.join(CTR, "expected.npz")) as want:
        assert sorted(got.files) == sorted(want.files) == ["score"]
        np.testing.assert_allclose(got["score"], want["score"], rtol=1e-5, atol=1e-6)


def test_run_without_inputs_uses_the_shipped_sample(tmp_path):
    r = run(os.path.join(CTR, "model.xml"))
    assert r.exit_code == 0, r.output
    assert r.output.startswith("score:")


def test_run_without_inputs_lists_what_is_needed(tmp_path):
    for name in ("model.xml", "model.bin"):
        shutil.copy(os.path.join(CTR, name), tmp_path / name)
    r = run(str(tmp_path / "model.xml"))
    assert r.exit_code == 1
    assert "no --inputs given" in r.output and "numeric: f32[?,4]" in r.output
    assert "Traceback" not in r.output


def test_python_module_and_subcommand_forms_agree():
    a = run(os.path.join(CTR, "model.xml"))
    b = run("run", os.path.join(CTR, "model.xml"))
    assert a.output == b.output


def test_info_lists_inputs_outputs_ops_and_opsets():
    r = run("info", os.path.join(CTR, "model.xml"))
    assert r.exit_code == 0, r.output
    assert "inputs:" in r.output and "numeric: f32[?,4]" in r.output
    assert "score: f32[?,1]" in r.output
    assert "EmbeddingSegmentsSum-3" in r.output and "Bucketize-3" in r.output
    assert "opsets:" in r.output and "opset3" in r.output


def test_ops_lists_the_seed_ops():
    r = run("ops")
    assert r.exit_code == 0
    for label in ("EmbeddingSegmentsSum-3", "Bucketize-3", "CTCGreedyDecoderSeqLen-6"):
        assert label in r.output


@pytest.mark.parametrize("command", [[], ["run"], ["validate"], ["info"], ["ops"], ["graph"]])
def test_every_command_has_help(command):
    r = run(*command, "--help")
    assert r.exit_code == 0
    assert "Usage:" in r.output


def test_missing_model_is_one_line():
    r = run("no/such/model.xml", "--inputs", "x.npz")
    assert r.exit_code != 0
    assert "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_an_irrun_bug_is_one_line_unless_traceback(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(irrun.run.model, "read_model", broken)
    r = run(os.path.join(CTR, "model.xml"))
    assert r.exit_code == 1
    assert r.output.strip() == "error: internal error: RuntimeError: boom (an irrun bug; " \
                               "--traceback shows where)"
    r = run("--traceback", os.path.join(CTR, "model.xml"))
    assert isinstance(r.exception, RuntimeError)
