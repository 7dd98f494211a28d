"""The executor: runs the layers the requested outputs need, in topological order.

A flat plan of integer slots is built once per (model, outputs); each intermediate is
freed after its last use. Errors from kernels get the layer's location added, the way
torch.fx adds "While executing <node>".
"""
from __future__ import annotations

import contextvars
import itertools
import math
import operator
import time
from dataclasses import dataclass

import numpy as np

from ..config import pinned
from ..errors import IrrunError, OpError, OpProblem, ResourceError, ShapeError
from ..ir.etypes import from_dtype
from ..ir.shapes import TensorSpec, format_shape, is_static, shape_matches, shape_of, static_values
from ..ir.weights import INT64_MAX, MAX_RANK, LiveBudget, check_alloc, reuse_memory
from ..opkit.compressed import plain
from ..opkit.pool import serial_blas
from ..opkit.prepared import Fixed
from .bodies import BodyRuns, RunContext, current_run
from .infer import FOLD_MAX_ELEMENTS, _where
from .specialize import SignaturePlans


class Recheck:
    """A layer whose shapes were not all known when the plan was made: its shape rule runs
    again on the real inputs, unless they are the ones it accepted last time."""

    __slots__ = ("etypes", "accepted", "shapes", "rule", "parts", "floats", "key")

    def __init__(self, etypes: tuple, outputs: int, rule: int, parts: tuple | None = None,
                 dims_free: bool = False):
        self.etypes = etypes                 # the inputs' element types
        self.accepted = None                 # the inputs (see _input_key) the rule last accepted
        self.shapes = set()                  # (output index, shape) check_output accepted
        self.rule = rule                     # the same for layers of one op, attributes and
                                             # input types (see _RULES)
        self.parts = parts                   # what of the inputs may change (see _layout);
                                             # None: strings, never kept
        self.floats = parts is not None and any(mode == _FLOAT_INPUT for _, mode in parts)
        self.key = _values_key if dims_free else _input_key    # see _layout


# A shape rule is a pure function of the op, its attributes and its inputs' types, shapes
# and small values: layers with the same three (a decoder's K and V, its layers' caches)
# share what their rule accepted. _RULES numbers the (op, attributes, input types, what
# the plan knows of the inputs) seen; _ACCEPTED holds (rule number, _input_key) pairs that
# passed check_inputs.
_RULES: dict = {}
_ACCEPTED: set = set()
_READS_FLOATS: set = set()      # rule numbers that read a float input's values
MAX_ACCEPTED = 4096
_numbers = itertools.count()


def _rule_number(node, etypes, layout=()) -> int:
    """A layer with bodies (whose attributes may hold them) or attributes that do not hash
    gets a number of its own; numbers are never reused, so forgetting is always safe."""
    if node.bodies:
        return next(_numbers)
    try:
        number = _RULES.get((node.op.label, node.attrs, etypes, layout))
        if number is None:
            if len(_RULES) >= 4 * MAX_ACCEPTED:
                _RULES.clear()
            number = _RULES[(node.op.label, node.attrs, etypes, layout)] = next(_numbers)
        return number
    except TypeError:
        return next(_numbers)


# How an input goes into _input_key's key (Recheck.parts): what the rule sees of it
# (check_inputs: the shape; the values of a small one, a float one's only when the rule
# reads them). A Const's or a layer folded at load adds nothing at run time: the rule
# number says what the rule sees of it (_layout), the same in every plan of the model.
# For an op whose rule_ignores_dims says its verdict owes nothing to the inputs' dynamic
# dims nor to the values the plan does not know, the key is whether the inputs' bytes
# together fit the memory limit (_values_key: the rule's output check, for outputs no
# larger than that; the static dims are the rule number's).
_FLOAT_INPUT, _OTHER_INPUT = range(2)
_NBYTES = operator.attrgetter("nbytes")


def _layout(in_specs, args, constant_slots, dims_free=False) -> tuple[tuple | None, tuple]:
    """(Recheck.parts, the layout for _rule_number) of a layer's inputs."""
    parts, layout = [], []
    for i, (spec, slot) in enumerate(zip(in_specs, args)):
        dtype = spec.etype.dtype
        if dtype.kind == "O":
            return None, ()           # strings: their bytes are pointers, not the values
        known = constant_slots.get(slot)
        if type(known) is np.ndarray:
            small = known.size <= FOLD_MAX_ELEMENTS
            layout.append((known.shape, known.tobytes() if small else None))
        elif dims_free:
            layout.append(tuple(d.value for d in spec.shape))
        else:
            layout.append(None)
            parts.append((i, _FLOAT_INPUT if dtype.kind in "fc" else _OTHER_INPUT))
    return tuple(parts), tuple(layout)


def _ignores_dims(node, in_specs) -> bool:
    """Whether the op says its rule's verdict on inputs of these specs owes nothing to
    their dynamic dims, and no output holds more bytes than the inputs together (the op's
    optional rule_ignores_dims(attrs, inputs), asked only where every input's rank is
    known)."""
    ignores = getattr(node.op.impl, "rule_ignores_dims", None)
    if ignores is None or any(s.shape is None for s in in_specs):
        return False
    try:
        return bool(ignores(node.attrs, in_specs))
    except (OpProblem, IrrunError):
        return False


