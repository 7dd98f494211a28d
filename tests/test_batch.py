"""`irrun batch` on a dask.distributed LocalCluster of two worker processes: outputs equal to
serial runs, the model read once per worker, a killed worker, an interrupted batch resumed,
Ctrl-C, a corrupt shard failing alone, a shard failing for its input tried once, Parquet
shards and their every problem located, and map_blocks over a dask.array."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
from irrun.run.model import PortInfo
from irrun.tools.batching import batch, map_blocks, model_reads
from irrun.ui.cli import cli

distributed = pytest.importorskip("distributed")

CTR = Path(__file__).resolve().parent.parent / "models" / "ctr_wide_deep" / "model.xml"


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=40) as c, Client(c) as client:
        yield c, client


def ctr_shards(directory: Path, n: int) -> list[str]:
    """n shards of the CTR model's inputs: the sample ids, perturbed numeric features."""
    base = dict(np.load(CTR.with_name("inputs.npz")))
    rng = np.random.default_rng(3)
    paths = []
    for i in range(n):
        feed = dict(base)
        feed["numeric"] = (base["numeric"] + rng.normal(0, 1, base["numeric"].shape)).astype(np.float32)
        feed["cat_weights"] = rng.uniform(0, 2, 16).astype(np.float32)
        path = directory / f"shard{i:02d}.npz"
        np.savez(path, **feed)
        paths.append(str(path))
    return paths


def serial(model_path, shard):
    return irrun.read_model(model_path).infer(dict(np.load(shard)))


def test_sixteen_shards_equal_serial_runs_and_read_the_model_once_per_worker(cluster, tmp_path):
    _, client = cluster
    shards = ctr_shards(tmp_path, 16)
    out = tmp_path / "out"
    result = batch(CTR, shards, out, client=client)
    assert result.ok and sorted(result.done) == [f"shard{i:02d}" for i in range(16)]
    for shard in shards:
        got = np.load(out / (Path(shard).stem + ".npz"))
        for name, want in serial(CTR, shard).items():
            np.testing.assert_array_equal(got[name], want)
    reads = client.run(model_reads, str(CTR))
    assert len(reads) == 2 and all(r <= 1 for r in reads.values()) and sum(reads.values()) >= 1
    manifest = json.loads((out / "manifest.json").read_text())
    entry = manifest["shards"]["shard00"]
    assert entry["status"] == "done" and len(entry["digest"]) == 64 and entry["seconds"] > 0


SLOW_OP = textwrap.dedent('''\
    import time
    from irrun.opkit import TensorSpec, register


    @register("SlowIdentity", version="extension")
    class SlowIdentity:
        @staticmethod
        def infer(attrs, x):
            return [TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            time.sleep(0.4)
            return (x.copy(),)
    ''')

SLOW_XML = textwrap.dedent("""\
    <?xml version="1.0"?>
    <net name="slow" version="11">
      <layers>
        <layer id="0" name="x" type="Parameter" version="opset1">
          <data shape="3" element_type="f32"/>
          <output><port id="0" precision="FP32" names="x"><dim>3</dim></port></output>
        </layer>
        <layer id="1" name="slow" type="SlowIdentity" version="extension">
          <input><port id="0" precision="FP32"><dim>3</dim></port></input>
          <output><port id="1" precision="FP32" names="y"><dim>3</dim></port></output>
        </layer>
        <layer id="2" name="y" type="Result" version="opset1">
          <input><port id="0" precision="FP32"><dim>3</dim></port></input>
        </layer>
      </layers>
      <edges>
        <edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
        <edge from-layer="1" from-port="1" to-layer="2" to-port="0"/>
      </edges>
    </net>
    """)


def slow_model(tmp_path, n):
    (tmp_path / "slow.xml").write_text(SLOW_XML)
    (tmp_path / "slow_ops.py").write_text(SLOW_OP)
    shards = []
    for i in range(n):
        path = tmp_path / f"s{i:02d}.npz"
        np.savez(path, x=np.full(3, i, np.float32))
        shards.append(str(path))
    return tmp_path / "slow.xml", tmp_path / "slow_ops.py", shards


