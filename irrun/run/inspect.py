"""Looking inside a run: trace lines, the per-layer profile, tensor dumps and the NaN check.

Each tool is a listener for the executor, `listener(node, outputs, seconds)`, called after
every layer; `chain()` lets several watch one run. None of them changes what is computed.
"""
from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
import time
from dataclasses import dataclass

import numpy as np

from ..errors import IrrunError, OpError, ResourceError

# ---------------------------------------------------------------- tensor summaries

def _shape_text(a: np.ndarray) -> str:
    return "[" + ",".join(str(d) for d in a.shape) + "]"


def _etype_name(node, index: int, a: np.ndarray) -> str:
    """The IR element type of an output (sub-byte types are held in a wider numpy dtype)."""
    specs = node.specs or ()
    if index < len(specs) and specs[index] is not None:
        return specs[index].etype.name
    return a.dtype.name


def _as_numeric(a: np.ndarray) -> np.ndarray:
    # bf16 (ml_dtypes) has numpy kind 'V': numpy's reductions and isfinite need a real float.
    if a.dtype.kind == "V":
        return a.astype(np.float32)
    return a


@dataclass(frozen=True)
class Summary:
    """What a trace line says about one tensor."""

    size: int
    lo: object = None            # min over the finite values; None when there are none
    hi: object = None
    nan: int = 0
    inf: int = 0

    @property
    def finite(self) -> bool:
        return self.nan == 0 and self.inf == 0


def summarize(a: np.ndarray) -> Summary:
    a = _as_numeric(np.asarray(a))
    if a.size == 0:
        return Summary(0)
    if a.dtype.kind in "fc":
        ok = np.isfinite(a)
        if ok.all():
            return Summary(a.size, a.min(), a.max())
        nan = int(np.count_nonzero(np.isnan(a)))
        inf = int(a.size - np.count_nonzero(ok)) - nan
        finite = a[ok]
        if finite.size == 0:
            return Summary(a.size, None, None, nan, inf)
        return Summary(a.size, finite.min(), finite.max(), nan, inf)
    return Summary(a.size, a.min(), a.max())


def _number(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (np.integer, int)):
        return str(int(v))
    if isinstance(v, str):         # a string tensor's lexicographic min/max
        return repr(v if len(v) <= 20 else v[:20] + "...")
    return format(float(v), ".6g")


def describe(etype: str, a: np.ndarray) -> str:
    """`f32[2,3] in [-1, 4.5]`, with NaN/Inf counts flagged by `!!`."""
    s = summarize(a)
    text = f"{etype}{_shape_text(a)}"
    if s.size == 0:
        return text + " (empty)"
    if s.lo is None:
        text += " (no finite values)"
    else:
        text += f" in [{_number(s.lo)}, {_number(s.hi)}]"
    if not s.finite:
        flags = [f"{n} {what}" for n, what in ((s.nan, "NaN"), (s.inf, "Inf")) if n]
        text += "  !! " + ", ".join(flags)
    return text


