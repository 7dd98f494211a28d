"""Loading pipeline: read -> graph -> bind ops and attributes -> Const data -> inference.

Every stage reports to one Collector, so `irrun validate` sees every problem in one pass
and `read_model` raises one ModelError listing all of them.
"""
from __future__ import annotations

import contextlib
import gc
import os
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from ..config import config, pinned
from ..errors import Collector, IrrunError, ResourceError, UnsupportedError
from ..ir import checks, registry
from ..ir.etypes import element_type, nbytes
from ..ir.graph import PortGraph, build_graph
from ..ir.reader import IRDocument, Layer, read_document
from ..ir.shapes import TensorSpec, is_static, parse_partial_shape, static_values
from ..ir.weights import Weights, check_alloc, const_value, reuse_memory
from ..opkit.compressed import CompressedWeights
from ..opkit.pool import serial_blas
from . import bodies, decompress, dequantize
from .infer import (
    FOLD_MAX_ELEMENTS, InferMemo, check_declared_inputs, check_declared_outputs, infer_node,
)


class _WeakReferable:
    __slots__ = ("__weakref__",)    # (dataclass's weakref_slot needs Python 3.11)


# The links back up the tree (node -> its network, body network -> its layer's node) are
# weak: a program holds its nodes, so strong links both ways made every loaded model a
# reference cycle, whose weights, memory map and open .bin stayed until the cyclic garbage
# collector next ran, not freed when the last reference went.
def _weak_link(slot: str, doc: str) -> property:
    """A property holding its object through a weak reference kept in `slot`."""
    def get(self):
        ref = getattr(self, slot)
        return ref() if ref is not None else None

    def set_(self, target) -> None:
        setattr(self, slot, weakref.ref(target) if target is not None else None)
    return property(get, set_, doc=doc)


@dataclass(slots=True)
class Node(_WeakReferable):
    layer: Layer
    op: registry.OpDef | None = None
    attrs: object = None
    inputs: list[tuple[str, int]] = field(default_factory=list)  # (producer id, output position)
    specs: list[TensorSpec] | None = None                        # inferred outputs
    const_value: object = None     # a Const's data: a view of the .bin's memory map
    bodies: list[Program] = field(default_factory=list)   # a Loop/TensorIterator/If's networks
    views: tuple = ()               # their port-map views (bodies.BodyView), even if broken
    folded: tuple | None = None     # outputs computed once at load (constant folding)
    fold_seconds: float = 0.0       # what computing them took
    _program: object = field(default=None, repr=False, compare=False)

    program = _weak_link("_program", "The network this node belongs to (a Program).")

    @property
    def id(self) -> str:
        return self.layer.id

    @property
    def kind(self) -> str:
        """parameter | const | result | op: the executor dispatches on this."""
        return kind_of(self.layer.type)


_KINDS = {"parameter": "parameter", "const": "const", "result": "result"}
_KIND_OF: dict[str, str] = {}     # by the type as spelled (a file spells a handful)


def kind_of(type_: str) -> str:
    """A layer type's node kind (Node.kind), without lower-casing it at every ask."""
    kind = _KIND_OF.get(type_)
    if kind is None:
        kind = _KINDS.get(type_.lower(), "op")
        if len(_KIND_OF) < 256:    # a hostile file may spell thousands
            _KIND_OF[type_] = kind
    return kind


@dataclass
class Program:
    path: str
    doc: IRDocument | None
    graph: PortGraph | None
    nodes: dict[str, Node]
    order: list[str]                  # topological order of every layer
    parameters: list[Node]            # document order
    results: list[Node]               # document order
    diagnostics: list
    weights: Weights | None = None
    cycle: set[str] = field(default_factory=set)    # layers on a cycle (reported; never run)
    unused: set[str] = field(default_factory=set)   # layers no Result or Assign depends on
    bin_path: str | None = None     # where the Consts' bytes are read from
    fold: bool = True               # fold all-Const subgraphs at load (see fold_node)
    _owner: object = field(default=None, repr=False, compare=False)

    owner = _weak_link("_owner", "For a body: the Loop/TensorIterator/If layer's Node.")

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)


def _bin_path(xml_path: str, weights) -> str:
    if weights is not None:
        return os.fspath(weights)
    return os.path.splitext(xml_path)[0] + ".bin"


def _lookup(type_: str, version: str, cache: dict):
    """registry.lookup, once per (type, version) of a network: the OpDef or the failure."""
    key = (type_, version)
    found = cache.get(key)
    if found is None:
        try:
            found = registry.lookup(type_, version)
        except registry.LookupFailure as e:
            found = e
        cache[key] = found
    return found


