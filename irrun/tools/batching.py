"""`irrun batch`: score many input shards through one model on Dask (dask.distributed).

One Dask task per shard. Each worker process reads the model once (a per-process cache keyed
by the model files' identity) and keeps it for every shard it is given. Each shard's outputs
are written atomically as `OUT/<shard stem>.npz`; `OUT/manifest.json` records every shard's
status, time, attempts, input digest and error, and is rewritten (atomically) as shards
finish, so an interrupted batch leaves a manifest that a rerun of the same command reads to
skip the shards already done with the same input digest (and the same model).

A shard is an `.npz` of inputs keyed by input name, or a Parquet file whose columns are the
inputs, one row per sample along the batch axis (see `read_parquet_shard`).

Dask and pyarrow are an optional extra: `pip install irrun[batch]`.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import IrrunError, ReadError
from ..ir.etypes import element_type
from ..run.feed import write_text

MANIFEST = "manifest.json"
MANIFEST_EVERY = 0.5     # seconds between manifest rewrites while shards finish
_SCHEDULERS = ("threads", "processes")


def _need_dask():
    try:
        import dask  # noqa: F401
        import distributed  # noqa: F401
    except ImportError:
        raise IrrunError("irrun batch runs on Dask, which is not installed: "
                         "pip install 'irrun[batch]' (dask[distributed] and pyarrow)",
                         code="missing-extra") from None


# ---------------------------------------------------------------- digests and shards

def file_digest(*paths) -> str:
    """sha256 over the bytes of the given files, in order."""
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def model_files(model_path: str) -> list[str]:
    xml = os.path.abspath(model_path)
    bin_path = os.path.splitext(xml)[0] + ".bin"
    return [xml] + ([bin_path] if os.path.exists(bin_path) else [])


def shard_name(shard_path: str) -> str:
    """The name a shard's outputs and manifest entry take: its file name without suffix."""
    return os.path.splitext(os.path.basename(shard_path))[0]


