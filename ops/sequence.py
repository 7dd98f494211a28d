"""CTCGreedyDecoderSeqLen-6 (spec page: sequence/CTCGreedyDecoderSeqLen_6)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import DYNAMIC, OpProblem, TensorSpec, fail, format_shape, register, warn

_INDEX_DTYPES = {"i32": np.int32, "i64": np.int64}


@dataclass(frozen=True)
class CTCGreedyDecoderSeqLenAttrs:
    merge_repeated: bool = True
    classes_index_type: Literal["i32", "i64"] = "i32"
    sequence_length_type: Literal["i32", "i64"] = "i32"


def best_path(data: np.ndarray) -> np.ndarray:
    """argmax over the last axis as std::max_element computes it, as [N, T] intp.

    The first maximum wins on ties. NaN: a NaN at class 0 makes the class 0 (nothing
    compares greater than it); a NaN elsewhere is never greater, so it is skipped.
    np.argmax instead returns the first NaN, so rows holding a NaN are redone.
    """
    if data.dtype.kind == "V" or data.dtype == np.float16:
        data = data.astype(np.float32)   # exact and order-preserving; f32 argmax is SIMD
    classes = data.argmax(axis=-1)
    top = np.take_along_axis(data, classes[..., None], axis=-1)[..., 0]
    nan_rows = np.isnan(top)           # argmax picked a NaN iff the row holds one
    if nan_rows.any():
        rows = data[nan_rows]
        fixed = np.where(np.isnan(rows), -np.inf, rows).argmax(axis=-1)
        fixed[np.isnan(rows[:, 0])] = 0
        classes[nan_rows] = fixed
    return classes


def greedy_decode(classes: np.ndarray, lengths: np.ndarray, blank: int, merge_repeated: bool,
                  classes_dtype, lengths_dtype) -> tuple[np.ndarray, np.ndarray]:
    """Drop blanks (and repeats), left-align what is kept, pad with -1; no loop over time."""
    n, t = classes.shape
    keep = np.arange(t) < lengths[:, None]
    keep &= classes != blank
    if merge_repeated and t > 1:
        # `previous` is the class of the step before, blank or not: A blank A gives A A.
        keep[:, 1:] &= classes[:, 1:] != classes[:, :-1]
    counts = keep.sum(axis=1)
    decoded = np.full((n, t), -1, classes_dtype)
    rows, steps = np.nonzero(keep)                   # row-major: time order within a row
    slots = np.cumsum(keep, axis=1)[rows, steps] - 1
    decoded[rows, slots] = classes[rows, steps]
    return decoded, counts.astype(lengths_dtype)


def _blank_value(blank_index: np.ndarray | None, classes: int) -> int:
    """The blank class; one outside [0, C) matches no class (no Python-style wrap of -1)."""
    if blank_index is None:
        return classes - 1
    b = np.asarray(blank_index)
    if b.ndim > 1 or b.size != 1:
        fail(f"blank_index must be a scalar or a 1-element 1-D tensor; got shape "
             f"{list(b.shape)}")
    blank = int(b.reshape(-1)[0])
    return blank if 0 <= blank < classes else -1


def _check_lengths(lengths: np.ndarray, t: int) -> None:
    bad = np.flatnonzero((lengths < 0) | (lengths > t))
    if bad.size:
        i = int(bad[0])
        fail(f"sequence_length[{i}] = {int(lengths[i])} is outside [0, {t}] "
             f"(T, the data's dim 1, is {t})")


@register("CTCGreedyDecoderSeqLen", since=6, attrs=CTCGreedyDecoderSeqLenAttrs, category="sequence")
class CTCGreedyDecoderSeqLen6:
    @staticmethod
    def infer(attrs, data: TensorSpec, sequence_length: TensorSpec, blank_index: TensorSpec = None):
        if data.etype.kind != "float":
            fail(f"data must be of a floating-point type (f16, bf16, f32 or f64); "
                 f"got {data.etype.name}")
        if sequence_length.etype.name not in ("i32", "i64"):
            fail(f"sequence_length must be i32 or i64; got {sequence_length.etype.name}")
        if blank_index is not None:
            if not blank_index.etype.is_integer:
                fail(f"blank_index must be of an integer type; got {blank_index.etype.name}")
            shape = blank_index.shape
            # OpenVINO checks a fully static blank shape only.
            if shape is not None and all(d.is_static for d in shape) and not (
                    len(shape) == 0 or (len(shape) == 1 and shape[0].value == 1)):
                fail(f"blank_index must be a scalar or a 1-element 1-D tensor; got shape "
                     f"{format_shape(shape)}")
        n, t = DYNAMIC, DYNAMIC
        if data.shape is not None:
            if len(data.shape) != 3:
                fail(f"data must be 3-D [N, T, C]; got shape {format_shape(data.shape)}")
            n, t = data.shape[0], data.shape[1]
        if sequence_length.shape is not None:
            if len(sequence_length.shape) != 1:
                fail(f"sequence_length must be 1-D [N]; got shape "
                     f"{format_shape(sequence_length.shape)}")
            merged = n.merge(sequence_length.shape[0])
            if merged is None:
                fail(f"data's dim 0 (N = {n}) and sequence_length's dim 0 "
                     f"({sequence_length.shape[0]}) must match")
            n = merged
        if sequence_length.value is not None and t.is_static:
            try:
                _check_lengths(sequence_length.value, t.value)
            except OpProblem as e:
                warn(f"constant {e.message}")
        return [TensorSpec.make(attrs.classes_index_type, [n, t]),
                TensorSpec.make(attrs.sequence_length_type, [n])]

    @staticmethod
    def run(attrs, data, sequence_length, blank_index=None):
        n, t, c = data.shape
        if sequence_length.shape != (n,):
            fail(f"sequence_length has shape {list(sequence_length.shape)} but data "
                 f"has N = {n}: expected [{n}]")
        _check_lengths(sequence_length, t)
        lengths = sequence_length.astype(np.int64)
        blank = _blank_value(blank_index, c)
        if c == 0:
            if lengths.any():
                i = int(np.flatnonzero(lengths)[0])
                fail(f"data has no classes (C = 0) but sequence_length[{i}] = "
                     f"{int(lengths[i])} asks for decoding")
            classes = np.zeros((n, t), np.intp)
        else:
            classes = best_path(data)
        return greedy_decode(classes, lengths, blank, attrs.merge_repeated,
                             _INDEX_DTYPES[attrs.classes_index_type],
                             _INDEX_DTYPES[attrs.sequence_length_type])
