"""The op kit: everything a kernel author needs, built-in kernels and extensions alike.

An op version is one class with a static shape rule and a static kernel, registered with
its attribute schema (a frozen dataclass whose fields are the IR's <data> attributes):

    from dataclasses import dataclass
    import numpy as np
    from irrun.opkit import TensorSpec, fail, register

    @dataclass(frozen=True)
    class ScaledTanhAttrs:
        alpha: float = 1.0
        beta: float = 1.0

    @register("ScaledTanh", version="extension", attrs=ScaledTanhAttrs, category="activation")
    class ScaledTanh:
        @staticmethod
        def infer(attrs, x: TensorSpec) -> list[TensorSpec]:        # the shape rule
            if x.etype.kind != "float":
                fail(f"ScaledTanh takes a floating-point tensor, got {x.etype.name}")
            return [TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x: np.ndarray) -> tuple[np.ndarray]:          # the kernel
            return ((attrs.alpha * np.tanh(attrs.beta * x)).astype(x.dtype),)

What is here, by concern:

- registration: `register` (`since=N`, `since=(1, 8)` for one class serving several versions,
  `version="extension"`, `replace=True`), `NoAttrs`, the attribute annotations
  `ElementTypeName` and `PartialShapeText`, `ir_name` for IR names that are not identifiers;
- shapes: `TensorSpec`, `Dim`, `DYNAMIC`, `format_shape`, `is_static`, `static_values`,
  `shape_of`, `shape_dims`, `parse_partial_shape`;
- problems: `fail` (refuse inputs or attributes; a located ShapeError at load time, OpError
  at run time), `warn` (a warning from a shape rule), and the error types
  `UnsupportedError` (valid in OpenVINO, not in irrun yet) and `ResourceError`;
- element types: `ElementType`, `element_type`, `from_dtype`, `etype_name`;
- broadcasting and axes: `broadcast_shapes`, `broadcast_dim`, `same_shapes`,
  `output_shape` (auto_broadcast numpy/none), `check_arrays_broadcast` (the same at run
  time), `same_etype`, `normalize_axis`,
  `check_rank`, `check_integer`, `length`;
- partial values of shape tensors: `elements`, `known_ints`, `known_int_vector`, `int_spec`,
  `pass_elements`, `add_elements`, `exact`, `DimOf`, `slice_index` (Slice's NumPy index);
- numerics: `widened` (f16/bf16 to f32), `as_dtype`, `convert_array` (C++ conversions),
  `float_unary`, `float_to_int`, `first_position`, `erf` (and `ERF_CONSTANTS`, its
  coefficients, for compiled loops that evaluate it the same way), `make_unary`, `ARITH`;
- sliding windows (convolution, pooling): `AutoPad`, `resolve_pads`, `same_pads`,
  `fixed_pads`, `window_count`, `window_dim`, `check_window_attrs`, `dilated`,
  `tap_slices`, `compute_dtype`, `check_spatial_rank`, `numeric`;
- resources: `check_alloc` (the one allocation guard: call it before allocating anything
  whose size comes from input values or attributes), `max_tensor_bytes`, and the one
  shared, fork-safe worker pool: `parallel`, `workers`, `even_ranges`, `balanced_ranges`,
  and `matmul` (np.matmul split over it when large; BLAS itself stays at one thread);
- prepared kernels: `Fixed`, an operand an op's optional `prepare` computes once for a
  layer of static shapes (irrun.opkit.prepared says how the executor uses them);
- compressed weights: `CompressedWeights`, what a kernel gets at an input port its op
  lists in COMPRESSED_INPUTS when the loader kept an f16 Const's decompression Convert
  compressed (its `source` halves, or `decompressed()`: the f32 values, made once).

Modules of `irrun.ops` import from here and from nowhere else in irrun; they never import
each other, except an op's compiled loop (a `*_loop.py` module), which it imports on its
first run and which builds on `irrun.opkit.compiled.cached_loop` (numba) or
`irrun.opkit.llvm.compile_ir` (a loop in LLVM's IR); neither is imported here, so that
loading a model never imports a compiler.
"""
from __future__ import annotations

import dataclasses

from irrun.errors import OpProblem, ResourceError, UnsupportedError
from irrun.ir.etypes import ElementType, element_type, from_dtype
from irrun.ir.registry import ElementTypeName, NoAttrs, PartialShapeText, register
from irrun.ir.shapes import (
    DYNAMIC,
    Dim,
    TensorSpec,
    format_shape,
    is_static,
    parse_partial_shape,
    shape_of,
    static_values,
)
from irrun.ir.weights import check_alloc, max_tensor_bytes

from .broadcast import (
    broadcast_dim,
    broadcast_shapes,
    check_arrays_broadcast,
    output_shape,
    same_etype,
    same_shapes,
)
from .compressed import CompressedWeights
from .numeric import (
    ERF_CONSTANTS,
    as_dtype,
    convert_array,
    convert_is_astype,
    erf,
    etype_name,
    first_position,
    float_to_int,
    float_unary,
    widened,
)
from .partial import (
    DimOf,
    add_elements,
    check_integer,
    check_rank,
    elements,
    exact,
    int_spec,
    known_int_vector,
    known_ints,
    length,
    normalize_axis,
    pass_elements,
    shape_dims,
    slice_index,
)
from .pool import balanced_ranges, even_ranges, matmul, parallel, workers
from .prepared import Fixed
from .problems import fail, warn
from .unary import ARITH, make_unary, unary_apply
from .window import (
    AutoPad,
    check_window_attrs,
    compute_dtype,
    dilated,
    fixed_pads,
    numeric,
    resolve_pads,
    same_pads,
    tap_slices,
    window_count,
    window_dim,
)
from .window import check_rank as check_spatial_rank


def ir_name(name: str, default=dataclasses.MISSING):
    """A dataclass field for an IR attribute whose name is not a Python identifier:
    `exclude_pad: bool = ir_name("exclude-pad", False)`."""
    return dataclasses.field(default=default, metadata={"ir_name": name})


__all__ = [
    "ARITH", "AutoPad", "CompressedWeights", "ERF_CONSTANTS", "DYNAMIC", "Dim", "DimOf", "ElementType",
    "ElementTypeName", "Fixed", "NoAttrs", "OpProblem", "add_elements",
    "PartialShapeText", "ResourceError", "TensorSpec", "UnsupportedError", "as_dtype",
    "balanced_ranges", "broadcast_dim", "broadcast_shapes", "check_alloc", "check_arrays_broadcast",
    "check_integer", "check_rank",
    "check_spatial_rank", "check_window_attrs", "compute_dtype", "convert_array",
    "convert_is_astype", "dilated",
    "element_type", "elements", "erf", "etype_name", "even_ranges", "exact", "fail",
    "first_position", "fixed_pads", "known_int_vector", "slice_index", "float_to_int", "float_unary", "format_shape",
    "from_dtype", "int_spec", "ir_name", "is_static", "known_ints", "length", "make_unary",
    "matmul", "max_tensor_bytes", "normalize_axis", "numeric", "output_shape", "parallel",
    "pass_elements", "register", "resolve_pads", "same_etype", "same_pads", "same_shapes",
    "parse_partial_shape", "shape_dims", "shape_of", "static_values", "tap_slices",
    "unary_apply", "warn", "widened",
    "window_count", "window_dim", "workers",
]
