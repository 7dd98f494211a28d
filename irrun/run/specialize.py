"""Static plans for models with dynamic inputs: shape inference again, with the fed shapes.

Models as the converters write them mostly declare dynamic inputs (`?,3,?,?`), so every
layer after them has dynamic shapes: the executor runs each such layer's shape rule again
at each run (its inputs may differ from the last run's), and counts what the run holds.
Fed inputs of the same types and shapes again, most of that work proves nothing new.
Inference with the Parameters' shapes set to the fed ones gives static shapes for every
layer whose shapes follow from the input shapes alone, whatever the input values, and the
values of layers that follow from shapes alone (ShapeOf, and the shape arithmetic after
it). A plan built on those specs (executor.Plan's `specs`) runs the first as the
executor's fast path and hands out the second without running them; layers whose shapes
depend on input values (a Range of fed bounds, NonZero) keep their run-time check.

A program builds such a plan when it sees the same input signature a second time
(SignaturePlans: the model's own, and each body's, whose iterations mostly feed it the
same shapes), so a run with new shapes every time pays no extra inference.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..errors import Collector
from ..ir.shapes import DYNAMIC, Dim, TensorSpec
from .infer import infer_node
from .program import NEVER_FOLD


def specialize(program, feeds: dict[str, np.ndarray], variables: dict | None = None,
               ) -> dict[str, list[TensorSpec]] | None:
    """Every node's output specs with the Parameters' shapes those of `feeds` (by
    Parameter id) and each ReadValue of a variable in `variables` (variable_id -> shape)
    giving that shape: a node the pass does not infer again (a Const, a folded layer, a
    layer with bodies) keeps its own. None when some rule refuses the fed shapes: the plan
    without specs then runs and reports that layer's error where it happens."""
    return specialize_shapes(program, {lid: a.shape for lid, a in feeds.items()}, variables)


def specialize_shapes(program, shapes: dict, variables: dict | None = None,
                      ) -> dict[str, list[TensorSpec]] | None:
    """As `specialize`, from shapes alone (tuples of ints, None for a dim left dynamic: a
    dim that differs between runs)."""
    diag = Collector(program.path)
    variables = variables or {}
    readable = _readable_variables(program) if variables else {}
    specs: dict[str, list[TensorSpec]] = {}
    for lid in program.order:
        node = program.nodes[lid]
        kind = node.kind
        if node.specs is None:
            specs[lid] = None
        elif kind == "parameter" and lid in shapes:
            specs[lid] = [TensorSpec(node.specs[0].etype, _partial(shapes[lid], node.specs[0]))]
        elif lid in readable and readable[lid] in variables:
            # The session's value of the variable, which is what this ReadValue reads.
            specs[lid] = [TensorSpec(node.specs[0].etype,
                                     _partial(variables[readable[lid]], node.specs[0]))]
        elif kind in ("const", "parameter") or node.folded is not None or node.bodies \
                or node.op is None or node.attrs is None:
            specs[lid] = node.specs
        else:
            inputs = [specs[src][out] if specs.get(src) is not None else None
                      for src, out in node.inputs]
            if any(s is None for s in inputs):
                return None
            out = infer_node(node, inputs, diag,
                             fold=not getattr(node.op.impl, "NO_FOLD", False))
            if out is None or len(out) != len(node.specs):
                return None
            specs[lid] = out
    return specs


def _partial(shape, declared: TensorSpec):
    """A shape (ints, None for a dim left dynamic) as Dims; a dynamic dim keeps the
    declared one's bounds."""
    dims = declared.shape
    return tuple(Dim.of(d) if d is not None else
                 (dims[i] if dims is not None and len(dims) == len(shape) else DYNAMIC)
                 for i, d in enumerate(shape))


