"""Run a model shipped in models/ through the command line, as a user would."""
from __future__ import annotations

import os

import numpy as np
from click.testing import CliRunner

from irrun.ui.cli import cli


def run_cli(model_dir: str, tmp_path) -> tuple[dict, dict]:
    """`irrun MODEL.xml --inputs inputs.npz --output OUT.npz` on the model in `model_dir`:
    (its outputs, the expected.npz beside it), both keyed by output name, with the same keys."""
    out = tmp_path / "out.npz"
    result = CliRunner().invoke(cli, [os.path.join(model_dir, "model.xml"), "--inputs",
                                      os.path.join(model_dir, "inputs.npz"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    with np.load(out) as got, np.load(os.path.join(model_dir, "expected.npz")) as expected:
        got, expected = dict(got), dict(expected)
    assert sorted(got) == sorted(expected)
    return got, expected