@dataclass
class Step:
    """One layer of a plan. `kind` says how it runs: "parameter", "const", "result",
    "folded" (its outputs are `values`), "run" (a kernel with nothing to check at run time
    but its outputs), "op" (a kernel whose shapes are rechecked), or "readvalue"/"assign"
    (a kernel that reads or writes a session variable: see State)."""

    node: object
    kind: str
    args: tuple[int, ...]        # input slots
    outs: tuple[int, ...]        # output slots
    free: tuple[int, ...]        # slots whose last use is this step
    specs: list | None = None    # the output specs the plan promises (check_output's)
    expect: tuple = ()           # per output: (NumPy dtype, shape tuple if static else None)
    counted: bool = True         # whether the live budget counts its outputs: a Const's or
                                 # a folded layer's are the model's, not the run's
    values: tuple | None = None  # kind "folded": the outputs
    call: object = None          # kinds "run" and "op": the kernel, run(attrs, *arrays) (the
                                 # op's run_first where nobody reads its other outputs)
    need: int = 0                # kinds "run" and "op": the bytes of its static outputs (the
                                 # budget's check)
    recheck: Recheck | None = None   # kind "op": see Recheck
    variable: str | None = None  # ReadValue/Assign: the session variable it reads or writes
    declared: tuple | None = None    # Assign: what the variable holds, as its ReadValue
                                 # declares it: (dtype, shape tuple if static else None,
                                 # spec, the ReadValue's layer); see _check_write
    fast: tuple | None = None    # kind "run", one output: (call, attrs, args, out slot, dtype,
                                 # shape), all the shortest path reads, in one tuple
    bare: tuple | None = None    # the same with a prepared kernel (see _prepare): (fn,
                                 # operand slots, out slot, dtype, shape)
    tracked: bool = False        # some output's size is not static: the live budget counts
                                 # its outputs even where the plan's static part is reserved
    release: tuple = ()          # the slots of `free` that tracked steps filled
    gather: object = None        # kinds "op", "readvalue", "assign" with several inputs:
                                 # itemgetter of their slots (a tuple of the arrays)
    prepared: tuple | None = None    # kind "op" with one output: a prepared kernel (see
                                 # _prepare) for inputs its shape rule accepts, (fn,
                                 # operand slots)

    @property
    def runs_kernel(self) -> bool:
        return self.kind in ("run", "op", "readvalue", "assign")


class Plan:
    """`sinks` are layers run although no target needs them (a session's Assigns). With
    every_output=False (a run whose listener, if any, does not look at outputs), a layer
    whose outputs after the first nobody reads runs its op's `run_first(attrs, *inputs)`,
    when the op has one, and those outputs' slots stay empty."""

    def __init__(self, program, targets: list[tuple[str, int]], sinks=(),
                 every_output: bool = True, specs: dict | None = None,
                 known: dict | None = None):
        # specs: every node's output specs, when they are not the program's own (a plan for
        # one input signature: irrun.run.specialize); known: the outputs of the layers those
        # specs give as values, handed out as folded layers' are.
        known = known or {}
        if specs is None:
            specs = {lid: node.specs for lid, node in program.nodes.items()}
        needed = _needed(program, [lid for lid, _ in targets] + list(sinks), known)
        order = [lid for lid in program.order if lid in needed]
        slot_of: dict[tuple[str, int], int] = {}
        for lid in order:
            for i in range(len(specs[lid] or ())):
                slot_of[(lid, i)] = len(slot_of)
        last_use: dict[int, int] = {}
        steps = []
        # What the plan knows of its slots' values (Consts, folded layers): prepared
        # kernels may read them once; shape rules, those of every plan of the model
        # (`constant_slots`: Consts and layers folded at load).
        known_slots: dict = {}
        constant_slots: dict = {}
        for position, lid in enumerate(order):
            node, node_specs = program.nodes[lid], specs[lid]
            folded = node.folded if node.folded is not None else known.get(lid)
            args = () if folded is not None else tuple(slot_of[src] for src in node.inputs)
            for a in args:
                last_use[a] = position
            outs = tuple(slot_of[(lid, i)] for i in range(len(node_specs or ())))
            step = Step(node, node.kind, args, outs, (), node_specs)
            if folded is not None:
                # Computed once at load (irrun.run.program.fold_node), or known from this
                # signature's shapes: its inputs do not run.
                step.kind, step.args, step.counted, step.values = "folded", (), False, folded
                known_slots.update(zip(outs, folded))
                if node.folded is not None:
                    constant_slots.update(zip(outs, folded))
            elif node.kind == "const":
                step.counted = False
                known_slots[outs[0]] = constant_slots[outs[0]] = node.const_value
            elif node.kind == "op":
                in_specs = [specs[src][out] for src, out in node.inputs]
                step.expect = tuple((s.etype.dtype, static_values(s.shape) if is_static(s.shape)
                                     else None) for s in node_specs)
                step.call = node.op.impl.run
                step.need = _nbytes(step.expect)
                if node.layer.type.lower() in ("readvalue", "assign"):
                    step.kind, step.variable = node.layer.type.lower(), node.attrs.variable_id
                if step.kind == "assign":
                    # Its rule refuses only an empty variable_id, which loading checked; its
                    # kernel hands its input on. What it writes must fit the variable's
                    # declaration, which a dynamic input does not promise (see _check_write).
                    step.declared = _declared_variable(program, step.variable)
                elif not all(is_static(s.shape) for s in list(in_specs) + list(node_specs)):
                    etypes = tuple(s.etype for s in in_specs)
                    dims_free = _ignores_dims(node, in_specs)
                    parts, layout = _layout(in_specs, args, constant_slots, dims_free)
                    step.recheck = Recheck(etypes, len(outs),
                                           _rule_number(node, etypes, layout), parts, dims_free)
                elif step.variable is None:
                    # The interpreter's fast path: no state, no shape rule to run again.
                    step.kind = "run"
            steps.append(step)
        self.targets = [slot_of[t] for t in targets]
        keep = set(self.targets)
        frees: dict[int, list[int]] = {}
        for s, position in last_use.items():
            if s not in keep:
                frees.setdefault(position, []).append(s)
        for position, step in enumerate(steps):
            step.free = tuple(frees.get(position, ()))
        if not every_output:
            for step in steps:
                _first_output_only(step, last_use, keep)
        for step in steps:
            if step.kind == "run" and len(step.expect) == 1:
                step.fast = (step.call, step.node.attrs, step.args, step.outs[0]) + step.expect[0]
        for step in steps:
            if len(step.args) > 1:
                step.gather = operator.itemgetter(*step.args)
        # The operands prepared kernels computed (`fixed`) take the slots after the
        # layers' own.
        fixed: list = []
        for step in steps:
            if step.fast is not None or (step.kind == "op" and step.recheck is not None):
                made = _prepare(step, [specs[src][out] for src, out in step.node.inputs],
                                known_slots, fixed, len(slot_of))
                if step.fast is not None:
                    step.bare = made
                elif made is not None and step.args:
                    step.prepared = made[:2]
        self.max_need = max((step.need for step in steps), default=0)
        self.steps = steps
        self.n_slots = len(slot_of)
        self.slot_of = slot_of
        # The most a run can hold at once is every slot filled: when all of them have static
        # shapes and together fit a quarter of the live budget, the run need not count what
        # it holds (the margin covers a kernel returning a view of a larger buffer of its
        # own, which the budget counts whole); that saves a third of the per-layer dispatch.
        # With some dynamic shapes, the static slots' bytes (`static_bytes`) are reserved
        # the same way and only the dynamic layers' outputs are counted (`Step.tracked`).
        self.most_bytes = _most_bytes(steps)
        # A run that nobody listens to and that keeps nothing finds the Consts' and folded
        # layers' outputs in its slots from the start (`initial`) and runs only the other
        # steps (`lean_steps`): a decoder's weights are a third of its steps.
        self.initial = [None] * len(slot_of) + fixed
        self.lean_steps = []
        for step in steps:
            if step.kind in ("const", "folded") and not step.free:
                values = (step.node.const_value,) if step.kind == "const" else step.values
                for slot, v in zip(step.outs, values):
                    self.initial[slot] = v
            elif step.kind == "result" and not step.free:
                pass
            else:
                self.lean_steps.append(step)
        self.static_bytes = 0
        for step in steps:
            if not step.counted or step.kind == "result":
                continue
            specs = step.specs or ()
            if all(is_static(spec.shape) for spec in specs):
                self.static_bytes += sum(spec.etype.dtype.itemsize * int(
                    np.prod(static_values(spec.shape), dtype=np.int64)) for spec in specs)
            else:
                step.tracked = True
        tracked_slots = {s for step in steps if step.tracked for s in step.outs}
        for step in steps:
            step.release = tuple(s for s in step.free if s in tracked_slots)
        self.tracks = bool(tracked_slots)


