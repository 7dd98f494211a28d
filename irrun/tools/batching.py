"""`irrun batch`: score many input shards through one model on Dask (dask.distributed).

One Dask task per shard. Each worker process reads the model once (a per-process cache keyed
by the model files' identity) and keeps it for every shard it is given. A worker writes a
shard's outputs atomically to `OUT/.<shard stem>.npz.part`, which the batch renames to
`OUT/<shard stem>.npz` as it records the shard done. `OUT/manifest.json` records every
shard's status, time, input digest and error, and is rewritten (atomically) as shards
finish, so an interrupted batch leaves a manifest that a rerun of the same command reads to
skip the shards already done with the same input digest (and the same model).

A shard is an `.npz` of inputs keyed by input name, or a Parquet file whose columns are the
inputs, one row per sample along the batch axis (see `read_parquet_shard`).

Dask and pyarrow are an optional extra: `pip install irrun[batch]`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import signal
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import FeedError, IrrunError, ReadError, ResourceError
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
    - A column of lists whose rows are all the same length k becomes [rows, k], the rows
      along `batch_axis` (an input [B, k] with batch_axis 0; [k, B] with batch_axis 1).
    - A column of lists for an input of rank 1, or of lists of varying length, is a ragged
      input: its rows are concatenated into one 1-D array (EmbeddingSegmentsSum's `indices`,
      CTC's labels). `segment_ids` names the input that receives, for each element, the row it
      came from: {"cat_segments": "cat_ids"} fills the input `cat_segments` with the row index
      of every element of column `cat_ids`.
    Each array is checked and converted as an .npz feed is (irrun.run.feed.cast_input). A null
    (a missing value) is refused, naming its row. Every problem is an IrrunError naming the
    file and the column. The file's metadata (row count and values per column) is checked
    against the memory budget (IRRUN_MAX_BYTES) before any data is read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..run.feed import regular_file

    path = os.fspath(path)
    regular_file(path, "Parquet shard")
    try:
        open(path, "rb").close()       # Python's words for a missing or unreadable file
    except OSError as e:
        raise ReadError(f"cannot read the Parquet shard: {e.strerror or e}", file=path) from None
    try:
        pf = pq.ParquetFile(path)      # the footer only: schema, row groups, value counts
    except (pa.ArrowException, OSError, ValueError, TypeError) as e:
        raise ReadError(f"not a Parquet file (or its footer is damaged): {_arrow_text(e)}",
                        file=path) from None
    with pf:
        return _read_parquet(pf, path, inputs, batch_axis, segment_ids or {})


def _arrow_text(e: BaseException) -> str:
    """pyarrow's message without the path it repeats (the error line names the file)."""
    text = " ".join(str(e).split())
    return re.sub(r"^Could not open Parquet input source '[^']*': ", "", text)


def _column_kind(t):
    """("value", t) for a column of numbers or strings, ("list", item type) for a column of
    lists of them, None for anything else (structs, maps, lists of lists, dates, ...)."""
    import pyarrow.types as pt

    def plain(v):
        return pt.is_integer(v) or pt.is_floating(v) or pt.is_boolean(v) or pt.is_string(v) \
            or pt.is_large_string(v)

    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return ("list", t.value_type) if plain(t.value_type) else None
    return ("value", t) if plain(t) else None


