"""Bodies and state: Loop-5, TensorIterator-1 (spec pages infrastructure/loop-5,
tensor-iterator-1), If-8 (condition/if-8), ReadValue-3/6 and Assign-3/6
(infrastructure/read-value-3, read-value-6, assign-3, assign-6).

A layer with a body has no <data> attributes: the loader checks its port map and back edges
and hands the kernel, as `attrs`, a record with one view per body (`attrs.bodies`): the
input rules (layer input position -> body Parameter index, with slicing), the output rules
(body Result index -> layer output position, last value or concatenation), the back edges
(Result index -> Parameter index), Loop's current-iteration Parameter and condition Result,
and the body itself, with `infer(specs) -> specs` and `run(arrays) -> arrays` over the
Parameters and Results by index. The classes say which bodies they need in `BODIES`.

ReadValue and Assign compute what a stateless run sees (the initial value; the value
written); the executor keeps the variables of a session between runs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irrun.opkit import (
    DYNAMIC,
    Dim,
    ElementTypeName,
    NoAttrs,
    PartialShapeText,
    ResourceError,
    TensorSpec,
    check_alloc,
    element_type,
    fail,
    format_shape,
    is_static,
    known_ints,
    max_tensor_bytes,
    normalize_axis,
    parse_partial_shape,
    register,
    static_values,
    warn,
)

# Body inference runs again while a back edge changes a Parameter's shape; every round
# turns each dim that changed into a dynamic one, so it settles within rank + 2 rounds.
_MAX_ROUNDS = 16

# A concatenated output holds each iteration's part until the last: a part counts as its
# bytes and the array that holds them (NumPy's header of a view), so that parts of no bytes
# (a [0]-shaped Result) add up too. How many iterations run at all is bounded by the body
# runs a run makes (irrun.run.bodies.ITERATION_BYTES, through `Body.check_iterations`).
PART_BYTES = 128


def _check_held(held: int, parts: int, position: int, limit: int) -> None:
    """Refuse the concatenated outputs' parts when they hold more than `limit` bytes (the
    concatenations grow each iteration: refused before they are too big)."""
    if held > limit:
        raise ResourceError(f"output {position}: the {parts} parts of the concatenated outputs "
                            f"so far hold {held} bytes (each part's bytes and {PART_BYTES} for "
                            f"its array), more than the limit of {limit} bytes (set "
                            "IRRUN_MAX_BYTES to change it)")


def _no_value(s: TensorSpec) -> TensorSpec:
    return TensorSpec(s.etype, s.shape)


def _generalize(a: TensorSpec, b: TensorSpec) -> TensorSpec:
    """A spec covering both (the body Parameter over all iterations): dims that differ
    become dynamic, ranks that differ a dynamic rank."""
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorSpec(a.etype, None)
    return TensorSpec(a.etype, tuple(x if x == y else DYNAMIC for x, y in zip(a.shape, b.shape)))


def _check_flag(spec: TensorSpec, what: str, kinds: tuple[str, ...], names: str) -> None:
    if spec.etype.name not in kinds:
        fail(f"{what} must be {names}, got {spec.etype.name}")
    if spec.shape is not None and (len(spec.shape) > 1 or
                                   (len(spec.shape) == 1 and not spec.shape[0].contains(1))):
        fail(f"{what} must be a scalar or a 1-element 1D tensor, got {format_shape(spec.shape)}")


def _flag(a: np.ndarray, what: str):
    if a.size != 1:
        fail(f"{what} must hold exactly one element, got shape {list(a.shape)}")
    return a.reshape(-1)[0]


# ---------------------------------------------------------------- slicing (Loop, TensorIterator)

def _slice_count(rule, dim: int) -> int:
    """TensorIterator: how many parts a sliced input of length `dim` gives.

    start and end are both included and count from the end when negative (OpenVINO's
    TensorIterator: (|end - start| + 1) / part_size)."""
    start = rule.start + dim if rule.start < 0 else rule.start
    end = rule.end + dim if rule.end < 0 else rule.end
    return (abs(end - start) + 1) // max(rule.part_size, 1)


def _slicer(a: np.ndarray, rule, axis: int, count: int, loop: bool):
    """part(i): the i-th part of a sliced input, a view of `a` made when iteration i needs
    it (a [5000000, 0] input has 5000000 parts: not a list of them before the first).

    Loop slices the whole axis into parts of 1 (its port map has no start/end; OpenVINO
    ignores them there). TensorIterator starts at `start` and steps by `stride`; a negative
    stride walks backwards from `start`. Part i's first index is linear in i, so the first
    and the last part inside the axis means all of them are."""
    dim = a.shape[axis]
    lead = (slice(None),) * axis
    if loop:
        if rule.stride > 0:
            return lambda i: a[lead + (slice(i, i + 1),)]
        return lambda i: a[lead + (slice(dim - 1 - i, dim - i),)]
    size = max(rule.part_size, 1)
    start = rule.start + dim if rule.start < 0 else rule.start
    step = rule.stride
    base = start if step > 0 else start - size + 1
    for i in (0, count - 1) if count > 1 else (0,) if count else ():
        first = base + i * step
        if first < 0 or first + size > dim:
            fail(f"sliced input {rule.position}: part {i} [{first}, {first + size}) is outside "
                 f"axis {axis} of length {dim}")
    return lambda i: a[lead + (slice(base + i * step, base + i * step + size),)]


def _sliced_spec(s: TensorSpec, rule, loop: bool) -> tuple[TensorSpec, int | None]:
    """The body Parameter's spec for a sliced input, and the iteration count it implies."""
    if s.shape is None:
        return TensorSpec(s.etype, None), None
    axis = normalize_axis(rule.axis, len(s.shape), f"sliced input {rule.position}: axis")
    dim = s.shape[axis]
    part = 1 if loop else rule.part_size
    if part < 1:
        fail(f"sliced input {rule.position}: part_size must be at least 1, got {rule.part_size}")
    shape = s.shape[:axis] + (Dim(part, part),) + s.shape[axis + 1:]
    count = None
    if dim.is_static:
        count = dim.lo if loop else _slice_count(rule, dim.lo)
    return TensorSpec(s.etype, shape), count