def _prepare(step, in_specs, known_slots, fixed, first_fixed) -> tuple | None:
    """The step's prepared kernel (irrun.opkit.prepared), as Step.bare (a layer of static
    shapes) or Step.prepared (one whose shape rule runs again), when its op has one for
    these inputs: a layer with one output of rank >= 1. A weight kept compressed is not
    handed to `prepare`: that layer keeps its kernel."""
    prepare = getattr(step.node.op.impl, "prepare", None)
    if prepare is None or len(step.specs) != 1 or not step.specs[0].shape:
        return None
    values = []
    for a in step.args:
        v = known_slots.get(a)
        if v is not None and type(v) is not np.ndarray:
            return None
        values.append(v)
    try:
        made = prepare(step.node.attrs, in_specs, values)
    except (OpProblem, IrrunError):
        return None        # the kernel meets the same refusal at run time, and reports it
    if made is None:
        return None
    fn, operands = made
    slots = []
    for o in operands:
        if isinstance(o, Fixed):
            slots.append(first_fixed + len(fixed))
            fixed.append(o.value)
        else:
            slots.append(step.args[o])
    return (fn, tuple(slots), step.outs[0]) + step.expect[0]


def _first_output_only(step, last_use, keep) -> None:
    """Run a layer whose outputs after the first nobody reads by its op's `run_first`, when
    it has one: MaxPool's indices cost four times its values (ResNet-18's one MaxPool took
    12% of the whole run computing indices nothing read). Its unread slots stay empty."""
    if not step.runs_kernel or step.variable is not None or len(step.outs) < 2:
        return
    first = getattr(step.node.op.impl, "run_first", None)
    if first is None or any(s in last_use or s in keep for s in step.outs[1:]):
        return
    step.call, step.outs, step.expect = first, step.outs[:1], step.expect[:1]
    step.need = _nbytes(step.expect)


def _nbytes(expect) -> int:
    """The bytes of the outputs whose shapes are static."""
    return sum(dtype.itemsize * int(np.prod(shape, dtype=np.int64))
               for dtype, shape in expect if shape is not None)


def _most_bytes(steps) -> int | None:
    """The bytes of all the plan's outputs, or None when some output's size is not static."""
    total = 0
    for step in steps:
        node = step.node
        if step.kind == "folded":
            total += sum(v.nbytes for v in step.values)
        elif step.kind == "const":
            total += node.const_value.nbytes
        elif step.kind != "result":
            for spec in step.specs or ():
                if not is_static(spec.shape):
                    return None
                total += spec.etype.dtype.itemsize * int(
                    np.prod(static_values(spec.shape), dtype=np.int64))
    return total


def _needed(program, roots, known) -> set[str]:
    """The roots and every layer they depend on, not looking past folded or known layers."""
    nodes, pred = program.nodes, program.graph.pred
    seen = set(roots)
    stack = list(seen)
    while stack:
        lid = stack.pop()
        if nodes[lid].folded is not None or lid in known:
            continue
        for u in pred[lid]:
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return seen


def _location(program, node):
    layer = node.layer
    return dict(file=program.path, line=layer.line, layer_id=layer.id, layer_name=layer.name,
                op=layer.op_label)


