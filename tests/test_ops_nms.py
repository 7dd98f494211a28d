"""NonMaxSuppression-1/3/4/5/9: the spec examples' shapes, hand-checked selections (encodings,
ties, thresholds at equality, Soft-NMS), boxes outside the image, zero-area boxes, NaN
scores, empty inputs, shape rules with bounded dynamic row counts, errors, and differential
tests against OpenVINO's CPU plugin."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irrun.errors import OpError, ShapeError
from irrun.ops.nms import (
    ExperimentalDetectronTopKROIs6,
    MatrixNms8,
    MatrixNmsAttrs,
    MulticlassNms8,
    MulticlassNms8Attrs,
    MulticlassNms9Attrs,
    NMS1Attrs,
    NMS3Attrs,
    NMS4Attrs,
    NMS5Attrs,
    NMS9Attrs,
    NMSRotated13,
    NMSRotatedAttrs,
    NonMaxSuppression1,
    NonMaxSuppression5,
    TopKROIsAttrs,
)
from irrun.ir.shapes import DYNAMIC, Dim, TensorSpec

F32 = np.float32
ATTRS = {1: NMS1Attrs, 3: NMS3Attrs, 4: NMS4Attrs, 5: NMS5Attrs, 9: NMS9Attrs}


def nms(version, boxes, scores, max_out=None, iou=None, score=None, sigma=None, **attrs):
    a = ATTRS[version](**attrs)
    args = [np.asarray(boxes, F32), np.asarray(scores, F32)]
    for v, t in ((max_out, np.int64), (iou, F32), (score, F32), (sigma, F32)):
        if v is None:
            break
        args.append(np.array(v, t))
    cls = NonMaxSuppression1 if version < 5 else NonMaxSuppression5
    return cls.run(a, *args)


def spec(et, shape, value=None):
    if value is not None:
        return TensorSpec.of_value(np.array(value), et)
    return TensorSpec.make(et, shape)


# The classic example (as in ONNX's NMS tests): three clusters of boxes on a line.
CORNER = [[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9],
          [0, 10, 1, 11], [0, 10.1, 1, 11.1], [0, 100, 1, 101]]
CENTER = [[0.5, 0.5, 1, 1], [0.6, 0.5, 1, 1], [0.4, 0.5, 1, 1],
          [10.5, 0.5, 1, 1], [10.6, 0.5, 1, 1], [100.5, 0.5, 1, 1]]
SCORES = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3]


# ------------------------------------------------------------------ spec examples (shapes)

def test_spec_example_v1_shapes():
    (out,) = NonMaxSuppression1.infer(NMS1Attrs(), spec("f32", [1, 1000, 4]),
                                      spec("f32", [1, 1, 1000]), spec("i64", None, 1000),
                                      spec("f32", []), spec("f32", []))
    assert out.shape == (Dim.of(1000), Dim.of(3)) and out.etype.name == "i64"


@pytest.mark.parametrize("version", [3, 4])
def test_spec_example_v3_v4_shapes(version):
    # v3's example: [1, 1000, 4] boxes, 1 class -> 1000 rows; v4's: [3, 100, 4], 5 classes,
    # max 10 -> min(100, 10) * 3 * 5 = 150 rows.
    cls, a = NonMaxSuppression1, ATTRS[version]()
    if version == 3:
        (out,) = cls.infer(a, spec("f32", [1, 1000, 4]), spec("f32", [1, 1, 1000]),
                           spec("i64", None, 1000))
        assert out.shape == (Dim.of(1000), Dim.of(3))
    else:
        (out,) = cls.infer(a, spec("f32", [3, 100, 4]), spec("f32", [3, 5, 100]),
                           spec("i64", None, 10))
        assert out.shape == (Dim.of(150), Dim.of(3))
    assert out.etype.name == "i64"


@pytest.mark.parametrize("version", [5, 9])
def test_spec_example_v5_v9_shapes(version):
    ins = [spec("f32", [3, 100, 4]), spec("f32", [3, 5, 100]), spec("i64", None, 10),
           spec("f32", []), spec("f32", [])] + ([spec("f32", [])] if version == 9 else [])
    idx, sc, valid = NonMaxSuppression5.infer(ATTRS[version](), *ins)
    # "150 <!-- min(100, 10) * 3 * 5 -->" is the upper bound of the selected count
    assert idx.shape == (Dim(0, 150), Dim.of(3)) and idx.etype.name == "i64"
    assert sc.shape == (Dim(0, 150), Dim.of(3)) and sc.etype.name == "f32"
    assert valid.shape == (Dim.of(1),) and valid.etype.name == "i64"


# ------------------------------------------------------------------ selections

@pytest.mark.parametrize("version", [1, 3, 4, 5, 9])
def test_classic_example_both_encodings(version):
    for boxes, enc in ((CORNER, "corner"), (CENTER, "center")):
        out = nms(version, [boxes], [[SCORES]], 3, 0.5, 0.0, box_encoding=enc)
        assert out[0].tolist()[:3] == [[0, 0, 3], [0, 0, 0], [0, 0, 5]]
        if version >= 5:
            np.testing.assert_allclose(out[1], [[0, 0, 0.95], [0, 0, 0.9], [0, 0, 0.3]], rtol=1e-6)
            assert out[2].tolist() == [3]


def test_static_versions_pad_with_minus_one_and_truncate():
    out = nms(4, [CORNER], [[SCORES]], 10, 0.5, 0.0)[0]     # 6 rows, 3 selected
    assert out.tolist() == [[0, 0, 3], [0, 0, 0], [0, 0, 5]] + [[-1, -1, -1]] * 3
    # v1/v3: min(num_boxes, max * num_classes) rows, which ignores num_batches: 2 batches
    # select 6 boxes, only 3 rows (min(3, 2 * 2))
    boxes = [[[0, 0, 1, 1], [0, 2, 1, 3], [0, 4, 1, 5]]] * 2
    scores = [[[0.9, 0.8, 0.7], [0.6, 0.5, 0.4]]] * 2
    for v in (1, 3):
        out = nms(v, boxes, scores, 2, 0.5, 0.0)[0]
        assert out.tolist() == [[0, 0, 0], [1, 0, 0], [0, 0, 1]]


def test_sort_result_descending_false_keeps_batch_class_order():
    boxes = [[[0, 0, 1, 1], [0, 2, 1, 3]], [[0, 0, 1, 1], [0, 2, 1, 3]]]
    scores = [[[0.1, 0.5], [0.7, 0.2]], [[0.9, 0.3], [0.4, 0.6]]]
    idx = nms(9, boxes, scores, 2, 0.5, 0.0, sort_result_descending=False)[0]
    assert idx.tolist() == [[0, 0, 1], [0, 0, 0], [0, 1, 0], [0, 1, 1],
                            [1, 0, 0], [1, 0, 1], [1, 1, 1], [1, 1, 0]]
    idx = nms(9, boxes, scores, 2, 0.5, 0.0)[0]
    assert idx.tolist() == [[1, 0, 0], [0, 1, 0], [1, 1, 1], [0, 0, 1],
                            [1, 1, 0], [1, 0, 1], [0, 1, 1], [0, 0, 0]]


def test_equal_scores_take_lower_box_index_first():
    boxes = [[[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1]]]
    idx = nms(9, boxes, [[[0.5, 0.5, 0.5]]], 3, 0.5, 0.0)[0]
    assert idx.tolist() == [[0, 0, 0]]
    idx = nms(9, [[[0, 0, 1, 1], [0, 5, 1, 6]]] * 2, [[[0.5, 0.5]], [[0.5, 0.5]]], 3, 0.5)[0]
    assert idx.tolist() == [[0, 0, 0], [0, 0, 1], [1, 0, 0], [1, 0, 1]]


def test_thresholds_at_equality():
    half = [[[0, 0, 1, 1], [0, 0, 1, 0.5]]]          # IoU exactly 0.5
    assert nms(9, half, [[[0.9, 0.8]]], 2, 0.5, 0.0)[0].tolist() == [[0, 0, 0]]
    assert nms(9, half, [[[0.9, 0.8]]], 2, 0.6, 0.0)[0].tolist() == [[0, 0, 0], [0, 0, 1]]
    # score == score_threshold is not a candidate
    assert nms(9, half, [[[0.9, 0.8]]], 2, 0.6, 0.8)[0].tolist() == [[0, 0, 0]]
    # iou_threshold 0 suppresses disjoint boxes too (IoU 0 >= 0)
    apart = [[[0, 0, 1, 1], [0, 5, 1, 6]]]
    assert nms(9, apart, [[[0.9, 0.8]]], 2, 0.0, 0.0)[0].tolist() == [[0, 0, 0]]


def test_soft_nms_v9_decays_and_v5_also_cuts_at_iou_threshold():
    idx, sc, valid = nms(9, [CORNER], [[SCORES]], 3, 0.5, 0.0, 0.5)
    assert idx.tolist() == [[0, 0, 3], [0, 0, 0], [0, 0, 1]]
    iou = F32(0.9) / F32(1.1)
    np.testing.assert_allclose(sc[2, 2], 0.75 * np.exp(-0.5 * iou * iou / 0.5), rtol=1e-6)
    idx, sc, valid = nms(5, [CORNER], [[SCORES]], 3, 0.5, 0.0, 0.5)
    assert idx.tolist() == [[0, 0, 3], [0, 0, 0], [0, 0, 5]]          # IoU 0.82 > 0.5: cut
    # a decayed score at or below score_threshold drops the box
    idx, sc, valid = nms(9, [CORNER], [[SCORES]], 6, 1.0, 0.35, 0.5)
    assert valid.tolist() == [len(idx)] and sc[:, 2].min() > 0.35


def test_boxes_outside_the_image_and_flipped_corners():
    far = [[[-50, -50, -49, -49], [1e6, 1e6, 1e6 + 2, 1e6 + 2], [-49.5, -49.5, -48.5, -48.5]]]
    idx = nms(9, far, [[[0.9, 0.8, 0.7]]], 3, 0.1, 0.0)[0]
    assert idx.tolist() == [[0, 0, 0], [0, 0, 1]]        # IoU(0, 2) = 0.25/1.75 > 0.1
    flipped = [[[-49, -49, -50, -50], [1e6 + 2, 1e6, 1e6, 1e6 + 2], [-48.5, -49.5, -49.5, -48.5]]]
    assert nms(9, flipped, [[[0.9, 0.8, 0.7]]], 3, 0.1, 0.0)[0].tolist() == idx.tolist()


def test_zero_area_boxes_overlap_nothing():
    boxes = [[[0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 1, 1], [2, 2, 2, 2]]]
    idx = nms(9, boxes, [[[0.9, 0.8, 0.7, 0.6]]], 4, 0.0001, 0.0)[0]
    assert idx.tolist() == [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 3]]


def test_nan_scores_are_never_selected():
    idx, _sc, valid = nms(9, [CORNER], [[[np.nan, 0.75, np.nan, 0.95, np.nan, 0.3]]], 6, 0.5, 0.0)
    assert idx.tolist() == [[0, 0, 3], [0, 0, 1], [0, 0, 5]] and valid.tolist() == [3]


def test_empty_inputs():
    for n, c, max_out in ((0, 2, 5), (3, 0, 5), (3, 2, 0)):
        boxes, scores = np.zeros((2, n, 4), F32), np.ones((2, c, n), F32)
        idx, sc, valid = nms(9, boxes, scores, max_out, 0.5, 0.0, output_type="i32")
        assert idx.shape == (0, 3) and idx.dtype == np.int32 and sc.shape == (0, 3)
        assert valid.tolist() == [0] and valid.dtype == np.int32
        assert nms(4, boxes, scores, max_out, 0.5)[0].shape == (min(n, max_out) * 2 * c, 3)
    # max_output_boxes_per_class absent: the default 0 selects nothing; negative the same
    assert nms(9, [CORNER], [[SCORES]])[0].shape == (0, 3)
    assert nms(9, [CORNER], [[SCORES]], -4)[0].shape == (0, 3)


# ------------------------------------------------------------------ shape rules and errors

def test_shape_rules_bounded_dynamic_counts():
    a9 = NMS9Attrs(output_type="i32")
    idx, sc, valid = NonMaxSuppression5.infer(a9, spec("f16", [2, None, 4]),
                                              spec("f16", [None, 3, None]), spec("i32", None, 4))
    assert idx.shape == (Dim(0, 24), Dim.of(3)) and idx.etype.name == "i32"
    assert sc.etype.name == "f32" and valid.etype.name == "i32"
    # max_output_boxes_per_class unknown: bounded by num_boxes * num_batches * num_classes
    idx = NonMaxSuppression5.infer(a9, spec("f32", [2, 7, 4]), spec("f32", [2, 3, 7]),
                                   spec("i64", []))[0]
    assert idx.shape == (Dim(0, 42), Dim.of(3))
    idx = NonMaxSuppression5.infer(a9, spec("f32", None), spec("f32", None), spec("i64", []))[0]
    assert idx.shape == (DYNAMIC, Dim.of(3))
    (out,) = NonMaxSuppression1.infer(NMS4Attrs(output_type="i32"), spec("f32", [2, 7, 4]),
                                      spec("f32", [2, 3, 7]), spec("i64", [1]))
    assert out.shape == (Dim(0, 42), Dim.of(3)) and out.etype.name == "i32"
    (out,) = NonMaxSuppression1.infer(NMS3Attrs(), spec("f32", [2, 7, 4]),
                                      spec("f32", [2, 3, 7]), spec("i64", None, [2]))
    assert out.shape == (Dim.of(6), Dim.of(3))      # min(7, 2 * 3)


def test_shape_errors():
    a = NMS9Attrs()
    with pytest.raises(ShapeError, match=r"boxes must have shape \[num_batches, num_boxes, 4\]"):
        NonMaxSuppression5.infer(a, spec("f32", [1, 6, 5]), spec("f32", [1, 1, 6]))
    with pytest.raises(ShapeError, match="same num_batches"):
        NonMaxSuppression5.infer(a, spec("f32", [2, 6, 4]), spec("f32", [1, 1, 6]))
    with pytest.raises(ShapeError, match="num_boxes"):
        NonMaxSuppression5.infer(a, spec("f32", [1, 6, 4]), spec("f32", [1, 1, 5]))
    with pytest.raises(ShapeError, match="scores must have rank 3"):
        NonMaxSuppression5.infer(a, spec("f32", [1, 6, 4]), spec("f32", [1, 6]))
    with pytest.raises(ShapeError, match="max_output_boxes_per_class must have an integer"):
        NonMaxSuppression5.infer(a, spec("f32", [1, 6, 4]), spec("f32", [1, 1, 6]),
                                 spec("f32", []))
    with pytest.raises(ShapeError, match="iou_threshold must have exactly 1 element"):
        NonMaxSuppression5.infer(a, spec("f32", [1, 6, 4]), spec("f32", [1, 1, 6]),
                                 spec("i64", []), spec("f32", [2]))
    with pytest.raises(ShapeError, match="boxes must have a floating-point"):
        NonMaxSuppression5.infer(a, spec("i32", [1, 6, 4]), spec("f32", [1, 1, 6]))


def test_run_errors():
    with pytest.raises(OpError, match=r"scores must have shape .* got \[1, 1, 5\]"):
        nms(9, [CORNER], [[SCORES[:5]]], 3)
    with pytest.raises(OpError, match=r"iou_threshold must have exactly 1 element"):
        NonMaxSuppression5.run(NMS9Attrs(), np.zeros((1, 2, 4), F32), np.zeros((1, 1, 2), F32),
                               np.array(1), np.zeros(2, F32))


# ------------------------------------------------------------------ MulticlassNms

def mcnms(boxes, scores, roisnum=None, version=9, **attrs):
    a = (MulticlassNms9Attrs if version == 9 else MulticlassNms8Attrs)(**attrs)
    args = [np.asarray(boxes, F32), np.asarray(scores, F32)]
    if roisnum is not None:
        args.append(np.asarray(roisnum, np.int64))
    return MulticlassNms8.run(a, *args)


# xmin, ymin, xmax, ymax: the classic three clusters
XY = [[0, 0, 1, 1], [0.1, 0, 1.1, 1], [-0.1, 0, 0.9, 1], [10, 0, 11, 1], [10.1, 0, 11.1, 1],
      [100, 0, 101, 1]]


@pytest.mark.parametrize("version", [8, 9])
def test_multiclass_spec_example_shapes(version):
    a = (MulticlassNms9Attrs if version == 9 else MulticlassNms8Attrs)(
        sort_result_type="score", iou_threshold=0.2, score_threshold=0.5, normalized=False,
        nms_eta=0.0)
    out, idx, num = MulticlassNms8.infer(a, spec("f32", [3, 100, 4]), spec("f32", [3, 5, 100]))
    # "-1" in the example: irrun bounds it by num_batches * num_classes * num_boxes
    assert out.shape == (Dim(0, 1500), Dim.of(6)) and idx.shape == (Dim(0, 1500), Dim.of(1))
    assert num.shape == (Dim.of(3),) and idx.etype.name == "i64" and out.etype.name == "f32"
    a = MulticlassNms9Attrs(nms_top_k=10, keep_top_k=20)
    out = MulticlassNms8.infer(a, spec("f32", [3, 100, 4]), spec("f32", [3, 5, 100]))[0]
    assert out.shape[0] == Dim(0, 60)                 # min(5 * 10, 20) per image


def test_multiclass_by_hand():
    scores = [[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]]]
    out, idx, num = mcnms([XY], scores, iou_threshold=0.5, score_threshold=0.3,
                          sort_result_type="score")
    # class 0: boxes 3, 0, 5 (0.3 >= score_threshold: kept); class 1: 5, 4, 2 (4 suppresses
    # 3); by score, the tie at 0.3 by class
    assert idx[:, 0].tolist() == [3, 0, 5, 4, 5, 2] and num.tolist() == [6]
    np.testing.assert_allclose(out[:, :2], [[0, 0.95], [0, 0.9], [1, 0.6], [1, 0.5], [0, 0.3],
                                            [1, 0.3]], rtol=1e-6)
    np.testing.assert_array_equal(out[0, 2:], XY[3])
    out, idx, num = mcnms([XY], scores, iou_threshold=0.5, score_threshold=0.3,
                          sort_result_type="classid", keep_top_k=4, background_class=1)
    assert out[:, 0].tolist() == [0, 0, 0] and idx[:, 0].tolist() == [3, 0, 5]


def test_multiclass_roisnum_index_and_empty_images():
    boxes = np.array([XY[:4]] * 2, F32)                   # [C=2, M=4, 4]
    scores = np.array([[0.9, 0.8, 0.7, 0.6], [0.5, 0.4, 0.3, 0.2]], F32)
    _out, idx, num = mcnms(boxes, scores, [0, 2, 2], iou_threshold=0.5, score_threshold=0.25)
    assert num.tolist() == [0, 2, 3]
    # the reference's and CPU plugin's index: (image offset + box) * num_classes + class
    assert idx[:, 0].tolist() == [0, 1, 4, 6, 5]


def test_multiclass_eta_nan_zero_area_and_empty():
    # IoUs 0.82 (0, 1) and 0.67 (0, 2; 1, 2): all kept at 0.9; adaptive NMS lowers the
    # threshold to 0.45 at the first pick, before the others are checked
    out, idx, num = mcnms([XY[:3]], [[[0.9, 0.8, 0.7]]], iou_threshold=0.9)
    assert idx[:, 0].tolist() == [0, 1, 2]
    out, idx, num = mcnms([XY[:3]], [[[0.9, 0.8, 0.7]]], iou_threshold=0.9, nms_eta=0.5)
    assert idx[:, 0].tolist() == [0]
    out, idx, num = mcnms([XY[:3]], [[[np.nan, 0.8, 0.7]]], iou_threshold=0.5)
    assert idx[:, 0].tolist() == [1]
    out, idx, num = mcnms([[[0, 0, 0, 1], [0, 0, 0, 1]]], [[[0.9, 0.8]]], iou_threshold=0.1)
    assert idx[:, 0].tolist() == [0, 1]
    out, idx, num = mcnms(np.zeros((2, 0, 4)), np.zeros((2, 3, 0)), output_type="i32")
    assert out.shape == (0, 6) and idx.shape == (0, 1) and idx.dtype == np.int32
    assert num.tolist() == [0, 0]
    with pytest.raises(ShapeError, match="MulticlassNms-8 takes 2 inputs"):
        MulticlassNms8.infer(MulticlassNms8Attrs(), spec("f32", [2, 4, 4]), spec("f32", [2, 4]),
                             spec("i32", [2]))
    with pytest.raises(OpError, match="roisnum"):
        mcnms(np.zeros((2, 4, 4)), np.zeros((2, 4)), [3, 3])


# ------------------------------------------------------------------ MatrixNms

def mxnms(boxes, scores, **attrs):
    return MatrixNms8.run(MatrixNmsAttrs(**attrs), np.asarray(boxes, F32), np.asarray(scores, F32))


def test_matrix_nms_spec_shapes():
    out, idx, num = MatrixNms8.infer(MatrixNmsAttrs(keep_top_k=7), spec("f32", [3, 100, 4]),
                                     spec("f32", [3, 5, 100]))
    assert out.shape == (Dim(0, 21), Dim.of(6)) and idx.shape == (Dim(0, 21), Dim.of(1))
    assert num.shape == (Dim.of(3),)


def test_matrix_nms_decay_by_hand():
    boxes = [[[0, 0, 1, 1], [0.1, 0, 1.1, 1], [10, 0, 11, 1]]]
    iou = F32(0.9) / F32(1.1)
    out, idx, num = mxnms(boxes, [[[0.9, 0.8, 0.7]]], sort_result_type="score")
    # linear: box 1 decays by (1 - iou) / (1 - 0); box 2 overlaps nothing
    assert idx[:, 0].tolist() == [0, 2, 1] and num.tolist() == [3]
    np.testing.assert_allclose(out[:, 1], [0.9, 0.7, 0.8 * (1 - iou)], rtol=1e-6)
    out, idx, num = mxnms(boxes, [[[0.9, 0.8, 0.7]]], decay_function="gaussian", gaussian_sigma=2.0)
    np.testing.assert_allclose(out[2, 1], 0.8 * np.exp(-iou * iou * 2.0), rtol=1e-6)
    # post_threshold drops the decayed box; NaN scores and an empty image select nothing
    out, idx, num = mxnms(boxes, [[[0.9, 0.8, np.nan]]], post_threshold=0.5)
    assert idx[:, 0].tolist() == [0]
    out, idx, num = mxnms(np.zeros((2, 0, 4)), np.zeros((2, 2, 0)))
    assert out.shape == (0, 6) and num.tolist() == [0, 0]


# ------------------------------------------------------------------ ExperimentalDetectronTopKROIs

def test_topk_rois():
    op = ExperimentalDetectronTopKROIs6
    (out,) = op.infer(TopKROIsAttrs(1000), spec("f32", [5000, 4]), spec("f32", [5000]))
    assert out.shape == (Dim.of(1000), Dim.of(4))
    rois = np.arange(16, dtype=F32).reshape(4, 4)
    (y,) = op.run(TopKROIsAttrs(3), rois, np.array([0.1, 0.9, np.nan, 0.9], F32))
    assert y.tolist() == [rois[1].tolist(), rois[3].tolist(), rois[0].tolist()]   # ties by index
    (y,) = op.run(TopKROIsAttrs(6), rois, np.array([0.1, 0.9, 0.5, 0.2], F32))
    assert y[4:].tolist() == [[0] * 4] * 2 and y[0].tolist() == rois[1].tolist()
    with pytest.raises(ShapeError, match="one probability per ROI"):
        op.infer(TopKROIsAttrs(3), spec("f32", [5, 4]), spec("f32", [6]))


# ------------------------------------------------------------------ NMSRotated

def test_nms_rotated():
    a = NMSRotatedAttrs()
    idx, sc, valid = NMSRotated13.infer(a, spec("f32", [1, 5000, 5]), spec("f32", [1, 2, 5000]),
                                        spec("i64", None, 100), spec("f32", []), spec("f32", []))
    assert idx.shape == (Dim(0, 200), Dim.of(3)) and sc.etype.name == "f32"
    assert valid.shape == (Dim.of(1),)
    # a 4 x 1 bar and the same bar turned by pi/2 about its centre overlap in a 1 x 1 square:
    # IoU 1 / 7; a copy turned by pi is the same box (IoU 1)
    boxes = np.array([[[5, 5, 4, 1, 0], [5, 5, 4, 1, np.pi / 2], [5, 5, 4, 1, np.pi],
                       [20, 20, 2, 2, 0.3]]], F32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.6]]], F32)
    run = lambda thr, **kw: NMSRotated13.run(NMSRotatedAttrs(**kw), boxes, scores, np.array(4),
                                             np.array(thr, F32), np.array(0.0, F32))
    assert run(0.1)[0][:, 2].tolist() == [0, 3]
    assert run(0.2)[0][:, 2].tolist() == [0, 1, 3]
    assert run(0.2, clockwise=False)[0][:, 2].tolist() == [0, 1, 3]
    with pytest.raises(ShapeError, match=r"boxes must have shape \[num_batches, num_boxes, 5\]"):
        NMSRotated13.infer(a, spec("f32", [1, 6, 4]), spec("f32", [1, 1, 6]), spec("i64", []),
                           spec("f32", []), spec("f32", []))


# ------------------------------------------------------------------ OpenVINO CPU plugin

ov = pytest.importorskip("openvino")
oracle = pytest.importorskip("oracle")
import openvino.opset1 as o1
import openvino.opset3 as o3
import openvino.opset4 as o4
import openvino.opset5 as o5
import openvino.opset9 as o9

OPSET = {1: o1, 3: o3, 4: o4, 5: o5, 9: o9}


def _draw_inputs(rng, nb, nc, n, encoding):
    """Boxes in [-5, 15] (some outside a 10x10 image), corners in either order; scores
    all distinct (a shuffled grid), so no ordering ties."""
    lo = rng.uniform(-5, 12, (nb, n, 2))
    size = rng.uniform(0.2, 4, (nb, n, 2))
    if encoding == "center":
        boxes = np.concatenate([(lo + size / 2)[..., ::-1], size[..., ::-1]], axis=-1)
    else:
        boxes = np.concatenate([lo, lo + size], axis=-1)
        flip = rng.random((nb, n)) < 0.3
        boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    total = nb * nc * n
    scores = (rng.permutation(total) + 1) / (total + 1)
    return boxes.astype(F32), scores.reshape(nb, nc, n).astype(F32)


@pytest.mark.oracle
@settings(max_examples=30)
@given(data=st.data())
def test_oracle_random(data, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("nms")
    version = data.draw(st.sampled_from([1, 3, 4, 5, 9]), label="version")
    nb, nc, n = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)),
                 data.draw(st.integers(1, 12)))
    encoding = data.draw(st.sampled_from(["corner", "center"]))
    desc = data.draw(st.booleans())
    # max_output_boxes_per_class 0: the plugin leaves valid_outputs uninitialised (garbage
    # seen here), so 0 is tested above only
    max_out = data.draw(st.integers(1, n + 2), label="max_out")
    iou = data.draw(st.floats(0.05, 0.95), label="iou")
    score = data.draw(st.floats(0.0, 0.6), label="score")
    sigma = 0.0
    if version >= 5 and data.draw(st.booleans(), label="soft"):
        sigma = data.draw(st.floats(0.1, 2.0), label="sigma")
        if version == 5:
            iou = 1.5   # the CPU plugin ignores iou_threshold in v5 Soft-NMS (the spec cuts)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    boxes, scores = _draw_inputs(rng, nb, nc, n, encoding)
    op = OPSET[version]
    b = o9.parameter(list(boxes.shape), ov.Type.f32, name="boxes")
    s = o9.parameter(list(scores.shape), ov.Type.f32, name="scores")
    consts = [o9.constant(np.array(max_out, np.int64)), o9.constant(np.array(iou, F32)),
              o9.constant(np.array(score, F32))]
    kw = {"box_encoding": encoding, "sort_result_descending": desc}
    if version >= 3:
        kw["output_type"] = data.draw(st.sampled_from(["i32", "i64"]))
    if version >= 5:
        consts.append(o9.constant(np.array(sigma, F32)))
    node = op.non_max_suppression(b, s, *consts, **kw)
    model = ov.Model([o9.result(o) for o in node.outputs()], [b, s], "nms")
    feed = {"boxes": boxes, "scores": scores}
    if version >= 5:
        # f32 scores within a few ulp: Soft-NMS weights come from the plugin's vector exp
        oracle.compare(model, feed, rtol=1e-5, atol=1e-7, tmpdir=tmp_path)
        return
    xml = oracle.save(model, tmp_path)
    (expected,) = oracle.ov_run(xml, feed)
    (got,) = oracle.irrun_run(xml, feed)
    # The plugin returns only the selected rows for v1/v3/v4; irrun the spec's static shape.
    k = min(len(got), len(expected))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got[:k], expected[:k])
    assert (got[k:] == -1).all()


@pytest.mark.oracle
@pytest.mark.parametrize("iou", [0.5, 0.1, 0.0])
def test_oracle_many_boxes(iou, tmp_path):
    # 1,500 boxes a class: more than 64 candidates, so hard NMS with iou_threshold > 0 files
    # the kept boxes in a grid; small boxes crowded together, large ones spread over many
    # cells, boxes of zero area, and equal scores.
    rng = np.random.default_rng(int(iou * 10))
    n = 1500
    lo = rng.uniform(0, 300, (2, n, 2))
    size = np.where(rng.random((2, n, 1)) < 0.05, rng.uniform(50, 300, (2, n, 2)),
                    rng.uniform(2, 15, (2, n, 2)))
    size[:, ::97] = 0
    boxes = np.concatenate([lo, lo + size], -1).astype(F32)
    scores = (rng.integers(0, 400, (2, 3, n)) / 400).astype(F32)
    b = o9.parameter([2, n, 4], ov.Type.f32, name="boxes")
    s = o9.parameter([2, 3, n], ov.Type.f32, name="scores")
    node = o9.non_max_suppression(b, s, o9.constant(np.array(1000, np.int64)),
                                  o9.constant(np.array(iou, F32)), o9.constant(np.array(0.1, F32)),
                                  sort_result_descending=False)
    model = ov.Model([o9.result(o) for o in node.outputs()], [b, s], "nms")
    oracle.compare(model, {"boxes": boxes, "scores": scores}, tmpdir=tmp_path)


@pytest.mark.oracle
@pytest.mark.parametrize("version", [5, 9])
def test_oracle_soft_nms_many_boxes(version, tmp_path):
    # Soft-NMS over 300 boxes a class, crowded so that most steps decay many boxes: every
    # step's selection and decays (the compiled steps around NumPy's exp).
    rng = np.random.default_rng(version)
    n = 300
    lo = rng.uniform(0, 100, (1, n, 2))
    boxes = np.concatenate([lo, lo + rng.uniform(5, 30, (1, n, 2))], -1).astype(F32)
    scores = rng.permutation(2 * n).reshape(1, 2, n).astype(F32) / (2 * n)
    op = OPSET[version]
    b = o9.parameter([1, n, 4], ov.Type.f32, name="boxes")
    s = o9.parameter([1, 2, n], ov.Type.f32, name="scores")
    consts = [o9.constant(np.array(200, np.int64)), o9.constant(np.array(1.5 if version == 5 else 0.6, F32)),
              o9.constant(np.array(0.05, F32)), o9.constant(np.array(0.5, F32))]
    node = op.non_max_suppression(b, s, *consts, sort_result_descending=False)
    model = ov.Model([o9.result(o) for o in node.outputs()], [b, s], "nms")
    oracle.compare(model, {"boxes": boxes, "scores": scores}, rtol=1e-5, atol=1e-7, tmpdir=tmp_path)


def test_hard_nms_grid_agrees_with_the_plain_loop():
    # The grid (iou_threshold > 0, more than 64 candidates) against every pair compared in
    # NumPy, with boxes that are NaN, infinite or of zero area, small ones and ones spread
    # over more than MAX_CELLS cells.
    from irrun.ops.nms_loop import _hard_grid
    rng = np.random.default_rng(5)
    for trial in range(40):
        n = int(rng.integers(65, 600))
        lo = rng.uniform(0, 100, (n, 2))
        size = rng.uniform(0, [2, 10, 60][trial % 3], (n, 2))
        corners = np.concatenate([lo, lo + size], -1).astype(F32)
        corners[rng.random((n, 4)) < 0.02] = rng.choice([np.nan, np.inf, -np.inf])
        with np.errstate(invalid="ignore", over="ignore"):
            areas = ((corners[:, 2] - corners[:, 0]) * (corners[:, 3] - corners[:, 1])).astype(F32)
        order = rng.permutation(n).astype(np.int64)
        thr = F32(rng.choice([0.05, 0.3, 0.7]))
        max_out = int(rng.integers(1, n + 1))
        got, want = np.empty(n, np.int64), np.empty(n, np.int64)
        k = _hard_grid(corners, areas, order, max_out, thr, got)
        count = 0
        for i in order:
            if count < max_out and _plain(corners, areas, want[:count], i, thr):
                want[count] = i
                count += 1
        np.testing.assert_array_equal(got[:k], want[:count])


def _plain(corners, areas, kept, i, thr):
    """Whether box i survives the kept boxes (NumPy, as NonMaxSuppression computed it)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        h = np.maximum(np.minimum(corners[kept, 2], corners[i, 2]) -
                       np.maximum(corners[kept, 0], corners[i, 0]), F32(0))
        w = np.maximum(np.minimum(corners[kept, 3], corners[i, 3]) -
                       np.maximum(corners[kept, 1], corners[i, 1]), F32(0))
        inter = h * w
        iou = inter / (areas[kept] + areas[i] - inter)
    iou = np.where((areas[kept] <= 0) | (areas[i] <= 0), F32(0), iou)
    return not (iou >= thr).any()


