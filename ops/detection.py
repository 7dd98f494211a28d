"""Object detection (spec pages: detection/): PriorBox-1/8, PriorBoxClustered-1,
DetectionOutput-1/8, ROIAlign-3/9, ROIAlignRotated-15, ROIPooling-2, PSROIPooling-1,
DeformablePSROIPooling-1, RegionYolo-1, ReorgYolo-2, Proposal-1/4, GenerateProposals-9 and
the ExperimentalDetectron PriorGridGenerator-6, ROIFeatureExtractor-6,
GenerateProposalsSingleImage-6 and DetectionOutput-6 ops.

The pages give the idea, not the arithmetic; irrun computes what OpenVINO's reference does
(PriorBox's usually runs in OpenVINO's constant folding), in f32 with the same operation
order, and follows the CPU plugin where the two disagree on defined inputs (each place says
so; docs/ops.md, "Where irrun chooses a rule"). Grids and samples are broadcasts; the loops left
are over ROIs, pooled bins and selected boxes, never over tensor elements.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from irrun.opkit import (
    Dim,
    TensorSpec,
    check_alloc,
    check_integer,
    check_rank,
    elements,
    fail,
    register,
)

F32 = np.float32


# ---------------------------------------------------------------- shared input handling


def _check_size_inputs(name: str, output_size: TensorSpec, image_size: TensorSpec) -> None:
    for what, spec in (("output_size", output_size), ("image_size", image_size)):
        check_integer(spec, f"{name}'s {what}")
        check_rank(spec, (1,), f"{name}'s {what}")
        if spec.rank == 1 and not spec.shape[0].compatible(Dim.of(2)):
            fail(f"{name}'s {what} must have 2 elements [height, width], got {spec}")


def _grid_dim(output_size: TensorSpec, per_point: int) -> Dim:
    """4 * H * W * per_point as a Dim, from what is known of output_size's values."""
    el = elements(output_size)
    if el is None or len(el) != 2:
        return Dim(0, None)
    h, w = (Dim(max(d.lo, 0), d.hi) for d in el)
    return h * w * Dim.of(4 * per_point)


def _sizes(output_size: np.ndarray, image_size: np.ndarray, name: str) -> tuple[int, int, int, int]:
    out, img = np.asarray(output_size).reshape(-1), np.asarray(image_size).reshape(-1)
    if out.size != 2 or img.size != 2:
        fail(f"{name}'s output_size and image_size must have 2 elements each, got "
             f"{out.size} and {img.size}")
    h, w = int(out[0]), int(out[1])
    ih, iw = int(img[0]), int(img[1])
    if h < 0 or w < 0:
        fail(f"{name}'s output_size must not be negative, got [{h}, {w}]")
    return h, w, ih, iw


def _with_variance(boxes: np.ndarray, variance: tuple[float, ...], name: str) -> np.ndarray:
    """[N, 4] boxes -> the [2, 4 N] output: coordinates, then the variances."""
    if len(variance) not in (0, 1, 4):
        fail(f"{name}'s variance must have 0, 1 or 4 elements, got {len(variance)}")
    var = np.array(variance or (0.1,), F32)
    out = np.empty((2, boxes.size), F32)
    out[0] = boxes.reshape(-1)
    out[1] = np.resize(np.broadcast_to(var, (4,)) if var.size == 1 else var, boxes.size)
    return out


# ---------------------------------------------------------------- PriorBox


@dataclass(frozen=True)
class PriorBox1Attrs:
    offset: float
    min_size: tuple[float, ...] = ()
    max_size: tuple[float, ...] = ()
    aspect_ratio: tuple[float, ...] = ()
    flip: bool = False
    clip: bool = False
    step: float = 0.0
    variance: tuple[float, ...] = ()
    scale_all_sizes: bool = True
    fixed_ratio: tuple[float, ...] = ()
    fixed_size: tuple[float, ...] = ()
    density: tuple[float, ...] = ()
    min_max_aspect_ratios_order: ClassVar[bool] = True   # v1 has no attribute: Caffe's order


@dataclass(frozen=True)
class PriorBox8Attrs(PriorBox1Attrs):
    min_max_aspect_ratios_order: bool = True      # an attribute from v8 on


def _aspect_ratios(attrs) -> list[float]:
    """1, then each new ratio (and its inverse with flip), duplicates within 1e-6 dropped."""
    ratios = [1.0]
    for ar in attrs.aspect_ratio:
        if not any(abs(F32(ar) - F32(r)) < 1e-6 for r in ratios):
            ratios.append(float(F32(ar)))
            if attrs.flip:
                ratios.append(float(F32(1) / F32(ar)))
    return ratios


def _number_of_priors(attrs) -> int:
    # OpenVINO's count (PriorBox::number_of_priors): the distinct ratios, with the inverses
    # under flip, as a set rounded to 1e-6.
    ratios = {1.0}
    for ar in attrs.aspect_ratio:
        ratios.add(round(ar * 1e6) / 1e6)
        if attrs.flip:
            ratios.add(round(1 / ar * 1e6) / 1e6)
    n_ar = len(ratios)
    if attrs.scale_all_sizes:
        n = n_ar * len(attrs.min_size) + len(attrs.max_size)
    else:
        n = n_ar + len(attrs.min_size) - 1
    if attrs.fixed_size:
        n = n_ar * len(attrs.fixed_size)
    for d in attrs.density:
        d2 = int(d) * int(d) - 1
        n += (len(attrs.fixed_ratio) if attrs.fixed_ratio else n_ar) * d2
    return n


def _check_prior_box_attrs(attrs) -> None:
    for name in ("aspect_ratio", "density", "fixed_size", "fixed_ratio"):
        values = getattr(attrs, name)
        with np.errstate(over="ignore"):     # OpenVINO holds them as f32: 3.5e38 is inf
            finite = np.isfinite(np.array(values, np.float64).astype(F32)).all()
        if not finite:
            fail(f"PriorBox's {name} values must be finite f32 numbers, got {list(values)}",
                 code="value")
    if attrs.fixed_size and len(attrs.density) < len(attrs.fixed_size):
        fail(f"PriorBox needs a density per fixed_size, got {len(attrs.density)} densities "
             f"for {len(attrs.fixed_size)} fixed sizes")
    if any(d < 1 for d in attrs.density[:len(attrs.fixed_size)]):
        fail(f"PriorBox's density values must be at least 1, got {list(attrs.density)}")
    if any(a <= 0 for a in attrs.aspect_ratio):
        fail(f"PriorBox's aspect_ratio values must be positive, got {list(attrs.aspect_ratio)}")
    if len(attrs.variance) not in (0, 1, 4):
        fail(f"PriorBox's variance must have 0, 1 or 4 elements, got {len(attrs.variance)}")


