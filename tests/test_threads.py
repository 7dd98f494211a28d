"""irrun's thread policy: BLAS at one thread during loads and runs (and as the user left it
after), the pool never waiting for a thread that has not started, large products split over
the pool with np.matmul's results, and the thread count from IRRUN_THREADS, --threads and
read_model(threads=N). Speed itself is measured in bench/models.py, never here."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
from click.testing import CliRunner
from threadpoolctl import threadpool_info

import irrun
from irrun.config import config, pinned, quota_cpus, usable_cpus
from irrun.ir import registry
from irrun.opkit import TensorSpec, matmul, parallel, register
from irrun.opkit import pool
from irrun.ui.cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRNN = os.path.join(ROOT, "models", "crnn", "model.xml")


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


SEEN: list = []


@dataclass(frozen=True)
class _NoAttrs:
    pass


@pytest.fixture()
def probe_op():
    """A custom op that records, while it runs, BLAS's thread count and irrun's setting."""

    @register("ThreadProbe", version="extension", attrs=_NoAttrs)
    class ThreadProbe:
        @staticmethod
        def infer(attrs, x: TensorSpec) -> list[TensorSpec]:
            return [TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            SEEN.append((tuple(blas_threads()), config().threads))
            return (x.copy(),)

    SEEN.clear()
    yield
    registry.unregister("ThreadProbe", version="extension")


def probe_xml(tmp_path) -> str:
    text = """<?xml version="1.0"?>