@pytest.mark.oracle
def test_oracle_empty_boxes(tmp_path):
    b = o9.parameter([1, -1, 4], ov.Type.f32, name="boxes")
    s = o9.parameter([1, 2, -1], ov.Type.f32, name="scores")
    node = o9.non_max_suppression(b, s, o9.constant(np.array(3, np.int64)),
                                  o9.constant(np.array(0.5, F32)))
    model = ov.Model([o9.result(o) for o in node.outputs()], [b, s], "nms")
    oracle.compare(model, {"boxes": np.zeros((1, 0, 4), F32), "scores": np.zeros((1, 2, 0), F32)},
                   tmpdir=tmp_path)


@pytest.mark.oracle
@settings(max_examples=25)
@given(data=st.data())
def test_oracle_multiclass_nms(data, tmp_path_factory):
    version = data.draw(st.sampled_from([8, 9]))
    with_rois = version == 9 and data.draw(st.booleans(), label="roisnum")
    nb, nc, n = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 10))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    attrs = {"sort_result_type": data.draw(st.sampled_from(["classid", "score", "none"])),
                 "sort_result_across_batch": data.draw(st.booleans()),
                 "output_type": data.draw(st.sampled_from(["i32", "i64"])),
                 "iou_threshold": data.draw(st.floats(0.05, 0.95)),
                 "score_threshold": data.draw(st.floats(0.0, 0.6)),
                 "nms_top_k": data.draw(st.sampled_from([-1, 1, 3, 20])),
                 "keep_top_k": data.draw(st.sampled_from([-1, 2, 5, 50])),
                 "background_class": data.draw(st.sampled_from([-1, 0, 2])),
                 "normalized": data.draw(st.booleans()),
                 "nms_eta": data.draw(st.sampled_from([1.0, 0.7, 0.3]))}
    lo = rng.uniform(-2, 10, (nb, n, 2))
    boxes = np.concatenate([lo, lo + rng.uniform(0.2, 4, (nb, n, 2))], -1).astype(F32)
    total = nb * nc * n
    scores = ((rng.permutation(total) + 1) / (total + 1)).reshape(nb, nc, n).astype(F32)
    if with_rois:    # per-class boxes [C, M, 4], scores [C, M], M split over the images
        m = nb * n
        boxes = np.broadcast_to(boxes.reshape(1, m, 4), (nc, m, 4)).copy()
        boxes += rng.uniform(-0.3, 0.3, boxes.shape).astype(F32)
        scores = ((rng.permutation(nc * m) + 1) / (nc * m + 1)).reshape(nc, m).astype(F32)
        cuts = np.sort(rng.integers(0, m + 1, nb - 1))
        rois = np.diff(np.concatenate([[0], cuts, [m]])).astype(np.int32)
    b = o9.parameter(list(boxes.shape), ov.Type.f32, name="boxes")
    s = o9.parameter(list(scores.shape), ov.Type.f32, name="scores")
    params, feed = [b, s], {"boxes": boxes, "scores": scores}
    if with_rois:
        r = o9.parameter([nb], ov.Type.i32, name="rois")
        params.append(r)
        feed["rois"] = rois
        node = o9.multiclass_nms(b, s, r, **attrs)
    else:
        import openvino.opset8 as o8
        node = (o9 if version == 9 else o8).multiclass_nms(b, s, **attrs)
    model = ov.Model([o9.result(o) for o in node.outputs()], params, "mc")
    oracle.compare(model, feed, rtol=1e-6, atol=0, tmpdir=tmp_path_factory.mktemp("mc"))


