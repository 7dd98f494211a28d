"""Shape-and-type inference: one walk over the graph in topological order.

Each op's `infer(attrs, *specs)` returns the output TensorSpecs. When every input value is
known and small, the kernel runs at load time too (constant folding), so values flow
through ShapeOf -> Gather -> Concat -> Reshape chains and dims that depend on constants are
known before run time.
"""
from __future__ import annotations

import contextvars

import numpy as np

from .errors import IrrunError, ShapeError
from .etypes import normalize_precision
from .shapes import TensorSpec, format_shape
from .weights import check_alloc

# Fold an op at load time only when its inputs are small: big Consts (weights) stay memory
# mapped, and load time stays proportional to the file, not to the work.
FOLD_MAX_ELEMENTS = 4096

_warnings: contextvars.ContextVar[list | None] = contextvars.ContextVar("irrun_warnings", default=None)


def warn(message: str, code: str = "value") -> None:
    """Called from an op's infer(): a problem that OpenVINO tolerates, reported as a warning."""
    sink = _warnings.get()
    if sink is not None:
        sink.append((code, message))


def fail(message: str) -> None:
    """Raise the shape/type error an op's infer() reports."""
    raise ShapeError(message)


def _declared_problems(layer, index, port, spec: TensorSpec) -> str | None:
    notes = []
    if port.precision is not None:
        declared = normalize_precision(port.precision)
        if declared and declared != spec.etype.name:
            notes.append(f"precision {port.precision} but infers {spec.etype.name}")
    if spec.shape is not None:
        inferred = list(spec.shape)
        declared_dims = port.dims or []
        mismatch = len(declared_dims) != len(inferred)
        if not mismatch:
            for d, dim in zip(declared_dims, inferred):
                if d == -1:
                    continue
                if not dim.contains(d) or (dim.is_static and dim.value != d):
                    mismatch = True
        if mismatch:
            shown = "[" + ",".join(str(d) for d in declared_dims) + "]"
            notes.append(f"dims {shown} but infers {format_shape(spec.shape)}")
    if notes:
        return f"output port {port.id} declares " + " and ".join(notes)
    return None


def infer_node(node, input_specs: list[TensorSpec], diag, fold=True) -> list[TensorSpec] | None:
    """Infer one node's outputs; report problems to diag. None when inference failed."""
    layer = node.layer
    sink: list = []
    token = _warnings.set(sink)
    try:
        specs = list(node.op.infer(node.attrs, *input_specs))
    except IrrunError as e:
        diag.error(e.diagnostic.code, e.message, layer=layer)
        return None
    except (ValueError, TypeError, IndexError) as e:
        diag.error("shape", f"{e}", layer=layer)
        return None
    finally:
        _warnings.reset(token)
    for code, message in sink:
        diag.warning(code, message, layer=layer)
    # A memory bomb (a huge static Parameter, a Broadcast or Range of small constants to a
    # huge shape) is refused here, before constant folding or a run could allocate it.
    for index, spec in enumerate(specs):
        if spec.shape is not None:
            try:
                check_alloc([d.lo for d in spec.shape], spec.etype, f"output {index}")
            except IrrunError as e:
                diag.error("too-large", e.message, layer=layer)
                return None

    if fold and specs and all(s.value is not None for s in input_specs) and input_specs and \
            all(s.value.size <= FOLD_MAX_ELEMENTS for s in input_specs) and node.op.type != "Result":
        try:
            values = node.op.run(node.attrs, *[s.value for s in input_specs])
            specs = [TensorSpec.of_value(v, s.etype) if v.size <= FOLD_MAX_ELEMENTS else s
                     for v, s in zip(values, specs)]
        except IrrunError as e:
            # Every input is constant: this layer fails whenever it runs.
            diag.error(e.diagnostic.code, f"{e.message} (all inputs are constant)", layer=layer)
            return None
        except Exception:   # a kernel bug must not stop validation; the run reports it
            pass
    for index, spec in enumerate(specs):
        if index < len(layer.outputs):
            problem = _declared_problems(layer, index, layer.outputs[index], spec)
            if problem:
                diag.warning("declared-mismatch", problem, line=layer.outputs[index].line, layer=layer)
    if len(specs) != len(layer.outputs) and layer.type.lower() != "result":
        diag.warning("port-count", f"the layer declares {len(layer.outputs)} output ports but the op "
                     f"has {len(specs)} outputs", layer=layer)
    return specs


def values_equal_shape(spec: TensorSpec, array: np.ndarray) -> bool:
    from .shapes import shape_matches
    return shape_matches(spec.shape, array.shape)
