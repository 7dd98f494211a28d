"""Bodies of Loop, TensorIterator and If: port maps checked against the body networks, and
the handle through which the control-flow kernels (ops/control.py) infer and run a body.

The kernels see plain records only: `ControlAttrs.bodies` holds one `BodyView` per body
(a Loop's or TensorIterator's `body`; an If's `then_body` and `else_body`), whose rules name
the layer's inputs and outputs by position and the body's Parameters and Results by index
(document order). `Body.infer(specs)` and `Body.run(arrays)` map the Parameters' specs or
values to the Results' ones.

This module sits below the loader and the executor and imports neither: a Body is handed
what it needs. The loader gives it the network inference pass (`attach(..., infer_network)`);
the run in progress gives it the body runner (`RunContext.run_body`, set by the executor),
as torch.fx's Interpreter hands each node to `run_node`.
"""
from __future__ import annotations

import contextvars
import weakref
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import Collector, IrrunError, ResourceError
from ..ir.shapes import TensorSpec, format_shape
from ..ir.weights import max_tensor_bytes


@dataclass(frozen=True)
class InputRule:
    """A layer input feeding a body Parameter; sliced along `axis` when it is not None."""

    position: int            # the layer's input index
    parameter: int           # the body Parameter's index
    axis: int | None = None
    start: int = 0
    end: int = -1
    stride: int = 1
    part_size: int = 1


@dataclass(frozen=True)
class OutputRule:
    """A body Result giving a layer output: its last value, or all values concatenated."""

    position: int            # the layer's output index
    result: int              # the body Result's index
    axis: int | None = None
    start: int = 0
    end: int = -1
    stride: int = 1
    part_size: int = 1


@dataclass(frozen=True, eq=False)
class BodyView:
    body: Body
    inputs: tuple[InputRule, ...]
    outputs: tuple[OutputRule, ...]
    back_edges: tuple[tuple[int, int], ...]     # (Result index, Parameter index)
    current_iteration: int | None = None        # Loop: the Parameter given the iteration number
    condition: int | None = None                # Loop: the Result deciding the next iteration


@dataclass(frozen=True, eq=False)
class ControlAttrs:
    """What a Loop, TensorIterator or If layer hands its kernel instead of <data> attributes."""

    bodies: tuple[BodyView, ...]
    n_outputs: int

    @property
    def body(self) -> BodyView:
        return self.bodies[0]


class BodyFailed(IrrunError):
    """The body's inference found problems (reported inside the body, at their lines)."""

    code = "body"


# Every body run (a Loop's or TensorIterator's iteration, an If's branch) counts as
# ITERATION_BYTES against the memory limit (IRRUN_MAX_BYTES), whatever its tensors hold: a
# run, its nested bodies' runs included, makes at most limit // ITERATION_BYTES of them
# (3 million under 12 GiB). An iteration over empty tensors is still work (a small body's
# run takes some 35 us), and a port map's end=2**62, a trip count of 2**62 or a [5000000, 0]
# input asks for that many from a file of a few hundred bytes. A count known before the
# first iteration (a TensorIterator's, a Loop's that its condition cannot stop) is refused
# before it; any other at the first body run past the limit.
ITERATION_BYTES = 4096


def max_body_runs() -> int:
    """The most body runs one run makes (see ITERATION_BYTES)."""
    return max_tensor_bytes() // ITERATION_BYTES


class BodyRuns:
    """The body runs of one run so far (its nested levels share it), and the most it makes
    (read at its first body run)."""

    __slots__ = ("done", "limit")

    def __init__(self):
        self.done = 0
        self.limit = None


def _limit_words() -> str:
    return (f"each counts as {ITERATION_BYTES} bytes against the memory limit of "
            f"{max_tensor_bytes()} bytes (set IRRUN_MAX_BYTES to change it)")


@dataclass(frozen=True)
class RunContext:
    """What a body running inside a layer takes from the run in progress."""

    listener: object            # trace/profile: a body's layers are reported through its
                                # `for_body(program)` when it has one
    state: object               # the session's variables: a body's ReadValue/Assign share them
    run_body: Callable          # run_body(body, arrays) -> the body's Results' values
    runs: BodyRuns              # the body runs of the whole run, its nested levels' included