def _parse_attrs(op, data: dict, cache: dict):
    """registry.parse_attrs, once per op and distinct <data> of a network (a chain of
    Converts spells a few). Only frozen attribute classes: their instances can be shared."""
    key = (op.attrs, *data.items())
    found = cache.get(key)
    if found is None:
        params = getattr(op.attrs, "__dataclass_params__", None)
        found = registry.parse_attrs(op.attrs, data)
        if params is not None and params.frozen:
            cache[key] = found
    return found


def _bind(node: Node, diag: Collector, unused: bool = False, cache: dict | None = None) -> None:
    """The layer's op and attributes; `cache` (one dict per network) shares the lookups and
    parses of layers that spell the same type, version and <data>."""
    layer = node.layer
    if layer.version is None or not layer.type:
        return   # the reader reported the missing attribute
    cache = {} if cache is None else cache
    key = (layer.type, layer.version)
    found = cache.get(key)          # (_lookup's cache, read here first: the usual case)
    if found is None:
        found = _lookup(layer.type, layer.version, cache)
    if isinstance(found, registry.LookupFailure):
        e = found
        if unused:
            # OpenVINO only builds the layers some Result needs, so the model still loads.
            diag.warning(e.code, f"{e} (no Result needs this layer, so the model still runs)",
                         layer=layer)
        else:
            diag.error(e.code, str(e), layer=layer)
        return
    node.op = found
    attrs, problems, unknown = _parse_attrs(found, layer.data, cache)
    for _, message, code in problems:
        diag.error(code, message, line=layer.data_line, layer=layer)
    for name in unknown:
        diag.warning("unknown-attribute", f"unknown attribute '{name}' for {node.op.label} "
                     "(ignored)", line=layer.data_line, layer=layer)
    node.attrs = attrs
    n = len(layer.inputs)
    lo, hi = node.op.min_inputs, node.op.max_inputs
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi is not None else f"at least {lo}"
        plural = "" if want == "1" else "s"
        diag.error("input-count", f"{node.op.label} takes {want} input{plural}, the layer has {n}",
                   layer=layer)
        node.op = None


def _load_const(node: Node, weights: Weights | None, bin_path: str, diag: Collector):
    """The Const's value (a view of the memory map), or None after reporting a problem."""
    a, layer = node.attrs, node.layer
    line = layer.data_line
    written = layer.data.get("element_type")
    if written != a.element_type:
        # Other element type attributes ignore case, but OpenVINO reads a Const's bytes
        # with the name exactly as written and refuses "F32".
        diag.error("bad-attribute", f"attribute element_type='{written}': a Const's element "
                   f"type must be spelled '{a.element_type}' (OpenVINO refuses other spellings "
                   "here)", line=line, layer=layer)
        return None
    try:
        et = element_type(a.element_type)
    except (UnsupportedError, ValueError) as e:
        diag.error("bad-element-type", str(e), line=line, layer=layer)
        return None
    shape = parse_partial_shape(a.shape)
    if not is_static(shape):
        diag.error("bad-shape", f"Const shape '{a.shape}' is not static", line=line, layer=layer)
        return None
    dims = static_values(shape)
    try:
        count = check_alloc(dims, et, "the Const")   # before anything is mapped or decoded
    except IrrunError as e:
        diag.error("too-large", e.message, line=line, layer=layer)
        return None
    need = nbytes(et, count)
    if a.offset < 0 or a.size < 0:
        diag.error("const-offset", f"offset={a.offset} and size={a.size} must not be negative",
                   line=line, layer=layer)
        return None
    if a.size < need:
        diag.error("const-size", f"size={a.size} bytes is smaller than the {need} bytes that "
                   f"shape {list(dims)} of {et.name} needs", line=line, layer=layer)
        return None
    if need == 0 and a.size == 0:
        return const_value(None, et, dims, 0, 0)
    if weights is None:
        return None   # the unreadable .bin is reported once, at the first Const that needs it
    # OpenVINO reads `size` bytes, not what the shape needs: a size past the end fails there.
    if a.offset + a.size > weights.size:
        diag.error("const-offset", f"offset={a.offset} + size={a.size} runs past the end of "
                   f"'{weights.path}' ({weights.size} bytes)", line=line, layer=layer)
        return None
    if et.kind == "string":
        try:
            return const_value(weights, et, dims, a.offset, a.size)
        except ValueError as e:
            diag.error("const-size", f"string Const: {e}", line=line, layer=layer)
            return None
    if a.size > need:
        diag.warning("const-size", f"size={a.size} bytes is larger than the {need} bytes that "
                     f"shape {list(dims)} of {et.name} needs", line=line, layer=layer)
    return const_value(weights, et, dims, a.offset, a.size)


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while a model loads.

    Loading allocates a few tracked objects per layer (ports, lists, graph dicts) that all
    stay alive, so every automatic full collection walks all of them and frees nothing: on
    a 10,000-layer file that was a third of the load time. Reference counting still frees
    everything else, and the collector is back on (if it was on) when loading ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _promote_young()
            gc.enable()


