"""Linear algebra: Einstein summation and matrix inverse.

Spec pages: matrix/ (Einsum-7, Inverse-14).

Einsum: explicit (`ab,bc->ac`) and implicit (`ab,bc`: the labels that occur once, sorted
with capitals first, after the ellipsis) equations; at most one ellipsis per subscript;
a label repeated in one subscript takes the diagonal (its dims must be equal); the same
label in different subscripts must be equal or 1 (numpy broadcasting), as must the dims the
ellipses cover. Integers wrap like the C++ types; f16/bf16 compute in f32, f32 in f32
(as the CPU plugin does), and round once.

Inverse: LU with partial pivoting is what the spec describes; irrun computes in f64 (LAPACK)
and rounds once to the input type, which is at least as accurate as the spec's f32. A
singular matrix is an error naming its batch position (the spec allows an error or an
undefined result).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from irrun.opkit import (
    Dim,
    TensorSpec,
    as_dtype,
    broadcast_dim,
    broadcast_shapes,
    check_alloc,
    etype_name,
    fail,
    format_shape,
    register,
    widened,
)

# ------------------------------------------------------------------ Einsum

_SUBSCRIPT = re.compile(r"^[A-Za-z]*(\.\.\.)?[A-Za-z]*$")


@dataclass(frozen=True)
class EinsumAttrs:
    equation: str


def parse_equation(equation: str, n_inputs: int | None = None):
    """(input subscripts, output subscript) with "." standing for the ellipsis; the output
    of an implicit equation is recovered as the spec says."""
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        fail(f"Einsum equation '{equation}' has more than one '->'")
    lhs, arrow, rhs = eq.partition("->")
    inputs = lhs.split(",")
    for sub in inputs + ([rhs] if arrow else []):
        if not _SUBSCRIPT.match(sub):
            fail(f"Einsum equation '{equation}': subscript '{sub}' is not letters with at most "
                 "one ellipsis '...'")
    inputs = [s.replace("...", ".") for s in inputs]
    if n_inputs is not None and len(inputs) != n_inputs:
        fail(f"Einsum equation '{equation}' has {len(inputs)} input subscripts but the layer "
             f"has {n_inputs} inputs")
    if arrow:
        out = rhs.replace("...", ".")
        seen = set()
        for c in out:
            if c in seen:
                fail(f"Einsum equation '{equation}': output label '{c}' appears twice")
            seen.add(c)
            if c == "." and not any("." in s for s in inputs):
                fail(f"Einsum equation '{equation}': the output has an ellipsis but no input has")
            if c != "." and not any(c in s for s in inputs):
                fail(f"Einsum equation '{equation}': output label '{c}' is in no input subscript")
    else:
        labels = "".join(inputs).replace(".", "")
        once = sorted(c for c in set(labels) if labels.count(c) == 1)   # ASCII: capitals first
        out = ("." if any("." in s for s in inputs) else "") + "".join(once)
    return inputs, out


def _split_dims(sub: str, shape, equation: str, k: int):
    """label -> list of dims, and the dims the ellipsis covers, for input k."""
    n_labels = len(sub.replace(".", ""))
    rank = len(shape)
    if ("." in sub and rank < n_labels) or ("." not in sub and rank != n_labels):
        fail(f"Einsum equation '{equation}': input {k} has rank {rank} {format_shape(shape) if shape and isinstance(shape[0], Dim) else list(shape)} "
             f"but its subscript '{sub.replace('.', '...')}' covers {n_labels} dims"
             + (" or more" if "." in sub else ""))
    ell_len = rank - n_labels
    labels, ellipsis, i = {}, (), 0
    for c in sub:
        if c == ".":
            ellipsis = tuple(shape[i:i + ell_len])
            i += ell_len
        else:
            labels.setdefault(c, []).append(shape[i])
            i += 1
    return labels, ellipsis


@register("Einsum", since=7, attrs=EinsumAttrs, category="matrix")
class Einsum7:
    @staticmethod
    def infer(attrs, *inputs: TensorSpec) -> list[TensorSpec]:
        if not inputs:
            fail("Einsum needs at least one input")
        inputs_sub, out = parse_equation(attrs.equation, len(inputs))
        et = inputs[0].etype
        for k, s in enumerate(inputs):
            if s.etype != et:
                fail(f"Einsum inputs must share one element type: input 0 is {et.name}, "
                     f"input {k} is {s.etype.name}")
        if et.kind == "bool":
            fail("Einsum needs numeric inputs, got boolean")
        if any(s.shape is None for s in inputs):
            return [TensorSpec(et, None)]
        sizes: dict[str, Dim] = {}
        ellipses = []
        for k, (sub, s) in enumerate(zip(inputs_sub, inputs)):
            labels, ell = _split_dims(sub, s.shape, attrs.equation, k)
            if "." in sub:
                ellipses.append(ell)
            for c, dims in labels.items():
                for d in dims[1:]:
                    if dims[0].merge(d) is None:
                        fail(f"Einsum equation '{attrs.equation}': label '{c}' repeats in input "
                             f"{k} over dims of different sizes ({dims[0]} and {d})")
                d = dims[0]
                if c in sizes:
                    merged = broadcast_dim(sizes[c], d)
                    if merged is None:
                        fail(f"Einsum equation '{attrs.equation}': label '{c}' has size "
                             f"{sizes[c]} in one input and {d} in input {k}")
                    sizes[c] = merged
                else:
                    sizes[c] = d
        ell = broadcast_shapes(*ellipses, names=[f"ellipsis dims of input {k}" for k in range(len(ellipses))]) \
            if ellipses else ()
        shape = []
        for c in out:
            shape.extend(ell if c == "." else (sizes[c],))
        return [TensorSpec(et, tuple(shape))]

    @staticmethod
    def run(attrs, *inputs: np.ndarray) -> tuple[np.ndarray]:
        inputs_sub, out = parse_equation(attrs.equation, len(inputs))
        sizes: dict[str, int] = {}
        for k, (sub, x) in enumerate(zip(inputs_sub, inputs)):
            labels, _ = _split_dims(sub, x.shape, attrs.equation, k)
            for c, dims in labels.items():
                if len(set(dims)) > 1:
                    fail(f"Einsum equation '{attrs.equation}': label '{c}' repeats in input {k} "
                         f"over dims of different sizes {dims}")
                d, seen = dims[0], sizes.get(c)
                if seen is None or seen == 1:
                    sizes[c] = d
                elif d not in (1, seen):
                    fail(f"Einsum equation '{attrs.equation}': label '{c}' has size {seen} "
                         f"in one input and {d} in input {k}")
        et = etype_name(inputs[0])
        ops = []
        for sub, x in zip(inputs_sub, inputs):
            w = widened(x, et)
            # Labelled dims of size 1 broadcast to the label's size (a view, no copy).
            target, i = [], 0
            ell_len = x.ndim - len(sub.replace(".", ""))
            for c in sub:
                if c == ".":
                    target.extend(x.shape[i:i + ell_len])
                    i += ell_len
                else:
                    target.append(sizes[c])
                    i += 1
            ops.append(np.broadcast_to(w, tuple(target)) if tuple(target) != w.shape else w)
        # The output's size comes from the inputs' dims combined (an outer product of two
        # vectors is their lengths multiplied): check it before einsum allocates it.
        ells = [tuple(x.shape[sub.index("."):sub.index(".") + x.ndim - len(sub) + 1])
                for sub, x in zip(inputs_sub, inputs) if "." in sub]
        try:
            ell = np.broadcast_shapes(*ells) if ells else ()
        except ValueError:
            fail(f"Einsum equation '{attrs.equation}': the dims the ellipses cover do not "
                 f"broadcast: {', '.join(str(list(e)) for e in ells)}")
        out_shape = [d for c in out for d in (ell if c == "." else (sizes[c],))]
        check_alloc(out_shape, inputs[0].dtype, "Einsum output")
        spec = ",".join(s.replace(".", "...") for s in inputs_sub) + "->" + out.replace(".", "...")
        try:
            y = np.einsum(spec, *ops, optimize=len(ops) > 1)
        except ValueError as e:
            fail(f"Einsum equation '{attrs.equation}': {e}")
        return (as_dtype(y, inputs[0].dtype),)


# ------------------------------------------------------------------ Inverse

@dataclass(frozen=True)
class InverseAttrs:
    adjoint: bool = False


@register("Inverse", since=14, attrs=InverseAttrs, category="matrix")
class Inverse14:
    @staticmethod
    def infer(attrs, data: TensorSpec) -> list[TensorSpec]:
        if not data.etype.is_float:
            fail(f"Inverse needs a floating-point input, got {data.etype.name}")
        if data.shape is not None:
            if len(data.shape) < 2:
                fail(f"Inverse input must have rank 2 or more ([..., N, N]), got {format_shape(data.shape)}")
            if data.shape[-1].merge(data.shape[-2]) is None:
                fail(f"Inverse input must hold square matrices, got {format_shape(data.shape)}")
        return [TensorSpec(data.etype, data.shape)]

    @staticmethod
    def run(attrs, data: np.ndarray) -> tuple[np.ndarray]:
        if data.ndim < 2 or data.shape[-1] != data.shape[-2]:
            fail(f"Inverse input must hold square matrices, got shape {list(data.shape)}")
        a = data.astype(np.float64)
        if attrs.adjoint:
            a = np.swapaxes(a, -1, -2)
        if a.size == 0:
            return (data.copy(),)
        flat = a.reshape((-1,) + a.shape[-2:])
        # A matrix LAPACK cannot factor, or with a non-finite inverse, is singular.
        with np.errstate(all="ignore"):
            try:
                inv = np.linalg.inv(flat)
                bad = ~np.isfinite(inv).all(axis=(1, 2))
            except np.linalg.LinAlgError:
                inv = None
        if inv is None or bad.any():
            for i, m in enumerate(flat):
                try:
                    r = np.linalg.inv(m)
                    ok = np.isfinite(r).all()
                except np.linalg.LinAlgError:
                    ok = False
                if not ok:
                    pos = [int(p) for p in np.unravel_index(i, a.shape[:-2])] if a.ndim > 2 else []
                    fail(f"Inverse: the matrix at batch position {pos} is singular", code="value")
        return (as_dtype(inv.reshape(a.shape), data.dtype),)