current_run: contextvars.ContextVar = contextvars.ContextVar("irrun_run", default=None)


class Body:
    """One body network of a layer, ready to be inferred and run by the layer's kernel."""

    def __init__(self, owner, program, infer_network, back_edges=()):
        self._owner = weakref.ref(owner)         # the Loop/TensorIterator/If node (weak:
                                                 # the node holds this body, see Node.program)
        self.program = program
        self._infer_network = infer_network
        self.parameter_ids = [n.id for n in program.parameters]
        self.result_ids = [n.id for n in program.results]
        self._back_edges = back_edges            # (Result id, Parameter id, line)
        self.diagnostics: list = []              # of the last infer()
        self.inferred = False                    # infer() ran at least once
        self.plans = None                        # the body runner's plans, made on first run
        self._last_key = self._last_out = None   # infer()'s last specs and results

    @property
    def owner(self):
        return self._owner()

    @property
    def parameters(self) -> tuple[TensorSpec | None, ...]:
        """The specs the body's Parameters declare (their element_type and shape)."""
        out = []
        for node in self.program.parameters:
            try:
                out.append(node.op.infer(node.attrs)[0] if node.op and node.attrs else None)
            except IrrunError:
                out.append(None)
        return tuple(out)

    def infer(self, specs) -> list[TensorSpec]:
        """The Results' specs when the Parameters receive `specs` (None: as declared).

        Problems are kept for the layer to report (only the last call's: a Loop infers its
        body until the shapes settle); BodyFailed when there are errors.
        """
        self.inferred = True
        key = _specs_key(specs)
        if key is not None and key == self._last_key:
            # The same specs as the last inference, which succeeded: its results stand (a
            # Loop's rule and its settling pass ask twice; nested Loops would ask 2^depth
            # times). Only the last call is kept: the body's nodes hold its specs.
            return list(self._last_out)
        self._last_key = self._last_out = None
        diag = Collector(file=self.program.path)
        given = {pid: s for pid, s in zip(self.parameter_ids, specs) if s is not None}
        self._infer_network(self.program, diag, given)
        nodes = self.program.nodes
        out = [self._result_spec(rid) for rid in self.result_ids]
        for rid, pid, line in self._back_edges:
            r, p = self._result_spec(rid), nodes[pid].specs
            if r is None or not p:
                continue
            p = p[0]
            if r.etype != p.etype:
                diag.error("body-type", f"back edge from Result '{nodes[rid].layer.name}' (id "
                           f"{rid}) brings {r.etype.name} to Parameter '{nodes[pid].layer.name}' "
                           f"(id {pid}), which is {p.etype.name}", line=line,
                           layer=self.owner.layer)
            elif not _shapes_compatible(r.shape, _declared_shape(nodes[pid])):
                diag.error("body-shape", f"back edge from Result '{nodes[rid].layer.name}' (id "
                           f"{rid}) brings shape {format_shape(r.shape)} to Parameter "
                           f"'{nodes[pid].layer.name}' (id {pid}), which declares "
                           f"{format_shape(_declared_shape(nodes[pid]))}", line=line,
                           layer=self.owner.layer)
        self.diagnostics = diag.items
        errors = [d for d in diag.items if d.severity == "error"]
        if errors or any(s is None for s in out):
            lines = ", ".join(str(d.line) for d in errors[:5])
            raise BodyFailed(f"its {self.program.doc.name.rsplit('/', 1)[-1]} has "
                             f"{len(errors) or 'uninferred'} error{'s' if len(errors) != 1 else ''}"
                             + (f" (at line {lines})" if lines else ""))
        self.plans = None    # the specs changed: plan again at the next run
        self._last_key, self._last_out = key, list(out)
        return out

    def forget(self) -> None:
        """The body's nodes are about to be inferred apart from infer(): its last results
        no longer describe them."""
        self._last_key = self._last_out = None

    @property
    def results(self) -> tuple[TensorSpec | None, ...]:
        """The Results' specs from the last infer() (what every iteration's values fit)."""
        return tuple(self._result_spec(rid) for rid in self.result_ids)

    def _result_spec(self, rid):
        node = self.program.nodes[rid]
        if not node.inputs or node.inputs[0] is None:
            return None
        src, out = node.inputs[0]
        made = self.program.nodes[src].specs
        return made[out] if made is not None and out < len(made) else None

    def check_iterations(self, count: int, what: str) -> None:
        """Refuse, before the first, `count` iterations of this body that the run cannot make
        (see ITERATION_BYTES); `what` says where the count comes from ("the slicing gives").
        At load (no run in progress) the whole limit is left."""
        context = current_run.get()
        runs = context.runs if context is not None else None
        limit = runs.limit if runs is not None and runs.limit is not None else max_body_runs()
        done = runs.done if runs is not None else 0
        if count > limit - done:
            left = (f"the {limit - done} body runs this run has left of its {limit}" if done
                    else f"the {limit} body runs a run makes at most")
            raise ResourceError(f"{what} {count} iterations, more than {left}: "
                                + _limit_words())

    def run(self, arrays) -> list:
        """The Results' values for the Parameters' values (by index), run by the run in
        progress (a body runs only inside its layer's kernel)."""
        context = current_run.get()
        if context is None:
            raise RuntimeError("a body runs only inside a run (no run context is set)")
        runs = context.runs
        runs.done += 1
        if runs.limit is None:
            runs.limit = max_body_runs()
        if runs.done > runs.limit:
            # Not located here: the layer whose kernel asked for the run is (the executor).
            raise ResourceError(f"this would be body run {runs.done} of the run (Loop and "
                                f"TensorIterator iterations and If branches, nested ones "
                                f"included), more than the {runs.limit} a run makes at most: "
                                + _limit_words())
        try:
            return context.run_body(self, arrays)
        except IrrunError as e:
            # Located at the body's layer; say which layer's body it is (once per level).
            owner = self.owner.layer
            role = self.program.doc.name.rsplit("/", 1)[-1]
            e.diagnostic.message += f" (in the {role} of layer '{owner.name}' ({owner.op_label}))"
            e.args = (e.diagnostic.message,)
            raise


