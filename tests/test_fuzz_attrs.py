"""Fuzzing the attributes and inputs of single ops: subgraph bodies (Loop, TensorIterator, If),
string and tokenizer ops, signal ops, detection and NMS ops, and random ops.

Each seed is a small valid model around one op (or a few), written with irrun's GraphBuilder
or OpenVINO's ov.save_model, with a feed that runs it; the shipped tokenizer models are seeds
for the openvino-tokenizers ops. Each case applies 1-3 seeded random mutations to the seed's
target layers: an attribute set to an extreme int (0, -1, 2**31, 2**63-1, ...), a NaN or
infinite float, an empty or wrong-length list, an unknown enum string, a huge size, or
deleted; a port map or back edge of a body changed; another version of the op; a Const input
rewritten with extreme values or another length; a Parameter of another shape or element type;
and one case in three a feed with NaN, infinite, extreme or empty values. Then, as in
test_fuzz.py:

- irrun.validate() never reports an "internal" error;
- irrun.read_model() raises an IrrunError exactly when validate() reported an error;
- Model.infer() either succeeds or raises an IrrunError that is not an "internal error";
- each case ends within a time bound (SIGALRM), with a small IRRUN_MAX_BYTES.

The default run is FUZZ_DEFAULT cases; IRRUN_FUZZ_EXAMPLES=N runs N cases in the slow
variant: `IRRUN_FUZZ_EXAMPLES=5000 python -m pytest -m slow tests/test_fuzz_attrs.py`, from
case 10,000 on (IRRUN_FUZZ_FIRST=K starts elsewhere). IRRUN_FUZZ_SAVE=DIR keeps the files of
every failing case there.
"""
from __future__ import annotations

import collections
import os
import random
import re
import signal
from pathlib import Path

import numpy as np
import pytest
from fuzzing import check_mutant, failure, fuzz

import irrun
from irrun.errors import IrrunError
from irrun.ir.etypes import element_type, from_dtype
from irrun.ir.registry import REGISTRY
from irrun.run.feed import _range, load_npz, sample_inputs_for

ov = pytest.importorskip("openvino")
if not hasattr(signal, "SIGALRM"):
    pytest.skip("the per-case time bound needs SIGALRM (POSIX)", allow_module_level=True)

FUZZ_DEFAULT = 300
CASE_SECONDS = 20          # generous: a case normally takes milliseconds
MAX_BYTES = str(16 << 20)  # IRRUN_MAX_BYTES while fuzzing
ROOT = Path(__file__).resolve().parent.parent
F32, I32, I64 = np.float32, np.int32, np.int64


# ------------------------------------------------------------------ seeds

class Seed:
    """A model being built with GraphBuilder, with the feed that runs it."""

    def __init__(self, name: str, family: str, targets=None):
        self.g = irrun.GraphBuilder(name)
        self.name, self.family, self.targets = name, family, targets
        self.feed: dict[str, np.ndarray] = {}

    def p(self, name, value, etype=None, shape=None):
        value = np.asarray(value)
        self.feed[name] = value
        return self.g.parameter(name, etype or from_dtype(value.dtype), shape or value.shape)

    def c(self, value, etype=None):
        return self.g.constant(np.asarray(value), etype)

    def op(self, type, inputs, *, outputs=1, version=None, **attrs):
        """The op and a Result for each of its outputs."""
        out = self.g.op(type, inputs, outputs=outputs, version=version, **attrs)
        for i, t in enumerate(out if outputs > 1 else [out]):
            self.g.result(t, f"{type.lower()}_{len(self.g._layers)}_{i}")
        return out