def test_a_worker_killed_mid_run_loses_nothing(cluster, tmp_path):
    _, client = cluster
    xml, ext, shards = slow_model(tmp_path, 8)
    killed = []

    def kill_once(name, entry):
        # Kill the worker that ran the first shard while it works on its next one.
        if not killed:
            killed.append(entry["pid"])
            os.kill(entry["pid"], signal.SIGKILL)

    result = batch(xml, shards, tmp_path / "out", client=client, extensions=[ext],
                   on_result=kill_once)
    assert killed and result.ok, result.manifest
    assert sorted(result.done) == [f"s{i:02d}" for i in range(8)]
    for i in range(8):
        np.testing.assert_array_equal(np.load(tmp_path / "out" / f"s{i:02d}.npz")["y"],
                                      np.full(3, i, np.float32))
    client.wait_for_workers(2, timeout=60)     # the nanny restarts it for the next tests


def test_an_interrupted_batch_resumed_finishes_only_the_missing_shards(cluster, tmp_path):
    _, client = cluster
    shards = ctr_shards(tmp_path, 16)
    out = tmp_path / "out"
    seen = []

    def stop_after_five(name, entry):
        seen.append(name)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        batch(CTR, shards, out, client=client, on_result=stop_after_five)
    manifest = json.loads((out / "manifest.json").read_text())
    done_first = sorted(n for n, e in manifest["shards"].items() if e["status"] == "done")
    assert done_first == sorted(seen)
    stamps = {n: os.stat(out / f"{n}.npz").st_mtime_ns for n in done_first}
    result = batch(CTR, shards, out, client=client)
    assert sorted(result.skipped) == done_first
    assert sorted(result.done) == sorted(set(Path(s).stem for s in shards) - set(done_first)), result.manifest
    assert {n: os.stat(out / f"{n}.npz").st_mtime_ns for n in done_first} == stamps
    # A changed shard runs again, even though its name is done.
    np.savez(shards[0], **{**dict(np.load(shards[0])), "cat_weights": np.ones(16, np.float32)})
    again = batch(CTR, shards, out, client=client)
    assert again.done == ["shard00"] and len(again.skipped) == 15