def _specs_key(specs):
    """What infer() depends on of the Parameters' specs, hashable; None when a spec holds
    something that cannot be keyed (then nothing is reused)."""
    key = []
    for s in specs:
        if s is None:
            key.append(None)
            continue
        value = None
        if s.value is not None:
            v = np.asarray(s.value)
            if v.dtype.kind == "O" or v.size > 64:
                return None
            value = (v.dtype.str, v.shape, v.tobytes())
        key.append((s.etype.name, s.shape, value, s.dims))
    try:
        hash(tuple(key))
    except TypeError:
        return None
    return tuple(key)


def _declared_shape(node):
    try:
        return node.op.infer(node.attrs)[0].shape
    except IrrunError:       # a bad shape attribute: reported at the Parameter already
        return None


def _shapes_compatible(a, b) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x.compatible(y) for x, y in zip(a, b))


def body_parameter_spec(node, given: TensorSpec | None, diag: Collector):
    """A body Parameter's spec: what the layer feeds it, checked against its declaration.

    element_type="dynamic" (OpenVINO's converters write it in TensorIterator/Loop bodies)
    declares nothing: the Parameter takes the type the port map feeds it, as in OpenVINO."""
    if given is not None and getattr(node.attrs, "element_type", None) in ("dynamic", "undefined"):
        return [given]
    declared = None
    try:
        declared = node.op.infer(node.attrs)[0]
    except IrrunError as e:
        diag.error(e.diagnostic.code, e.message, layer=node.layer)
        return None
    if given is None:
        return [declared]
    if declared.etype.name != "dynamic" and given.etype != declared.etype:
        owner = node.program.owner.layer
        diag.error("body-type", f"the body Parameter is {declared.etype.name}, but layer "
                   f"'{owner.name}' ({owner.op_label}) feeds it {given.etype.name}",
                   line=node.layer.data_line or node.layer.line, layer=node.layer)
        return None
    # OpenVINO sets a body Parameter's shape from what the layer feeds it, so the declared
    # shape is not checked here (a Loop's back edges may change it from one iteration to
    # the next; the back edges are checked against the declaration instead).
    return [given]