def preview(a: np.ndarray, items: int = 6) -> str:
    """A one-line look at the values (-vv): all of a small tensor, else the flat ends."""
    a = _as_numeric(np.asarray(a))
    if a.dtype.kind == "f" and a.dtype.itemsize < 4:
        a = a.astype(np.float32)           # f16: print its value, not float16 noise digits
    if a.size > items:
        a = a.reshape(-1)                   # big tensors: first and last values, flat
    formatter = {"float_kind": lambda v: format(float(v), ".5g"), "int_kind": str,
                 "bool": lambda v: "true" if v else "false"}
    with np.printoptions(threshold=items, edgeitems=max(1, items // 2), linewidth=10**6):
        return " ".join(np.array2string(a, separator=", ", formatter=formatter).split())


# ---------------------------------------------------------------- trace (-v / -vv)

def _where(node) -> str:
    layer = node.layer
    return f"{layer.op_label} '{layer.name}' (line {layer.line})"


def trace_lines(node, outputs, level: int = 1, names: dict | None = None) -> list[str]:
    """The trace of one layer: `Type-opsetN 'name' (line N): dtype[shape] in [min, max]`.

    Level 2 adds a line naming the inputs and one value preview per output. `names` maps
    layer ids to layer names (for the inputs line).
    """
    parts = [describe(_etype_name(node, i, a), a) for i, a in enumerate(outputs)]
    lines = [f"{_where(node)}: {'; '.join(parts) if parts else '(no outputs)'}"]
    if getattr(node, "folded", None) is not None:
        lines[0] += f" (folded at load: {node.fold_seconds * 1e3:.3f} ms once)"

    if level >= 2:
        if node.inputs:
            def src(s):
                who = names.get(s[0], s[0]) if names else s[0]
                return f"'{who}':{s[1]}"
            lines.append("    inputs: " + ", ".join(src(s) for s in node.inputs if s is not None))
        for i, a in enumerate(outputs):
            label = f"values {i}" if len(outputs) > 1 else "values"
            lines.append(f"    {label}: {preview(a)}")
    return lines


class Tracer:
    """Listener printing the trace of each layer as it runs.

    Level 1 traces Parameters and ops; level 2 also Consts, inputs and value previews.
    Results have no outputs of their own and are not traced.
    """

    def __init__(self, echo, level: int = 1, program=None):
        self.echo = echo
        self.level = level
        self.names = {lid: n.layer.name for lid, n in program.nodes.items()} if program else None

    def __call__(self, node, outputs, seconds):
        if node.kind == "result" or (node.kind == "const" and self.level < 2):
            return
        for line in trace_lines(node, outputs, self.level, self.names):
            self.echo(line)

    def for_body(self, program):
        """Level 2 traces the layers of a Loop/TensorIterator/If body too, indented, each
        time the body runs (before the layer's own line)."""
        if self.level < 2:
            return None
        runs = self._runs = getattr(self, "_runs", {})
        k = runs.get(id(program), 0)
        runs[id(program)] = k + 1
        owner = program.owner.layer
        role = program.doc.name.rsplit("/", 1)[-1] if program.doc is not None else "body"
        self.echo(f"  | {owner.op_label} '{owner.name}' {role}, run {k}:")
        echo = self.echo
        return Tracer(lambda line: echo("  | " + line), self.level, program)


# ---------------------------------------------------------------- NaN check

class NonFiniteError(OpError):
    """--check-nan: a layer produced NaN or Inf."""

    code = "non-finite"


class FiniteCheck:
    """Listener raising NonFiniteError at the first layer output holding NaN or Inf."""

    def __init__(self, path: str | None = None):
        self.path = path

    def __call__(self, node, outputs, seconds):
        problem = first_non_finite(outputs)
        if problem is not None:
            layer = node.layer
            raise NonFiniteError(problem + "; the first layer producing non-finite values").locate(
                file=self.path, line=layer.line, layer_id=layer.id, layer_name=layer.name,
                op=layer.op_label)


def first_non_finite(outputs) -> str | None:
    """`output 0 has 2 NaN (first at index [0, 1])` for the first non-finite output, else None."""
    for i, a in enumerate(outputs):
        a = _as_numeric(a)
        if a.dtype.kind not in "fc" or a.size == 0:
            continue
        bad = ~np.isfinite(a)
        if not bad.any():
            continue
        nan = int(np.count_nonzero(np.isnan(a)))
        inf = int(np.count_nonzero(bad)) - nan
        counts = " and ".join(f"{n} {w}" for n, w in ((nan, "NaN"), (inf, "Inf")) if n)
        first = [int(k) for k in np.unravel_index(int(np.argmax(bad)), a.shape)]
        return f"output {i} has {counts} (first at index {first})"
    return None


# ---------------------------------------------------------------- profile

def _ports(node, outputs) -> list[dict]:
    return [{"dtype": _etype_name(node, i, a), "shape": [int(d) for d in a.shape]}
            for i, a in enumerate(outputs)]


class Profiler:
    """Listener collecting the time of each layer that runs a kernel.

    Parameters, Consts and Results do no work and are left out. Over several runs a
    layer keeps its best (smallest) time, as timing tools usually report.
    """

    # It times the run as it is without a listener, outputs nothing reads left uncomputed
    # (MaxPool's indices): see irrun.run.executor.Plan.
    every_output = False

    def __init__(self, per_body: bool = False):
        self._rows: dict[str, dict] = {}
        # per_body (-vv --profile): also each layer inside a Loop/TensorIterator/If body, its
        # time summed over the iterations of a run (and already part of its layer's time).
        self.per_body = per_body
        self._body_rows: dict[tuple, dict] = {}
        self._pending: dict[tuple, dict] = {}

    def for_body(self, program):
        if not self.per_body:
            return None
        owner = program.owner
        role = program.doc.name.rsplit("/", 1)[-1] if program.doc is not None else "body"
        top = owner     # the top-level layer the body is (maybe deeply) inside: its report
        while top.program is not None and top.program.owner is not None:   # closes a run
            top = top.program.owner

        def listen(node, outputs, seconds):
            if node.kind != "op":
                return
            key = (id(owner), role, node.layer.id)
            row = self._pending.get(key)
            if row is None:
                layer = node.layer
                ports = _ports(node, outputs)
                self._pending[key] = row = dict(
                    name=f"{owner.layer.name}/{role}/{layer.name}", id=layer.id,
                    type=layer.type, version=layer.version, op=layer.op_label, line=layer.line,
                    outputs=ports, dtype=ports[0]["dtype"] if ports else None,
                    shape=ports[0]["shape"] if ports else None, seconds=0.0, runs=0,
                    body=owner.layer.name, owner=id(top))
            row["seconds"] += seconds
            row["runs"] += 1
        listen.for_body = self.for_body     # bodies inside bodies
        return listen

    def __call__(self, node, outputs, seconds):
        if node.kind != "op":
            return
        if self._pending:
            # The layer's bodies ran before it reports: a run's sums, best of the runs.
            for key in [k for k, r in self._pending.items() if r["owner"] == id(node)]:
                row = self._pending.pop(key)
                old = self._body_rows.get(key)
                if old is None or row["seconds"] < old["seconds"]:
                    self._body_rows[key] = row
        row = self._rows.get(node.layer.id)
        if row is not None:
            row["seconds"] = min(row["seconds"], seconds)
            return
        layer = node.layer
        ports = _ports(node, outputs)
        self._rows[layer.id] = dict(
            name=layer.name, id=layer.id, type=layer.type, version=layer.version,
            op=layer.op_label, line=layer.line, outputs=ports,
            dtype=ports[0]["dtype"] if ports else None,
            shape=ports[0]["shape"] if ports else None,
            seconds=seconds)
        if getattr(node, "folded", None) is not None:
            # Computed once when the model was read: no run time, its one-time cost apart.
            self._rows[layer.id]["folded"] = node.fold_seconds

    def rows(self) -> list[dict]:
        """One dict per layer, slowest first, with `share` of the total (0..1).

        With per_body, the layers inside bodies follow, slowest first, with `body` naming
        the layer whose body they are in and `runs` how often they ran (their time is part
        of that layer's and not counted in the total again)."""
        rows = sorted(self._rows.values(), key=lambda r: (-r["seconds"], r["name"]))
        total = sum(r["seconds"] for r in rows)
        out = [dict(r, share=(r["seconds"] / total if total > 0 else 0.0)) for r in rows]
        inner = sorted(self._body_rows.values(), key=lambda r: (-r["seconds"], r["name"]))
        out += [dict({k: v for k, v in r.items() if k != "owner"},
                     share=(r["seconds"] / total if total > 0 else 0.0)) for r in inner]
        return out


def totals_by_type(rows: list[dict]) -> list[dict]:
    """Per op type: count, seconds and share, slowest first."""
    groups: dict[str, dict] = {}
    for r in rows:
        g = groups.setdefault(r["type"], dict(type=r["type"], layers=0, seconds=0.0, share=0.0))
        g["layers"] += 1
        g["seconds"] += r["seconds"]
        g["share"] += r["share"]
    return sorted(groups.values(), key=lambda g: (-g["seconds"], g["type"]))


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    out = []
    for row in [header] + rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def profile_table(rows: list[dict], wall_seconds: float | None = None, runs: int = 1) -> str:
    """The text table of `irrun --profile`, in the manner of `benchmark_app -pc`: per layer,
    its best time over `runs` runs; `wall_seconds`, the best wall time of a run."""
    if not rows:
        return "profile: no layer ran a kernel"
    inner = [r for r in rows if r.get("body") is not None]
    rows = [r for r in rows if r.get("body") is None]
    body = []
    for r in rows:
        outs = "; ".join(f"{p['dtype']}[{','.join(map(str, p['shape']))}]" for p in r["outputs"])
        op = r["op"] + (" (folded)" if "folded" in r else "")
        body.append([_clip(r["name"], 40), op, _clip(outs, 40), f"{r['seconds'] * 1e3:.3f}",
                     f"{r['share'] * 100:.1f}%"])
    total = sum(r["seconds"] for r in rows)
    body.append(["total", f"{len(rows)} layer{'s' if len(rows) != 1 else ''}", "",
                 f"{total * 1e3:.3f}", "100.0%"])
    lines = _table(["layer", "type-version", "output", "time ms", "share"], body, {3, 4})
    lines.insert(len(lines) - 1, "")
    by_type = totals_by_type(rows)
    lines.append("")
    lines += _table(["op type", "layers", "time ms", "share"],
                    [[g["type"], str(g["layers"]), f"{g['seconds'] * 1e3:.3f}",
                      f"{g['share'] * 100:.1f}%"] for g in by_type], {1, 2, 3})
    if inner:
        lines.append("")
        lines.append("inside bodies (part of their layer's time above; summed over iterations):")
        lines += _table(["layer", "type-version", "runs", "time ms", "share"],
                        [[_clip(r["name"], 60), r["op"], str(r["runs"]),
                          f"{r['seconds'] * 1e3:.3f}", f"{r['share'] * 100:.1f}%"]
                         for r in inner], {2, 3, 4})
    folded = [r["folded"] for r in rows if "folded" in r]
    if folded:
        lines.append("")
        lines.append(f"{len(folded)} layer{'s' if len(folded) != 1 else ''} (folded) computed once "
                     f"when the model was read, in {sum(folded) * 1e3:.3f} ms; no time per run")
    if wall_seconds is not None:
        lines.append("")
        lines.append(f"wall time of the run: {wall_seconds * 1e3:.3f} ms" if runs == 1 else
                     f"best wall time of {runs} runs: {wall_seconds * 1e3:.3f} ms "
                     f"(layer times: the best of each)")
    return "\n".join(lines)


# ---------------------------------------------------------------- dump

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+=-]+")


def safe_filename(name: str, limit: int = 100) -> str:
    """A layer name made safe as a file name on any filesystem.

    Runs of other characters (/, :, spaces, ...) become one '_'; leading dots are dropped
    so no name is hidden or means '..'; long names are cut.
    """
    s = _UNSAFE.sub("_", name).lstrip(".")
    s = s[:limit].rstrip(".")
    return s or "layer"


class Dumper:
    """Listener writing every output port as `<layer>.<port>.npy`, plus `index.json`.

    `patterns` (fnmatch globs on the layer name) limit what is written. Consts (weights)
    are only written when a pattern names them. bf16 tensors are stored as f32, since
    .npy has no bf16; index.json records both types.

    File names are unique by construction: a sanitised layer name never holds '~', so a
    second layer whose name sanitises alike gets `~<layer id>` (and `~<n>` if even that is
    taken) without meeting any other name. Files are created inside the directory opened
    once, never following a symbolic link and never writing into an existing file (a link
    or file already there is unlinked first, not written through), and each file is
    complete before index.json lists it; a file cut short by an error or Ctrl-C is removed.
    """

    _FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))

    def __init__(self, directory: str, patterns: tuple[str, ...] | list[str] = ()):
        self.directory = directory
        self.patterns = tuple(patterns)
        self.entries: list[dict] = []
        self._taken: set[str] = set()
        self._dir_fd = None
        try:
            os.makedirs(directory, exist_ok=True)
            if os.open in os.supports_dir_fd:
                self._dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError as e:
            raise IrrunError(f"cannot create the dump directory: {e.strerror or e}",
                             file=directory, code="write") from None

    def wanted(self, node) -> bool:
        if node.kind == "result":
            return False
        if not self.patterns:
            # Weights are not a run's tensors: Consts, and the layers folded into constants
            # at load (a weight's decompression Convert: most of a converted model's bytes).
            return node.kind != "const" and getattr(node, "folded", None) is None
        return any(fnmatch.fnmatchcase(node.layer.name, p) for p in self.patterns)

    def _file_for(self, layer, port: int) -> str:
        base, lid = safe_filename(layer.name), safe_filename(layer.id, 40)
        names = itertools.chain((f"{base}.{port}.npy", f"{base}~{lid}.{port}.npy"),
                                (f"{base}~{lid}~{n}.{port}.npy" for n in itertools.count(2)))
        name = next(n for n in names if n.lower() not in self._taken)
        self._taken.add(name.lower())        # case-insensitive filesystems (macOS, Windows)
        return name

    def _open_new(self, name: str):
        """A new file `name` in the directory, never through a link planted there."""
        kw = {"dir_fd": self._dir_fd} if self._dir_fd is not None else {}
        target = name if self._dir_fd is not None else os.path.join(self.directory, name)
        try:
            os.unlink(target, **kw)   # an old dump file or a planted link: the entry goes
        except FileNotFoundError:
            pass
        fd = os.open(target, self._FLAGS, 0o666, **kw)
        return os.fdopen(fd, "wb")

    def _remove(self, name: str):
        kw = {"dir_fd": self._dir_fd} if self._dir_fd is not None else {}
        try:
            os.unlink(name if self._dir_fd is not None else os.path.join(self.directory, name), **kw)
        except OSError:
            pass

    def _write(self, name: str, write) -> None:
        path = os.path.join(self.directory, name)
        done = False
        try:
            with self._open_new(name) as f:
                write(f)
            done = True
        except OSError as e:     # disk full, permissions, a link: one line, not a traceback
            raise IrrunError(f"cannot write the dump file: {e.strerror or e}", file=path,
                             code="write") from None
        finally:
            if not done:
                self._remove(name)           # no partial file (also on Ctrl-C)

    def __call__(self, node, outputs, seconds):
        if not self.wanted(node):
            return
        self._dump(node, outputs, node.layer.name, {})

    def _dump(self, node, outputs, name: str, extra: dict, stem: str | None = None) -> None:
        layer = node.layer
        for i, a in enumerate(outputs):
            etype = _etype_name(node, i, a)
            file = self._file_for(_Named(stem or name, layer.id), i)
            stored = a.astype(np.float32) if a.dtype.kind == "V" else a
            if a.dtype == object:
                # A string tensor, written as --output writes it (a unicode array), and
                # refused as there when that array would not fit the memory budget.
                from .feed import check_writable, npz_array
                try:
                    check_writable(f"output {i}", a)
                except ResourceError as e:
                    raise e.locate(file=node.program.path, line=layer.line, layer_id=layer.id,
                                   layer_name=layer.name, op=layer.op_label) from None
                stored = npz_array(a)
            self._write(file, lambda f: np.lib.format.write_array(f, np.asanyarray(stored),
                                                                  allow_pickle=False))
            entry = dict(layer=name, id=layer.id, port=i, file=file, dtype=etype,
                         shape=[int(d) for d in a.shape], type_version=layer.op_label,
                         line=layer.line, **extra)
            if stored is not a:
                entry["stored_as"] = "unicode" if a.dtype == object else "f32"
            if getattr(node, "folded", None) is not None:
                entry["folded_seconds"] = node.fold_seconds   # computed once, at load
            self.entries.append(entry)

    def for_body(self, program, outer: str = ""):
        """Layers inside bodies are written only when a --dump-layers pattern names them
        as `<layer>/<body>/<body layer>` (a Loop may run its body thousands of times): one
        file per iteration, `<layer>_<body>_<body layer>.iter<k>.<port>.npy`."""
        if not self.patterns:
            return None
        role = program.doc.name.rsplit("/", 1)[-1] if program.doc is not None else "body"
        prefix = f"{outer}{program.owner.layer.name}/{role}/"
        runs = self._runs = getattr(self, "_runs", {})
        k = runs.get(prefix, 0)
        runs[prefix] = k + 1
        return _BodyDump(self, prefix, k)

    def close(self) -> str:
        """Write index.json (also after a failed run: it lists what was written)."""
        text = "[\n" + ",\n".join(json.dumps(e) for e in self.entries) + "\n]\n"
        try:   # one entry per line: greppable
            self._write("index.json", lambda f: f.write(text.encode("utf-8")))
        finally:
            if self._dir_fd is not None:
                os.close(self._dir_fd)
                self._dir_fd = None
        return os.path.join(self.directory, "index.json")