def _concat_spec(r: TensorSpec, rule, count: int | None) -> TensorSpec:
    if r.shape is None:
        return TensorSpec(r.etype, None)
    shape = r.shape if r.shape else (Dim(1, 1),)   # scalar parts stack along axis 0
    axis = normalize_axis(rule.axis, len(shape), f"concatenated output {rule.position}: axis")
    d = shape[axis]
    total = d * count if count is not None else Dim(0, 0) if d.hi == 0 else DYNAMIC
    return TensorSpec(r.etype, shape[:axis] + (total,) + shape[axis + 1:])


def _concat(parts: list[np.ndarray], rule, reverse: bool) -> np.ndarray:
    parts = [p.reshape(1) if p.ndim == 0 else p for p in parts]
    if reverse:
        parts = parts[::-1]
    axis = rule.axis + parts[0].ndim if rule.axis < 0 else rule.axis
    return np.concatenate(parts, axis=axis)


def _empty_scan(spec: TensorSpec | None, rule) -> np.ndarray:
    shape = spec.shape if spec is not None else None
    if shape is not None and not shape:
        shape = (Dim(1, 1),)
    if shape is None:
        fail(f"concatenated output {rule.position}: the loop ran no iteration and the body's "
             "Result has a dynamic rank, so the empty output has no shape")
    axis = normalize_axis(rule.axis, len(shape), f"concatenated output {rule.position}: axis")
    dims = [0 if i == axis else d.value for i, d in enumerate(shape)]
    if None in dims:
        fail(f"concatenated output {rule.position}: the loop ran no iteration and the body's "
             f"Result shape {format_shape(shape)} is not static, so the empty output has no "
             "shape")
    return np.zeros(dims, spec.etype.dtype)