def check_inputs(node, etypes, arrays, limit: int | None = None) -> bool:
    """Run the op's shape rule again on the real inputs, for a layer whose shapes were not all
    known at load time.

    So a kernel never sees inputs its rule refuses (a rank that a dynamic-rank Parameter let
    through, lengths that disagree), and an output whose size comes from input values (a
    Range, a num_segments, a Broadcast target) is refused before it is allocated (`limit`:
    the per-tensor limit in force, when the caller has it at hand). Returns whether the
    rule read the value of a float input: when it did not, its verdict holds for any
    float values of the same shapes.
    """
    read = [False]
    specs = [(_Watched(et, _dims(a.shape), a, read) if a.dtype.kind in "fc" else
              TensorSpec(et, _dims(a.shape), a)) if a.size <= FOLD_MAX_ELEMENTS else
             TensorSpec(et, _dims(a.shape)) for et, a in zip(etypes, arrays)]
    try:
        out_specs = node.op.infer(node.attrs, *specs)
    except OpProblem as e:
        e.raised_by_rule = True
        raise
    for index, spec in enumerate(out_specs):
        if spec.shape is not None:
            if limit is not None and all(d.lo >= 0 for d in spec.shape):
                n = spec.etype.bits
                for d in spec.shape:
                    n *= d.lo
                if n <= 8 * limit and len(spec.shape) <= MAX_RANK and (
                        n or all(d.lo <= INT64_MAX for d in spec.shape)):
                    continue          # what check_alloc would find, without its words
            check_alloc([d.lo for d in spec.shape], spec.etype, f"output {index}")
    return read[0]


class _Watched(TensorSpec):
    """An input spec whose value, when a shape rule reads it, says so (in `read`)."""

    def __init__(self, etype, shape, value=None, read=None, dims=None):
        # The frozen dataclass's fields, set as its own __init__ would; `value` is this
        # class's property.
        self.__dict__.update(etype=etype, shape=shape, dims=dims, _value=value,
                             _read=read if read is not None else [False])

    @property
    def value(self):
        self._read[0] = True
        return self._value


_DIMS: dict = {}


def _dims(shape: tuple) -> tuple:
    """shape_of for a concrete shape, its tuples of Dims kept: the same shapes come back
    run after run."""
    dims = _DIMS.get(shape)
    if dims is None:
        if len(_DIMS) > 4096:
            _DIMS.clear()
        dims = _DIMS[shape] = shape_of(shape)
    return dims


def _input_key(arrays, parts, limit: int, floats: bool = False) -> tuple:
    """What a shape rule sees of the inputs that are not constants (Recheck.parts): the
    shape, and the values of those small enough to be partial values (check_inputs passes
    them on), as bytes; a float input's values only with `floats`. The element types are
    the rule number's (each array has its spec's type). The memory limit in force
    (`limit`) goes in too: the rule's allocation checks depend on it."""
    key = [limit]
    for i, mode in parts:
        a = arrays[i]
        key.append(a.shape)
        if mode == _OTHER_INPUT or floats:
            key.append(a.tobytes() if a.size <= FOLD_MAX_ELEMENTS else None)
    return tuple(key)


def _values_key(arrays, parts, limit: int, floats: bool = False) -> tuple:
    """_input_key for a rule whose verdict ignores the dynamic dims and the values the plan
    does not know (see _layout): whether all the inputs' bytes fit the limit."""
    return limit, sum(map(_NBYTES, arrays)) <= limit


def _recheck(node, recheck, args, key, limit) -> None:
    """Check a layer's inputs with its rule (check_inputs) unless the rule accepted the same
    already, for this layer or another of the same rule (see _ACCEPTED): `key` is
    _input_key's without float values, which the rule's verdict did not depend on when it
    did not read them."""
    recheck.accepted = None
    rule = recheck.rule
    if key is not None and (rule, key) in _ACCEPTED:
        recheck.accepted = key
        return
    # Verdicts under the key with float values exist only for rules that read them.
    full = key if key is None or rule not in _READS_FLOATS or not recheck.floats \
        else recheck.key(args, recheck.parts, limit, True)
    if full is not None and full is not key and (rule, full) in _ACCEPTED:
        return
    read = check_inputs(node, recheck.etypes, args, limit)
    if key is not None:
        if len(_ACCEPTED) >= MAX_ACCEPTED:
            _ACCEPTED.clear()
        if read:
            _READS_FLOATS.add(rule)
            if full is key:
                full = recheck.key(args, recheck.parts, limit, True)
            _ACCEPTED.add((rule, full))
        else:
            _ACCEPTED.add((rule, key))
            recheck.accepted = key


def check_output(node, index, value, specs=None):
    """The kernel's output must agree with what inference promised (`specs`, the plan's
    promise, when it is not the node's own)."""
    spec = (specs or node.specs)[index]
    if not isinstance(value, np.ndarray):
        raise OpError(f"internal error: output {index} is a {type(value).__name__}, not an array")
    if value.dtype != spec.etype.dtype:
        raise OpError(f"internal error: output {index} has dtype {value.dtype} but inference "
                      f"promised {spec.etype.name}")
    if not shape_matches(spec.shape, value.shape):
        raise OpError(f"output {index} has shape {list(value.shape)} but inference promised "
                      f"{format_shape(spec.shape)}")