def _r(seed, *shape, lo=0.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(F32)


def _boxes(n, size=6.0, seed=0):
    """n corner boxes [x1, y1, x2, y2] inside a size x size image."""
    a = np.sort(_r(seed, n, 2, 2, hi=size), axis=1)   # per coordinate, low then high
    return np.stack([a[:, 0, 0], a[:, 0, 1], a[:, 1, 0] + 0.5, a[:, 1, 1] + 0.5], 1)


def _detection_seeds():
    seeds = []

    def seed(name, targets):
        s = Seed(name, "detection", targets)
        seeds.append(s)
        return s

    for v in ("opset1", "opset8"):
        s = seed(f"detection_output_{v}", {"DetectionOutput"})
        loc = s.p("loc", _r(1, 1, 12, lo=-0.2, hi=0.2))
        conf = s.p("conf", _r(2, 1, 6))
        pri = s.p("priors", np.concatenate([_boxes(3, 1.0).reshape(1, 1, 12),
                                            np.full((1, 1, 12), 0.1, F32)], 1))
        extra = {"num_classes": 2} if v == "opset1" else {}
        s.op("DetectionOutput", [loc, conf, pri], version=v, keep_top_k=[3], nms_threshold=0.5,
             background_label_id=0, top_k=3, variance_encoded_in_target=False,
             code_type="caffe.PriorBoxParameter.CORNER", share_location=True,
             confidence_threshold=0.01, clip_after_nms=False, clip_before_nms=True,
             decrease_label_id=False, normalized=True, input_height=1, input_width=1,
             objectness_score=0, **extra)
    s = seed("detection_output_arm", {"DetectionOutput"})
    ins = [s.p("loc", _r(3, 1, 12, lo=-0.2, hi=0.2)), s.p("conf", _r(4, 1, 9)),
           s.p("priors", np.concatenate([_boxes(3, 1.0).reshape(1, 1, 12),
                                         np.full((1, 1, 12), 0.1, F32)], 1)),
           s.p("aux_conf", _r(5, 1, 6)), s.p("aux_loc", _r(6, 1, 12, lo=-0.2, hi=0.2))]
    s.op("DetectionOutput", ins, keep_top_k=[-1], nms_threshold=0.4, background_label_id=0,
         top_k=-1, code_type="caffe.PriorBoxParameter.CENTER_SIZE", share_location=True,
         confidence_threshold=0.0, normalized=True, objectness_score=0.3)

    for v in ("opset1", "opset8"):
        s = seed(f"prior_box_{v}", {"PriorBox"})
        extra = {"min_max_aspect_ratios_order": False} if v == "opset8" else {}
        s.op("PriorBox", [s.c(np.array([2, 2], I64)), s.c(np.array([8, 8], I64))], version=v,
             min_size=[2.0], max_size=[4.0], aspect_ratio=[2.0], flip=True, clip=True, step=0.0,
             offset=0.5, variance=[0.1, 0.1, 0.2, 0.2], scale_all_sizes=True, **extra)
    s = seed("prior_box_fixed", {"PriorBox"})
    s.op("PriorBox", [s.c(np.array([2, 3], I32)), s.c(np.array([8, 12], I32))],
         fixed_size=[2.0, 3.0], density=[1.0, 2.0], aspect_ratio=[2.0], offset=0.5,
         step=4.0, clip=False, variance=[0.1])
    s = seed("prior_box_clustered", {"PriorBoxClustered"})
    s.op("PriorBoxClustered", [s.c(np.array([2, 2], I64)), s.c(np.array([8, 8], I64))],
         width=[1.0, 2.0], height=[2.0, 1.0], clip=True, step_w=4.0, step_h=4.0, offset=0.5,
         variance=[0.1, 0.1, 0.2, 0.2])

    for v in ("opset1", "opset4"):
        s = seed(f"proposal_{v}", {"Proposal"})
        probs = s.p("probs", _r(7, 1, 4, 3, 3))
        deltas = s.p("deltas", _r(8, 1, 8, 3, 3, lo=-0.3, hi=0.3))
        info = s.p("im_info", np.array([12, 12, 1], F32))
        s.op("Proposal", [probs, deltas, info], version=v, outputs=1 if v == "opset1" else 2,
             base_size=4, pre_nms_topn=10, post_nms_topn=4, nms_thresh=0.7, feat_stride=4,
             min_size=1, ratio=[1.0], scale=[1.0, 2.0], clip_before_nms=True,
             clip_after_nms=False, normalize=False, box_size_scale=1.0,
             box_coordinate_scale=1.0, framework="")

    image = _r(9, 1, 2, 6, 6)
    for v in ("opset3", "opset9"):
        s = seed(f"roi_align_{v}", {"ROIAlign"})
        extra = {"aligned_mode": "half_pixel"} if v == "opset9" else {}
        s.op("ROIAlign", [s.p("x", image), s.p("rois", _boxes(2)), s.p("ids", np.zeros(2, I32))],
             version=v, pooled_h=2, pooled_w=2, sampling_ratio=2, spatial_scale=1.0, mode="avg",
             **extra)
    s = seed("roi_align_rotated", {"ROIAlignRotated"})
    rois = np.array([[3, 3, 2, 3, 0.5], [2, 4, 3, 1, -1.0]], F32)
    s.op("ROIAlignRotated", [s.p("x", image), s.p("rois", rois), s.p("ids", np.zeros(2, I32))],
         pooled_h=2, pooled_w=2, sampling_ratio=0, spatial_scale=1.0, clockwise_mode=True)
    rois5 = np.concatenate([np.zeros((2, 1), F32), _boxes(2)], 1)
    for method in ("max", "bilinear"):
        s = seed(f"roi_pooling_{method}", {"ROIPooling"})
        r = rois5 / 6 if method == "bilinear" else rois5
        s.op("ROIPooling", [s.p("x", image), s.p("rois", r)], pooled_h=2, pooled_w=3,
             spatial_scale=1.0, method=method)
    maps = _r(10, 1, 8, 6, 6)
    for mode, extra in (("average", {}), ("bilinear", {"spatial_bins_x": 2, "spatial_bins_y": 2})):
        s = seed(f"psroi_pooling_{mode}", {"PSROIPooling"})
        s.op("PSROIPooling", [s.p("x", maps), s.p("rois", rois5)], output_dim=2, group_size=2,
             spatial_scale=1.0, mode=mode, **extra)
    for offsets in (False, True):
        s = seed(f"deformable_psroi_pooling_{offsets}", {"DeformablePSROIPooling"})
        ins = [s.p("x", maps), s.p("rois", rois5)]
        if offsets:
            ins.append(s.p("offsets", _r(11, 2, 2, 2, 2, lo=-0.5, hi=0.5)))
        s.op("DeformablePSROIPooling", ins, output_dim=2, spatial_scale=1.0, group_size=2,
             mode="bilinear_deformable", spatial_bins_x=2, spatial_bins_y=2, trans_std=0.1,
             part_size=2)

    s = seed("ed_prior_grid", {"ExperimentalDetectronPriorGridGenerator"})
    s.op("ExperimentalDetectronPriorGridGenerator",
         [s.p("priors", np.array([[-2, -2, 2, 2], [-1, -3, 1, 3]], F32)),
          s.p("feat", np.zeros((1, 1, 2, 3), F32)), s.p("im", np.zeros((1, 3, 8, 12), F32))],
         flatten=True, h=0, w=0, stride_x=4.0, stride_y=4.0)
    s = seed("ed_roi_feature_extractor", {"ExperimentalDetectronROIFeatureExtractor"})
    s.op("ExperimentalDetectronROIFeatureExtractor",
         [s.p("rois", _boxes(3, 30.0)), s.p("f0", _r(12, 1, 2, 8, 8)),
          s.p("f1", _r(13, 1, 2, 4, 4))],
         outputs=2, output_size=2, sampling_ratio=2, pyramid_scales=[4, 8], aligned=False)
    s = seed("ed_generate_proposals", {"ExperimentalDetectronGenerateProposalsSingleImage"})
    s.op("ExperimentalDetectronGenerateProposalsSingleImage",
         [s.p("im_info", np.array([16, 16, 1], F32)), s.p("anchors", _boxes(8, 12.0)),
          s.p("deltas", _r(14, 8, 2, 2, lo=-0.2, hi=0.2)), s.p("scores", _r(15, 2, 2, 2))],
         outputs=2, min_size=0.0, nms_threshold=0.7, post_nms_count=4, pre_nms_count=6)
    s = seed("ed_detection_output", {"ExperimentalDetectronDetectionOutput"})
    s.op("ExperimentalDetectronDetectionOutput",
         [s.p("rois", _boxes(4, 20.0)), s.p("deltas", _r(16, 4, 12, lo=-0.2, hi=0.2)),
          s.p("scores", _r(17, 4, 3)), s.p("im_info", np.array([[24, 24, 1]], F32))],
         outputs=3, score_threshold=0.05, nms_threshold=0.5, max_delta_log_wh=4.135,
         num_classes=3, post_nms_count=10, max_detections_per_image=5,
         class_agnostic_box_regression=False, deltas_weights=[10.0, 10.0, 5.0, 5.0])
    s = seed("ed_topk_rois", {"ExperimentalDetectronTopKROIs"})
    s.op("ExperimentalDetectronTopKROIs", [s.p("rois", _boxes(5)), s.p("probs", _r(18, 5))],
         max_rois=3)
    s = seed("generate_proposals", {"GenerateProposals"})
    s.op("GenerateProposals",
         [s.p("im_info", np.array([[16, 16, 1], [12, 12, 1]], F32)),
          s.p("anchors", _boxes(8, 12.0).reshape(2, 2, 2, 4)),
          s.p("deltas", _r(19, 2, 8, 2, 2, lo=-0.2, hi=0.2)), s.p("scores", _r(20, 2, 2, 2, 2))],
         outputs=3, min_size=0.0, nms_threshold=0.7, pre_nms_count=6, post_nms_count=4,
         normalized=True, nms_eta=1.0, roi_num_type="i32")

    boxes = _boxes(4).reshape(1, 4, 4)
    scores = _r(21, 1, 2, 4)
    for v in ("opset1", "opset3", "opset4", "opset5", "opset9"):
        s = seed(f"nms_{v}", {"NonMaxSuppression"})
        ins = [s.p("boxes", boxes), s.p("scores", scores), s.c(np.array(2, I64)),
               s.c(np.array(0.5, F32)), s.c(np.array(0.1, F32))]
        extra = {} if v == "opset1" else {"output_type": "i32"}
        if v in ("opset5", "opset9"):
            ins.append(s.c(np.array(0.5, F32)))
        s.op("NonMaxSuppression", ins, version=v, outputs=3 if v in ("opset5", "opset9") else 1,
             box_encoding="corner", sort_result_descending=True, **extra)
    s = seed("nms_rotated", {"NMSRotated"})
    rboxes = np.concatenate([boxes[..., :2] + 1, boxes[..., 2:] - boxes[..., :2],
                             _r(22, 1, 4, 1, lo=-1, hi=1)], -1)
    s.op("NMSRotated", [s.p("boxes", rboxes), s.p("scores", scores), s.c(np.array(3, I64)),
                        s.c(np.array(0.5, F32)), s.c(np.array(0.1, F32))],
         outputs=3, sort_result_descending=True, output_type="i64", clockwise=True)
    s = seed("matrix_nms", {"MatrixNms"})
    s.op("MatrixNms", [s.p("boxes", boxes), s.p("scores", scores)], outputs=3,
         sort_result_type="score", sort_result_across_batch=False, output_type="i64",
         score_threshold=0.1, nms_top_k=3, keep_top_k=4, background_class=0, normalized=False,
         decay_function="gaussian", gaussian_sigma=2.0, post_threshold=0.0)
    for v in ("opset8", "opset9"):
        s = seed(f"multiclass_nms_{v}", {"MulticlassNms"})
        s.op("MulticlassNms", [s.p("boxes", boxes), s.p("scores", scores)], version=v, outputs=3,
             sort_result_type="classid", sort_result_across_batch=True, output_type="i32",
             iou_threshold=0.5, score_threshold=0.1, nms_top_k=3, keep_top_k=-1,
             background_class=-1, normalized=True, nms_eta=0.9)
    s = seed("multiclass_nms_roisnum", {"MulticlassNms"})
    s.op("MulticlassNms", [s.p("boxes", _boxes(4).reshape(1, 4, 4).repeat(2, 0)),
                           s.p("scores", _r(23, 2, 4)), s.p("roisnum", np.array([3], I32))],
         outputs=3, sort_result_type="score", iou_threshold=0.5, nms_top_k=-1, keep_top_k=3,
         background_class=1)

    for mode, pad in (("bilinear", "zeros"), ("bicubic", "border"), ("nearest", "reflection")):
        s = seed(f"grid_sample_{mode}", {"GridSample"})
        s.op("GridSample", [s.p("x", _r(24, 1, 2, 4, 4)),
                            s.p("grid", _r(25, 1, 3, 3, 2, lo=-1.2, hi=1.2))],
             align_corners=mode == "bicubic", mode=mode, padding_mode=pad)
    for v in ("opset1", "opset8"):
        s = seed(f"deformable_convolution_{v}", {"DeformableConvolution"})
        ins = [s.p("x", _r(26, 1, 2, 5, 5)), s.p("offsets", _r(27, 1, 18, 3, 3, lo=-1, hi=1)),
               s.p("w", _r(28, 2, 2, 3, 3))]
        extra = {}
        if v == "opset8":
            ins.append(s.p("mask", _r(29, 1, 9, 3, 3)))
            extra = {"bilinear_interpolation_pad": True}
        s.op("DeformableConvolution", ins, version=v, strides=[1, 1], pads_begin=[0, 0],
             pads_end=[0, 0], dilations=[1, 1], auto_pad="explicit", group=1,
             deformable_group=1, **extra)
    s = seed("gather_tree", {"GatherTree"})
    s.op("GatherTree", [s.p("steps", np.arange(6, dtype=I32).reshape(3, 1, 2)),
                        s.p("parents", np.array([0, 1, 1, 0, 0, 1], I32).reshape(3, 1, 2)),
                        s.p("lens", np.array([3], I32)), s.c(np.array(5, I32))])
    for softmax in (True, False):
        s = seed(f"region_yolo_{softmax}", {"RegionYolo"})
        channels = 21 if softmax else 14
        s.op("RegionYolo", [s.p("x", _r(30, 1, channels, 3, 3))], axis=1, coords=4, classes=2,
             end_axis=3, num=3, do_softmax=softmax, mask=[] if softmax else [0, 2],
             anchors=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    s = seed("reorg_yolo", {"ReorgYolo"})
    s.op("ReorgYolo", [s.p("x", _r(31, 1, 8, 4, 4))], stride=[2])
    return seeds


def _signal_seeds():
    seeds = []

    def seed(name, targets):
        s = Seed(name, "signal", targets)
        seeds.append(s)
        return s

    for kind in ("DFT", "IDFT"):
        for sizes in (None, [3]):
            s = seed(f"{kind.lower()}_{sizes}", {kind})
            ins = [s.p("x", _r(32, 2, 4, 2)), s.c(np.array([1], I64))]
            if sizes:
                ins.append(s.c(np.array(sizes, I64)))
            s.op(kind, ins)
    s = seed("dft_2d", {"DFT"})
    s.op("DFT", [s.p("x", _r(33, 3, 4, 2)), s.c(np.array([1, -2], I32)),
                 s.c(np.array([2, 5], I32))])
    s = seed("rdft", {"RDFT"})
    s.op("RDFT", [s.p("x", _r(34, 2, 6)), s.c(np.array([1], I64)), s.c(np.array([5], I64))])
    s = seed("rdft_2d", {"RDFT"})
    s.op("RDFT", [s.p("x", _r(35, 3, 4)), s.c(np.array([0, 1], I64))])
    s = seed("irdft", {"IRDFT"})
    s.op("IRDFT", [s.p("x", _r(36, 2, 4, 2)), s.c(np.array([1], I64)), s.c(np.array([6], I64))])
    s = seed("irdft_2d", {"IRDFT"})
    s.op("IRDFT", [s.p("x", _r(37, 3, 3, 2)), s.c(np.array([0, 1], I64))])
    for transpose in (False, True):
        s = seed(f"stft_{transpose}", {"STFT"})
        s.op("STFT", [s.p("x", _r(38, 2, 16)), s.p("w", _r(39, 4)), s.c(np.array(4, I64)),
                      s.c(np.array(2, I64))], transpose_frames=transpose)
    for length in (None, 12):
        s = seed(f"istft_{length}", {"ISTFT"})
        ins = [s.p("x", _r(40, 3, 5, 2)), s.p("w", np.ones(4, F32)), s.c(np.array(4, I64)),
               s.c(np.array(2, I64))]
        if length:
            ins.append(s.c(np.array(length, I64)))
        s.op("ISTFT", ins, center=length is None, normalized=length is not None)
    return seeds


def _random_seeds():
    seeds = []
    for etype, lo, hi in (("f32", 0.0, 1.0), ("i64", 0, 10), ("f16", -1.0, 1.0)):
        s = Seed(f"random_uniform_{etype}", "random", {"RandomUniform"})
        dtype = element_type(etype).dtype
        s.op("RandomUniform", [s.c(np.array([2, 3], I64)), s.c(np.array(lo, dtype)),
                               s.c(np.array(hi, dtype))],
             output_type=etype, global_seed=7, op_seed=3, alignment="tensorflow")
        seeds.append(s)
    s = Seed("random_uniform_shape_input", "random", {"RandomUniform"})
    s.op("RandomUniform", [s.p("shape", np.array([2, 2], I32)), s.c(np.array(0.0, F32)),
                           s.c(np.array(2.0, F32))], output_type="f32", alignment="pytorch")
    seeds.append(s)
    for log in (False, True):
        s = Seed(f"multinomial_{log}", "random", {"Multinomial"})
        probs = np.log(_r(41, 2, 4) + 0.1) if log else _r(41, 2, 4) + 0.1
        s.op("Multinomial", [s.p("probs", probs), s.c(np.array(3, I64))], convert_type="i32",
             with_replacement=not log, log_probs=log, global_seed=1, op_seed=2)
        seeds.append(s)
    s = Seed("multinomial_samples_input", "random", {"Multinomial"})
    s.op("Multinomial", [s.p("probs", _r(42, 1, 5) + 0.1), s.p("n", np.array([2], I32))],
         convert_type="i64", with_replacement=False, log_probs=False)
    seeds.append(s)
    return seeds


def _string_seeds():
    seeds = []
    texts = np.array(["hello", "", "\u00e9t\u00e9 wide"], dtype=object)
    for version in ("opset15", "extension"):
        extra = {"mode": "begins_ends"} if version == "extension" else {}
        s = Seed(f"string_round_trip_{version}", "string",
                 {"StringTensorUnpack", "StringTensorPack"})
        b, e, sym = s.g.op("StringTensorUnpack", [s.p("s", texts, "string")], outputs=3,
                           version=version, **extra)
        s.op("StringTensorPack", [b, e, sym], version=version, **extra)
        s.g.result(sym, "symbols")
        seeds.append(s)
        s = Seed(f"string_pack_{version}", "string", {"StringTensorPack"})
        s.op("StringTensorPack", [s.p("begins", np.array([[0, 2], [2, 2]], I32)),
                                  s.p("ends", np.array([[2, 2], [2, 5]], I32)),
                                  s.p("symbols", np.frombuffer(b"abcde", np.uint8))],
             version=version, **extra)
        seeds.append(s)
    s = Seed("string_unpack_2d", "string", {"StringTensorUnpack"})
    s.op("StringTensorUnpack", [s.p("s", texts.reshape(1, 3), "string")], outputs=3)
    seeds.append(s)
    return seeds


def _body_seeds():
    """Loop, TensorIterator and If (and one nested), written by OpenVINO."""
    import openvino.opset8 as o

    def f32(shape, name):
        return o.parameter(list(shape), np.float32, name=name)

    models = {}
    x = f32((2, 3), "x")
    trip = o.parameter([], np.int64, name="trip")
    bx, bacc, it = f32((2, 3), "bx"), f32((2, 3), "bacc"), o.parameter([], np.int64, name="it")
    acc = o.add(bacc, o.multiply(bx, o.convert(o.add(it, o.constant(np.int64(1))), "f32")))
    r_cond = o.result(o.less(it, o.constant(np.int64(4))))
    r_acc, r_scan = o.result(acc), o.result(o.unsqueeze(acc, o.constant([0])))
    loop = o.loop(trip, o.constant(True))
    loop.set_function(ov.Model([r_cond, r_acc, r_scan], [bx, bacc, it], "body"))
    loop.set_special_body_ports([2, 0])
    loop.set_invariant_input(bx, x.output(0))
    loop.set_merged_input(bacc, x.output(0), r_acc.output(0))
    models["loop"] = (ov.Model([loop.get_iter_value(r_acc.output(0), -1),
                                loop.get_concatenated_slices(r_scan.output(0), 0, 1, 1, -1, 0)],
                               [x, trip]), {"x": _r(43, 2, 3), "trip": np.array(3, I64)})

    x = f32((2, 4, 3), "x")
    c = o.parameter([], bool, name="c")
    bx, bs = f32((2, 1, 3), "bx"), f32((2, 3), "bs")
    s = o.add(bs, o.squeeze(bx, o.constant([1])))
    r, rs, rc = o.result(s), o.result(o.unsqueeze(s, o.constant([0]))), o.result(o.constant(True))
    loop = o.loop(o.constant(np.int64(-1)), c)
    loop.set_function(ov.Model([r, rs, rc], [bx, bs]))
    loop.set_special_body_ports([-1, 2])
    loop.set_sliced_input(bx, x.output(0), 0, 1, 1, -1, 1)
    loop.set_merged_input(bs, o.reduce_sum(x, [1], False).output(0), r.output(0))
    models["loop_sliced"] = (ov.Model([loop.get_iter_value(r.output(0), -1),
                                       loop.get_concatenated_slices(rs.output(0), 0, 1, 1, -1, 0)],
                                      [x, c]), {"x": _r(44, 2, 4, 3), "c": np.array(True)})

    y, h0 = f32((2, 5, 3), "y"), f32((2, 3), "h0")
    xi, hi = f32((2, 1, 3), "xi"), f32((2, 3), "hi")
    nh = o.tanh(o.add(o.squeeze(xi, o.constant([1])), o.multiply(hi, o.constant(np.float32(0.5)))))
    rh, ro = o.result(nh), o.result(o.unsqueeze(nh, o.constant([1])))
    ti = o.tensor_iterator()
    ti.set_body(ov.Model([rh, ro], [xi, hi]))
    ti.set_sliced_input(xi, y.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(hi, h0.output(0), rh.output(0))
    outs = [ti.get_iter_value(rh.output(0), -1),
            ti.get_concatenated_slices(ro.output(0), -1, -1, 1, 0, 1)]
    models["tensor_iterator"] = (ov.Model(outs, [y, h0]),
                                 {"y": _r(45, 2, 5, 3), "h0": _r(46, 2, 3)})

    x, c = f32((2, 3), "x"), o.parameter([], bool, name="c")
    tp, ep = f32((2, 3), "tp"), f32((2, 3), "ep")
    node = o.if_op(c)
    node.set_then_body(ov.Model([o.result(o.relu(tp))], [tp], "then"))
    node.set_else_body(ov.Model([o.result(o.concat([ep, ep], 0))], [ep], "else"))
    node.set_input(x.output(0), tp, ep)
    out = node.set_output(node.get_then_body().get_results()[0],
                          node.get_else_body().get_results()[0])
    models["if"] = (ov.Model([out], [x, c]), {"x": _r(47, 2, 3, lo=-1), "c": np.array(False)})

    x = f32((3,), "x")
    bacc, it = f32((3,), "bacc"), o.parameter([], np.int64, name="it")
    even = o.equal(o.floor_mod(it, o.constant(np.int64(2))), o.constant(np.int64(0)))
    tp, ep = f32((3,), "tp"), f32((3,), "ep")
    node = o.if_op(even.output(0))
    node.set_then_body(ov.Model([o.result(o.add(tp, o.constant(np.float32(1))))], [tp]))
    node.set_else_body(ov.Model([o.result(o.multiply(ep, o.constant(np.float32(2))))], [ep]))
    node.set_input(bacc.output(0), tp, ep)
    v = node.set_output(node.get_then_body().get_results()[0],
                        node.get_else_body().get_results()[0])
    r, rc = o.result(v), o.result(o.constant(True))
    loop = o.loop(o.constant(np.int64(5)), o.constant(True))
    loop.set_function(ov.Model([r, rc], [bacc, it]))
    loop.set_special_body_ports([1, 1])
    loop.set_merged_input(bacc, x.output(0), r.output(0))
    models["loop_if"] = (ov.Model([loop.get_iter_value(r.output(0), -1)], [x]),
                         {"x": _r(48, 3)})
    return models


def _tokenizer_seeds():
    """The shipped openvino-tokenizers models; their extension layers are the targets."""
    seeds = []
    for xml in sorted(ROOT.glob("models/tok_*/*.xml")):
        sample = sample_inputs_for(str(xml))
        if sample:
            feed = load_npz(sample)
        else:
            model = irrun.read_model(xml)
            feed = {}
            for info in model.inputs:
                if info.element_type == "string":
                    feed[info.name] = np.array(["Hello world!", "the cat  sat 12"], dtype=object)
                else:
                    feed[info.name] = np.array([[5, 17, 3, 40, 2]], np.int64)
        seeds.append((f"{xml.parent.name}/{xml.stem}", "tokenizer", "extension", xml, feed))
    return seeds


def build_seeds(directory: Path) -> list[tuple]:
    """(name, family, targets, xml text, bin bytes, feed) for every seed. targets: the set of
    layer types whose attributes are mutated, "extension" for every extension layer, None for
    every layer of a body model."""
    out = []
    for s in _detection_seeds() + _signal_seeds() + _random_seeds() + _string_seeds():
        xml, bin_path = s.g.save(directory / f"{s.name}.xml")
        out.append((s.name, s.family, s.targets, Path(xml).read_text(),
                    Path(bin_path).read_bytes(), s.feed))
    for name, (model, feed) in _body_seeds().items():
        xml = directory / f"{name}.xml"
        ov.save_model(model, str(xml), compress_to_fp16=False)
        out.append((name, "body", None, xml.read_text(), xml.with_suffix(".bin").read_bytes(),
                    feed))
    for name, family, targets, xml, feed in _tokenizer_seeds():
        out.append((name, family, targets, xml.read_text(), xml.with_suffix(".bin").read_bytes(),
                    feed))
    return out


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return build_seeds(tmp_path_factory.mktemp("attr_seeds"))


FAMILY_OPS = {
    "body": {"Loop", "TensorIterator", "If"},
    "string": {"StringTensorPack", "StringTensorUnpack"},
    "signal": {"DFT", "IDFT", "RDFT", "IRDFT", "STFT", "ISTFT"},
    "random": {"RandomUniform", "Multinomial"},
}


def test_seeds_cover_the_families(seeds):
    types = set()
    for _, _, _, text, _, _ in seeds:
        types |= set(re.findall(r'type="(\w+)"', text))
    detection = {"DetectionOutput", "PriorBox", "PriorBoxClustered", "Proposal", "ROIAlign",
                 "ROIAlignRotated", "ROIPooling", "PSROIPooling", "DeformablePSROIPooling",
                 "GenerateProposals", "NonMaxSuppression", "NMSRotated", "MatrixNms",
                 "MulticlassNms", "GridSample", "DeformableConvolution", "GatherTree",
                 "RegionYolo", "ReorgYolo", "ExperimentalDetectronPriorGridGenerator",
                 "ExperimentalDetectronROIFeatureExtractor", "ExperimentalDetectronDetectionOutput",
                 "ExperimentalDetectronGenerateProposalsSingleImage",
                 "ExperimentalDetectronTopKROIs"}
    tokenizer_ops = {"RegexNormalization", "CharsMapNormalization", "NormalizeUnicode",
                     "CaseFold", "SpecialTokensSplit", "RegexSplit", "BPETokenizer",
                     "WordpieceTokenizer", "UnigramTokenizer", "Truncate", "CombineSegments",
                     "RaggedToDense", "VocabDecoder", "FuzeRagged", "ByteFallback", "UTF8Validate",
                     "BytesToChars", "CharsToBytes"}
    wanted = detection | tokenizer_ops | set().union(*FAMILY_OPS.values())
    assert wanted <= types, sorted(wanted - types)


def test_seeds_load_and_run(seeds, tmp_path):
    """Unmutated seeds work, so mutations start from a good model."""
    for name, _, _, text, blob, feed in seeds:
        xml = _write(tmp_path, text, blob)
        assert not [d for d in irrun.validate(xml) if d.severity == "error"], name
        irrun.read_model(xml).infer(feed)


# ------------------------------------------------------------------ mutations

INTS = [0, -1, 1, 2, -2, 3, 255, 65536, 2**31 - 1, 2**31, -2**31, 2**32, 2**63 - 1, 2**63,
        -2**63, 10**6, 10**9, 10**12, 10**30]
FLOATS = ["nan", "inf", "-inf", "-0.0", "0", "-1", "1e-45", "1e38", "3.5e38", "-1e38", "1e308",
          "1e400", "0.5", "1.0000001", "9.2233720368547758e18", "NaN", "Infinity", "1e-300"]
STRINGS = ["", " ", "bogus", "NONE", "avg", "max", "bilinear", "bicubic", "nearest", "zeros",
           "border", "reflection", "caffe.PriorBoxParameter.CENTER_SIZE",
           "caffe.PriorBoxParameter.CORNER", "tensorflow", "pytorch", "i32", "i64", "f16",
           "f32", "u8", "boolean", "string", "classid", "class", "score", "none", "gaussian",
           "linear", "half_pixel", "half_pixel_for_nn", "asymmetric", "corner", "center",
           "explicit", "same_upper", "valid", "begins_ends", "current_iteration",
           "execution_condition", "average", "bilinear_deformable", "nfc", "NFKD", "utf-8",
           "remove", "isolate", "contiguous", "merged_with_previous", "(", "[a-", "(a*)*$",
           ".*", "\\", "\u00e9", "true", "false", "1,2", "-1"]
BOOLS = ["true", "false", "True", "1", "0", "maybe", "", "yes"]
ATTRIBUTE = re.compile(r'([\w:-]+)="([^"]*)"')
LAYER = re.compile(r'<layer\b[^>]*\btype="([^"]*)"[^>]*\bversion="([^"]*)"')
INT_TEXT = re.compile(r"-?\d+")
FLOAT_TEXT = re.compile(r"-?(\d+\.?\d*([eE][-+]?\d+)?|inf|nan)", re.I)


def _lines_by_owner(lines):
    """For each line: the type of the innermost layer it belongs to (None outside layers), and
    the section it is in ("port_map", "back_edges" or "")."""
    stack, section, out = [], "", []
    for ln in lines:
        s = ln.strip()
        m = LAYER.search(s) if s.startswith("<layer") else None
        if m:
            stack.append(m.group(1))
            out.append((m.group(1), "layer"))
            if s.endswith("/>"):
                stack.pop()
            continue
        if s.startswith("<port_map") or s.startswith("<back_edges"):
            section = "port_map" if "port_map" in s else "back_edges"
        out.append((stack[-1] if stack else None, section))
        if s.startswith("</port_map") or s.startswith("</back_edges"):
            section = ""
        if s.startswith("</layer") and stack:
            stack.pop()
    return out


def _targeted(owner, targets, text):
    if owner in (None, "Parameter", "Const", "Result"):
        return False
    if targets is None:
        return True
    if targets == "extension":
        return bool(re.search(rf'type="{re.escape(owner)}" version="extension"', text))
    return owner in targets


def _new_value(old: str, rng: random.Random) -> str:
    parts = old.split(",") if old else []
    if parts and all(INT_TEXT.fullmatch(p.strip()) for p in parts):
        pool = [str(v) for v in INTS]
    elif parts and all(FLOAT_TEXT.fullmatch(p.strip()) for p in parts):
        pool = FLOATS + [str(v) for v in INTS[:8]]
    elif old in ("true", "false"):
        return rng.choice(BOOLS)
    else:
        return rng.choice(STRINGS + [old.upper(), old + "x"])
    kind = rng.choice(["one", "one", "all", "empty", "drop", "add", "text"])
    if kind == "one" and parts:
        parts[rng.randrange(len(parts))] = rng.choice(pool)
    elif kind == "all":
        value = rng.choice(pool)
        parts = [value] * max(len(parts), 1)
    elif kind == "empty":
        parts = []
    elif kind == "drop" and parts:
        parts.pop(rng.randrange(len(parts)))
    elif kind == "add":
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(pool + parts))
        if rng.random() < 0.3:
            parts = parts * rng.choice([2, 10, 1000])
    else:
        return rng.choice(["abc", "1.5", "1,,2", "1 2", "0x10", "9" * 400, "-", ","])
    return ",".join(parts)


def _mutate_attribute(text, targets, rng, log):
    lines = text.split("\n")
    owners = _lines_by_owner(lines)
    found = []
    for i, (ln, (owner, section)) in enumerate(zip(lines, owners)):
        s = ln.strip()
        if section in ("port_map", "back_edges") and (s.startswith("<input") or
                                                      s.startswith("<output") or
                                                      s.startswith("<edge")):
            found.append(i)
        elif s.startswith("<data") and _targeted(owner, targets, text):
            found.append(i)
    if not found:
        return text
    i = rng.choice(found)
    attrs = list(ATTRIBUTE.finditer(lines[i]))
    r = rng.random()
    if not attrs or r < 0.05:
        name = rng.choice(["axis", "start", "end", "stride", "part_size", "mode", "bogus"])
        new = rng.choice([str(v) for v in INTS[:8]] + ["bogus"])
        lines[i] = re.sub(r"\s*/?>\s*$", f' {name}="{new}" />', lines[i], count=1)
        log.append(f"line {i + 1}: add {name}={new!r}")
    elif r < 0.12:
        m = rng.choice(attrs)
        lines[i] = lines[i][:m.start()] + lines[i][m.end():]
        log.append(f"line {i + 1}: delete {m.group(1)}={m.group(2)[:30]!r}")
    else:
        m = rng.choice(attrs)
        new = _new_value(m.group(2), rng)
        lines[i] = lines[i][:m.start(2)] + new + lines[i][m.end(2):]
        log.append(f"line {i + 1}: {m.group(1)}={m.group(2)[:30]!r} -> {new[:40]!r}")
    return "\n".join(lines)


def _mutate_version(text, targets, rng, log):
    lines = text.split("\n")
    owners = _lines_by_owner(lines)
    found = [i for i, (o, sec) in enumerate(owners)
             if sec == "layer" and _targeted(o, targets, text)]
    if not found:
        return text
    i = rng.choice(found)
    m = LAYER.search(lines[i])
    versions = [v.version if v.since is None else f"opset{v.since}"
                for v in REGISTRY.versions(m.group(1))]
    new = rng.choice(versions + ["opset1", "opset99", "extension"])
    lines[i] = lines[i][:m.start(2)] + new + lines[i][m.end(2):]
    log.append(f"line {i + 1}: {m.group(1)} version {m.group(2)} -> {new}")
    return "\n".join(lines)


def _extremes(et, rng):
    if et.kind == "float":
        return rng.choice([np.nan, np.inf, -np.inf, 0.0, -1.0, 1e30, -1e30, 1e-30, 65504.0, 7.5])
    if et.kind == "bool":
        return rng.choice([0, 1])
    lo, hi = _range(et)
    return int(np.clip(rng.choice([0, -1, 1, 2, 3, 7, 255, 2**31 - 1, -2**31, 2**32, 10**6,
                                   10**9, 2**62, lo, hi]), lo, hi))


def _const_layers(lines):
    out = []
    owners = _lines_by_owner(lines)
    for i, (ln, (owner, _)) in enumerate(zip(lines, owners)):
        if owner == "Const" and ln.strip().startswith("<data"):
            a = dict(ATTRIBUTE.findall(ln))
            try:
                et = element_type(a.get("element_type", ""))
                offset, size = int(a["offset"]), int(a["size"])
            except (KeyError, ValueError, IrrunError):
                continue
            if et.bits % 8 == 0 and et.kind != "string" and size <= 1 << 16:
                out.append((i, a, et, offset, size))
    return out


def _mutate_const(text, blob, rng, log):
    """Rewrite a Const's values in the .bin (some or all to an extreme), or give it another
    length (new values appended to the .bin)."""
    lines = text.split("\n")
    found = _const_layers(lines)
    if not found:
        return text, blob
    i, a, et, offset, size = rng.choice(found)
    n = size // (et.bits // 8)
    old = np.frombuffer(blob[offset:offset + size], et.dtype) if offset + size <= len(blob) \
        else np.zeros(n, et.dtype)
    if rng.random() < 0.7 and n:
        values = old.copy()
        with np.errstate(all="ignore"):
            if rng.random() < 0.5:
                values[rng.randrange(n)] = _extremes(et, rng)
            else:
                values[:] = _extremes(et, rng)
        data = bytearray(blob)
        data[offset:offset + size] = values.tobytes()
        log.append(f"const line {i + 1} ({et.name}[{n}]) -> {values.tolist()[:6]}")
        return text, bytes(data)
    shape = [int(d) for d in a.get("shape", "").split(",") if d.strip()]
    kind = rng.choice(["longer", "shorter", "scalar", "rank", "empty"])
    if kind == "longer":
        shape = [n + rng.choice([1, 2, 5])]
    elif kind == "shorter":
        shape = [max(n - 1, 0)]
    elif kind == "scalar":
        shape = []
    elif kind == "rank":
        shape = [1] + (shape or [1])
    else:
        shape = [0]
    count = int(np.prod(shape, dtype=np.int64))
    base = old if old.size else np.ones(1, et.dtype)
    with np.errstate(all="ignore"):
        values = np.resize(base, count).astype(et.dtype)
        if count and rng.random() < 0.5:
            values[rng.randrange(count)] = _extremes(et, rng)
    new = {"shape": ",".join(map(str, shape)), "offset": str(len(blob)),
           "size": str(values.nbytes)}
    lines[i] = ATTRIBUTE.sub(lambda m: f'{m.group(1)}="{new.get(m.group(1), m.group(2))}"',
                             lines[i])
    lines = _set_port_dims(lines, i, shape)
    log.append(f"const line {i + 1} ({et.name}{list(a.get('shape', '').split(','))}) -> "
               f"shape {shape} {values.tolist()[:6]}")
    return "\n".join(lines), blob + values.tobytes()


def _set_port_dims(lines, data_line, shape):
    """The <dim> lines of the output port after `data_line` (a Parameter's or a Const's) made
    `shape` ("?" dims written as -1)."""
    j = data_line + 1
    while j < len(lines) and "<port" not in lines[j]:
        j += 1
    if j == len(lines):
        return lines
    k = j + 1
    while k < len(lines) and lines[k].strip().startswith("<dim>"):
        k += 1
    indent = re.match(r"\s*", lines[j]).group() + "\t"
    dims = [f"{indent}<dim>{-1 if d == '?' else d}</dim>" for d in shape]
    return lines[:j + 1] + dims + lines[k:]


def _mutate_parameter(text, targets, rng, log):
    """Another shape or element type for a Parameter (outer, or of a body)."""
    lines = text.split("\n")
    owners = _lines_by_owner(lines)
    found = [i for i, (ln, (o, _)) in enumerate(zip(lines, owners))
             if o == "Parameter" and ln.strip().startswith("<data")]
    if not found:
        return text
    i = rng.choice(found)
    a = dict(ATTRIBUTE.findall(lines[i]))
    if rng.random() < 0.25:
        new = rng.choice(["f32", "f16", "f64", "i32", "i64", "u8", "i8", "boolean", "string",
                          "bf16", "u1"])
        lines[i] = lines[i].replace(f'element_type="{a.get("element_type")}"',
                                    f'element_type="{new}"')
        log.append(f"parameter line {i + 1}: element_type {a.get('element_type')} -> {new}")
        return "\n".join(lines)
    shape = [d for d in a.get("shape", "").split(",") if d.strip()]
    kind = rng.choice(["dim", "dim", "dynamic", "add", "drop"])
    if kind in ("dim", "dynamic") and shape:
        k = rng.randrange(len(shape))
        shape[k] = "?" if kind == "dynamic" else str(rng.choice([0, 1, 2, 3, 5, 7, 64, 1000,
                                                                 2**31, 10**12]))
    elif kind == "add" or not shape:
        shape.insert(rng.randrange(len(shape) + 1), str(rng.choice([0, 1, 2])))
    else:
        shape.pop(rng.randrange(len(shape)))
    new = ",".join(shape)
    lines[i] = lines[i].replace(f'shape="{a.get("shape")}"', f'shape="{new}"')
    lines = _set_port_dims(lines, i, shape)
    log.append(f"parameter line {i + 1}: shape {a.get('shape')} -> {new}")
    return "\n".join(lines)


# ------------------------------------------------------------------ feeds

WORDS = np.array(["", "a", "ab c", "the cat", "\u00e9t\u00e9 1", "Hello world!"], dtype=object)


def _feed(model, base: dict, rng: random.Random) -> dict | None:
    """A feed that fits the model's inputs: the seed's values where they fit, else values
    drawn from the seed's (or small random ones)."""
    feed = {}
    np_rng = np.random.default_rng(rng.randrange(2**32))
    for info in model.inputs:
        et = element_type(info.element_type)
        b = base.get(info.name)
        b = None if b is None else np.asarray(b)
        if info.shape is None:
            dims = list(b.shape) if b is not None else [2]
        else:
            dims = []
            for k, d in enumerate(info.shape):
                if d.is_static:
                    dims.append(d.value)
                    continue
                want = b.shape[k] if b is not None and b.ndim == len(info.shape) else 2
                lo, hi = max(d.lo, 0), d.hi if d.hi is not None else max(d.lo, 0) + 4
                dims.append(want if d.contains(want) else rng.randint(min(lo, hi), max(lo, hi)))
        if int(np.prod(dims, dtype=np.float64)) > 1_000_000:
            return None
        same_kind = b is not None and (b.dtype == object) == (et.kind == "string") and \
            (b.dtype.kind == "f") == (et.kind == "float") and \
            (b.dtype.kind == "b") == (et.kind == "bool")
        if same_kind and list(b.shape) == dims and b.dtype == et.dtype:
            value = b.copy()
        elif same_kind and b.size:
            value = np_rng.choice(b.reshape(-1), size=dims).astype(et.dtype)
        elif et.kind == "bool":
            value = np_rng.random(dims) < 0.5
        elif et.kind == "string":
            value = np.asarray(WORDS[np_rng.integers(0, len(WORDS), size=dims)], dtype=object)
        elif et.is_float:
            value = np_rng.standard_normal(dims).astype(et.dtype)
        else:
            value = np_rng.integers(0, 3, size=dims).astype(np.int64).clip(*_range(et))
            value = value.astype(et.dtype)
        feed[info.name] = value
    return feed


def _mutate_feed(feed: dict, model, rng: random.Random, log: list) -> dict:
    """NaN, infinite, extreme, empty or odd values in one input."""
    if not feed:
        return feed
    feed = dict(feed)
    name = rng.choice(sorted(feed))
    a = np.array(feed[name], copy=True)
    info = next(i for i in model.inputs if i.name == name)
    dynamic = [k for k, d in enumerate(info.shape or ()) if not d.is_static]
    if dynamic and rng.random() < 0.2:
        shape = list(a.shape)
        shape[rng.choice(dynamic)] = rng.choice([0, 1, 1000])
        if np.prod(shape, dtype=np.float64) <= 1_000_000:
            a = np.resize(a, shape) if a.size else np.zeros(shape, a.dtype)
            feed[name] = a
            log.append(f"feed {name!r}: shape {shape}")
            return feed
    if a.dtype == object:
        values = ["", "\x00", "a" * 5000, "\ud800", "\U0001f600" * 3, "<s></s>" * 10]
    elif a.dtype.kind in "fV":     # V: bfloat16
        values = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -1.0, 1e6, -0.0, 1e-40]
    elif a.dtype.kind == "b":
        values = [True, False]
    else:
        lo, hi = (int(v) for v in (np.iinfo(a.dtype).min, np.iinfo(a.dtype).max))
        values = [int(np.clip(v, lo, hi)) for v in
                  (-1, 0, lo, hi, 2**31 - 1, -2**31, 10**6, 2**40, 7, 1000)]
    if a.size:
        value = rng.choice(values)
        with np.errstate(all="ignore"):
            if rng.random() < 0.6:
                a.reshape(-1)[rng.randrange(a.size)] = value
            else:
                a[...] = value
        log.append(f"feed {name!r}: {value!r:.40}")
    feed[name] = a
    return feed


# ------------------------------------------------------------------ one case

def _write(directory: Path, text: str, blob: bytes) -> Path:
    xml = directory / "model.xml"
    xml.write_text(text, encoding="utf-8", errors="surrogatepass")
    (directory / "model.bin").write_bytes(blob)
    return xml


OUTCOMES: collections.Counter = collections.Counter()


def mutate(seed: int, seeds) -> tuple[str, str, bytes, dict, list]:
    """The case's seed model (name), mutated text and .bin, the seed's feed, and a log."""
    rng = random.Random(seed)
    name, family, targets, text, blob, feed = seeds[rng.randrange(len(seeds))]
    log = [f"seed model {name}"]
    for _ in range(rng.choice([1, 1, 2, 2, 3])):
        kind = rng.choices(["attribute", "version", "const", "parameter"], [10, 1, 4, 2])[0]
        if kind == "attribute":
            text = _mutate_attribute(text, targets, rng, log)
        elif kind == "version":
            text = _mutate_version(text, targets, rng, log)
        elif kind == "const":
            text, blob = _mutate_const(text, blob, rng, log)
        else:
            text = _mutate_parameter(text, targets, rng, log)
    return name, text, blob, feed, log


def run_case(seed: int, seeds, directory: Path) -> str | None:
    """One mutated model through validate, read_model and infer; a failure description or None."""
    name, text, blob, base, log = mutate(seed, seeds)
    rng = random.Random(seed ^ 0xFEED)
    xml = _write(directory, text, blob)

    def feed_for(model):
        feed = _feed(model, base, rng)
        if feed is not None and rng.random() < 0.35:
            feed = _mutate_feed(feed, model, rng, log)
        return feed, "infer"

    def describe(stage, message, exc):
        return failure(seed, log, stage, message[:2000], xml, exc, saved_as=f"attrs{seed}")
    return check_mutant(xml, feed_for, OUTCOMES, seconds=CASE_SECONDS, describe=describe)


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", MAX_BYTES)


def fuzz_cases(seeds, directory, first: int, count: int) -> None:
    # Many mutants load and run to the end, many others are rejected.
    fuzz(lambda seed: run_case(seed, seeds, directory), OUTCOMES, first, count,
         least_ran=0.2, least_rejected=0.1)


def test_fuzz_attributes(seeds, tmp_path, small_limit):
    fuzz_cases(seeds, tmp_path, 0, FUZZ_DEFAULT)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("IRRUN_FUZZ_EXAMPLES"),
                    reason="a long campaign: set IRRUN_FUZZ_EXAMPLES=N")
def test_fuzz_attributes_long(seeds, tmp_path, small_limit):
    first = int(os.environ.get("IRRUN_FUZZ_FIRST", 10_000))
    fuzz_cases(seeds, tmp_path, first, int(os.environ["IRRUN_FUZZ_EXAMPLES"]))