def _promote_young() -> None:
    """Move every object the collector tracks into its oldest generation, unscanned.

    What a load made stays alive with the model, but with the collector paused it all sat
    in the youngest generation, so the first collection after the load walked all of it
    (on a file of a million layers, seconds) and the next older one walked it again, only
    to find it alive. gc.freeze() then gc.unfreeze() moves the young generations to the
    oldest one without a walk; a full collection still looks at everything there, as it
    does at the model's other long-lived objects. Skipped when the program has frozen
    objects of its own, which unfreeze() would release."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


def load_program(xml_path, weights=None, *, mmap: bool = True, fold: bool | None = None) -> Program:
    """Run every loading stage; problems are in Program.diagnostics (never raises for a bad file).

    mmap=False reads the .bin into a private copy instead of mapping it (irrun.ir.weights).
    fold=False keeps every layer for run time (default: IRRUN_FOLD, on; see fold_node)."""
    with gc_paused(), pinned(), serial_blas():
        reuse_memory()     # folding allocates the weights: a later load reuses freed ones
        return _load_program(xml_path, weights, mmap, config().fold if fold is None else fold)


def _load_program(xml_path, weights, mmap=True, fold=True) -> Program:
    xml_path = os.fspath(xml_path)
    diag = Collector(file=xml_path)
    doc = read_document(xml_path, diag)
    if doc is None:
        return Program(xml_path, None, None, {}, [], [], [], diag.items)
    program = _prepare(doc, xml_path, diag)

    # Weights: only open the .bin when some Const (of the model or of a body) needs bytes.
    bin_path = _bin_path(xml_path, weights)
    needing = [n for n in all_nodes(program)
               if n.attrs is not None and n.kind == "const" and n.attrs.size > 0]
    wfile = None
    if needing:
        try:
            wfile = Weights(bin_path, mmap=mmap)
        except OSError as e:
            more = f" (and {len(needing) - 1} more Consts)" if len(needing) > 1 else ""
            diag.error("no-weights", f"cannot read the weights file '{bin_path}' that this "
                       f"Const{more} needs: {e.strerror or e}",
                       line=needing[0].layer.data_line, layer=needing[0].layer)
    program.weights, program.bin_path = wfile, bin_path
    program.fold = fold
    infer_network(program, diag)
    _check_variables(program, diag)
    checks.check_input_names(program.parameters, diag)
    # Report in file order, like a compiler (the passes find problems in their own order).
    diag.items.sort(key=lambda d: d.line or 0)
    program.diagnostics = diag.items
    return program


def _prepare(doc: IRDocument, path: str, diag: Collector, owner: Node | None = None) -> Program:
    """Graph, nodes and bound ops of one network; a body's networks are prepared inside."""
    derived = build_graph(doc, diag, body=owner is not None)
    graph = derived.graph
    nodes = {layer.id: Node(layer) for layer in doc.layers}
    for v, producers in graph.pred.items():
        if not producers:
            continue
        inputs = nodes[v].inputs
        for u, keys in producers.items():
            for inp, data in keys.items():
                if len(inputs) <= inp:
                    inputs.extend([None] * (inp + 1 - len(inputs)))
                inputs[inp] = (u, data["out"])
    cache: dict = {}
    unused = derived.unused
    parameters, results = [], []
    for node in nodes.values():
        layer = node.layer
        _bind(node, diag, node.id in unused, cache)
        if layer.bodies or (node.op is not None and getattr(node.op.impl, "BODIES", None)):
            node.bodies = [_prepare(sub.doc, path, diag, node) for sub in layer.bodies]
            bodies.attach(node, diag, infer_network)
        kind = kind_of(layer.type)
        if kind == "parameter":
            parameters.append(node)
        elif kind == "result":
            results.append(node)
    order = derived.order
    if order is None:
        # Infer everything outside a cycle (already reported); layers fed by one are skipped.
        import networkx as nx  # only for a broken file: not imported to load a good one

        cycle, ng = derived.cycle, graph.to_networkx()
        order = list(nx.topological_sort(ng.subgraph(n for n in ng if n not in cycle)))
    program = Program(path, doc, graph, nodes, order, parameters, results, diag.items, None,
                      derived.cycle, derived.unused)
    program.owner = owner
    link = weakref.ref(program)     # what Node.program's setter makes, made once
    for node in nodes.values():
        node._program = link
    return program


