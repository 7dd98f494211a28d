"""The executor: runs the layers the requested outputs need, in topological order.

A flat plan of integer slots is built once per (model, outputs); each intermediate is
freed after its last use. Errors from kernels get the layer's location added, the way
torch.fx adds "While executing <node>".
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .errors import IrrunError, OpError
from .graph import ancestors_and_self
from .infer import FOLD_MAX_ELEMENTS
from .shapes import (
    TensorSpec,
    format_shape,
    is_static,
    shape_matches,
    shape_of,
    static_values,
)
from .weights import check_alloc


@dataclass
class Step:
    node: object
    kind: str
    args: tuple[int, ...]        # input slots
    outs: tuple[int, ...]        # output slots
    free: tuple[int, ...]        # slots whose last use is this step
    recheck: tuple | None = None  # input element types, when shapes must be checked at run time
    expect: tuple = ()           # per output: (NumPy dtype, shape tuple if static else None)


class Plan:
    def __init__(self, program, targets: list[tuple[str, int]]):
        needed = ancestors_and_self(program.graph, [lid for lid, _ in targets])
        order = [lid for lid in program.order if lid in needed]
        slot_of: dict[tuple[str, int], int] = {}
        for lid in order:
            node = program.nodes[lid]
            for i in range(len(node.specs or ())):
                slot_of[(lid, i)] = len(slot_of)
        last_use: dict[int, int] = {}
        steps = []
        for position, lid in enumerate(order):
            node = program.nodes[lid]
            args = tuple(slot_of[src] for src in node.inputs)
            for a in args:
                last_use[a] = position
            outs = tuple(slot_of[(lid, i)] for i in range(len(node.specs or ())))
            step = Step(node, node.kind, args, outs, ())
            if node.kind == "op":
                in_specs = [program.nodes[src].specs[out] for src, out in node.inputs]
                if not all(is_static(s.shape) for s in list(in_specs) + list(node.specs)):
                    step.recheck = tuple(s.etype for s in in_specs)
                step.expect = tuple((s.etype.dtype, static_values(s.shape) if is_static(s.shape)
                                     else None) for s in node.specs)
            steps.append(step)
        self.targets = [slot_of[t] for t in targets]
        keep = set(self.targets)
        frees: dict[int, list[int]] = {}
        for s, position in last_use.items():
            if s not in keep:
                frees.setdefault(position, []).append(s)
        for position, step in enumerate(steps):
            step.free = tuple(frees.get(position, ()))
        self.steps = steps
        self.n_slots = len(slot_of)
        self.slot_of = slot_of


def _location(program, node):
    layer = node.layer
    return dict(file=program.path, line=layer.line, layer_id=layer.id, layer_name=layer.name,
                op=layer.op_label)


def check_inputs(node, etypes, arrays) -> None:
    """Run the op's shape rule again on the real inputs, for a layer whose shapes were not all
    known at load time.

    So a kernel never sees inputs its rule refuses (a rank that a dynamic-rank Parameter let
    through, lengths that disagree), and an output whose size comes from input values (a
    Range, a num_segments, a Broadcast target) is refused before it is allocated.
    """
    specs = [TensorSpec(et, shape_of(a.shape), a if a.size <= FOLD_MAX_ELEMENTS else None)
             for et, a in zip(etypes, arrays)]
    for index, spec in enumerate(node.op.infer(node.attrs, *specs)):
        if spec.shape is not None:
            check_alloc([d.lo for d in spec.shape], spec.etype, f"output {index}")


def check_output(node, index, value):
    """The kernel's output must agree with what inference promised."""
    spec = node.specs[index]
    if not isinstance(value, np.ndarray):
        raise OpError(f"internal error: output {index} is a {type(value).__name__}, not an array")
    if value.dtype != spec.etype.dtype:
        raise OpError(f"internal error: output {index} has dtype {value.dtype} but inference "
                      f"promised {spec.etype.name}")
    if not shape_matches(spec.shape, value.shape):
        raise OpError(f"output {index} has shape {list(value.shape)} but inference promised "
                      f"{format_shape(spec.shape)}")


def execute(program, plan: Plan, feeds: dict[str, np.ndarray], listener=None,
            keep_all: bool = False) -> list[np.ndarray] | tuple[list, dict]:
    """Run the plan. `feeds` maps Parameter layer ids to checked arrays.

    `listener(node, outputs, seconds)` is called after each layer (profile, trace, dump).
    With keep_all, nothing is freed and every slot is returned too.
    """
    values: list = [None] * plan.n_slots
    clock = time.perf_counter
    # Overflow to inf and NaN from 0/0 are what IR semantics compute, not a reason for NumPy
    # to print warnings mid-run (--check-nan finds them); set once here, not per kernel.
    with np.errstate(all="ignore"):
        _run_steps(program, plan, feeds, listener, keep_all, values, clock)
    result = [values[t] for t in plan.targets]
    if keep_all:
        return result, values
    return result


def _run_steps(program, plan, feeds, listener, keep_all, values, clock):
    """The interpreter loop: fills `values` slot by slot."""
    for step in plan.steps:
        node = step.node
        t0 = clock() if listener is not None else 0.0
        try:
            if step.kind == "parameter":
                outputs = (feeds[node.layer.id],)
            elif step.kind == "const":
                outputs = (node.const_value,)
            elif step.kind == "result":
                outputs = ()
            else:
                args = [values[a] for a in step.args]
                if step.recheck is not None:
                    check_inputs(node, step.recheck, args)
                outputs = node.op.run(node.attrs, *args)
                if len(outputs) != len(step.outs):
                    raise OpError(f"internal error: the kernel returned {len(outputs)} outputs, "
                                  f"inference promised {len(step.outs)}")
                for i, (v, (dtype, shape)) in enumerate(zip(outputs, step.expect)):
                    # The common case costs two comparisons; anything else (a dynamic
                    # shape, a mismatch, an ndarray subclass) takes the full check, which
                    # words the error.
                    if type(v) is not np.ndarray or v.dtype != dtype or v.shape != shape:
                        check_output(node, i, v)
        except IrrunError as e:
            raise e.locate(**_location(program, node)) from e
        except MemoryError:
            raise OpError("out of memory while running this layer").locate(
                **_location(program, node)) from None
        except Exception as e:  # a kernel bug: still say where it happened
            raise OpError(f"internal error in the kernel: {type(e).__name__}: {e}").locate(
                **_location(program, node)) from e
        for s, v in zip(step.outs, outputs):
            values[s] = v
        if listener is not None:
            listener(node, outputs, clock() - t0)
        if not keep_all:
            for s in step.free:
                values[s] = None
