"""Element-wise unary ops from a NumPy function: one call makes and registers the op class."""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np

from irrun.ir.registry import NoAttrs, register
from irrun.ir.shapes import TensorSpec

from .numeric import F32_EXACT, as_dtype, float_unary
from .problems import fail

# The input kinds arithmetic ops accept.
ARITH = ("float", "int", "uint")


def unary_apply(name: str, fn: Callable, int_mode: str, x: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu" and int_mode == "exact":
        if name in ("Floor", "Ceiling"):
            return x.copy()                 # integers are their own floor and ceiling
        with np.errstate(all="ignore"):     # Abs/Negative of the minimum wrap, as in C++
            return as_dtype(fn(x), x.dtype)
    return float_unary(fn, x, name)


def make_unary(name: str, fn: Callable, int_mode: str, kinds, category: str, since: int = 1):
    def infer(attrs, x):
        if x.etype.kind not in kinds:
            fail(f"{name} does not accept element type {x.etype.name} (accepts {', '.join(kinds)} types)")
        return [TensorSpec(x.etype, x.shape)]

    def run(attrs, x):
        return (unary_apply(name, fn, int_mode, x),)

    def prepare(attrs, inputs, values):
        # float_unary's f32 and f64 cases when fn is one ufunc: fn(x) in x's type.
        dtype = inputs[0].etype.dtype
        if isinstance(fn, np.ufunc) and (dtype == np.float64 or (
                dtype == np.float32 and name in F32_EXACT)):
            return fn, (0,)
        return None

    # The class belongs to the module that asked for it (an ops module: a built-in kernel;
    # an extension: an overlay), not to the kit.
    module = sys._getframe(1).f_globals.get("__name__", __name__)
    def rule_ignores_dims(attrs, inputs):
        return True          # the rule reads the type; the output is the input's shape

    cls = type(f"{name}{since}", (), {"infer": staticmethod(infer), "run": staticmethod(run),
                                      "prepare": staticmethod(prepare),
                                      "rule_ignores_dims": staticmethod(rule_ignores_dims),
                                      "__doc__": f"{name}-{since}: element-wise.",
                                      "__module__": module})
    return register(name, since=since, attrs=NoAttrs, category=category)(cls)
