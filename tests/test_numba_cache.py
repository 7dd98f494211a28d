"""A numba cache file cut short (a full disk, a killed process) must not break
EmbeddingSegmentsSum until someone deletes it by hand: irrun says so once and recompiles."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# An f64 table: the LLVM IR loops take f32 and f16 ones, so this one runs numba's loop.
SCRIPT = ("import numpy as np\n"
          "from irrun.tools.builder import GraphBuilder\n"
          "g = GraphBuilder('ess')\n"
          "p = [g.parameter('emb', 'f64', [5, 2]), g.parameter('indices', 'i32', [4]),\n"
          "     g.parameter('segment_ids', 'i32', [4])]\n"
          "y = g.op('EmbeddingSegmentsSum', [*p, g.constant(np.array(3, np.int32))],\n"
          "         version='opset3')\n"
          "g.result(y, name='y')\n"
          "feed = {'emb': np.arange(10.0).reshape(5, 2), 'indices': np.array([0, 2, 3, 4], np.int32),\n"
          "        'segment_ids': np.array([0, 0, 2, 2], np.int32)}\n"
          "print(float(g.model().infer(feed)['y'].sum()))\n")


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
