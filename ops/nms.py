"""Non-maximum suppression (spec pages: sort/): NonMaxSuppression-1/3/4/5/9
(non-max-suppression-1, -3, -4, no-max-suppression-5 (sic), non-max-suppression-9),
MulticlassNms-8/9, MatrixNms-8, NMSRotated-13 and ExperimentalDetectronTopKROIs-6.

Per batch and class the kernel keeps the candidates scoring above score_threshold, then
repeatedly selects the best one and suppresses (hard NMS) or decays (Soft-NMS, v5/v9 with
soft_nms_sigma > 0) the rest by their IoU with it. Hard NMS is a compiled loop over the
candidates in score order (ops/nms_loop.py); Soft-NMS a Python loop over the *selected*
boxes (at most max_output_boxes_per_class per class), each step two compiled calls around
NumPy's exp of the decays of the boxes the selected one overlaps. Arithmetic is f32,
with the operation order of OpenVINO's CPU plugin.

Where the spec is silent or loose, irrun follows OpenVINO (see docs/ops.md, "Where irrun chooses a
rule"):
- a candidate needs score > score_threshold (strictly; the spec text says "greater or equal",
  the reference and the CPU plugin both use >), so NaN scores are never selected;
- hard NMS suppresses a box whose IoU with a selected box is >= iou_threshold (the CPU
  plugin in every version and the v5 reference; the v9 reference and the spec use >; they
  differ only at exact equality, e.g. iou_threshold 0 suppresses disjoint boxes too);
- corner boxes may give their two corners in any order (the spec's "any diagonal pair"; the
  CPU plugin takes min/max, the reference does not); a box of zero or negative area has IoU 0
  with everything;
- equal scores are taken in ascending box index; sort_result_descending sorts all selected
  boxes by score descending, then batch, class and box index ascending (the CPU plugin; the
  v9 reference instead reverses the per-class order, which is not a sort);
- v5 Soft-NMS also suppresses boxes with IoU >= iou_threshold, as the v5 spec and reference
  say; the CPU plugin ignores iou_threshold in Soft-NMS for v5 as it does for v9 (where the
  spec says so too);
- v1/v3/v4 have static outputs of the spec's row counts (v1/v3: min(num_boxes,
  max_output_boxes_per_class * num_classes), v4: min(num_boxes, max_output_boxes_per_class)
  * num_batches * num_classes): selected rows first, then rows of -1. OpenVINO's CPU plugin
  returns only the selected rows for these versions, contradicting its own shape inference.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from irrun.opkit import (
    DYNAMIC,
    Dim,
    TensorSpec,
    check_alloc,
    check_integer,
    fail,
    known_ints,
    register,
)

F32 = np.float32


@dataclass(frozen=True)
class NMS1Attrs:
    box_encoding: Literal["corner", "center"] = "corner"
    sort_result_descending: bool = True
    version: ClassVar[int] = 1

    @property
    def index_type(self) -> str:
        return "i64"


@dataclass(frozen=True)
class NMS3Attrs:
    box_encoding: Literal["corner", "center"] = "corner"
    sort_result_descending: bool = True
    output_type: Literal["i64", "i32"] = "i64"
    version: ClassVar[int] = 3

    @property
    def index_type(self) -> str:
        return self.output_type


@dataclass(frozen=True)
class NMS4Attrs(NMS3Attrs):
    version: ClassVar[int] = 4


@dataclass(frozen=True)
class NMS5Attrs(NMS3Attrs):
    version: ClassVar[int] = 5


@dataclass(frozen=True)
class NMS9Attrs(NMS3Attrs):
    version: ClassVar[int] = 9


_INPUTS = ("max_output_boxes_per_class", "iou_threshold", "score_threshold", "soft_nms_sigma")


# ---------------------------------------------------------------- shape rule


def _check_inputs(attrs, boxes: TensorSpec, scores: TensorSpec, extra) -> tuple[Dim, Dim, Dim]:
    """Validate the inputs; return (num_batches, num_classes, num_boxes) as Dims."""
    for name, spec in (("boxes", boxes), ("scores", scores)):
        if not spec.etype.is_float:
            fail(f"{name} must have a floating-point element type, got {spec.etype.name}")
        if spec.rank is not None and spec.rank != 3:
            fail(f"{name} must have rank 3, got {spec}")
    if boxes.rank == 3 and not boxes.shape[2].compatible(Dim.of(4)):
        fail(f"boxes must have shape [num_batches, num_boxes, 4], got {boxes}")
    bs = boxes.shape or (DYNAMIC,) * 3
    ss = scores.shape or (DYNAMIC,) * 3
    batches = bs[0].merge(ss[0])
    if batches is None:
        fail(f"boxes and scores must have the same num_batches (dim 0), got {boxes} and {scores}")
    nboxes = bs[1].merge(ss[2])
    if nboxes is None:
        fail(f"boxes dim 1 and scores dim 2 (num_boxes) must agree, got {boxes} and {scores}")
    for i, spec in enumerate(extra):
        if spec is None:
            continue
        name = _INPUTS[i]
        if spec.rank is not None and spec.rank > 1:
            fail(f"{name} must be a scalar or a 1D tensor of 1 element, got {spec}")
        if spec.rank == 1 and not spec.shape[0].compatible(Dim.of(1)):
            fail(f"{name} must have exactly 1 element, got {spec}")
        if i == 0 and spec.etype.kind not in ("int", "uint"):
            fail(f"{name} must have an integer element type, got {spec.etype.name}")
        if i > 0 and not spec.etype.is_float:
            fail(f"{name} must have a floating-point element type, got {spec.etype.name}")
    return batches, ss[1], nboxes


def _rows(attrs, batches: Dim, classes: Dim, nboxes: Dim, max_out: int | None) -> Dim:
    """The selected-rows dim: static for v1/v3/v4, [0, bound] for v5/v9."""
    if max_out is not None:
        max_out = max(max_out, 0)
    v = attrs.version
    if v in (1, 3):
        if max_out is not None and nboxes.is_static and classes.is_static:
            return Dim.of(min(nboxes.value, max_out * classes.value))
        hi = nboxes.hi
        if max_out is not None and classes.hi is not None:
            hi = max_out * classes.hi if hi is None else min(hi, max_out * classes.hi)
        return Dim(0, hi)
    per_class = Dim(0, nboxes.hi) if max_out is None else (
        Dim(min(nboxes.lo, max_out), max_out if nboxes.hi is None else min(nboxes.hi, max_out)))
    total = per_class * batches * classes
    if v == 4:
        return total
    return Dim(0, total.hi)


def _infer(attrs, boxes, scores, *extra):
    batches, classes, nboxes = _check_inputs(attrs, boxes, scores, extra)
    max_out = 0   # absent input: the spec's default, select no boxes
    if extra and extra[0] is not None:
        vals = known_ints(extra[0])
        max_out = vals[0] if vals else None
    rows = _rows(attrs, batches, classes, nboxes, max_out)
    indices = TensorSpec.make(attrs.index_type, (rows, Dim.of(3)))
    if attrs.version < 5:
        return [indices]
    # OpenVINO types selected_scores f32 whatever the input types are.
    return [indices, TensorSpec.make("f32", (rows, Dim.of(3))),
            TensorSpec.make(attrs.index_type, (Dim.of(1),))]


# ---------------------------------------------------------------- kernel


def _scalar(x, name: str, default, dtype):
    if x is None:
        return default
    x = np.asarray(x)
    if x.size != 1:
        fail(f"{name} must have exactly 1 element, got shape {list(x.shape)}")
    return dtype(x.reshape(-1)[0])


def _corners(boxes: np.ndarray, encoding: str) -> np.ndarray:
    """[..., 4] boxes as (ymin, xmin, ymax, xmax) in f32."""
    b = boxes.astype(F32)
    if encoding == "center":   # [x_center, y_center, width, height]
        half_w, half_h = b[..., 2] / F32(2), b[..., 3] / F32(2)
        return np.stack([b[..., 1] - half_h, b[..., 0] - half_w,
                         b[..., 1] + half_h, b[..., 0] + half_w], axis=-1)
    return np.stack([np.minimum(b[..., 0], b[..., 2]), np.minimum(b[..., 1], b[..., 3]),
                     np.maximum(b[..., 0], b[..., 2]), np.maximum(b[..., 1], b[..., 3])], axis=-1)


def _select_class(corners, areas, scores, max_out, iou_thr, score_thr, sigma, soft_iou_cut):
    """Selected box indices and their (possibly decayed) scores for one batch and class."""
    from .nms_loop import hard, soft_apply, soft_pick  # the compiled loops (ops/nms_loop.py)

    cand = np.flatnonzero(scores > score_thr)            # NaN scores compare false: dropped
    alive = cand[np.argsort(-scores[cand], kind="stable")]  # equal scores: lower index first
    alive = alive.astype(np.int64)
    if sigma <= 0:
        selected = np.empty(min(max_out, alive.size), np.int64)
        count = hard(corners, areas, alive, max_out, F32(iou_thr), selected)
        return selected[:count], scores[selected[:count]]
    cur = scores.astype(F32).copy()
    sel, sel_scores = [], []
    scale = F32(-0.5) / F32(sigma)
    n = alive.size
    rest, hits = np.empty(n, np.int64), np.empty(n, np.int64)
    iou, args = np.empty(n, F32), np.empty(n, F32)
    while n and len(sel) < max_out:
        # the highest current score, equal ones by box index; the others' IoUs with it
        i, h = soft_pick(corners, areas, cur, alive, n, scale, rest, iou, hits, args)
        sel.append(i)
        sel_scores.append(cur[i])
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            w = np.exp(args[:h])                  # NumPy's f32 exp (see ops/nms_loop.py)
        n = soft_apply(cur, rest, n - 1, iou, hits, h, w, F32(score_thr), F32(iou_thr),
                       soft_iou_cut, alive)
    return np.array(sel, np.int64), np.array(sel_scores, F32)


def _run(attrs, boxes, scores, max_out=None, iou_thr=None, score_thr=None, sigma=None):
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        fail(f"boxes must have shape [num_batches, num_boxes, 4], got {list(boxes.shape)}")
    if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        fail(f"scores must have shape [num_batches, num_classes, num_boxes] = "
             f"[{boxes.shape[0]}, ?, {boxes.shape[1]}], got {list(scores.shape)}")
    nb, nc, n = scores.shape
    max_out = min(max(_scalar(max_out, "max_output_boxes_per_class", 0, int), 0), n)
    iou_thr = _scalar(iou_thr, "iou_threshold", F32(0), F32)
    score_thr = _scalar(score_thr, "score_threshold", F32(0), F32)
    sigma = _scalar(sigma, "soft_nms_sigma", F32(0), F32) if attrs.version >= 5 else F32(0)
    corners = _corners(boxes, attrs.box_encoding)
    with np.errstate(invalid="ignore", over="ignore"):
        areas = ((corners[..., 2] - corners[..., 0]) * (corners[..., 3] - corners[..., 1])).astype(F32)
    sc = scores.astype(F32)
    rows_b, rows_c, rows_i, rows_s = [], [], [], []
    if max_out > 0:
        for b in range(nb):
            for c in range(nc):
                sel, ss = _select_class(corners[b], areas[b], sc[b, c], max_out, iou_thr,
                                        score_thr, sigma, attrs.version == 5)
                rows_b.append(np.full(sel.size, b, np.int64))
                rows_c.append(np.full(sel.size, c, np.int64))
                rows_i.append(sel)
                rows_s.append(ss)
    bi, ci, ii = (np.concatenate(r) if r else np.zeros(0, np.int64)
                  for r in (rows_b, rows_c, rows_i))
    si = np.concatenate(rows_s).astype(F32) if rows_s else np.zeros(0, F32)
    if attrs.sort_result_descending and si.size:
        order = np.lexsort((ii, ci, bi, -si))
        bi, ci, ii, si = bi[order], ci[order], ii[order], si[order]
    itype = np.int64 if attrs.index_type == "i64" else np.int32
    indices = np.stack([bi, ci, ii], axis=1).astype(itype).reshape(-1, 3)
    if attrs.version < 5:
        rows = _rows(attrs, Dim.of(nb), Dim.of(nc), Dim.of(n), max_out).value
        check_alloc([rows, 3], itype, "NonMaxSuppression's selected_indices")
        out = np.full((rows, 3), -1, itype)
        k = min(rows, indices.shape[0])
        out[:k] = indices[:k]
        return (out,)
    scores_out = np.stack([bi.astype(F32), ci.astype(F32), si], axis=1).reshape(-1, 3)
    return indices, scores_out, np.array([indices.shape[0]], itype)


@register("NonMaxSuppression", since=(1, 3, 4), attrs=(NMS1Attrs, NMS3Attrs, NMS4Attrs),
          category="sort")
class NonMaxSuppression1:
    @staticmethod
    def infer(attrs, boxes: TensorSpec, scores: TensorSpec, max_output_boxes_per_class=None,
              iou_threshold=None, score_threshold=None) -> list[TensorSpec]:
        return _infer(attrs, boxes, scores, max_output_boxes_per_class, iou_threshold,
                      score_threshold)

    @staticmethod
    def run(attrs, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
            score_threshold=None) -> tuple[np.ndarray]:
        return _run(attrs, boxes, scores, max_output_boxes_per_class, iou_threshold,
                    score_threshold)


@register("NonMaxSuppression", since=(5, 9), attrs=(NMS5Attrs, NMS9Attrs), category="sort")
class NonMaxSuppression5:
    @staticmethod
    def infer(attrs, boxes: TensorSpec, scores: TensorSpec, max_output_boxes_per_class=None,
              iou_threshold=None, score_threshold=None, soft_nms_sigma=None) -> list[TensorSpec]:
        return _infer(attrs, boxes, scores, max_output_boxes_per_class, iou_threshold,
                      score_threshold, soft_nms_sigma)

    @staticmethod
    def run(attrs, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
            score_threshold=None, soft_nms_sigma=None) -> tuple[np.ndarray, ...]:
        return _run(attrs, boxes, scores, max_output_boxes_per_class, iou_threshold,
                    score_threshold, soft_nms_sigma)


# ---------------------------------------------------------------- MulticlassNms


@dataclass(frozen=True)
class MulticlassNms8Attrs:
    # The page calls it sort_result with "class"; OpenVINO's IR writes sort_result_type with
    # "classid" (irrun reads that name and takes "class" too).
    sort_result_type: Literal["classid", "class", "score", "none"] = "none"
    sort_result_across_batch: bool = False
    output_type: Literal["i64", "i32"] = "i64"
    iou_threshold: float = 0.0
    score_threshold: float = 0.0
    nms_top_k: int = -1
    keep_top_k: int = -1
    background_class: int = -1
    normalized: bool = True
    nms_eta: float = 1.0
    version: ClassVar[int] = 8


@dataclass(frozen=True)
class MulticlassNms9Attrs(MulticlassNms8Attrs):
    version: ClassVar[int] = 9


def _iou_xy(box, others, normalized: bool) -> np.ndarray:
    """IoU of one [xmin, ymin, xmax, ymax] box with each of `others` (MulticlassNms, MatrixNms):
    unnormalized boxes count both end pixels (+1)."""
    norm = F32(0) if normalized else F32(1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        area = (box[3] - box[1] + norm) * (box[2] - box[0] + norm)
        areas = (others[:, 3] - others[:, 1] + norm) * (others[:, 2] - others[:, 0] + norm)
        h = np.maximum(np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]) + norm, F32(0))
        w = np.maximum(np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]) + norm, F32(0))
        inter = h * w
        iou = inter / (area + areas - inter)
    return np.where((area <= 0) | (areas <= 0), F32(0), iou).astype(F32)


def _multiclass_class(attrs, boxes, scores) -> list[int]:
    """Selected box indices of one image and class, in selection (score) order."""
    cand = np.flatnonzero(scores >= F32(attrs.score_threshold))   # >=, as the reference
    order = cand[np.argsort(-scores[cand], kind="stable")]
    if attrs.nms_top_k > -1:
        order = order[:attrs.nms_top_k]
    thr = F32(attrs.iou_threshold)
    eta = F32(attrs.nms_eta)
    sel: list[int] = []
    if not (eta < 1 and thr > 0.5):
        alive = order
        while alive.size:                    # a fixed threshold: suppress eagerly
            i = int(alive[0])
            sel.append(i)
            rest = alive[1:]
            alive = rest[~(_iou_xy(boxes[i], boxes[rest], attrs.normalized) >= thr)]
        return sel
    # Adaptive NMS: each candidate meets every selected box at the threshold of its turn
    # (the reference's order), so this walks the candidates one by one.
    for i in order.tolist():
        if sel and (_iou_xy(boxes[i], boxes[sel], attrs.normalized) >= thr).any():
            continue
        sel.append(i)
        if eta < 1 and thr > 0.5:
            thr = F32(thr * eta)
    return sel


def _multiclass_rows(attrs, batches: Dim, classes: Dim, nboxes: Dim) -> Dim:
    per_class = nboxes if attrs.nms_top_k < 0 else Dim(min(nboxes.lo, attrs.nms_top_k),
                                                       attrs.nms_top_k if nboxes.hi is None
                                                       else min(nboxes.hi, attrs.nms_top_k))
    per_image = per_class * classes
    hi = per_image.hi
    if attrs.keep_top_k >= 0:
        hi = attrs.keep_top_k if hi is None else min(hi, attrs.keep_top_k)
    total = Dim(0, hi) * batches
    return Dim(0, total.hi)


@register("MulticlassNms", since=(8, 9), attrs=(MulticlassNms8Attrs, MulticlassNms9Attrs),
          category="sort")
class MulticlassNms8:
    @staticmethod
    def infer(attrs, boxes: TensorSpec, scores: TensorSpec, roisnum=None) -> list[TensorSpec]:
        for name, spec in (("boxes", boxes), ("scores", scores)):
            if not spec.etype.is_float:
                fail(f"{name} must have a floating-point element type, got {spec.etype.name}")
        if boxes.etype != scores.etype:
            fail(f"boxes and scores must have the same element type, got {boxes.etype.name} "
                 f"and {scores.etype.name}")
        if roisnum is not None and attrs.version == 8:
            fail("MulticlassNms-8 takes 2 inputs (roisnum came with MulticlassNms-9)")
        if boxes.rank is not None and boxes.rank != 3:
            fail(f"boxes must have rank 3, got {boxes}")
        if boxes.rank == 3 and not boxes.shape[2].compatible(Dim.of(4)):
            fail(f"boxes must have 4 coordinates in dim 2, got {boxes}")
        if roisnum is None:
            if scores.rank is not None and scores.rank != 3:
                fail(f"scores must have shape [num_batches, num_classes, num_boxes], got {scores}")
            bs = boxes.shape or (Dim(0, None),) * 3
            ss = scores.shape or (Dim(0, None),) * 3
            batches, classes = bs[0].merge(ss[0]), ss[1]
            nboxes = bs[1].merge(ss[2])
            if batches is None or nboxes is None:
                fail(f"boxes {boxes} and scores {scores} disagree on num_batches or num_boxes")
        else:
            check_integer(roisnum, "roisnum")
            if scores.rank is not None and scores.rank != 2:
                fail(f"with roisnum, scores must have shape [num_classes, num_boxes], got {scores}")
            bs = boxes.shape or (Dim(0, None),) * 3
            ss = scores.shape or (Dim(0, None),) * 2
            classes, nboxes = bs[0].merge(ss[0]), bs[1].merge(ss[1])
            if classes is None or nboxes is None:
                fail(f"boxes {boxes} and scores {scores} disagree on num_classes or num_boxes")
            batches = roisnum.shape[0] if roisnum.shape else Dim(0, None)
            # each image has at most all the boxes: bound rows by the total instead
            rows = _multiclass_rows(attrs, Dim.of(1), classes, nboxes)
            nb = batches
            rows = Dim(0, None if rows.hi is None or nb.hi is None else rows.hi * max(nb.hi, 1))
        if roisnum is None:
            rows = _multiclass_rows(attrs, batches, classes, nboxes)
        itype = attrs.output_type
        return [TensorSpec(boxes.etype, (rows, Dim.of(6))), TensorSpec.make(itype, (rows, Dim.of(1))),
                TensorSpec.make(itype, (batches,))]

    @staticmethod
    def run(attrs, boxes, scores, roisnum=None) -> tuple[np.ndarray, ...]:
        b = boxes.astype(F32)
        s = scores.astype(F32)
        shared = roisnum is None
        if shared:
            if b.ndim != 3 or s.ndim != 3 or b.shape[0] != s.shape[0] or b.shape[1] != s.shape[2] \
                    or b.shape[2] != 4:
                fail(f"boxes {list(b.shape)} and scores {list(s.shape)} must be [N, M, 4] and "
                     f"[N, C, M]")
            images = [(b[i], s[i], 0) for i in range(b.shape[0])]
            nclasses = s.shape[1]
        else:
            counts = np.asarray(roisnum).astype(np.int64).reshape(-1)
            if b.ndim != 3 or s.ndim != 2 or b.shape[:2] != s.shape or b.shape[2] != 4:
                fail(f"boxes {list(b.shape)} and scores {list(s.shape)} must be [C, M, 4] and "
                     f"[C, M]")
            if (counts < 0).any() or counts.sum() > b.shape[1]:
                fail(f"roisnum {counts.tolist()} must be non-negative and sum to at most "
                     f"num_boxes {b.shape[1]}")
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
            images = [(b[:, st:st + k], s[:, st:st + k], st) for st, k in zip(starts, counts)]
            nclasses = s.shape[0]
        rows = []     # (batch, class, box index within the image, score, start offset)
        per_image = []
        for img, (ib, isc, start) in enumerate(images):
            found = []
            for c in range(nclasses):
                if c == attrs.background_class:
                    continue
                cb = ib if shared else ib[c]
                sel = _multiclass_class(attrs, cb, isc[c])
                found += [(img, c, j, float(isc[c][j]), start) for j in sel]
            # score descending, then class, then box index (the reference's order)
            found.sort(key=lambda r: (-r[3], r[1], r[2]))
            if attrs.keep_top_k > -1:
                found = found[:attrs.keep_top_k]
            if not attrs.sort_result_across_batch and attrs.sort_result_type in ("class", "classid"):
                found.sort(key=lambda r: (r[1], -r[3], r[2]))
            per_image.append(len(found))
            rows += found
        if attrs.sort_result_across_batch:
            if attrs.sort_result_type == "score":
                rows.sort(key=lambda r: (-r[3], r[0], r[1], r[2]))
            elif attrs.sort_result_type in ("class", "classid"):
                rows.sort(key=lambda r: (r[1], r[0], -r[3], r[2]))
        k = len(rows)
        out = np.zeros((k, 6), F32)
        idx = np.zeros((k, 1), np.int64)
        for n, (img, c, j, sc, start) in enumerate(rows):
            box = images[img][0][j] if shared else images[img][0][c, j]
            out[n] = [c, sc, *box]
            idx[n, 0] = img * b.shape[1] + j if shared else (start + j) * nclasses + c
        itype = np.int64 if attrs.output_type == "i64" else np.int32
        return (out.astype(boxes.dtype), idx.astype(itype), np.array(per_image, itype))


# ---------------------------------------------------------------- MatrixNms


@dataclass(frozen=True)
class MatrixNmsAttrs:
    sort_result_type: Literal["classid", "class", "score", "none"] = "none"
    sort_result_across_batch: bool = False
    output_type: Literal["i64", "i32"] = "i64"
    score_threshold: float = 0.0
    nms_top_k: int = -1
    keep_top_k: int = -1
    background_class: int = -1
    normalized: bool = True
    decay_function: Literal["gaussian", "linear"] = "linear"
    gaussian_sigma: float = 2.0
    post_threshold: float = 0.0


def _iou_matrix(boxes: np.ndarray, normalized: bool) -> np.ndarray:
    """[K, K] IoU of [xmin, ymin, xmax, ymax] boxes, as MatrixNms's reference computes it."""
    norm = F32(0) if normalized else F32(1)
    a, b = boxes[:, None, :], boxes[None, :, :]
    disjoint = (b[..., 0] > a[..., 2]) | (b[..., 2] < a[..., 0]) | (b[..., 1] > a[..., 3]) | \
        (b[..., 3] < a[..., 1])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        iw = np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]) + norm
        ih = np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]) + norm
        inter = iw * ih
        bad = (boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1])
        area = np.where(bad, F32(0), (boxes[:, 2] - boxes[:, 0] + norm) * (boxes[:, 3] - boxes[:, 1] + norm))
        iou = inter / (area[:, None] + area[None, :] - inter)
    return np.where(disjoint, F32(0), iou).astype(F32)