def _readable_variables(program) -> dict[str, str]:
    """ReadValue layer id -> variable_id, for the ReadValues that read what the last run
    left: those no Assign of their variable comes before (one that does reads this run's
    write, whose shape the start of a run does not know)."""
    cached = getattr(program, "_readable_variables", None)
    if cached is not None:
        return cached
    readable, assigned = {}, set()
    for lid in program.order:
        node = program.nodes[lid]
        if node.attrs is None or node.kind != "op":
            continue
        kind = node.layer.type.lower()
        if kind == "assign":
            assigned.add(node.attrs.variable_id)
        elif kind == "readvalue" and node.attrs.variable_id not in assigned and node.specs:
            readable[lid] = node.attrs.variable_id
    program._readable_variables = readable
    return readable


def known_values(program, specs: dict[str, list[TensorSpec]]) -> dict[str, tuple]:
    """The layers whose every output `specs` gives as a value, by id: what load-time folding
    (program.fold_node) would have folded had those been the declared shapes."""
    known = {}
    for lid in program.order:
        node, out = program.nodes[lid], specs.get(lid)
        if (node.kind != "op" or node.folded is not None or not out or node.bodies
                or node.op.type in NEVER_FOLD or getattr(node.op.impl, "NO_FOLD", False)):
            continue
        if all(s.value is not None for s in out):
            known[lid] = tuple(np.asarray(s.value) for s in out)
    return known


# A program with dynamic shapes gets a plan of its own for an input signature (types and
# shapes) on the signature's SPECIALIZE_AT-th run; the MAX_SIGNATURE_PLANS most recently
# used are kept. Likewise for a pattern: the dims that differed between two runs in a row
# left dynamic (a decode step's mask and KV cache grow by one each run; nothing else does).
SPECIALIZE_AT = 2
MAX_SIGNATURE_PLANS = 8
# A signature that fits a pattern's plan gets one of its own only on its EXACT_AFTER_PATTERN-th
# run: the pattern's plan rechecks a few layers, and building a plan costs as much as a
# hundred of their rechecks (a decode step's signatures come back only when the same
# tokens are generated again).
EXACT_AFTER_PATTERN = 16


def signature(feeds: dict, variables: dict | None = None) -> tuple:
    """What a plan is specialised to: each fed array's (Parameter id, dtype, shape), then
    each session variable's (("variable", id), dtype, shape)."""
    sig = tuple((lid, a.dtype.str, a.shape) for lid, a in feeds.items())
    if variables:
        sig += tuple((("variable", v), a.dtype.str, a.shape) for v, a in variables.items())
    return sig


def generalize(last: tuple | None, sig: tuple) -> tuple | None:
    """`sig` with the dims that differ from `last` as None; None when the two differ in
    anything but dims (names, types, ranks) or not at all."""
    if last is None or len(last) != len(sig) or last == sig:
        return None
    out = []
    for (name, dtype, shape), (name0, dtype0, shape0) in zip(sig, last):
        if name != name0 or dtype != dtype0 or len(shape) != len(shape0):
            return None
        out.append((name, dtype, shape if shape == shape0 else
                    tuple(d if d == d0 else None for d, d0 in zip(shape, shape0))))
    return tuple(out)


def _fits(pattern: tuple, sig: tuple) -> bool:
    if len(pattern) != len(sig):
        return False
    for (name, dtype, shape), (name0, dtype0, shape0) in zip(sig, pattern):
        if name != name0 or dtype != dtype0 or len(shape) != len(shape0):
            return False
        if shape != shape0:
            for d, d0 in zip(shape, shape0):
                if d0 is not None and d != d0:
                    return False
    return True


_OPEN: dict = {}


def _open_dims(pattern: tuple) -> int:
    """How many dims the pattern leaves dynamic (kept: every run asks)."""
    n = _OPEN.get(pattern)
    if n is None:
        if len(_OPEN) >= 256:
            _OPEN.clear()
        n = _OPEN[pattern] = sum(d is None for _, _, shape in pattern for d in shape)
    return n