@pytest.mark.oracle
@settings(max_examples=20)
@given(data=st.data())
def test_oracle_matrix_nms(data, tmp_path_factory):
    import openvino.opset8 as o8
    nb, nc, n = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 10))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    attrs = {"sort_result_type": data.draw(st.sampled_from(["classid", "score", "none"])),
                 "sort_result_across_batch": data.draw(st.booleans()),
                 "output_type": data.draw(st.sampled_from(["i32", "i64"])),
                 "score_threshold": data.draw(st.floats(0.0, 0.6)),
                 "nms_top_k": data.draw(st.sampled_from([-1, 1, 3, 20])),
                 "keep_top_k": data.draw(st.sampled_from([-1, 2, 5, 50])),
                 "background_class": data.draw(st.sampled_from([-1, 0, 2])),
                 "normalized": data.draw(st.booleans()),
                 "decay_function": data.draw(st.sampled_from(["linear", "gaussian"])),
                 "gaussian_sigma": data.draw(st.sampled_from([0.5, 2.0])),
                 "post_threshold": data.draw(st.sampled_from([0.0, 0.2]))}
    lo = rng.uniform(-2, 6, (nb, n, 2))
    boxes = np.concatenate([lo, lo + rng.uniform(0.2, 4, (nb, n, 2))], -1).astype(F32)
    total = nb * nc * n
    scores = ((rng.permutation(total) + 1) / (total + 1)).reshape(nb, nc, n).astype(F32)
    ours = MatrixNms8.run(MatrixNmsAttrs(**attrs), boxes, scores)
    if ours[0].shape[0] == 0:
        # the plugin refuses to run when nothing is selected ("Total number of boxes is less
        # or equal than 0")
        assert not ours[2].any()
        return
    b = o8.parameter(list(boxes.shape), ov.Type.f32, name="boxes")
    s = o8.parameter(list(scores.shape), ov.Type.f32, name="scores")
    node = o8.matrix_nms(b, s, **attrs)
    model = ov.Model([o8.result(o) for o in node.outputs()], [b, s], "mx")
    # decayed scores: f32 within a few ulp (the plugin's exp)
    oracle.compare(model, {"boxes": boxes, "scores": scores}, rtol=1e-5, atol=1e-7,
                   tmpdir=tmp_path_factory.mktemp("mx"))