def _prior_templates(attrs, image_h: int, n: int) -> np.ndarray:
    """The boxes of one grid point, in output order: [n, 7] rows of (shift_a, shift_b,
    shift_c, shift_r, half_width, half_height, clip_each), the centre moved by -a + b + c
    (x) or -a + b + r (y), in that order. Call _priors_per_point first: it holds n (a
    density's square per fixed size) to the memory budget."""
    rows, made = [], [0]                      # blocks of rows; how many so far
    ratios = _aspect_ratios(attrs)
    min_size = [F32(s) for s in attrs.min_size]
    if not attrs.scale_all_sizes:            # MXNet-style sizes, relative to the image height
        min_size = [s * F32(image_h) for s in min_size]
    for s, fs in enumerate(attrs.fixed_size):
        fs_int = int(fs)                      # OpenVINO truncates the size for these shifts
        half = F32(fs_int) * F32(0.5)
        density = int(attrs.density[s])
        shift = int(F32(fs) / F32(density))

        def dense(bw, bh, density=density, shift=shift, fs_int=fs_int):
            made[0] += density * density
            if made[0] > n:
                _too_many_priors(attrs, n, made[0])
            r, c = np.divmod(np.arange(density * density, dtype=np.int64), density)
            block = np.empty((density * density, 7), F32)
            block[:, :2] = (F32(fs_int // 2), F32(shift) / F32(2))
            block[:, 2] = c.astype(np.float64) * shift    # c * shift, r * shift rounded to f32
            block[:, 3] = r.astype(np.float64) * shift
            block[:, 4:] = (bw, bh, 1)
            rows.append(block)
        if attrs.fixed_ratio:
            for ar in attrs.fixed_ratio:
                ar = np.sqrt(F32(ar))
                dense(F32(fs) * F32(0.5) * ar, F32(fs) * F32(0.5) / ar)
        else:
            if attrs.density:
                dense(half, half)
            for ar in ratios:
                if abs(ar - 1.0) < 1e-6:
                    continue
                ar = np.sqrt(F32(ar))
                dense(F32(fs) * F32(0.5) * ar, F32(fs) * F32(0.5) / ar)
    for k, ms in enumerate(min_size):
        plain = [(ms * F32(0.5), ms * F32(0.5))]
        big = []
        if len(attrs.max_size) > k:
            b = np.sqrt(ms * F32(attrs.max_size[k])) * F32(0.5)
            big = [(b, b)]
        ars = []
        if attrs.scale_all_sizes or k == len(min_size) - 1:
            base = ms if attrs.scale_all_sizes else min_size[0]
            for ar in ratios:
                if abs(F32(ar) - F32(1)) < 1e-6:
                    continue
                ar = np.sqrt(F32(ar))
                ars.append((base * F32(0.5) * ar, base * F32(0.5) / ar))
        order = plain + (big + ars if attrs.min_max_aspect_ratios_order else ars + big)
        block = np.zeros((len(order), 7), F32)
        block[:, 4:6] = np.array(order, F32).reshape(-1, 2)
        rows.append(block)
    out = np.concatenate(rows) if rows else np.zeros((0, 7), F32)
    if len(out) != n:
        _too_many_priors(attrs, n, len(out))
    return out


def _too_many_priors(attrs, n: int, made: int):
    # fixed_ratio with a count other than the aspect ratios': OpenVINO's output shape has
    # room for fewer boxes than its kernel writes (out of bounds), so irrun refuses.
    fail(f"PriorBox's attributes generate {made} boxes per grid point but its output shape "
         f"(OpenVINO's count) has room for {n}; fixed_ratio needs as many ratios as the "
         f"{len(_aspect_ratios(attrs))} aspect ratios")


def _priors_per_point(attrs) -> int:
    """OpenVINO's count of boxes per grid point, held to the memory budget (a huge density
    asks for its square), after checking the kernel makes that many."""
    _check_prior_box_attrs(attrs)
    n = _number_of_priors(attrs)
    check_alloc([max(n, 0), 7], F32, "PriorBox's boxes per grid point")
    _prior_templates(attrs, 1, n)
    return n


def _prior_box(attrs, output_size, image_size) -> np.ndarray:
    _check_prior_box_attrs(attrs)
    h, w, ih, iw = _sizes(output_size, image_size, "PriorBox")
    n = _priors_per_point(attrs)
    templates = _prior_templates(attrs, ih, n)
    check_alloc([2, 4 * h * w * n], F32, "PriorBox's output")
    if not h * w * n:   # no box: nor the grid's h or w centres (a size the budget never saw)
        return _with_variance(np.zeros((0, 4), F32), attrs.variance, "PriorBox")
    step = F32(attrs.step)
    if not attrs.scale_all_sizes:
        step = F32(ih) / F32(h) if attrs.step == -1 else step * F32(ih)
    with np.errstate(divide="ignore", invalid="ignore"):
        if step == 0:
            cx = (np.arange(w, dtype=F32) + F32(0.5)) * (F32(iw) / F32(w))
            cy = (np.arange(h, dtype=F32) + F32(0.5)) * (F32(ih) / F32(h))
        else:
            cx = (F32(attrs.offset) + np.arange(w, dtype=F32)) * step
            cy = (F32(attrs.offset) + np.arange(h, dtype=F32)) * step
        clip_each = templates[:, 6] != 0
        a, b, cc, rr, bw, bh = (templates[:, i] for i in range(6))
        px = ((cx[None, :, None] - a) + b) + cc                    # [1, W, P]
        py = ((cy[:, None, None] - a) + b) + rr                    # [H, 1, P]
        px, py = np.broadcast_to(px, (h, w, n)), np.broadcast_to(py, (h, w, n))
        iwi, ihi = F32(1) / F32(iw), F32(1) / F32(ih)
        box = np.stack([(px - bw) * iwi, (py - bh) * ihi, (px + bw) * iwi, (py + bh) * ihi],
                       axis=-1).astype(F32)
    lo = np.where(box[..., :2] > 0, box[..., :2], F32(0))
    hi = np.where(box[..., 2:] < 1, box[..., 2:], F32(1))
    box = np.where(clip_each[:, None], np.concatenate([lo, hi], axis=-1), box)
    if attrs.clip:
        box = np.minimum(np.maximum(box, F32(0)), F32(1))
    return _with_variance(box, attrs.variance, "PriorBox")


@register("PriorBox", since=(1, 8), attrs=(PriorBox1Attrs, PriorBox8Attrs), category="detection")
class PriorBox1:
    @staticmethod
    def infer(attrs, output_size: TensorSpec, image_size: TensorSpec) -> list[TensorSpec]:
        _check_size_inputs("PriorBox", output_size, image_size)
        n = _priors_per_point(attrs)
        return [TensorSpec.make("f32", (Dim.of(2), _grid_dim(output_size, n)))]

    @staticmethod
    def run(attrs, output_size, image_size) -> tuple[np.ndarray]:
        return (_prior_box(attrs, output_size, image_size),)


# ---------------------------------------------------------------- PriorBoxClustered


@dataclass(frozen=True)
class PriorBoxClusteredAttrs:
    offset: float
    width: tuple[float, ...] = (1.0,)
    height: tuple[float, ...] = (1.0,)
    clip: bool = True
    step: float = 0.0
    step_w: float = 0.0
    step_h: float = 0.0
    variance: tuple[float, ...] = ()


def _check_clustered(attrs) -> None:
    if len(attrs.width) != len(attrs.height):
        fail(f"PriorBoxClustered needs as many widths as heights, got {len(attrs.width)} and "
             f"{len(attrs.height)}")
    if len(attrs.variance) not in (0, 1, 4):
        fail(f"PriorBoxClustered's variance must have 0, 1 or 4 elements, got "
             f"{len(attrs.variance)}")


@register("PriorBoxClustered", since=1, attrs=PriorBoxClusteredAttrs, category="detection")
class PriorBoxClustered1:
    @staticmethod
    def infer(attrs, output_size: TensorSpec, image_size: TensorSpec) -> list[TensorSpec]:
        _check_size_inputs("PriorBoxClustered", output_size, image_size)
        _check_clustered(attrs)
        return [TensorSpec.make("f32", (Dim.of(2), _grid_dim(output_size, len(attrs.width))))]

    @staticmethod
    def run(attrs, output_size, image_size) -> tuple[np.ndarray]:
        _check_clustered(attrs)
        h, w, ih, iw = _sizes(output_size, image_size, "PriorBoxClustered")
        n = len(attrs.width)
        check_alloc([2, 4 * h * w * n], F32, "PriorBoxClustered's output")
        if not h * w * n:   # no box: nor the grid's h or w centres
            return (_with_variance(np.zeros((0, 4), F32), attrs.variance, "PriorBoxClustered"),)
        # step_w/step_h fall back to step, then (both 0) to image size / grid size
        sw = F32(attrs.step if attrs.step_w == 0 else attrs.step_w)
        sh = F32(attrs.step if attrs.step_h == 0 else attrs.step_h)
        with np.errstate(divide="ignore", invalid="ignore"):
            if sw == 0 and sh == 0:
                sw, sh = F32(iw) / F32(w), F32(ih) / F32(h)
            cx = (np.arange(w, dtype=F32) + F32(attrs.offset)) * sw
            cy = (np.arange(h, dtype=F32) + F32(attrs.offset)) * sh
            bw = np.array(attrs.width, F32) / F32(2)
            bh = np.array(attrs.height, F32) / F32(2)
            px = np.broadcast_to(cx[None, :, None], (h, w, n))
            py = np.broadcast_to(cy[:, None, None], (h, w, n))
            box = np.stack([(px - bw) / F32(iw), (py - bh) / F32(ih),
                            (px + bw) / F32(iw), (py + bh) / F32(ih)], axis=-1).astype(F32)
        if attrs.clip:
            box = np.minimum(np.maximum(box, F32(0)), F32(1))
        return (_with_variance(box, attrs.variance, "PriorBoxClustered"),)


# ---------------------------------------------------------------- DetectionOutput

CodeType = Literal["caffe.PriorBoxParameter.CORNER", "caffe.PriorBoxParameter.CENTER_SIZE"]


@dataclass(frozen=True)
class DetectionOutput8Attrs:
    keep_top_k: tuple[int, ...]
    nms_threshold: float
    background_label_id: int = 0
    top_k: int = -1
    variance_encoded_in_target: bool = False
    code_type: CodeType = "caffe.PriorBoxParameter.CORNER"
    share_location: bool = True
    confidence_threshold: float = 0.0
    clip_after_nms: bool = False
    clip_before_nms: bool = False
    decrease_label_id: bool = False
    normalized: bool = False
    input_height: int = 1
    input_width: int = 1
    objectness_score: float = 0.0


@dataclass(frozen=True)
class DetectionOutput1Attrs(DetectionOutput8Attrs):
    num_classes: int = 0
    v1: ClassVar[bool] = True


def _do_layout(attrs, loc: TensorSpec | np.ndarray, conf, priors) -> dict:
    """The sizes DetectionOutput reads from its input shapes (None where not known)."""
    shape = (lambda x: [Dim.of(d) for d in x.shape]) if isinstance(loc, np.ndarray) else \
        (lambda x: list(x.shape) if x.shape is not None else None)
    ls, cs, ps = shape(loc), shape(conf), shape(priors)
    prior_size = 4 if attrs.normalized else 5
    lay = {"N": ls[0] if ls else (cs[0] if cs else Dim(0, None)), "P": None, "C": None}
    if ps is not None and ps[2].is_static:
        if ps[2].value % prior_size:
            fail(f"DetectionOutput's priors dim 2 ({ps[2].value}) must be a multiple of the "
                 f"prior size {prior_size} (normalized={attrs.normalized})")
        lay["P"] = ps[2].value // prior_size
    if getattr(attrs, "v1", False):
        if attrs.num_classes <= 0:
            fail(f"DetectionOutput-1 needs num_classes > 0, got {attrs.num_classes}")
        lay["C"] = attrs.num_classes
    elif cs is not None and cs[1].is_static and lay["P"]:
        if cs[1].value % lay["P"]:
            fail(f"DetectionOutput's class predictions dim 1 ({cs[1].value}) must be a "
                 f"multiple of the {lay['P']} priors")
        lay["C"] = cs[1].value // lay["P"]
    return lay


def _do_rows(attrs, lay) -> Dim:
    n = lay["N"]
    if attrs.keep_top_k[0] > 0:
        return n * Dim.of(attrs.keep_top_k[0])
    if lay["C"] is None:
        return Dim(0, None) if not n.is_static or n.value else Dim.of(0)
    if attrs.top_k > 0:
        return n * Dim.of(attrs.top_k * lay["C"])
    if lay["P"] is None:
        return Dim(0, None)
    return n * Dim.of(lay["C"] * lay["P"])


def _check_do(attrs, loc, conf, priors, arm_conf, arm_loc) -> None:
    if not attrs.keep_top_k:
        fail("DetectionOutput's keep_top_k must have at least one value")
    for name, spec, rank in (("box logits", loc, 2), ("class predictions", conf, 2),
                             ("proposals", priors, 3), ("additional class predictions",
                                                        arm_conf, 2),
                             ("additional box predictions", arm_loc, 2)):
        if spec is None:
            continue
        if not spec.etype.is_float:
            fail(f"DetectionOutput's {name} must be floating-point, got {spec.etype.name}")
        check_rank(spec, (rank,), f"DetectionOutput's {name}")
    if (arm_conf is None) != (arm_loc is None):
        fail("DetectionOutput takes both additional inputs (5 inputs) or neither (3 inputs)")


def _overlaps(a: np.ndarray, sa: np.ndarray, b: np.ndarray, sb: np.ndarray,
              threshold: F32) -> np.ndarray:
    """[G, m, n]: Caffe's JaccardOverlap of each box a[g, i] (the one kept first) with each
    b[g, j] (boxes [G, ., 4] xmin, ymin, xmax, ymax; sizes sa, sb) above threshold. Two boxes
    overlap where the intersection's width and height are both > 0 (Caffe's disjoint test
    never differs from that: a box left of the other gives a width < 0, NaN fails both);
    elsewhere the overlap is 0."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        iw = np.minimum(a[:, :, None, 2], b[:, None, :, 2])
        iw -= np.maximum(a[:, :, None, 0], b[:, None, :, 0])
        ih = np.minimum(a[:, :, None, 3], b[:, None, :, 3])
        ih -= np.maximum(a[:, :, None, 1], b[:, None, :, 1])
        ok = iw > 0
        ok &= ih > 0
        inter = np.multiply(iw, ih, out=iw)
        den = np.add(sa[:, :, None], sb[:, None, :], out=ih)
        den -= inter
        hit = np.divide(inter, den, out=inter) > threshold
    if F32(0) > threshold:          # a negative threshold: boxes that do not overlap too
        return np.logical_or(hit, ~ok, out=hit)
    return np.logical_and(hit, ok, out=hit)


# The greedy suppression settles up to this many candidates of a class at a time...
_NMS_BLOCK = 256
# ... of as many classes at once as keep its [classes, rows, columns] temporaries at about
# this many elements.
_NMS_ELEMENTS = 1 << 20


@functools.cache
def _later(n: int) -> np.ndarray:
    """[n, n]: True where the column comes after the row."""
    return np.triu(np.ones((n, n), bool), 1)


def _greedy_groups(boxes: np.ndarray, group: np.ndarray, rank: np.ndarray, groups: int,
                   width: int, threshold: F32) -> np.ndarray:
    """Caffe's greedy NMS of each group's candidates (group, rank within it: the score order),
    all groups at once: a candidate is kept unless the overlap with a candidate kept before
    it in its group is above threshold. Returns the kept mask over the candidates.

    Each group's candidates wait in a row, in score order. A round takes the first block of
    every row and settles it: keep = alive and not overlapped by a kept one before it,
    iterated from keep = alive (the first t + 1 are right after t steps, each depending only
    on those before it: at most a block's width of steps, as many as the longest chain of
    candidates each suppressing the next, a few on real detections). The block's kept
    candidates then suppress the rest of their row, which closes up. Each round settles a
    block of every row: at most width / block rounds, few where the first kept boxes
    suppress most of the others (crowded detections)."""
    sizes = _box_sizes(boxes)
    keep = np.zeros(group.size, bool)
    block = min(width, max(16, min(_NMS_BLOCK, _NMS_ELEMENTS // width)))
    step = max(1, _NMS_ELEMENTS // (width * block))
    later = _later(block)
    bounds = np.searchsorted(group, np.arange(0, groups + step, step))
    for g0 in range(0, groups, step):
        lo, hi = int(bounds[g0 // step]), int(bounds[g0 // step + 1])
        row = np.full((min(step, groups - g0), width), -1, np.intp)
        row[group[lo:hi] - g0, rank[lo:hi]] = np.arange(lo, hi)
        while True:
            head = row[:, :block]
            n = head.shape[1]
            alive = head >= 0
            at = np.where(alive, head, 0)
            hb, hs = boxes[at], sizes[at]
            over = _overlaps(hb, hs, hb, hs, threshold)
            over &= later[:n, :n]
            over = over.astype(F32)
            x = alive
            for _ in range(n + 1):
                nx = alive & ~(np.matmul(x.astype(F32)[:, None, :], over)[:, 0] > 0)
                if not (nx ^ x).any():
                    break
                x = nx
            keep[head[x]] = True
            rest = row[:, n:]
            live = rest >= 0
            if not live.any():
                break
            kept = x.sum(1)
            k = int(kept.max())
            if k:           # the block's kept candidates, first in their rows, in order
                first = np.take_along_axis(at, np.argsort(~x, axis=1, kind="stable")[:, :k], 1)
                later_at = np.where(live, rest, 0)
                hit = _overlaps(boxes[first], sizes[first], boxes[later_at], sizes[later_at],
                                threshold)
                hit &= (np.arange(k) < kept[:, None])[:, :, None]
                live &= ~hit.any(1)
            r, c = np.nonzero(live)
            row = np.full((rest.shape[0], int(live.sum(1).max(initial=0))), -1, np.intp)
            row[r, (np.cumsum(live, 1) - 1)[r, c]] = rest[r, c]
            if not row.size:
                break
    return keep


def _group_rank(key: np.ndarray) -> np.ndarray:
    """Each element's position among the equal keys before it (key sorted)."""
    first = np.empty(key.size, bool)
    first[:1] = True
    np.not_equal(key[1:], key[:-1], out=first[1:])
    index = np.arange(key.size)
    return index - np.maximum.accumulate(np.where(first, index, 0))


def _do_candidates(attrs, conf: np.ndarray):
    """The NMS candidates of every image and class: (image, class, prior, score) sorted by
    image, class, score descending, prior. Caffe's rule: per class but the background, the
    priors scoring above confidence_threshold, the top_k best. MXNet's (decrease_label_id):
    each prior's best class only (the first best, if above -1 where the reference starts),
    scoring at least confidence_threshold, the top_k best of the image (top_k -1: all;
    otherwise the end of a slice: one below -1 drops that many)."""
    n, num_c, num_p = conf.shape
    thr, bg = F32(attrs.confidence_threshold), attrs.background_label_id
    if not attrs.decrease_label_id:
        mask = conf > thr
        if 0 <= bg < num_c:
            mask[:, bg] = False
        flat = np.flatnonzero(mask)
        score = conf.reshape(-1)[flat]
        order = np.lexsort((-score, flat // num_p))     # stable: priors ascending
        key, prior = np.divmod(flat[order], num_p)
        score = score[order]
        if attrs.top_k > -1:
            sel = _group_rank(key) < attrs.top_k
            key, prior, score = key[sel], prior[sel], score[sel]
        return key // num_c, key % num_c, prior, score
    cand = np.arange(1, num_c)
    if bg > -1:
        cand = cand[cand != bg]
    if not cand.size:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, np.zeros(0, F32)
    sub = conf[:, cand]                                                  # [N, C', P]
    best = np.argmax(sub, axis=1)                                        # first maximum
    best_score = np.take_along_axis(sub, best[:, None], 1)[:, 0]
    has = (best_score > F32(-1)) & (best_score >= thr)
    flat = np.flatnonzero(has)
    score = best_score.reshape(-1)[flat]
    order = np.lexsort((-score, flat // num_p))
    image, prior = np.divmod(flat[order], num_p)
    score = score[order]
    if attrs.top_k != -1:
        rank = _group_rank(image)
        if attrs.top_k >= 0:
            sel = rank < attrs.top_k
        else:                   # a negative top_k other than -1 drops that many (a slice)
            count = np.bincount(image, minlength=n)
            sel = rank < count[image] + attrs.top_k
        image, prior, score = image[sel], prior[sel], score[sel]
    label = cand[best.reshape(-1)[image * num_p + prior]]
    order = np.argsort(image * num_c + label, kind="stable")
    return image[order], label[order], prior[order], score[order]


def _box_sizes(boxes: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        s = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return np.where((boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1]), F32(0), s).astype(F32)


def _decode(attrs, priors: np.ndarray, variances, loc: np.ndarray) -> np.ndarray:
    """[P, 4] predicted offsets relative to [P, 4] prior boxes -> [P, 4] boxes (f32)."""
    p = priors
    if not attrs.normalized:
        p = p / np.array([attrs.input_width, attrs.input_height] * 2, F32)
    v = np.ones((1, 4), F32) if variances is None else variances
    if attrs.code_type == "caffe.PriorBoxParameter.CORNER":
        out = p + v * loc
    else:
        pw, ph = p[:, 2] - p[:, 0], p[:, 3] - p[:, 1]
        pcx, pcy = (p[:, 0] + p[:, 2]) / F32(2), (p[:, 1] + p[:, 3]) / F32(2)
        with np.errstate(over="ignore", invalid="ignore"):
            cx = v[:, 0] * loc[:, 0] * pw + pcx
            cy = v[:, 1] * loc[:, 1] * ph + pcy
            w = np.exp(v[:, 2] * loc[:, 2]) * pw
            h = np.exp(v[:, 3] * loc[:, 3]) * ph
        out = np.stack([cx - w / F32(2), cy - h / F32(2), cx + w / F32(2), cy + h / F32(2)], 1)
    out = out.astype(F32)
    if attrs.clip_before_nms:
        out = np.clip(out, F32(0), F32(1))
    return out


def _detection_output(attrs, loc, conf, priors, arm_conf=None, arm_loc=None) -> np.ndarray:
    lay = _do_layout(attrs, loc, conf, priors)
    n, num_p, num_c = loc.shape[0], lay["P"], lay["C"]
    if not num_p or num_c is None:
        fail(f"DetectionOutput needs at least one prior and a class count, got proposals "
             f"{list(priors.shape)} and class predictions {list(conf.shape)}")
    num_lc = 1 if attrs.share_location else num_c
    if loc.shape[1] != num_p * num_lc * 4:
        fail(f"DetectionOutput's box logits must have shape [N, {num_p * num_lc * 4}] "
             f"(priors x loc classes x 4), got {list(loc.shape)}")
    if conf.shape != (n, num_p * num_c):
        fail(f"DetectionOutput's class predictions must have shape [{n}, {num_p * num_c}], "
             f"got {list(conf.shape)}")
    pb = priors.shape[0]
    if pb not in (1, n) or priors.shape[1] != (1 if attrs.variance_encoded_in_target else 2):
        fail(f"DetectionOutput's proposals must have shape [1 or {n}, "
             f"{1 if attrs.variance_encoded_in_target else 2}, {priors.shape[2]}], got "
             f"{list(priors.shape)}")
    with_arm = arm_conf is not None
    if with_arm and (arm_conf.shape != (n, num_p * 2) or arm_loc.shape != loc.shape):
        fail(f"DetectionOutput's additional inputs must have shapes [{n}, {num_p * 2}] and "
             f"{list(loc.shape)}, got {list(arm_conf.shape)} and {list(arm_loc.shape)}")
    rows = _do_rows(attrs, {"N": Dim.of(n), "P": num_p, "C": num_c}).value
    check_alloc([rows, 7], F32, "DetectionOutput's output")
    psize = 4 if attrs.normalized else 5
    f = lambda x: np.asarray(x, F32)
    conf = f(conf).reshape(n, num_p, num_c).transpose(0, 2, 1)             # [N, C, P]
    pri = f(priors)
    pboxes = pri[:, 0, :num_p * psize].reshape(pb, num_p, psize)[..., psize - 4:]
    # Variances follow the boxes, 4 per prior even for 5-value priors (as the reference reads).
    flat = pri.reshape(pb, -1)
    pvars = None if attrs.variance_encoded_in_target else \
        flat[:, num_p * psize:num_p * psize + num_p * 4].reshape(pb, num_p, 4)
    if with_arm:
        low = f(arm_conf).reshape(n, num_p, 2)[:, :, 1] < F32(attrs.objectness_score)  # [N, P]
        bg = (np.arange(num_c) == attrs.background_label_id).astype(F32)            # [C]
        conf = np.where(low[:, None, :], bg[None, :, None], conf)
    image, label, prior, score = _do_candidates(attrs, np.ascontiguousarray(conf))
    # Each candidate's box: its prior (refined by the ARM offsets first, in a cascade)
    # decoded by its class's offsets (the one set with share_location).
    lc = 0 if attrs.share_location else label
    k = 0 if pb == 1 else image
    var = None if pvars is None else pvars[k, prior]
    base = pboxes[k, prior]
    if with_arm:
        base = _decode(attrs, base, var, f(arm_loc).reshape(n, num_p, num_lc, 4)[image, prior, lc])
    boxes = _decode(attrs, base, var, f(loc).reshape(n, num_p, num_lc, 4)[image, prior, lc])
    group = image * num_c + label
    rank = _group_rank(group)
    if group.size:
        gid = np.cumsum(rank == 0) - 1
        keep = _greedy_groups(boxes, gid, rank, int(gid[-1]) + 1, int(rank.max()) + 1,
                              F32(attrs.nms_threshold))
        image, label, prior, score, boxes = (a[keep] for a in (image, label, prior, score, boxes))
    if attrs.keep_top_k[0] > -1:
        # the keep_top_k best of each image over all classes: score descending, then prior
        # index; equal both: label order (the reference's std::sort leaves that open)
        order = np.lexsort((label, prior, -score, image))
        keep = np.empty(image.size, bool)
        keep[order] = _group_rank(image[order]) < attrs.keep_top_k[0]
        image, label, prior, score, boxes = (a[keep] for a in (image, label, prior, score, boxes))
    # the rows: by image, label, score descending, prior (the candidates' order)
    m = min(image.size, rows)          # cannot be short for a valid output shape
    out = np.zeros((rows, 7), F32)
    out[:m, 0] = image[:m]
    out[:m, 1] = label[:m] - 1 if attrs.decrease_label_id else label[:m]
    out[:m, 2] = score[:m]
    out[:m, 3:] = np.clip(boxes[:m], F32(0), F32(1)) if attrs.clip_after_nms else boxes[:m]
    if m < rows:
        out[m, 0] = -1
    return out.reshape(1, 1, rows, 7)


@register("DetectionOutput", since=(1, 8), attrs=(DetectionOutput1Attrs, DetectionOutput8Attrs),
          category="detection")
class DetectionOutput1:
    @staticmethod
    def infer(attrs, box_logits: TensorSpec, class_preds: TensorSpec, proposals: TensorSpec,
              aux_class_preds=None, aux_box_preds=None) -> list[TensorSpec]:
        _check_do(attrs, box_logits, class_preds, proposals, aux_class_preds, aux_box_preds)
        lay = _do_layout(attrs, box_logits, class_preds, proposals)
        return [TensorSpec(box_logits.etype, (Dim.of(1), Dim.of(1), _do_rows(attrs, lay),
                                              Dim.of(7)))]

    @staticmethod
    def run(attrs, box_logits, class_preds, proposals, aux_class_preds=None,
            aux_box_preds=None) -> tuple[np.ndarray]:
        out = _detection_output(attrs, box_logits, class_preds, proposals, aux_class_preds,
                                aux_box_preds)
        return (out.astype(box_logits.dtype),)


# ---------------------------------------------------------------- ROIAlign, ROIPooling


@dataclass(frozen=True)
class ROIAlign3Attrs:
    pooled_h: int
    pooled_w: int
    sampling_ratio: int
    spatial_scale: float
    mode: Literal["avg", "max"]
    aligned_mode: ClassVar[str] = "asymmetric"


@dataclass(frozen=True)
class ROIAlign9Attrs:
    pooled_h: int
    pooled_w: int
    sampling_ratio: int
    spatial_scale: float
    mode: Literal["avg", "max"]
    aligned_mode: Literal["asymmetric", "half_pixel_for_nn", "half_pixel"] = "asymmetric"


def _roi_out_spec(name, attrs, data: TensorSpec, rois: TensorSpec, roi_cols: int) -> TensorSpec:
    if not data.etype.is_float or not rois.etype.is_float:
        fail(f"{name} takes floating-point feature maps and boxes, got {data.etype.name} and "
             f"{rois.etype.name}")
    check_rank(data, (4,), f"{name}'s feature maps")
    check_rank(rois, (2,), f"{name}'s boxes")
    if rois.rank == 2 and not rois.shape[1].compatible(Dim.of(roi_cols)):
        fail(f"{name}'s boxes must have shape [NUM_ROIS, {roi_cols}], got {rois}")
    if attrs.pooled_h <= 0 or attrs.pooled_w <= 0:
        fail(f"{name}'s pooled_h and pooled_w must be positive, got {attrs.pooled_h} and "
             f"{attrs.pooled_w}")
    n = rois.shape[0] if rois.shape else Dim(0, None)
    c = data.shape[1] if data.shape else Dim(0, None)
    return TensorSpec(data.etype, (n, c, Dim.of(attrs.pooled_h), Dim.of(attrs.pooled_w)))


def _check_batch_ids(ids: np.ndarray, n: int, what: str) -> None:
    bad = np.flatnonzero((ids < 0) | (ids >= n))
    if bad.size:
        fail(f"{what}[{bad[0]}] = {ids[bad[0]]} is outside [0, {n - 1}] (the feature maps' "
             f"batch)")


def _roi_align_infer(name, attrs, data: TensorSpec, rois: TensorSpec,
                     batch_indices: TensorSpec, roi_cols: int) -> list[TensorSpec]:
    """The shape rule ROIAlign and ROIAlignRotated share (boxes of `roi_cols` numbers and a
    batch index per box)."""
    out = _roi_out_spec(name, attrs, data, rois, roi_cols)
    check_integer(batch_indices, f"{name}'s batch_indices")
    check_rank(batch_indices, (1,), f"{name}'s batch_indices")
    if attrs.sampling_ratio < 0 or not 0 < attrs.spatial_scale < np.inf:     # (NaN too)
        fail(f"{name} needs sampling_ratio >= 0 and a finite spatial_scale > 0, got "
             f"{attrs.sampling_ratio} and {attrs.spatial_scale}", code="value")
    if batch_indices.shape and out.shape[0].merge(batch_indices.shape[0]) is None:
        fail(f"{name}'s batch_indices {batch_indices} must have one entry per box {rois}")
    return [out]


def _check_roi_batch_indices(name, batch_indices: np.ndarray, rois: np.ndarray, n: int) -> None:
    r = rois.shape[0]
    if batch_indices.shape != (r,):
        fail(f"{name}'s batch_indices must have shape [{r}], got {list(batch_indices.shape)}")
    _check_batch_ids(batch_indices, n, f"{name}'s batch_indices")


@register("ROIAlign", since=(3, 9), attrs=(ROIAlign3Attrs, ROIAlign9Attrs), category="detection")
class ROIAlign3:
    @staticmethod
    def infer(attrs, data: TensorSpec, rois: TensorSpec, batch_indices: TensorSpec) -> list[TensorSpec]:
        return _roi_align_infer("ROIAlign", attrs, data, rois, batch_indices, 4)

    @staticmethod
    def run(attrs, data, rois, batch_indices) -> tuple[np.ndarray]:
        n, c = data.shape[:2]
        r = rois.shape[0]
        _check_roi_batch_indices("ROIAlign", batch_indices, rois, n)
        ph, pw = attrs.pooled_h, attrs.pooled_w
        check_alloc([r, c, ph, pw], data.dtype, "ROIAlign's output")
        fm = data.astype(F32, copy=False)       # read only
        box = rois.astype(F32)
        src, dst = {"asymmetric": (0.0, 0.0), "half_pixel_for_nn": (0.0, -0.5),
                    "half_pixel": (0.5, -0.5)}[attrs.aligned_mode]
        box = (box + F32(src)) * F32(attrs.spatial_scale) + F32(dst)
        rw, rh = box[:, 2] - box[:, 0], box[:, 3] - box[:, 1]
        if attrs.aligned_mode == "asymmetric":
            rw, rh = np.maximum(rw, F32(1)), np.maximum(rh, F32(1))
        bw, bh = rw / F32(pw), rh / F32(ph)
        if attrs.sampling_ratio:
            sx = sy = np.full(r, attrs.sampling_ratio, np.int64)
        else:
            bad = np.flatnonzero(~(np.isfinite(bw) & np.isfinite(bh)))
            if bad.size:
                fail(f"ROIAlign's box {bad[0]} {rois[bad[0]].tolist()} has no finite size: "
                     "sampling_ratio 0 takes the samples per bin from it")
            # (clipped before the cast: a box too large for int64 fails check_alloc below)
            sx = np.minimum(np.ceil(bw), F32(2 ** 31)).astype(np.int64)
            sy = np.minimum(np.ceil(bh), F32(2 ** 31)).astype(np.int64)
        if r:
            most = int(np.argmax(np.maximum(sx, 0) * np.maximum(sy, 0)))
            # the loop's table of one box's samples: four corner offsets (i64) and weights
            check_alloc([ph * max(int(sy[most]), 0), pw * max(int(sx[most]), 0), 12], F32,
                        "ROIAlign's samples of one box")
        # The compiled loop (ops/roi_align_loop.py): each box's samples and blend in f32,
        # in the reference's order (no samples in a bin: 0, as the reference).
        from .roi_align_loop import roi_align

        out = roi_align(fm, box, batch_indices.astype(np.int64), bw, bh, sx, sy, ph, pw,
                        attrs.mode == "max")
        return (out.astype(data.dtype),)


@dataclass(frozen=True)
class ROIPoolingAttrs:
    pooled_h: int
    pooled_w: int
    spatial_scale: float
    method: Literal["max", "bilinear"] = "max"
    # OpenVINO's serializer also writes the output size as output_size="h, w" and
    # output_roi="h, w" (names of its C++ fields). Its reader takes output_size, then
    # output_roi, then pooled_h and pooled_w, each replacing the one before: with the
    # spec's required pooled_h/pooled_w present, these two never decide anything.
    output_size: tuple[int, ...] | None = None
    output_roi: tuple[int, ...] | None = None


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _bin_max(f: np.ndarray, y0, y1, x0, x1) -> np.ndarray:
    """[C, len(y0), len(x0)]: the max of f [C, H, W] over each bin [y0, y1) x [x0, x1) (edges
    inside [0, H] and [0, W]), 0 for an empty bin. Two np.maximum.reduceat passes, the axis
    that leaves the smaller intermediate first; a -inf row and column past the end let an
    edge be H or W."""
    c, h, w = f.shape
    if not (h and w and len(y0) and len(x0)):
        return np.zeros((c, len(y0), len(x0)), F32)
    pad = np.full((c, h + 1, w + 1), -np.inf, F32)
    pad[:, :h, :w] = f

    def reduce(a, lo, hi, axis):
        return np.maximum.reduceat(a, np.stack([lo, hi], 1).reshape(-1), axis=axis).take(
            np.arange(0, 2 * len(lo), 2), axis=axis)

    if len(y0) * (w + 1) <= (h + 1) * len(x0):
        check_alloc([c, 2 * len(y0), w + 1], F32, "ROIPooling's bins")
        m = reduce(reduce(pad, y0, y1, 1), x0, x1, 2)
    else:
        check_alloc([c, h + 1, 2 * len(x0)], F32, "ROIPooling's bins")
        m = reduce(reduce(pad, x0, x1, 2), y0, y1, 1)
    full = (y1 > y0)[:, None] & (x1 > x0)[None, :]
    return np.where(full, m, F32(0)).astype(F32)


@register("ROIPooling", since=2, attrs=ROIPoolingAttrs, category="detection")
class ROIPooling2:
    @staticmethod
    def infer(attrs, data: TensorSpec, rois: TensorSpec) -> list[TensorSpec]:
        if attrs.spatial_scale <= 0:
            fail(f"ROIPooling's spatial_scale must be positive, got {attrs.spatial_scale}")
        return [_roi_out_spec("ROIPooling", attrs, data, rois, 5)]

    @staticmethod
    def run(attrs, data, rois) -> tuple[np.ndarray]:
        n, c, h, w = data.shape
        r = rois.shape[0]
        ph, pw = attrs.pooled_h, attrs.pooled_w
        check_alloc([r, c, ph, pw], data.dtype, "ROIPooling's output")
        fm = data.astype(F32)
        box = rois.astype(F32)
        ids = np.trunc(box[:, 0]).astype(np.int64) if r else np.zeros(0, np.int64)
        _check_batch_ids(ids, n, "ROIPooling's boxes[:, 0] (batch id) at box")
        out = np.zeros((r, c, ph, pw), F32)
        if attrs.method == "max":
            q = _round_half_away(box[:, 1:] * F32(attrs.spatial_scale)).astype(np.int64)
            for i in range(r):
                ws, hs, we, he = q[i]
                bh = F32(max(he - hs + 1, 1)) / F32(ph)
                bw = F32(max(we - ws + 1, 1)) / F32(pw)
                y0 = np.clip(np.floor(np.arange(ph, dtype=F32) * bh).astype(np.int64) + hs, 0, h)
                y1 = np.clip(np.ceil(np.arange(1, ph + 1, dtype=F32) * bh).astype(np.int64) + hs, 0, h)
                x0 = np.clip(np.floor(np.arange(pw, dtype=F32) * bw).astype(np.int64) + ws, 0, w)
                x1 = np.clip(np.ceil(np.arange(1, pw + 1, dtype=F32) * bw).astype(np.int64) + ws, 0, w)
                out[i] = _bin_max(fm[ids[i]], y0, y1, x0, x1)
        elif h and w:        # (a map of no pixels: every bilinear sample is outside it, 0)
            x1, y1, x2, y2 = (box[:, k] for k in range(1, 5))
            rh, rw = (y2 - y1) * F32(h - 1), (x2 - x1) * F32(w - 1)
            sh = rh / F32(ph - 1) if ph > 1 else np.zeros(r, F32)
            sw = rw / F32(pw - 1) if pw > 1 else np.zeros(r, F32)
            a = np.arange(ph, dtype=F32)[None, :]
            b = np.arange(pw, dtype=F32)[None, :]
            if ph > 1:
                iy = np.where(a == ph - 1, F32(h - 1) * y2[:, None], a * sh[:, None] + y1[:, None] * F32(h - 1))
            else:
                iy = (F32(0.5) * (y1 + y2) * F32(h - 1))[:, None]
            if pw > 1:
                ix = np.where(b == pw - 1, F32(w - 1) * x2[:, None], b * sw[:, None] + x1[:, None] * F32(w - 1))
            else:
                ix = (F32(0.5) * (x1 + x2) * F32(w - 1))[:, None]
            iy, ix = iy.astype(F32), ix.astype(F32)                          # [R, ph], [R, pw]
            vy = (iy >= 0) & (iy <= F32(h - 1))
            vx = (ix >= 0) & (ix <= F32(w - 1))
            top = np.floor(np.where(vy, iy, 0)).astype(np.int64)
            bot = np.minimum(np.ceil(np.where(vy, iy, 0)).astype(np.int64), h - 1)
            left = np.floor(np.where(vx, ix, 0)).astype(np.int64)
            right = np.minimum(np.ceil(np.where(vx, ix, 0)).astype(np.int64), w - 1)
            fy = (iy - top).astype(F32)[:, None, :, None]
            fx = (ix - left).astype(F32)[:, None, None, :]
            bi = ids[:, None, None, None]
            ch = np.arange(c)[None, :, None, None]
            g = lambda yy, xx: fm[bi, ch, yy[:, None, :, None], xx[:, None, None, :]]
            tl, tr, bl, br = g(top, left), g(top, right), g(bot, left), g(bot, right)
            t = tl + (tr - tl) * fx
            bo = bl + (br - bl) * fx
            val = t + (bo - t) * fy
            out = np.where(vy[:, None, :, None] & vx[:, None, None, :], val, F32(0)).astype(F32)
        return (out.astype(data.dtype),)


# ---------------------------------------------------------------- RegionYolo, ReorgYolo


@dataclass(frozen=True)
class RegionYoloAttrs:
    axis: int
    coords: int
    classes: int
    end_axis: int
    num: int
    anchors: tuple[float, ...] = ()
    do_softmax: bool = True
    mask: tuple[int, ...] = ()


def _region_axes(attrs, rank: int) -> tuple[int, int]:
    axis = attrs.axis + rank if attrs.axis < 0 else attrs.axis
    end = attrs.end_axis + rank if attrs.end_axis < 0 else attrs.end_axis
    if not (0 <= axis < rank and 0 <= end < rank and axis <= end):
        fail(f"RegionYolo's axis {attrs.axis} and end_axis {attrs.end_axis} must name a range of "
             f"the input's {rank} axes")
    return axis, end


def _region_channels(attrs) -> int:
    regions = attrs.num if attrs.do_softmax else len(attrs.mask)
    return (attrs.coords + attrs.classes + 1) * regions


@register("RegionYolo", since=1, attrs=RegionYoloAttrs, category="detection")
class RegionYolo1:
    @staticmethod
    def infer(attrs, data: TensorSpec) -> list[TensorSpec]:
        if not data.etype.is_float:
            fail(f"RegionYolo takes a floating-point tensor, got {data.etype.name}")
        check_rank(data, (4,), "RegionYolo's input")
        if attrs.coords < 2 or attrs.classes < 0 or attrs.num < 0:
            fail(f"RegionYolo needs coords >= 2 and non-negative classes and num, got coords="
                 f"{attrs.coords}, classes={attrs.classes}, num={attrs.num}")
        need = _region_channels(attrs)
        if data.shape is not None and data.shape[1].hi is not None and data.shape[1].hi < need:
            fail(f"RegionYolo's input needs at least (coords + classes + 1) * regions = {need} "
                 f"channels, got {data}")
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        if not attrs.do_softmax:
            return [TensorSpec(data.etype, (data.shape[0], Dim.of(need), data.shape[2], data.shape[3]))]
        axis, end = _region_axes(attrs, 4)
        flat = Dim.of(1)
        for d in data.shape[axis:end + 1]:
            flat = flat * d
        return [TensorSpec(data.etype, data.shape[:axis] + (flat,) + data.shape[end + 1:])]

    @staticmethod
    def run(attrs, data) -> tuple[np.ndarray]:
        n, c, h, w = data.shape
        need = _region_channels(attrs)
        if c < need:
            fail(f"RegionYolo's input needs {need} channels, got {c}")
        regions = attrs.num if attrs.do_softmax else len(attrs.mask)
        k = attrs.coords + attrs.classes + 1
        x = data.astype(F32)
        src = x[:, :need].reshape(n, regions, k, h, w)
        out = src.copy()
        sig = lambda v: (F32(1) / (F32(1) + np.exp(-v))).astype(F32)
        with np.errstate(over="ignore"):
            out[:, :, :2] = sig(src[:, :, :2])                          # x, y
            if attrs.do_softmax:   # objectness sigmoid, class scores softmax
                out[:, :, attrs.coords] = sig(src[:, :, attrs.coords])
                cls = src[:, :, attrs.coords + 1:]
                # (initial: classes=0 leaves no score to take the max of)
                e = np.exp(cls - cls.max(axis=2, keepdims=True, initial=-np.inf))
                out[:, :, attrs.coords + 1:] = e / e.sum(axis=2, keepdims=True, dtype=F32)
            else:                  # YOLOv3: objectness and every class through a sigmoid
                out[:, :, attrs.coords:] = sig(src[:, :, attrs.coords:])
        out = out.reshape(n, need, h, w)
        if attrs.do_softmax:
            full = x.copy()        # channels past the regions pass through
            full[:, :need] = out
            axis, end = _region_axes(attrs, 4)
            shape = full.shape[:axis] + (int(np.prod(full.shape[axis:end + 1])),) + full.shape[end + 1:]
            out = full.reshape(shape)
        return (out.astype(data.dtype),)


@dataclass(frozen=True)
class ReorgYoloAttrs:
    stride: tuple[int, ...]


@register("ReorgYolo", since=2, attrs=ReorgYoloAttrs, category="detection")
class ReorgYolo2:
    @staticmethod
    def infer(attrs, data: TensorSpec) -> list[TensorSpec]:
        check_rank(data, (4,), "ReorgYolo's input")
        s = ReorgYolo2._stride(attrs)
        if data.shape is None:
            return [TensorSpec(data.etype, None)]
        n, c, h, w = data.shape
        for name, d in (("height", h), ("width", w)):
            if d.is_static and d.value % s:
                fail(f"ReorgYolo's input {name} ({d.value}) must be a multiple of the stride {s}")
        if c.is_static and (c.value < s * s or c.value % (s * s)):
            fail(f"ReorgYolo needs a multiple of stride * stride = {s * s} channels, got {data}")
        div = lambda d: Dim(d.lo // s, None if d.hi is None else d.hi // s)
        return [TensorSpec(data.etype, (n, c * Dim.of(s * s), div(h), div(w)))]

    @staticmethod
    def _stride(attrs) -> int:
        if len(attrs.stride) not in (1, 2) or len(set(attrs.stride)) != 1 or attrs.stride[0] <= 0:
            fail(f"ReorgYolo's stride must be one positive value (or two equal ones), got "
                 f"{list(attrs.stride)}")
        return attrs.stride[0]

    @staticmethod
    def run(attrs, data) -> tuple[np.ndarray]:
        s = ReorgYolo2._stride(attrs)
        n, c, h, w = data.shape
        if h % s or w % s or c % (s * s):
            fail(f"ReorgYolo with stride {s} needs height and width multiples of it and channels "
                 f"a multiple of {s * s}, got {list(data.shape)}")
        # OpenVINO's reference (and CPU plugin) read the input as [N, C / s^2, H s, W s] and
        # write [N, C, H, W] positions, the output being that buffer as [N, C s^2, H / s, W / s]:
        # y[n, (i * s + j) * C / s^2 + k, h, w] = x_as[n, k, h * s + i, w * s + j].
        c2 = c // (s * s)
        x = data.reshape(n, c2, h, s, w, s).transpose(0, 3, 5, 1, 2, 4)
        return (np.ascontiguousarray(x).reshape(n, c * s * s, h // s, w // s),)


# ---------------------------------------------------------------- Proposal


@dataclass(frozen=True)
class Proposal1Attrs:
    base_size: int
    pre_nms_topn: int
    post_nms_topn: int
    nms_thresh: float
    feat_stride: int
    min_size: int
    ratio: tuple[float, ...]
    scale: tuple[float, ...]
    clip_before_nms: bool = True
    clip_after_nms: bool = False
    normalize: bool = False
    box_size_scale: float = 1.0
    box_coordinate_scale: float = 1.0
    framework: str = ""
    with_probs: ClassVar[bool] = False


@dataclass(frozen=True)
class Proposal4Attrs(Proposal1Attrs):
    with_probs: ClassVar[bool] = True


def _proposal_anchors(attrs) -> np.ndarray:
    """[A, 4] anchors (x0, y0, x1, y1), ratio-major, as OpenVINO's reference generates them."""
    tf = attrs.framework == "tensorflow"
    off = F32(0) if tf else F32(1)
    base = F32(attrs.base_size)
    center = F32(0.5) * (base - off)
    rows = []
    for r in attrs.ratio:
        w = np.sqrt(base * base / F32(r))
        if not tf:
            w = F32(np.floor(abs(w) + F32(0.5)) * np.sign(w))     # roundf: half away from 0
            h = F32(np.floor(abs(w * F32(r)) + F32(0.5)))
        else:
            h = w * F32(r)
        for s in attrs.scale:
            sw = F32(0.5) * (w * F32(s) - off)
            sh = F32(0.5) * (h * F32(s) - off)
            box = [center - sw, center - sh, center + sw, center + sh]
            if tf:
                box = [v - base * F32(0.5) for v in box]
            rows.append(box)
    return np.array(rows, F32).reshape(-1, 4)


def _check_proposal(attrs) -> None:
    if attrs.pre_nms_topn <= 0 or attrs.post_nms_topn <= 0 or attrs.base_size <= 0 or \
            attrs.feat_stride <= 0:
        fail(f"Proposal needs positive base_size, feat_stride, pre_nms_topn and post_nms_topn, "
             f"got {attrs.base_size}, {attrs.feat_stride}, {attrs.pre_nms_topn}, "
             f"{attrs.post_nms_topn}")
    if not attrs.ratio or not attrs.scale:
        fail("Proposal needs at least one ratio and one scale")
    if attrs.framework not in ("", "caffe", "tensorflow"):
        fail(f"Proposal's framework must be '' (Caffe), 'caffe' or 'tensorflow', got "
             f"'{attrs.framework}'")


@register("Proposal", since=(1, 4), attrs=(Proposal1Attrs, Proposal4Attrs), category="detection")
class Proposal1:
    @staticmethod
    def infer(attrs, class_probs: TensorSpec, bbox_deltas: TensorSpec,
              image_shape: TensorSpec) -> list[TensorSpec]:
        _check_proposal(attrs)
        for name, spec in (("class_probs", class_probs), ("bbox_deltas", bbox_deltas),
                           ("image_shape", image_shape)):
            if not spec.etype.is_float:
                fail(f"Proposal's {name} must be floating-point, got {spec.etype.name}")
        check_rank(class_probs, (4,), "Proposal's class_probs")
        check_rank(bbox_deltas, (4,), "Proposal's bbox_deltas")
        check_rank(image_shape, (1,), "Proposal's image_shape")
        if image_shape.rank == 1 and image_shape.shape[0].is_static and \
                image_shape.shape[0].value not in (3, 4):
            fail(f"Proposal's image_shape must have 3 or 4 elements, got {image_shape}")
        a = len(attrs.ratio) * len(attrs.scale)
        if class_probs.shape and class_probs.shape[1].is_static and \
                class_probs.shape[1].value != 2 * a:
            fail(f"Proposal's class_probs must have 2 * {a} anchors' channels (ratios x scales), "
                 f"got {class_probs}")
        n = class_probs.shape[0] if class_probs.shape else \
            (bbox_deltas.shape[0] if bbox_deltas.shape else Dim(0, None))
        rows = n * Dim.of(attrs.post_nms_topn)
        out = [TensorSpec(class_probs.etype, (rows, Dim.of(5)))]
        if attrs.with_probs:
            out.append(TensorSpec(class_probs.etype, (rows,)))
        return out

    @staticmethod
    def run(attrs, class_probs, bbox_deltas, image_shape) -> tuple[np.ndarray, ...]:
        _check_proposal(attrs)
        n, c2, fh, fw = class_probs.shape
        anchors = _proposal_anchors(attrs)
        a = anchors.shape[0]
        if c2 != 2 * a or bbox_deltas.shape != (n, 4 * a, fh, fw):
            fail(f"Proposal's class_probs {list(class_probs.shape)} and bbox_deltas "
                 f"{list(bbox_deltas.shape)} must be [N, 2 * {a}, H, W] and [N, 4 * {a}, H, W]")
        info = np.asarray(image_shape, F32).reshape(-1)
        if info.size not in (3, 4):
            fail(f"Proposal's image_shape must have 3 or 4 elements, got {info.size}")
        img_h, img_w, sh = info[0], info[1], info[2]
        if not (img_h > 0 and img_w > 0):
            fail(f"Proposal's image_shape must give a positive image height and width, got "
                 f"{float(img_h)} and {float(img_w)}")
        sw = info[3] if info.size == 4 else sh
        min_h, min_w = F32(attrs.min_size) * sh, F32(attrs.min_size) * sw
        tf = attrs.framework == "tensorflow"
        off = F32(0) if tf else F32(1)
        if tf:
            # TensorFlow's layout runs x over the feature map's rows; OpenVINO's CPU plugin
            # then bounds x by the image height and y by its width (the reference does not
            # swap the bounds, mixing the two); irrun follows the plugin
            img_h, img_w = img_w, img_h
        post = attrs.post_nms_topn
        check_alloc([n * post, 5], F32, "Proposal's output")
        total = a * fh * fw
        pre = min(total, attrs.pre_nms_topn)
        rois = np.zeros((n, post, 5), F32)
        probs = np.zeros((n, post), F32)
        hh, ww = np.meshgrid(np.arange(fh), np.arange(fw), indexing="ij")
        gx, gy = (hh, ww) if tf else (ww, hh)      # TensorFlow's layout swaps x and y
        gx = (gx * attrs.feat_stride).astype(F32)[..., None]           # [H, W, 1]
        gy = (gy * attrs.feat_stride).astype(F32)[..., None]
        with np.errstate(over="ignore", invalid="ignore"):
            for b in range(n):
                d = bbox_deltas[b].astype(F32).reshape(a, 4, fh, fw).transpose(2, 3, 0, 1)
                score = class_probs[b, a:].astype(F32).transpose(1, 2, 0)   # [H, W, A]
                x0, y0 = gx + anchors[:, 0], gy + anchors[:, 1]
                x1, y1 = gx + anchors[:, 2], gy + anchors[:, 3]
                if tf:
                    x0, x1 = np.clip(x0, 0, img_w), np.clip(x1, 0, img_w)
                    y0, y1 = np.clip(y0, 0, img_h), np.clip(y1, 0, img_h)
                bw, bh = x1 - x0 + off, y1 - y0 + off
                cx, cy = x0 + F32(0.5) * bw, y0 + F32(0.5) * bh
                dx = d[..., 0] / F32(attrs.box_coordinate_scale)
                dy = d[..., 1] / F32(attrs.box_coordinate_scale)
                dw = d[..., 2] / F32(attrs.box_size_scale)
                dh = d[..., 3] / F32(attrs.box_size_scale)
                pcx, pcy = dx * bw + cx, dy * bh + cy
                pw, ph = np.exp(dw) * bw, np.exp(dh) * bh
                x0, y0 = pcx - F32(0.5) * pw, pcy - F32(0.5) * ph
                x1, y1 = pcx + F32(0.5) * pw, pcy + F32(0.5) * ph
                if attrs.clip_before_nms:
                    x0, x1 = (np.maximum(F32(0), np.minimum(v, img_w - off)) for v in (x0, x1))
                    y0, y1 = (np.maximum(F32(0), np.minimum(v, img_h - off)) for v in (y0, y1))
                keep = (min_w <= x1 - x0 + off) & (min_h <= y1 - y0 + off)
                boxes = np.stack([x0, y0, x1, y1], -1).astype(F32).reshape(-1, 4)
                sc = (keep.astype(F32) * score).astype(F32).reshape(-1)
                # the pre_nms_topn best; equal scores by proposal index (the reference's
                # partial_sort leaves them open)
                order = np.argsort(-sc, kind="stable")[:pre]
                kept = _proposal_nms(boxes[order], F32(attrs.nms_thresh), post, off)
                sel = order[kept]
                k = sel.size
                bx = boxes[sel]
                if attrs.clip_after_nms:
                    bx = np.maximum(F32(0), np.minimum(bx, np.array([img_w, img_h, img_w, img_h], F32)))
                if attrs.normalize:
                    bx = bx / np.array([img_w, img_h, img_w, img_h], F32)
                rois[b, :k, 0] = b
                rois[b, :k, 1:] = bx
                probs[b, :k] = sc[sel]
                if k < post:
                    rois[b, k, 0] = -1
        out = (rois.reshape(n * post, 5).astype(class_probs.dtype),)
        if attrs.with_probs:
            out += (probs.reshape(n * post).astype(class_probs.dtype),)
        return out


def _proposal_nms(boxes: np.ndarray, thresh: F32, limit: int, off: F32) -> np.ndarray:
    """Greedy NMS in score order: positions kept (at most `limit`); IoU > thresh suppresses."""
    kept, alive = [], np.arange(boxes.shape[0])
    area = (boxes[:, 2] - boxes[:, 0] + off) * (boxes[:, 3] - boxes[:, 1] + off)
    while alive.size and len(kept) < limit:
        i = int(alive[0])
        kept.append(i)
        rest = alive[1:]
        o = boxes[rest]
        b = boxes[i]
        overlap = (b[0] <= o[:, 2]) & (b[1] <= o[:, 3]) & (o[:, 0] <= b[2]) & (o[:, 1] <= b[3])
        w = np.maximum(F32(0), np.minimum(b[2], o[:, 2]) - np.maximum(b[0], o[:, 0]) + off)
        h = np.maximum(F32(0), np.minimum(b[3], o[:, 3]) - np.maximum(b[1], o[:, 1]) + off)
        inter = w * h
        with np.errstate(invalid="ignore", divide="ignore"):
            iou = np.where(overlap, inter / (area[i] + area[rest] - inter), F32(0))
        alive = rest[~(thresh < iou)]
    return np.array(kept, np.int64)


# ---------------------------------------------------------------- PSROIPooling


@dataclass(frozen=True)
class PSROIPoolingAttrs:
    output_dim: int
    spatial_scale: float
    group_size: int = 1
    mode: Literal["average", "bilinear"] = "average"
    spatial_bins_x: int = 1
    spatial_bins_y: int = 1


def _psroi_channels(attrs) -> int:
    if attrs.mode == "average":
        return attrs.output_dim * attrs.group_size * attrs.group_size
    return attrs.output_dim * attrs.spatial_bins_x * attrs.spatial_bins_y


def _bin_edge(v, size: int) -> int:
    """A bin's edge (a floor or ceil) clipped to [0, size]; -1 for a NaN edge (of a NaN box
    or of an overflow): the bin is empty, 0, as a box outside the map."""
    return -1 if np.isnan(v) else int(min(max(v, 0), size))


@register("PSROIPooling", since=1, attrs=PSROIPoolingAttrs, category="detection")
class PSROIPooling1:
    @staticmethod
    def infer(attrs, data: TensorSpec, rois: TensorSpec) -> list[TensorSpec]:
        if min(attrs.output_dim, attrs.group_size, attrs.spatial_bins_x, attrs.spatial_bins_y) <= 0:
            fail(f"PSROIPooling's output_dim, group_size and spatial bins must be positive, got "
                 f"{attrs.output_dim}, {attrs.group_size}, {attrs.spatial_bins_x}, "
                 f"{attrs.spatial_bins_y}")
        if not np.isfinite(attrs.spatial_scale):
            fail(f"PSROIPooling needs a finite spatial_scale, got {attrs.spatial_scale}",
                 code="value")
        g = attrs.group_size
        out = _roi_out_spec("PSROIPooling", ROIPoolingAttrs(g, g, attrs.spatial_scale), data, rois, 5)
        need = _psroi_channels(attrs)
        if data.shape is not None and data.shape[1].is_static and data.shape[1].value != need:
            what = "output_dim * group_size^2" if attrs.mode == "average" else \
                "output_dim * spatial_bins_x * spatial_bins_y"
            fail(f"PSROIPooling's feature maps need {what} = {need} channels, got {data}")
        return [TensorSpec(out.etype, (out.shape[0], Dim.of(attrs.output_dim), Dim.of(g), Dim.of(g)))]

    @staticmethod
    def run(attrs, data, rois) -> tuple[np.ndarray]:
        n, c, h, w = data.shape
        if c != _psroi_channels(attrs):
            fail(f"PSROIPooling's feature maps need {_psroi_channels(attrs)} channels, got {c}")
        r, g, od = rois.shape[0], attrs.group_size, attrs.output_dim
        check_alloc([r, od, g, g], F32, "PSROIPooling's output")
        x = data.astype(F32)
        box = rois.astype(F32)
        ids = np.trunc(box[:, 0]).astype(np.int64) if r else np.zeros(0, np.int64)
        _check_batch_ids(ids, n, "PSROIPooling's boxes[:, 0] (batch id) at box")
        out = np.zeros((r, od, g, g), F32)
        scale = F32(attrs.spatial_scale)
        for i in range(r):
            f = x[ids[i]]
            if attrs.mode == "average":
                q = _round_half_away(box[i, 1:])
                sw, sh = q[0] * scale, q[1] * scale
                ew, eh = (q[2] + F32(1)) * scale, (q[3] + F32(1)) * scale
                bw, bh = (ew - sw) / F32(g), (eh - sh) / F32(g)
                chans = f.reshape(od, g, g, h, w)
                for ph in range(g):                # bins: a small static grid
                    for pw in range(g):
                        # a bin that starts past the map is empty (0), as in the CPU plugin (the
                        # reference clips its start to the last pixel); starts clip at 0 too
                        ws = _bin_edge(np.floor(sw + F32(pw) * bw), w)
                        hs = _bin_edge(np.floor(sh + F32(ph) * bh), h)
                        we = _bin_edge(np.ceil(sw + F32(pw + 1) * bw), w)
                        he = _bin_edge(np.ceil(sh + F32(ph + 1) * bh), h)
                        if min(ws, hs) >= 0 and we > ws and he > hs:
                            out[i, :, ph, pw] = chans[:, ph, pw, hs:he, ws:we].sum(axis=(1, 2), dtype=F32) \
                                / F32((we - ws) * (he - hs))
            else:
                sw, sh, ew, eh = box[i, 1:] * scale
                nbx, nby = attrs.spatial_bins_x, attrs.spatial_bins_y
                bw, bh = (ew - sw) / F32(nbx), (eh - sh) / F32(nby)
                xs = bw * F32(w - 1) / F32(g - 1) if g > 1 else F32(0)
                ys = bh * F32(h - 1) / F32(g - 1) if g > 1 else F32(0)
                chans = f.reshape(nby * nbx, od, h, w)
                for ph in range(g):
                    for pw in range(g):
                        acc = np.zeros(od, F32)
                        for sby in range(nby):
                            for sbx in range(nbx):
                                bsw, bsh = sw + F32(sbx) * bw, sh + F32(sby) * bh
                                px = F32(pw) * xs + bsw * F32(w - 1) if g > 1 else \
                                    (bsw + bsw + bw) * F32(w - 1) / F32(2)
                                py = F32(ph) * ys + bsh * F32(h - 1) if g > 1 else \
                                    (bsh + bsh + bh) * F32(h - 1) / F32(2)
                                if not (0 <= px < w and 0 <= py < h):
                                    continue
                                left, top = int(np.floor(px)), int(np.floor(py))
                                right, bottom = min(int(np.ceil(px)), w - 1), min(int(np.ceil(py)), h - 1)
                                m = chans[sby * nbx + sbx]
                                t = m[:, top, left] + (m[:, top, right] - m[:, top, left]) * F32(px - left)
                                b = m[:, bottom, left] + (m[:, bottom, right] - m[:, bottom, left]) * F32(px - left)
                                acc += t + (b - t) * F32(py - top)
                        out[i, :, ph, pw] = acc / F32(nbx * nby)
        return (out.astype(data.dtype),)


# ---------------------------------------------------------------- ROIAlignRotated


@dataclass(frozen=True)
class ROIAlignRotatedAttrs:
    pooled_h: int
    pooled_w: int
    sampling_ratio: int
    spatial_scale: float
    clockwise_mode: bool = False


def _bilinear_points(f: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """f [C, H, W] sampled at points (y, x) (any equal shapes) with ROIAlign's reference rules:
    a point more than one pixel outside gives 0, others clamp to the border; a NaN point
    gives NaN (OpenVINO's test for outside is false for it, and NaN spreads)."""
    c, h, w = f.shape
    lost = np.isnan(x) | np.isnan(y)
    if not h or not w:          # a map of no pixels: every point is outside it
        return np.broadcast_to(np.where(lost, F32(np.nan), F32(0)), (c, *lost.shape)).copy()
    valid = (x >= -1) & (x <= F32(w)) & (y >= -1) & (y <= F32(h))
    x = np.maximum(np.where(valid, x, 0), F32(0)).astype(F32)
    y = np.maximum(np.where(valid, y, 0), F32(0)).astype(F32)
    yl, xl = y.astype(np.int64), x.astype(np.int64)
    ty, tx = yl >= h - 1, xl >= w - 1
    yl, xl = np.where(ty, h - 1, yl), np.where(tx, w - 1, xl)
    yh, xh = np.where(ty, h - 1, yl + 1), np.where(tx, w - 1, xl + 1)
    y, x = np.where(ty, yl.astype(F32), y), np.where(tx, xl.astype(F32), x)
    ly, lx = (y - yl).astype(F32), (x - xl).astype(F32)
    hy, hx = F32(1) - ly, F32(1) - lx
    v = (hy * hx * f[:, yl, xl] + hy * lx * f[:, yl, xh] + ly * hx * f[:, yh, xl] +
         ly * lx * f[:, yh, xh])
    return np.where(valid, v, np.where(lost, F32(np.nan), F32(0))).astype(F32)


@register("ROIAlignRotated", since=15, attrs=ROIAlignRotatedAttrs, category="detection")
class ROIAlignRotated15:
    @staticmethod
    def infer(attrs, data: TensorSpec, rois: TensorSpec, batch_indices: TensorSpec) -> list[TensorSpec]:
        return _roi_align_infer("ROIAlignRotated", attrs, data, rois, batch_indices, 5)

    @staticmethod
    def run(attrs, data, rois, batch_indices) -> tuple[np.ndarray]:
        n, c, _h, _w = data.shape
        r = rois.shape[0]
        _check_roi_batch_indices("ROIAlignRotated", batch_indices, rois, n)
        ph, pw = attrs.pooled_h, attrs.pooled_w
        check_alloc([r, c, ph, pw], data.dtype, "ROIAlignRotated's output")
        fm = data.astype(F32)
        box = rois.astype(F32)
        scale = F32(attrs.spatial_scale)
        out = np.zeros((r, c, ph, pw), F32)
        for i in range(r):
            cx, cy = box[i, 0] * scale - F32(0.5), box[i, 1] * scale - F32(0.5)
            rw, rh = box[i, 2] * scale, box[i, 3] * scale
            angle = -box[i, 4] if attrs.clockwise_mode else box[i, 4]
            cos, sin = F32(np.cos(angle)), F32(np.sin(angle))
            bw, bh = F32(rw / F32(pw)), F32(rh / F32(ph))
            if not attrs.sampling_ratio and not (np.isfinite(bw) and np.isfinite(bh)):
                fail(f"ROIAlignRotated's box {i} {rois[i].tolist()} has no finite size: "
                     "sampling_ratio 0 takes the samples per bin from it", code="value")
            sx = attrs.sampling_ratio or int(np.ceil(bw))
            sy = attrs.sampling_ratio or int(np.ceil(bh))
            if sx <= 0 or sy <= 0:
                continue
            check_alloc([c, ph * sy, pw * sx], F32, "ROIAlignRotated's samples of one box")
            # sample positions in the box's frame (origin at its centre), then rotated
            py = (-rh / F32(2) + np.repeat(np.arange(ph, dtype=F32), sy) * bh +
                  (bh / F32(sy)) * (np.tile(np.arange(sy, dtype=F32), ph) + F32(0.5))).astype(F32)
            px = (-rw / F32(2) + np.repeat(np.arange(pw, dtype=F32), sx) * bw +
                  (bw / F32(sx)) * (np.tile(np.arange(sx, dtype=F32), pw) + F32(0.5))).astype(F32)
            yy = (py[:, None] * cos - px[None, :] * sin + cy).astype(F32)
            xx = (py[:, None] * sin + px[None, :] * cos + cx).astype(F32)
            v = _bilinear_points(fm[int(batch_indices[i])], yy, xx).reshape(c, ph, sy, pw, sx)
            out[i] = (v / F32(sy * sx)).sum(axis=(2, 4), dtype=F32)
        return (out.astype(data.dtype),)


# ---------------------------------------------------------------- ExperimentalDetectronPriorGridGenerator


@dataclass(frozen=True)
class PriorGridAttrs:
    flatten: bool = True
    h: int = 0
    w: int = 0
    stride_x: float = 0.0
    stride_y: float = 0.0


@register("ExperimentalDetectronPriorGridGenerator", since=6, attrs=PriorGridAttrs,
          category="detection")
class ExperimentalDetectronPriorGridGenerator6:
    @staticmethod
    def infer(attrs, priors: TensorSpec, feature_map: TensorSpec, image: TensorSpec) -> list[TensorSpec]:
        if not priors.etype.is_float:
            fail(f"priors must be floating-point, got {priors.etype.name}")
        if priors.rank is not None and (priors.rank != 2 or not priors.shape[1].compatible(Dim.of(4))):
            fail(f"priors must have shape [number_of_priors, 4], got {priors}")
        check_rank(feature_map, (4,), "the feature map")
        check_rank(image, (4,), "the image")
        if min(attrs.h, attrs.w) < 0 or min(attrs.stride_x, attrs.stride_y) < 0:
            fail(f"h, w, stride_x and stride_y must not be negative, got {attrs.h}, {attrs.w}, "
                 f"{attrs.stride_x}, {attrs.stride_y}")
        p = priors.shape[0] if priors.shape else Dim(0, None)
        fh, fw = (feature_map.shape[2], feature_map.shape[3]) if feature_map.shape else \
            (Dim(0, None), Dim(0, None))
        if attrs.flatten:
            return [TensorSpec(priors.etype, (fh * fw * p, Dim.of(4)))]
        return [TensorSpec(priors.etype, (fh, fw, p, Dim.of(4)))]

    @staticmethod
    def run(attrs, priors, feature_map, image) -> tuple[np.ndarray]:
        fh, fw = feature_map.shape[2:]
        ih, iw = image.shape[2:]
        p = priors.shape[0]
        gh, gw = attrs.h or fh, attrs.w or fw
        if gh > fh or gw > fw:
            fail(f"h and w ({attrs.h}, {attrs.w}) must not exceed the feature map's {fh} x {fw}")
        sx = F32(attrs.stride_x) if attrs.stride_x else F32(iw) / F32(gw)
        sy = F32(attrs.stride_y) if attrs.stride_y else F32(ih) / F32(gh)
        check_alloc([fh, fw, p, 4], priors.dtype, "the prior grid")
        pr = priors.astype(F32)
        cx = ((np.arange(gw, dtype=F32) + F32(0.5)) * sx)[None, :, None]
        cy = ((np.arange(gh, dtype=F32) + F32(0.5)) * sy)[:, None, None]
        grid = np.stack([pr[:, 0] + cx + 0 * cy, pr[:, 1] + cy + 0 * cx,
                         pr[:, 2] + cx + 0 * cy, pr[:, 3] + cy + 0 * cx], -1).astype(F32)
        # cells past h x w (the page: undefined) are 0
        out = np.zeros((fh * fw * p, 4), F32)
        out[:gh * gw * p] = grid.reshape(-1, 4)
        out = out.astype(priors.dtype)
        return (out if attrs.flatten else out.reshape(fh, fw, p, 4),)


# ---------------------------------------------------------------- ExperimentalDetectronROIFeatureExtractor


@dataclass(frozen=True)
class ROIFeatureExtractorAttrs:
    output_size: int
    sampling_ratio: int
    pyramid_scales: tuple[int, ...]
    aligned: bool = False


def _pyramid_levels(rois: np.ndarray, levels: int) -> np.ndarray:
    """The FPN level of each ROI (OpenVINO's reference: canonical size 224 at level 2); a box
    of no area gets `levels`, which no level computes (its features stay 0)."""
    area = (rois[:, 2] - rois[:, 0]) * (rois[:, 3] - rois[:, 1])
    with np.errstate(invalid="ignore", divide="ignore"):
        lvl = np.floor(np.log2(np.sqrt(np.maximum(area, F32(0))) / F32(224) + F32(1e-6)) + F32(2))
    lvl = np.clip(np.nan_to_num(lvl, nan=0, neginf=0), 0, levels - 1).astype(np.int64)
    return np.where(area > 0, lvl, levels)


def _no_image(k: int, shape) -> str:
    # The spec's maps are [1, C, H, W]; the reference samples image 0 of a larger batch, as
    # the kernel does, but a batch of 0 has no image to sample.
    return f"feature map {k} has no image: its shape must be [1, C, H, W], got {shape}"


@register("ExperimentalDetectronROIFeatureExtractor", since=6, attrs=ROIFeatureExtractorAttrs,
          category="detection")
class ExperimentalDetectronROIFeatureExtractor6:
    @staticmethod
    def infer(attrs, rois: TensorSpec, *features: TensorSpec) -> list[TensorSpec]:
        if not features:
            fail("ExperimentalDetectronROIFeatureExtractor needs at least one feature map")
        if len(attrs.pyramid_scales) < len(features):
            fail(f"pyramid_scales has {len(attrs.pyramid_scales)} values for {len(features)} "
                 f"feature maps")
        if attrs.output_size <= 0 or attrs.sampling_ratio < 0 or min(attrs.pyramid_scales) <= 0:
            fail(f"output_size and pyramid_scales must be positive and sampling_ratio not "
                 f"negative, got {attrs.output_size}, {list(attrs.pyramid_scales)}, "
                 f"{attrs.sampling_ratio}")
        if rois.rank is not None and (rois.rank != 2 or not rois.shape[1].compatible(Dim.of(4))):
            fail(f"rois must have shape [number_of_ROIs, 4], got {rois}")
        for k, f in enumerate(features):
            check_rank(f, (4,), f"feature map {k}")
            if f.shape is not None and f.shape[0].hi == 0:
                fail(_no_image(k, f))
            if f.etype != rois.etype:
                fail(f"feature map {k} is {f.etype.name}, rois {rois.etype.name}: they must agree")
        r = rois.shape[0] if rois.shape else Dim(0, None)
        c = next((f.shape[1] for f in features if f.shape is not None), Dim(0, None))
        s = Dim.of(attrs.output_size)
        return [TensorSpec(rois.etype, (r, c, s, s)), TensorSpec(rois.etype, (r, Dim.of(4)))]

    @staticmethod
    def run(attrs, rois, *features) -> tuple[np.ndarray, np.ndarray]:
        r = rois.shape[0]
        c = features[0].shape[1]
        if any(f.shape[1] != c for f in features):
            fail(f"the feature maps must have the same channels, got {[f.shape[1] for f in features]}")
        for k, f in enumerate(features):
            if not f.shape[0]:
                fail(_no_image(k, f.shape), code="value")
        s = attrs.output_size
        check_alloc([r, c, s, s], F32, "ExperimentalDetectronROIFeatureExtractor's output")
        box = rois.astype(F32)
        level = _pyramid_levels(box, len(features))
        out = np.zeros((r, c, s, s), F32)
        off = F32(0.5) if attrs.aligned else F32(0)
        for i in range(r):
            if level[i] >= len(features):
                continue
            fm = features[level[i]][0].astype(F32)           # image 0, as the reference
            scale = F32(1) / F32(attrs.pyramid_scales[level[i]])
            x0, y0, x1, y1 = box[i] * scale - off
            rw, rh = max(x1 - x0, F32(1)), max(y1 - y0, F32(1))
            bw, bh = F32(rw / F32(s)), F32(rh / F32(s))
            if not attrs.sampling_ratio and not (np.isfinite(bw) and np.isfinite(bh)):
                fail(f"ExperimentalDetectronROIFeatureExtractor's ROI {i} {rois[i].tolist()} has "
                     "no finite size: sampling_ratio 0 takes the samples per bin from it",
                     code="value")
            gw = attrs.sampling_ratio or int(np.ceil(rw / F32(s)))
            gh = attrs.sampling_ratio or int(np.ceil(rh / F32(s)))
            check_alloc([c, s * gh, s * gw], F32,
                        "ExperimentalDetectronROIFeatureExtractor's samples of one ROI")
            py = (y0 + np.repeat(np.arange(s, dtype=F32), gh) * bh +
                  (np.tile(np.arange(gh, dtype=F32), s) + F32(0.5)) * bh / F32(gh)).astype(F32)
            px = (x0 + np.repeat(np.arange(s, dtype=F32), gw) * bw +
                  (np.tile(np.arange(gw, dtype=F32), s) + F32(0.5)) * bw / F32(gw)).astype(F32)
            yy, xx = np.broadcast_arrays(py[:, None], px[None, :])
            v = _bilinear_points(fm, yy, xx).reshape(c, s, gh, s, gw)
            out[i] = v.sum(axis=(2, 4), dtype=F32) / F32(gh * gw)
        return out.astype(rois.dtype), rois.copy()


# ---------------------------------------------------------------- ExperimentalDetectronGenerateProposalsSingleImage


@dataclass(frozen=True)
class GenerateProposalsSingleImageAttrs:
    min_size: float
    nms_threshold: float
    post_nms_count: int
    pre_nms_count: int


@register("ExperimentalDetectronGenerateProposalsSingleImage", since=6,
          attrs=GenerateProposalsSingleImageAttrs, category="detection")
class ExperimentalDetectronGenerateProposalsSingleImage6:
    @staticmethod
    def infer(attrs, im_info: TensorSpec, anchors: TensorSpec, deltas: TensorSpec,
              scores: TensorSpec) -> list[TensorSpec]:
        for name, spec, rank in (("im_info", im_info, 1), ("anchors", anchors, 2),
                                 ("deltas", deltas, 3), ("scores", scores, 3)):
            if not spec.etype.is_float:
                fail(f"{name} must be floating-point, got {spec.etype.name}")
            check_rank(spec, (rank,), name)
        if attrs.post_nms_count <= 0 or attrs.pre_nms_count <= 0:
            fail(f"pre_nms_count and post_nms_count must be positive, got {attrs.pre_nms_count} "
                 f"and {attrs.post_nms_count}")
        n = Dim.of(attrs.post_nms_count)
        return [TensorSpec(anchors.etype, (n, Dim.of(4))), TensorSpec(anchors.etype, (n,))]

    @staticmethod
    def run(attrs, im_info, anchors, deltas, scores) -> tuple[np.ndarray, np.ndarray]:
        a, h, w = scores.shape
        if deltas.shape != (4 * a, h, w) or anchors.shape != (h * w * a, 4) or im_info.size < 2:
            fail(f"expected im_info [3], anchors [H*W*A, 4], deltas [4A, H, W], scores [A, H, W]; "
                 f"got {list(im_info.shape)}, {list(anchors.shape)}, {list(deltas.shape)}, "
                 f"{list(scores.shape)}")
        img_h, img_w = (F32(v) for v in np.asarray(im_info, F32).reshape(-1)[:2])
        off = F32(1)
        an = anchors.astype(F32).reshape(h, w, a, 4)
        d = deltas.astype(F32).reshape(a, 4, h, w).transpose(2, 3, 0, 1)      # [H, W, A, 4]
        sc = scores.astype(F32).transpose(1, 2, 0)                             # [H, W, A]
        x0, y0, x1, y1 = (an[..., k] for k in range(4))
        bw, bh = x1 - x0 + off, y1 - y0 + off
        cx, cy = x0 + F32(0.5) * bw, y0 + F32(0.5) * bh
        big = F32(np.log(1000.0 / 16.0))            # the largest log-size delta (Detectron's)
        with np.errstate(over="ignore", invalid="ignore"):
            pcx, pcy = d[..., 0] * bw + cx, d[..., 1] * bh + cy
            pw = np.exp(np.minimum(d[..., 2], big)) * bw
            ph = np.exp(np.minimum(d[..., 3], big)) * bh
        bx = [pcx - F32(0.5) * pw, pcy - F32(0.5) * ph, pcx + F32(0.5) * pw - off,
              pcy + F32(0.5) * ph - off]
        lim = [img_w, img_h, img_w, img_h]
        bx = [np.maximum(F32(0), np.minimum(v, m - off)) for v, m in zip(bx, lim)]
        boxes = np.stack(bx, -1).astype(F32).reshape(-1, 4)
        ms = F32(attrs.min_size)
        keep = (ms <= boxes[:, 2] - boxes[:, 0] + off) & (ms <= boxes[:, 3] - boxes[:, 1] + off)
        score = (keep * sc.reshape(-1)).astype(F32)
        # the pre_nms_count best; equal scores by proposal index (the reference's
        # partial_sort leaves them open)
        order = np.argsort(-score, kind="stable")[:min(score.size, attrs.pre_nms_count)]
        kept = _proposal_nms(boxes[order], F32(attrs.nms_threshold), attrs.post_nms_count, F32(0))
        sel = order[kept]
        post = attrs.post_nms_count
        rois = np.zeros((post, 4), F32)
        probs = np.zeros(post, F32)
        rois[:sel.size] = boxes[sel]
        probs[:sel.size] = score[sel]
        return rois.astype(anchors.dtype), probs.astype(anchors.dtype)


# ---------------------------------------------------------------- GenerateProposals


@dataclass(frozen=True)
class GenerateProposals9Attrs:
    min_size: float
    nms_threshold: float
    pre_nms_count: int
    post_nms_count: int
    normalized: bool = True
    nms_eta: float = 1.0
    roi_num_type: Literal["i32", "i64"] = "i64"


def _refine_anchors(an, d, sc, img_h, img_w, min_h, min_w, off):
    """Detectron's box decoding: [H, W, A, 4] anchors, [H, W, A, 4] deltas, [H, W, A] scores ->
    [P, 4] clipped boxes, [P] scores, [P] whether the box reaches min_size."""
    x0, y0, x1, y1 = (an[..., k] for k in range(4))
    bw, bh = x1 - x0 + off, y1 - y0 + off
    cx, cy = x0 + F32(0.5) * bw, y0 + F32(0.5) * bh
    big = F32(np.log(1000.0 / 16.0))
    with np.errstate(over="ignore", invalid="ignore"):
        pcx, pcy = d[..., 0] * bw + cx, d[..., 1] * bh + cy
        pw = np.exp(np.minimum(d[..., 2], big)) * bw
        ph = np.exp(np.minimum(d[..., 3], big)) * bh
    bx = [pcx - F32(0.5) * pw, pcy - F32(0.5) * ph, pcx + F32(0.5) * pw - off,
          pcy + F32(0.5) * ph - off]
    bx = [np.maximum(F32(0), np.minimum(v, m - off)) for v, m in zip(bx, [img_w, img_h, img_w, img_h])]
    boxes = np.stack(bx, -1).astype(F32).reshape(-1, 4)
    keep = (min_w <= boxes[:, 2] - boxes[:, 0] + off) & (min_h <= boxes[:, 3] - boxes[:, 1] + off)
    return boxes, sc.reshape(-1).astype(F32), keep


@register("GenerateProposals", since=9, attrs=GenerateProposals9Attrs, category="detection")
class GenerateProposals9:
    @staticmethod
    def infer(attrs, im_info: TensorSpec, anchors: TensorSpec, deltas: TensorSpec,
              scores: TensorSpec) -> list[TensorSpec]:
        for name, spec, rank in (("im_info", im_info, 2), ("anchors", anchors, 4),
                                 ("deltas", deltas, 4), ("scores", scores, 4)):
            if not spec.etype.is_float:
                fail(f"{name} must be floating-point, got {spec.etype.name}")
            check_rank(spec, (rank,), name)
        if attrs.post_nms_count <= 0 or attrs.pre_nms_count <= 0:
            fail(f"pre_nms_count and post_nms_count must be positive, got {attrs.pre_nms_count} "
                 f"and {attrs.post_nms_count}")
        n = next((s.shape[0] for s in (im_info, deltas, scores) if s.shape is not None), Dim(0, None))
        rows = Dim(0, (n * Dim.of(attrs.post_nms_count)).hi)
        return [TensorSpec(anchors.etype, (rows, Dim.of(4))), TensorSpec(anchors.etype, (rows,)),
                TensorSpec.make(attrs.roi_num_type, (n,))]

    @staticmethod
    def run(attrs, im_info, anchors, deltas, scores) -> tuple[np.ndarray, ...]:
        n, a, h, w = scores.shape
        if deltas.shape != (n, 4 * a, h, w) or anchors.shape != (h, w, a, 4) or \
                im_info.shape[0] != n or im_info.shape[1] not in (3, 4):
            fail(f"expected im_info [N, 3 or 4], anchors [H, W, A, 4], deltas [N, 4A, H, W], "
                 f"scores [N, A, H, W]; got {list(im_info.shape)}, {list(anchors.shape)}, "
                 f"{list(deltas.shape)}, {list(scores.shape)}")
        off = F32(0) if attrs.normalized else F32(1)
        an = anchors.astype(F32)
        info = im_info.astype(F32)
        all_rois, all_scores, counts = [], [], []
        for b in range(n):
            img_h, img_w = info[b, 0], info[b, 1]
            sh = info[b, 2]
            sw = info[b, 3] if info.shape[1] == 4 else sh
            d = deltas[b].astype(F32).reshape(a, 4, h, w).transpose(2, 3, 0, 1)
            sc = scores[b].astype(F32).transpose(1, 2, 0)
            boxes, score, keep = _refine_anchors(an, d, sc, img_h, img_w, F32(attrs.min_size) * sh,
                                                 F32(attrs.min_size) * sw, off)
            # the pre_nms_count best by score (boxes under min_size stay in the count but are
            # never kept); equal scores by proposal index (the reference's partial_sort leaves
            # them open)
            order = np.argsort(-score, kind="stable")[:min(score.size, attrs.pre_nms_count)]
            order = order[keep[order]]
            kept = _proposal_nms(boxes[order], F32(attrs.nms_threshold), attrs.post_nms_count, off)
            sel = order[kept]
            all_rois.append(boxes[sel])
            all_scores.append(score[sel])
            counts.append(sel.size)
        rois = np.concatenate(all_rois) if all_rois else np.zeros((0, 4), F32)
        probs = np.concatenate(all_scores) if all_scores else np.zeros(0, F32)
        itype = np.int64 if attrs.roi_num_type == "i64" else np.int32
        return (rois.astype(anchors.dtype), probs.astype(anchors.dtype), np.array(counts, itype))


# ---------------------------------------------------------------- DeformablePSROIPooling


@dataclass(frozen=True)
class DeformablePSROIPoolingAttrs:
    output_dim: int
    spatial_scale: float
    group_size: int = 1
    mode: Literal["bilinear_deformable"] = "bilinear_deformable"
    spatial_bins_x: int = 1
    spatial_bins_y: int = 1
    trans_std: float = 1.0
    part_size: int = 1


@register("DeformablePSROIPooling", since=1, attrs=DeformablePSROIPoolingAttrs, category="detection")
class DeformablePSROIPooling1:
    @staticmethod
    def infer(attrs, data: TensorSpec, rois: TensorSpec, offsets=None) -> list[TensorSpec]:
        if min(attrs.output_dim, attrs.group_size, attrs.spatial_bins_x, attrs.spatial_bins_y,
               attrs.part_size) <= 0:
            fail(f"DeformablePSROIPooling's output_dim, group_size, spatial bins and part_size "
                 f"must be positive, got {attrs.output_dim}, {attrs.group_size}, "
                 f"{attrs.spatial_bins_x}, {attrs.spatial_bins_y}, {attrs.part_size}")
        g = attrs.group_size
        out = _roi_out_spec("DeformablePSROIPooling", ROIPoolingAttrs(g, g, attrs.spatial_scale),
                            data, rois, 5)
        need = attrs.output_dim * g * g
        if data.shape is not None and data.shape[1].is_static and data.shape[1].value != need:
            fail(f"DeformablePSROIPooling's score maps need output_dim * group_size^2 = {need} "
                 f"channels, got {data}")
        if offsets is not None:
            check_rank(offsets, (4,), "DeformablePSROIPooling's offsets")
        return [TensorSpec(out.etype, (out.shape[0], Dim.of(attrs.output_dim), Dim.of(g), Dim.of(g)))]

    @staticmethod
    def run(attrs, data, rois, offsets=None) -> tuple[np.ndarray]:
        n, c, h, w = data.shape
        g, od = attrs.group_size, attrs.output_dim
        if c != od * g * g:
            fail(f"DeformablePSROIPooling's score maps need {od * g * g} channels, got {c}")
        r = rois.shape[0]
        if offsets is not None and (offsets.ndim != 4 or offsets.shape[0] != r or
                                    offsets.shape[1] % 2 or offsets.shape[1] == 0 or
                                    od % (offsets.shape[1] // 2) or
                                    offsets.shape[2:] != (attrs.part_size, attrs.part_size)):
            fail(f"DeformablePSROIPooling's offsets must be [{r}, 2 * classes, {attrs.part_size}, "
                 f"{attrs.part_size}] with classes dividing output_dim {od}, got "
                 f"{list(offsets.shape)}")
        check_alloc([r, od, g, g, attrs.spatial_bins_y, attrs.spatial_bins_x], F32,
                    "DeformablePSROIPooling's samples")
        x = data.astype(F32).reshape(n, od, g, g, h, w)
        box = rois.astype(F32)
        out = np.zeros((r, od, g, g), F32)
        scale = F32(attrs.spatial_scale)
        sby, sbx = attrs.spatial_bins_y, attrs.spatial_bins_x
        bad = np.flatnonzero(~np.isfinite(box).all(axis=1))
        if bad.size:
            # (OpenVINO's CPU plugin crashes on some of these and reads garbage on others.)
            fail(f"DeformablePSROIPooling's box {bad[0]} {rois[bad[0]].tolist()} holds a NaN or "
                 f"infinite number", code="value")
        for i in range(r):
            b = int(box[i, 0])
            if b < 0:
                continue               # a negative batch id: the box is skipped (0), as OpenVINO
            if b >= n:
                fail(f"DeformablePSROIPooling's boxes[{i}, 0] (batch id) = {b} is outside "
                     f"[0, {n - 1}]")
            if not h or not w:
                continue               # a map of no pixels: every sample is outside it (0)
            q = _round_half_away(box[i, 1:])
            x1, y1 = q[0] * scale - F32(0.5), q[1] * scale - F32(0.5)
            x2, y2 = (q[2] + F32(1)) * scale - F32(0.5), (q[3] + F32(1)) * scale - F32(0.5)
            rw, rh = max(x2 - x1, F32(0.1)), max(y2 - y1, F32(0.1))
            bw, bh = rw / F32(g), rh / F32(g)
            bx = np.broadcast_to((x1 + np.arange(g, dtype=F32) * bw)[None, None, :], (od, g, g)).copy()
            by = np.broadcast_to((y1 + np.arange(g, dtype=F32) * bh)[None, :, None], (od, g, g)).copy()
            if offsets is not None:
                ncls = offsets.shape[1] // 2
                cls = np.arange(od) // (od // ncls)                                  # [od]
                ow = np.arange(g) * attrs.part_size // g
                oh = np.arange(g) * attrs.part_size // g
                off = offsets[i].astype(F32)
                dx = off[2 * cls][:, oh][:, :, ow] * F32(attrs.trans_std)         # [od, g, g]
                dy = off[2 * cls + 1][:, oh][:, :, ow] * F32(attrs.trans_std)
                bx = bx + dx * rw
                by = by + dy * rh
            sx = (bx[..., None, None] + np.arange(sbx, dtype=F32) * (bw / F32(sbx))).astype(F32)
            sy = (by[..., None, None] + (np.arange(sby, dtype=F32) * (bh / F32(sby)))[:, None]).astype(F32)
            sx, sy = np.broadcast_arrays(sx, sy)                                 # [od, g, g, sby, sbx]
            ok = (sx >= -0.5) & (sx <= F32(w) - F32(0.5)) & (sy >= -0.5) & (sy <= F32(h) - F32(0.5))
            # (A sample outside, NaN included (a NaN offset), reads nothing: 0 stands in.)
            cx = np.clip(np.where(ok, sx, F32(0)), F32(0), F32(w - 1))
            cy = np.clip(np.where(ok, sy, F32(0)), F32(0), F32(h - 1))
            lx, rx = np.floor(cx).astype(np.int64), np.ceil(cx).astype(np.int64)
            ty, by_ = np.floor(cy).astype(np.int64), np.ceil(cy).astype(np.int64)
            co = np.arange(od)[:, None, None, None, None]
            hh = np.arange(g)[None, :, None, None, None]
            ww = np.arange(g)[None, None, :, None, None]
            m = x[b]
            tl, tr = m[co, hh, ww, ty, lx], m[co, hh, ww, ty, rx]
            bl, br = m[co, hh, ww, by_, lx], m[co, hh, ww, by_, rx]
            fx, fy = (cx - lx).astype(F32), (cy - ty).astype(F32)
            top = tl + (tr - tl) * fx
            bot = bl + (br - bl) * fx
            v = np.where(ok, top + (bot - top) * fy, F32(0))
            cnt = ok.sum(axis=(3, 4))
            out[i] = np.where(cnt > 0, v.sum(axis=(3, 4), dtype=F32) / np.maximum(cnt, 1), F32(0))
        return (out.astype(data.dtype),)


# ---------------------------------------------------------------- ExperimentalDetectronDetectionOutput


@dataclass(frozen=True)
class EDDetectionOutputAttrs:
    score_threshold: float
    nms_threshold: float
    max_delta_log_wh: float
    num_classes: int
    post_nms_count: int
    max_detections_per_image: int
    deltas_weights: tuple[float, ...]
    class_agnostic_box_regression: bool = False


@register("ExperimentalDetectronDetectionOutput", since=6, attrs=EDDetectionOutputAttrs,
          category="detection")
class ExperimentalDetectronDetectionOutput6:
    @staticmethod
    def infer(attrs, rois: TensorSpec, deltas: TensorSpec, scores: TensorSpec,
              im_info: TensorSpec) -> list[TensorSpec]:
        for name, spec in (("rois", rois), ("deltas", deltas), ("scores", scores),
                           ("im_info", im_info)):
            if not spec.etype.is_float:
                fail(f"{name} must be floating-point, got {spec.etype.name}")
            check_rank(spec, (2,), name)
        if attrs.num_classes <= 0 or attrs.max_detections_per_image <= 0 or \
                len(attrs.deltas_weights) != 4:
            fail(f"num_classes and max_detections_per_image must be positive and deltas_weights "
                 f"4 values, got {attrs.num_classes}, {attrs.max_detections_per_image}, "
                 f"{list(attrs.deltas_weights)}")
        if rois.shape is not None and rois.shape[1].is_static and rois.shape[1].value != 4:
            fail(f"rois must be [N, 4] boxes, got {rois}")
        m = Dim.of(attrs.max_detections_per_image)
        return [TensorSpec(rois.etype, (m, Dim.of(4))), TensorSpec.make("i32", (m,)),
                TensorSpec(rois.etype, (m,))]

    @staticmethod
    def run(attrs, rois, deltas, scores, im_info) -> tuple[np.ndarray, ...]:
        r, c = rois.shape[0], attrs.num_classes
        if rois.shape[1] != 4:
            fail(f"rois must be [N, 4] boxes, got {list(rois.shape)}")
        if deltas.shape != (r, 4 * c) or scores.shape != (r, c):
            fail(f"expected deltas [{r}, {4 * c}] and scores [{r}, {c}], got "
                 f"{list(deltas.shape)} and {list(scores.shape)}")
        off = F32(1)
        b = rois.astype(F32)
        valid = (b[:, 2] - b[:, 0] > 0) & (b[:, 3] - b[:, 1] > 0)         # others: no boxes
        bw, bh = b[:, 2] - b[:, 0] + off, b[:, 3] - b[:, 1] + off
        cx, cy = b[:, 0] + F32(0.5) * bw, b[:, 1] + F32(0.5) * bh
        wts = np.array(attrs.deltas_weights, F32)
        d = deltas.astype(F32).reshape(r, c, 4) / wts                         # [R, C, 4]
        big = F32(attrs.max_delta_log_wh)
        with np.errstate(over="ignore", invalid="ignore"):
            pcx, pcy = d[..., 0] * bw[:, None] + cx[:, None], d[..., 1] * bh[:, None] + cy[:, None]
            pw = np.exp(np.minimum(d[..., 2], big)) * bw[:, None]
            ph = np.exp(np.minimum(d[..., 3], big)) * bh[:, None]
        # clipped at 0 only: the reference and CPU plugin do not clip to the image
        boxes = np.stack([pcx - F32(0.5) * pw, pcy - F32(0.5) * ph, pcx + F32(0.5) * pw - off,
                          pcy + F32(0.5) * ph - off], -1)
        boxes = np.maximum(boxes, F32(0)).astype(F32)                         # [R, C, 4]
        areas = ((boxes[..., 2] - boxes[..., 0] + off) * (boxes[..., 3] - boxes[..., 1] + off)).astype(F32)
        sc = np.where(valid[:, None], scores.astype(F32), F32(0))
        boxes = np.where(valid[:, None, None], boxes, F32(0))
        areas = np.where(valid[:, None], areas, F32(0))
        found = []                                   # (score, class, roi), in class order
        for cls in range(1, c):
            s = sc[:, cls]
            cand = np.flatnonzero(s > F32(attrs.score_threshold))
            order = cand[np.lexsort((cand, -s[cand]))]      # score, then ROI index
            kept, alive = [], order
            bx, ar = boxes[:, cls], areas[:, cls]
            while alive.size:
                i = int(alive[0])
                kept.append(i)
                rest = alive[1:]
                o = bx[rest]
                cover = ~((o[:, 0] > bx[i, 2]) | (o[:, 2] < bx[i, 0]) | (o[:, 1] > bx[i, 3]) |
                          (o[:, 3] < bx[i, 1]))
                iw = np.minimum(bx[i, 2], o[:, 2]) - np.maximum(bx[i, 0], o[:, 0]) + off
                ih = np.minimum(bx[i, 3], o[:, 3]) - np.maximum(bx[i, 1], o[:, 1]) + off
                inter = iw * ih
                with np.errstate(invalid="ignore", divide="ignore"):
                    iou = np.where(cover & (iw > 0) & (ih > 0), inter / (ar[i] + ar[rest] - inter), F32(0))
                alive = rest[~(iou > F32(attrs.nms_threshold))]
            if attrs.post_nms_count > -1:
                kept = kept[:attrs.post_nms_count]
            found += [(float(s[i]), cls, i) for i in kept]
        m = attrs.max_detections_per_image
        if len(found) > m:
            # score descending, equal ones by ROI index (the reference's order; its partial_sort
            # leaves equal score and index open)
            found = sorted(found, key=lambda t: (-t[0], t[2]))[:m]
        out_b = np.zeros((m, 4), F32)
        out_c = np.zeros(m, np.int32)
        out_s = np.zeros(m, F32)
        for k, (s_, cls, i) in enumerate(found):
            out_b[k], out_c[k], out_s[k] = boxes[i, cls], cls, s_
        return out_b.astype(rois.dtype), out_c, out_s.astype(rois.dtype)