def _check_variables(program: Program, diag: Collector) -> None:
    """Each variable has one ReadValue; each Assign writes a variable some ReadValue reads,
    with the type and a shape that ReadValue gives (a session feeds one to the other)."""
    reads: dict[str, Node] = {}
    # A body's variables are the model's too. Only ReadValues and Assigns matter: picked in
    # one pass (most models have none), by the type as spelled, lower-cased once per spelling.
    spellings: dict[str, str] = {}
    nodes = []
    for node in all_nodes(program):
        t = node.layer.type
        low = spellings.get(t)
        if low is None:
            low = spellings[t] = t.lower()
        if low == "readvalue" or low == "assign":
            nodes.append(node)
    for node in nodes:
        if node.layer.type.lower() == "readvalue" and node.attrs is not None and node.op:
            vid = node.attrs.variable_id
            if vid in reads:
                other = reads[vid].layer
                diag.error("variable", f"variable '{vid}' is read by two ReadValues: here and at "
                           f"line {other.line} ('{other.name}')", layer=node.layer)
                continue
            reads[vid] = node
    for node in nodes:
        if node.layer.type.lower() != "assign" or node.attrs is None or not node.op:
            continue
        vid = node.attrs.variable_id
        rv = reads.get(vid)
        if rv is None:
            diag.error("variable", f"no ReadValue reads variable '{vid}' that this Assign writes",
                       layer=node.layer)
            continue
        got, want = (node.specs or [None])[0], (rv.specs or [None])[0]
        if got is None or want is None:
            continue
        if got.etype != want.etype:
            diag.error("variable", f"writes {got.etype.name} to variable '{vid}', which ReadValue "
                       f"'{rv.layer.name}' gives as {want.etype.name}", layer=node.layer)
        elif got.shape is not None and want.shape is not None and (
                len(got.shape) != len(want.shape) or
                not all(a.compatible(b) for a, b in zip(got.shape, want.shape))):
            from ..ir.shapes import format_shape
            diag.error("variable", f"writes shape {format_shape(got.shape)} to variable '{vid}', "
                       f"which ReadValue '{rv.layer.name}' gives as {format_shape(want.shape)}",
                       layer=node.layer)


def all_nodes(program: Program):
    """Every node of the program and of the bodies inside it, depth first."""
    for node in program.nodes.values():
        yield node
        for body in node.bodies:
            yield from all_nodes(body)


def _check_bodies_alone(node, input_specs, diag: Collector, only_uninferred: bool = False) -> None:
    """Check the bodies of a layer that cannot be inferred (a broken port map, bad inputs)
    as far as possible: the port map's element types, then each body on its own, from its
    Parameters' declarations, so that its problems are found in the same pass."""
    checked = set()
    for view in node.views:
        body = view.body
        if only_uninferred and body.inferred:
            checked.add(id(body.program))
            continue
        declared = body.parameters
        for rule in view.inputs:
            s = input_specs[rule.position] if rule.position < len(input_specs) else None
            d = declared[rule.parameter]
            if s is not None and d is not None and d.etype.name != "dynamic" and s.etype != d.etype:
                pnode = body.program.parameters[rule.parameter]
                diag.error("body-type", f"the body Parameter is {d.etype.name}, but layer "
                           f"'{node.layer.name}' ({node.layer.op_label}) feeds it {s.etype.name}",
                           line=pnode.layer.data_line or pnode.layer.line, layer=pnode.layer)
    for view in node.views:
        view.body.forget()
    for prog in node.bodies:
        if id(prog) not in checked:
            infer_network(prog, diag)