def flush(node, diag: Collector) -> None:
    """Report the problems of the last inference of each of the node's bodies."""
    attrs = node.attrs
    if not isinstance(attrs, ControlAttrs):
        return
    for view in attrs.bodies:
        diag.items.extend(view.body.diagnostics)
        view.body.diagnostics = []


# Per op type: the inputs that are not body inputs (Loop's trip count and condition, If's
# condition), and the bodies it needs.
_RESERVED = {"loop": 2, "if": 1}


def attach(node, diag: Collector, infer_network: Callable) -> None:
    """Check the layer's port maps and back edges against its bodies; give the kernel its
    ControlAttrs, or unbind the op (node.op = None) after reporting the problems.
    `infer_network(program, diag, given)` is what the bodies infer with."""
    layer = node.layer
    op = node.op
    expected = getattr(op.impl, "BODIES", ()) if op is not None else ()
    if op is None:
        return
    if not expected:
        diag.warning("bad-body", f"{op.label} has no body; the layer's <{layer.bodies[0].role}> "
                     "is ignored", line=layer.bodies[0].line, layer=layer)
        return
    present = {sub.role: (sub, prog) for sub, prog in zip(layer.bodies, node.bodies)}
    missing = [r for r in expected if r not in present]
    if missing:
        diag.error("bad-body", f"{op.label} needs a <{'> and a <'.join(missing)}>", layer=layer)
        node.op = None
        return
    reserved = _RESERVED.get(layer.type.lower(), 0)
    ok = True
    views = []
    covered: list[set[int]] = []
    for role in expected:
        sub, prog = present[role]
        view, fine, outs = _view(node, role, sub, prog, reserved, diag, infer_network)
        ok &= fine
        views.append(view)
        covered.append(outs)
    for role, outs in zip(expected, covered):
        for port in layer.outputs:
            if port.id is not None and port.index not in outs:
                diag.error("bad-port-map", f"output port {port.id} is not in the {role}'s port "
                           "map (no body Result gives its value)", line=port.line, layer=layer)
                ok = False
    node.views = tuple(views)
    if not ok:
        node.op = None
        return
    node.attrs = ControlAttrs(tuple(views), len(layer.outputs))


def _ids(table) -> str:
    return ", ".join(table) or "none"