def _declared_variable(program, variable_id: str) -> tuple | None:
    """What the ReadValue of `variable_id` declares the variable holds (see Step.declared),
    wherever it is: the model or any body in it (a body's variables are the model's)."""
    top = program
    while top.owner is not None:
        top = top.owner.program
    readers = getattr(top, "_variable_readers", None)
    if readers is None:
        readers, stack = {}, [top]
        while stack:
            for node in stack.pop().nodes.values():
                if node.layer.type.lower() == "readvalue" and node.attrs is not None:
                    readers.setdefault(node.attrs.variable_id, node)
                stack.extend(node.bodies)
        top._variable_readers = readers
    reader = readers.get(variable_id)
    if reader is None or not reader.specs:
        return None
    spec = reader.specs[0]
    shape = static_values(spec.shape) if is_static(spec.shape) else None
    return spec.etype.dtype, shape, spec, reader.layer


def _check_write(step, value) -> None:
    """Refuse an Assign's write that its variable's declaration does not cover (OpenVINO
    refuses it too): the next ReadValue would hand on a shape its consumers were not
    inferred for (a [1] broadcast where [2] was declared)."""
    dtype, _, spec, reader = step.declared
    where = f"ReadValue '{reader.name}' (line {reader.line}) declares"
    if value.dtype != dtype:
        try:
            got = from_dtype(value.dtype).name
        except ValueError:
            got = f"NumPy {value.dtype}"
        raise OpError(f"writes {got} to variable '{step.variable}', which {where} "
                      f"{spec.etype.name}")
    if not shape_matches(spec.shape, value.shape):
        raise OpError(f"writes shape {list(value.shape)} to variable '{step.variable}', which "
                      f"{where} {format_shape(spec.shape)}")


@dataclass
class State:
    """A session's variables: what ReadValue reads; Assign's writes land in `pending` and
    replace `values` only when the whole run succeeded."""

    values: dict
    pending: dict


class RunMemory:
    """The live-memory budget of one run, its bodies' runs included: a body runs while the
    layers around it hold their tensors, so it counts against the same IRRUN_MAX_BYTES.
    Each level's slots are numbered from its own `base` in the budget."""

    def __init__(self, plan):
        self.budget = LiveBudget(slots=plan.n_slots)
        self.slots = 0               # the slots of the levels running now
        self.base = 0                # where the next level's slot numbers start


_running: contextvars.ContextVar = contextvars.ContextVar("irrun_running", default=None)


def execute(program, plan: Plan, feeds: dict[str, np.ndarray], listener=None,
            keep_all: bool = False, state: State | None = None) -> list[np.ndarray] | tuple[list, dict]:
    """Run the plan. `feeds` maps Parameter layer ids to checked arrays.

    `listener(node, outputs, seconds)` is called after each layer (profile, trace, dump);
    a body's layers go to `listener.for_body(body program)` when it has that. With keep_all,
    nothing is freed and every slot is returned too. Without a state, a ReadValue gives its
    initial value and an Assign's write is dropped.
    """
    lean = listener is None and not keep_all
    values: list = list(plan.initial) if lean else [None] * plan.n_slots
    clock = time.perf_counter
    # A body's run (see below) counts its iterations with the run around it.
    outer = current_run.get() if _running.get() is not None else None
    token = current_run.set(RunContext(listener, state, run_body,
                                       outer.runs if outer is not None else BodyRuns()))
    # Overflow to inf and NaN from 0/0 are what IR semantics compute, not a reason for NumPy
    # to print warnings mid-run (--check-nan finds them); set once here, not per kernel.
    try:
        memory = _running.get()
        if memory is not None:
            # A body's run (Loop, If, TensorIterator) inside a layer of an outer run, which
            # set these up already: a Loop runs its body once per iteration.
            _run_steps(program, plan, feeds, listener, keep_all, values, clock, state, memory)
        else:
            running = _running.set(RunMemory(plan))
            reuse_memory()
            try:
                with np.errstate(all="ignore"), pinned(), serial_blas():
                    _run_steps(program, plan, feeds, listener, keep_all, values, clock, state,
                               _running.get())
            finally:
                _running.reset(running)
    finally:
        current_run.reset(token)
    result = [plain(values[t]) for t in plan.targets]
    if keep_all:
        return result, [plain(v) for v in values]
    return result


def _run_steps(program, plan, feeds, listener, keep_all, values, clock, state, memory):
    """The interpreter loop: fills `values` slot by slot, this level's live tensors counted
    in `memory` with the levels' around it."""
    budget = memory.budget   # IRRUN_MAX_BYTES for all live tensors, not only each one
    limit = budget.limit
    base = memory.base
    nested = memory.slots > 0
    memory.base += plan.n_slots
    memory.slots += plan.n_slots
    if budget.small >= 0 and memory.slots * budget.SMALL > limit // 4:
        budget.small = -1    # too many slots for their small tensors to go uncounted
    # Count every output when the static slots could hold more than a quarter of the
    # budget; else reserve their bytes and count only the outputs of dynamic size.
    track_all = plan.static_bytes > limit // 4
    reserved = 0 if track_all else plan.static_bytes
    if reserved:
        budget.before(((_BYTE, (reserved,)),))    # refuses, wording the limit
        budget.live += reserved
    try:
        if listener is None and not keep_all and not track_all:
            _lean_loop(program, plan, feeds, values, state, budget, limit, base)
        else:
            _loop(program, plan, feeds, listener, keep_all, values, clock, state, budget,
                  limit, base, track_all)
    finally:
        budget.live -= reserved
        memory.base -= plan.n_slots
        memory.slots -= plan.n_slots
        if nested and (track_all or plan.tracks):
            # What this level still holds (its Results' values, everything with keep_all)
            # is the outer level's to count from here.
            for s in range(base, base + plan.n_slots):
                budget.release(s)


_BYTE = np.dtype(np.uint8)