<net name="probe" version="11"><layers>
<layer id="0" name="x" type="Parameter" version="opset1"><data shape="2" element_type="f32"/>
<output><port id="0" precision="FP32" names="x"><dim>2</dim></port></output></layer>
<layer id="1" name="p" type="ThreadProbe" version="extension">
<input><port id="0" precision="FP32"><dim>2</dim></port></input>
<output><port id="1" precision="FP32" names="y"><dim>2</dim></port></output></layer>
<layer id="2" name="y" type="Result" version="opset1">
<input><port id="0" precision="FP32"><dim>2</dim></port></input></layer>
</layers><edges>
<edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
<edge from-layer="1" from-port="1" to-layer="2" to-port="0"/>
</edges></net>
"""
    path = tmp_path / "probe.xml"
    path.write_text(text)
    return str(path)


X = {"x": np.ones(2, np.float32)}


def test_blas_runs_one_thread_during_a_run_and_is_given_back(probe_op, tmp_path):
    from threadpoolctl import threadpool_limits

    if not blas_threads():
        pytest.skip("NumPy has no BLAS library that threadpoolctl can see")
    with threadpool_limits(limits=3, user_api="blas"):
        m = irrun.read_model(probe_xml(tmp_path))
        m.infer(X)
        assert all(n == 3 for n in blas_threads())      # the user's count, given back
    (blas_during, _), = SEEN
    assert set(blas_during) == {1}


def test_a_blas_library_loaded_after_the_first_run_is_held_at_one_thread_too(
        probe_op, tmp_path):
    # SciPy links its own OpenBLAS: imported after irrun first looked for BLAS libraries, it
    # must still be held at one thread during a run (a cached list of libraries missed it).
    m = irrun.read_model(probe_xml(tmp_path))
    m.infer(X)
    pytest.importorskip("scipy.linalg")
    if len(blas_threads()) < 2:
        pytest.skip("SciPy shares NumPy's BLAS library here")
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        m.infer(X)
        assert all(n == 2 for n in blas_threads())
    assert set(SEEN[-1][0]) == {1}


def test_read_model_threads_is_the_setting_of_its_runs(probe_op, tmp_path):
    m = irrun.read_model(probe_xml(tmp_path), threads=1)
    m.infer(X)
    assert SEEN[-1][1] == 1
    other = irrun.read_model(probe_xml(tmp_path), threads=3)
    other.infer(X)
    assert SEEN[-1][1] == 3
    m.infer(X)                                          # each model keeps its own
    assert SEEN[-1][1] == 1
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(irrun.IrrunError, match="is not a thread count"):
            irrun.read_model(probe_xml(tmp_path), threads=bad)


def test_default_is_the_cpus_this_process_may_use(monkeypatch):
    monkeypatch.delenv("IRRUN_THREADS", raising=False)
    assert config().threads == usable_cpus()
    if hasattr(os, "sched_getaffinity"):
        assert usable_cpus() <= len(os.sched_getaffinity(0))
    monkeypatch.setenv("IRRUN_THREADS", "3")
    assert config().threads == 3
    with pinned(threads=1):
        assert config().threads == 1


@pytest.mark.parametrize("text, cpus", [
    ("max 100000", None), ("200000 100000", 2), ("150000 100000", 1), ("50000 100000", 1),
    ("-1 100000", None), ("", None), ("400000 100000\n", 4), ("100000 0", None)])
def test_a_cgroup_quota_caps_the_cpus(text, cpus):
    assert quota_cpus(text) == cpus


def test_threads_option_on_the_command_line(probe_op, tmp_path, monkeypatch):
    monkeypatch.delenv("IRRUN_THREADS", raising=False)
    xml = probe_xml(tmp_path)
    np.savez(tmp_path / "in.npz", **X)
    for args in (["--threads", "1", xml], [xml, "--threads", "1"]):
        SEEN.clear()
        result = CliRunner().invoke(cli, args + ["-i", str(tmp_path / "in.npz")])
        assert result.exit_code == 0, result.output
        assert SEEN[-1][1] == 1
        monkeypatch.delenv("IRRUN_THREADS", raising=False)
    bad = CliRunner().invoke(cli, [xml, "--threads", "0"])
    assert bad.exit_code == 2 and "--threads" in bad.output


def test_parallel_does_not_wait_for_a_thread_that_has_not_started(monkeypatch):
    """With the pool's only thread held elsewhere (a busy machine, in effect), the calling
    thread takes every range itself and returns; nothing waits for the held thread."""
    monkeypatch.setenv("IRRUN_THREADS", "2")
    release = threading.Event()
    held = pool.submit(release.wait, 10)
    try:
        t0 = time.monotonic()
        ranges = [(i,) for i in range(8)]
        assert parallel(lambda i: (i, threading.get_ident()), ranges) == [
            (i, threading.get_ident()) for i in range(8)]
        assert time.monotonic() - t0 < 5
    finally:
        release.set()
        held.result()


def test_parallel_spreads_over_the_pool_and_raises_the_first_error(monkeypatch,
                                                                    fresh_join_judgement):
    monkeypatch.setenv("IRRUN_THREADS", "2")
    start = threading.Barrier(2, timeout=10)

    def meet(i):
        if i < 2:
            start.wait()        # both threads must take one of the first two ranges
        return threading.get_ident()
    idents = parallel(meet, [(i,) for i in range(6)])
    assert len(set(idents[:2])) == 2

    def fail(i):
        if i == 3:
            raise ValueError("range 3")
        return i
    with pytest.raises(ValueError, match="range 3"):
        parallel(fail, [(i,) for i in range(6)])
    monkeypatch.setenv("IRRUN_THREADS", "1")
    assert set(parallel(lambda i: threading.get_ident(), [(i,) for i in range(4)])) == {
        threading.get_ident()}


SHAPES = [((3, 1, 64, 96), (4, 96, 80)), ((1, 96), (96, 1000)), ((300, 200), (200, 150)),
          ((2, 200, 64), (64, 300)), ((64, 48), (5, 48, 640)), ((8, 1, 256), (8, 256, 512)),
          ((7,), (7, 5)), ((4, 7), (7,))]


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("a_shape, b_shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_computes_np_matmul(a_shape, b_shape, dtype, threads, monkeypatch):
    monkeypatch.setattr(pool, "PARALLEL_MATMUL_MACS", 10_000)     # split even these
    monkeypatch.setenv("IRRUN_THREADS", str(threads))
    rng = np.random.default_rng(7)
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    got, want = matmul(a, b), np.matmul(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    # The same dot products; BLAS may order a part's sums differently from the whole's.
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=0, atol=64 * eps * np.abs(want).max())


def test_matmul_of_integers_and_mixed_types_is_np_matmul(monkeypatch):
    monkeypatch.setattr(pool, "PARALLEL_MATMUL_MACS", 1)
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert np.array_equal(matmul(a, a.T), np.matmul(a, a.T))
    f = np.ones((3, 4), np.float32)
    assert matmul(f, f.T.astype(np.float64)).dtype == np.float64


def test_a_model_gives_the_same_outputs_with_one_thread_and_the_default():
    feed = dict(np.load(os.path.join(ROOT, "models", "crnn", "inputs.npz")))
    serial = irrun.read_model(CRNN, threads=1).infer(feed)
    default = irrun.read_model(CRNN).infer(feed)
    for name in serial:
        np.testing.assert_allclose(default[name], serial[name], rtol=1e-6, atol=1e-6)


def test_importing_and_running_leaves_numpys_blas_count_alone():
    """In a fresh process: a user's BLAS setting survives reading and running a model."""
    script = (
        "from threadpoolctl import threadpool_limits, threadpool_info\n"
        "import numpy as np, irrun\n"
        "threadpool_limits(limits=2, user_api='blas')\n"
        f"m = irrun.read_model({CRNN!r})\n"
        f"m.infer(dict(np.load({os.path.join(ROOT, 'models', 'crnn', 'inputs.npz')!r})))\n"
        "print(sorted({l['num_threads'] for l in threadpool_info() if l['user_api'] == 'blas'}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("[2]", "[]"), done.stdout


@pytest.fixture
def fresh_join_judgement(monkeypatch):
    """No busy verdict of an earlier test's splits carried into this one."""
    monkeypatch.setattr(pool, "_serial_until", 0.0)
    monkeypatch.setattr(pool, "_serial_for", pool.SERIAL_AFTER_BUSY_JOIN)


def test_a_join_that_waits_on_a_preempted_thread_keeps_the_next_splits_on_one_thread(
        monkeypatch, fresh_join_judgement):
    """A pool thread that took a range and then did not run (here: sleeps, as one preempted by
    another process would) makes the caller wait at the join far longer than its own ranges
    took: the machine is busy, and the next splits stay on the calling thread until the time
    runs out; then they spread again."""
    monkeypatch.setenv("IRRUN_THREADS", "2")
    monkeypatch.setattr(pool, "SERIAL_AFTER_BUSY_JOIN", 60.0)
    monkeypatch.setattr(pool, "_serial_for", 60.0)
    caller = threading.get_ident()
    helper_started = threading.Event()

    def work(i):
        if threading.get_ident() != caller:
            helper_started.set()
            time.sleep(0.3)
        else:
            helper_started.wait(10)     # so that the pool thread surely takes a range
        return i

    assert pool.threads_now() == 2 and pool.workers(10**9, 1) == 2
    assert parallel(work, [(i,) for i in range(4)]) == [0, 1, 2, 3]
    assert pool.threads_now() == 1 and pool.workers(10**9, 1) == 1
    assert set(parallel(lambda i: threading.get_ident(), [(i,) for i in range(4)])) == {caller}
    monkeypatch.setattr(pool, "_serial_until", time.perf_counter() - 1)   # the time is up
    assert pool.threads_now() == 2


def test_a_split_whose_threads_all_ran_keeps_the_pool(monkeypatch, fresh_join_judgement):
    """A join on threads that ran alongside the caller (the barrier proves both were running)
    gives no busy verdict."""
    monkeypatch.setenv("IRRUN_THREADS", "2")
    start = threading.Barrier(2, timeout=10)
    parallel(lambda i: start.wait(), [(0,), (1,)])
    assert pool.threads_now() == 2


def test_a_split_whose_caller_hardly_ran_keeps_the_next_splits_on_one_thread(
        monkeypatch, fresh_join_judgement):
    """Both threads end together, but the caller was on a CPU for a fraction of its own
    ranges' time (here its ranges sleep, as a thread preempted by other processes, or one
    waiting for the GIL behind such a thread, would): every thread of the split ran slowly,
    and the next splits stay on the calling thread."""
    monkeypatch.setenv("IRRUN_THREADS", "2")
    start = threading.Barrier(2, timeout=10)

    def work(i):
        start.wait()
        time.sleep(20 * pool.BUSY_MIN_SECONDS)
        return i

    assert parallel(work, [(0,), (1,)]) == [0, 1]
    assert pool.threads_now() == 1
