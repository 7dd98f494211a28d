"""Detection ops (PriorBox-1/8, PriorBoxClustered-1, ...): spec examples verbatim (shapes),
hand-computed boxes, shape rules, errors, and differential tests against OpenVINO (PriorBox
with constant inputs is folded by OpenVINO's reference; the CPU plugin refuses non-constant
PriorBox-8)."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from irrun.errors import OpError, ShapeError
from irrun.ops import detection
from irrun.ops.detection import (
    DeformablePSROIPooling1,
    DeformablePSROIPoolingAttrs,
    DetectionOutput1,
    DetectionOutput1Attrs,
    DetectionOutput8Attrs,
    EDDetectionOutputAttrs,
    ExperimentalDetectronDetectionOutput6,
    ExperimentalDetectronGenerateProposalsSingleImage6,
    ExperimentalDetectronPriorGridGenerator6,
    ExperimentalDetectronROIFeatureExtractor6,
    GenerateProposals9,
    GenerateProposals9Attrs,
    GenerateProposalsSingleImageAttrs,
    PriorBox1,
    PriorBox1Attrs,
    PriorBox8Attrs,
    PriorBoxClustered1,
    PriorBoxClusteredAttrs,
    PriorGridAttrs,
    Proposal1,
    Proposal1Attrs,
    Proposal4Attrs,
    PSROIPooling1,
    PSROIPoolingAttrs,
    RegionYolo1,
    RegionYoloAttrs,
    ReorgYolo2,
    ReorgYoloAttrs,
    ROIAlign3,
    ROIAlign3Attrs,
    ROIAlign9Attrs,
    ROIAlignRotated15,
    ROIAlignRotatedAttrs,
    ROIFeatureExtractorAttrs,
    ROIPooling2,
    ROIPoolingAttrs,
)
from irrun.ir.shapes import Dim, TensorSpec

F32 = np.float32


def ints(values):
    return TensorSpec.of_value(np.array(values, np.int64), "i64")


# ------------------------------------------------------------------ PriorBox

SPEC_PB = {"aspect_ratio": (2.0,), "clip": False, "density": (), "fixed_ratio": (), "fixed_size": (),
               "flip": True, "max_size": (38.46,), "min_size": (16.0,), "offset": 0.5, "step": 16.0,
               "variance": (0.1, 0.1, 0.2, 0.2)}


@pytest.mark.parametrize("attrs", [PriorBox1Attrs, PriorBox8Attrs])
def test_prior_box_spec_example(attrs):
    a = attrs(**SPEC_PB)
    (out,) = PriorBox1.infer(a, ints([24, 42]), ints([384, 672]))
    assert out.shape == (Dim.of(2), Dim.of(16128)) and out.etype.name == "f32"
    (y,) = PriorBox1.run(a, np.array([24, 42]), np.array([384, 672]))
    assert y.shape == (2, 16128) and y.dtype == F32
    # the first point (centre 8, 8): min box 16, then sqrt(16 * 38.46), then ratios 2, 1/2
    s = np.sqrt(F32(16 * 38.46))
    r = np.sqrt(F32(2))
    half = [(8, 8), (s / 2, s / 2), (8 * r, 8 / r), (8 / r, 8 * r)]
    expect = [[(8 - w) / 672, (8 - h) / 384, (8 + w) / 672, (8 + h) / 384] for w, h in half]
    np.testing.assert_allclose(y[0, :16], np.ravel(expect), rtol=1e-6)
    np.testing.assert_array_equal(y[1, :8], F32([0.1, 0.1, 0.2, 0.2] * 2))
    if attrs is PriorBox8Attrs:   # [min, aspect ratios, max]
        (y2,) = PriorBox1.run(PriorBox8Attrs(**SPEC_PB, min_max_aspect_ratios_order=False),
                              np.array([24, 42]), np.array([384, 672]))
        np.testing.assert_array_equal(y2[0, 4:8], y[0, 8:12])
        np.testing.assert_array_equal(y2[0, 12:16], y[0, 4:8])


def test_prior_box_clip_step_zero_and_single_variance():
    a = PriorBox8Attrs(offset=0.5, min_size=(30.0,), clip=True, variance=(0.2,))
    (y,) = PriorBox1.run(a, np.array([2, 2]), np.array([40, 40]))
    # step 0: centres at (w + 0.5) * 40 / 2 = 10, 30; half size 15, clipped to [0, 1]
    assert y[0, :4].tolist() == [0, 0, F32(25) / 40, F32(25) / 40]
    assert y.min() >= 0 and y[0].max() <= 1 and (y[1] == F32(0.2)).all()


def test_prior_box_duplicate_ratios_and_density():
    a = PriorBox8Attrs(offset=0.5, min_size=(10.0,), aspect_ratio=(2.0, 2.0, 0.5), flip=True)
    (y,) = PriorBox1.run(a, np.array([1, 1]), np.array([10, 10]))
    assert y.shape == (2, 4 * 3)       # ratios 1, 2, 1/2 (0.5 is 2 flipped)
    d = PriorBox8Attrs(offset=0.5, fixed_size=(4.0,), density=(2.0,))
    (y,) = PriorBox1.run(d, np.array([1, 1]), np.array([8, 8]))
    # four 4x4 boxes around centre 4 shifted by -2 + 1 + {0, 2}: centres 3 and 5
    assert y[0].reshape(4, 4).tolist() == [[1 / 8, 1 / 8, 5 / 8, 5 / 8], [3 / 8, 1 / 8, 7 / 8, 5 / 8],
                                           [1 / 8, 3 / 8, 5 / 8, 7 / 8], [3 / 8, 3 / 8, 7 / 8, 7 / 8]]


def test_prior_box_shape_rules_and_errors():
    a = PriorBox8Attrs(**SPEC_PB)
    out_size = TensorSpec.make("i64", [2])
    (out,) = PriorBox1.infer(a, out_size, ints([384, 672]))
    assert out.shape == (Dim.of(2), Dim(0, None))
    partial = TensorSpec(out_size.etype, out_size.shape, dims=(Dim(2, 4), Dim.of(3)))
    (out,) = PriorBox1.infer(a, partial, ints([384, 672]))
    assert out.shape == (Dim.of(2), Dim(96, 192))
    with pytest.raises(ShapeError, match="output_size must have 2 elements"):
        PriorBox1.infer(a, ints([2, 3, 4]), ints([384, 672]))
    with pytest.raises(ShapeError, match="image_size must have an integer"):
        PriorBox1.infer(a, ints([2, 3]), TensorSpec.make("f32", [2]))
    with pytest.raises(ShapeError, match="variance must have 0, 1 or 4"):
        PriorBox1.infer(PriorBox8Attrs(offset=0.5, min_size=(1.0,), variance=(1.0, 2.0)),
                        ints([2, 3]), ints([4, 4]))
    with pytest.raises(ShapeError, match="has room for 7"):
        PriorBox1.infer(PriorBox8Attrs(offset=0.5, fixed_size=(32.0,), density=(2.0,),
                                       fixed_ratio=(2.0, 0.5)), ints([2, 3]), ints([4, 4]))
    with pytest.raises(OpError, match="must not be negative"):
        PriorBox1.run(a, np.array([-1, 3]), np.array([4, 4]))


# ------------------------------------------------------------------ PriorBoxClustered

SPEC_PBC = {"clip": False, "height": (44.0, 10.0, 30.0, 19.0, 94.0, 32.0, 61.0, 53.0, 17.0),
                "offset": 0.5, "step": 16.0, "variance": (0.1, 0.1, 0.2, 0.2),
                "width": (86.0, 13.0, 57.0, 39.0, 68.0, 34.0, 142.0, 50.0, 23.0)}


def test_prior_box_clustered_spec_example():
    a = PriorBoxClusteredAttrs(**SPEC_PBC)
    (out,) = PriorBoxClustered1.infer(a, ints([10, 19]), ints([180, 320]))
    assert out.shape == (Dim.of(2), Dim.of(6840))
    (y,) = PriorBoxClustered1.run(a, np.array([10, 19]), np.array([180, 320]))
    assert y.shape == (2, 6840)
    # point (h=0, w=1): centre (24, 8); its first box 86 x 44
    np.testing.assert_allclose(y[0, 36:40], [(24 - 43) / 320, (8 - 22) / 180, (24 + 43) / 320,
                                             (8 + 22) / 180], rtol=1e-6)
    np.testing.assert_array_equal(y[1, :8], F32([0.1, 0.1, 0.2, 0.2] * 2))


def test_prior_box_clustered_steps_and_errors():
    a = PriorBoxClusteredAttrs(offset=0.5, width=(2.0,), height=(2.0,), step_w=4.0, step_h=2.0)
    (y,) = PriorBoxClustered1.run(a, np.array([1, 2]), np.array([8, 8]))
    assert y[0].tolist() == [1 / 8, 0, 3 / 8, 2 / 8, 5 / 8, 0, 7 / 8, 2 / 8]   # clip default true
    with pytest.raises(ShapeError, match="as many widths as heights"):
        PriorBoxClustered1.infer(PriorBoxClusteredAttrs(offset=0.5, width=(1.0, 2.0)),
                                 ints([2, 2]), ints([4, 4]))


# ------------------------------------------------------------------ DetectionOutput

SPEC_DO = {"background_label_id": 1, "code_type": "caffe.PriorBoxParameter.CENTER_SIZE",
               "confidence_threshold": 0.019999999552965164, "input_height": 1, "input_width": 1,
               "keep_top_k": (200,), "nms_threshold": 0.44999998807907104, "normalized": True,
               "share_location": True, "top_k": 200, "variance_encoded_in_target": False,
               "clip_after_nms": False, "clip_before_nms": False, "objectness_score": 0.0,
               "decrease_label_id": False}


@pytest.mark.parametrize("v1", [True, False])
def test_detection_output_spec_example_shapes(v1):
    a = DetectionOutput1Attrs(**SPEC_DO, num_classes=2) if v1 else DetectionOutput8Attrs(**SPEC_DO)
    (out,) = DetectionOutput1.infer(a, TensorSpec.make("f32", [1, 5376]),
                                    TensorSpec.make("f32", [1, 2688]),
                                    TensorSpec.make("f32", [1, 2, 5376]))
    assert out.shape == tuple(map(Dim.of, (1, 1, 200, 7))) and out.etype.name == "f32"


def _do(attrs, loc, conf, priors, *extra):
    return DetectionOutput1.run(attrs, np.asarray(loc, F32), np.asarray(conf, F32),
                                np.asarray(priors, F32), *extra)[0].reshape(-1, 7)


# Three normalized priors, corner code, variance 1: the predicted offsets add to the priors.
PRIORS = [[[0.1, 0.1, 0.3, 0.3, 0.12, 0.1, 0.32, 0.3, 0.6, 0.6, 0.9, 0.9], [1.0] * 12]]
CORNER_ATTRS = {"keep_top_k": (-1,), "nms_threshold": 0.5, "normalized": True, "background_label_id": 0}


def test_detection_output_caffe_nms_by_hand():
    a = DetectionOutput8Attrs(**CORNER_ATTRS, confidence_threshold=0.1)
    loc = np.zeros((1, 12))
    loc[0, 8:12] = [0.05, 0, 0.05, 0]                    # moves the third box right
    # classes: background, A, B; prior 1 overlaps prior 0 (IoU 0.82) and is suppressed in A
    conf = [[0.5, 0.9, 0.05, 0.5, 0.8, 0.3, 0.1, 0.2, 0.7]]
    out = _do(a, loc, conf, PRIORS)
    assert out.shape == (9, 7)                           # N * classes * priors
    np.testing.assert_allclose(out[:4], [[0, 1, 0.9, 0.1, 0.1, 0.3, 0.3],
                                         [0, 1, 0.2, 0.65, 0.6, 0.95, 0.9],
                                         [0, 2, 0.7, 0.65, 0.6, 0.95, 0.9],
                                         [0, 2, 0.3, 0.12, 0.1, 0.32, 0.3]], rtol=1e-6)
    assert out[4].tolist() == [-1, 0, 0, 0, 0, 0, 0] and not out[5:].any()
    # keep_top_k 3: the three best over all classes, then written by class; N * 3 rows
    out = _do(DetectionOutput8Attrs(**dict(CORNER_ATTRS, keep_top_k=(3,)),
                                    confidence_threshold=0.1), loc, conf, PRIORS)
    assert out[:, :3].tolist() == [[0, 1, F32(0.9)], [0, 2, F32(0.7)], [0, 2, F32(0.3)]]
    # decrease_label_id (MXNet): each prior's best class only, labels shifted down by one
    out = _do(DetectionOutput8Attrs(**CORNER_ATTRS, confidence_threshold=0.1,
                                    decrease_label_id=True), loc, conf, PRIORS)
    assert out[:3, :3].tolist() == [[0, 0, F32(0.9)], [0, 1, F32(0.7)], [-1, 0, 0]]


def test_detection_output_boxes_outside_and_clipping():
    loc = np.zeros((1, 12))
    loc[0, :4] = [-0.5, -0.5, 0.9, 0.9]                  # far outside the image
    conf = [[0, 0.9, 0, 0, 0, 0, 0, 0, 0]]
    a = dict(CORNER_ATTRS, confidence_threshold=0.1)
    out = _do(DetectionOutput8Attrs(**a), loc, conf, PRIORS)
    np.testing.assert_allclose(out[0, 3:], [-0.4, -0.4, 1.2, 1.2], rtol=1e-6)
    out = _do(DetectionOutput8Attrs(**a, clip_after_nms=True), loc, conf, PRIORS)
    assert out[0, 3:].tolist() == [0, 0, 1, 1]


def test_detection_output_zero_area_nan_and_empty():
    # zero-area priors never overlap: both kept; NaN scores never pass the threshold
    pri = [[[0.2, 0.2, 0.2, 0.5, 0.2, 0.2, 0.2, 0.5, 0.5, 0.5, 0.6, 0.6], [1.0] * 12]]
    conf = [[0, 0.9, np.nan, 0, 0.8, 0, 0, 0, np.nan]]
    out = _do(DetectionOutput8Attrs(**CORNER_ATTRS, confidence_threshold=0.1), np.zeros((1, 12)),
              conf, pri)
    assert out[:3, :3].tolist() == [[0, 1, F32(0.9)], [0, 1, F32(0.8)], [-1, 0, 0]]
    # nothing above the threshold: the first row ends the output
    out = _do(DetectionOutput8Attrs(**CORNER_ATTRS, confidence_threshold=0.95), np.zeros((1, 12)),
              conf, pri)
    assert out[0, 0] == -1 and not out[1:].any()
    # a zero batch gives zero rows
    out = _do(DetectionOutput8Attrs(**CORNER_ATTRS), np.zeros((0, 12)), np.zeros((0, 9)), pri)
    assert out.shape == (0, 7)


def test_detection_output_shape_rules_and_errors():
    a = DetectionOutput8Attrs(keep_top_k=(-1,), nms_threshold=0.5, top_k=10, normalized=True)
    (out,) = DetectionOutput1.infer(a, TensorSpec.make("f16", [None, 120]),
                                    TensorSpec.make("f16", [None, 90]),
                                    TensorSpec.make("f16", [1, 2, 120]))
    assert out.shape == (Dim.of(1), Dim.of(1), Dim(0, None), Dim.of(7)) and out.etype.name == "f16"
    (out,) = DetectionOutput1.infer(a, TensorSpec.make("f32", [3, 120]),
                                    TensorSpec.make("f32", [3, 90]),
                                    TensorSpec.make("f32", [1, 2, 120]))
    assert out.shape[2] == Dim.of(3 * 10 * 3)            # N * top_k * classes
    (out,) = DetectionOutput1.infer(DetectionOutput8Attrs(keep_top_k=(-1,), nms_threshold=0.5,
                                                          normalized=False),
                                    TensorSpec.make("f32", [3, 96]), TensorSpec.make("f32", [3, 72]),
                                    TensorSpec.make("f32", [1, 2, 120]))
    assert out.shape[2] == Dim.of(3 * 3 * 24)            # N * classes * priors (5 per prior)
    with pytest.raises(ShapeError, match="must be a multiple of the prior size 5"):
        DetectionOutput1.infer(DetectionOutput8Attrs(keep_top_k=(5,), nms_threshold=0.5),
                               TensorSpec.make("f32", [1, 8]), TensorSpec.make("f32", [1, 4]),
                               TensorSpec.make("f32", [1, 2, 8]))
    with pytest.raises(ShapeError, match="both additional inputs"):
        DetectionOutput1.infer(a, TensorSpec.make("f32", [1, 8]), TensorSpec.make("f32", [1, 4]),
                               TensorSpec.make("f32", [1, 2, 8]), TensorSpec.make("f32", [1, 4]))
    with pytest.raises(ShapeError, match="num_classes > 0"):
        DetectionOutput1.infer(DetectionOutput1Attrs(keep_top_k=(5,), nms_threshold=0.5,
                                                     normalized=True),
                               TensorSpec.make("f32", [1, 8]), TensorSpec.make("f32", [1, 4]),
                               TensorSpec.make("f32", [1, 2, 8]))
    with pytest.raises(OpError, match=r"box logits must have shape \[N, 12\]"):
        _do(DetectionOutput8Attrs(**CORNER_ATTRS), np.zeros((1, 8)), np.zeros((1, 9)), PRIORS)


def test_detection_output_suppression_chain():
    # 40 boxes in a row, each 0.3 of a width right of the one before: IoU 0.7 / 1.3 with the
    # next one (above 0.45), 0.4 / 1.6 with the one after; scores fall along the row. Greedy
    # NMS keeps every other box: each suppression depends on the one before it, in one block
    # and across blocks of 16 candidates.
    p = 40
    x = np.arange(p) * 0.3 * 0.02
    pri = np.stack([x, np.zeros(p), x + 0.02, np.full(p, 0.02)], 1).reshape(1, 1, -1)
    pri = np.concatenate([pri, np.ones_like(pri)], 1)
    conf = np.stack([np.zeros(p), 0.9 - np.arange(p) * 0.01], 1).reshape(1, -1)
    conf = np.concatenate([conf, conf])                     # two images
    a = DetectionOutput8Attrs(keep_top_k=(-1,), nms_threshold=0.45, normalized=True,
                              confidence_threshold=0.1)
    for block in (256, 16):
        with mock.patch.object(detection, "_NMS_BLOCK", block):
            out = _do(a, np.zeros((2, p * 4)), conf, pri)
        kept = out[:np.flatnonzero(out[:, 0] == -1)[0]]
        assert kept[:, 0].tolist() == [0] * 20 + [1] * 20
        np.testing.assert_array_equal(kept[:20, 2], F32(conf[0, 1::4]))    # boxes 0, 2, 4, ...
        np.testing.assert_array_equal(kept[:20, 3], F32(x[::2]))


def _do_reference(attrs, loc, conf, priors, arm_conf=None, arm_loc=None):
    """DetectionOutput one image and one class at a time, NMS one kept box at a time."""
    n, num_c = loc.shape[0], attrs.num_classes if getattr(attrs, "v1", False) else None
    psize = 4 if attrs.normalized else 5
    num_p = priors.shape[2] // psize
    num_c = num_c or conf.shape[1] // num_p
    num_lc = 1 if attrs.share_location else num_c
    pb, bg = priors.shape[0], attrs.background_label_id
    rows = detection._do_rows(attrs, {"N": Dim.of(n), "P": num_p, "C": num_c}).value
    loc = loc.reshape(n, num_p, num_lc, 4)
    conf = conf.reshape(n, num_p, num_c).transpose(0, 2, 1).copy()
    pboxes = priors[:, 0, :num_p * psize].reshape(pb, num_p, psize)[..., psize - 4:]
    pvars = None if attrs.variance_encoded_in_target else \
        priors.reshape(pb, -1)[:, num_p * psize:num_p * psize + num_p * 4].reshape(pb, num_p, 4)
    if arm_conf is not None:
        low = arm_conf.reshape(n, num_p, 2)[:, :, 1] < F32(attrs.objectness_score)
        conf = np.where(low[:, None, :], (np.arange(num_c) == bg).astype(F32)[None, :, None], conf)
        arm_loc = arm_loc.reshape(loc.shape)

    def greedy(boxes, order):
        sizes = detection._box_sizes(boxes)
        kept, alive = [], order
        while alive.size:
            i, rest = alive[0], alive[1:]
            kept.append(int(i))
            b, o = boxes[i], boxes[rest]
            disjoint = (o[:, 0] > b[2]) | (o[:, 2] < b[0]) | (o[:, 1] > b[3]) | (o[:, 3] < b[1])
            iw = np.minimum(b[2], o[:, 2]) - np.maximum(b[0], o[:, 0])
            ih = np.minimum(b[3], o[:, 3]) - np.maximum(b[1], o[:, 1])
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                iou = iw * ih / (sizes[i] + sizes[rest] - iw * ih)
            iou = np.where(~disjoint & (iw > 0) & (ih > 0), iou, F32(0))
            alive = rest[~(iou > F32(attrs.nms_threshold))]
        return kept

    out, count = np.zeros((rows, 7), F32), 0
    for i in range(n):
        k, var = (0 if pb == 1 else i), None
        var = None if pvars is None else pvars[k]
        decoded = {}
        for c in range(num_lc):
            base = pboxes[k]
            if arm_loc is not None:
                base = detection._decode(attrs, base, var, arm_loc[i, :, c])
            decoded[c] = detection._decode(attrs, base, var, loc[i, :, c])
        at = (lambda c: decoded[0 if attrs.share_location else c])
        found = {}
        if not attrs.decrease_label_id:
            for c in range(num_c):
                if c != bg:
                    s = conf[i, c]
                    idx = np.flatnonzero(s > F32(attrs.confidence_threshold))
                    order = idx[np.lexsort((idx, -s[idx]))]
                    found[c] = greedy(at(c), order[:attrs.top_k] if attrs.top_k > -1 else order)
        else:
            cand = np.arange(1, num_c)
            cand = cand[cand != bg] if bg > -1 else cand
            if cand.size:
                best = np.argmax(conf[i, cand], axis=0)
                score = conf[i, cand][best, np.arange(num_p)]
                idx = np.flatnonzero((score > F32(-1)) & (score >= F32(attrs.confidence_threshold)))
                order = idx[np.lexsort((idx, -score[idx]))]
                order = order[:attrs.top_k] if attrs.top_k != -1 else order
                for c in np.unique(cand[best[order]]):
                    found[int(c)] = greedy(at(c), order[cand[best[order]] == c])
        dets = [(-conf[i, c, j], j, c) for c in sorted(found) for j in found[c]]
        if attrs.keep_top_k[0] > -1:
            dets = sorted(dets)[:attrs.keep_top_k[0]]
        for _, j, c in sorted(dets, key=lambda d: (d[2], d[0], d[1])):
            b = at(c)[j]
            b = np.clip(b, F32(0), F32(1)) if attrs.clip_after_nms else b
            out[count] = [i, c - 1 if attrs.decrease_label_id else c, conf[i, c, j], *b]
            count += 1
    if count < rows:
        out[count, 0] = -1
    return out


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_detection_output_against_a_per_box_reference(data):
    # ties in the scores (quantised), NaN and infinite scores, priors crowded into chains,
    # negative and out-of-range thresholds and ids, blocks of 16 candidates or one
    v1 = data.draw(st.booleans(), label="v1")
    n, p = data.draw(st.integers(0, 3)), data.draw(st.integers(1, 80))
    c = data.draw(st.integers(1, 5))
    share, venc = data.draw(st.booleans()), data.draw(st.booleans())
    normalized = data.draw(st.booleans())
    pb = data.draw(st.sampled_from([1, n])) if n else 1
    arm = data.draw(st.booleans(), label="arm") and pb == n and n > 0
    attrs = {"keep_top_k": (data.draw(st.sampled_from([-1, 0, 1, 3, 10, 200])),),
             "nms_threshold": data.draw(st.sampled_from([0.0, 0.1, 0.3, 0.45, 0.7, 1.0, -0.1])),
             "confidence_threshold": data.draw(st.sampled_from([0.0, 0.2, 0.5, 0.8, -1.0])),
             "top_k": data.draw(st.sampled_from([-1, 0, 1, 5, 400, -2])),
             "background_label_id": data.draw(st.sampled_from([-1, 0, 1, 7])),
             "code_type": data.draw(st.sampled_from(["caffe.PriorBoxParameter.CORNER",
                                                     "caffe.PriorBoxParameter.CENTER_SIZE"])),
             "clip_before_nms": data.draw(st.booleans()),
             "clip_after_nms": data.draw(st.booleans()),
             "share_location": share, "variance_encoded_in_target": venc, "normalized": normalized,
             "input_width": 300, "input_height": 200,
             "decrease_label_id": data.draw(st.booleans(), label="decrease_label_id")}
    if arm:
        attrs["objectness_score"] = data.draw(st.floats(0.0, 0.9))
    a = DetectionOutput1Attrs(**attrs, num_classes=c) if v1 else DetectionOutput8Attrs(**attrs)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    ins = _ssd_inputs(rng, n, p, c, share, venc, normalized, pb, arm,
                      spread=data.draw(st.sampled_from([0.05, 0.3, 1.0])))
    q = data.draw(st.sampled_from([0, 4, 10]), label="score levels")
    ins["conf"] = (np.round(ins["conf"] * q) / q).astype(F32) if q else ins["conf"]
    if data.draw(st.booleans(), label="odd scores") and ins["conf"].size:
        ins["conf"].flat[rng.integers(0, ins["conf"].size, 3)] = [np.nan, np.inf, -0.0]
    args = list(ins.values())
    want = _do_reference(a, *args)
    with mock.patch.object(detection, "_NMS_BLOCK", data.draw(st.sampled_from([16, 256]))):
        got = DetectionOutput1.run(a, *args)[0].reshape(-1, 7)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# ------------------------------------------------------------------ ROIAlign, ROIPooling

def test_roi_align_spec_example_shapes():
    a = ROIAlign9Attrs(pooled_h=6, pooled_w=6, spatial_scale=16.0, sampling_ratio=2, mode="avg",
                       aligned_mode="half_pixel")
    (out,) = ROIAlign3.infer(a, TensorSpec.make("f32", [7, 256, 200, 200]),
                             TensorSpec.make("f32", [1000, 4]), TensorSpec.make("i32", [1000]))
    assert out.shape == tuple(map(Dim.of, (1000, 256, 6, 6))) and out.etype.name == "f32"


def test_roi_align_by_hand():
    x = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    a = ROIAlign3Attrs(pooled_h=1, pooled_w=1, sampling_ratio=1, spatial_scale=1.0, mode="avg")
    # the box [0, 0, 2, 2]: one sample at its centre (1, 1) -> x[1, 1] = 5
    (y,) = ROIAlign3.run(a, x, np.array([[0, 0, 2, 2]], F32), np.array([0]))
    assert y.tolist() == [[[[5.0]]]]
    # half_pixel_for_nn: the box becomes [-0.5, -0.5, 1.5, 1.5], centre (0.5, 0.5): the mean
    # of 0, 1, 4, 5
    a9 = ROIAlign9Attrs(pooled_h=1, pooled_w=1, sampling_ratio=1, spatial_scale=1.0, mode="avg",
                        aligned_mode="half_pixel_for_nn")
    (y,) = ROIAlign3.run(a9, x, np.array([[0, 0, 2, 2]], F32), np.array([0]))
    assert y.tolist() == [[[[2.5]]]]


def test_roi_align_outside_zero_area_and_empty():
    x = np.arange(16, dtype=F32).reshape(1, 1, 4, 4) - 20       # all negative
    a = ROIAlign3Attrs(pooled_h=2, pooled_w=2, sampling_ratio=2, spatial_scale=1.0, mode="avg")
    # far outside the map: every sample is dropped, the bins are 0
    (y,) = ROIAlign3.run(a, x, np.array([[10, 10, 14, 14]], F32), np.array([0]))
    assert not y.any()
    # max pooling starts from 0 (OpenVINO's reference and CPU plugin): negative maps give 0
    (y,) = ROIAlign3.run(ROIAlign3Attrs(2, 2, 2, 1.0, "max"), x, np.array([[0, 0, 3, 3]], F32),
                         np.array([0]))
    assert not y.any()
    # zero-area box, aligned mode, adaptive sampling: no samples, 0 (the CPU plugin gives NaN)
    a9 = ROIAlign9Attrs(2, 2, 0, 1.0, "avg", "half_pixel")
    (y,) = ROIAlign3.run(a9, x, np.array([[1, 1, 1, 1]], F32), np.array([0]))
    assert not y.any() and not np.isnan(y).any()
    # asymmetric: a zero-area box is a 1 x 1 box
    (y,) = ROIAlign3.run(ROIAlign3Attrs(1, 1, 1, 1.0, "avg"), x + 20, np.array([[1, 1, 1, 1]], F32),
                         np.array([0]))
    assert y.tolist() == [[[[F32(7.5)]]]]                       # sample (1.5, 1.5)
    (y,) = ROIAlign3.run(a, x, np.zeros((0, 4), F32), np.zeros(0, np.int64))
    assert y.shape == (0, 1, 2, 2)


def test_roi_errors():
    a = ROIAlign3Attrs(2, 2, 2, 1.0, "avg")
    with pytest.raises(OpError, match=r"batch_indices\[1\] = 3 is outside \[0, 1\]"):
        ROIAlign3.run(a, np.zeros((2, 1, 4, 4), F32), np.zeros((2, 4), F32), np.array([0, 3]))
    with pytest.raises(ShapeError, match=r"boxes must have shape \[NUM_ROIS, 4\]"):
        ROIAlign3.infer(a, TensorSpec.make("f32", [1, 1, 4, 4]), TensorSpec.make("f32", [3, 5]),
                        TensorSpec.make("i32", [3]))
    with pytest.raises(ShapeError, match="one entry per box"):
        ROIAlign3.infer(a, TensorSpec.make("f32", [1, 1, 4, 4]), TensorSpec.make("f32", [3, 4]),
                        TensorSpec.make("i32", [2]))
    # sampling_ratio 0 counts samples from the box's size: a NaN or infinite box has none
    with pytest.raises(OpError, match=r"box 1 \[0.0, 0.0, nan, 1.0\] has no finite size"):
        ROIAlign3.run(ROIAlign3Attrs(2, 2, 0, 1.0, "avg"), np.zeros((1, 1, 4, 4), F32),
                      np.array([[0, 0, 1, 1], [0, 0, np.nan, 1]], F32), np.array([0, 0]))
    with pytest.raises(OpError, match=r"batch id\) at box\[0\] = -1"):
        ROIPooling2.run(ROIPoolingAttrs(1, 1, 1.0), np.zeros((1, 1, 4, 4), F32),
                        np.array([[-1, 0, 0, 1, 1]], F32))


def test_roi_pooling_by_hand():
    x = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    (out,) = ROIPooling2.infer(ROIPoolingAttrs(6, 6, 0.0625), TensorSpec.make("f32", [1, 256, 14, 14]),
                               TensorSpec.make("f32", [None, 5]))
    assert out.shape == (Dim(0, None), Dim.of(256), Dim.of(6), Dim.of(6))
    (y,) = ROIPooling2.run(ROIPoolingAttrs(2, 2, 1.0), x, np.array([[0, 0, 0, 3, 3]], F32))
    assert y.tolist() == [[[[5, 7], [13, 15]]]]
    # outside the map: empty bins are 0
    (y,) = ROIPooling2.run(ROIPoolingAttrs(1, 1, 1.0), x, np.array([[0, 9, 9, 12, 12]], F32))
    assert y.tolist() == [[[[0]]]]
    # bilinear: normalized corners, corner samples exact
    (y,) = ROIPooling2.run(ROIPoolingAttrs(2, 2, 1.0, "bilinear"), x, np.array([[0, 0, 0, 1, 1]], F32))
    assert y.tolist() == [[[[0, 3], [12, 15]]]]


# ------------------------------------------------------------------ RegionYolo, ReorgYolo

def test_region_yolo_spec_examples():
    v3 = RegionYoloAttrs(anchors=(10, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319), axis=1,
                         classes=80, coords=4, do_softmax=False, end_axis=3, mask=(0, 1, 2), num=6)
    (out,) = RegionYolo1.infer(v3, TensorSpec.make("f32", [1, 255, 26, 26]))
    assert out.shape == tuple(map(Dim.of, (1, 255, 26, 26)))
    v2 = RegionYoloAttrs(anchors=(1.08, 1.19, 3.42, 4.41, 6.63, 11.38, 9.42, 5.11, 16.62, 10.52),
                         axis=1, classes=20, coords=4, do_softmax=True, end_axis=3, num=5)
    (out,) = RegionYolo1.infer(v2, TensorSpec.make("f32", [1, 125, 13, 13]))
    assert out.shape == (Dim.of(1), Dim.of(21125))


def test_region_yolo_by_hand():
    a = RegionYoloAttrs(axis=1, classes=2, coords=4, end_axis=3, num=1)
    x = np.zeros((1, 7, 1, 1), F32)
    x[0, :, 0, 0] = [0, 2, 5, 6, -1, 1, 1 + np.log(3)]
    (y,) = RegionYolo1.run(a, x)
    sig = lambda v: 1 / (1 + np.exp(-v))
    # x, y and objectness through a sigmoid, w and h as they are, the classes a softmax
    np.testing.assert_allclose(y[0], [0.5, sig(2), 5, 6, sig(-1), 0.25, 0.75], rtol=1e-6)
    (y,) = RegionYolo1.run(RegionYoloAttrs(axis=1, classes=2, coords=4, end_axis=3, num=3,
                                           do_softmax=False, mask=(0,)), x)
    np.testing.assert_allclose(y[0, :, 0, 0], [0.5, sig(2), 5, 6, sig(-1), sig(1), sig(1 + np.log(3))],
                               rtol=1e-6)
    with pytest.raises(ShapeError, match="needs at least .* = 14 channels"):
        RegionYolo1.infer(RegionYoloAttrs(axis=1, classes=2, coords=4, end_axis=3, num=2),
                          TensorSpec.make("f32", [1, 7, 1, 1]))


def test_reorg_yolo():
    (out,) = ReorgYolo2.infer(ReorgYoloAttrs((2,)), TensorSpec.make("f32", [1, 64, 26, 26]))
    assert out.shape == tuple(map(Dim.of, (1, 256, 13, 13)))
    x = np.arange(32, dtype=F32).reshape(1, 8, 2, 2)
    (y,) = ReorgYolo2.run(ReorgYoloAttrs((2,)), x)
    # the CPU plugin's result for this input
    assert y.reshape(-1).tolist() == [0, 2, 8, 10, 16, 18, 24, 26, 1, 3, 9, 11, 17, 19, 25, 27,
                                      4, 6, 12, 14, 20, 22, 28, 30, 5, 7, 13, 15, 21, 23, 29, 31]
    with pytest.raises(ShapeError, match="must be a multiple of the stride 2"):
        ReorgYolo2.infer(ReorgYoloAttrs((2,)), TensorSpec.make("f32", [1, 8, 5, 4]))
    with pytest.raises(ShapeError, match="one positive value"):
        ReorgYolo2.infer(ReorgYoloAttrs((2, 3)), TensorSpec.make("f32", [1, 8, 4, 4]))


# ------------------------------------------------------------------ Proposal

PROP = {"base_size": 16, "feat_stride": 8, "min_size": 16, "nms_thresh": 1.0, "normalize": False,
            "post_nms_topn": 1000, "pre_nms_topn": 1000, "ratio": (1.0,), "scale": (1.0, 2.0)}


def test_proposal_spec_example_shapes():
    ins = (TensorSpec.make("f32", [7, 4, 28, 28]), TensorSpec.make("f32", [7, 8, 28, 28]),
           TensorSpec.make("f32", [3]))
    (out,) = Proposal1.infer(Proposal1Attrs(**PROP), *ins)
    assert out.shape == (Dim.of(7000), Dim.of(5))
    out, probs = Proposal1.infer(Proposal4Attrs(**PROP), *ins)
    assert out.shape == (Dim.of(7000), Dim.of(5)) and probs.shape == (Dim.of(7000),)
    with pytest.raises(ShapeError, match="2 \\* 2 anchors' channels"):
        Proposal1.infer(Proposal1Attrs(**PROP), TensorSpec.make("f32", [7, 6, 28, 28]), *ins[1:])


def test_proposal_by_hand():
    # one anchor (base 16, ratio 1, scale 1): Caffe's box [0, 0, 15, 15] at each cell, stride 16
    a = Proposal4Attrs(**dict(PROP, min_size=4, post_nms_topn=3, pre_nms_topn=10, scale=(1.0,),
                              feat_stride=16, nms_thresh=0.7))
    probs = np.zeros((1, 2, 1, 2), F32)
    probs[0, 1, 0] = [0.3, 0.8]                            # foreground scores of the two cells
    deltas = np.zeros((1, 4, 1, 2), F32)
    rois, sc = Proposal1.run(a, probs, deltas, np.array([16, 100, 1], F32))
    # Caffe's decoding adds 1 to widths: [16, 0, 31, 15] decodes to [16, 0, 32, 16], then
    # clipped to the image (height 16: y up to 15)
    assert rois.tolist() == [[0, 16, 0, 32, 15], [0, 0, 0, 16, 15], [-1, 0, 0, 0, 0]]
    assert sc.tolist() == [F32(0.8), F32(0.3), 0]
    # partly outside the image: clipped to width 4, below min_size 5: score 0, still ranked
    a5 = Proposal4Attrs(**dict(PROP, min_size=5, post_nms_topn=3, pre_nms_topn=10,
                               scale=(1.0,), feat_stride=16, nms_thresh=0.7))
    rois, sc = Proposal1.run(a5, probs, deltas, np.array([16, 20, 1], F32))
    assert rois[:2].tolist() == [[0, 0, 0, 16, 15], [0, 16, 0, 19, 15]]
    assert sc.tolist() == [F32(0.3), 0, 0]
    # pre_nms_topn 1: only the best proposal reaches NMS
    a1 = Proposal4Attrs(**dict(PROP, min_size=4, post_nms_topn=3, pre_nms_topn=1, scale=(1.0,),
                               feat_stride=16, nms_thresh=0.7))
    rois, sc = Proposal1.run(a1, probs, deltas, np.array([16, 100, 1], F32))
    assert rois[:2].tolist() == [[0, 16, 0, 32, 15], [-1, 0, 0, 0, 0]]
    with pytest.raises(OpError, match="positive image height and width"):
        Proposal1.run(a5, probs, deltas, np.array([0, 20, 1], F32))


# ------------------------------------------------------------------ PSROIPooling

def test_psroi_pooling_spec_example_and_by_hand():
    a = PSROIPoolingAttrs(group_size=6, mode="bilinear", output_dim=360, spatial_bins_x=3,
                          spatial_bins_y=3, spatial_scale=1.0)
    (out,) = PSROIPooling1.infer(a, TensorSpec.make("f32", [1, 3240, 38, 38]),
                                 TensorSpec.make("f32", [300, 5]))
    assert out.shape == tuple(map(Dim.of, (300, 360, 6, 6)))
    with pytest.raises(ShapeError, match="need output_dim \\* group_size\\^2 = 8 channels"):
        PSROIPooling1.infer(PSROIPoolingAttrs(output_dim=2, spatial_scale=1.0, group_size=2),
                            TensorSpec.make("f32", [1, 6, 4, 4]), TensorSpec.make("f32", [3, 5]))
    # average, group 2: bin (i, j) reads channel i * 2 + j over its quarter of the box
    x = np.stack([np.full((4, 4), v, F32) for v in (1, 2, 3, 4)])[None]
    a = PSROIPoolingAttrs(output_dim=1, spatial_scale=1.0, group_size=2)
    (y,) = PSROIPooling1.run(a, x, np.array([[0, 0, 0, 3, 3]], F32))
    assert y.tolist() == [[[[1, 2], [3, 4]]]]
    # a box reaching past the map: bins that start beyond it are 0
    (y,) = PSROIPooling1.run(a, x, np.array([[0, 2, 2, 9, 9]], F32))
    assert y.tolist() == [[[[1, 0], [0, 0]]]]


# ------------------------------------------------------------------ ROIAlignRotated

def test_roi_align_rotated():
    a = ROIAlignRotatedAttrs(pooled_h=6, pooled_w=6, spatial_scale=16.0, sampling_ratio=2,
                             clockwise_mode=True)
    (out,) = ROIAlignRotated15.infer(a, TensorSpec.make("f32", [7, 256, 200, 200]),
                                     TensorSpec.make("f32", [1000, 5]), TensorSpec.make("i32", [1000]))
    assert out.shape == tuple(map(Dim.of, (1000, 256, 6, 6)))
    x = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    a = ROIAlignRotatedAttrs(pooled_h=2, pooled_w=2, sampling_ratio=1, spatial_scale=1.0)
    # centre (2, 2) - 0.5 = pixel (1.5, 1.5), a 2 x 2 box: samples at pixels 1 and 2
    (y,) = ROIAlignRotated15.run(a, x, np.array([[2, 2, 2, 2, 0]], F32), np.array([0]))
    assert y.tolist() == [[[[5, 6], [9, 10]]]]
    # a half turn swaps the bins, either direction
    for cw in (False, True):
        (y,) = ROIAlignRotated15.run(ROIAlignRotatedAttrs(2, 2, 1, 1.0, cw), x,
                                     np.array([[2, 2, 2, 2, np.pi]], F32), np.array([0]))
        np.testing.assert_allclose(y, [[[[10, 9], [6, 5]]]], atol=1e-5)
    # a quarter turn: counterclockwise and clockwise differ
    (ccw,) = ROIAlignRotated15.run(a, x, np.array([[2, 2, 2, 2, np.pi / 2]], F32), np.array([0]))
    (cw,) = ROIAlignRotated15.run(ROIAlignRotatedAttrs(2, 2, 1, 1.0, True), x,
                                  np.array([[2, 2, 2, 2, np.pi / 2]], F32), np.array([0]))
    np.testing.assert_allclose(ccw, [[[[9, 5], [10, 6]]]], atol=1e-5)
    np.testing.assert_allclose(cw, [[[[6, 10], [5, 9]]]], atol=1e-5)
    # outside the map: 0
    (y,) = ROIAlignRotated15.run(a, x, np.array([[20, 20, 2, 2, 0.3]], F32), np.array([0]))
    assert not y.any()


# ------------------------------------------------------------------ ExperimentalDetectronPriorGridGenerator

def test_prior_grid_generator():
    op = ExperimentalDetectronPriorGridGenerator6
    a = PriorGridAttrs(flatten=True, h=0, w=0, stride_x=32.0, stride_y=32.0)
    (out,) = op.infer(a, TensorSpec.make("f32", [3, 4]), TensorSpec.make("f32", [1, 256, 25, 42]),
                      TensorSpec.make("f32", [1, 3, 800, 1344]))
    assert out.shape == (Dim.of(3150), Dim.of(4))            # 25 * 42 * 3
    (out,) = op.infer(PriorGridAttrs(flatten=False), TensorSpec.make("f32", [3, 4]),
                      TensorSpec.make("f32", [1, 256, None, 42]), TensorSpec.make("f32", [1, 3, 800, 1344]))
    assert out.shape == (Dim(0, None), Dim.of(42), Dim.of(3), Dim.of(4))
    pri = np.array([[-1, -2, 1, 2]], F32)
    (y,) = op.run(PriorGridAttrs(), pri, np.zeros((1, 1, 2, 2), F32), np.zeros((1, 1, 8, 16), F32))
    # steps 16 / 2 = 8 in x and 8 / 2 = 4 in y; centres at (i + 0.5) * step
    assert y.tolist() == [[3, 0, 5, 4], [11, 0, 13, 4], [3, 4, 5, 8], [11, 4, 13, 8]]
    (y,) = op.run(PriorGridAttrs(h=1, w=1), pri, np.zeros((1, 1, 2, 2), F32), np.zeros((1, 1, 8, 16), F32))
    assert y.tolist() == [[7, 2, 9, 6], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]


# ------------------------------------------------------------------ ExperimentalDetectronROIFeatureExtractor

def test_roi_feature_extractor():
    op = ExperimentalDetectronROIFeatureExtractor6
    a = ROIFeatureExtractorAttrs(output_size=7, sampling_ratio=2, pyramid_scales=(4, 8, 16, 32))
    feats = [TensorSpec.make("f32", [1, 256, 200 // 2**k, 336 // 2**k]) for k in range(4)]
    out, rois = op.infer(a, TensorSpec.make("f32", [1000, 4]), *feats)
    assert out.shape == tuple(map(Dim.of, (1000, 256, 7, 7))) and rois.shape == (Dim.of(1000), Dim.of(4))
    # levels: sqrt(area) / 224 -> log2 + 2, clipped; no area: no level (zeros)
    boxes = np.array([[0, 0, 56, 56], [0, 0, 224, 224], [0, 0, 2000, 2000], [5, 5, 5, 9]], F32)
    a2 = ROIFeatureExtractorAttrs(output_size=1, sampling_ratio=1, pyramid_scales=(16, 32, 64, 128))
    maps = [np.full((1, 1, 8, 8), k + 1, F32) for k in range(4)]
    y, r = op.run(a2, boxes, *maps)
    assert y.reshape(-1).tolist() == [1, 3, 4, 0] and np.array_equal(r, boxes)


# ------------------------------------------------------------------ ExperimentalDetectronGenerateProposalsSingleImage

def test_generate_proposals_single_image():
    op = ExperimentalDetectronGenerateProposalsSingleImage6
    a = GenerateProposalsSingleImageAttrs(min_size=0.0, nms_threshold=0.7, post_nms_count=1000,
                                          pre_nms_count=1000)
    rois, sc = op.infer(a, TensorSpec.make("f32", [3]), TensorSpec.make("f32", [201600, 4]),
                        TensorSpec.make("f32", [12, 200, 336]), TensorSpec.make("f32", [3, 200, 336]))
    assert rois.shape == (Dim.of(1000), Dim.of(4)) and sc.shape == (Dim.of(1000),)
    # two anchors at one cell, zero deltas: boxes stay (x1, y1 lose Detectron's +1 and come
    # back), the overlapping one is suppressed, the rest of the rows are 0
    anchors = np.array([[0, 0, 9, 9], [1, 0, 10, 9]], F32)
    a = GenerateProposalsSingleImageAttrs(0.0, 0.5, 3, 10)
    rois, sc = op.run(a, np.array([100, 100, 1], F32), anchors, np.zeros((8, 1, 1), F32),
                      np.array([[[0.6]], [[0.9]]], F32))
    assert rois.tolist() == [[1, 0, 10, 9], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert sc.tolist() == [F32(0.9), 0, 0]
    # boxes outside the image are clipped; below min_size their score is 0
    rois, sc = op.run(GenerateProposalsSingleImageAttrs(5.0, 0.5, 2, 10), np.array([5, 5, 1], F32),
                      anchors, np.zeros((8, 1, 1), F32), np.array([[[0.6]], [[0.9]]], F32))
    assert rois.tolist()[0] == [0, 0, 4, 4] and sc.tolist() == [F32(0.6), 0]


# ------------------------------------------------------------------ GenerateProposals

def test_generate_proposals():
    a = GenerateProposals9Attrs(min_size=0.0, nms_threshold=0.7, pre_nms_count=1000,
                                post_nms_count=300, roi_num_type="i32")
    rois, sc, num = GenerateProposals9.infer(
        a, TensorSpec.make("f32", [8, 3]), TensorSpec.make("f32", [50, 84, 3, 4]),
        TensorSpec.make("f32", [8, 12, 50, 84]), TensorSpec.make("f32", [8, 3, 50, 84]))
    assert rois.shape == (Dim(0, 2400), Dim.of(4)) and sc.shape == (Dim(0, 2400),)
    assert num.shape == (Dim.of(8),) and num.etype.name == "i32"
    anchors = np.array([[[[0, 0, 9, 9], [1, 0, 10, 9]]]], F32)          # [1, 1, 2, 4]
    scores = np.array([[[[0.6]], [[0.9]]], [[[0.9]], [[0.6]]]], F32)     # two images
    rois, sc, num = GenerateProposals9.run(GenerateProposals9Attrs(0.0, 0.5, 10, 3), np.array(
        [[100, 100, 1], [100, 100, 1]], F32), anchors, np.zeros((2, 8, 1, 1), F32), scores)
    # normalized boxes: no +1; the overlapping box is suppressed in each image; no padding
    assert rois.tolist() == [[1, 0, 10, 9], [0, 0, 9, 9]] and num.tolist() == [1, 1]
    assert sc.tolist() == [F32(0.9), F32(0.9)]
    # a box under min_size (after clipping to a 5 x 5 image) is never kept
    rois, sc, num = GenerateProposals9.run(GenerateProposals9Attrs(6.0, 0.5, 10, 3), np.array(
        [[5, 5, 1], [100, 100, 1]], F32), anchors, np.zeros((2, 8, 1, 1), F32), scores)
    assert num.tolist() == [0, 1]


# ------------------------------------------------------------------ DeformablePSROIPooling

def test_deformable_psroi_pooling():
    op = DeformablePSROIPooling1
    a = DeformablePSROIPoolingAttrs(output_dim=8, spatial_scale=0.0625, group_size=7,
                                    spatial_bins_x=4, spatial_bins_y=4, trans_std=0.1, part_size=7)
    (out,) = op.infer(a, TensorSpec.make("f32", [1, 392, 38, 63]), TensorSpec.make("f32", [300, 5]),
                      TensorSpec.make("f32", [300, 2, 7, 7]))
    assert out.shape == tuple(map(Dim.of, (300, 8, 7, 7)))
    # one bin, one sub-bin at the box's top-left corner (x1 - 0.5 = pixel 0.5): the mean of the
    # four pixels around it; offsets move it by (0.25, 0.5) box sizes (the box is 1 pixel)
    x = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    a = DeformablePSROIPoolingAttrs(output_dim=1, spatial_scale=1.0)
    (y,) = op.run(a, x, np.array([[0, 1, 1, 1, 1]], F32))
    assert y.tolist() == [[[[2.5]]]]
    (y,) = op.run(a, x, np.array([[0, 1, 1, 1, 1]], F32), np.array([[[[0.25]], [[0.5]]]], F32))
    assert y.tolist() == [[[[4.75]]]]                    # at (x, y) = (0.75, 1): 4 + 0.75
    # outside the map: no sub-bin counts, 0; a negative batch id skips the box
    (y,) = op.run(a, x, np.array([[0, 9, 9, 9, 9], [-1, 1, 1, 1, 1]], F32))
    assert not y.any()


# ------------------------------------------------------------------ ExperimentalDetectronDetectionOutput

def test_ed_detection_output():
    op = ExperimentalDetectronDetectionOutput6
    a = EDDetectionOutputAttrs(score_threshold=0.05, nms_threshold=0.5, max_delta_log_wh=4.135,
                               num_classes=81, post_nms_count=2000, max_detections_per_image=100,
                               deltas_weights=(10.0, 10.0, 5.0, 5.0))
    boxes, classes, _scores = op.infer(a, TensorSpec.make("f32", [1000, 4]),
                                      TensorSpec.make("f32", [1000, 324]),
                                      TensorSpec.make("f32", [1000, 81]), TensorSpec.make("f32", [1, 3]))
    assert boxes.shape == (Dim.of(100), Dim.of(4)) and classes.etype.name == "i32"
    # two ROIs, zero deltas: Detectron's +1 widths cancel; class 0 (background) is skipped; the
    # second ROI overlaps the first in class 1 and is suppressed; a zero-width ROI gives nothing
    a = EDDetectionOutputAttrs(0.1, 0.5, 4.135, 2, 10, 4, (1.0, 1.0, 1.0, 1.0))
    rois = np.array([[0, 0, 9, 9], [1, 0, 10, 9], [5, 5, 5, 9]], F32)
    sc = np.array([[0.9, 0.8], [0.1, 0.7], [0.2, 0.9]], F32)
    b, c, s = op.run(a, rois, np.zeros((3, 8), F32), sc, np.array([[100, 100, 1]], F32))
    assert b.tolist() == [[0, 0, 9, 9], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert c.tolist() == [1, 0, 0, 0] and s.tolist() == [F32(0.8), 0, 0, 0]


# ------------------------------------------------------------------ OpenVINO

ov = pytest.importorskip("openvino")
oracle = pytest.importorskip("oracle")
import openvino.opset1 as o1
import openvino.opset8 as o8


def _const_model(node):
    return ov.Model([o8.result(node)], [], "m")


@pytest.mark.oracle
@settings(max_examples=20)
@given(data=st.data())
def test_oracle_prior_box(data, tmp_path_factory):
    v8 = data.draw(st.booleans(), label="v8")
    h, w = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    ih, iw = data.draw(st.integers(8, 300)), data.draw(st.integers(8, 300))
    sizes = st.lists(st.floats(1, 64, width=32), min_size=1, max_size=3)
    ratios = st.lists(st.sampled_from([0.5, 2.0, 3.0, 1.0, 1 / 3]), max_size=3)
    attrs = {"offset": data.draw(st.sampled_from([0.0, 0.5, 0.3])),
                 "flip": data.draw(st.booleans()), "clip": data.draw(st.booleans()),
                 "step": data.draw(st.sampled_from([0.0, 8.0, 16.0, 5.5])),
                 "variance": data.draw(st.sampled_from([[], [0.1], [0.1, 0.1, 0.2, 0.2]])),
                 "aspect_ratio": data.draw(ratios)}
    mode = data.draw(st.sampled_from(["minmax", "mxnet", "fixed"]), label="mode")
    if mode == "fixed":
        fs = data.draw(st.lists(st.integers(2, 40).map(float), min_size=1, max_size=2))
        attrs.update(fixed_size=fs, density=[float(data.draw(st.integers(1, 3))) for _ in fs])
    elif mode == "mxnet":
        attrs.update(min_size=data.draw(st.lists(st.floats(0.0625, 0.875, width=32), min_size=1,
                                                 max_size=3)), scale_all_sizes=False)
    else:
        mins = data.draw(sizes)
        attrs.update(min_size=mins, max_size=[m * 2 for m in mins[:data.draw(st.integers(0, len(mins)))]])
    if v8:
        attrs["min_max_aspect_ratios_order"] = data.draw(st.booleans())
    op = o8.prior_box if v8 else o1.prior_box
    node = op(o8.constant(np.array([h, w], np.int64)), o8.constant(np.array([ih, iw], np.int64)),
              attrs)
    oracle.compare(_const_model(node), {}, rtol=1e-6, atol=1e-7,
                   tmpdir=tmp_path_factory.mktemp("pb"))


@pytest.mark.oracle
@settings(max_examples=15)
@given(data=st.data())
def test_oracle_prior_box_clustered(data, tmp_path_factory):
    n = data.draw(st.integers(1, 4))
    dims = st.lists(st.floats(1, 100, width=32), min_size=n, max_size=n)
    attrs = {"offset": data.draw(st.sampled_from([0.25, 0.5])), "width": data.draw(dims),
                 "height": data.draw(dims), "clip": data.draw(st.booleans()),
                 "variance": data.draw(st.sampled_from([[], [0.1], [0.1, 0.1, 0.2, 0.2]])),
                 "step": data.draw(st.sampled_from([0.0, 16.0]))}
    if data.draw(st.booleans(), label="own steps"):   # the Python API refuses 0 for these
        attrs.update(step_widths=10.0, step_heights=12.0)
    h, w = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    node = o1.prior_box_clustered(o8.constant(np.array([h, w], np.int64)),
                                  o8.constant(np.array([data.draw(st.integers(8, 300)),
                                                        data.draw(st.integers(8, 300))], np.int64)),
                                  attrs)
    oracle.compare(_const_model(node), {}, rtol=1e-6, atol=1e-7,
                   tmpdir=tmp_path_factory.mktemp("pbc"))


def _ssd_inputs(rng, n, p, c, share, venc, normalized, pb, arm, spread=1.0):
    lc = 1 if share else c
    ins = {"loc": (rng.standard_normal((n, p * lc * 4)) * 0.3).astype(F32),
           "conf": rng.permutation(n * p * c).reshape(n, p * c).astype(F32) / F32(n * p * c)}
    ps = 4 if normalized else 5
    # some priors start outside the image; a small spread crowds them (chains of overlaps)
    xy = (rng.random((pb, p, 2)) * 1.1 - 0.1) * spread
    boxes = np.concatenate([xy, xy + rng.random((pb, p, 2)) * 0.3 + 0.01], -1)
    if not normalized:
        boxes = np.concatenate([np.zeros((pb, p, 1)), boxes * [300, 200, 300, 200]], -1)
    rows = [boxes.reshape(pb, -1)]
    if not venc:
        var = np.tile([0.1, 0.1, 0.2, 0.2], (pb, p)).reshape(pb, -1)
        rows.append(np.concatenate([var, np.zeros((pb, p * ps - p * 4))], -1))
    ins["priors"] = np.stack(rows, 1).astype(F32)
    if arm:
        ins["arm_conf"] = rng.random((n, p * 2)).astype(F32)
        ins["arm_loc"] = (rng.standard_normal(ins["loc"].shape) * 0.3).astype(F32)
    return ins


@pytest.mark.oracle
@settings(max_examples=25)
@given(data=st.data())
def test_oracle_detection_output(data, tmp_path_factory):
    v1 = data.draw(st.booleans(), label="v1")
    n, p, c = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 60)), data.draw(st.integers(2, 5))
    share, venc, normalized = data.draw(st.booleans()), data.draw(st.booleans()), data.draw(st.booleans())
    pb = data.draw(st.sampled_from([1, n]))
    arm = data.draw(st.booleans(), label="arm") and pb == n
    spread = data.draw(st.sampled_from([1.0, 0.3, 0.05]), label="spread")  # small: chains
    attrs = {"keep_top_k": [data.draw(st.sampled_from([-1, 3, 10, 200]))],
                 "nms_threshold": data.draw(st.floats(0.1, 0.9)),
                 "confidence_threshold": data.draw(st.floats(0.0, 0.8)),
                 "top_k": data.draw(st.sampled_from([-1, 5, 400])),
                 "background_label_id": data.draw(st.sampled_from([-1, 0, 1])),
                 "code_type": data.draw(st.sampled_from(["caffe.PriorBoxParameter.CORNER",
                                                      "caffe.PriorBoxParameter.CENTER_SIZE"])),
                 "clip_before_nms": data.draw(st.booleans()), "clip_after_nms": data.draw(st.booleans()),
                 "share_location": share, "variance_encoded_in_target": venc, "normalized": normalized,
                 "input_width": 300, "input_height": 200}
    # the CPU plugin refuses decrease_label_id unless background_label_id is 0
    attrs["decrease_label_id"] = attrs["background_label_id"] == 0 and data.draw(st.booleans())
    if arm:
        attrs["objectness_score"] = data.draw(st.floats(0.0, 0.9))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    ins = _ssd_inputs(rng, n, p, c, share, venc, normalized, pb, arm, spread)
    params = {k: o8.parameter(list(v.shape), ov.Type.f32, name=k) for k, v in ins.items()}
    args = list(params.values())
    if v1:
        attrs["num_classes"] = c
        node = o1.detection_output(*args[:3], attrs, *args[3:])
    else:
        node = o8.detection_output(*args[:3], attrs, *args[3:])
    model = ov.Model([o8.result(node)], args, "do")
    # f32 within a few ulp: the CENTER_SIZE decoding's exp is the plugin's
    oracle.compare(model, ins, rtol=1e-5, atol=1e-6, tmpdir=tmp_path_factory.mktemp("do"))


@pytest.mark.oracle
@pytest.mark.parametrize("top_k", [-1, 300])
def test_oracle_detection_output_many_candidates(top_k, tmp_path):
    # 600 crowded priors, two of three classes above the threshold almost everywhere: more
    # candidates per class than irrun's NMS takes in one block (256)
    rng = np.random.default_rng(600)
    ins = _ssd_inputs(rng, 2, 600, 3, True, False, True, 1, False, spread=0.5)
    attrs = {"keep_top_k": [400], "nms_threshold": 0.45, "confidence_threshold": 0.001,
             "top_k": top_k, "background_label_id": 0, "normalized": True,
             "code_type": "caffe.PriorBoxParameter.CENTER_SIZE"}
    params = [o8.parameter(list(v.shape), ov.Type.f32, name=k) for k, v in ins.items()]
    model = ov.Model([o8.result(o8.detection_output(*params, attrs))], params, "do")
    oracle.compare(model, ins, rtol=1e-5, atol=1e-6, tmpdir=tmp_path)


import openvino.opset2 as o2
import openvino.opset3 as o3
import openvino.opset9 as o9


@pytest.mark.oracle
@settings(max_examples=25)
@given(data=st.data())
def test_oracle_roi_align(data, tmp_path_factory):
    v9 = data.draw(st.booleans(), label="v9")
    n, c, h, w = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)),
                  data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)))
    r = data.draw(st.integers(0, 6))
    attrs = {"pooled_h": data.draw(st.integers(1, 4)), "pooled_w": data.draw(st.integers(1, 4)),
                 "sampling_ratio": data.draw(st.integers(0, 3)),
                 "spatial_scale": data.draw(st.sampled_from([1.0, 0.5, 0.25, 2.0])),
                 "mode": data.draw(st.sampled_from(["avg", "max"]))}
    aligned = data.draw(st.sampled_from(["asymmetric", "half_pixel", "half_pixel_for_nn"])) \
        if v9 else "asymmetric"
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = rng.standard_normal((n, c, h, w)).astype(F32)
    scale = attrs["spatial_scale"]
    lo = rng.uniform(-3, max(h, w) + 2, (r, 2)) / scale          # some boxes leave the map
    # sizes of at least 0.3 pixels: a zero-size box with adaptive sampling in an aligned mode
    # gives NaN in the CPU plugin (0 samples) and 0 in the reference, which irrun follows
    boxes = np.concatenate([lo, lo + rng.uniform(0.3, 8, (r, 2)) / scale], 1).astype(F32)
    bi = rng.integers(0, n, r).astype(np.int32)
    p = o9.parameter([n, c, h, w], ov.Type.f32, name="x")
    b = o9.parameter([r, 4], ov.Type.f32, name="boxes")
    i = o9.parameter([r], ov.Type.i32, name="ids")
    node = o9.roi_align(p, b, i, aligned_mode=aligned, **attrs) if v9 else \
        o3.roi_align(p, b, i, **attrs)
    oracle.compare(ov.Model([o9.result(node)], [p, b, i], "ra"), {"x": x, "boxes": boxes, "ids": bi},
                   rtol=1e-5, atol=1e-5, tmpdir=tmp_path_factory.mktemp("ra"))


@pytest.mark.oracle
@pytest.mark.parametrize("ratio,mode,aligned", [(2, "avg", "asymmetric"), (2, "max", "asymmetric"),
                                                (0, "avg", "half_pixel"), (0, "max", "half_pixel_for_nn")])
def test_oracle_roi_align_many_boxes(ratio, mode, aligned, tmp_path):
    # torch_fasterrcnn's layer: 150 boxes on [1, 32, 10, 10], 7x7 bins (the compiled loop
    # split over threads); sampling_ratio 0 with boxes up to 40 pixels: rows of up to 6
    # samples a bin, and bins of up to 36.
    rng = np.random.default_rng(ratio + len(mode) + len(aligned))
    x = rng.standard_normal((2, 32, 10, 10)).astype(F32)
    lo = rng.uniform(-40, 300, (150, 2))
    boxes = np.concatenate([lo, lo + rng.uniform(0.5, 40 if ratio else 1300, (150, 2))],
                           1).astype(F32)
    bi = rng.integers(0, 2, 150).astype(np.int32)
    p = o9.parameter([2, 32, 10, 10], ov.Type.f32, name="x")
    b = o9.parameter([150, 4], ov.Type.f32, name="boxes")
    i = o9.parameter([150], ov.Type.i32, name="ids")
    node = o9.roi_align(p, b, i, pooled_h=7, pooled_w=7, sampling_ratio=ratio,
                        spatial_scale=0.03125, mode=mode, aligned_mode=aligned)
    oracle.compare(ov.Model([o9.result(node)], [p, b, i], "ra"), {"x": x, "boxes": boxes, "ids": bi},
                   rtol=1e-5, atol=1e-5, tmpdir=tmp_path)


@pytest.mark.oracle
@pytest.mark.parametrize("mode", ["avg", "max"])
def test_oracle_roi_align_few_boxes_on_large_maps(mode, tmp_path):
    # Fewer samples than pixels: the compiled loop reads the maps channel by channel
    # instead of transposing them.
    rng = np.random.default_rng(len(mode))
    x = rng.standard_normal((2, 16, 60, 80)).astype(F32)
    lo = rng.uniform(-20, 300, (5, 2))
    boxes = np.concatenate([lo, lo + rng.uniform(1, 120, (5, 2))], 1).astype(F32)
    bi = np.array([1, 0, 1, 1, 0], np.int32)
    p = o9.parameter([2, 16, 60, 80], ov.Type.f32, name="x")
    b = o9.parameter([5, 4], ov.Type.f32, name="boxes")
    i = o9.parameter([5], ov.Type.i32, name="ids")
    node = o9.roi_align(p, b, i, pooled_h=7, pooled_w=6, sampling_ratio=0, spatial_scale=0.25,
                        mode=mode, aligned_mode="half_pixel")
    oracle.compare(ov.Model([o9.result(node)], [p, b, i], "ra"), {"x": x, "boxes": boxes, "ids": bi},
                   rtol=1e-5, atol=1e-5, tmpdir=tmp_path)


@pytest.mark.oracle
@settings(max_examples=20)
@given(data=st.data())
def test_oracle_roi_pooling(data, tmp_path_factory):
    method = data.draw(st.sampled_from(["max", "bilinear"]))
    n, c, h, w = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)),
                  data.draw(st.integers(2, 9)), data.draw(st.integers(2, 9)))
    r, ph, pw = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    if method == "max":
        scale = data.draw(st.sampled_from([1.0, 0.5, 0.0625]))
        lo = rng.uniform(-2, max(h, w), (r, 2)) / scale
        # keep products away from .5, where rounding 0.5 * odd values is a tie
        coords = np.floor(np.concatenate([lo, lo + rng.uniform(0, 6, (r, 2)) / scale], 1)) + 0.25
    else:
        scale = 1.0
        coords = np.sort(rng.uniform(-0.1, 1.1, (r, 2, 2)), axis=2).transpose(0, 2, 1).reshape(r, 4)
    rois = np.concatenate([rng.integers(0, n, (r, 1)), coords], 1).astype(F32)
    x = rng.standard_normal((n, c, h, w)).astype(F32)
    p = o9.parameter([n, c, h, w], ov.Type.f32, name="x")
    b = o9.parameter([r, 5], ov.Type.f32, name="rois")
    node = o2.roi_pooling(p, b, [ph, pw], scale, method)
    oracle.compare(ov.Model([o9.result(node)], [p, b], "rp"), {"x": x, "rois": rois},
                   rtol=1e-5, atol=1e-5, tmpdir=tmp_path_factory.mktemp("rp"))


@pytest.mark.oracle
@settings(max_examples=20)
@given(data=st.data())
def test_oracle_yolo(data, tmp_path_factory):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    n, h, w = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    if data.draw(st.booleans(), label="reorg"):
        s = data.draw(st.integers(1, 3))
        c = s * s * data.draw(st.integers(1, 3))
        x = rng.standard_normal((n, c, h * s, w * s)).astype(F32)
        p = o1.parameter(list(x.shape), ov.Type.f32, name="x")
        node = o2.reorg_yolo(p, [s])
    else:
        coords, classes = data.draw(st.integers(2, 4)), data.draw(st.integers(1, 4))
        soft = data.draw(st.booleans(), label="do_softmax")
        num = data.draw(st.integers(1, 3))
        mask = [] if soft else list(range(data.draw(st.integers(1, num))))
        regions = num if soft else len(mask)
        # channels past the regions: OpenVINO (reference and CPU plugin) then places batch b
        # at b * (the regions' size) instead of b * C * H * W; irrun processes each image's
        # own channels, so those are drawn for one image only
        extra = data.draw(st.integers(0, 2)) if soft and n == 1 else 0
        x = (rng.standard_normal((n, (coords + classes + 1) * regions + extra, h, w)) * 3).astype(F32)
        axis = data.draw(st.integers(0, 3))
        end = data.draw(st.integers(axis, 3))
        p = o1.parameter(list(x.shape), ov.Type.f32, name="x")
        node = o1.region_yolo(p, coords, classes, num, soft, mask, axis, end, [])
    oracle.compare(ov.Model([o1.result(node)], [p], "y"), {"x": x}, rtol=1e-5, atol=1e-7,
                   tmpdir=tmp_path_factory.mktemp("y"))


@pytest.mark.oracle
@settings(max_examples=20)
@given(data=st.data())
def test_oracle_proposal(data, tmp_path_factory):
    import openvino.opset4 as o4
    v4 = data.draw(st.booleans(), label="v4")
    ratios = data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=1, max_size=3, unique=True))
    scales = data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 4.0]), min_size=1, max_size=2, unique=True))
    a = len(ratios) * len(scales)
    # The CPU plugin crashes (segfault) on small maps and when pre_nms_topn is below the
    # proposal count (seen: 3x3 maps with pre_nms_topn 4..7; 1x1 and 2x2 maps), so the drawn
    # maps are at least 3x3 and pre_nms_topn takes every proposal; irrun's pre_nms_topn cut
    # is tested by hand above.
    n, h, w = data.draw(st.integers(1, 2)), data.draw(st.integers(3, 6)), data.draw(st.integers(3, 6))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    stride = data.draw(st.sampled_from([4, 8, 16]))
    # distinct scores, so the top-k order has no ties (the reference leaves ties open)
    cp = (rng.permutation(n * 2 * a * h * w) / (n * 2 * a * h * w)).reshape(n, 2 * a, h, w).astype(F32)
    bd = (rng.standard_normal((n, 4 * a, h, w)) * 0.2).astype(F32)
    im = np.array([h * stride + data.draw(st.integers(-3, 8)), w * stride + data.draw(st.integers(-3, 8)),
                   *data.draw(st.sampled_from([[1.0], [1.0, 1.0], [0.5, 2.0]]))], F32)
    attrs = {"base_size": np.uint32(data.draw(st.sampled_from([8, 16]))),
                 "pre_nms_topn": np.uint32(a * h * w),
                 "post_nms_topn": np.uint32(data.draw(st.integers(1, 40))),
                 "nms_thresh": np.float32(data.draw(st.floats(0.2, 0.9))), "feat_stride": np.uint32(stride),
                 # min_size 1: no box is dropped to score 0, where equal scores tie
                 "min_size": np.uint32(1), "ratio": np.array(ratios, F32), "scale": np.array(scales, F32),
                 "clip_before_nms": data.draw(st.booleans()), "clip_after_nms": data.draw(st.booleans()),
                 "normalize": data.draw(st.booleans()),
                 "framework": data.draw(st.sampled_from(["", "tensorflow"]))}
    # Boxes under min_size get score 0 and tie; when such a box is selected the order is
    # open (the reference's partial_sort), so those draws are not compared.
    ours = Proposal1.run(Proposal4Attrs(**{k: (tuple(float(x) for x in v) if isinstance(v, np.ndarray)
                                              else v.item() if isinstance(v, np.generic) else v)
                                           for k, v in attrs.items()}), cp, bd, im)
    picked = ours[0][:, 0].reshape(n, -1)
    assume(not (ours[1][np.cumprod(picked >= 0, axis=1).astype(bool).reshape(-1)] == 0).any())
    p1 = o1.parameter(list(cp.shape), ov.Type.f32, name="cp")
    p2 = o1.parameter(list(bd.shape), ov.Type.f32, name="bd")
    p3 = o1.parameter([im.size], ov.Type.f32, name="im")
    node = (o4 if v4 else o1).proposal(p1, p2, p3, attrs)
    xml = oracle.save(ov.Model([o1.result(o) for o in node.outputs()], [p1, p2, p3], "p"),
                      tmp_path_factory.mktemp("p"))
    feed = {"cp": cp, "bd": bd, "im": im}
    expected, got = oracle.ov_run(xml, feed), oracle.irrun_run(xml, feed)
    oracle.assert_same(got[0], expected[0], rtol=1e-5, atol=1e-4)   # pixel coordinates
    if v4:
        # probabilities past each image's proposals are unspecified (the plugin leaves memory)
        rows = expected[0][:, 0].reshape(n, -1)
        valid = np.cumprod(rows >= 0, axis=1).astype(bool).reshape(-1)
        oracle.assert_same(got[1][valid], expected[1][valid])


@pytest.mark.oracle
@settings(max_examples=20)
@given(data=st.data())
def test_oracle_psroi_pooling(data, tmp_path_factory):
    mode = data.draw(st.sampled_from(["average", "bilinear"]))
    od, g = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    bx, by = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))) if mode == "bilinear" else (1, 1)
    c = od * g * g if mode == "average" else od * bx * by
    n, h, w, r = data.draw(st.integers(1, 2)), data.draw(st.integers(2, 9)), data.draw(st.integers(2, 9)), \
        data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = rng.standard_normal((n, c, h, w)).astype(F32)
    if mode == "average":
        scale = data.draw(st.sampled_from([1.0, 0.5]))
        lo = rng.uniform(0, max(h, w), (r, 2)) / scale
        # away from .5, where the coordinate rounding ties
        co = np.floor(np.concatenate([lo, lo + rng.uniform(0, 8, (r, 2)) / scale], 1)) + 0.25
    else:
        # inside the map: the reference reads before it for negative points (undefined)
        scale = 1.0
        lo = rng.uniform(0, 0.6, (r, 2))
        co = np.concatenate([lo, lo + rng.uniform(0, 0.4, (r, 2))], 1)
    rois = np.concatenate([rng.integers(0, n, (r, 1)), co], 1).astype(F32)
    p = o1.parameter(list(x.shape), ov.Type.f32, name="x")
    b = o1.parameter([r, 5], ov.Type.f32, name="rois")
    node = o1.psroi_pooling(p, b, od, g, scale, bx, by, mode)
    oracle.compare(ov.Model([o1.result(node)], [p, b], "ps"), {"x": x, "rois": rois},
                   rtol=1e-5, atol=1e-5, tmpdir=tmp_path_factory.mktemp("ps"))


@pytest.mark.oracle
@settings(max_examples=20)
@given(data=st.data())
def test_oracle_roi_align_rotated(data, tmp_path_factory):
    import openvino.opset15 as o15
    n, c, h, w = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)),
                  data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)))
    r = data.draw(st.integers(0, 5))
    scale = data.draw(st.sampled_from([1.0, 0.5, 2.0]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = rng.standard_normal((n, c, h, w)).astype(F32)
    rois = np.concatenate([rng.uniform(-2, max(h, w) + 2, (r, 2)) / scale,
                           rng.uniform(0.3, 8, (r, 2)) / scale, rng.uniform(-4, 4, (r, 1))], 1).astype(F32)
    bi = rng.integers(0, n, r).astype(np.int32)
    p = o15.parameter([n, c, h, w], ov.Type.f32, name="x")
    b = o15.parameter([r, 5], ov.Type.f32, name="boxes")
    i = o15.parameter([r], ov.Type.i32, name="ids")
    node = o15.roi_align_rotated(p, b, i, pooled_h=data.draw(st.integers(1, 4)),
                                 pooled_w=data.draw(st.integers(1, 4)),
                                 sampling_ratio=data.draw(st.integers(0, 3)), spatial_scale=scale,
                                 clockwise_mode=data.draw(st.booleans()))
    # f32 within a few ulp of the rotated sample positions (sin/cos of the plugin)
    oracle.compare(ov.Model([o15.result(node)], [p, b, i], "rr"), {"x": x, "boxes": rois, "ids": bi},
                   rtol=1e-4, atol=1e-4, tmpdir=tmp_path_factory.mktemp("rr"))


@pytest.mark.oracle
@settings(max_examples=10)
@given(data=st.data())
def test_oracle_prior_grid_generator(data, tmp_path_factory):
    import openvino.opset6 as o6
    from openvino.utils.node_factory import NodeFactory  # no Python wrapper for this op
    p, fh, fw = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    attrs = {"flatten": data.draw(st.booleans()), "h": data.draw(st.integers(0, fh)),
                 "w": data.draw(st.integers(0, fw)), "stride_x": data.draw(st.sampled_from([0.0, 4.0, 6.5])),
                 "stride_y": data.draw(st.sampled_from([0.0, 8.0]))}
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    feed = {"p": (rng.standard_normal((p, 4)) * 8).astype(F32), "f": np.zeros((1, 2, fh, fw), F32),
            "i": np.zeros((1, 2, fh * 8, fw * 8 + 3), F32)}
    params = [o6.parameter(list(v.shape), ov.Type.f32, name=k) for k, v in feed.items()]
    node = NodeFactory("opset6").create("ExperimentalDetectronPriorGridGenerator",
                                        [q.output(0) for q in params], attrs)
    xml = oracle.save(ov.Model([o6.result(node)], params, "pg"), tmp_path_factory.mktemp("pg"))
    (expected,), (got,) = oracle.ov_run(xml, feed), oracle.irrun_run(xml, feed)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    # cells past h x w are undefined in the page (the plugin leaves memory as it was)
    k = (attrs["h"] or fh) * (attrs["w"] or fw) * p
    np.testing.assert_allclose(got.reshape(-1, 4)[:k], expected.reshape(-1, 4)[:k], rtol=1e-6)


@pytest.mark.oracle
@settings(max_examples=10)
@given(data=st.data())
def test_oracle_roi_feature_extractor(data, tmp_path_factory):
    import openvino.opset6 as o6
    from openvino.utils.node_factory import NodeFactory  # no Python wrapper for this op
    levels, r = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 8))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    lo = rng.uniform(-20, 200, (r, 2))
    rois = np.concatenate([lo, lo + rng.uniform(0, 400, (r, 2))], 1).astype(F32)
    feats = [rng.standard_normal((1, 2, 64 // 2**k, 48 // 2**k)).astype(F32) for k in range(levels)]
    attrs = {"output_size": data.draw(st.integers(1, 4)), "sampling_ratio": data.draw(st.integers(0, 2)),
                 "pyramid_scales": [4 * 2**k for k in range(levels)], "aligned": data.draw(st.booleans())}
    feed = {"rois": rois, **{f"f{k}": x for k, x in enumerate(feats)}}
    params = [o6.parameter(list(v.shape), ov.Type.f32, name=k) for k, v in feed.items()]
    node = NodeFactory("opset6").create("ExperimentalDetectronROIFeatureExtractor",
                                        [p.output(0) for p in params], attrs)
    oracle.compare(ov.Model([o6.result(o) for o in node.outputs()], params, "fe"), feed,
                   rtol=1e-5, atol=1e-5, tmpdir=tmp_path_factory.mktemp("fe"))


@pytest.mark.oracle
@settings(max_examples=10)
@given(data=st.data())
def test_oracle_generate_proposals_single_image(data, tmp_path_factory):
    import openvino.opset6 as o6
    from openvino.utils.node_factory import NodeFactory  # no Python wrapper for this op
    a, h, w = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    lo = rng.uniform(-5, 60, (h * w * a, 2))
    feed = {"im": np.array([64, 72, 1], F32),
            "anchors": np.concatenate([lo, lo + rng.uniform(4, 20, (h * w * a, 2))], 1).astype(F32),
            "deltas": (rng.standard_normal((4 * a, h, w)) * 0.2).astype(F32),
            # distinct scores: no ties in the top-k order
            "scores": ((rng.permutation(a * h * w) + 1) / (a * h * w + 1)).reshape(a, h, w).astype(F32)}
    # min_size 0: no box drops to score 0, where equal scores would tie
    attrs = {"min_size": 0.0, "nms_threshold": data.draw(st.floats(0.2, 0.9)),
                 "post_nms_count": data.draw(st.integers(1, 40)), "pre_nms_count": data.draw(st.integers(1, 80))}
    params = [o6.parameter(list(v.shape), ov.Type.f32, name=k) for k, v in feed.items()]
    node = NodeFactory("opset6").create("ExperimentalDetectronGenerateProposalsSingleImage",
                                        [p.output(0) for p in params], attrs)
    oracle.compare(ov.Model([o6.result(o) for o in node.outputs()], params, "gp"), feed,
                   rtol=1e-5, atol=1e-4, tmpdir=tmp_path_factory.mktemp("gp"))


@pytest.mark.oracle
@settings(max_examples=15)
@given(data=st.data())
def test_oracle_generate_proposals(data, tmp_path_factory):
    n, a, h, w = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)),
                  data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    lo = rng.uniform(-5, 60, (h, w, a, 2))
    total = n * a * h * w
    feed = {"im": np.array([[64, 72, 1], [50, 40, 2]][:n], F32),
            "anchors": np.concatenate([lo, lo + rng.uniform(2, 20, (h, w, a, 2))], -1).astype(F32),
            "deltas": (rng.standard_normal((n, 4 * a, h, w)) * 0.2).astype(F32),
            "scores": ((rng.permutation(total) + 1) / (total + 1)).reshape(n, a, h, w).astype(F32)}
    attrs = {"min_size": data.draw(st.sampled_from([0.0, 1.0, 6.0])),
                 "nms_threshold": data.draw(st.floats(0.2, 0.9)),
                 "post_nms_count": data.draw(st.integers(1, 40)), "pre_nms_count": data.draw(st.integers(1, 80)),
                 "normalized": data.draw(st.booleans()),
                 "roi_num_type": data.draw(st.sampled_from(["i32", "i64"]))}
    params = [o9.parameter(list(v.shape), ov.Type.f32, name=k) for k, v in feed.items()]
    node = o9.generate_proposals(*params, **attrs)
    oracle.compare(ov.Model([o9.result(o) for o in node.outputs()], params, "gp9"), feed,
                   rtol=1e-5, atol=1e-4, tmpdir=tmp_path_factory.mktemp("gp9"))


@pytest.mark.oracle
@settings(max_examples=15)
@given(data=st.data())
def test_oracle_deformable_psroi_pooling(data, tmp_path_factory):
    od, g = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    n, h, w, r = data.draw(st.integers(1, 2)), data.draw(st.integers(2, 9)), data.draw(st.integers(2, 9)), \
        data.draw(st.integers(1, 4))
    scale = data.draw(st.sampled_from([1.0, 0.5]))
    ps = data.draw(st.integers(1, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = rng.standard_normal((n, od * g * g, h, w)).astype(F32)
    lo = rng.uniform(-2, max(h, w), (r, 2)) / scale
    # away from .5, where the coordinate rounding ties
    co = np.floor(np.concatenate([lo, lo + rng.uniform(0, 8, (r, 2)) / scale], 1)) + 0.25
    rois = np.concatenate([rng.integers(0, n, (r, 1)), co], 1).astype(F32)
    p = o1.parameter(list(x.shape), ov.Type.f32, name="x")
    b = o1.parameter([r, 5], ov.Type.f32, name="rois")
    params, feed = [p, b], {"x": x, "rois": rois}
    kw = {"group_size": g, "spatial_bins_x": data.draw(st.integers(1, 3)),
              "spatial_bins_y": data.draw(st.integers(1, 3)), "trans_std": data.draw(st.sampled_from([0.1, 1.0])),
              "part_size": ps}
    if data.draw(st.booleans(), label="offsets"):
        ncls = data.draw(st.sampled_from([c for c in (1, 2, 3) if od % c == 0]))
        t = o1.parameter([r, 2 * ncls, ps, ps], ov.Type.f32, name="offsets")
        params.append(t)
        feed["offsets"] = (rng.standard_normal((r, 2 * ncls, ps, ps)) * 0.5).astype(F32)
        node = o1.deformable_psroi_pooling(p, b, od, scale, offsets=t, **kw)
    else:
        node = o1.deformable_psroi_pooling(p, b, od, scale, **kw)
    oracle.compare(ov.Model([o1.result(node)], params, "dps"), feed, rtol=1e-5, atol=1e-5,
                   tmpdir=tmp_path_factory.mktemp("dps"))


@pytest.mark.oracle
@settings(max_examples=10)
@given(data=st.data())
def test_oracle_ed_detection_output(data, tmp_path_factory):
    import openvino.opset6 as o6
    from openvino.utils.node_factory import NodeFactory  # no Python wrapper for this op
    r, c = data.draw(st.integers(1, 20)), data.draw(st.integers(2, 5))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    lo = rng.uniform(0, 60, (r, 2))
    feed = {"rois": np.concatenate([lo, lo + rng.uniform(0, 30, (r, 2))], 1).astype(F32),
            "deltas": (rng.standard_normal((r, 4 * c)) * 0.3).astype(F32),
            # distinct scores: the order has no ties
            "scores": ((rng.permutation(r * c) + 1) / (r * c + 1)).reshape(r, c).astype(F32),
            "im_info": np.array([[80, 90, 1]], F32)}
    attrs = {"score_threshold": data.draw(st.floats(0.0, 0.6)), "nms_threshold": data.draw(st.floats(0.2, 0.9)),
                 "max_delta_log_wh": float(np.log(1000 / 16)), "num_classes": c,
                 "post_nms_count": data.draw(st.integers(1, 30)),
                 "max_detections_per_image": data.draw(st.integers(1, 40)),
                 "deltas_weights": [10.0, 10.0, 5.0, 5.0], "class_agnostic_box_regression": False}
    params = [o6.parameter(list(v.shape), ov.Type.f32, name=k) for k, v in feed.items()]
    node = NodeFactory("opset6").create("ExperimentalDetectronDetectionOutput",
                                        [p.output(0) for p in params], attrs)
    oracle.compare(ov.Model([o6.result(o) for o in node.outputs()], params, "edd"), feed,
                   rtol=1e-5, atol=1e-4, tmpdir=tmp_path_factory.mktemp("edd"))
