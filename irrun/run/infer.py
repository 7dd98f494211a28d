"""Shape-and-type inference: one walk over the graph in topological order.

Each op's `infer(attrs, *specs)` returns the output TensorSpecs. When every input value is
known and small, the kernel runs at load time too (constant folding), so values flow
through ShapeOf -> Gather -> Concat -> Reshape chains and dims that depend on constants are
known before run time.
"""
from __future__ import annotations

import numpy as np

from ..errors import IrrunError, OpProblem
from ..ir.etypes import normalize_precision
from ..ir.shapes import TensorSpec, format_shape
from ..ir.weights import check_alloc
from ..opkit.problems import collect_warnings, stop_collecting
from ..opkit.problems import fail as _kit_fail
from ..opkit.problems import warn as _kit_warn

# Fold an op at load time only when its inputs are small: big Consts (weights) stay memory
# mapped, and load time stays proportional to the file, not to the work.
FOLD_MAX_ELEMENTS = 4096

# The kit's fail/warn, re-exported for older extensions that imported them from here.
fail = _kit_fail
warn = _kit_warn


def _where(e: BaseException) -> str:
    """'file.py:LINE' of the innermost frame that raised `e`."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "unknown location"
    import os

    return f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"


def _dims_disagree(declared: list[int], shape) -> bool:
    """Whether declared <dim>s contradict an inferred partial shape.

    The writer puts -1 for every dynamic or interval dim, so -1 agrees with anything, and a
    declared number only has to fit the inferred interval (irrun may know less than
    OpenVINO did when it wrote the file)."""
    if len(declared) != len(shape):
        return True
    for d, dim in zip(declared, shape):
        if d != -1 and not (dim.lo <= d and (dim.hi is None or d <= dim.hi)):
            return True
    return False


# normalize_precision by spelling: every port of a file spells one of a handful.
_NORMALIZED: dict[str, str | None] = {}


def _normalized(precision: str) -> str | None:
    found = _NORMALIZED.get(precision, False)
    if found is False:
        found = normalize_precision(precision)
        if len(_NORMALIZED) < 256:
            _NORMALIZED[precision] = found
    return found


def declared_problem(what: str, port, spec: TensorSpec, verb: str = "infers") -> str | None:
    """`what` declares precision/dims that disagree with `spec`, or None.

    A port whose declaration could not be read (None) is not compared: that is already
    reported as its own problem.
    """
    notes = []
    if port.precision is not None:
        declared = _normalized(port.precision)
        if declared and declared != spec.etype.name:
            notes.append(f"precision {port.precision} but {verb} {spec.etype.name}")
    if spec.shape is not None and port.dims is not None and _dims_disagree(port.dims, spec.shape):
        shown = "[" + ",".join(str(d) for d in port.dims) + "]"
        notes.append(f"dims {shown} but {verb} {format_shape(spec.shape)}")
    if notes:
        return f"{what} declares " + " and ".join(notes)
    return None


def _agrees(port, spec: TensorSpec) -> bool:
    """Whether declared_problem finds nothing, without building its message (most ports)."""
    if port.precision is not None:
        declared = _normalized(port.precision)
        if declared and declared != spec.etype.name:
            return False
    return spec.shape is None or port.dims is None or not _dims_disagree(port.dims, spec.shape)


def check_declared_outputs(layer, specs: list[TensorSpec], diag, memo=None) -> None:
    """Warn where the layer's <output> ports declare other types or dims than inferred."""
    agrees = _agrees if memo is None else memo.agrees
    for port, spec in zip(layer.outputs, specs):
        if agrees(port, spec):
            continue
        problem = declared_problem(f"output port {port.id}", port, spec)
        if problem:
            diag.warning("declared-mismatch", problem, line=port.line, layer=layer)


def check_declared_inputs(layer, input_specs: list[TensorSpec | None], diag, memo=None) -> None:
    """Warn where the layer's <input> ports declare other types or dims than what feeds them.

    OpenVINO ignores these declarations as well; a Result's input port is the only place
    that declares the type and shape of a model output.
    """
    agrees = _agrees if memo is None else memo.agrees
    for port, spec in zip(layer.inputs, input_specs):
        if spec is None or agrees(port, spec):
            continue
        problem = declared_problem(f"input port {port.id}", port, spec, "receives")
        if problem:
            diag.warning("declared-mismatch", problem, line=port.line, layer=layer)


