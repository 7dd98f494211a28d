"""`irrun compare`: run a model in irrun and in OpenVINO (or against saved values), tensor by
tensor, and name the first layer whose inputs agree and whose output does not.

irrun's side comes from one run with a listener that keeps every layer's outputs. OpenVINO's
side comes from the same model.xml read by `ov.Core.read_model`, with every compared port added
as a model output (`ov.Model.add_outputs`), so the plugin computes and hands back each one.
Layers are matched by name: OpenVINO keeps an IR layer's `name` as the op's friendly name.
Ports the plugin cannot hand back are listed, never silently dropped.

Comparison rule, per element: |irrun - other| <= atol + rtol * max(|irrun|, |other|);
NaN matches NaN, an infinity matches the same infinity. Integers and booleans must be equal.
"""
from __future__ import annotations

import fnmatch
import html
import json
import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import FeedError, IrrunError, UnsupportedError
from . import plugin_int8

# Default (rtol, atol) per element type. f32: a few thousand ulp of relative slack, for
# reductions summed in another order (OpenVINO's kernels block and vectorise their loops);
# f16/bf16: a few units in the last place of their 11/8-bit significands, since OpenVINO
# may compute in f32 and round once where irrun rounds per op, or the reverse.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "f64": (1e-9, 1e-12),
    "f32": (1e-4, 1e-5),
    "f16": (1e-2, 1e-3),
    "bf16": (4e-2, 1e-2),
}

OPENVINO_MISSING = ("irrun compare needs OpenVINO to compare with: pip install irrun[openvino] "
                    "(or give --reference FILE.npz with the values to compare against)")

GENERATED_SEED = 0


# ---------------------------------------------------------------- results

@dataclass
class TensorResult:
    """One compared port: a layer's output `port`, in irrun and in the other run."""

    layer: str
    layer_id: str
    port: int
    op: str                       # Type-opsetN as written in the file
    line: int
    names: list[str]              # the port's tensor names
    # "agree" | "drift" (differs only through its inputs) | "explained" (differs as the
    # other side's known arithmetic does: `cause`) | "differ"
    status: str
    shape: list[int]
    dtype: str                    # irrun's element type
    other_shape: list[int]
    other_dtype: str
    tolerance: dict               # {"etype", "rtol", "atol"} or {"exact": True}
    size: int = 0
    mismatches: int = 0
    max_abs: float | None = None
    max_rel: float | None = None
    cosine: float | None = None   # floats only
    worst_index: list[int] | None = None
    irrun_value: object = None    # the values at worst_index
    other_value: object = None
    reason: str | None = None     # why they differ, when it is not the values (shape, dtype)
    # irrun's kernel run on the other side's values of the layer's inputs, against the other
    # side's output: compare_tensor's statistics, {"error": message}, or None (not run).
    isolated: dict | None = None
    cause: str | None = None      # for "explained": what the other side computes instead

    @property
    def label(self) -> str:
        return f"{self.layer}:{self.port}"

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in (
            "layer", "layer_id", "port", "op", "line", "names", "status", "shape", "dtype",
            "other_shape", "other_dtype", "tolerance", "size", "mismatches", "max_abs", "max_rel",
            "cosine", "worst_index", "irrun_value", "other_value", "reason", "isolated", "cause")}

    def tolerance_text(self) -> str:
        t = self.tolerance
        if t.get("exact"):
            return "exact"
        whole = " or rtol x its largest |value|" if t.get("whole") else ""
        return f"rtol {t['rtol']:g}, atol {t['atol']:g}{whole} ({t['etype']})"

    def detail(self, other_name: str) -> str:
        """`3 of 15 differ; max abs diff 2.1 (rel 1) at [0, 2]: irrun -0.4, OpenVINO 0.13`."""
        held = self.tolerance_text()
        if self.reason:
            return f"{self.reason} (held to {held})"
        text = f"{self.mismatches} of {self.size} element{'s' if self.size != 1 else ''} " \
               f"differ{'s' if self.mismatches == 1 else ''} (held to {held})"
        if self.worst_index is not None:
            if self.max_abs is not None:
                text += f"; max abs diff {_num(self.max_abs)}"
            if self.max_rel is not None:
                text += f", max rel diff {_num(self.max_rel)}"
            text += (f"; worst at {self.worst_index}: irrun {_num(self.irrun_value)}, "
                     f"{other_name} {_num(self.other_value)}")
        if self.cosine is not None:
            text += f"; cosine {self.cosine:.6f}"
        return text


@dataclass
class Missing:
    """A port that was meant to be compared but has no value on one side, and why."""

    layer: str
    layer_id: str
    port: int
    op: str
    line: int
    reason: str

    def to_dict(self) -> dict:
        return dict(layer=self.layer, layer_id=self.layer_id, port=self.port, op=self.op,
                    line=self.line, reason=self.reason)


@dataclass
class Divergence:
    """A layer that differs although none of its inputs is known to differ."""

    layer: str
    layer_id: str
    op: str
    line: int
    tensors: list[TensorResult]           # its differing outputs
    unchecked_inputs: list[str]           # inputs that were not compared (the cause may be there)
    isolated: bool = False                # judged by running irrun's kernel on the other's inputs

    def to_dict(self) -> dict:
        return dict(layer=self.layer, layer_id=self.layer_id, op=self.op, line=self.line,
                    tensors=[t.label for t in self.tensors],
                    unchecked_inputs=self.unchecked_inputs, isolated=self.isolated)