def _view(node, role, sub, prog, reserved, diag, infer_network):
    layer = node.layer
    params = {n.id: i for i, n in enumerate(prog.parameters)}
    results = {n.id: i for i, n in enumerate(prog.results)}
    inputs, outputs = [], []
    fed: dict[int, int] = {}         # parameter index -> port map line
    out_seen: dict[int, int] = {}    # output position -> line
    cur = cond = None
    ok = True
    where = f"the {role}"

    def bad(message, line):
        nonlocal ok
        diag.error("bad-port-map", message, line=line, layer=layer)
        ok = False

    for e in sub.port_map:
        if e.broken:
            ok = False
            continue
        inp = e.kind == "input"
        table, what = (params, "Parameter") if inp else (results, "Result")
        iid = e.internal_layer_id
        if iid not in table:
            other = prog.nodes.get(iid)
            got = f" (layer {iid} is a {other.layer.type})" if other is not None else ""
            bad(f"port map <{e.kind}> internal_layer_id={iid}: {where} has no {what} with id "
                f"{iid}{got}; its {what}s: {_ids(table)}", e.line)
            continue
        index = table[iid]
        if e.purpose is not None:
            want = "input" if e.purpose == "current_iteration" else "output"
            if e.kind != want or layer.type.lower() != "loop":
                bad(f"port map <{e.kind}> purpose='{e.purpose}' belongs on a Loop's <{want}>",
                    e.line)
            elif e.purpose == "current_iteration":
                cur = index
            else:
                cond = index
            continue
        if e.external_port_id == -1 and layer.type.lower() == "loop":
            continue   # "not connected" (the Loop spec)
        pos = layer.input_position(e.external_port_id) if inp else \
            layer.output_position(e.external_port_id)
        if pos is None:
            ports = layer.inputs if inp else layer.outputs
            bad(f"port map <{e.kind}> external_port_id={e.external_port_id}: the layer has no "
                f"{e.kind} port {e.external_port_id} (its {e.kind} ports: "
                f"{', '.join(str(p.id) for p in ports) or 'none'})", e.line)
            continue
        if inp and pos < reserved:
            bad(f"port map <input> external_port_id={e.external_port_id}: input port "
                f"{e.external_port_id} is the {layer.type}'s "
                f"{'condition' if pos == reserved - 1 else 'trip count'}, not a body input", e.line)
            continue
        if inp:
            if index in fed:
                bad(f"port map <input>: Parameter id {iid} is already fed (line {fed[index]})",
                    e.line)
                continue
            fed[index] = e.line
            inputs.append(InputRule(pos, index, e.axis, e.start, e.end, e.stride, e.part_size))
        else:
            if pos in out_seen:
                bad(f"port map <output>: output port {e.external_port_id} is already given "
                    f"(line {out_seen[pos]})", e.line)
                continue
            out_seen[pos] = e.line
            outputs.append(OutputRule(pos, index, e.axis, e.start, e.end, e.stride,
                                      e.part_size))
        if e.axis is not None and e.stride == 0:
            bad(f"port map <{e.kind}> stride=0: a slice stride must not be 0", e.line)
    if layer.type.lower() == "loop" and cond is None and ok:
        # OpenVINO refuses a Loop without one ("Condition is a mandatory output of the body").
        line = sub.port_map_line or sub.line
        diag.error("bad-port-map", "the Loop's port map has no <output purpose="
                   "\"execution_condition\">: the body must give the condition of the next "
                   "iteration (a boolean Result)", line=line, layer=layer)
        ok = False
    if ok:
        for pnode in prog.parameters:
            index = params[pnode.id]
            if index not in fed and index != cur:
                diag.error("bad-port-map", f"body Parameter '{pnode.layer.name}' (id {pnode.id}) "
                           f"is not in {where}'s port map: nothing gives it a value",
                           line=pnode.layer.line, layer=layer)
                ok = False
    back = []
    back_ids = []
    targets: dict[int, int] = {}
    for b in sub.back_edges:
        if b.from_layer is None or b.to_layer is None:
            ok = False
            continue
        problems = []
        if b.from_layer not in results:
            problems.append(f"from-layer={b.from_layer} is not a Result of {where} (its Results: "
                            f"{_ids(results)})")
        if b.to_layer not in params:
            problems.append(f"to-layer={b.to_layer} is not a Parameter of {where} (its "
                            f"Parameters: {_ids(params)})")
        if problems:
            diag.error("bad-back-edge", "back edge " + "; ".join(problems), line=b.line,
                       layer=layer)
            ok = False
            continue
        p = params[b.to_layer]
        if p in targets:
            diag.error("bad-back-edge", f"back edge to Parameter id {b.to_layer}: it already "
                       f"has one (line {targets[p]})", line=b.line, layer=layer)
            ok = False
            continue
        if p not in fed and p != cur:
            diag.error("bad-back-edge", f"back edge to Parameter id {b.to_layer}, which no port "
                       "map <input> gives a first-iteration value", line=b.line, layer=layer)
            ok = False
            continue
        targets[p] = b.line
        back.append((results[b.from_layer], p))
        back_ids.append((b.from_layer, b.to_layer, b.line))
    body = Body(node, prog, infer_network, tuple(back_ids))
    view = BodyView(body, tuple(inputs), tuple(outputs), tuple(back), cur, cond)
    return view, ok, set(out_seen)