class SignaturePlans:
    """The plans one program has for input signatures, beside its general plans."""

    def __init__(self, program):
        self.program = program
        # Most recently used last; False where the fed shapes give no plan of their own.
        self.plans: OrderedDict = OrderedDict()
        self.seen: dict = {}          # how often each signature ran before it had one
        # The same for patterns (signatures with dims left dynamic, see generalize), and
        # the signature each kind of run (the outputs wanted) had last.
        self.patterns: OrderedDict = OrderedDict()
        self.patterns_seen: dict = {}
        self.last: dict = {}
        self._lock = threading.Lock()

    def plan(self, general, key: tuple, feeds: dict, make, variables: dict | None = None):
        """The plan for `feeds` (by Parameter id) and the session's `variables` (by id):
        `general` (for `key`: the outputs wanted) while the signature is new or the program
        is static; else the one make(specs, known) built for it, or for a pattern it fits."""
        if general.most_bytes is not None:       # every shape static already
            return general
        sig = signature(feeds, variables)
        full = key + (sig,)
        with self._lock:
            special = self.plans.get(full)
            if special is not None:
                self.plans.move_to_end(full)
                return special or general
            last, self.last[key] = self.last.get(key), sig
            seen = self.seen.get(full, 0) + 1
            best = self._narrowest(key, sig) if self.patterns else None
            at = EXACT_AFTER_PATTERN if best else SPECIALIZE_AT
            if seen < at:
                if len(self.seen) >= 4 * MAX_SIGNATURE_PLANS:
                    self.seen.clear()
                self.seen[full] = seen
            else:
                self.seen.pop(full, None)
        if seen >= at:
            shapes = {lid: a.shape for lid, a in feeds.items()}
            shapes_of = {v: a.shape for v, a in (variables or {}).items()}
            special = self._make(shapes, shapes_of, make)
            with self._lock:
                self.plans[full] = special
                while len(self.plans) > MAX_SIGNATURE_PLANS:
                    self.plans.popitem(last=False)
            if special:
                return special
        return self._pattern_plan(key, last, sig, make, best) or general

    def _pattern_plan(self, key, last, sig, make, best):
        """The plan of `best`, the narrowest pattern `sig` fits, building the pattern `sig`
        makes with the last signature once it has been seen SPECIALIZE_AT times."""
        with self._lock:
            best_open = _open_dims(best[1]) if best else None
            pattern = generalize(last, sig)
            build = False
            if pattern is not None and (key, pattern) not in self.patterns:
                seen = self.patterns_seen.get((key, pattern), 0) + 1
                self.patterns_seen[(key, pattern)] = seen
                if len(self.patterns_seen) > 4 * MAX_SIGNATURE_PLANS:
                    self.patterns_seen.clear()
                build = seen >= SPECIALIZE_AT and (best is None or _open_dims(pattern) < best_open)
        if build:
            feeds_part = [p for p in pattern if not isinstance(p[0], tuple)]
            variables_part = [p for p in pattern if isinstance(p[0], tuple)]
            special = self._make({lid: shape for lid, _, shape in feeds_part},
                                 {name[1]: shape for name, _, shape in variables_part}, make)
            with self._lock:
                self.patterns_seen.pop((key, pattern), None)
                self.patterns[(key, pattern)] = special
                while len(self.patterns) > MAX_SIGNATURE_PLANS:
                    self.patterns.popitem(last=False)
            if special:
                return special
        if best is None:
            return None
        with self._lock:
            self.patterns.move_to_end(best)
            return self.patterns.get(best)

    def _narrowest(self, key, sig):
        """The (key, pattern) of the pattern plan `sig` fits with the fewest dynamic dims."""
        best, best_open = None, None
        for (k, pattern), plan in self.patterns.items():
            if plan and k == key and _fits(pattern, sig):
                n = _open_dims(pattern)
                if best is None or n < best_open:
                    best, best_open = (k, pattern), n
        return best

    def _make(self, shapes, variables, make):
        specs = specialize_shapes(self.program, shapes, variables)
        return False if specs is None else make(specs, known_values(self.program, specs))
