"""Prepared kernels: what an op computes for one layer of a plan, made once per plan.

A layer of a plan (irrun.run.executor.Plan; a decode step's specialised plan has 180)
runs the same computation at every run, and most of its kernel's time on a small tensor
goes to what does not change: reading attributes, normalising axes, looking a Reshape's
target up, checking shapes that inference proved. An op class may have a static

    prepare(attrs, inputs: list[TensorSpec], values: list[np.ndarray | None])
        -> tuple[Callable, tuple] | None

`inputs` are the layer's input specs in the plan; `values[i]` is input i's array when the
plan knows it (a Const, a folded layer, a value the plan's shapes determine), else None.
It returns `(fn, operands)`, or None to keep the kernel. Each operand is an input
position (int), or `Fixed(value)`: a value computed here, which the plan holds. The
executor then computes the layer's one output as `fn(*operands)` with the positions
replaced by the arrays of this run: `fn` returns the array `run(attrs, *arrays)[0]` would
have, the same values bit for bit (the same NumPy calls, in the same order), without
what `prepare` did once.

Where every input and output shape is static, inference checked the inputs when the plan
was made. Where some are not (a dim that grows each run), the executor runs the layer's
shape rule on the real inputs before `fn` (or finds its verdict on the same ones), so
`fn` may leave out what the rule checks; what it depends on beyond the specs (a Reshape's
target for an input shape) it computes at run time, keeping it if it likes. A `fail()` in
`prepare` keeps the kernel, which reports it where the run meets it. Only layers with
one output of rank >= 1 are prepared. The executor checks the output's type, dtype and
shape as it checks the kernel's: at every run for a layer of dynamic shape, at the first
run of the plan for a layer of static shapes (`fn`'s output must owe its type, dtype and
shape to the operands' dtypes and shapes alone, as NumPy's functions do).
"""
from __future__ import annotations


class Fixed:
    """An operand of a prepared kernel computed by `prepare` (a transposed weight, a
    Reshape's target, a Slice's index): the plan holds it and passes it at every run."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"Fixed({self.value!r})"