def _read_parquet(pf, path, inputs, batch_axis, segment_ids) -> dict[str, np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pt

    from ..ir.weights import max_tensor_bytes
    from ..run.feed import cast_input

    schema = pf.schema_arrow
    columns = list(schema.names)
    by_name = {n: p for p in inputs for n in p.names}

    def fail(message, kind=FeedError):
        raise kind(message, file=path)

    # Names and types first, from the schema alone.
    kinds = {}
    for column in columns:
        if column not in by_name:
            fail(f"the shard has a column '{column}' that no input takes (inputs: "
                 f"{', '.join(p.name for p in inputs)})")
        t = schema.field(column).type
        kind = _column_kind(t)
        if kind is None:
            fail(f"column '{column}' ({t}) for input '{column}': irrun takes a column of "
                 "numbers (or strings), or of lists of them")
        port = by_name[column]
        etype = element_type(port.element_type)
        if pt.is_string(kind[1]) or pt.is_large_string(kind[1]):
            if etype.kind != "string":
                fail(f"column '{column}' ({t}) for input '{column}': holds strings; expected "
                     f"{etype.name}{port.partial_shape}")
        elif etype.kind == "string":
            fail(f"column '{column}' ({t}) for input '{column}': holds numbers; expected "
                 f"{etype.name}{port.partial_shape} (strings)")
        else:
            try:   # the dtype rule of .npz feeds, on no values yet
                cast_input(column, np.empty(0, kind[1].to_pandas_dtype()), etype, None)
            except FeedError as e:
                fail(_for_column(e.message.rsplit("; expected ", 1)[0], column, t)
                     + f"; expected {etype.name}{port.partial_shape}")
        kinds[column] = kind
    for target, column in segment_ids.items():
        if target not in by_name:
            fail(f"--segment-ids {target}={column}: the model has no input '{target}' (inputs: "
                 f"{', '.join(p.name for p in inputs)})")
        if kinds.get(column, ("value",))[0] != "list":
            fail(f"--segment-ids {target}={column}: segment ids come from a column of lists, "
                 f"and the shard has no list column '{column}'")
    given = {by_name[c].name for c in columns} | {by_name[t].name for t in segment_ids}
    for port in inputs:
        if port.name not in given:
            fail(f"the shard has no column for input '{port.name}' "
                 f"({port.element_type}{port.partial_shape}); its columns: "
                 f"{', '.join(columns) or 'none'}")

    # Sizes next, from the metadata: the values each column holds, before reading any.
    md = pf.metadata
    rows = md.num_rows
    if md.num_columns != len(columns):     # a leaf per column: nested types are refused above
        fail(f"the file's metadata lists {md.num_columns} columns, its schema {len(columns)}",
             ReadError)
    values = [0] * len(columns)
    stored = [0] * len(columns)
    for g in range(md.num_row_groups):
        group = md.row_group(g)
        for i in range(len(columns)):
            chunk = group.column(i)
            values[i] += chunk.num_values
            stored[i] += chunk.total_uncompressed_size
    limit = max_tensor_bytes()
    total = 0
    for i, column in enumerate(columns):
        etype = element_type(by_name[column].element_type)
        item = kinds[column][1]
        if etype.kind == "string":
            # The text, and a Python str per value once converted.
            need = stored[i] + values[i] * 64
        else:
            # Arrow's values, and the tensor made of them.
            need = values[i] * ((max(item.bit_width, 8) + 7) // 8 + (etype.bits + 7) // 8)
        if kinds[column][0] == "list" and not pt.is_fixed_size_list(schema.field(column).type):
            need += rows * 4          # Arrow's offsets
        for target in (t for t, c in segment_ids.items() if c == column):
            need += values[i] * (8 + element_type(by_name[target].element_type).dtype.itemsize)
        total += need
        if need > limit or total > limit:
            what = "" if need > limit else " (with the columns before it)"
            fail(f"column '{column}' holds {values[i]} values in {rows} rows: {need} bytes to "
                 f"decode and convert to {etype.name}{what}, more than the limit of {limit} "
                 "bytes (IRRUN_MAX_BYTES)", ResourceError)

    # The data, column by column (a decoding error names its column).
    feed: dict[str, np.ndarray] = {}
    lengths: dict[str, np.ndarray] = {}
    ragged: dict[str, np.ndarray] = {}
    for i, column in enumerate(columns):
        port = by_name[column]
        kind, item = kinds[column]
        try:
            data = pf.read(columns=[column], use_threads=False).column(0)
        except (pa.ArrowException, OSError, ValueError) as e:
            fail(f"column '{column}' cannot be decoded: {_arrow_text(e)}", ReadError)
        data = data.combine_chunks() if data.num_chunks != 1 else data.chunk(0)
        if len(data) != rows:
            fail(f"column '{column}' has {len(data)} rows; the file's metadata says {rows}",
                 ReadError)
        if data.null_count:
            row = int(np.flatnonzero(data.is_null().to_numpy(zero_copy_only=False))[0])
            fail(f"column '{column}' row {row} (from 0) is null; " + _NO_NULLS)
        if kind == "list":
            flat = data.flatten()
            if flat.null_count:
                at = int(np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False))[0])
                parents = pc.list_parent_indices(data).to_numpy()
                row = int(parents[at])
                first = int(np.searchsorted(parents, row))
                fail(f"column '{column}' row {row} (from 0), element {at - first} is null; "
                     + _NO_NULLS)
            sizes = pc.list_value_length(data).to_numpy(zero_copy_only=False).astype(np.int64)
            array = flat.to_numpy(zero_copy_only=False)
            lengths[column] = sizes
            rank = len(port.shape) if port.shape is not None else None
            equal = sizes.size > 0 and bool((sizes == sizes[0]).all())
            if equal and rank != 1 and column not in segment_ids.values():
                if batch_axis > 1:
                    fail(f"column '{column}': --batch-axis {batch_axis} is past its axes (its "
                         "rows and each row's list: 0 or 1)")
                array = array.reshape(len(sizes), int(sizes[0]))
                array = np.moveaxis(array, 0, batch_axis) if batch_axis else array
            elif not equal:
                ragged[column] = sizes
        else:
            array = data.to_numpy(zero_copy_only=False)
        feed[column] = array
    for target, column in segment_ids.items():
        feed[target] = np.repeat(np.arange(lengths[column].size), lengths[column])

    # Types and shapes, as an .npz feed is checked, each error naming its column.
    for name, array in feed.items():
        port = by_name[name]
        try:
            feed[name] = cast_input(name, array, element_type(port.element_type), port.shape)
        except FeedError as e:
            if name in kinds:
                hint = _shape_hint(port, kinds[name][0], ragged.get(name))
                fail(_for_column(e.message, name, schema.field(name).type) + hint)
            fail(f"the segment ids for input '{name}' (from --segment-ids): {e.message}")
    return feed