@dataclass
class CompareResult:
    """What `irrun.compare` found. `ok` when every compared tensor agrees."""

    model: str
    other: str                            # "OpenVINO 2026.4.1 CPU (...)" or "reference FILE"
    other_name: str                       # short: "OpenVINO" or "reference"
    inputs: str                           # where the inputs came from
    tensors: list[TensorResult] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)   # topological order
    notes: list[str] = field(default_factory=list)
    program: object = field(default=None, repr=False, compare=False)   # irrun's loaded model

    @property
    def ok(self) -> bool:
        return all(t.status != "differ" for t in self.tensors)

    @property
    def differing(self) -> list[TensorResult]:
        """Tensors that differ on their own layer's account."""
        return [t for t in self.tensors if t.status == "differ"]

    @property
    def drifting(self) -> list[TensorResult]:
        """Tensors that differ only as their inputs do: irrun's kernel, given the other side's
        inputs, reproduces the other side's output."""
        return [t for t in self.tensors if t.status == "drift"]

    @property
    def explained(self) -> list[TensorResult]:
        """Tensors that differ for a known reason on the other side (`cause`): OpenVINO's
        int8 sums on CPUs without VNNI, which irrun reproduces when it computes that way
        (irrun.tools.plugin_int8), or the order in which a TopK takes equal values where
        the spec leaves it open."""
        return [t for t in self.tensors if t.status == "explained"]

    @property
    def first_divergent(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None

    def to_dict(self) -> dict:
        return dict(model=self.model, other=self.other, inputs=self.inputs, ok=self.ok,
                    compared=len(self.tensors), differ=len(self.differing),
                    drift=len(self.drifting), explained=len(self.explained),
                    first_divergent=self.first_divergent.to_dict() if self.first_divergent
                    else None,
                    divergences=[d.to_dict() for d in self.divergences],
                    tensors=[t.to_dict() for t in self.tensors],
                    missing=[m.to_dict() for m in self.missing], notes=self.notes)

    def to_json(self) -> str:
        """Strict JSON (jq reads it): NaN and infinities are written as strings."""
        return json.dumps(_strict(self.to_dict()), indent=2, default=_jsonable,
                          allow_nan=False)

    def verdict(self) -> str:
        """The `FILE:LINE: layer 'NAME' (Type-opsetN) ...` lines, or the all-agree line."""
        n = len(self.tensors)
        drift = len(self.drifting)
        their = "its" if drift == 1 else "their"
        carried = (f"{drift} differ{'s' if drift == 1 else ''} only through {their} "
                   f"inputs (given {self.other_name}'s values of the inputs, irrun's kernel "
                   f"reproduces {self.other_name}'s output: the difference comes from earlier "
                   "layers)")
        lines = []
        for t in self.explained:
            lines.append(f"{self.model}:{t.line}: layer '{t.layer}' ({t.op}) output {t.port}: "
                         f"{t.detail(self.other_name)}")
            shown = (t.isolated or {}).get("plugin_max_abs")
            lines.append(f"    {t.cause}" + (f" (on {self.other_name}'s inputs, max abs diff "
                                              f"{_num(shown)} from its output)"
                                              if shown is not None else ""))
        if self.ok:
            explained = len(self.explained)
            same = n - drift - explained
            if not drift and not explained:
                return ("the one compared tensor agrees" if n == 1 else
                        f"all {n} compared tensors agree")
            parts = [f"{same} of {n} compared tensor{'s' if n != 1 else ''} agree"
                     f"{'s' if same == 1 and n != 1 else ''}"]
            if explained:
                parts.append(f"{explained} differ{'s' if explained == 1 else ''} for the "
                             f"reason{'s' if explained != 1 else ''} given above")
            if drift:
                parts.append(carried)
            lines.append("no layer diverges on its own: " + ", ".join(parts))
            return "\n".join(lines)
        for d in self.divergences:
            first = d is self.divergences[0]
            what = "first divergent layer" if first else "also diverges on its own"
            if d.isolated:
                why = (f"given {self.other_name}'s values of its inputs, irrun's kernel does "
                       "not reproduce its output")
            elif d.unchecked_inputs:
                why = "its output differs; not all of its inputs were compared"
            else:
                why = "its inputs agree and its output does not"
            lines.append(f"{self.model}:{d.line}: layer '{d.layer}' ({d.op}): {what}: {why}")
            for t in d.tensors:
                lines.append(f"    output {t.port} {t.dtype}{_shape(t.shape)}: "
                             f"{t.detail(self.other_name)}")
                iso = t.isolated
                if iso and iso.get("status") == "differ" and (
                        iso.get("mismatches") != t.mismatches or iso.get("max_abs") != t.max_abs):
                    lines.append(f"      on {self.other_name}'s inputs: "
                                 f"{_stats_text(iso, self.other_name)}")
            if d.unchecked_inputs:
                lines.append("    inputs not compared, the divergence may start there (--layers "
                             "all compares them): " + ", ".join(d.unchecked_inputs))
        lines.append(f"{len(self.differing)} of {n} compared tensor{'s' if n != 1 else ''} "
                     f"differ{'s' if len(self.differing) == 1 else ''}"
                     + (f"; {carried}" if drift else ""))
        return "\n".join(lines)

    def report(self) -> str:
        """The text report: header, one row per tensor, what was not compared, the verdict."""
        out = [f"irrun compare: {self.model}", f"  irrun vs {self.other}",
               f"  inputs: {self.inputs}"]
        out += [f"  note: {n}" for n in self.notes]
        out.append("")
        rows = []
        for t in self.tensors:
            rows.append([t.label, t.op, f"{t.dtype}{_shape(t.shape)}", t.tolerance_text(),
                         _num(t.max_abs) if t.max_abs is not None else "-",
                         _num(t.max_rel) if t.max_rel is not None else "-",
                         f"{t.mismatches}/{t.size}",
                         f"{t.cosine:.6f}" if t.cosine is not None else "-",
                         {"agree": "ok", "drift": "drift",
                          "explained": "explained"}.get(t.status, "DIFFER")])
        if rows:
            out += _table(["tensor", "type-version", "irrun", "tolerance", "max abs",
                           "max rel", "mismatch", "cosine", ""], rows)
        if self.missing:
            out.append("")
            out.append(f"not compared ({len(self.missing)}):")
            for m in self.missing:
                out.append(f"  {self.model}:{m.line}: layer '{m.layer}' ({m.op}) output "
                           f"{m.port}: {m.reason}")
        out.append("")
        out.append(self.verdict())
        return "\n".join(out)

    def html(self) -> str:
        """The graph picture with layers coloured by agreement, the first divergent outlined."""
        return _html_report(self, self.program)


def _stats_text(stats: dict, other_name: str) -> str:
    if "error" in stats:
        return stats["error"]
    n, size = stats.get("mismatches", 0), stats.get("size", 0)
    text = f"{n} of {size} element{'s' if size != 1 else ''} differ{'s' if n == 1 else ''}"
    if stats.get("worst_index") is not None:
        text += (f"; worst at {stats['worst_index']}: irrun {_num(stats.get('irrun_value'))}, "
                 f"{other_name} {_num(stats.get('other_value'))}")
    return text


def _strict(v):
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: _strict(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_strict(x) for x in v]
    return v


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def _shape(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return format(float(v), ".6g")


def _table(header, rows) -> list[str]:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]


# ---------------------------------------------------------------- one tensor

# Ops whose every output element carries the rounding of sums over a whole axis (a mean and
# a variance, a norm): held to their tolerance relative to the tensor's magnitude.
NORMALISING_OPS = frozenset(("mvn", "groupnormalization", "normalizel2", "batchnorminference",
                             "grn", "lrn"))


def tolerance_for(etype: str, rtol: float | None = None, atol: float | None = None,
                  computed_in: str | None = None) -> dict:
    """The tolerance a tensor of `etype` is held to: {"exact": True} for integers and booleans.

    `computed_in` is the precision OpenVINO ran in (as-compiled: bf16 or f16 for f32 tensors);
    a tensor is then held to the looser of its own type's and that precision's tolerance.
    """
    if etype not in DEFAULT_TOLERANCES and not etype.startswith("f"):
        return {"exact": True}
    held = etype if etype in DEFAULT_TOLERANCES else "bf16"   # f8 types: at least bf16's slack
    r, a = DEFAULT_TOLERANCES[held]
    if computed_in in DEFAULT_TOLERANCES:
        r2, a2 = DEFAULT_TOLERANCES[computed_in]
        if r2 > r:
            held, r, a = computed_in, r2, max(a, a2)
    return {"etype": held, "rtol": float(r if rtol is None else rtol),
            "atol": float(a if atol is None else atol)}


def _as_float64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def _kind(a: np.ndarray) -> str:
    k = a.dtype.kind
    if k == "V":                           # ml_dtypes bfloat16 / float8
        return "f"
    return {"f": "f", "i": "i", "u": "i", "b": "b", "O": "s", "U": "s", "S": "s"}.get(k, "?")


def compare_tensor(a: np.ndarray, b: np.ndarray, tolerance: dict) -> dict:
    """Statistics of irrun's `a` against the other side's `b` (same shape): status, mismatches,
    max abs/rel diff, worst index and both values there, cosine similarity for floats."""
    stats = dict(size=int(a.size), mismatches=0)
    if a.size == 0:
        return dict(stats, status="agree")
    if _kind(a) == "s":
        # Strings as OpenVINO's Python API shows them: UTF-8 decoded with replacement
        # characters, trailing NULs dropped (NumPy unicode).
        def shown(x):
            return [v.encode("utf-8", "surrogateescape").decode("utf-8", "replace").rstrip("\x00")
                    if isinstance(v, str) else v.decode("utf-8", "replace").rstrip("\x00")
                    for v in np.asarray(x).reshape(-1).tolist()]
        sa, sb = shown(a), shown(b)
        bad = [i for i, (x, y) in enumerate(zip(sa, sb)) if x != y]
        flat = bad[0] if bad else 0
        return dict(stats, status="differ" if bad else "agree", mismatches=len(bad),
                    max_abs=None, max_rel=None,
                    worst_index=[int(i) for i in np.unravel_index(flat, a.shape)],
                    irrun_value=sa[flat], other_value=sb[flat])
    if tolerance.get("exact") or _kind(a) != "f":
        if _kind(a) == "b" or _kind(b) == "b":
            bad = np.asarray(a, bool) != np.asarray(b, bool)
            diff = bad.astype(np.float64)
        else:
            # Compare in the wider of the two integer types; for the size of a difference,
            # f64 (exact up to 2**53, close enough beyond).
            bad = a != b
            diff = np.abs(_as_float64(a) - _as_float64(b))
        n = int(np.count_nonzero(bad))
        flat = int(np.argmax(diff)) if n else 0
        idx = [int(i) for i in np.unravel_index(flat, a.shape)]
        return dict(stats, status="differ" if n else "agree", mismatches=n,
                    max_abs=float(diff.reshape(-1)[flat]), max_rel=None, worst_index=idx,
                    irrun_value=a.reshape(-1)[flat].item(), other_value=b.reshape(-1)[flat].item())
    if a.dtype == b.dtype and a.dtype.kind == "f" and np.array_equal(a, b, equal_nan=True):
        # Bit-equal up to NaN (most tensors of a good run): no need for the f64 arithmetic.
        flat = 0
        return dict(stats, status="agree", max_abs=0.0, max_rel=0.0,
                    cosine=1.0, worst_index=[0] * a.ndim,
                    irrun_value=float(a.reshape(-1)[flat]), other_value=float(b.reshape(-1)[flat]))
    x, y = _as_float64(a), _as_float64(b)
    rtol, atol = tolerance["rtol"], tolerance["atol"]
    if tolerance.get("whole"):
        # An op that normalises by sums over whole axes: its rounding lands on every
        # element alike, so the absolute slack is the relative one of the tensor's magnitude.
        finite = np.abs(y[np.isfinite(y)])
        atol = max(atol, rtol * float(finite.max())) if finite.size else atol
    with np.errstate(all="ignore"):
        both_nan = np.isnan(x) & np.isnan(y)
        same = (x == y) | both_nan                    # equal infinities too
        diff = np.where(same, 0.0, np.abs(x - y))
        diff = np.where(np.isnan(diff), np.inf, diff)  # NaN against a number
        scale = np.maximum(np.abs(x), np.abs(y))
        scale = np.where(np.isfinite(scale), scale, 0.0)
        allowed = atol + rtol * scale
        bad = diff > allowed
        rel = np.where(diff == 0, 0.0, diff / np.where(scale > 0, scale, 1.0))
        rel = np.where((scale == 0) & (diff > 0), np.inf, rel)
    n = int(np.count_nonzero(bad))
    # The worst element: the largest difference among those out of tolerance.
    flat = int(np.argmax(np.where(bad, diff, -1.0))) if n else int(np.argmax(diff))
    idx = [int(i) for i in np.unravel_index(flat, a.shape)]
    fin = np.isfinite(x) & np.isfinite(y)
    xf, yf = x[fin], y[fin]
    nx, ny = float(np.linalg.norm(xf)), float(np.linalg.norm(yf))
    if nx == 0 or ny == 0:
        cosine = 1.0 if nx == ny else 0.0        # two zero vectors point the same way
    else:
        cosine = float(np.dot(xf / nx, yf / ny))  # normalised first: no overflow
    return dict(stats, status="differ" if n else "agree", mismatches=n,
                max_abs=float(diff.max()), max_rel=float(rel.max()), cosine=cosine,
                worst_index=idx, irrun_value=float(x.reshape(-1)[flat]),
                other_value=float(y.reshape(-1)[flat]))


# ---------------------------------------------------------------- inputs

def generated_inputs(model, seed: int = GENERATED_SEED, shapes: dict | None = None,
                     ranges=()) -> tuple[dict, str]:
    """Inputs made up as irrun.run.inputs makes them, and the one-line note the report
    gives."""
    from ..run.inputs import generated_inputs as generate

    feed, notes = generate(model, seed, shapes, ranges)
    return feed, (f"generated (no sample inputs beside the model): random, seed {seed}: "
                  + "; ".join(notes))


def _resolve_feed(model, feed, model_path):
    if feed is None:
        from ..run.feed import sample_inputs_for
        found = sample_inputs_for(model_path)
        if found is None:
            if not model.inputs:
                return {}, "none (the model has no inputs)"
            return generated_inputs(model)
        feed = found
    if isinstance(feed, (str, os.PathLike)):
        from ..run.feed import load_npz
        return load_npz(os.fspath(feed)), os.fspath(feed)
    return feed, "given by the caller"


# ---------------------------------------------------------------- irrun's side

class _Keeper:
    """Listener keeping every layer's outputs: {(layer id, port): array}."""

    def __init__(self):
        self.values: dict[tuple[str, int], np.ndarray] = {}
        self.ran: list[str] = []

    def __call__(self, node, outputs, seconds):
        self.ran.append(node.layer.id)
        for i, a in enumerate(outputs):
            self.values[(node.layer.id, i)] = a


def _wanted_ports(program, layers: str, ran: set) -> list[tuple[str, int]]:
    """The (layer id, port) pairs to compare, in topological order."""
    result_srcs = [tuple(r.inputs[0]) for r in program.results]
    chosen = []
    for lid in program.order:
        node = program.nodes[lid]
        if node.kind != "op" or lid not in ran:
            continue
        n = len(node.specs or ())
        for i in range(n):
            key = (lid, i)
            if layers == "outputs":
                pick = key in result_srcs
            elif layers == "all":
                pick = True
            else:
                pick = key in result_srcs or fnmatch.fnmatchcase(node.layer.name, layers)
            if pick:
                chosen.append(key)
    # Model outputs straight from a Parameter or Const are outputs too.
    for key in result_srcs:
        if key not in chosen and program.nodes[key[0]].kind != "op":
            chosen.append(key)
    return chosen


# ---------------------------------------------------------------- OpenVINO's side

def _openvino():
    try:
        import openvino as ov
    except ImportError:
        raise UnsupportedError(OPENVINO_MISSING, code="no-openvino") from None
    return ov


def _ov_array(tensor, etype_is_bf16: bool, is_string: bool = False) -> np.ndarray:
    value = np.array(tensor)
    if is_string and value.dtype.kind != "U":
        value = value.astype(str)          # an empty string tensor comes back as f64
    if etype_is_bf16:
        import ml_dtypes
        # OpenVINO's Python API hands bf16 back as 16-bit words: reinterpret them.
        value = value.view(np.uint16).view(ml_dtypes.bfloat16)
    return value


def _ov_input(ov, value: np.ndarray):
    if value.dtype.name == "bfloat16":
        t = ov.Tensor(ov.Type.bf16, list(value.shape))
        t.data.view(np.uint16)[...] = value.view(np.uint16)
        return t
    if value.dtype == object:
        # A string tensor (object array of str) goes in as the bytes irrun's strings stand
        # for (see irrun.ir.etypes.decode_strings); NumPy's 'S' drops trailing NULs.
        parts = [v.encode("utf-8", "surrogateescape") for v in value.reshape(-1).tolist()]
        return np.array(parts, dtype="S").reshape(value.shape) if parts else \
            np.zeros(value.shape, dtype="S1")
    return np.ascontiguousarray(value) if value.ndim else value


def _tag(lid: str) -> str:
    return f"irrun-compare#{lid}"


def _read_tagged(core, program, ports):
    """OpenVINO's ov.Model of the file, with the op of each IR layer renamed to a unique tag.

    Friendly names are the IR layer names: a name one layer has on each side pairs them;
    then the tensor names of the output ports; then a shared name pairs layers of one op type
    in topological order. Returns the model,
    {layer id: op} and the reasons some of `ports` have no counterpart.
    """
    om = core.read_model(program.path, _bin_of(program))
    ordered = list(om.get_ordered_ops())      # one wrapper per op: ids below stay valid
    by_name: dict[str, list] = {}
    for op in ordered:
        by_name.setdefault(op.get_friendly_name(), []).append(op)
    ir_by_name: dict[str, list[str]] = {}
    for lid in program.order:
        ir_by_name.setdefault(program.nodes[lid].layer.name, []).append(lid)
    op_of: dict[str, object] = {}
    for name, lids in ir_by_name.items():
        ops = by_name.get(name, [])
        if len(lids) == 1 and len(ops) == 1:
            op_of[lids[0]] = ops[0]
    # Then by the tensor names of the output ports, which OpenVINO keeps too.
    taken = {id(op) for op in op_of.values()}
    by_tensor: dict[tuple[str, int], object] = {}
    for op in ordered:
        if id(op) not in taken:
            for out in op.outputs():
                for n in out.get_names():
                    by_tensor.setdefault((n, out.get_index()), op)
    for lid in program.order:
        if lid in op_of:
            continue
        found = {id(by_tensor[(n, i)]): by_tensor[(n, i)]
                 for i, port in enumerate(program.nodes[lid].layer.outputs)
                 for n in port.names or () if (n, i) in by_tensor}
        if len(found) == 1:
            (op,) = found.values()
            if id(op) not in taken:
                op_of[lid] = op
                taken.add(id(op))
    # Last, a name several layers share: pair within each op type ("ReLU" in the IR is
    # "Relu" in OpenVINO, "Const" is "Constant") in topological order, when both sides
    # hold as many.
    for name, lids in ir_by_name.items():
        rest = [lid for lid in lids if lid not in op_of]
        ops = [op for op in by_name.get(name, []) if id(op) not in taken]
        for kind in {_kind_key(program.nodes[lid].layer.type) for lid in rest}:
            mine = [lid for lid in rest if _kind_key(program.nodes[lid].layer.type) == kind]
            theirs = [op for op in ops if _kind_key(op.get_type_name()) == kind]
            if len(mine) == len(theirs):
                op_of.update(zip(mine, theirs))
                taken.update(id(op) for op in theirs)
    for lid, op in op_of.items():
        op.set_friendly_name(_tag(lid))
    missing = {}
    for lid, port in ports:
        op = op_of.get(lid)
        if op is None:
            missing[(lid, port)] = ("OpenVINO's model has no layer of this name or output "
                                    "tensor name (renamed or removed when it read the file, "
                                    "or the name is not unique)")
        elif port >= op.get_output_size():
            missing[(lid, port)] = f"OpenVINO's layer has {op.get_output_size()} outputs"
    return om, op_of, missing


def _kind_key(type_name: str) -> str:
    t = type_name.lower()
    return "constant" if t == "const" else t


def _result_sources(om) -> set:
    return {(r.input_value(0).get_node().get_friendly_name(), r.input_value(0).get_index())
            for r in om.get_results()}


MAX_COMPILES = 64     # compiles spent finding the outputs a plugin refuses


def split_exposable(candidates: list, works) -> tuple[list, list]:
    """(kept, refused): candidates that `works(subset)` accepts together, found by halving the
    groups it refuses; a single refused candidate is refused. `works([])` must hold."""
    kept: list = []
    refused: list = []

    def probe(group):
        if not group:
            return
        if works(kept + group):
            kept.extend(group)
        elif len(group) == 1:
            refused.append(group[0])
        else:
            probe(group[: len(group) // 2])
            probe(group[len(group) // 2:])

    probe(list(candidates))
    return kept, refused


def run_openvino(model, feeds_by_id: dict, ports: list, device: str, precision: str):
    """OpenVINO's values of `ports` ({(layer id, port): array}), the ports it could not give
    ({key: reason}), a description of the run, notes and the precision it computed in.

    OpenVINO runs in a child process: a small file can crash its CPU plugin (SIGFPE,
    SIGSEGV), which is then a located error of this model's, not the end of irrun."""
    import pickle
    import signal
    import subprocess
    import sys
    import tempfile

    _openvino()                 # not installed: the one clear error, before a child starts
    if not OPENVINO_IN_CHILD:
        return run_openvino_here(model, feeds_by_id, ports, device, precision)
    program = model.program
    with tempfile.TemporaryDirectory(prefix="irrun-compare-") as tmp:
        request, answer = os.path.join(tmp, "request.pkl"), os.path.join(tmp, "answer.pkl")
        with open(request, "wb") as f:
            pickle.dump(dict(path=program.path, weights=_bin_of(program), feeds=feeds_by_id,
                             ports=ports, device=device, precision=precision), f)
        done = subprocess.run([sys.executable, "-c", _CHILD, request, answer],
                              capture_output=True, text=True)
        if done.returncode < 0:
            try:
                name = signal.Signals(-done.returncode).name
            except ValueError:
                name = f"signal {-done.returncode}"
            raise IrrunError(f"OpenVINO's {device} plugin crashed ({name}) on this model; "
                             f"irrun's run of it completed, so this is OpenVINO's failure "
                             f"(compare it with `irrun MODEL` alone)", file=program.path,
                             code="openvino-crash")
        if not os.path.exists(answer):
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise IrrunError(f"OpenVINO's side of the comparison failed (exit status "
                             f"{done.returncode}): {last}", file=program.path, code="openvino")
        with open(answer, "rb") as f:
            outcome = pickle.load(f)       # written by our own child, never by a user
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


# False runs OpenVINO in this process (tests that stand in for its plugin with a fake Core).
OPENVINO_IN_CHILD = True

# The child: irrun's loading stages for the names (never raising for a model irrun cannot
# run: OpenVINO's side needs its layers, not its kernels), then OpenVINO.
_CHILD = """
import pickle, sys
from irrun.errors import IrrunError
from irrun.run.program import load_program
from irrun.tools.comparing import run_openvino_here
with open(sys.argv[1], "rb") as f:
    r = pickle.load(f)
class Model:
    program = load_program(r["path"], r["weights"])
try:
    outcome = run_openvino_here(Model, r["feeds"], r["ports"], r["device"], r["precision"])
except IrrunError as e:
    outcome = e
with open(sys.argv[2], "wb") as f:
    pickle.dump(outcome, f)
"""


def run_openvino_here(model, feeds_by_id: dict, ports: list, device: str, precision: str):
    """run_openvino, in this process."""
    ov = _openvino()
    program = model.program
    core = ov.Core()
    try:
        om, op_of, missing = _read_tagged(core, program, ports)
    except Exception as e:       # noqa: BLE001 - OpenVINO raises RuntimeError subclasses
        raise IrrunError(f"OpenVINO cannot read the model: {_first_line(e)}",
                         file=program.path, code="openvino") from None
    wanted = [k for k in ports if k not in missing]
    config = {"INFERENCE_PRECISION_HINT": "f32"} if precision == "f32" else {}
    notes = []
    first_error = []

    def build(extra):
        """The tagged model with `extra` ports added as outputs, compiled (or None)."""
        m, ops, _ = _read_tagged(core, program, ports)
        outs = _result_sources(m)
        add = [ops[lid].output(port) for lid, port in extra if (_tag(lid), port) not in outs]
        if add:
            m.add_outputs(add)
        try:
            return m, ops, core.compile_model(m, device, config)
        except Exception as e:   # noqa: BLE001 - OpenVINO raises RuntimeError subclasses
            first_error.append(_first_line(e))
            return None

    built = build(wanted)
    if built is None:
        base = build([])
        if base is None:
            raise IrrunError(f"OpenVINO cannot compile the model for {device}: "
                             f"{first_error[-1]}", file=program.path, code="openvino")
        # The plugin refuses some of the added outputs: find which, by halving.
        budget = [MAX_COMPILES]

        def works(subset):
            budget[0] -= 1
            return budget[0] >= 0 and build(subset) is not None

        kept, refused = split_exposable(wanted, works)
        for key in refused:
            missing[key] = (f"not exposed: the plugin cannot compile the model with it as an "
                            f"output ({first_error[0]})")
        built = build(kept) if kept else base
        notes.append(f"OpenVINO could not compile the model with {len(refused)} of the "
                     f"intermediate outputs added; they are listed under 'not compared'")
    om, op_of, compiled = built
    try:
        hint_value = compiled.get_property("INFERENCE_PRECISION_HINT")
        computed_in = str(getattr(hint_value, "get_type_name", lambda: hint_value)())
    except Exception:            # noqa: BLE001 - not every device reports it
        computed_in = None
    lid_of_tag = {_tag(lid): lid for lid in op_of}
    ov_feed = {}
    for i, p in enumerate(compiled.inputs):
        lid = lid_of_tag.get(p.get_node().get_friendly_name())
        if lid not in feeds_by_id:
            raise IrrunError(f"cannot match OpenVINO's input {i} ({', '.join(p.get_names())}) "
                             "with the model's Parameters", file=program.path, code="openvino")
        ov_feed[i] = _ov_input(ov, feeds_by_id[lid])
    try:
        results = compiled.create_infer_request().infer(ov_feed)
    except Exception as e:       # noqa: BLE001
        raise IrrunError(f"OpenVINO's {device} plugin failed to run the model: "
                         f"{_first_line(e)}", file=program.path, code="openvino") from None
    values = {}
    # The compiled model's outputs are the ov.Model's, in the same order; the compiled
    # graph's own nodes carry the plugin's names, so map through the ov.Model.
    for out, result_node in zip(compiled.outputs, om.get_results()):
        src = result_node.input_value(0)
        lid = lid_of_tag.get(src.get_node().get_friendly_name())
        key = (lid, src.get_index())
        if lid is None or key in values:
            continue
        values[key] = _ov_array(results[out], out.get_element_type() == ov.Type.bf16,
                                out.get_element_type() == ov.Type.string)
    for key in wanted:
        if key not in values and key not in missing:
            missing[key] = "not exposed: OpenVINO's compiled model has no output for it"
    hint = "INFERENCE_PRECISION_HINT f32" if precision == "f32" else \
        f"as compiled: inference precision {computed_in}"
    desc = f"OpenVINO {ov.get_version().split('-')[0]} {device} ({hint})"
    return values, missing, desc, notes, _precision_name(computed_in)


def _precision_name(text) -> str | None:
    if text is None:
        return None
    t = text.lower()
    for name in ("bf16", "f16", "f32"):
        if t == name or t.endswith(name):
            return name
    return None


def _bin_of(program) -> str | None:
    w = getattr(program, "weights", None)
    path = getattr(w, "path", None)
    if path and os.path.exists(path):
        return path
    guess = os.path.splitext(program.path)[0] + ".bin"
    return guess if os.path.exists(guess) else None


def _first_line(e: Exception) -> str:
    lines = [s.strip() for s in str(e).splitlines() if s.strip()]
    # OpenVINO's messages open with "Exception from src/...cpp:NN:" lines: skip those.
    useful = [s for s in lines if not s.startswith("Exception from") and not s.startswith("[")]
    return (useful or lines or [type(e).__name__])[0]


# ---------------------------------------------------------------- reference file

def _reference_values(model, reference: dict, ran: set) -> dict:
    """{(layer id, port): array} for each key of a reference .npz: an output name, a tensor
    name, `layer:port` or a layer name (its output 0)."""
    program = model.program
    names: dict[str, tuple[str, int]] = {}
    for info, r in zip(model.outputs, program.results):
        for n in info.names:
            names.setdefault(n, tuple(r.inputs[0]))
    for lid in program.order:
        node = program.nodes[lid]
        if node.kind == "result":
            continue
        for i, port in enumerate(node.layer.outputs):
            for n in port.names or ():
                names.setdefault(n, (lid, i))
        for i in range(len(node.specs or ())):
            names.setdefault(f"{node.layer.name}:{i}", (lid, i))
        if node.specs:
            names.setdefault(node.layer.name, (lid, 0))
    values = {}
    unknown = [k for k in reference if k not in names]
    if unknown:
        raise FeedError(f"the reference file holds {', '.join(repr(k) for k in unknown)}, which "
                        "name no output, tensor or layer of the model (use output names, tensor "
                        "names, 'layer:port' or layer names)", file=program.path)
    for k, v in reference.items():
        key = names[k]
        if key[0] not in ran:
            raise FeedError(f"the reference value '{k}' is of layer "
                            f"'{program.nodes[key[0]].layer.name}', which no Result needs, so "
                            "irrun does not run it", file=program.path)
        values[key] = np.asarray(v)
    return values


# ---------------------------------------------------------------- the comparison

def compare(model_path, feed=None, *, reference=None, device: str = "CPU", layers: str = "all",
            rtol: float | None = None, atol: float | None = None, precision: str = "f32",
            weights=None) -> CompareResult:
    """Run `model_path` in irrun and in OpenVINO (or against `reference`) and compare them.

    feed: {input name: array}, an .npz path, or None for the sample inputs beside the model
    (<stem>.inputs.npz or inputs.npz), else generated ones (random, seeded, as benchmark_app).
    reference: {name: array} or an .npz path of values to compare with instead of OpenVINO
    (output names, tensor names, `layer:port` or layer names as keys).
    layers: "all" (every op's every output), "outputs", or a glob on layer names (plus the
    outputs). rtol/atol override the per-type defaults (DEFAULT_TOLERANCES) for float tensors.
    precision: "f32" (INFERENCE_PRECISION_HINT f32) or "as-compiled" (the device's default).
    """
    from ..run.model import read_model

    if precision not in ("f32", "as-compiled"):
        raise ValueError(f"precision must be 'f32' or 'as-compiled', got {precision!r}")
    path = os.fspath(model_path)
    if reference is None:
        _openvino()          # fail before the irrun run when there is nothing to compare with
    model = read_model(path, weights)
    program = model.program
    feed, source = _resolve_feed(model, feed, path)
    keeper = _Keeper()
    model.infer(feed, listener=keeper)
    ran = set(keeper.ran)
    # The feed checked and cast to each Parameter's type (also those no Result needs,
    # which OpenVINO still takes as inputs), keyed by layer id.
    feeds_by_id = model._feeds(feed)
    notes: list[str] = []
    computed_in = None
    if reference is not None:
        if isinstance(reference, (str, os.PathLike)):
            from ..run.feed import load_npz
            other_desc = f"reference {os.fspath(reference)}"
            reference = load_npz(os.fspath(reference))
        else:
            other_desc = "reference values"
        other = _reference_values(model, reference, ran)
        position = {lid: i for i, lid in enumerate(program.order)}
        ports = sorted(other, key=lambda k: (position[k[0]], k[1]))
        missing_reasons: dict = {}
        other_name = "reference"
    else:
        ports = _wanted_ports(program, layers, ran)
        other, missing_reasons, other_desc, ov_notes, computed_in = run_openvino(
            model, feeds_by_id, ports, device, precision)
        notes += ov_notes
        other_name = "OpenVINO"
        if precision == "f32":
            computed_in = None
        if layers == "all":
            notes.append("intermediate outputs added to OpenVINO's model can keep its plugin "
                         "from fusing those layers, as with any tool that marks them")
    result = CompareResult(path, other_desc, other_name, source, notes=notes,
                           program=program)
    for key in ports:
        lid, port = key
        node = program.nodes[lid]
        layer = node.layer
        if key in missing_reasons or key not in other:
            result.missing.append(Missing(layer.name, lid, port, layer.op_label, layer.line,
                                          missing_reasons.get(key, "no value")))
            continue
        result.tensors.append(_tensor_result(node, port, keeper.values[key], other[key],
                                             rtol, atol, computed_in, other_name))
    # Layers no Result needs: irrun does not run them (OpenVINO drops them too).
    if reference is None:
        for lid in program.order:
            node = program.nodes[lid]
            if node.kind == "op" and lid not in ran and layers != "outputs" and (
                    layers == "all" or fnmatch.fnmatchcase(node.layer.name, layers)):
                for i in range(len(node.specs or ()) or 1):
                    result.missing.append(Missing(node.layer.name, lid, i, node.layer.op_label,
                                                  node.layer.line, "no Result needs this layer, "
                                                  "so irrun does not run it"))
    # A differing tensor whose layer, run by irrun on the other side's inputs, reproduces
    # the other side's output only carries its inputs' difference: it drifts. One that
    # OpenVINO's CPU plugin computed with its saturated int8 sums (no VNNI on this CPU) and
    # that irrun reproduces with those sums is explained.
    saturating = (reference is None and device.upper().startswith("CPU")
                  and plugin_int8.host_saturates())
    for t in result.tensors:
        if t.status == "differ" and t.reason is None and _tie_order_only(program, t,
                                                                         keeper.values, other):
            t.status, t.cause = "explained", TIE_ORDER_CAUSE
            continue
        if t.status == "differ" and t.reason is None:
            t.isolated = _isolate(program, t, keeper.values, feeds_by_id, other, rtol, atol,
                                  saturating)
            if t.isolated is not None and t.isolated.get("status") == "agree":
                t.status = "drift"
            elif t.isolated is not None and t.isolated.get("plugin_int8"):
                t.status, t.cause = "explained", plugin_int8.CAUSE
    result.divergences = _divergences(program, result)
    return result


def _tensor_result(node, port, a, b, rtol, atol, computed_in, other: str) -> TensorResult:
    layer = node.layer
    spec = node.specs[port] if node.specs and port < len(node.specs) else None
    etype = spec.etype.name if spec is not None else a.dtype.name
    names = list(layer.outputs[port].names) if port < len(layer.outputs) else []
    a, b = np.asarray(a), np.asarray(b)
    tol = tolerance_for(etype, rtol, atol, computed_in)
    if layer.type.lower() in NORMALISING_OPS and "rtol" in tol and atol is None:
        tol = dict(tol, whole=True)
    base = dict(layer=layer.name, layer_id=layer.id, port=port, op=layer.op_label,
                line=layer.line, names=names, shape=[int(d) for d in a.shape], dtype=etype,
                other_shape=[int(d) for d in b.shape], other_dtype=_dtype_name(b),
                tolerance=tol)
    if a.shape != b.shape:
        return TensorResult(status="differ", size=int(a.size), mismatches=int(a.size),
                            reason=f"shape {_shape(a.shape)} in irrun, {_shape(b.shape)} in "
                                   f"{other}", **base)
    if _kind(a) != _kind(b) or "?" in (_kind(a), _kind(b)):
        return TensorResult(status="differ", size=int(a.size), mismatches=int(a.size),
                            reason=f"element type {etype} in irrun, {_dtype_name(b)} in "
                                   f"{other}", **base)
    stats = compare_tensor(a, b, tol)
    return TensorResult(**base, **stats)


def _dtype_name(a: np.ndarray) -> str:
    from ..ir.etypes import from_dtype
    try:
        return from_dtype(a.dtype).name
    except Exception:          # noqa: BLE001 - any dtype irrun has no name for
        return a.dtype.name


def _divergences(program, result: CompareResult) -> list[Divergence]:
    """Layers that diverge on their own, in topological order.

    A layer whose differing output was checked in isolation (irrun's kernel on the other
    side's inputs) diverges when that check fails. Otherwise (an input has no value on the
    other side) it diverges when none of its inputs is known to differ: a port that was not
    compared is 'tainted' when its layer has a tainted or differing input, since a divergence
    upstream explains whatever it holds.
    """
    status = {(t.layer_id, t.port): t for t in result.tensors}
    tainted: set[tuple[str, int]] = set()
    found = []
    for lid in program.order:
        node = program.nodes[lid]
        if node.kind == "result":
            continue
        inputs = [tuple(s) for s in node.inputs]
        bad_in = [s for s in inputs if s in tainted]
        unchecked = [s for s in inputs if s not in status and s not in tainted
                     and program.nodes[s[0]].kind == "op"]
        mine = [status[(lid, i)] for i in range(len(node.specs or ())) if (lid, i) in status]
        differing = [t for t in mine if t.status == "differ"]
        isolated = bool(differing) and all(t.isolated is not None and "error" not in t.isolated
                                           for t in differing)
        if differing and (isolated or not bad_in):
            layer = node.layer
            found.append(Divergence(layer.name, lid, layer.op_label, layer.line, differing,
                                    [] if isolated else
                                    [f"{program.nodes[s[0]].layer.name}:{s[1]}"
                                     for s in unchecked], isolated))
        for i in range(len(node.specs or ())):
            key = (lid, i)
            t = status.get(key)
            if (t is not None and t.status != "agree") or (t is None and bad_in):
                tainted.add(key)
    return found


# ---------------------------------------------------------------- isolation

# Ops whose output is a step function of input 0: where the input sits within rounding noise
# of a step (a FakeQuantize level boundary, a .5 for Round), the two sides may fairly land on
# either side, so the isolated check also accepts the output of a slightly nudged input.
STEP_OPS = {"FakeQuantize", "Round", "Floor", "Ceiling", "Convert"}
# Ops with effects beyond their outputs (state) are never run a second time.
STATEFUL_OPS = {"ReadValue", "Assign"}


TIE_ORDER_CAUSE = ("the same values, equal ones taken in another order: TopK with stable=false "
                   "leaves the order of ties open, and OpenVINO's CPU plugin breaks them its own "
                   "way (which differs from CPU to CPU); not a divergence")


def _tie_order_only(program, t: TensorResult, keeper_values: dict, other: dict) -> bool:
    """Whether `t` is a TopK's indices that differ from the other side's only where the
    values they pick are equal: each position's index points at the same value on both
    sides (and the values output is the same), so only the order of ties differs."""
    node = program.nodes[t.layer_id]
    if node.layer.type.lower() != "topk" or t.port != 1 or getattr(node.attrs, "stable", False):
        return False
    mine, theirs = keeper_values.get((t.layer_id, 1)), other.get((t.layer_id, 1))
    src = node.inputs[0] if node.inputs else None
    data = keeper_values.get(tuple(src)) if src is not None else None
    if mine is None or theirs is None or data is None or mine.shape != theirs.shape:
        return False
    data = np.asarray(data)
    axis = node.attrs.axis % data.ndim if data.ndim else 0
    limit = data.shape[axis] if data.ndim else 1
    theirs = np.asarray(theirs)
    if mine.size == 0 or theirs.min() < 0 or theirs.max() >= limit:
        return False
    picked = np.take_along_axis(data, np.asarray(mine, np.int64), axis)
    other_picked = np.take_along_axis(data, theirs.astype(np.int64), axis)
    # The same value at every position: both sides made a valid choice among equal values.
    return bool(np.array_equal(picked, other_picked, equal_nan=picked.dtype.kind in "fc"))


def _isolate(program, t: TensorResult, keeper_values: dict, feeds_by_id: dict, other: dict,
             rtol, atol, saturating: bool = False):
    """Run irrun's kernel of `t`'s layer on the other side's values of its inputs and compare
    with the other side's output: the statistics, {"error": ...}, or None when an input has
    no value on the other side. With `saturating` (OpenVINO's CPU plugin on a CPU without
    VNNI), an int8 Convolution or MatMul that differs is also computed with the plugin's
    sums (irrun.tools.plugin_int8); the statistics then say `plugin_int8` when those agree."""
    from ..run.executor import check_inputs

    node = program.nodes[t.layer_id]
    if node.kind != "op" or node.layer.type in STATEFUL_OPS or node.op is None:
        return None
    args, etypes = [], []
    for src in node.inputs:
        src = tuple(src)
        producer = program.nodes[src[0]]
        mine = keeper_values.get(src)
        if producer.kind == "const":
            value = mine
        elif producer.kind == "parameter":
            value = feeds_by_id.get(src[0], mine)
        elif src in other:
            value = other[src]
        else:
            return None
        if mine is None or np.shape(value) != np.shape(mine) or _kind(np.asarray(value)) != \
                _kind(mine):
            return None
        args.append(np.asarray(value).astype(mine.dtype, copy=False))
        etypes.append(producer.specs[src[1]].etype)
    want = np.asarray(other[(t.layer_id, t.port)])

    def run(inputs):
        check_inputs(node, etypes, inputs)
        with np.errstate(all="ignore"):
            return np.asarray(node.op.run(node.attrs, *inputs)[t.port])

    try:
        got = run(args)
    except Exception as e:     # noqa: BLE001 - a kernel refusing the other side's values
        return {"error": f"irrun's kernel refuses the other side's inputs: "
                         f"{getattr(e, 'message', None) or e}"}
    if got.shape != want.shape or _kind(got) != _kind(want):
        return {"error": f"on the other side's inputs irrun's kernel gives "
                         f"{_dtype_name(got)}{_shape(got.shape)}"}
    tol = t.tolerance
    stats = compare_tensor(got, want, tol)
    if stats["status"] != "agree" and node.layer.type in STEP_OPS and args and \
            _kind(args[0]) == "f" and args[0].size:
        x = args[0].astype(np.float64)
        in_tol = tolerance_for(etypes[0].name, rtol, atol)
        nudge = in_tol["atol"] + in_tol["rtol"] * np.abs(x)
        fits = _matches(got, want, tol)
        for sign in (-1.0, 1.0):
            try:
                moved = run([(x + sign * nudge).astype(args[0].dtype)] + args[1:])
            except Exception:  # noqa: BLE001
                continue
            fits |= _matches(moved, want, tol)
        if fits.all():
            stats = dict(stats, status="agree", stepped=int(stats["mismatches"]))
    if stats["status"] != "agree" and saturating and t.port == 0:
        try:
            theirs = plugin_int8.plugin_output(program, node, args, keeper_values)
        except (ValueError, TypeError):   # inputs of shapes the emulation does not take
            theirs = None
        if theirs is not None and theirs.shape == want.shape:
            emulated = compare_tensor(theirs.astype(want.dtype), want, tol)
            if emulated["status"] == "agree":
                stats = dict(stats, plugin_int8=True, plugin_max_abs=emulated["max_abs"])
    return stats


def _matches(a: np.ndarray, b: np.ndarray, tol: dict) -> np.ndarray:
    """Elementwise agreement, by compare_tensor's rule."""
    if tol.get("exact") or _kind(a) != "f":
        return np.asarray(a == b)
    x, y = _as_float64(a), _as_float64(b)
    with np.errstate(all="ignore"):
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        return same | (np.abs(x - y) <= tol["atol"] + tol["rtol"] * np.maximum(np.abs(x),
                                                                                np.abs(y)))


# ---------------------------------------------------------------- HTML

AGREE_COLOR, DRIFT_COLOR, DIFFER_COLOR = "#c9f0c9", "#ffe8a8", "#ffc4c4"
UNCHECKED_COLOR, FIRST_COLOR = "#eeeeee", "#d00000"


def _html_report(result: CompareResult, program) -> str:
    """irrun graph's built-in SVG layout, recoloured by CSS: green agree, red differ, grey not
    compared; the first divergent layer outlined. Self-contained, no network."""
    from . import drawing

    svg = drawing._strip_prolog(drawing.layout_svg(program))
    by_layer: dict[str, list[TensorResult]] = {}
    for t in result.tensors:
        by_layer.setdefault(t.layer_id, []).append(t)
    first = result.first_divergent
    e = html.escape
    # Each layer's tooltip (its SVG <title>) gets a line per compared port.
    for lid, ts in by_layer.items():
        head = f'<g class="node" id="L{e(lid)}"><title>'
        lines = "".join(f"\n{e(t.label)}: " + ("agrees" if t.status == "agree" else
                                               e(t.detail(result.other_name)))
                        for t in ts)
        at = svg.find(head)
        end = svg.find("</title>", at) if at >= 0 else -1
        if end >= 0:
            svg = svg[:end] + lines + svg[end:]
    rules = []
    for lid, node in program.nodes.items():
        ts = by_layer.get(lid)
        if ts is None:
            if node.kind in ("parameter", "const", "result"):
                continue
            color = UNCHECKED_COLOR
        else:
            worst = {t.status for t in ts}
            color = DIFFER_COLOR if "differ" in worst else DRIFT_COLOR if worst & {
                "drift", "explained"} else AGREE_COLOR
        sel = f'g.node[id="L{_css(lid)}"] > rect'
        rules.append(f"{sel} {{ fill: {color}; }}")
    if first is not None:
        rules.append(f'g.node[id="L{_css(first.layer_id)}"] > rect {{ stroke: {FIRST_COLOR}; '
                     "stroke-width: 5px; stroke-dasharray: 8 3; }")
    rows = "".join(
        f'<tr class="{t.status}"><td>{e(t.label)}</td><td>{e(t.op)}</td>'
        f"<td>{e(t.dtype + _shape(t.shape))}</td><td>{e(t.tolerance_text())}</td>"
        f"<td>{_num(t.max_abs)}</td><td>{_num(t.max_rel)}</td><td>{t.mismatches}/{t.size}</td>"
        f"<td>{'' if t.cosine is None else f'{t.cosine:.6f}'}</td>"
        f"<td>{e(t.detail(result.other_name) if t.status != 'agree' else 'ok')}</td></tr>"
        for t in result.tensors)
    missing = "".join(f"<li>{e(m.layer)}:{m.port} ({e(m.op)}): {e(m.reason)}</li>"
                      for m in result.missing)
    title = os.path.basename(result.model)
    legend = (f'<span class="key" style="background:{AGREE_COLOR}">agrees</span>'
              f'<span class="key" style="background:{DRIFT_COLOR}">differs through its '
              'inputs</span>'
              f'<span class="key" style="background:{DIFFER_COLOR}">differs on its own</span>'
              f'<span class="key" style="background:{UNCHECKED_COLOR}">not compared</span>'
              f'<span class="key" style="border:3px dashed {FIRST_COLOR}">first divergent</span>')
    css = "\n".join(rules)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>compare {e(title)}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 1em; }}
.key {{ display: inline-block; padding: 2px 8px; margin: 2px; border: 1px solid #999;
        border-radius: 4px; font-size: 12px; }}
.graph {{ overflow: auto; border: 1px solid #ddd; margin: 0.5em 0; }}
table {{ border-collapse: collapse; font-size: 12px; font-family: monospace; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: left; }}
tr.differ td {{ background: {DIFFER_COLOR}; }} tr.drift td {{ background: {DRIFT_COLOR}; }}
pre {{ background: #f6f6f6; padding: 0.5em; }}
{css}
</style></head>
<body>
<h1>irrun compare: {e(title)}</h1>
<p>irrun vs {e(result.other)}; inputs: {e(result.inputs)}</p>
<pre>{e(result.verdict())}</pre>
<div class="legend">{legend}</div>
<div class="graph">
{svg}</div>
<table><tr><th>tensor</th><th>type-version</th><th>irrun</th><th>tolerance</th><th>max abs</th>
<th>max rel</th><th>mismatch</th><th>cosine</th><th></th></tr>
{rows}</table>
<h2>Not compared</h2><ul>{missing or "<li>none</li>"}</ul>
</body></html>
"""


def _css(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


__all__ = [
    "DEFAULT_TOLERANCES",
    "CompareResult",
    "Divergence",
    "Missing",
    "TensorResult",
    "compare",
    "compare_tensor",
    "generated_inputs",
    "split_exposable",
    "tolerance_for",
]