def _infer_iterated(view, specs: list, count: int | None, n_outputs: int):
    """Infer the body until the back edges stop changing Parameter shapes; the layer's
    output specs and the body Results' specs of the last round."""
    body = view.body
    for _ in range(_MAX_ROUNDS):
        outs = body.infer(specs)
        changed = False
        for r, p in view.back_edges:
            if outs[r].etype != specs[p].etype:
                fail(f"back edge: body Result {r} is {outs[r].etype.name} but body Parameter "
                     f"{p} is {specs[p].etype.name}")
            wider = _generalize(specs[p], outs[r])
            if wider != specs[p]:
                specs[p] = wider
                changed = True
        if not changed:
            break
    else:
        # Not settled (it does within rank + 2 rounds): nothing is known of the shapes that
        # travel on back edges, and the body's last inference must cover every iteration.
        for _, p in view.back_edges:
            specs[p] = TensorSpec(specs[p].etype, None)
        outs = body.infer(specs)
    result: list = [None] * n_outputs
    for rule in view.outputs:
        r = outs[rule.result]
        result[rule.position] = _concat_spec(r, rule, count) if rule.axis is not None \
            else _no_value(r)
    return result, outs


def _body_specs(view, inputs: list[TensorSpec], loop: bool):
    """Parameter specs for the first round, and the iteration count the slices imply."""
    declared = view.body.parameters
    specs = list(declared)
    counts = []
    targets = {p for _, p in view.back_edges}
    for rule in view.inputs:
        s = inputs[rule.position]
        if rule.axis is not None:
            spec, count = _sliced_spec(s, rule, loop)
            specs[rule.parameter] = spec
            counts.append(count)
        else:
            specs[rule.parameter] = _no_value(s) if rule.parameter in targets else s
    return specs, counts


# ---------------------------------------------------------------- Loop-5