def infer_network(program: Program, diag: Collector,
                  given: dict[str, TensorSpec] | None = None) -> None:
    """Shape and type inference over one network in topological order.

    `given` holds the specs a body's Parameters receive from the layer that runs the body
    (by Parameter id); the model's own Parameters infer from their attributes.
    """
    nodes = program.nodes
    root = _root(program)
    wfile, bin_path = root.weights, root.bin_path
    specs: dict[str, list[TensorSpec] | None] = {}    # layer id -> its inferred outputs
    known: dict[str, int] | None = {} if root.fold else None   # folded layer -> source bytes
    ahead = None
    if known is not None and program is root:
        ahead = decompress.start(program, decompress.quiet_loader(_load_const, wfile, bin_path))
    try:
        _infer_in_order(program, diag, given, specs, known, ahead)
    finally:
        if ahead is not None:
            ahead.wait()       # nothing may read a folded weight before it is written
    if ahead is not None:
        for lid in ahead.outputs:
            if nodes[lid].folded is not None:
                nodes[lid].fold_seconds = ahead.share(lid)


def _infer_in_order(program: Program, diag: Collector, given, specs, known, ahead) -> None:
    nodes = program.nodes
    root = _root(program)
    wfile, bin_path = root.weights, root.bin_path
    memo = InferMemo()
    flags: dict[int, tuple] = {}      # id(op) -> (its bind, whether it never folds)
    for lid in program.order:
        node = nodes[lid]
        input_specs = []
        gap = False      # an input without a spec
        for src in node.inputs:
            made = specs.get(src[0]) if src is not None else None
            if made is None or src[1] >= len(made):
                gap = True
                input_specs.append(None)
            else:
                input_specs.append(made[src[1]])
        check_declared_inputs(node.layer, input_specs, diag, memo)
        if node.op is None or node.attrs is None:
            node.specs = None
            if node.bodies:
                _check_bodies_alone(node, input_specs, diag)
            continue
        if len(node.inputs) != len(node.layer.inputs) or None in node.inputs:
            continue   # an unconnected input is already reported
        if gap:
            # An earlier layer failed (already reported; do not cascade errors), unless the
            # producer inferred fine but has fewer outputs than the edge uses (fuzzing found
            # a Result or a one-output op feeding from "port 2" slipping through).
            for position, (src, out) in enumerate(node.inputs):
                made = nodes[src].specs
                if made is not None and out >= len(made):
                    diag.error("bad-edge", f"input {position} is fed by output {out} of layer "
                               f"'{nodes[src].layer.name}' ({nodes[src].layer.op_label}), which "
                               f"has {len(made)} output{'s' if len(made) != 1 else ''}",
                               line=node.layer.inputs[position].line, layer=node.layer)
            node.specs = None
            continue
        kind = node.kind
        if kind == "const":
            value = _load_const(node, wfile, bin_path, diag)
            if value is None:
                continue
            node.const_value = value
            out = [TensorSpec.of_value(value, value_etype(node))]
            check_declared_outputs(node.layer, out, diag, memo)
            node.specs = out
            if known is not None:
                known[lid] = value.nbytes
        elif kind == "parameter" and given is not None:
            node.specs = bodies.body_parameter_spec(node, given.get(lid), diag)
        else:
            t0 = time.perf_counter()
            op = node.op
            found = flags.get(id(op))
            if found is None or found[0] is not op:
                found = flags[id(op)] = (op, getattr(op.impl, "bind", None),
                                         getattr(op.impl, "NO_FOLD", False))
            _, bind, no_fold = found
            if bind is not None:
                # An op whose kernel needs its inputs' element types, which arrays do not
                # always carry (ConvertLike to an i4 "like", held as int8): bind(attrs,
                # *input_specs) gives the attributes its kernel runs with.
                node.attrs = bind(node.attrs, *input_specs)
            node.specs = infer_node(node, input_specs, diag, fold=not no_fold, memo=memo)
            if known is not None and kind == "op" and node.specs is not None:
                fold_node(node, input_specs, known, time.perf_counter() - t0, ahead, diag)
            if node.bodies:
                bodies.flush(node, diag)
                if node.specs is None:
                    _check_bodies_alone(node, input_specs, diag, only_uninferred=True)
        specs[lid] = node.specs