def _lean_loop(program, plan, feeds, values, state, budget, limit, base):
    """_loop for most runs: nobody listens, nothing is kept, the static slots' bytes are
    reserved (only the layers of dynamic size count what they hold). The same work in
    fewer of the interpreter's steps: a decode step runs 180 layers of tiny tensors, and
    this loop's own work was half of its time."""
    ndarray = np.ndarray
    step = None
    try:
        for step in plan.lean_steps:
            bare = step.bare
            if bare is not None:
                # A prepared kernel (see _prepare): its operands' slots, its output.
                fn, args, out, dtype, shape = bare
                if len(args) == 2:
                    v = fn(values[args[0]], values[args[1]])
                elif len(args) == 1:
                    v = fn(values[args[0]])
                else:
                    v = fn(*[values[a] for a in args])
                if dtype is not None:
                    # Its first run in this plan: the output's type, dtype and shape depend
                    # on the operands' alone (irrun.opkit.prepared), which are static here.
                    if type(v) is not ndarray or v.dtype != dtype or v.shape != shape:
                        check_output(step.node, 0, v, step.specs)    # words the problem
                    step.bare = (fn, args, out, None, None)
                values[out] = v
            elif step.prepared is not None:
                # A prepared kernel of a layer of dynamic shape (_lean_other's first case,
                # here for its frequency): the shape rule, then the function.
                recheck = step.recheck
                gather = step.gather
                arrays = gather(values) if gather is not None else (values[step.args[0]],)
                parts = recheck.parts
                key = recheck.key(arrays, parts, limit) if parts is not None else None
                if key is None or key != recheck.accepted:
                    if key is not None and (recheck.rule, key) in _ACCEPTED:
                        recheck.accepted = key      # (_recheck's first case)
                    else:
                        _recheck(step.node, recheck, arrays, key, limit)
                if step.need and step.tracked:
                    budget.before(step.expect)
                fn, args = step.prepared
                if len(args) == 2:
                    v = fn(values[args[0]], values[args[1]])
                elif len(args) == 1:
                    v = fn(values[args[0]])
                else:
                    v = fn(*[values[a] for a in args])
                dtype, shape = step.expect[0]
                if type(v) is not ndarray or v.dtype != dtype or (
                        v.shape != shape and (0, v.shape) not in recheck.shapes):
                    _check_dynamic(step.node, 0, v, step.specs, recheck.shapes)
                values[step.outs[0]] = v
                if step.tracked and step.counted and (v.base is not None
                                                      or v.nbytes > budget.small):
                    budget.hold((base + step.outs[0],), (v,))
            elif step.fast is not None:
                run, attrs, args, out, dtype, shape = step.fast
                if len(args) == 1:
                    outputs = run(attrs, values[args[0]])
                elif len(args) == 2:
                    outputs = run(attrs, values[args[0]], values[args[1]])
                else:
                    outputs = run(attrs, *[values[a] for a in args])
                if len(outputs) != 1:
                    raise OpError(f"internal error: the kernel returned {len(outputs)} "
                                  "outputs, inference promised 1")
                v = outputs[0]
                if type(v) is not ndarray or (v.dtype is not dtype and v.dtype != dtype) \
                        or v.shape != shape:
                    check_output(step.node, 0, v, step.specs)
                values[out] = v
            else:
                _lean_other(step, feeds, values, state, budget, limit, base)
            for s in step.free:
                values[s] = None
            if step.release:
                for s in step.release:
                    budget.release(base + s)
    except Exception as e:
        raise _located(program, step.node, e) from _cause(e)


def _lean_other(step, feeds, values, state, budget, limit, base) -> None:
    """A step of _lean_loop that is not a prepared or plain kernel of static shapes: what
    _loop does for it, but listening, keeping and counting every output."""
    ndarray = np.ndarray
    kind = step.kind
    node = step.node
    if kind == "op" or kind == "assign" or kind == "readvalue" and not (state is not None and (
            step.variable in state.pending or step.variable in state.values)):
        gather = step.gather
        arrays = gather(values) if gather is not None else \
            (values[step.args[0]],) if step.args else ()
        recheck = step.recheck
        if recheck is not None:
            # The rule is a pure function of the input types, shapes and (small) values:
            # the same inputs as the last run need not be checked again.
            parts = recheck.parts
            key = recheck.key(arrays, parts, limit) if parts is not None else None
            if key is None or key != recheck.accepted:
                if key is not None and (recheck.rule, key) in _ACCEPTED:
                    recheck.accepted = key      # (_recheck's first case)
                else:
                    _recheck(node, recheck, arrays, key, limit)
        if step.need and step.tracked:
            budget.before(step.expect)
        outputs = step.call(node.attrs, *arrays)
        outs = step.outs
        if len(outputs) != len(outs):
            raise OpError(f"internal error: the kernel returned {len(outputs)} outputs, "
                          f"inference promised {len(outs)}")
        passed = recheck.shapes if recheck is not None else None
        if len(outs) == 1:
            v = outputs[0]
            dtype, shape = step.expect[0]
            if type(v) is not ndarray or v.dtype != dtype or (
                    v.shape != shape and (passed is None or (0, v.shape) not in passed)):
                _check_dynamic(node, 0, v, step.specs, passed)
            values[outs[0]] = v
        else:
            for i, v in enumerate(outputs):
                dtype, shape = step.expect[i]
                if type(v) is not ndarray or v.dtype != dtype or (
                        v.shape != shape and (passed is None or (i, v.shape) not in passed)):
                    _check_dynamic(node, i, v, step.specs, passed)
                values[outs[i]] = v
        if kind == "assign":
            v, declared = outputs[0], step.declared
            if declared is not None and (v.dtype != declared[0] or v.shape != declared[1]):
                _check_write(step, v)
            if state is not None:
                state.pending[step.variable] = v
    elif kind == "readvalue":
        # A write earlier in this run (a Loop body's previous iteration) is seen, as in
        # OpenVINO; otherwise the value the last run left.
        v = state.pending.get(step.variable, state.values.get(step.variable))
        dtype, shape = step.expect[0]
        if v.dtype != dtype or (shape is not None and v.shape != shape):
            check_output(node, 0, v, step.specs)   # a plan specialised to the state
        outputs = (v,)
        values[step.outs[0]] = v
    elif kind == "parameter":
        outputs = (feeds[node.layer.id],)
        values[step.outs[0]] = outputs[0]
    elif kind == "run":
        outputs = step.call(node.attrs, *[values[a] for a in step.args])
        if len(outputs) != len(step.outs):
            raise OpError(f"internal error: the kernel returned {len(outputs)} outputs, "
                          f"inference promised {len(step.outs)}")
        for i, (v, (dtype, shape)) in enumerate(zip(outputs, step.expect)):
            if type(v) is not ndarray or v.dtype != dtype or v.shape != shape:
                check_output(node, i, v, step.specs)
            values[step.outs[i]] = v
    elif kind == "folded":
        outputs = step.values
        for s, v in zip(step.outs, outputs):
            values[s] = v
    elif kind == "const":
        outputs = (node.const_value,)
        values[step.outs[0]] = outputs[0]
    else:                  # a Result
        return
    if step.counted and step.tracked:
        if len(outputs) == 1 and (v := outputs[0]).base is None and v.nbytes <= budget.small:
            pass      # what hold() skips: a small buffer of its own
        else:
            budget.hold([base + s for s in step.outs] if base else step.outs, outputs)


