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

The model builds such a plan when it sees the same input signature a second time (see
Model._plan), so a run with new shapes every time pays no extra inference.
"""
from __future__ import annotations

import numpy as np

from .errors import Collector
from .infer import infer_node
from .program import NEVER_FOLD
from .shapes import TensorSpec, shape_of


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
