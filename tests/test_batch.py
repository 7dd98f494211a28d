"""`irrun batch` on a dask.distributed LocalCluster of two worker processes: outputs equal to
serial runs, the model read once per worker, a killed worker, an interrupted batch resumed, a
corrupt shard failing alone, Parquet shards, and map_blocks over a dask.array."""
from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
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
    assert sorted(result.done) == sorted(set(Path(s).stem for s in shards) - set(done_first))
    assert {n: os.stat(out / f"{n}.npz").st_mtime_ns for n in done_first} == stamps
    # A changed shard runs again, even though its name is done.
    np.savez(shards[0], **{**dict(np.load(shards[0])), "cat_weights": np.ones(16, np.float32)})
    again = batch(CTR, shards, out, client=client)
    assert again.done == ["shard00"] and len(again.skipped) == 15


def test_a_corrupt_shard_fails_alone_with_a_clear_message(cluster, tmp_path):
    c, _ = cluster
    shards = ctr_shards(tmp_path, 4)
    Path(shards[2]).write_bytes(b"not a zip file at all")
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["batch", str(CTR), *shards, "--out", str(out),
                                 "--scheduler", c.scheduler_address, "--retries", "1"])
    assert r.exit_code == 1, r.output
    assert f"shard02: failed: {shards[2]}: error: the inputs file is not an .npz" in r.output
    assert "4 shards: 3 done, 0 already done, 1 failed" in r.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["shards"]["shard02"]["status"] == "failed"
    assert {n for n, e in manifest["shards"].items() if e["status"] == "done"} == \
        {"shard00", "shard01", "shard03"}
    assert not (out / "shard02.npz").exists()


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