_NO_NULLS = ("irrun takes no missing values (fill or drop them before writing the shard: "
             "docs/batch.md)")


def _for_column(message: str, column: str, t) -> str:
    """cast_input's "input 'x': ..." said of the column that gives it."""
    return f"column '{column}' ({t}) for " + message


def _shape_hint(port, kind: str, sizes) -> str:
    """Why a column's array has the wrong rank, when the column's form explains it."""
    if port.shape is None or len(port.shape) != 2:
        return ""
    if kind == "value":
        return " (an input of rank 2 takes a column of equal-length lists, one list per row)"
    if sizes is not None:
        first = int(np.flatnonzero(sizes != sizes[0])[0])
        return (f" (its lists differ in length: row 0 has {_values(sizes[0])}, row {first} has "
                f"{_values(sizes[first])})")
    return ""


def _values(n) -> str:
    return f"{int(n)} value" + ("" if n == 1 else "s")


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
    try:
        key = tuple((p, os.stat(p).st_mtime_ns, os.stat(p).st_size)
                    for p in model_files(model_path))
    except OSError as e:
        raise ReadError(f"cannot read the model on this worker: {e.strerror or e}",
                        file=model_path) from None
    with _models_lock:
        model = _models.get(key)
        if model is None:
            model = _models[key] = read_model(model_path)
            _reads[model_path] = _reads.get(model_path, 0) + 1
    return model


def model_reads(model_path: str) -> int:
    """How many times this process has read `model_path` for batch tasks."""
    return _reads.get(os.path.abspath(model_path), 0)


class ShardFailed(Exception):
    """A shard's failure that another try may not repeat (an I/O or memory error, or an irrun
    bug), carrying only its one worded line: Dask retries it and sends it back as it is."""


# Batches stopped (Ctrl-C) in this process: their shards still running on a worker thread of
# this process write nothing (a local cluster of threads cannot stop a running task).
_stopped: set[str] = set()


def run_shard(model_path: str, shard_path: str, part_path: str, extensions=(), batch_axis=0,
              segment_ids=None, batch_id: str = "") -> dict:
    """Run one shard and write its outputs, atomically, to `part_path` (the batch renames it
    to the shard's output when it records the shard done); returns its manifest fields.

    A user's error (an IrrunError: a shard that cannot be read, inputs that do not fit the
    model, a value a layer refuses) is returned as {"error": line}: the same input fails the
    same way again, so it is not retried, and Dask logs no traceback for it. Anything else
    raises ShardFailed with its line, and Dask retries it.
    """
    from ..run.feed import load_npz, save_npz

    t0 = time.perf_counter()
    try:
        model = _model_on_this_worker(model_path, tuple(extensions))
        if shard_path.lower().endswith(".parquet"):
            feed = read_parquet_shard(shard_path, model.inputs, batch_axis, segment_ids)
        else:
            feed = load_npz(shard_path, model.inputs)
        outputs = model.infer(feed)
        if batch_id in _stopped:
            return {"stopped": True}
        save_npz(part_path, {name: np.asarray(v) for name, v in outputs.items()})
        if batch_id in _stopped:       # stopped while writing: the batch may have cleaned up
            with contextlib.suppress(OSError):
                os.unlink(part_path)
            return {"stopped": True}
    except IrrunError as e:
        return {"error": _one_line(e)}
    except Exception as e:
        raise ShardFailed(_one_line(e)) from None
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
        # Dask's own log lines are not shown (CRITICAL only): a shard's failure is reported
        # once, worded, by the batch; a worker process ignores Ctrl-C (see dask_setup). No
        # dashboard; the scheduler's HTTP server (health checks) on any free port, not on
        # 8787, which another cluster may hold ("Port 8787 is already in use" on stderr).
        cluster = LocalCluster(n_workers=n, threads_per_worker=1,
                               processes=scheduler == "processes", dashboard_address=None,
                               scheduler_kwargs={"dashboard_address": ":0"},
                               silence_logs=logging.CRITICAL, preload=[__name__])
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout="10s"), None
    except (OSError, TimeoutError) as e:
        raise IrrunError(f"cannot connect to the Dask scheduler at '{scheduler}': {e}",
                         code="scheduler") from None