def _matrix_class(attrs, boxes, scores):
    """(indices, decayed scores) of one image and class."""
    cand = np.flatnonzero(scores > F32(attrs.score_threshold))
    order = cand[np.argsort(-scores[cand], kind="stable")]
    if attrs.nms_top_k > -1:
        order = order[:attrs.nms_top_k]
    k = order.size
    if k == 0:
        return order, np.zeros(0, F32)
    check_alloc([k, k], F32, "MatrixNms's IoU matrix of one class")
    iou = np.tril(_iou_matrix(boxes[order], attrs.normalized), -1)      # [i, j], j < i
    iou_max = iou.max(axis=1)                                           # 0 for the first
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if attrs.decay_function == "gaussian":
            decay = np.exp((iou_max[None, :] ** 2 - iou ** 2) * F32(attrs.gaussian_sigma))
        else:
            decay = (F32(1) - iou) / (F32(1) - iou_max[None, :] + F32(1e-10))
    lower = np.tri(k, k, -1, dtype=bool)
    decay = np.minimum(np.where(lower, decay, F32(1)).min(axis=1), F32(1)).astype(F32)
    ds = (decay * scores[order]).astype(F32)
    keep = ds > F32(attrs.post_threshold)
    return order[keep], ds[keep]


@register("MatrixNms", since=8, attrs=MatrixNmsAttrs, category="sort")
class MatrixNms8:
    @staticmethod
    def infer(attrs, boxes: TensorSpec, scores: TensorSpec) -> list[TensorSpec]:
        batches, classes, nboxes = _check_inputs(NMS9Attrs(), boxes, scores, ())
        if boxes.etype != scores.etype:
            fail(f"boxes and scores must have the same element type, got {boxes.etype.name} "
                 f"and {scores.etype.name}")
        rows = _multiclass_rows(attrs, batches, classes, nboxes)
        return [TensorSpec(boxes.etype, (rows, Dim.of(6))),
                TensorSpec.make(attrs.output_type, (rows, Dim.of(1))),
                TensorSpec.make(attrs.output_type, (batches,))]

    @staticmethod
    def run(attrs, boxes, scores) -> tuple[np.ndarray, ...]:
        b, s = boxes.astype(F32), scores.astype(F32)
        if b.ndim != 3 or s.ndim != 3 or b.shape[0] != s.shape[0] or b.shape[1] != s.shape[2] \
                or b.shape[2] != 4:
            fail(f"boxes {list(b.shape)} and scores {list(s.shape)} must be [N, M, 4] and [N, C, M]")
        nb, nc, m = s.shape
        bi, ci, ii, si, per_image = [], [], [], [], []
        for img in range(nb):
            parts = [(c, *_matrix_class(attrs, b[img], s[img, c])) for c in range(nc)
                     if c != attrs.background_class]
            cls = np.concatenate([np.full(p[1].size, p[0], np.int64) for p in parts]) if parts \
                else np.zeros(0, np.int64)
            idx = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
            sc = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, F32)
            order = np.lexsort((idx, cls, -sc))           # score, then class, then box
            if attrs.keep_top_k > -1:
                order = order[:attrs.keep_top_k]
            per_image.append(order.size)
            bi.append(np.full(order.size, img, np.int64))
            ci.append(cls[order])
            ii.append(idx[order])
            si.append(sc[order])
        bi, ci, ii, si = (np.concatenate(x) if x else np.zeros(0) for x in (bi, ci, ii, si))
        bi, ci, ii = bi.astype(np.int64), ci.astype(np.int64), ii.astype(np.int64)
        si = si.astype(F32)
        if attrs.sort_result_across_batch and attrs.sort_result_type == "score":
            order = np.lexsort((ii, ci, bi, -si))
        elif attrs.sort_result_across_batch and attrs.sort_result_type in ("classid", "class"):
            order = np.lexsort((ii, -si, bi, ci))
        else:
            order = np.arange(si.size)
        bi, ci, ii, si = bi[order], ci[order], ii[order], si[order]
        out = np.concatenate([ci[:, None].astype(F32), si[:, None], b[bi, ii].reshape(-1, 4)], 1)
        itype = np.int64 if attrs.output_type == "i64" else np.int32
        return (out.astype(boxes.dtype), (bi * m + ii).astype(itype).reshape(-1, 1),
                np.array(per_image, itype))


