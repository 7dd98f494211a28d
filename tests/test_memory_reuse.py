"""A run's freed buffers are reused, not faulted in again at every run (glibc's malloc
thresholds, set once by irrun.ir.weights.reuse_memory; IRRUN_REUSE_MEMORY=0 leaves them)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import irrun

GLIBC = hasattr(os, "confstr") and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")

# A chain of layers whose 2 MB intermediates glibc would otherwise map and unmap at every
# allocation: the page faults per run, after a few warm-up runs, are printed.
SCRIPT = """
import resource, numpy as np
from irrun.tools.builder import GraphBuilder
g = GraphBuilder("big")
x = g.parameter("x", "f32", [512, 1024])
y = x
for i in range(6):
    y = g.op("Multiply", [y, g.constant(np.float32(1.5))], name=f"m{i}")
    y = g.op("Tanh", [y], name=f"t{i}")
g.result(y, name="y")
m = g.model()
feed = {"x": np.ones((512, 1024), np.float32)}
for _ in range(3):
    m.infer(feed)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    m.infer(feed)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


def _faults_per_run(reuse: str) -> float:
    env = dict(os.environ, IRRUN_REUSE_MEMORY=reuse)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    return float(out.stdout.strip())


@pytest.mark.skipif(not GLIBC, reason="the thresholds are glibc's")
def test_buffers_are_reused_between_runs():
    kept, returned = _faults_per_run("1"), _faults_per_run("0")
    # Each 2 MB buffer given back costs 512 faults when it is touched again.
    assert returned > 500, returned
    assert kept < 50, kept


def test_bad_setting_is_a_config_error(monkeypatch):
    from irrun.config import config

    monkeypatch.setenv("IRRUN_REUSE_MEMORY", "yes")
    with pytest.raises(irrun.IrrunError, match="IRRUN_REUSE_MEMORY='yes' is not 0 or 1"):
        config()


# Models with Loop / TensorIterator / If bodies (links from body to layer and back) and
# without; each is run twice, so that its plans per input signature exist too.
FREED_AT_ONCE = ["resnetish", "keras_gru_classifier", "onnx_scan_rnn", "torch_scripted_loop",
                 "ssdlite_detector", "dlrm"]


@pytest.mark.parametrize("name", FREED_AT_ONCE)
def test_a_dropped_model_is_freed_at_once(name):
    """The last reference to a model gone, its weights (the .bin's memory map) and folded
    tensors are freed then, by reference counting: no reference cycle waits for the cyclic
    collector (which left a 47 MB ResNet-18 in memory, and the next load faulting in fresh
    pages, until it happened to run)."""
    import gc
    import weakref

    import numpy as np

    folder = os.path.join(os.path.dirname(__file__), "..", "models", name)
    model = irrun.read_model(os.path.join(folder, "model.xml"))
    feed = dict(np.load(os.path.join(folder, "inputs.npz")))
    model.infer(feed)
    model.infer(feed)
    program = model.program
    gone = [weakref.ref(program), weakref.ref(next(iter(program.nodes.values())))]
    if program.weights is not None:
        gone.append(weakref.ref(program.weights))
    gone += [weakref.ref(body) for node in program.nodes.values() for body in node.bodies]
    del program
    enabled = gc.isenabled()
    gc.disable()
    try:
        del model
        alive = [r() for r in gone if r() is not None]
        assert not alive, f"still alive without a garbage collection: {alive[:3]}"
    finally:
        if enabled:
            gc.enable()
