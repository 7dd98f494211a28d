"""The compiled loops of NonMaxSuppression-1/3/4/5/9 (ops/nms.py). Numba, because the NumPy
path makes one step of some 15 array calls per selected box over every candidate left:
40,000 boxes that mostly survive took 16 s.

Hard NMS (`hard`): the candidates in score order, each kept unless its IoU with a box kept
before it is >= iou_threshold; the same boxes and order as selecting the best candidate
and suppressing the rest by their IoU with it, since a box is suppressed exactly when a
box selected before it overlaps it that much. The IoU is the CPU plugin's, in f32: the
overlap's height max(min(ymax) - max(ymin), 0) times its width, divided by the two areas'
sum less the overlap, 0 for a box of zero or negative area; the selected box first in each
operation, and a NaN carried as np.minimum and np.maximum carry it (the NumPy expression
this loop replaced).

Soft-NMS (`soft_pick`, `soft_apply`): each step's selection, IoUs and exponents, then
the decays and the cut; the exp between them stays NumPy's (ops/nms.py), whose f32 exp
numba's does not match bit for bit. A box the selected one does not overlap keeps its
score (its factor exp(-0) is 1), so only the boxes it overlaps are decayed.

Imported on the op's first run, so loading models without NonMaxSuppression never imports
numba.
"""
import numba
import numpy as np

from irrun.opkit.compiled import cached_loop


@numba.njit(inline="always", nogil=True)
def _min(a, b):
    """np.minimum(a, b): a NaN in either gives NaN."""
    return a if (a <= b or np.isnan(a)) else b


@numba.njit(inline="always", nogil=True)
def _max(a, b):
    """np.maximum(a, b): a NaN in either gives NaN."""
    return a if (a >= b or np.isnan(a)) else b


@numba.njit(inline="always", nogil=True)
def _iou(corners, areas, s, i):
    """IoU of the selected box s with box i (corners [N, 4] ymin, xmin, ymax, xmax; areas
    [N]; f32)."""
    zero = np.float32(0)
    a, b = corners[s], corners[i]
    h = _max(_min(a[2], b[2]) - _max(a[0], b[0]), zero)
    w = _max(_min(a[3], b[3]) - _max(a[1], b[1]), zero)
    inter = h * w
    if areas[s] <= zero or areas[i] <= zero:
        return zero
    den = (areas[s] + areas[i]) - inter
    if den == zero:             # NumPy's x / 0 (numba would raise)
        if inter > zero:
            return np.float32(np.inf)
        if inter < zero:
            return np.float32(-np.inf)
        return np.float32(np.nan)
    return inter / den


@cached_loop
def hard(corners, areas, order, max_out, iou_thr, selected):
    """Hard NMS of one batch and class: order holds the candidates (box indices, best
    first); writes the kept ones to selected (at most max_out) and returns their count.
    With iou_threshold > 0 the kept boxes are filed in a grid (_hard_grid)."""
    if iou_thr > 0 and order.size > 64:
        return _hard_grid(corners, areas, order, max_out, iou_thr, selected)
    count = 0
    for j in range(order.size):
        if count >= max_out:
            break
        i = order[j]
        keep = True
        for q in range(count):
            if _iou(corners, areas, selected[q], i) >= iou_thr:    # NaN suppresses nothing
                keep = False
                break
        if keep:
            selected[count] = i
            count += 1
    return count


# A box spread over more grid cells than this is checked against every kept box (as a
# candidate) or against every candidate (as a kept box) instead.
MAX_CELLS = 64