def dask_setup(worker) -> None:
    """Run by each worker of a local cluster as it starts (a Dask preload): a worker process
    ignores SIGINT. Ctrl-C in a terminal goes to the whole process group; the batch that
    receives it stops the workers itself, without each one printing its own traceback."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(client, cluster) -> None:
    """Close our own local cluster at once after an interruption: a worker thread is not
    waited for (it runs its shard to the end and writes nothing, see _stopped), a worker
    process is killed."""
    import asyncio

    from distributed import Nanny

    workers = list(cluster.workers.values())

    async def stop_workers():
        closing = [asyncio.ensure_future(w.close(timeout=1) if isinstance(w, Nanny)
                                         else w.close(executor_wait=False)) for w in workers]
        await asyncio.sleep(0)     # each close() has marked its worker closing: no restart
        for w in workers:
            if isinstance(w, Nanny) and w.pid:
                with contextlib.suppress(OSError):
                    os.kill(w.pid, signal.SIGKILL)
        await asyncio.gather(*closing, return_exceptions=True)

    with contextlib.suppress(Exception):
        cluster.sync(stop_workers)
    with contextlib.suppress(Exception):
        client.close(timeout=2)
    with contextlib.suppress(Exception):
        cluster.close(timeout=5)


def _part(out_dir: str, name: str) -> str:
    """Where a worker writes a shard's outputs before the batch records it done."""
    return os.path.join(out_dir, f".{name}.npz.part")