def _check_dynamic(node, index, v, specs, passed) -> None:
    """check_output for a rechecked layer's output; a shape that passes is kept in `passed`
    (the promise does not change between runs: it passes again without the check)."""
    check_output(node, index, v, specs)
    if passed is not None:
        if len(passed) >= 256:
            passed.clear()
        passed.add((index, v.shape))


def _too_big(e: BaseException) -> bool:
    """NumPy refusing a size (before the memory budget could see it): a resource limit,
    not a bug."""
    return isinstance(e, ValueError) and ("array is too big" in str(e)
                                          or "Maximum allowed size exceeded" in str(e))


def _located(program, node, e: Exception) -> IrrunError:
    """The error to raise for `e`, raised while running `node`, with the layer's location."""
    if isinstance(e, OpProblem):
        # fail() at run time: from the kernel it is an OpError; from the shape rule re-run
        # on the real inputs (dynamic shapes) a ShapeError, unless the rule refused a
        # value (code "value": a zero step, a negative count), which is an OpError too.
        kind = ShapeError if e.raised_by_rule and e.diagnostic.code != "value" else OpError
        return kind(e.message).locate(**_location(program, node))
    if isinstance(e, IrrunError):
        return e.locate(**_location(program, node))
    if isinstance(e, MemoryError):
        return OpError("out of memory while running this layer").locate(
            **_location(program, node))
    if _too_big(e):
        return ResourceError(f"NumPy cannot allocate this layer's result ({e})").locate(
            **_location(program, node))
    return OpError(f"internal error in the kernel: {type(e).__name__}: {e} "
                   f"({_where(e)}; an irrun bug, please report it)").locate(
        **_location(program, node))


def _cause(e: Exception) -> Exception | None:
    """What a located error is chained to: the kernel's own exception, for --traceback, but
    not an IrrunError (_located hands back that same object, and an exception that is its
    own cause sends pickling, as Dask's for a process worker, into endless recursion), nor
    NumPy's allocation failures, whose located message says everything."""
    if isinstance(e, (IrrunError, MemoryError)) or _too_big(e):
        return None
    return e


