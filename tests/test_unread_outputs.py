"""Outputs nothing reads are not computed where the op can skip them (Plan's every_output,
an op's run_first): MaxPool's indices when only its values go on."""
from __future__ import annotations

import numpy as np
import pytest

from irrun.tools.builder import GraphBuilder
from irrun.run.inspect import Profiler, Progress, Tracer, chain
from irrun.ops.pooling import MaxPool8

POOL = dict(strides=[2, 2], kernel=[3, 3], pads_begin=[1, 1], pads_end=[1, 1],
            index_element_type="i64")


def _pool_model(read_indices: bool):
    g = GraphBuilder("pool")
    x = g.parameter("x", "f32", [1, 2, 7, 7])
    values, indices = g.op("MaxPool", [x], version="opset8", name="pool", outputs=2, **POOL)
    g.result(g.op("ReLU", [values], name="relu"), name="y")
    if read_indices:
        g.result(indices, name="idx")
    return g.model()


@pytest.fixture
def calls(monkeypatch):
    """Which of MaxPool-8's kernels ran."""
    seen = []
    for name in ("run", "run_first"):
        kernel = getattr(MaxPool8, name)

        def spy(attrs, data, _kernel=kernel, _name=name):
            seen.append(_name)
            return _kernel(attrs, data)
        monkeypatch.setattr(MaxPool8, name, staticmethod(spy))
    return seen


def _feed():
    x = np.random.default_rng(0).standard_normal((1, 2, 7, 7)).astype(np.float32)
    x[0, 1, 3, 3] = np.nan
    return {"x": x}


def test_unread_indices_are_not_computed(calls):
    lean = _pool_model(read_indices=False)
    full = _pool_model(read_indices=True)
    got = lean.infer(_feed())["y"]
    assert calls == ["run_first"]
    want = full.infer(_feed())
    assert calls == ["run_first", "run"]
    np.testing.assert_array_equal(got, want["y"])
    assert want["idx"].dtype == np.int64 and want["idx"].shape == (1, 2, 4, 4)


def test_listeners_that_look_at_outputs_get_every_output(calls):
    m = _pool_model(read_indices=False)
    lines = []
    m.infer(_feed(), listener=Tracer(lines.append, 1, m.program))
    assert calls == ["run"]
    assert any("pool" in line and "i64" in line for line in lines), lines
    inter = m.infer(_feed(), intermediate=True)
    assert calls == ["run", "run"] and inter["pool:1"].dtype == np.int64
    # A chain with one listener that reads outputs computes them all.
    m.infer(_feed(), listener=chain(Profiler(), Tracer(lambda line: None, 1, m.program)))
    assert calls == ["run", "run", "run"]


def test_profiling_times_the_run_as_it_is(calls):
    m = _pool_model(read_indices=False)
    rows = m.profile(_feed(), repeat=2)
    assert calls == ["run_first", "run_first"]
    pool = next(r for r in rows if r["name"] == "pool")
    assert [o["dtype"] for o in pool["outputs"]] == ["f32"]
    m.infer(_feed(), listener=chain(Profiler(), Progress(3, None)))
    assert calls[-1] == "run_first"