@pytest.mark.oracle
@settings(max_examples=10)
@given(data=st.data())
def test_oracle_topk_rois(data, tmp_path_factory):
    from openvino.utils.node_factory import NodeFactory  # no Python wrapper for this op
    r, k = data.draw(st.integers(1, 12)), data.draw(st.integers(0, 15))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    rois = rng.standard_normal((r, 4)).astype(F32)
    probs = rng.choice(np.linspace(0, 1, 7), r).astype(F32)       # ties on purpose
    a = o9.parameter([r, 4], ov.Type.f32, name="rois")
    b = o9.parameter([r], ov.Type.f32, name="probs")
    node = NodeFactory("opset6").create("ExperimentalDetectronTopKROIs", [a.output(0), b.output(0)],
                                        {"max_rois": k})
    xml = oracle.save(ov.Model([o9.result(node)], [a, b], "tk"), tmp_path_factory.mktemp("tk"))
    feed = {"rois": rois, "probs": probs}
    (expected,), (got,) = oracle.ov_run(xml, feed), oracle.irrun_run(xml, feed)
    # rows past the ROIs are undefined (the plugin leaves memory as it was; irrun writes 0)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got[:r], expected[:r])
    assert not got[r:].any()


@pytest.mark.oracle
@settings(max_examples=10)
@given(data=st.data())
def test_oracle_nms_rotated(data, tmp_path_factory):
    import openvino.opset13 as o13
    nb, nc, n = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)), data.draw(st.integers(1, 10))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    boxes = np.concatenate([rng.uniform(0, 10, (nb, n, 2)), rng.uniform(0.5, 5, (nb, n, 2)),
                            rng.uniform(-3.5, 3.5, (nb, n, 1))], -1).astype(F32)
    total = nb * nc * n
    scores = ((rng.permutation(total) + 1) / (total + 1)).reshape(nb, nc, n).astype(F32)
    b = o13.parameter(list(boxes.shape), ov.Type.f32, name="boxes")
    s = o13.parameter(list(scores.shape), ov.Type.f32, name="scores")
    node = o13.nms_rotated(b, s, o13.constant(np.array(data.draw(st.integers(1, n + 1)), np.int64)),
                           o13.constant(np.array(data.draw(st.floats(0.05, 0.95)), F32)),
                           o13.constant(np.array(data.draw(st.floats(0.0, 0.5)), F32)),
                           sort_result_descending=data.draw(st.booleans()),
                           output_type=data.draw(st.sampled_from(["i32", "i64"])),
                           clockwise=data.draw(st.booleans()))
    model = ov.Model([o13.result(o) for o in node.outputs()], [b, s], "nr")
    oracle.compare(model, {"boxes": boxes, "scores": scores}, tmpdir=tmp_path_factory.mktemp("nr"))