@register("Loop", since=5, attrs=NoAttrs, category="infrastructure")
class Loop5:
    BODIES = ("body",)

    @staticmethod
    def infer(attrs, trip_count: TensorSpec, condition: TensorSpec, *inputs: TensorSpec):
        view = attrs.body
        _check_flag(trip_count, "the trip count (input 0)", ("i32", "i64"), "i32 or i64")
        _check_flag(condition, "the execution condition (input 1)", ("boolean",), "boolean")
        specs, counts = _body_specs(view, [trip_count, condition, *inputs], loop=True)
        if view.current_iteration is not None:
            p = specs[view.current_iteration]
            if p is None or p.etype.name not in ("i32", "i64"):
                fail("the current-iteration body Parameter must be i32 or i64, got "
                     f"{p.etype.name if p is not None else 'nothing'}")
            if not any(rule.parameter == view.current_iteration for rule in view.inputs):
                shape = p.shape if p.shape is not None and is_static(p.shape) else (Dim(1, 1),)
                specs[view.current_iteration] = TensorSpec(p.etype, shape)
            else:
                specs[view.current_iteration] = _no_value(p)
        if any(s is None for s in specs):
            fail("a body Parameter gets no value (it is neither in the port map nor the "
                 "current iteration)")
        # The number of iterations is known when the trip count and the initial condition
        # are, the body's condition is constantly true, and the sliced inputs' lengths are
        # known (they cap it).
        outs = view.body.infer(list(specs))
        if view.condition is not None:      # (checked before its value is read)
            _check_flag(outs[view.condition], "the body's condition Result", ("boolean",),
                        "boolean")
        always = view.condition is None or (outs[view.condition].value is not None and
                                            bool(outs[view.condition].value.reshape(-1)[0]))
        trip = known_ints(trip_count) if trip_count.value is not None else None
        limits = list(counts)
        if trip is not None and trip[0] >= 0:
            limits.append(trip[0])
        count = None
        if always and trip is not None and trip[0] < 0 and not counts and not (
                condition.value is not None and not bool(condition.value.reshape(-1)[0])):
            warn("the loop never ends: the trip count is -1 and the body's condition is "
                 "constantly true (OpenVINO runs it forever; irrun refuses it at its limit "
                 "of body runs, see IRRUN_MAX_BYTES)")
        if condition.value is not None and not bool(condition.value.reshape(-1)[0]):
            count = 0
        elif (always and trip is not None and condition.value is not None and limits
              and None not in limits):
            count = min(limits)
            view.body.check_iterations(count, "the trip count (input 0) asks for"
                                       if count not in counts else "the sliced inputs give")
        result, outs = _infer_iterated(view, specs, count, attrs.n_outputs)
        if view.condition is not None:
            _check_flag(outs[view.condition], "the body's condition Result", ("boolean",),
                        "boolean")
        return result

    @staticmethod
    def run(attrs, trip_count: np.ndarray, condition: np.ndarray, *inputs: np.ndarray):
        view = attrs.body
        body = view.body
        trip = int(_flag(trip_count, "the trip count (input 0)"))
        go = bool(_flag(condition, "the execution condition (input 1)"))
        outer = [trip_count, condition, *inputs]
        values: list = [None] * len(body.parameter_ids)
        sliced = []
        limit = trip if trip >= 0 else None     # negative: until the condition says stop
        for rule in view.inputs:
            a = outer[rule.position]
            if rule.axis is not None:
                axis = normalize_axis(rule.axis, a.ndim, f"sliced input {rule.position}: axis")
                sliced.append((rule.parameter, _slicer(a, rule, axis, 0, loop=True)))
                limit = a.shape[axis] if limit is None else min(limit, a.shape[axis])
            else:
                values[rule.parameter] = a
        declared = body.parameters
        cur = view.current_iteration
        targets = {p for _, p in view.back_edges}
        if cur is not None and values[cur] is None:
            # Iteration 0, unless the port map gives the first value (the reference's rule;
            # from the second iteration on it is the iteration number either way).
            d = declared[cur]
            shape = static_values(d.shape) if d.shape is not None and is_static(d.shape) else (1,)
            values[cur] = np.zeros(shape, d.etype.dtype)
        scans: dict[int, list] = {i: [] for i, rule in enumerate(view.outputs)
                                  if rule.axis is not None}
        scan_bytes = held_parts = 0
        held_limit = max_tensor_bytes()
        last = None
        i = 0
        while go and (limit is None or i < limit):
            for p, part_of in sliced:
                values[p] = part_of(i)
            outs = body.run(values)      # counts the iteration against the run's limit
            last = outs
            for k, pieces in scans.items():
                part = outs[view.outputs[k].result]
                scan_bytes += part.nbytes + PART_BYTES
                pieces.append(part)
                held_parts += 1
                _check_held(scan_bytes, held_parts, view.outputs[k].position, held_limit)
            if view.condition is not None:
                go = bool(_flag(outs[view.condition], "the body's condition"))
            for r, p in view.back_edges:
                values[p] = outs[r]
            i += 1
            if cur is not None and cur not in targets:
                values[cur] = np.full(values[cur].shape, i, values[cur].dtype)
        result: list = [None] * attrs.n_outputs
        for k, rule in enumerate(view.outputs):
            if rule.axis is not None:
                if not scans[k]:
                    # No iteration: an empty concatenation (length 0 on the axis) of parts
                    # of the body Result's shape, as OpenVINO's CPU plugin gives.
                    result[rule.position] = _empty_scan(body.results[rule.result], rule)
                else:
                    result[rule.position] = _concat(scans[k], rule, reverse=False)
            elif last is not None:
                result[rule.position] = last[rule.result]
            else:
                # No iteration ran: a Result fed by a back edge gives the Parameter's initial
                # value; any other has no value (OpenVINO's reference refuses such a loop).
                fed = [p for r, p in view.back_edges if r == rule.result]
                if not fed:
                    fail(f"output {rule.position}: the loop ran no iteration, so the body "
                         "never computed it")
                result[rule.position] = values[fed[0]]
        return tuple(result)


# ---------------------------------------------------------------- TensorIterator-1

