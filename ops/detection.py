"""Object detection: PriorBox-1/8, PriorBoxClustered-1 (spec pages: detection/prior-box-1,
prior-box-8, prior-box-clustered-1).

The pages give the idea, not the arithmetic; irrun computes what OpenVINO's reference does
(the kernel OpenVINO's constant folding runs, since these ops usually get constant inputs),
in f32 with the same operation order. The boxes of one grid point are a small table built
from the attributes ("templates"); the grid is then one broadcast over [H, W, priors].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from irrun.opkit import (
    Dim, TensorSpec, check_alloc, check_integer, check_rank, elements, fail, register,
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
class PriorBox8Attrs:
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
    min_max_aspect_ratios_order: bool = True


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
    if attrs.fixed_size and len(attrs.density) < len(attrs.fixed_size):
        fail(f"PriorBox needs a density per fixed_size, got {len(attrs.density)} densities "
             f"for {len(attrs.fixed_size)} fixed sizes")
    if any(d < 1 for d in attrs.density[:len(attrs.fixed_size)]):
        fail(f"PriorBox's density values must be at least 1, got {list(attrs.density)}")
    if any(a <= 0 for a in attrs.aspect_ratio):
        fail(f"PriorBox's aspect_ratio values must be positive, got {list(attrs.aspect_ratio)}")
    if len(attrs.variance) not in (0, 1, 4):
        fail(f"PriorBox's variance must have 0, 1 or 4 elements, got {len(attrs.variance)}")


def _prior_templates(attrs, image_h: int):
    """The boxes of one grid point, in output order: rows of (shift_a, shift_b, shift_c,
    half_width, half_height, clip_each), the centre moved by -a + b + c (in that order)."""
    rows = []
    ratios = _aspect_ratios(attrs)
    min_size = [F32(s) for s in attrs.min_size]
    if not attrs.scale_all_sizes:            # MXNet-style sizes, relative to the image height
        min_size = [s * F32(image_h) for s in min_size]
    for s, fs in enumerate(attrs.fixed_size):
        fs_int = int(fs)                      # OpenVINO truncates the size for these shifts
        half = F32(fs_int) * F32(0.5)
        density = int(attrs.density[s])
        shift = int(F32(fs) / F32(density))

        def dense(bw, bh):
            for r in range(density):
                for c in range(density):
                    rows.append((F32(fs_int // 2), F32(shift) / F32(2), F32(c * shift),
                                 F32(r * shift), bw, bh, True))
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
        rows += [(F32(0), F32(0), F32(0), F32(0), bw, bh, False) for bw, bh in order]
    return rows


def _priors_per_point(attrs) -> int:
    """OpenVINO's count of boxes per grid point, after checking the kernel makes that many."""
    _check_prior_box_attrs(attrs)
    n = _number_of_priors(attrs)
    made = len(_prior_templates(attrs, 1))
    if made != n:
        # fixed_ratio with a count other than the aspect ratios': OpenVINO's output shape
        # has room for fewer boxes than its kernel writes (out of bounds), so irrun refuses.
        fail(f"PriorBox's attributes generate {made} boxes per grid point but its output "
             f"shape (OpenVINO's count) has room for {n}; fixed_ratio needs as many ratios "
             f"as the {len(_aspect_ratios(attrs))} aspect ratios")
    return n


def _prior_box(attrs, output_size, image_size) -> np.ndarray:
    _check_prior_box_attrs(attrs)
    h, w, ih, iw = _sizes(output_size, image_size, "PriorBox")
    templates = _prior_templates(attrs, ih)
    n = _priors_per_point(attrs)
    check_alloc([2, 4 * h * w * n], F32, "PriorBox's output")
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
        t = np.array([r[:6] for r in templates], F32).reshape(-1, 6)
        clip_each = np.array([r[6] for r in templates], bool)
        a, b, cc, rr, bw, bh = (t[:, i] for i in range(6))
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