# ---------------------------------------------------------------- ExperimentalDetectronTopKROIs


@dataclass(frozen=True)
class TopKROIsAttrs:
    max_rois: int = 0


@register("ExperimentalDetectronTopKROIs", since=6, attrs=TopKROIsAttrs, category="sort")
class ExperimentalDetectronTopKROIs6:
    @staticmethod
    def infer(attrs, rois: TensorSpec, probs: TensorSpec) -> list[TensorSpec]:
        if not rois.etype.is_float or rois.etype != probs.etype:
            fail(f"rois and probs must share a floating-point element type, got {rois.etype.name} "
                 f"and {probs.etype.name}")
        if rois.rank is not None and (rois.rank != 2 or not rois.shape[1].compatible(Dim.of(4))):
            fail(f"rois must have shape [number_of_ROIs, 4], got {rois}")
        if probs.rank is not None and probs.rank != 1:
            fail(f"probs must be 1D, got {probs}")
        if rois.rank == 2 and probs.rank == 1 and rois.shape[0].merge(probs.shape[0]) is None:
            fail(f"rois {rois} and probs {probs} must have one probability per ROI")
        if attrs.max_rois < 0:
            fail(f"max_rois must not be negative, got {attrs.max_rois}")
        return [TensorSpec(rois.etype, (Dim.of(attrs.max_rois), Dim.of(4)))]

    @staticmethod
    def run(attrs, rois, probs) -> tuple[np.ndarray]:
        if rois.ndim != 2 or rois.shape[1] != 4 or probs.shape != (rois.shape[0],):
            fail(f"rois {list(rois.shape)} and probs {list(probs.shape)} must be [R, 4] and [R]")
        check_alloc([attrs.max_rois, 4], rois.dtype, "ExperimentalDetectronTopKROIs's output")
        # Descending probability; equal ones (which the page leaves open) by ROI index, and NaN
        # last. The rows past the ROIs (undefined in the page) are 0.
        p = probs.astype(np.float64)
        order = np.lexsort((np.arange(p.size), -np.nan_to_num(p, nan=-np.inf), np.isnan(p)))
        order = order[:attrs.max_rois]
        out = np.zeros((attrs.max_rois, 4), rois.dtype)
        out[:order.size] = rois[order]
        return (out,)