@register("TensorIterator", since=1, attrs=NoAttrs, category="infrastructure")
class TensorIterator1:
    BODIES = ("body",)

    @staticmethod
    def infer(attrs, *inputs: TensorSpec):
        view = attrs.body
        specs, counts = _body_specs(view, list(inputs), loop=False)
        if any(s is None for s in specs):
            fail("a body Parameter gets no value from the port map")
        count = None
        if counts:
            known = [c for c in counts if c is not None]
            count = known[0] if len(known) == len(counts) else None
            if count is not None and any(c != count for c in known):
                fail(f"the sliced inputs give different iteration counts: {known}")
        else:
            scan = [r for r in view.outputs if r.axis is not None]
            count = abs(scan[0].end - scan[0].start) // max(scan[0].part_size, 1) if scan else 1
        if count is not None and count < 1:
            fail(f"the slicing gives {count} iterations")
        if count is not None:
            view.body.check_iterations(count, _count_source(view))
        result, _ = _infer_iterated(view, specs, count, attrs.n_outputs)
        return result

    @staticmethod
    def run(attrs, *inputs: np.ndarray):
        view = attrs.body
        body = view.body
        values: list = [None] * len(body.parameter_ids)
        sliced = []
        count = None
        for rule in view.inputs:
            a = inputs[rule.position]
            if rule.axis is not None:
                axis = normalize_axis(rule.axis, a.ndim, f"sliced input {rule.position}: axis")
                n = _slice_count(rule, a.shape[axis])
                if count is not None and n != count:
                    fail(f"the sliced inputs give different iteration counts: {count} and {n}")
                count = n
                sliced.append((rule.parameter, rule, a, axis))
            else:
                values[rule.parameter] = a
        if count is None:
            scan = [r for r in view.outputs if r.axis is not None]
            count = abs(scan[0].end - scan[0].start) // max(scan[0].part_size, 1) if scan else 1
        if count < 1:
            fail(f"the slicing gives {count} iterations")
        body.check_iterations(count, _count_source(view))
        sliced = [(p, _slicer(a, rule, axis, count, loop=False)) for p, rule, a, axis in sliced]
        scans: dict[int, list] = {k: [] for k, rule in enumerate(view.outputs)
                                  if rule.axis is not None}
        scan_bytes = held_parts = 0
        held_limit = max_tensor_bytes()
        outs = None
        for i in range(count):
            for p, part_of in sliced:
                values[p] = part_of(i)
            outs = body.run(values)
            for k, pieces in scans.items():
                part = outs[view.outputs[k].result]
                scan_bytes += part.nbytes + PART_BYTES
                pieces.append(part)
                held_parts += 1
                _check_held(scan_bytes, held_parts, view.outputs[k].position, held_limit)
            for r, p in view.back_edges:
                values[p] = outs[r]
        result: list = [None] * attrs.n_outputs
        for k, rule in enumerate(view.outputs):
            if rule.axis is not None:
                # A negative stride concatenates the parts in reverse (the spec).
                result[rule.position] = _concat(scans[k], rule, reverse=rule.stride < 0)
            else:
                result[rule.position] = outs[rule.result]
        return tuple(result)


def _count_source(view) -> str:
    """Where a TensorIterator's iteration count comes from, for its messages."""
    if any(rule.axis is not None for rule in view.inputs):
        return "the sliced inputs give"
    scan = next((rule for rule in view.outputs if rule.axis is not None), None)
    if scan is None:
        return "a port map without slicing gives"
    return (f"the port map of output {scan.position} (start={scan.start}, end={scan.end}, "
            f"part_size={scan.part_size}) gives")


# ---------------------------------------------------------------- If-8

def _branch_specs(view, inputs):
    specs = list(view.body.parameters)
    for rule in view.inputs:
        specs[rule.parameter] = inputs[rule.position]
    if any(s is None for s in specs):
        fail("a body Parameter gets no value from the port map")
    return specs


@register("If", since=8, attrs=NoAttrs, category="condition")
class If8:
    BODIES = ("then_body", "else_body")

    @staticmethod
    def infer(attrs, cond: TensorSpec, *inputs: TensorSpec):
        _check_flag(cond, "the condition (input 0)", ("boolean",), "boolean")
        outer = [cond, *inputs]
        branch = []
        for view in attrs.bodies:
            outs = view.body.infer(_branch_specs(view, outer))
            got: list = [None] * attrs.n_outputs
            for rule in view.outputs:
                got[rule.position] = outs[rule.result]
            branch.append(got)
        if cond.value is not None:   # a constant condition: the branch taken decides
            taken = branch[0] if bool(cond.value.reshape(-1)[0]) else branch[1]
            return [_no_value(s) if s.value is None or s.value.size > 4096 else s for s in taken]
        result = []
        for position, (t, e) in enumerate(zip(*branch)):
            if t.etype != e.etype:
                fail(f"output {position}: then_body gives {t.etype.name}, else_body "
                     f"{e.etype.name}")
            # The branches' shapes merged: dims that differ are dynamic (OpenVINO's If).
            result.append(_generalize(_no_value(t), _no_value(e)))
        return result

    @staticmethod
    def run(attrs, cond: np.ndarray, *inputs: np.ndarray):
        view = attrs.bodies[0] if bool(_flag(cond, "the condition (input 0)")) else attrs.bodies[1]
        outer = [cond, *inputs]
        values: list = [None] * len(view.body.parameter_ids)
        for rule in view.inputs:
            values[rule.parameter] = outer[rule.position]
        outs = view.body.run(values)
        result: list = [None] * attrs.n_outputs
        for rule in view.outputs:
            result[rule.position] = outs[rule.result]
        return tuple(result)