class InferMemo:
    """What inference found for an op, its attributes and its input specs, for the next
    layer that asks the same (one per network's inference).

    A shape rule is a function of the attributes and the input specs alone, so a chain of
    200,000 Converts or 1,000,000 Parameters of one shape need it run once per distinct
    question, not per layer. Only questions without values are remembered (a layer whose
    inputs carry values may fold, which is per layer), and only answers without values or
    errors. Keys are object identities, which make a lookup cheap: attributes are shared by
    the layers that spell the same <data> (irrun.run.program._parse_attrs), and the specs it
    answers are interned (one object for equal specs), so the next layer's input is the very
    spec the last one's question was asked with. Every object a key names is kept alive by
    its entry, so an identity is never reused for another object while the memo lives.
    """

    __slots__ = ("answers", "interned", "agreed")

    def __init__(self):
        self.answers: dict[tuple, tuple] = {}    # ids -> (key objects, specs, warnings)
        self.interned: dict[TensorSpec, TensorSpec] = {}
        self.agreed: dict[tuple, tuple] = {}     # (precision, id(spec), dims) -> (spec, agrees)

    def intern(self, spec: TensorSpec) -> TensorSpec:
        return self.interned.setdefault(spec, spec)

    def agrees(self, port, spec: TensorSpec) -> bool:
        """_agrees(port, spec), once per declaration and spec (most ports of a file declare
        one of a few)."""
        dims = port.dims
        key = (port.precision, id(spec), None if dims is None else tuple(dims))
        found = self.agreed.get(key)
        if found is None or found[0] is not spec:
            found = self.agreed[key] = (spec, _agrees(port, spec))
        return found[1]


def infer_node(node, input_specs: list[TensorSpec], diag, fold=True,
               memo: InferMemo | None = None) -> list[TensorSpec] | None:
    """Infer one node's outputs; report problems to diag. None when inference failed.

    `memo` (optional) answers a question asked before (see InferMemo)."""
    layer = node.layer
    key = None
    if memo is not None and not node.bodies:     # (a body's inference is per layer)
        for s in input_specs:
            if s.value is not None:
                break
        else:
            key = (id(node.op), id(node.attrs), *map(id, input_specs))
            found = memo.answers.get(key)
            if found is not None:
                for code, message in found[2]:
                    diag.warning(code, message, layer=layer)
                return _checked_outputs(node, list(found[1]), diag, memo)
    sink: list = []
    token = collect_warnings(sink)
    try:
        specs = list(node.op.infer(node.attrs, *input_specs))
    except IrrunError as e:     # fail() in the rule (OpProblem) or a kit error
        diag.error(e.diagnostic.code, e.message, layer=layer)
        return None
    except Exception as e:
        # Any other exception is a bug in the shape rule, whatever its type (an IndexError
        # is not the user's "shape" problem); it must not stop validating the rest.
        diag.error("internal", f"internal error in the shape rule of {node.op.label}: "
                   f"{type(e).__name__}: {e} ({_where(e)}; an irrun bug, please report it)",
                   layer=layer)
        return None
    finally:
        stop_collecting(token)
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
    if key is not None and all(type(s) is TensorSpec and s.value is None for s in specs):
        try:
            specs = [memo.intern(s) for s in specs]
        except TypeError:      # something unhashable in a spec: not remembered
            pass
        else:
            memo.answers[key] = ((node.op, node.attrs, *input_specs), tuple(specs), tuple(sink))

    if fold and specs and all(s.value is not None for s in input_specs) and input_specs and \
            all(s.value.size <= FOLD_MAX_ELEMENTS for s in input_specs) and node.op.type != "Result":
        try:
            with np.errstate(all="ignore"):   # as in the executor: inf/NaN are values here
                values = node.op.run(node.attrs, *[s.value for s in input_specs])
            specs = [TensorSpec.of_value(v, s.etype) if v.size <= FOLD_MAX_ELEMENTS else s
                     for v, s in zip(values, specs)]
        except IrrunError as e:
            # Every input is constant: this layer fails whenever it runs. A fail() in the
            # kernel is a value problem here, as it would be at run time.
            code = "value" if isinstance(e, OpProblem) else e.diagnostic.code
            diag.error(code, f"{e.message} (all inputs are constant)", layer=layer)
            return None
        except Exception:   # a kernel bug must not stop validation; the run reports it
            pass
    return _checked_outputs(node, specs, diag, memo)


def _checked_outputs(node, specs: list[TensorSpec], diag, memo) -> list[TensorSpec]:
    """The layer's declared outputs compared with what was inferred."""
    layer = node.layer
    check_declared_outputs(layer, specs, diag, memo)
    if len(specs) != len(layer.outputs) and layer.type.lower() != "result":
        # Extra ports name outputs that do not exist (an error: what feeds their consumers?);
        # missing ones only leave outputs unused.
        report = diag.error if len(layer.outputs) > len(specs) else diag.warning
        report("port-count", f"the layer declares {len(layer.outputs)} output ports but "
               f"{node.op.label} has {len(specs)} output{'s' if len(specs) != 1 else ''}",
               layer=layer)
    return specs