def read_parquet_shard(path: str, inputs, batch_axis: int = 0,
                       segment_ids: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """The inputs of a Parquet shard: one column per input, one row per sample.

    - A column of numbers becomes a 1-D array of the rows (an input of rank 1).
    - A column of fixed-length lists (every row the same length k) becomes [rows, k], the rows
      along `batch_axis` (an input [B, k] with batch_axis 0; [k, B] with batch_axis 1).
    - A column of lists of varying length is a ragged input: its rows are concatenated into one
      1-D array (EmbeddingSegmentsSum's `indices`, CTC's labels). `segment_ids` names the input
      that receives, for each element, the row it came from: {"cat_segments": "cat_ids"} fills
      the input `cat_segments` with the row index of every element of column `cat_ids`.
    Each array is converted to its input's element type (as an .npz feed would be checked).
    """
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:   # pyarrow raises its own types for a broken file
        raise ReadError(f"cannot read the Parquet shard: {e}", file=path) from None
    by_name = {p.name: p for p in inputs}
    feed: dict[str, np.ndarray] = {}
    lengths: dict[str, np.ndarray] = {}
    for column in table.column_names:
        if column not in by_name:
            raise ReadError(f"the Parquet shard has a column '{column}' that no input takes "
                            f"(inputs: {', '.join(by_name)})", file=path)
        values = table.column(column).to_pylist()
        dtype = element_type(by_name[column].element_type).dtype
        if values and isinstance(values[0], list):
            sizes = np.array([len(v) for v in values], np.int64)
            flat = np.array([x for row in values for x in row], dtype=dtype)
            if sizes.size and (sizes == sizes[0]).all():
                stacked = flat.reshape(len(values), int(sizes[0]))
                feed[column] = np.moveaxis(stacked, 0, batch_axis) if batch_axis else stacked
            else:
                feed[column] = flat
            lengths[column] = sizes
        else:
            feed[column] = np.array(values, dtype=dtype)
    for target, column in (segment_ids or {}).items():
        if column not in lengths:
            raise ReadError(f"segment ids for '{target}' come from column '{column}', which is "
                            "not a list column of this shard", file=path)
        dtype = element_type(by_name[target].element_type).dtype if target in by_name \
            else np.int64
        feed[target] = np.repeat(np.arange(lengths[column].size), lengths[column]).astype(dtype)
        if column in feed and feed[column].ndim > 1:
            feed[column] = feed[column].reshape(-1)
    return feed


# ---------------------------------------------------------------- the task a worker runs

_models: dict[tuple, object] = {}
_reads: dict[str, int] = {}
_models_lock = threading.Lock()


def _model_on_this_worker(model_path: str, extensions: tuple[str, ...]):
    """The model, read once per worker process (keyed by the files' identity)."""
    from ..ir.registry import load_extension
    from ..run.model import read_model

    for ext in extensions:
        load_extension(ext)
    key = tuple((p, os.stat(p).st_mtime_ns, os.stat(p).st_size) for p in model_files(model_path))
    with _models_lock:
        model = _models.get(key)
        if model is None:
            model = _models[key] = read_model(model_path)
            _reads[model_path] = _reads.get(model_path, 0) + 1
    return model


def model_reads(model_path: str) -> int:
    """How many times this process has read `model_path` for batch tasks."""
    return _reads.get(os.path.abspath(model_path), 0)


def run_shard(model_path: str, shard_path: str, out_path: str, extensions=(), batch_axis=0,
              segment_ids=None) -> dict:
    """Run one shard and write its outputs atomically; returns its manifest fields.

    Raises on failure (Dask retries the task, then the batch records the error).
    """
    from ..run.feed import load_npz, save_npz

    t0 = time.perf_counter()
    model = _model_on_this_worker(model_path, tuple(extensions))
    if shard_path.lower().endswith(".parquet"):
        feed = read_parquet_shard(shard_path, model.inputs, batch_axis, segment_ids)
    else:
        feed = load_npz(shard_path, model.inputs)
    outputs = model.infer(feed)
    save_npz(out_path, {name: np.asarray(v) for name, v in outputs.items()})
    return {"seconds": round(time.perf_counter() - t0, 6), "pid": os.getpid()}


# ---------------------------------------------------------------- the batch

@dataclass
class BatchResult:
    """What `batch()` did: the manifest (also in OUT/manifest.json) and this run's counts."""

    manifest: dict
    done: list[str] = field(default_factory=list)       # run in this call
    skipped: list[str] = field(default_factory=list)    # already done with the same digest
    failed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


def _write_manifest(out_dir: str, manifest: dict) -> None:
    # A fresh temporary file renamed over it: a link planted at manifest.json (or at a
    # fixed manifest.json.tmp) is never written through.
    write_text(os.path.join(out_dir, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True))


def _read_manifest(out_dir: str) -> dict:
    path = os.path.join(out_dir, MANIFEST)
    try:
        with open(path) as f:
            manifest = json.load(f)
        return manifest if isinstance(manifest, dict) else {}
    except (OSError, ValueError):
        return {}     # none yet, or unreadable: every shard runs again


def _client(scheduler: str, workers: int | None):
    """A dask.distributed Client: a local cluster of threads or processes, or an address."""
    from distributed import Client, LocalCluster

    if scheduler in _SCHEDULERS:
        n = workers or min(4, os.cpu_count() or 1)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1,
                               processes=scheduler == "processes", dashboard_address=None,
                               silence_logs=40)
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout="10s"), None
    except (OSError, TimeoutError) as e:
        raise IrrunError(f"cannot connect to the Dask scheduler at '{scheduler}': {e}",
                         code="scheduler") from None