# ---------------------------------------------------------------- ReadValue, Assign

@dataclass(frozen=True)
class ReadValueAttrsV3:
    variable_id: str


@dataclass(frozen=True)
class ReadValueAttrsV6:
    variable_id: str
    variable_type: ElementTypeName = "dynamic"
    variable_shape: PartialShapeText = "..."


def _variable(attrs, init: TensorSpec | None) -> TensorSpec:
    if not attrs.variable_id.strip():
        fail("variable_id must not be empty")
    if isinstance(attrs, ReadValueAttrsV3):
        return _no_value(init)
    vtype = attrs.variable_type
    vshape = parse_partial_shape(attrs.variable_shape) if attrs.variable_shape != "..." else None
    if init is None:
        if vtype in ("dynamic", "undefined"):
            fail("without an init value, variable_type must be a real element type")
        return TensorSpec(element_type(vtype), vshape)
    # The variable's type and shape must relax (cover) the init value's (the spec).
    if vtype not in ("dynamic", "undefined") and element_type(vtype) != init.etype:
        fail(f"the init value is {init.etype.name} but variable_type is {vtype}")
    if vshape is not None and init.shape is not None and (
            len(vshape) != len(init.shape) or
            not all(v.compatible(i) for v, i in zip(vshape, init.shape))):
        fail(f"the init value's shape {format_shape(init.shape)} does not fit variable_shape "
             f"{format_shape(vshape)}")
    etype = init.etype if vtype in ("dynamic", "undefined") else element_type(vtype)
    return TensorSpec(etype, vshape if vshape is not None else init.shape)


@register("ReadValue", since=(3, 6), attrs=(ReadValueAttrsV3, ReadValueAttrsV6),
          category="infrastructure")
class ReadValue:
    # The output is the variable's value, which changes between runs of a session: never
    # folded to a constant at load time (the loader reads this flag).
    NO_FOLD = True

    @staticmethod
    def infer(attrs, init: TensorSpec | None = None):
        if init is None and isinstance(attrs, ReadValueAttrsV3):
            fail("ReadValue-3 takes an init value (input 0)")
        return [_variable(attrs, init)]

    @staticmethod
    def run(attrs, init: np.ndarray | None = None):
        """The value of a first run (or after reset): the init value, else zeros."""
        if init is not None:
            return (init,)
        shape = parse_partial_shape(attrs.variable_shape)
        if shape is None or not is_static(shape):
            fail(f"without an init value the variable needs a static variable_shape, got "
                 f"{format_shape(shape)}")
        et = element_type(attrs.variable_type)
        check_alloc(static_values(shape), et, "the initial value")
        if et.kind == "string":      # a string's zero is the empty string (NumPy's is 0)
            return (np.full(static_values(shape), "", dtype=object),)
        return (np.zeros(static_values(shape), et.dtype),)


@dataclass(frozen=True)
class AssignAttrs:
    variable_id: str


@register("Assign", since=(3, 6), attrs=AssignAttrs, category="infrastructure")
class Assign:
    NO_FOLD = True

    @staticmethod
    def infer(attrs, value: TensorSpec):
        if not attrs.variable_id.strip():
            fail("variable_id must not be empty")
        return [_no_value(value)]

    @staticmethod
    def run(attrs, value: np.ndarray):
        return (value,)