# ---------------------------------------------------------------- NMSRotated


@dataclass(frozen=True)
class NMSRotatedAttrs:
    sort_result_descending: bool = True
    output_type: Literal["i64", "i32"] = "i64"
    clockwise: bool = True


def _rotated_corners(b: np.ndarray, clockwise: bool) -> np.ndarray:
    """[N, 5] (x_ctr, y_ctr, w, h, angle) -> [N, 4, 2] corners of each box, in rotation order.
    Image y points down, so the usual rotation formula turns a positive angle clockwise on
    the image (OpenVINO's reading of clockwise=true); counterclockwise negates the angle."""
    b = b.astype(np.float64)
    ang = b[:, 4] if clockwise else -b[:, 4]
    cos, sin = np.cos(ang)[:, None], np.sin(ang)[:, None]
    dx = np.array([-0.5, 0.5, 0.5, -0.5])[None, :] * b[:, 2:3]
    dy = np.array([-0.5, -0.5, 0.5, 0.5])[None, :] * b[:, 3:4]
    return np.stack([b[:, :1] + dx * cos - dy * sin, b[:, 1:2] + dx * sin + dy * cos], -1)


def _clip_area(p: np.ndarray, q: np.ndarray) -> float:
    """Area of the intersection of two convex polygons of the same orientation
    (Sutherland-Hodgman clipping, then the shoelace formula)."""
    poly = [tuple(v) for v in p]
    for k in range(len(q)):
        if not poly:
            return 0.0
        a, b = q[k], q[(k + 1) % len(q)]

        def side(v, a=a, b=b):
            return (b[0] - a[0]) * (v[1] - a[1]) - (b[1] - a[1]) * (v[0] - a[0])
        out = []
        for j in range(len(poly)):
            cur, nxt = poly[j], poly[(j + 1) % len(poly)]
            sc, sn = side(cur), side(nxt)
            if sc >= 0:
                out.append(cur)
            if (sc >= 0) != (sn >= 0):
                t = sc / (sc - sn)
                out.append((cur[0] + t * (nxt[0] - cur[0]), cur[1] + t * (nxt[1] - cur[1])))
        poly = out
    if len(poly) < 3:
        return 0.0
    xs, ys = np.array([v[0] for v in poly]), np.array([v[1] for v in poly])
    return float(abs(np.dot(xs, np.roll(ys, -1)) - np.dot(ys, np.roll(xs, -1))) / 2)