@cached_loop
def _hard_grid(corners, areas, order, max_out, iou_thr, selected):
    """hard() for iou_thr > 0, comparing each candidate only with the kept boxes that share
    a grid cell with it. An IoU >= iou_thr > 0 needs an overlap of positive height and
    width, so two such boxes share a point and with it the cell holding it (a cell index,
    floor((y - lo) / size) in f64, never decreases as y grows); a box without finite
    corners or with an area that is not finite and positive has an IoU of 0 or NaN with
    every box, so it neither suppresses nor is suppressed. The IoUs compared are hard()'s;
    only the pairs left out differ, all of IoU 0."""
    n = order.size
    ok = np.zeros(n, np.bool_)
    lo_y = lo_x = np.inf
    hi_y = hi_x = -np.inf
    for j in range(n):
        i = order[j]
        c = corners[i]
        fine = areas[i] > 0 and np.isfinite(areas[i])
        for k in range(4):
            fine = fine and np.isfinite(c[k])
        ok[j] = fine
        if fine:
            lo_y, hi_y = min(lo_y, np.float64(c[0])), max(hi_y, np.float64(c[2]))
            lo_x, hi_x = min(lo_x, np.float64(c[1])), max(hi_x, np.float64(c[3]))
    cells = max(1, min(1024, int(np.sqrt(n))))
    step_y = (hi_y - lo_y) / cells if hi_y > lo_y else 1.0
    step_x = (hi_x - lo_x) / cells if hi_x > lo_x else 1.0
    head = np.full(cells * cells, -1, np.int64)      # per cell: its last entry
    link = np.empty(1024, np.int64)                  # per entry: the cell's entry before it
    kept_box = np.empty(1024, np.int64)              # per entry: the kept box
    entries = 0
    big = np.empty(min(n, max_out), np.int64)        # kept boxes over too many cells
    bigs = 0
    count = 0
    for j in range(n):
        if count >= max_out:
            break
        i = order[j]
        if not ok[j]:
            selected[count] = i
            count += 1
            continue
        c = corners[i]
        y0 = min(cells - 1, int((np.float64(c[0]) - lo_y) / step_y))
        y1 = min(cells - 1, int((np.float64(c[2]) - lo_y) / step_y))
        x0 = min(cells - 1, int((np.float64(c[1]) - lo_x) / step_x))
        x1 = min(cells - 1, int((np.float64(c[3]) - lo_x) / step_x))
        spread = (y1 - y0 + 1) * (x1 - x0 + 1) > MAX_CELLS
        keep = True
        if spread:
            for q in range(count):
                if _iou(corners, areas, selected[q], i) >= iou_thr:
                    keep = False
                    break
        else:
            for q in range(bigs):
                if _iou(corners, areas, big[q], i) >= iou_thr:
                    keep = False
                    break
            y = y0
            while keep and y <= y1:
                for x in range(x0, x1 + 1):
                    e = head[y * cells + x]
                    while e >= 0:
                        if _iou(corners, areas, kept_box[e], i) >= iou_thr:
                            keep = False
                            break
                        e = link[e]
                    if not keep:
                        break
                y += 1
        if not keep:
            continue
        selected[count] = i
        count += 1
        if spread:
            big[bigs] = i
            bigs += 1
            continue
        need = entries + (y1 - y0 + 1) * (x1 - x0 + 1)
        if need > link.size:
            size = max(need, 2 * link.size)
            grown_link = np.empty(size, np.int64)
            grown_link[:entries] = link[:entries]
            grown_box = np.empty(size, np.int64)
            grown_box[:entries] = kept_box[:entries]
            link, kept_box = grown_link, grown_box
        for y in range(y0, y1 + 1):
            for x in range(x0, x1 + 1):
                link[entries] = head[y * cells + x]
                kept_box[entries] = i
                head[y * cells + x] = entries
                entries += 1
    return count


@cached_loop
def soft_pick(corners, areas, cur, alive, n, scale, rest, iou, hits, args):
    """One Soft-NMS step's selection: the box of alive[:n] with the highest current score
    cur (equal ones: the lowest box index); the others, in order, to rest[:n - 1] with their
    IoU with it in iou; hits[:h] their positions there with an IoU other than 0 and
    args[:h] = scale * IoU * IoU (f32), the decays' exponents. Returns (box, h)."""
    best = -1
    top = cur[0]
    for p in range(n):
        b = alive[p]
        v = cur[b]
        if best < 0 or v > top or (v == top and b < best):
            best, top = b, v
    m = 0
    h = 0
    for p in range(n):
        b = alive[p]
        if b == best:
            continue
        x = _iou(corners, areas, best, b)
        rest[m] = b
        iou[m] = x
        if x != 0:
            hits[h] = m
            args[h] = scale * x * x
            h += 1
        m += 1
    return best, h


@cached_loop
def soft_apply(cur, rest, m, iou, hits, h, w, score_thr, iou_thr, cut, alive):
    """The rest of a Soft-NMS step: the scores of rest[hits[:h]] times their decays w[:h]
    (f32), then the boxes of rest[:m] still above score_thr (and, with cut, overlapping the
    selected box less than iou_thr) to alive, in order. Returns their count."""
    for q in range(h):
        b = rest[hits[q]]
        cur[b] = cur[b] * w[q]
    n = 0
    for p in range(m):
        b = rest[p]
        if cur[b] > score_thr and not (cut and iou[p] >= iou_thr):
            alive[n] = b
            n += 1
    return n
