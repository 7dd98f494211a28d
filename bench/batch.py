"""Throughput of `irrun batch`: shards per second with 1 and 2 local worker processes, and the
per-shard overhead against the model's own time.

    python3 bench/batch.py [--shards 64] [--rows 2000]

Each shard is an .npz of the CTR model's inputs (models/ctr_wide_deep) with `rows` users.
The model's own time is Model.infer on one shard in this process (best of several); the
per-shard overhead is what a worker's wall time per shard adds to it (reading the shard,
writing its outputs and manifest, Dask's scheduling).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import irrun
from irrun.tools.batching import batch

ROOT = Path(__file__).resolve().parent.parent
CTR = ROOT / "models" / "ctr_wide_deep" / "model.xml"


def make_shards(directory: Path, shards: int, rows: int) -> list[str]:
    rng = np.random.default_rng(0)
    base = dict(np.load(CTR.with_name("inputs.npz")))
    paths = []
    for i in range(shards):
        feed = dict(base)
        feed["numeric"] = rng.normal(0, 2, (rows, 4)).astype(np.float32)
        feed["cat_segments"] = np.sort(rng.integers(0, rows, 16)).astype(np.int32)
        path = directory / f"shard{i:04d}.npz"
        np.savez(path, **feed)
        paths.append(str(path))
    return paths


def model_time(shard: str, repeat: int = 20) -> float:
    m = irrun.read_model(CTR)
    feed = dict(np.load(shard))
    m.infer(feed)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        m.infer(feed)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--rows", type=int, default=2000)
    args = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        shards = make_shards(tmp, args.shards, args.rows)
        own = model_time(shards[0])
        print(f"irrun batch: {args.shards} shards of {args.rows} rows of models/ctr_wide_deep "
              f"(model time per shard {own * 1e3:.2f} ms, best of 20)")
        print(f"{'workers':>7}  {'wall s':>7}  {'shards/s':>8}  {'per shard ms':>12}  "
              f"{'overhead ms':>11}")
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None, silence_logs=40) as cluster, \
                    Client(cluster) as client:
                # Warm the workers (imports, the model read) on a batch of its own.
                batch(CTR, shards[:workers], tmp / f"warm{workers}", client=client)
                t0 = time.perf_counter()
                result = batch(CTR, shards, tmp / f"out{workers}", client=client)
                wall = time.perf_counter() - t0
                assert result.ok and len(result.done) == args.shards
            per_shard = wall * workers / args.shards
            print(f"{workers:>7}  {wall:>7.2f}  {args.shards / wall:>8.1f}  "
                  f"{per_shard * 1e3:>12.2f}  {(per_shard - own) * 1e3:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