def batch(model_path, shards, out_dir, *, scheduler: str = "threads", workers: int | None = None,
          batch_axis: int = 0, retries: int = 2, extensions=(), segment_ids=None,
          client=None, on_result=None) -> BatchResult:
    """Run every shard through the model on Dask; returns a BatchResult (see the module doc).

    `scheduler`: "threads" or "processes" (a LocalCluster of `workers` workers) or the address
    of a running dask.distributed scheduler ("tcp://host:8786"); or pass your own `client`.
    A failing shard is retried `retries` times, then recorded with its error while the others
    go on. `on_result(name, entry)` is called as each shard ends (a progress hook).
    """
    _need_dask()
    from distributed import as_completed

    model_path = os.path.abspath(os.fspath(model_path))
    out_dir = os.fspath(out_dir)
    if not os.path.exists(model_path):
        raise ReadError(f"no such model file: '{model_path}'", file=model_path)
    os.makedirs(out_dir, exist_ok=True)
    names = [shard_name(s) for s in shards]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise IrrunError(f"two shards would write the same output file: {', '.join(twice)} "
                         "(shard file names must differ without their suffix)", code="usage")
    model_digest = file_digest(*model_files(model_path))
    old = _read_manifest(out_dir)
    entries = old.get("shards", {}) if old.get("model_digest") == model_digest else {}
    manifest = {"model": model_path, "model_digest": model_digest, "shards": entries}
    result = BatchResult(manifest)

    todo = []
    for shard, name in zip(shards, names):
        out_path = os.path.join(out_dir, name + ".npz")
        try:
            digest = file_digest(shard)
        except OSError as e:
            entries[name] = {"shard": os.path.abspath(shard), "status": "failed",
                             "error": f"{shard}: cannot read the shard: {e.strerror or e}"}
            result.failed.append(name)
            continue
        previous = entries.get(name, {})
        if previous.get("status") == "done" and previous.get("digest") == digest and \
                os.path.exists(out_path):
            result.skipped.append(name)
            continue
        entries[name] = {"shard": os.path.abspath(shard), "status": "pending", "digest": digest,
                         "output": out_path}
        todo.append((name, shard, out_path))
    _write_manifest(out_dir, manifest)
    if not todo:
        return result

    own = None
    if client is None:
        client, own = _client(scheduler, workers)
    try:
        futures = {}
        for name, shard, out_path in todo:
            f = client.submit(run_shard, model_path, os.path.abspath(shard), out_path,
                              tuple(os.path.abspath(e) for e in extensions), batch_axis,
                              segment_ids, key=f"irrun-shard-{name}-{entries[name]['digest'][:12]}",
                              retries=retries, pure=False)
            futures[f] = name
        # Results are gathered in batches and the manifest rewritten at most every
        # MANIFEST_EVERY seconds (and at the end, also after an interruption): a shard
        # finished since the last write runs again on resume, which rewrites the same output.
        last_write = time.monotonic()
        try:
            for f, value in as_completed(futures, with_results=True, raise_errors=False):
                name = futures[f]
                entry = entries[name]
                if f.status == "finished":
                    entry.update(value, status="done")
                    entry.pop("error", None)
                    result.done.append(name)
                else:
                    entry["status"] = "failed"
                    entry["error"] = _one_line(f.exception())
                    result.failed.append(name)
                if time.monotonic() - last_write >= MANIFEST_EVERY:
                    _write_manifest(out_dir, manifest)
                    last_write = time.monotonic()
                if on_result is not None:
                    on_result(name, entry)
        finally:
            _write_manifest(out_dir, manifest)
    finally:
        if own is not None:
            client.close()
            own.close()
    return result


def _one_line(e: BaseException | None) -> str:
    if e is None:
        return "the task did not finish"
    text = str(e) if isinstance(e, IrrunError) else f"{type(e).__name__}: {e}"
    return " / ".join(line for line in text.splitlines() if line.strip())


# ---------------------------------------------------------------- for users already in Dask

def map_blocks(model_path, array, *, output: str | None = None, input: str | None = None):
    """Map a one-input model over a dask.array, chunk by chunk along axis 0 (the batch axis).

    Every chunk must hold whole rows of the other axes (chunk only axis 0); the result is a
    dask.array of the named output (or the only one) with the same chunks along axis 0.
    """
    _need_dask()
    import dask.array as da

    model_path = os.path.abspath(os.fspath(model_path))
    model = _model_on_this_worker(model_path, ())
    name = input or model.inputs[0].name
    out_name = output or model.outputs[0].name
    if any(len(c) != 1 for c in array.chunks[1:]):
        array = array.rechunk({i: -1 for i in range(1, array.ndim)})
    # The output's shape per chunk: run the model once on an empty-batch-free probe chunk.
    probe = model.infer({name: np.zeros((1,) + array.shape[1:], array.dtype)})[out_name]

    def run(block):
        m = _model_on_this_worker(model_path, ())
        return np.asarray(m.infer({name: block})[out_name])

    return da.map_blocks(run, array, dtype=probe.dtype,
                         chunks=(array.chunks[0],) + tuple((d,) for d in probe.shape[1:]),
                         drop_axis=list(range(probe.ndim, array.ndim)) or None,
                         new_axis=list(range(array.ndim, probe.ndim)) or None)
