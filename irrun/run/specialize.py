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
from ..ir.shapes import TensorSpec, shape_of
from .infer import infer_node
from .program import NEVER_FOLD


def specialize(program, feeds: dict[str, np.ndarray]) -> dict[str, list[TensorSpec]] | None:
    """Every node's output specs with the Parameters' shapes those of `feeds` (by
    Parameter id): a node the pass does not infer again (a Const, a folded layer, a layer
    with bodies) keeps its own. None when some rule refuses the fed shapes: the plan
    without specs then runs and reports that layer's error where it happens."""
    diag = Collector(program.path)
    specs: dict[str, list[TensorSpec]] = {}
    for lid in program.order:
        node = program.nodes[lid]
        kind = node.kind
        if node.specs is None:
            specs[lid] = None
        elif kind == "parameter" and lid in feeds:
            specs[lid] = [TensorSpec(node.specs[0].etype, shape_of(feeds[lid].shape))]
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
# used are kept.
SPECIALIZE_AT = 2
MAX_SIGNATURE_PLANS = 8


class SignaturePlans:
    """The plans one program has for input signatures, beside its general plans."""

    def __init__(self, program):
        self.program = program
        # Most recently used last; False where the fed shapes give no plan of their own.
        self.plans: OrderedDict = OrderedDict()
        self.seen: dict = {}          # how often each signature ran before it had one
        self._lock = threading.Lock()

    def plan(self, general, key: tuple, feeds: dict, make):
        """The plan for `feeds` (by Parameter id): `general` (for `key`: the outputs
        wanted) while the signature is new or the program is static, else the one
        make(specs, known) built for it."""
        if general.most_bytes is not None:       # every shape static already
            return general
        key += (tuple((lid, a.dtype.str, a.shape) for lid, a in feeds.items()),)
        with self._lock:
            special = self.plans.get(key)
            if special is not None:
                self.plans.move_to_end(key)
                return special or general
            seen = self.seen.get(key, 0) + 1
            if seen < SPECIALIZE_AT:
                if len(self.seen) >= 4 * MAX_SIGNATURE_PLANS:
                    self.seen.clear()
                self.seen[key] = seen
                return general
            self.seen.pop(key, None)
        specs = specialize(self.program, feeds)
        special = False if specs is None else make(specs, known_values(self.program, specs))
        with self._lock:
            self.plans[key] = special
            while len(self.plans) > MAX_SIGNATURE_PLANS:
                self.plans.popitem(last=False)
        return special or general