WAIT_OP = textwrap.dedent('''\
    import os
    import time

    from irrun.opkit import TensorSpec, register


    @register("WaitOnOnes", version="extension")
    class WaitOnOnes:
        @staticmethod
        def infer(attrs, x):
            return [TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            if (x == 1).any():
                # Say that this shard runs, then wait until the test has sent Ctrl-C.
                open({running!r}, "w").close()
                for _ in range(6000):
                    if os.path.exists({release!r}):
                        break
                    time.sleep(0.05)
            return (x.copy(),)
    ''')


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_ctrl_c_stops_at_once_and_leaves_a_true_manifest(tmp_path, scheduler):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while a shard runs,
    which then finishes: irrun exits 130, and a shard is done in the manifest only if its
    output is there; the running one is pending, with no output or partial file. (Before,
    the batch waited for the running shard, which then wrote its output after the manifest
    had called it pending.)"""
    import subprocess
    import sys

    xml, _, shards = slow_model(tmp_path, 3)
    xml.write_text(SLOW_XML.replace("SlowIdentity", "WaitOnOnes"))
    running, release = tmp_path / "running", tmp_path / "release"
    ext = tmp_path / "wait_ops.py"
    ext.write_text(WAIT_OP.format(running=str(running), release=str(release)))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "irrun", "--extension", str(ext), "batch",
                             str(xml), *shards, "--out", str(out), "--workers", "1",
                             "--scheduler", scheduler], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120        # a hang guard, not a measurement
        while not running.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running.exists(), proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)
        release.touch()
        _, stderr = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines() == ["irrun: interrupted"]
    entries = json.loads((out / "manifest.json").read_text())["shards"]
    assert entries["s01"]["status"] == "pending"
    done = sorted(n for n, e in entries.items() if e["status"] == "done")
    assert set(done) <= {"s00", "s02"}
    assert all(entries[n]["status"] == "pending" for n in {"s00", "s02"} - set(done))
    assert sorted(os.listdir(out)) == ["manifest.json"] + [f"{n}.npz" for n in done]


def test_a_corrupt_shard_fails_alone_with_a_clear_message(cluster, tmp_path):
    c, _ = cluster
    shards = ctr_shards(tmp_path, 4)
    Path(shards[2]).write_bytes(b"not a zip file at all")
    out = tmp_path / "out"
    clients = set(c.scheduler.clients)
    r = CliRunner().invoke(cli, ["batch", str(CTR), *shards, "--out", str(out),
                                 "--scheduler", c.scheduler_address, "--retries", "1"])
    # The batch's own client is closed (the scheduler hears of it soon after).
    deadline = time.monotonic() + 30
    while set(c.scheduler.clients) != clients and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(c.scheduler.clients) == clients
    assert r.exit_code == 1, r.output
    assert f"shard02: failed: {shards[2]}: error: the inputs file is not an .npz" in r.output
    assert "4 shards: 3 done, 0 already done, 1 failed" in r.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["shards"]["shard02"]["status"] == "failed"
    assert {n for n, e in manifest["shards"].items() if e["status"] == "done"} == \
        {"shard00", "shard01", "shard03"}
    assert not (out / "shard02.npz").exists()


FAILING_OP = textwrap.dedent('''\
    from irrun.errors import OpError
    from irrun.opkit import TensorSpec, register


    @register("RefuseOnes", version="extension")
    class RefuseOnes:
        @staticmethod
        def infer(attrs, x):
            return [TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            if (x == 1).any():
                with open({tries!r}, "a") as f:
                    f.write("tried\\n")
                raise OpError("x holds a 1")
            return (x.copy(),)
    ''')


def test_a_shard_failing_for_its_input_is_tried_once_and_keeps_its_reason(cluster, tmp_path):
    """A layer's OpError on a shard's values. (Before, the task raised it, and Dask's
    serialisation of it never ended, since the executor makes a located error its own
    __cause__: the batch hung.)"""
    _, client = cluster
    tries = tmp_path / "tries.txt"
    xml, _, shards = slow_model(tmp_path, 3)
    xml.write_text(SLOW_XML.replace("SlowIdentity", "RefuseOnes"))
    ext = tmp_path / "refuse_ops.py"
    ext.write_text(FAILING_OP.format(tries=str(tries)))
    result = batch(xml, shards, tmp_path / "out", client=client, extensions=[ext], retries=2)
    assert result.failed == ["s01"] and sorted(result.done) == ["s00", "s02"]
    # The same input fails the same way: no retry.
    assert tries.read_text() == "tried\n"
    entry = json.loads((tmp_path / "out" / "manifest.json").read_text())["shards"]["s01"]
    assert entry["status"] == "failed"
    assert entry["error"] == (f"{xml}:8: error: layer 'slow' (RefuseOnes-extension): x holds a 1")


def test_parquet_shards_map_columns_and_ragged_lists(cluster, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    _, client = cluster
    feed = dict(np.load(CTR.with_name("inputs.npz")))
    seg = feed["cat_segments"]
    rows = feed["numeric"].shape[0]
    ids = [feed["cat_ids"][seg == r].tolist() for r in range(rows)]
    weights = [feed["cat_weights"][seg == r].tolist() for r in range(rows)]
    table = pa.table({"numeric": [list(map(float, r)) for r in feed["numeric"]],
                      "cat_ids": ids, "cat_weights": weights})
    pq.write_table(table, tmp_path / "day1.parquet")
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["batch", str(CTR), str(tmp_path / "day1.parquet"), "--out",
                                 str(out), "--scheduler", client.scheduler.address,
                                 "--segment-ids", "cat_segments=cat_ids"])
    assert r.exit_code == 0, r.output
    want = irrun.read_model(CTR).infer(feed)["score"]
    np.testing.assert_array_equal(np.load(out / "day1.npz")["score"], want)


def test_map_blocks_over_a_dask_array(tmp_path):
    da = pytest.importorskip("dask.array")
    xml = tmp_path / "sig.xml"
    xml.write_text(SLOW_XML.replace('type="SlowIdentity" version="extension"',
                                    'type="Sigmoid" version="opset1"')
                   .replace('shape="3"', 'shape="?,3"')
                   .replace("<dim>3</dim>", "<dim>-1</dim><dim>3</dim>"))
    x = np.linspace(-3, 3, 30, dtype=np.float32).reshape(10, 3)
    y = map_blocks(xml, da.from_array(x, chunks=(4, 3))).compute(scheduler="threads")
    np.testing.assert_array_equal(y, irrun.read_model(xml).infer({"x": x})["y"])


def test_batch_without_dask_says_how_to_install(monkeypatch, tmp_path):
    import builtins

    real = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    r = CliRunner().invoke(cli, ["batch", str(CTR), str(tmp_path / "x.npz"), "--out",
                                 str(tmp_path / "out")])
    assert r.exit_code == 1
    assert "pip install 'irrun[batch]'" in r.output


# ---------------------------------------------------------------- hostile Parquet shards

def ctr_columns() -> dict:
    """The CTR sample inputs as Parquet columns: numeric as lists of 4, the ids and weights
    as lists of varying length (one list per row)."""
    feed = dict(np.load(CTR.with_name("inputs.npz")))
    seg = feed["cat_segments"]
    rows = feed["numeric"].shape[0]
    return {"numeric": [list(map(float, r)) for r in feed["numeric"]],
            "cat_ids": [feed["cat_ids"][seg == r].tolist() for r in range(rows)],
            "cat_weights": [feed["cat_weights"][seg == r].tolist() for r in range(rows)]}


def write_parquet(path, columns: dict) -> str:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({k: v for k, v in columns.items() if v is not None}), path)
    return str(path)


def read_ctr_shard(path, **kwargs):
    from irrun.tools.batching import read_parquet_shard

    return read_parquet_shard(str(path), irrun.read_model(CTR).inputs, **kwargs)


def _ragged(rows):
    """Lists of varying length: row r has r % 3 + 1 numbers."""
    return [[float(r)] * (r % 3 + 1) for r in range(rows)]


def _pa(name, *args):
    pa = pytest.importorskip("pyarrow")
    return getattr(pa, name)(*args)


PARQUET_PROBLEMS = {
    "strings for numbers": (
        lambda c: {**c, "numeric": [["a", "b", "c", "d"]] * 10},
        "column 'numeric' (list<element: string>) for input 'numeric': holds strings; "
        "expected f32[?,4]"),
    "floats for integer ids": (
        lambda c: {**c, "cat_ids": [[float(x) for x in r] for r in c["cat_ids"]]},
        "column 'cat_ids' (list<element: double>) for input 'cat_ids': got float64 values for "
        "an integer input (it would truncate them); expected i32[16]"),
    "an id out of i32": (
        lambda c: {**c, "cat_ids": [[1 << 40] + c["cat_ids"][0][1:]] + c["cat_ids"][1:]},
        "column 'cat_ids' (list<element: int64>) for input 'cat_ids': value 1099511627776 is "
        "out of the range of i32"),
    "a missing column": (
        lambda c: {**c, "cat_weights": None},
        "the shard has no column for input 'cat_weights' (f32[16]); its columns: numeric, "
        "cat_ids"),
    "numbers where lists of 4 are expected": (
        lambda c: {**c, "numeric": [r[0] for r in c["numeric"]]},
        "column 'numeric' (double) for input 'numeric': got rank 1 (shape [10]), expected "
        "rank 2; expected f32[?,4] (an input of rank 2 takes a column of equal-length lists, "
        "one list per row)"),
    "lists of varying length where lists of 4 are expected": (
        lambda c: {**c, "numeric": _ragged(10)},
        "column 'numeric' (list<element: double>) for input 'numeric': got rank 1 (shape [19]), "
        "expected rank 2; expected f32[?,4] (its lists differ in length: row 0 has 1 value, "
        "row 1 has 2 values)"),
    "lists of lists": (
        lambda c: {**c, "numeric": [[r] for r in c["numeric"]]},
        "column 'numeric' (list<element: list<element: double>>) for input 'numeric': irrun "
        "takes a column of numbers (or strings), or of lists of them"),
    "a struct column": (
        lambda c: {**c, "numeric": [{"a": 1.0}] * 10},
        "column 'numeric' (struct<a: double>) for input 'numeric': irrun takes a column of "
        "numbers (or strings), or of lists of them"),
    "a null number": (
        lambda c: {**c, "numeric": c["numeric"][:3] + [[1.0, None, 2.0, 3.0]] + c["numeric"][4:]},
        "column 'numeric' row 3 (from 0), element 1 is null; irrun takes no missing values "
        "(fill or drop them before writing the shard: docs/batch.md)"),
    "a null row": (
        lambda c: {**c, "cat_weights": c["cat_weights"][:7] + [None] + c["cat_weights"][8:]},
        "column 'cat_weights' row 7 (from 0) is null; irrun takes no missing values"),
}


@pytest.mark.parametrize("problem", PARQUET_PROBLEMS)
def test_a_parquet_problem_is_one_located_error(tmp_path, problem):
    change, message = PARQUET_PROBLEMS[problem]
    path = write_parquet(tmp_path / "day1.parquet", change(ctr_columns()))
    with pytest.raises(irrun.IrrunError) as e:
        read_ctr_shard(path, segment_ids={"cat_segments": "cat_ids"})
    assert f"{path}: error: {message}" in str(e.value)


def test_a_null_in_a_number_column_is_refused_not_nan(tmp_path):
    # Before, the null became NaN (a score computed from a made-up value).
    numbers = [float(i) if i != 4 else None for i in range(10)]
    path = write_parquet(tmp_path / "day1.parquet", {"numeric": numbers})
    from irrun.tools.batching import read_parquet_shard

    inputs = [PortInfo("numeric", ("numeric",), "f32", None, "numeric")]
    with pytest.raises(irrun.FeedError) as e:
        read_parquet_shard(path, inputs)
    assert f"{path}: error: column 'numeric' row 4 (from 0) is null" in str(e.value)


def test_a_shard_that_is_not_parquet_says_so(tmp_path):
    good = write_parquet(tmp_path / "good.parquet", ctr_columns())
    data = Path(good).read_bytes()
    cases = {"garbage.parquet": b"PAR1 not parquet at all",
             "truncated.parquet": data[:len(data) // 2]}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(irrun.ReadError) as e:
            read_ctr_shard(tmp_path / name)
        assert f"{tmp_path / name}: error: not a Parquet file (or its footer is damaged): " \
            in str(e.value)
    damaged = bytearray(data)
    damaged[4:40] = bytes(b ^ 0x5A for b in damaged[4:40])     # the first page's header
    (tmp_path / "damaged.parquet").write_bytes(damaged)
    with pytest.raises(irrun.ReadError) as e:
        read_ctr_shard(tmp_path / "damaged.parquet", segment_ids={"cat_segments": "cat_ids"})
    assert f"{tmp_path / 'damaged.parquet'}: error: column 'numeric' cannot be decoded: " \
        in str(e.value)
    with pytest.raises(irrun.ReadError) as e:
        read_ctr_shard(tmp_path / "absent.parquet")
    assert f"{tmp_path / 'absent.parquet'}: error: cannot read the Parquet shard: No such file" \
        in str(e.value)


def test_equal_length_lists_for_a_rank_1_input_are_concatenated(tmp_path):
    # Two ids on every row: the lists are equal in length, yet cat_ids is one 1-D input.
    columns = ctr_columns()
    ids = np.concatenate(columns["cat_ids"]).astype(np.int32)
    columns["cat_ids"] = [ids[2 * r:2 * r + 2].tolist() for r in range(8)]
    columns["cat_weights"] = [[0.5, 1.5]] * 8
    columns["numeric"] = columns["numeric"][:8]
    feed = read_ctr_shard(write_parquet(tmp_path / "pairs.parquet", columns),
                          segment_ids={"cat_segments": "cat_ids"})
    np.testing.assert_array_equal(feed["cat_ids"], ids)
    np.testing.assert_array_equal(feed["cat_segments"], np.repeat(np.arange(8), 2))
    assert feed["numeric"].shape == (8, 4) and feed["cat_weights"].shape == (16,)


def test_a_parquet_shard_past_the_budget_is_refused_from_its_metadata(tmp_path, monkeypatch):
    """2M rows of 4 zeros compress to a few kilobytes and decode to 32 MB: refused from the
    row count in the file's metadata, before any data is read."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = 2_000_000
    path = tmp_path / "bomb.parquet"
    values = pa.array(np.zeros(4 * rows, np.float32))
    pq.write_table(pa.table({"numeric": pa.FixedSizeListArray.from_arrays(values, 4)}), path,
                   compression="zstd")
    assert path.stat().st_size < 200_000

    def no_data(*args, **kwargs):
        raise AssertionError("the data was read")

    for name in ("read", "read_row_group", "read_row_groups", "iter_batches"):
        monkeypatch.setattr(pq.ParquetFile, name, no_data)
    monkeypatch.setattr(pq, "read_table", no_data)
    monkeypatch.setenv("IRRUN_MAX_BYTES", "16M")
    from irrun.tools.batching import read_parquet_shard

    with pytest.raises(irrun.ResourceError) as e:
        read_parquet_shard(str(path), irrun.read_model(CTR).inputs[:1])    # numeric: f32[?,4]
    assert (f"{path}: error: column 'numeric' holds {4 * rows} values in {rows} rows: "
            f"{4 * rows * 8} bytes to decode and convert to f32, more than the limit of {16 << 20} "
            "bytes (IRRUN_MAX_BYTES)") in str(e.value)


def test_a_batch_axis_past_a_list_columns_axes_is_refused(tmp_path):
    path = write_parquet(tmp_path / "day1.parquet", ctr_columns())
    with pytest.raises(irrun.FeedError) as e:
        read_ctr_shard(path, batch_axis=2, segment_ids={"cat_segments": "cat_ids"})
    assert (f"{path}: error: column 'numeric': --batch-axis 2 is past its axes (its rows and "
            "each row's list: 0 or 1)") in str(e.value)