# Constant folding at load. A layer is computed once, when the model is read, when every
# output is already known from inference (ShapeOf of a static shape, small constant
# arithmetic) or when every input is a Const or a folded layer: f16 -> f32 decompression
# Converts, zero-point Subtract and scale Multiply of compressed weights, Reshape/Transpose
# of weights. The executor then hands out the stored outputs (Step kind "folded"), and the
# layers that only feed folded ones no longer run. Memory budget: a folded result may take
# at most FOLD_MAX_RATIO times the bytes of the Consts it derives from (u8/i8 weights
# dequantized to f32 are 4x; f16 -> f32 is 2x); anything larger (a Broadcast or Tile of a
# small Const to a big shape) stays lazy and runs at every inference, as do layers whose
# kernel fails here (the run reports that failure where it happens), except for a kernel
# refusing the memory budget (a size from the Consts' values): a located error at load. Off with
# read_model(..., fold=False) or IRRUN_FOLD=0. A large decompression Convert whose every
# consumer reads f16 weights itself is folded to its source instead, kept compressed
# (irrun.run.decompress.compressed_source). The Convert to f32 that ends a weight
# decompression chain (int weights, f16 zero point and scale) computes the chain in f32,
# as OpenVINO's plugin does (irrun.run.dequantize).
FOLD_MAX_RATIO = 4
NEVER_FOLD = frozenset(("Result", "ReadValue", "Assign", "RandomUniform", "Multinomial"))


def fold_node(node: Node, input_specs, known: dict[str, int], seconds: float,
              ahead: decompress.Ahead | None = None, diag: Collector | None = None) -> None:
    """Fold `node` when its outputs are constant and within the budget (see above); a
    decompression Convert of `ahead` takes the output the batch writes (irrun.run.decompress).
    A kernel that refuses the memory budget here (a size that comes from the Consts' values)
    refuses it at every run: an error of the file, reported to `diag`."""
    if (node.op.type in NEVER_FOLD or node.bodies or getattr(node.op.impl, "NO_FOLD", False)
            or not node.specs):
        node.folded = None
        return
    specs = node.specs
    previous, node.folded = node.folded, None    # a body may be inferred again
    if all(s.value is not None for s in specs):
        values = [np.asarray(s.value) for s in specs]
    else:
        if not node.inputs or any(src[0] not in known for src in node.inputs):
            return
        if previous is not None:      # only Consts feed it: the same values as last time
            node.folded = previous
            known[node.id] = sum(v.nbytes for v in previous)
            return
        if not all(is_static(s.shape) for s in specs):
            return
        source = sum(known[src[0]] for src in node.inputs)
        out_bytes = sum(nbytes(s.etype, int(np.prod(static_values(s.shape), dtype=np.int64)))
                        for s in specs)
        if out_bytes > FOLD_MAX_RATIO * source and out_bytes > 8 * FOLD_MAX_ELEMENTS:
            return
        producers = node.program.nodes
        args = []
        for src, out in node.inputs:
            p = producers[src]
            if ahead is not None and src in ahead.outputs:
                ahead.wait()
            args.append(p.const_value if p.kind == "const" else p.folded[out])
        t0 = time.perf_counter()
        kept = (decompress.compressed_source(node, args[0])
                if decompress.is_decompression(node) else None)
        if kept is not None:
            # Read as halves by every layer it feeds (irrun.opkit.compressed).
            node.folded = (CompressedWeights(kept),)
            node.fold_seconds = time.perf_counter() - t0
            known[node.id] = kept.nbytes
            return
        if ahead is not None and node.id in ahead.outputs:
            values = [ahead.outputs[node.id]]     # written by the batch (seconds: its share)
        else:
            try:
                with np.errstate(all="ignore"):
                    values = list(node.op.run(node.attrs, *args))
            except ResourceError as e:
                if diag is not None:
                    diag.error(e.diagnostic.code, f"{e.message} (all inputs are constant)",
                               layer=node.layer)
                return
            except Exception:
                return     # it fails at run time too, and is reported there with its location
        seconds = time.perf_counter() - t0
        if len(values) != len(specs) or any(
                type(v) is not np.ndarray or v.dtype != s.etype.dtype or
                v.shape != static_values(s.shape) for v, s in zip(values, specs)):
            return     # the executor's output check words this at run time
    if node.layer.type == "Convert":
        exact = dequantize.decompressed_in_f32(node)
        if exact is not None:
            # A weight decompression chain, in f32 as OpenVINO's plugin computes it; a small
            # one inference already folded passes the same values on to its consumers.
            values = [exact]
            if specs[0].value is not None:
                node.specs = [TensorSpec.of_value(exact, specs[0].etype)]
    frozen = []
    for v in values:
        v = v.view()
        v.flags.writeable = False    # shared by every run: a caller may not change it
        frozen.append(v)
    node.folded = tuple(frozen)
    node.fold_seconds = seconds
    known[node.id] = sum(v.nbytes for v in frozen)


def _root(program: Program) -> Program:
    while program.owner is not None:
        program = program.owner.program
    return program


def value_etype(node: Node):
    return element_type(node.attrs.element_type)