@dataclass
class _Named:
    name: str
    id: str


class _BodyDump:
    """The Dumper's listener for one run of one body (iteration `k`)."""

    def __init__(self, dumper: Dumper, prefix: str, k: int):
        self.dumper, self.prefix, self.k = dumper, prefix, k

    def __call__(self, node, outputs, seconds):
        if node.kind == "result":
            return
        name = self.prefix + node.layer.name
        if any(fnmatch.fnmatchcase(name, p) for p in self.dumper.patterns):
            self.dumper._dump(node, outputs, name,
                              {"body": self.prefix.rstrip("/"), "iteration": self.k},
                              stem=f"{name}.iter{self.k}")

    def for_body(self, program):
        return self.dumper.for_body(program, self.prefix)


# ---------------------------------------------------------------- progress

class Progress:
    """Listener driving click's progress bar, on a terminal only and only for a long run.

    The bar appears once the run has taken `delay` seconds, so short runs print nothing. It
    counts the layers that run a kernel (not Parameters, Consts or Results), with the unit
    in the label, and shows no ETA: layers differ too much in cost for the mean time per
    layer so far to predict the rest.
    """

    every_output = False      # it counts layers; see Profiler.every_output

    def __init__(self, total: int, stream, delay: float = 1.0, label: str = "running layers"):
        self.total = total
        self.stream = stream
        self.delay = delay
        self.label = label
        self.done = 0
        self.bar = None
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self._start = time.perf_counter()

    def __call__(self, node, outputs, seconds):
        if not self.enabled or getattr(node, "kind", "op") != "op":
            return
        self.done += 1
        if self.bar is None:
            if time.perf_counter() - self._start < self.delay:
                return
            import click
            self.bar = click.progressbar(length=self.total, file=self.stream, label=self.label,
                                         show_pos=True, show_eta=False, show_percent=True)
            self.bar.__enter__()
            self.bar.update(self.done)
        else:
            self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def chain(*listeners):
    """One listener calling each given one (None entries are skipped) in order."""
    active = [f for f in listeners if f is not None]
    if not active:
        return None
    if len(active) == 1:
        return active[0]

    def listen(node, outputs, seconds):
        for f in active:
            f(node, outputs, seconds)
    # Every output is computed if any listener looks at them (see Profiler.every_output).
    listen.every_output = any(getattr(f, "every_output", True) for f in active)

    def for_body(program):
        return chain(*(f.for_body(program) for f in active if hasattr(f, "for_body")))
    listen.for_body = for_body
    return listen


__all__ = ["Dumper", "FiniteCheck", "NonFiniteError", "Profiler", "Progress", "Summary", "Tracer", "chain",
           "describe", "first_non_finite", "profile_table", "safe_filename",
           "summarize", "totals_by_type", "trace_lines"]