def _rotated_iou(i: int, rest: np.ndarray, corners: np.ndarray, areas: np.ndarray) -> np.ndarray:
    # Polygon clipping has no fixed shape to vectorise over: a loop over one step's candidates.
    out = np.zeros(rest.size, F32)
    if areas[i] <= 0:
        return out
    for k, j in enumerate(rest.tolist()):
        if areas[j] > 0:
            inter = _clip_area(corners[i], corners[j])
            out[k] = inter / (areas[i] + areas[j] - inter)
    return out


@register("NMSRotated", since=13, attrs=NMSRotatedAttrs, category="sort")
class NMSRotated13:
    @staticmethod
    def infer(attrs, boxes: TensorSpec, scores: TensorSpec, max_output_boxes_per_class: TensorSpec,
              iou_threshold: TensorSpec, score_threshold: TensorSpec) -> list[TensorSpec]:
        if boxes.rank == 3 and not boxes.shape[2].compatible(Dim.of(5)):
            fail(f"boxes must have shape [num_batches, num_boxes, 5], got {boxes}")
        as4 = TensorSpec(boxes.etype, None if boxes.shape is None else boxes.shape[:2] + (Dim.of(4),))
        return _infer(NMS9Attrs(output_type=attrs.output_type), as4, scores,
                      max_output_boxes_per_class, iou_threshold, score_threshold)

    @staticmethod
    def run(attrs, boxes, scores, max_output_boxes_per_class, iou_threshold,
            score_threshold) -> tuple[np.ndarray, ...]:
        if boxes.ndim != 3 or boxes.shape[2] != 5 or scores.ndim != 3 or \
                scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            fail(f"boxes {list(boxes.shape)} and scores {list(scores.shape)} must be "
                 f"[N, M, 5] and [N, C, M]")
        nb, nc, n = scores.shape
        max_out = min(max(_scalar(max_output_boxes_per_class, "max_output_boxes_per_class", 0,
                                  int), 0), n)
        thr = _scalar(iou_threshold, "iou_threshold", F32(0), F32)
        sthr = _scalar(score_threshold, "score_threshold", F32(0), F32)
        sc = scores.astype(F32)
        rows = []
        for b in range(nb):
            corners = _rotated_corners(boxes[b], attrs.clockwise)
            areas = boxes[b, :, 2].astype(np.float64) * boxes[b, :, 3].astype(np.float64)
            for c in range(nc):
                s = sc[b, c]
                cand = np.flatnonzero(s > sthr)                 # the same rules as NMS-9
                alive = cand[np.argsort(-s[cand], kind="stable")]
                sel = []
                while alive.size and len(sel) < max_out:
                    i = int(alive[0])
                    sel.append(i)
                    rest = alive[1:]
                    alive = rest[~(_rotated_iou(i, rest, corners, areas) >= thr)]
                rows += [(b, c, i, s[i]) for i in sel]
        bi, ci, ii = (np.array([r[k] for r in rows], np.int64) for k in range(3))
        si = np.array([r[3] for r in rows], F32)
        if attrs.sort_result_descending and si.size:
            order = np.lexsort((ii, ci, bi, -si))
            bi, ci, ii, si = bi[order], ci[order], ii[order], si[order]
        itype = np.int64 if attrs.output_type == "i64" else np.int32
        idx = np.stack([bi, ci, ii], 1).astype(itype).reshape(-1, 3)
        out = np.stack([bi.astype(F32), ci.astype(F32), si], 1).reshape(-1, 3)
        return idx, out, np.array([idx.shape[0]], itype)
