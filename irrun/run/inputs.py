"""Inputs made up for a model that has none at hand (`--random-inputs`, `irrun compare` and
`irrun explore` without sample inputs): random and seeded as benchmark_app makes them, but
valid where the model says what is valid.

Each input gets its values by the first rule that applies, and the note says which:

- a range the user gave (`--val-range [NAME:]LO,HI`, as Polygraphy's): integers in
  [LO, HI], floats in [LO, HI);
- an integer input that reaches, through layers that keep its values (Convert, Reshape,
  Squeeze, Unsqueeze, Transpose, Identity), the indices of a Gather, GatherElements, OneHot
  or an embedding op: values that index the table (its rows along the axis, the depth); the
  segment ids of EmbeddingSegmentsSum sorted, a bag op's offsets sorted from 0;
- an integer or boolean input named like an attention mask: ones; `beam_idx` (OpenVINO
  GenAI's LLMs) 0, 1, ..., as GenAI feeds it, and `position_ids` 0, 1, ... along its last
  axis;
- a string input: a few random words each (ASCII, accented Latin, CJK, an emoji);
- a floating-point input that reaches Bucketize's data or SearchSorted's values: spread over
  the boundaries (and a tenth of their span beyond each end);
- otherwise benchmark_app's: integers in [0, 255] (clipped to the type), booleans 0/1, and
  floats in [-1, 1) (benchmark_app's [0, 255] saturates most activations).

A dynamic dim takes, unless `shapes` names the input (`--shape`, as benchmark_app's
`-data_shape`): 1 for the first (batch) dim, 224 for the others of a floating-point input
of rank 4 or more (an image), 128 for the rest (a sequence); within the dim's bounds. When
the model's shape rules refuse those sizes (a BERT whose position table holds 16 rows),
the other dims halve together until they accept (down to 1); if none is accepted the first
sizes stay, and the error of the run says how to give them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import FeedError
from ..ir.etypes import element_type
from ..ir.shapes import format_shape

BATCH_DIM, IMAGE_DIM, SEQUENCE_DIM = 1, 224, 128

# Layers whose output holds the values of these inputs, rearranged or retyped (a Select's
# branches: TensorFlow's Gather takes negative indices as Select(x < 0, x + n, x)).
_KEEP_VALUES = {"convert": (0,), "reshape": (0,), "squeeze": (0,), "unsqueeze": (0,),
                "transpose": (0,), "identity": (0,), "select": (1, 2), "broadcast": (0,)}
_MASK_NAME = re.compile(r"mask", re.I)
_WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Hello", "world",
          "irrun", "runs", "models", "42", "café", "naïve", "東京", "🙂", "a", "is")


@dataclass(frozen=True)
class ValueRange:
    """`--val-range [NAME:]LO,HI`: name None for every input."""

    name: str | None
    lo: float
    hi: float

    @classmethod
    def parse(cls, text: str) -> "ValueRange":
        name, _, numbers = text.rpartition(":")
        parts = numbers.strip().strip("[]").split(",")
        try:
            lo, hi = (float(p) for p in parts)
        except ValueError:
            raise FeedError(f"--val-range '{text}' is not [NAME:]LO,HI (e.g. 0,1 or "
                            "input_ids:0,999)") from None
        if not lo <= hi:
            raise FeedError(f"--val-range '{text}': LO {lo:g} is above HI {hi:g}")
        return cls(name or None, lo, hi)


def default_dims(shape, is_float: bool, halvings: int = 0) -> list[int]:
    """The sizes of an input's dims: its static ones, and the defaults above for the dynamic
    ones (the non-batch ones halved `halvings` times)."""
    dims = []
    for axis, d in enumerate(shape):
        if d.is_static:
            dims.append(d.lo)
            continue
        want = BATCH_DIM if axis == 0 else max(1, (
            IMAGE_DIM if is_float and len(shape) >= 4 else SEQUENCE_DIM) >> halvings)
        want = max(want, d.lo)
        dims.append(want if d.hi is None else min(want, d.hi))
    return dims


def generated_inputs(model, seed: int = 0, shapes: dict | None = None,
                     ranges: list[ValueRange] | tuple = ()) -> tuple[dict, list[str]]:
    """({input name: array}, one note per input saying its type, shape and how its values
    were chosen)."""
    rng = np.random.default_rng(seed)
    shapes = dict(shapes or {})
    names = [i.name for i in model.inputs]
    for what, given in (("--shape", list(shapes)), ("--val-range", [r.name for r in ranges])):
        unknown = [n for n in given if n is not None and n not in names]
        if unknown:
            raise FeedError(f"{what} names no input '{unknown[0]}' (inputs: "
                            f"{', '.join(names)})", file=model.path)
    for halvings in range(SEQUENCE_DIM.bit_length()):
        dims_of = _dims(model, shapes, halvings)
        if _specs(model, dims_of) is not None:
            break
        if not any(d.hi is None or d.hi > 1 for i in model.inputs if i.name not in shapes
                   for d in (i.shape or ()) if not d.is_static):
            break             # no dynamic dim left to make smaller
    else:
        dims_of = _dims(model, shapes, 0)
    uses = _uses(model, dims_of)
    feed, notes = {}, []
    for info in model.inputs:
        et = element_type(info.element_type)
        dims = dims_of[info.name]
        given = next((r for r in ranges if r.name == info.name), None) or next(
            (r for r in ranges if r.name is None), None)
        value, how = _values(rng, info, et, dims, given, uses.get(info.name, []))
        if et.is_float:    # f32 for every float input but f64 (a same-kind cast feeds f16)
            value = value.astype(np.float64 if et.name == "f64" else np.float32)
        feed[info.name] = value
        notes.append(f"{info.name} {et.name}{format_shape(tuple(dims)).replace(' ', '')} "
                     f"{how}")
    return feed, notes


def _dims(model, shapes, halvings) -> dict[str, list[int]]:
    dims_of = {}
    for info in model.inputs:
        et = element_type(info.element_type)
        if info.name in shapes:
            dims = [int(d) for d in shapes[info.name]]
            if info.shape is not None and (len(dims) != len(info.shape) or not all(
                    d.contains(n) for d, n in zip(info.shape, dims))):
                raise FeedError(f"--shape {info.name}{dims} does not fit the input "
                                f"{info.name}: {info.element_type}{info.partial_shape}",
                                file=model.path)
        elif info.shape is None:
            raise FeedError(f"input '{info.name}' has a dynamic rank, so irrun cannot make up a "
                            "value for it: give --inputs or --shape", file=model.path)
        else:
            dims = default_dims(info.shape, et.is_float, halvings)
        dims_of[info.name] = dims
    return dims_of


def _specs(model, dims_of):
    """Every layer's specs with the inputs at these sizes (irrun.run.specialize), None when a
    shape rule refuses them."""
    from .specialize import specialize

    feeds = {node.id: np.zeros(dims_of[info.name], element_type(info.element_type).dtype)
             for info, node in zip(model.inputs, model.program.parameters)}
    return specialize(model.program, feeds)


def _values(rng, info, et, dims, given, uses):
    if et.kind == "string":
        n = int(np.prod(dims))
        counts = rng.integers(1, 6, n)
        words = [" ".join(_WORDS[i] for i in rng.integers(0, len(_WORDS), c)) for c in counts]
        return np.array(words, dtype=object).reshape(dims), "a few random words each"
    if given is not None:
        if et.kind == "bool":
            return rng.integers(int(given.lo), int(given.hi) + 1, dims).astype(bool), \
                f"in [{given.lo:g}, {given.hi:g}] (--val-range)"
        if et.is_float:
            return rng.uniform(given.lo, given.hi, dims), \
                f"in [{given.lo:g}, {given.hi:g}) (--val-range)"
        return rng.integers(int(np.ceil(given.lo)), int(np.floor(given.hi)) + 1, dims), \
            f"in [{given.lo:g}, {given.hi:g}] (--val-range)"
    if et.kind == "bool":
        if _MASK_NAME.search(info.name):
            return np.ones(dims, bool), "all true (an attention mask, by its name)"
        return rng.integers(0, 2, dims).astype(bool), "0/1"
    if et.is_float:
        for kind, lo, hi, layer in uses:
            if kind == "boundaries":
                span = (hi - lo) or 1.0
                return rng.uniform(lo - span / 10, hi + span / 10, dims), \
                    f"in [{lo - span / 10:g}, {hi + span / 10:g}) (spread over the boundaries " \
                    f"of {layer})"
        return rng.uniform(-1.0, 1.0, dims), "in [-1, 1)"
    top = _type_max(et)
    for kind, lo, hi, layer in uses:
        if kind == "index" and hi > lo:
            return rng.integers(lo, min(hi, top + 1), dims), f"in [{lo}, {hi}) (indices of {layer})"
        if kind == "length" and hi > lo:
            return rng.integers(lo, min(hi, top + 1), dims), \
                f"in [{lo}, {hi - 1}] (sequence lengths of {layer})"
        if kind == "sorted" and hi > lo:
            return np.sort(rng.integers(lo, min(hi, top + 1), dims), axis=-1), \
                f"sorted in [{lo}, {hi}) (segment ids of {layer})"
        if kind == "offsets":
            n = int(np.prod(dims))
            cuts = np.sort(rng.integers(0, hi + 1, n))
            if n:
                cuts[0] = 0
            return cuts.reshape(dims), f"sorted offsets in [0, {hi}] from 0 (offsets of {layer})"
    if _MASK_NAME.search(info.name):
        return np.ones(dims, np.int64), "all ones (an attention mask, by its name)"
    if info.name == "position_ids" and dims:
        return np.broadcast_to(np.arange(dims[-1]), dims).copy(), \
            "0, 1, ... along the last axis (positions, by its name)"
    if info.name == "beam_idx":
        return np.arange(int(np.prod(dims))).reshape(dims), \
            "0, 1, ... (beam indices, as OpenVINO GenAI feeds them)"
    return rng.integers(0, min(255, top) + 1, dims), f"in [0, {min(255, top)}]"


def _type_max(et) -> int:
    if et.bits >= 8:
        return 127 if et.kind == "int" and et.bits == 8 else 255
    return (1 << (et.bits - (1 if et.kind == "int" else 0))) - 1


def _uses(model, dims_of) -> dict[str, list[tuple]]:
    """{input name: [(kind, lo, hi, layer label)]}: what the layers an input reaches say
    its values may be, from the specs inferred for the generated shapes."""
    program = model.program
    specs = _specs(model, dims_of) or {lid: n.specs for lid, n in program.nodes.items()}

    def spec(node, port):
        src = node.inputs[port] if port < len(node.inputs) else None
        if src is None or specs.get(src[0]) is None:
            return None
        return specs[src[0]][src[1]]

    def dim(node, port, axis):
        s = spec(node, port)
        if s is None or s.shape is None or not s.shape:
            return None
        d = s.shape[axis % len(s.shape)] if -len(s.shape) <= axis < len(s.shape) else None
        return d.lo if d is not None and d.is_static else None

    def value(node, port):
        s = spec(node, port)
        return None if s is None or s.value is None else np.asarray(s.value)

    out = {}
    for info, start in zip(model.inputs, program.parameters):
        found = []
        stack, seen = [start.id], {start.id}
        while stack:
            lid = stack.pop()
            for consumer, keys in program.graph.succ[lid].items():
                node = program.nodes[consumer]
                kind = node.layer.type.lower()
                label = f"{node.layer.type} '{node.layer.name}'"
                for port in keys:
                    if port in _KEEP_VALUES.get(kind, ()) and consumer not in seen:
                        seen.add(consumer)
                        stack.append(consumer)
                    use = _use(kind, port, node, dim, value)
                    if use is not None:
                        found.append(use + (label,))
        out[info.name] = found
    return out


def _use(kind, port, node, dim, value):
    if kind == "gather" and port == 1:
        axis = value(node, 2)
        if axis is not None and axis.size == 1:
            n = dim(node, 0, int(axis.reshape(-1)[0]))
            return None if n is None else ("index", 0, n)
    if kind == "gatherelements" and port == 1:
        n = dim(node, 0, getattr(node.attrs, "axis", 0))
        return None if n is None else ("index", 0, n)
    if kind == "onehot" and port == 0:
        depth = value(node, 1)
        return None if depth is None or depth.size != 1 else ("index", 0, int(depth.reshape(-1)[0]))
    if kind.startswith("embedding") and port == 1:
        n = dim(node, 0, 0)
        return None if n is None else ("index", 0, n)
    if kind == "embeddingsegmentssum" and port == 2:
        segments = value(node, 3)
        if segments is not None and segments.size == 1:
            return ("sorted", 0, int(segments.reshape(-1)[0]))
    if kind.startswith("embeddingbagoffsets") and port == 2:
        n = dim(node, 1, 0)
        return None if n is None else ("offsets", 0, n)
    if (kind == "ctcgreedydecoderseqlen" and port == 1) or (kind == "ctcloss" and port == 1):
        n = dim(node, 0, 1)           # a length of the sequence: 1..T
        return None if n is None else ("length", 1, n + 1)
    if kind == "ctcloss" and port == 3:
        n = dim(node, 2, 1)           # a label length: 1..the labels' dim 1
        return None if n is None else ("length", 1, n + 1)
    if (kind == "bucketize" and port == 0) or (kind == "searchsorted" and port == 1):
        bounds = value(node, 1 if kind == "bucketize" else 0)
        if bounds is not None and bounds.size and np.isfinite(bounds).all():
            return ("boundaries", float(bounds.min()), float(bounds.max()))
    return None
