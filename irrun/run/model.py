"""The public API: read_model() -> Model, Model.infer(feed), validate()."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..config import pinned
from ..errors import ConfigError, Diagnostic, FeedError, ModelError, ReadError
from ..ir.graph import ancestors_and_self
from ..ir.shapes import format_shape
from .executor import Plan, State, execute
from .feed import cast_input, did_you_mean
from .program import Program, gc_paused, load_program
from .specialize import SignaturePlans


@dataclass(frozen=True)
class PortInfo:
    """A model input or output: its name, element type and partial shape."""

    name: str
    names: tuple[str, ...]
    element_type: str
    shape: tuple | None          # tuple of Dim, None for dynamic rank
    layer: str                   # the Parameter's or Result's layer name

    @property
    def partial_shape(self) -> str:
        return format_shape(self.shape)

    def __str__(self) -> str:
        return f"{self.name}: {self.element_type}{self.partial_shape}"


def _input_info(node) -> PortInfo:
    port = node.layer.outputs[0] if node.layer.outputs else None
    names = tuple(port.names) if port and port.names else (node.layer.name,)
    spec = node.specs[0]
    return PortInfo(any_name(names), names, spec.etype.name, spec.shape, node.layer.name)


def any_name(names) -> str:
    """The name a port is known by among its tensor names, as OpenVINO's get_any_name()
    chooses it: the least in sort order (its serializer writes them sorted)."""
    return min(names)


def output_names_of(program: Program, result) -> tuple[str, ...]:
    """The names of the model output a Result stands for: its output_names, else the names of
    the port feeding it, else its layer name."""
    if result.layer.output_names:
        return tuple(result.layer.output_names)
    if result.inputs:
        src, out = result.inputs[0]
        ports = program.nodes[src].layer.outputs
        if out < len(ports) and ports[out].names:
            return tuple(ports[out].names)
    return (result.layer.name,)


def _output_info(program: Program, result) -> PortInfo:
    src, out = result.inputs[0]
    producer = program.nodes[src]
    names = output_names_of(program, result)
    spec = producer.specs[out]
    return PortInfo(any_name(names), names, spec.etype.name, spec.shape, result.layer.name)


class Model:
    """A loaded, checked IR model, ready to run.

    >>> m = irrun.read_model("models/bucketize_spec/model.xml")
    >>> m.infer({"data": x})["out"]
    """

    def __init__(self, program: Program, threads: int | None = None):
        self.program = program
        self.threads = threads          # None: IRRUN_THREADS, else the CPUs it may use
        self.path = program.path
        self.inputs = [_input_info(p) for p in program.parameters]
        self.outputs = [_output_info(program, r) for r in program.results]
        self.diagnostics = program.diagnostics
        self._plans: dict[tuple, Plan] = {}
        self._signature_plans = SignaturePlans(program)
        self._chosen: dict = {}         # (until, outputs) -> targets, names, aliases
        self._sinks = None              # the Assigns' layer ids, a session's runs' sinks
        # For _feeds, built once since every run's feed goes through them: input name (any
        # of its tensor names) -> (PortInfo, Parameter node); and, for the usual feed (a
        # dict of arrays of each input's own numeric type and static shape under its first
        # name), which is taken as it is since cast_input's checks would all pass, first
        # name -> (layer id, dtype, shape).
        self._by_name: dict[str, tuple] = {}
        self._as_given = {}
        taken = {}     # by spec: what a feed of it must be (many inputs share one spec)
        for info, node in zip(self.inputs, program.parameters):
            for n in info.names:
                self._by_name.setdefault(n, (info, node))
            spec = node.specs[0]
            found = taken.get(id(spec))
            if found is None or found[0] is not spec:
                usual = (spec.etype.kind != "string" and spec.etype.dtype.kind in "fiub"
                         and spec.shape is not None and all(d.is_static for d in spec.shape))
                found = taken[id(spec)] = (spec, usual and (spec.etype.dtype, tuple(
                    d.value for d in spec.shape)))
            if found[1]:
                self._as_given[info.name] = (node.layer.id, *found[1])

    def __repr__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(map(str, self.outputs))
        return f"<irrun.Model {os.path.basename(self.path)} inputs=({ins}) outputs=({outs})>"

    # ------------------------------------------------------------ feeds

    def _feeds(self, feed) -> dict[str, np.ndarray]:
        params = self.program.parameters
        if type(feed) is dict and len(feed) == len(params) == len(self._as_given):
            as_given = self._as_given
            result = {}
            for key, value in feed.items():
                known = as_given.get(key)
                if (known is None or type(value) is not np.ndarray or value.dtype != known[1]
                        or value.shape != known[2]):
                    break
                result[known[0]] = value
            else:
                if len(result) == len(params):
                    return result
        if feed is None:
            feed = {}
        if isinstance(feed, (list, tuple)):
            if len(feed) != len(params):
                raise FeedError(f"got {len(feed)} inputs, the model has {len(params)}: "
                                + ", ".join(str(i) for i in self.inputs), file=self.path)
            feed = {info.name: v for info, v in zip(self.inputs, feed)}
        elif not isinstance(feed, dict):
            if len(params) == 1:
                feed = {self.inputs[0].name: feed}
            else:
                raise FeedError("feed must be a dict of input name -> array", file=self.path)
        by_name = self._by_name
        unknown = [k for k in feed if k not in by_name]
        if unknown:
            raise FeedError(f"unknown input name{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(repr(k) for k in unknown)}; the model's inputs are "
                            + ", ".join(str(i) for i in self.inputs)
                            + did_you_mean([str(k) for k in unknown], list(by_name)),
                            file=self.path)
        result = {}
        given = {}
        for key, value in feed.items():
            info, node = by_name[key]
            if info.name in given:
                raise FeedError(f"input '{info.name}' is given twice (as '{given[info.name]}' "
                                f"and '{key}')", file=self.path)
            given[info.name] = key
            spec = node.specs[0]
            try:
                result[node.layer.id] = cast_input(info.name, value, spec.etype, spec.shape)
            except FeedError as e:
                raise e.locate(file=self.path, line=node.layer.line, layer_id=node.layer.id,
                               layer_name=node.layer.name, op=node.layer.op_label) from None
        missing = [str(i) for i in self.inputs if i.name not in given]
        if missing:
            raise FeedError(f"missing input{'s' if len(missing) > 1 else ''}: "
                            f"{', '.join(missing)}", file=self.path)
        return result

    # ------------------------------------------------------------ running

    def _targets(self, until: str | None):
        if until is None:
            return [tuple(r.inputs[0]) for r in self.program.results], [o.name for o in self.outputs]
        for node in self.program.nodes.values():
            if until in (node.layer.name, node.layer.id):
                if node.kind == "result":
                    src = tuple(node.inputs[0])
                    return [src], [until]
                n = len(node.specs or ())
                if n == 0:
                    raise FeedError(f"layer '{until}' has no outputs", file=self.path)
                names = [until if n == 1 else f"{until}:{i}" for i in range(n)]
                return [(node.layer.id, i) for i in range(n)], names
        # A tensor name: the output port that carries it.
        for node in self.program.nodes.values():
            for i, port in enumerate(node.layer.outputs):
                if until in (port.names or ()) and node.specs and i < len(node.specs):
                    return [(node.layer.id, i)], [until]
        raise FeedError(f"no layer named '{until}' in the model{self._nearest(until)}",
                        file=self.path)

    def _nearest(self, name: str) -> str:
        """'; did you mean X?' for the nearest layer names, or ''."""
        import difflib

        names = [n.layer.name for n in self.program.nodes.values()]
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        return f"; did you mean {' or '.join(close)}?" if close else ""

    def output_names(self, until: str | None = None) -> list[str]:
        """The keys infer() returns, in order (two outputs may share a name: see --output)."""
        return self._targets(until)[1]

    def _plan(self, targets, sinks=(), every_output: bool = True, feeds=None,
              variables=None) -> Plan:
        """The plan for these outputs; with `feeds` (and a session's `variables`, by id),
        from the second run with the same input types and shapes on, a plan for exactly
        those, or for the dims that stay the same from run to run (irrun.run.specialize)."""
        key = (tuple(targets), tuple(sinks), every_output)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = Plan(self.program, targets, sinks, every_output)
        if feeds is None:
            return plan
        return self._signature_plans.plan(
            plan, key, feeds,
            lambda specs, known: Plan(self.program, targets, sinks, every_output, specs, known),
            variables)

    @property
    def variables(self) -> list[PortInfo]:
        """The model's state variables (one per ReadValue): variable_id, element type, shape."""
        from .program import all_nodes

        return [PortInfo(n.attrs.variable_id, (n.attrs.variable_id,), n.specs[0].etype.name,
                         n.specs[0].shape, n.layer.name)
                for n in all_nodes(self.program)
                if n.layer.type.lower() == "readvalue" and n.specs]

    def save(self, xml_path, bin_path=None) -> tuple[str, str]:
        """Write the model as IR v11 (xml and .bin); see irrun.save_model."""
        from ..ir.writer import save_model

        return save_model(self, xml_path, bin_path)

    def create_session(self) -> "Session":
        """A session keeps the model's variables (ReadValue/Assign) from one infer to the next,
        like OpenVINO's InferRequest; `Model.infer` itself starts from the initial state."""
        return Session(self)

    def infer(self, feed=None, *, intermediate: bool = False, until: str | None = None,
              outputs=None, listener=None) -> "Outputs":
        """Run the model: {output name: array} (an `Outputs`, which also takes an output's
        position or PortInfo as the key, as OpenVINO's OVDict does).

        `outputs` (names, positions or PortInfos of model outputs) computes only those and
        what they need, as onnxruntime's `run(names, feed)` does. With intermediate=True the
        dict also holds every intermediate tensor, keyed "layer_name:port_index". `until`
        runs only up to the named layer and returns its outputs. Every ReadValue gives its
        initial value: a stateful model's variables are kept only by a session
        (`create_session()`).
        """
        return self._run(feed, intermediate, until, listener, None, outputs)

    def _output_aliases(self) -> list[tuple[str, ...]]:
        """Per output, every name it is known by: its tensor names, its Result's name and the
        name of the layer that computes it (OpenVINO's friendly names)."""
        return [(*info.names, info.layer, self.program.nodes[result.inputs[0][0]].layer.name)
                for info, result in zip(self.outputs, self.program.results)]

    def _select(self, targets, names, wanted):
        """The targets of the requested model outputs (names, positions or PortInfos), each
        known by any of its names (_output_aliases)."""
        known = {}
        for i, aliases in enumerate(self._output_aliases()):
            for alias in aliases:
                known.setdefault(alias, i)
        chosen = []
        for w in wanted:
            if isinstance(w, PortInfo):
                w = w.name
            if isinstance(w, (int, np.integer)) and not isinstance(w, bool):
                if not -len(names) <= w < len(names):
                    raise FeedError(f"output {w} does not exist: the model has {len(names)} "
                                    "outputs", file=self.path)
                chosen.append(int(w) % len(names))
            elif w in names:
                chosen.append(names.index(w))
            elif w in known and len(names) == len(self.outputs):
                chosen.append(known[w])
            else:
                raise FeedError(f"no output named '{w}' (outputs: {', '.join(names)})",
                                file=self.path)
        return [targets[i] for i in chosen], [names[i] for i in chosen]

    def _run(self, feed, intermediate, until, listener, state, outputs=None) -> "Outputs":
        if self.program.weights is not None:
            self.program.weights.check()    # a truncated map would be SIGBUS, not an error
        feeds = self._feeds(feed)
        if isinstance(outputs, (str, PortInfo, int)):
            outputs = [outputs]
        try:
            wanted = (until, None if outputs is None else tuple(outputs))
            hash(wanted)
        except TypeError:
            wanted = None
        chosen = self._chosen.get(wanted) if wanted is not None else None
        if chosen is None:
            # What a run computes and how it names it; the same for every run that asks
            # for the same outputs (a decode loop's thousands), so kept.
            targets, names = self._targets(until)
            if outputs is not None:
                targets, names = self._select(targets, names, list(outputs))
            aliases = {alt: o.name for o, alts in zip(self.outputs, self._output_aliases())
                       if o.name in names for alt in alts if alt != o.name}
            chosen = (targets, names, aliases)
            if wanted is not None:
                if len(self._chosen) > 64:
                    self._chosen.clear()
                self._chosen[wanted] = chosen
        targets, names, aliases = chosen
        order = list(names)
        if state is None:
            sinks = ()
        else:
            if self._sinks is None:
                self._sinks = tuple(n.id for n in self.program.nodes.values()
                                    if n.layer.type.lower() == "assign")
            sinks = self._sinks
        # A listener sees each layer's outputs (trace, dump, compare), so it gets them all;
        # a plain run skips the outputs nothing reads where an op can (see Plan).
        every = intermediate or getattr(listener, "every_output", listener is not None)
        # A session's variables (what its ReadValues will read) are known as the run starts.
        plan = self._plan(targets, sinks, every, feeds, state.values if state else None)
        with pinned(self.threads):
            if intermediate:
                outs, values = execute(self.program, plan, feeds, listener, keep_all=True,
                                       state=state)
            else:
                outs = execute(self.program, plan, feeds, listener, state=state)
        result = Outputs(zip(names, outs), order, aliases)
        if intermediate:
            for (lid, index), slot in plan.slot_of.items():
                if values[slot] is not None:
                    result.setdefault(f"{self.program.nodes[lid].layer.name}:{index}", values[slot])
        return result

    __call__ = infer

    def profile(self, feed=None, *, repeat: int = 1, until: str | None = None,
                bodies: bool = False) -> list[dict]:
        """Per-layer timings as data, slowest first: one dict per layer that runs a kernel.

        Keys: name, id, type, version, op ("Type-opsetN"), line, outputs ([{dtype, shape}]),
        dtype and shape (of output 0), seconds (best of `repeat` runs) and share (0..1).
        A Loop's, TensorIterator's or If's time includes its body's; with bodies=True the
        layers inside bodies follow, with `body` (the layer they are in) and `runs`.
        """
        from .inspect import Profiler

        profiler = Profiler(per_body=bodies)
        for _ in range(max(1, repeat)):
            self.infer(feed, until=until, listener=profiler)
        return profiler.rows()

    def run_order(self, until: str | None = None, ops_only: bool = False) -> list[str]:
        """The names of the layers a run executes, in order; with ops_only, only its op layers,
        folded ones included (what the progress bar counts, as the listener sees them)."""
        plan = self._plan(self._targets(until)[0])
        return [step.node.layer.name for step in plan.steps
                if not ops_only or step.node.kind == "op"]


class Outputs(dict):
    """What `infer` returns: a dict by output name, in output order, that also takes an
    output's position (`out[0]`), its PortInfo (`out[model.outputs[0]]`) or another of its
    tensor names (a detokenizer's `Result_N,string_output`: keyed by the first, found by
    either)."""

    def __init__(self, items=(), order=(), aliases=None):
        super().__init__(items)
        self._order = list(order)
        self._aliases = dict(aliases or {})

    def _key(self, key):
        if isinstance(key, PortInfo):
            return key.name
        if isinstance(key, str) and not super().__contains__(key):
            return self._aliases.get(key, key)
        return key

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not -len(self._order) <= key < len(self._order):
                raise IndexError(f"output {key} does not exist: there are "
                                 f"{len(self._order)} outputs ({', '.join(self._order)})")
            key = self._order[key]
        return super().__getitem__(self._key(key))

    def __contains__(self, key):
        return super().__contains__(self._key(key))


class Session:
    """Runs of one model that share its state variables (what OpenVINO's InferRequest keeps).

    The first `infer` (and the first after `reset_state()`) sees each ReadValue's initial
    value (its init input, else zeros of variable_shape); each later one sees what the
    Assigns of the previous run wrote. A run that fails leaves the variables as they were.

    >>> s = irrun.read_model("models/stateful_accumulator/model.xml").create_session()
    >>> for x in steps: y = s.infer({"x": x})
    """

    def __init__(self, model: Model):
        self.model = model
        self._state = State({}, {})

    def infer(self, feed=None, *, intermediate: bool = False, until: str | None = None,
              outputs=None, listener=None) -> Outputs:
        self._state.pending.clear()
        try:
            result = self.model._run(feed, intermediate, until, listener, self._state, outputs)
        except BaseException:
            self._state.pending.clear()
            raise
        self._state.values.update(self._state.pending)
        self._state.pending.clear()
        return result

    __call__ = infer

    def run_sequence(self, feed, steps: int, loop_back: dict[str, str] | None = None,
                     listener=None) -> list[dict[str, np.ndarray]]:
        """Run `steps` steps, the outputs of each step in a list.

        A feed array with one more dim than its input is a sequence: step k gets its
        `[k]` (axis 0 must have at least `steps` entries); any other array is given to every
        step. `loop_back` maps an output name to an input name: from step 1 on, that input
        is the output of the step before (step 0 takes it from `feed`).
        """
        loop_back = dict(loop_back or {})
        by_name = {n: info for info in self.model.inputs for n in info.names}
        out_names = set(self.model.output_names())
        for out, inp in loop_back.items():
            if out not in out_names:
                raise FeedError(f"loop-back output '{out}' is not an output of the model; its "
                                f"outputs: {', '.join(self.model.output_names())}",
                                file=self.model.path)
            if inp not in by_name:
                raise FeedError(f"loop-back input '{inp}' is not an input of the model; its "
                                f"inputs: {', '.join(str(i) for i in self.model.inputs)}",
                                file=self.model.path)
        sequences = {}
        for name, value in feed.items():
            info = by_name.get(name)
            a = np.asarray(value)
            if info is not None and info.shape is not None and a.ndim == len(info.shape) + 1:
                if a.shape[0] < steps:
                    raise FeedError(f"input '{name}' is a sequence of {a.shape[0]} steps "
                                    f"(axis 0 of {list(a.shape)}), fewer than the {steps} "
                                    "steps asked for", file=self.model.path)
                sequences[name] = a
        results = []
        for k in range(steps):
            step_feed = {n: (sequences[n][k] if n in sequences else v) for n, v in feed.items()}
            if k > 0:
                for out, inp in loop_back.items():
                    step_feed[inp] = results[-1][out]
            results.append(self.infer(step_feed, listener=listener))
        return results

    def reset_state(self) -> None:
        """Back to the initial values: the next infer reads each ReadValue's init value."""
        self._state.values.clear()
        self._state.pending.clear()

    @property
    def state(self) -> dict[str, np.ndarray]:
        """The variables' current values by variable_id (those written so far)."""
        return dict(self._state.values)


def read_model(xml, weights=None, *, mmap: bool = True, fold: bool | None = None,
               threads: int | None = None) -> Model:
    """Read, check and prepare an IR model. Raises ModelError listing every problem.

    threads=N runs its loads and runs on at most N threads (1: fully serial), as OpenVINO's
    INFERENCE_NUM_THREADS; None takes IRRUN_THREADS, else the CPUs this process may use.

    The .bin is memory-mapped, and each run first checks that it has not changed (a
    ReadError if it has); mmap=False reads it into a private copy instead, as OpenVINO's
    ov::enable_mmap(false) does. fold=False computes every layer at each run instead of
    folding the all-Const ones once here (default: IRRUN_FOLD, on; irrun.run.program.fold_node).
    """
    path = os.fspath(xml)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ConfigError(f"threads={threads!r} is not a thread count (a whole number from 1)")
    if not os.path.exists(path):
        raise ReadError(f"no such model file: '{path}'", file=path)
    # As load_program: the collector would walk every layer's objects.
    with gc_paused(), pinned(threads):
        return _read_model(path, weights, mmap, fold, threads)


def _read_model(path, weights, mmap, fold, threads=None) -> Model:
    program = load_program(path, weights, mmap=mmap, fold=fold)
    if not program.ok:
        raise ModelError(program.diagnostics)
    unknown = _uninferred(program)
    if unknown:
        # A safety net: a problem that should have been reported was not (an irrun bug),
        # so say which layer instead of failing later with a TypeError.
        raise ModelError([Diagnostic("internal error: nothing is known about this layer's "
                                     "outputs, though no problem was reported", "error",
                                     "internal", path, layer.line, layer.id, layer.name,
                                     layer.op_label) for layer in unknown])
    return Model(program, threads)


def _uninferred(program: Program) -> list:
    """Layers that some Result needs whose output specs inference did not produce."""
    nodes = program.nodes
    missing = [lid for lid in program.order
               if nodes[lid].specs is None and nodes[lid].kind != "result"]
    if not missing:
        return []      # (the usual case: no walk of what the Results need)
    needed = ancestors_and_self(program.graph, [r.id for r in program.results])
    return [nodes[lid].layer for lid in missing if lid in needed]


def validate(xml, weights=None) -> list[Diagnostic]:
    """Every problem in an IR file, errors and warnings; never raises for a bad file."""
    path = os.fspath(xml)
    if not os.path.exists(path):
        return [Diagnostic(f"no such model file: '{path}'", "error", "read", path)]
    try:
        return load_program(path, weights).diagnostics
    except RecursionError:
        return [Diagnostic("the model is nested too deeply to read", "error", "read", path)]
