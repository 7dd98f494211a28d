"""A numba cache file cut short (a full disk, a killed process) must not break
EmbeddingSegmentsSum until someone deletes it by hand: irrun says so once and recompiles."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MODEL = Path(__file__).resolve().parent.parent / "models" / "ess_spec" / "model.xml"
SCRIPT = ("import numpy as np, irrun\n"
          f"m = irrun.read_model({str(MODEL)!r})\n"
          f"out = m.infer(dict(np.load({str(MODEL.with_name('inputs.npz'))!r})))\n"
          "print(float(np.asarray(list(out.values())[0]).sum()))\n")


def run(cache: Path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=600)


def test_a_truncated_numba_cache_is_recompiled_once(tmp_path):
    first = run(tmp_path)
    assert first.returncode == 0, first.stderr
    files = [p for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert files, "numba wrote no cache"
    for p in files:
        with open(p, "r+b") as f:
            f.truncate(5)
    second = run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert "could not be read" in second.stderr and "compiling the loop again" in second.stderr
    assert "internal error" not in second.stderr
    third = run(tmp_path)          # the cache was rewritten: no message any more
    assert third.returncode == 0 and "could not be read" not in third.stderr
    assert third.stdout == first.stdout