def _remove_partials(out_dir: str, names) -> None:
    """The partial files of these shards: each one's .part, and what a killed write left
    (save_npz's temporary files beside the .part). One pass over the directory."""
    names = set(names)
    if not names:
        return
    with contextlib.suppress(OSError):
        for entry in os.scandir(out_dir):
            file = entry.name
            if file.startswith("..") and file.endswith(".tmp") and ".npz.part." in file:
                name = file[2:file.rindex(".npz.part.")]
            elif file.startswith(".") and file.endswith(".npz.part"):
                name = file[1:-len(".npz.part")]
            else:
                continue
            if name in names:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def batch(model_path, shards, out_dir, *, scheduler: str = "threads", workers: int | None = None,
          batch_axis: int = 0, retries: int = 2, extensions=(), segment_ids=None,
          client=None, on_result=None) -> BatchResult:
    """Run every shard through the model on Dask; returns a BatchResult (see the module doc).

    `scheduler`: "threads" or "processes" (a LocalCluster of `workers` workers) or the address
    of a running dask.distributed scheduler ("tcp://host:8786"); or pass your own `client`.
    A shard whose input is at fault (an IrrunError: unreadable, not fitting the model) fails
    at once; one failing otherwise (an I/O or memory error) is retried `retries` times (and
    one whose worker died runs on another, as Dask does). Either is recorded with its error
    while the others go on. `on_result(name, entry)` is called as each shard ends (a progress
    hook).

    OUT/<shard>.npz exists only for the shards the manifest calls done: a worker writes to
    OUT/.<shard>.npz.part and the batch renames it when it records the shard. After an
    interruption (Ctrl-C, KeyboardInterrupt) the manifest is written, partial files are
    removed and our own local cluster is stopped without waiting for running shards.
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
    stale = []
    for shard, name in zip(shards, names):
        out_path = os.path.join(out_dir, name + ".npz")
        try:
            digest = file_digest(shard)
        except OSError as e:
            entries[name] = {"shard": os.path.abspath(shard), "status": "failed",
                             "error": f"{shard}: error: cannot read the shard: {e.strerror or e}"}
            result.failed.append(name)
            stale.append(out_path)
            continue
        previous = entries.get(name, {})
        if previous.get("status") == "done" and previous.get("digest") == digest and \
                os.path.exists(out_path):
            result.skipped.append(name)
            continue
        entries[name] = {"shard": os.path.abspath(shard), "status": "pending", "digest": digest,
                         "output": out_path}
        todo.append((name, shard, out_path))
        stale.append(out_path)
    _write_manifest(out_dir, manifest)
    # An output left from an earlier input (or model) of a shard that is not done now.
    for path in stale:
        with contextlib.suppress(OSError):
            os.unlink(path)
    _remove_partials(out_dir, [name for name, _, _ in todo])
    if not todo:
        return result

    batch_id = f"{os.getpid()}-{time.time_ns()}"
    parts = {name: _part(os.path.abspath(out_dir), name) for name, _, _ in todo}
    made, own = client is None, None
    if made:
        client, own = _client(scheduler, workers)      # own: the local cluster, if one
    interrupted = False
    futures = {}
    try:
        for name, shard, out_path in todo:
            f = client.submit(run_shard, model_path, os.path.abspath(shard), parts[name],
                              tuple(os.path.abspath(e) for e in extensions),
                              batch_axis, segment_ids, batch_id,
                              # One key per call: a key this client just cancelled (an
                              # interrupted batch resumed at once) may still be cancelling
                              # in the scheduler, and would take the new task with it.
                              key=f"irrun-shard-{name}-{entries[name]['digest'][:12]}-"
                                  f"{batch_id}",
                              retries=retries, pure=False)
            futures[f] = name
        # Results are gathered in batches and the manifest rewritten at most every
        # MANIFEST_EVERY seconds (and at the end, also after an interruption): a shard
        # finished since the last write runs again on resume, which rewrites the same output.
        last_write = time.monotonic()
        for f, value in as_completed(futures, with_results=True, raise_errors=False):
            name = futures[f]
            entry = entries[name]
            error = _commit(f, value, parts[name], entry["output"])
            if error is None:
                entry.update(value, status="done")
                entry.pop("error", None)
                result.done.append(name)
            else:
                entry["status"] = "failed"
                entry["error"] = error
                result.failed.append(name)
            if time.monotonic() - last_write >= MANIFEST_EVERY:
                _write_manifest(out_dir, manifest)
                last_write = time.monotonic()
            if on_result is not None:
                on_result(name, entry)
    except BaseException:     # Ctrl-C (KeyboardInterrupt, the CLI's Interrupted), or worse
        interrupted = True
        _stopped.add(batch_id)
        if own is None:     # a scheduler we do not own: its workers would go on with them
            with contextlib.suppress(Exception):
                client.cancel([f for f, n in futures.items() if entries[n]["status"] == "pending"],
                              force=True)
        raise
    finally:
        try:
            _write_manifest(out_dir, manifest)
        finally:
            if own is not None and interrupted:
                _stop(client, own)
            elif own is not None:
                client.close()
                own.close()
            elif made:
                client.close()
            _remove_partials(out_dir, [name for name, _, _ in todo
                                       if entries[name]["status"] != "done"])
    return result


def _commit(future, value, part: str, out_path: str) -> str | None:
    """Record a finished task: rename its outputs into place; the error line if it failed."""
    if future.status != "finished":
        return _task_error(future)
    if not isinstance(value, dict):
        return "the task returned nothing"
    if "error" in value or value.get("stopped"):
        return value.get("error") or "stopped by an interruption"
    try:
        os.replace(part, out_path)
    except OSError as e:
        return (f"{out_path}: error: cannot move the worker's outputs into place ({part}: "
                f"{e.strerror or e}); OUT must be one directory that every worker and this "
                "machine see at the same path")
    return None


def _task_error(future) -> str:
    """The one line for a task that raised, or that Dask gave up on."""
    try:
        e = future.exception(timeout=10)
    except Exception as lost:      # the scheduler went away, ...
        e = lost
    name = type(e).__name__
    if name == "KilledWorker":
        return ("every worker that ran it died (killed, or out of memory?); Dask gave up on it "
                "(distributed.scheduler.allowed-failures)")
    if name == "CancelledError" or e is None:
        return "the task was cancelled (the Dask scheduler or its workers went away?)"
    return _one_line(e)


def _one_line(e: BaseException | None) -> str:
    """An error as one line: an IrrunError as it prints itself, an I/O error with its path,
    anything else as the irrun bug it is."""
    if e is None:
        return "the task did not finish"
    if isinstance(e, (IrrunError, ShardFailed)):
        text = str(e)
    elif isinstance(e, OSError):
        text = f"{e.filename or 'irrun'}: error: {e.strerror or e}"
    elif isinstance(e, MemoryError):
        text = f"error: out of memory ({e}); IRRUN_MAX_BYTES sets the budget irrun checks"
    else:
        text = f"error: internal error: {type(e).__name__}: {e} (an irrun bug)"
    return " / ".join(line.strip() for line in text.splitlines() if line.strip())


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