def _loop(program, plan, feeds, listener, keep_all, values, clock, state, budget, limit, base,
          track_all):
    ndarray = np.ndarray
    # Most layers of most runs: one output of a known shape, nothing listening, nothing to
    # count, no output past the per-tensor limit. Their steps take the shortest path.
    shortest = listener is None and not keep_all and not track_all
    for step in plan.lean_steps if listener is None and not keep_all else plan.steps:
        node = step.node
        try:
            if shortest:
                bare = step.bare
                if bare is not None:
                    # A prepared kernel (see _prepare): its operands' slots, its output.
                    fn, args, out, dtype, shape = bare
                    if len(args) == 2:
                        v = fn(values[args[0]], values[args[1]])
                    elif len(args) == 1:
                        v = fn(values[args[0]])
                    else:
                        v = fn(*[values[a] for a in args])
                    if type(v) is not ndarray or (v.dtype is not dtype and v.dtype != dtype) \
                            or v.shape != shape:
                        check_output(node, 0, v, step.specs)    # see below
                    values[out] = v
                    for s in step.free:
                        values[s] = None
                    for s in step.release:
                        budget.release(base + s)
                    continue
                fast = step.fast
            else:
                fast = None
            if fast is not None:
                run, attrs, args, out, dtype, shape = fast
                if len(args) == 1:
                    outputs = run(attrs, values[args[0]])
                elif len(args) == 2:
                    outputs = run(attrs, values[args[0]], values[args[1]])
                else:
                    outputs = run(attrs, *[values[a] for a in args])
                if len(outputs) != 1:
                    raise OpError(f"internal error: the kernel returned {len(outputs)} "
                                  "outputs, inference promised 1")
                v = outputs[0]
                if type(v) is not ndarray or (v.dtype is not dtype and v.dtype != dtype) \
                        or v.shape != shape:
                    check_output(node, 0, v, step.specs)    # see below
                values[out] = v
                for s in step.free:
                    values[s] = None
                for s in step.release:
                    budget.release(base + s)
                continue
            kind = step.kind
            if listener is not None:
                t0 = clock()
            if kind == "run":
                if track_all and step.need and budget.live + step.need > limit:
                    budget.before(step.expect)       # refuses, wording the limit
                args, attrs = step.args, node.attrs
                if len(args) == 1:
                    outputs = step.call(attrs, values[args[0]])
                elif len(args) == 2:
                    outputs = step.call(attrs, values[args[0]], values[args[1]])
                else:
                    outputs = step.call(attrs, *[values[a] for a in args])
                expect = step.expect
                if len(outputs) == 1 == len(expect):
                    dtype, shape = expect[0]
                    v = outputs[0]
                    if type(v) is not ndarray or (v.dtype is not dtype and v.dtype != dtype) \
                            or v.shape != shape:
                        check_output(node, 0, v, step.specs)    # see below
                else:
                    if len(outputs) != len(step.outs):
                        raise OpError(f"internal error: the kernel returned {len(outputs)} "
                                      f"outputs, inference promised {len(step.outs)}")
                    for i, (v, (dtype, shape)) in enumerate(zip(outputs, step.expect)):
                        if type(v) is not ndarray or v.dtype != dtype or v.shape != shape:
                            check_output(node, i, v, step.specs)
            elif kind == "folded":
                outputs = step.values
            elif kind == "parameter":
                outputs = (feeds[node.layer.id],)
            elif kind == "const":
                outputs = (node.const_value,)
            elif kind == "result":
                outputs = ()
            elif kind == "readvalue" and state is not None and (
                    step.variable in state.pending or step.variable in state.values):
                # A write earlier in this run (a Loop body's previous iteration) is seen,
                # as in OpenVINO; otherwise the value the last run left.
                v = state.pending.get(step.variable, state.values.get(step.variable))
                dtype, shape = step.expect[0]
                if v.dtype != dtype or (shape is not None and v.shape != shape):
                    check_output(node, 0, v, step.specs)   # a plan specialised to the state
                outputs = (v,)
            else:
                args = [values[a] for a in step.args]
                recheck = step.recheck
                if recheck is not None:
                    # The rule is a pure function of the input types, shapes and (small)
                    # values: the same inputs as the last run need not be checked again.
                    parts = recheck.parts
                    key = recheck.key(args, parts, limit) if parts is not None else None
                    if key is None or key != recheck.accepted:
                        if key is not None and (recheck.rule, key) in _ACCEPTED:
                            recheck.accepted = key      # (_recheck's first case)
                        else:
                            _recheck(node, recheck, args, key, limit)
                if step.need and (track_all or step.tracked):
                    budget.before(step.expect)
                outputs = step.call(node.attrs, *args)
                if len(outputs) != len(step.outs):
                    raise OpError(f"internal error: the kernel returned {len(outputs)} outputs, "
                                  f"inference promised {len(step.outs)}")
                passed = recheck.shapes if recheck is not None else None
                for i, v in enumerate(outputs) if len(outputs) != 1 else ((0, outputs[0]),):
                    # The common case costs two comparisons; anything else (a dynamic
                    # shape, a mismatch, an ndarray subclass) takes the full check, which
                    # words the error. A dynamic output's shape that passed it before (the
                    # promise does not change between runs) passes again.
                    dtype, shape = step.expect[i]
                    if type(v) is not ndarray or v.dtype != dtype or (
                            v.shape != shape and (passed is None or (i, v.shape) not in passed)):
                        check_output(node, i, v, step.specs)
                        if passed is not None:
                            if len(passed) >= 256:
                                passed.clear()
                            passed.add((i, v.shape))
                if kind == "assign":
                    v, declared = outputs[0], step.declared
                    if declared is not None and (v.dtype != declared[0] or v.shape != declared[1]):
                        _check_write(step, v)
                    if state is not None:
                        state.pending[step.variable] = v
            if step.counted and (track_all or step.tracked):
                if len(outputs) == 1 and (v := outputs[0]).base is None \
                        and v.nbytes <= budget.small:
                    pass      # what hold() skips: a small buffer of its own
                else:
                    budget.hold([base + s for s in step.outs] if base else step.outs, outputs)
        except Exception as e:
            raise _located(program, node, e) from _cause(e)
        for s, v in zip(step.outs, outputs):
            values[s] = v
        if listener is not None:
            if kind == "folded":   # a folded weight kept compressed: only kernels see it so
                outputs = tuple(plain(v) for v in outputs)
            listener(node, outputs, clock() - t0)
        if not keep_all:
            for s in step.free:
                values[s] = None
            for s in (step.free if track_all else step.release):
                budget.release(base + s)


def run_body(body, arrays) -> list:
    """Run a Loop's, TensorIterator's or If's body on its Parameters' values (by index): the
    body runner that execute() hands the control-flow kernels through bodies.current_run.
    A body's plan is built once and reused for every iteration."""
    if body.plans is None:
        program = body.program
        # A body's Assigns always run: in a session they write its variables.
        sinks = [n.id for n in program.nodes.values() if n.layer.type.lower() == "assign"]
        targets = [tuple(program.nodes[r].inputs[0]) for r in body.result_ids]
        # Iterations mostly feed the body the same shapes: from the second, a plan for
        # them (irrun.run.specialize). New specs (the layer inferred again) drop the old.
        body.plans = (Plan(program, targets, sinks), SignaturePlans(program),
                      lambda specs, known: Plan(program, targets, sinks, True, specs, known))
    general, signature_plans, make_plan = body.plans
    feeds = dict(zip(body.parameter_ids, arrays))
    plan = signature_plans.plan(general, (), feeds, make_plan)
    # A listener that follows bodies (the -vv trace) says so with `for_body(program)`,
    # which gives the listener for this body's layers; the others (the profile) see the
    # whole body's time as the layer's.
    context = current_run.get()
    for_body = getattr(context.listener, "for_body", None)
    return execute(body.program, plan, feeds, for_body(body.program) if for_body else None,
                   state=context.state)
