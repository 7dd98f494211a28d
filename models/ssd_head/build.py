"""Builds a small SSD detection head by hand with OpenVINO's Python opset API: a three-conv
backbone, two feature maps with 3x3 box and class heads, PriorBox-8 on the 16x16 map and
PriorBoxClustered-1 on the 8x8 map (grid and image sizes as i64 Constants),
and DetectionOutput-8 decoding CENTER_SIZE offsets with Caffe-style NMS per class.

    image [2, 3, 64, 64] --conv s2 relu--> [2, 16, 32, 32] --conv s2 relu--> f1 [2, 24, 16, 16]
        --conv s2 relu--> f2 [2, 32, 8, 8]
    f1, f2 --conv 3x3--> box offsets (4 per prior) and class logits (5 classes, 0 background)
        --Transpose NHWC, Reshape [N, -1], Concat--> loc [2, 4864], conf (SoftMax per prior)
        [2, 6080]
    PriorBox([16, 16], [64, 64]) 4 priors per cell, PriorBoxClustered([8, 8], [64, 64]) 3
        --Unsqueeze, Concat--> priors [1, 2, 4864]
    DetectionOutput(loc, conf, priors) --> detections [1, 1, 100, 7]

The head weights are scaled so offsets stay near 1 and class logits spread the scores (no
ties in practice). Run with the build venv: `/work/buildenv/bin/python models/ssd_head/build.py`.
Writes model.xml/.bin (ov.save_model, f16-compressed weights), inputs.npz and expected.npz
(OpenVINO CPU plugin's outputs, f32 inference precision). Weights come from a fixed seed.
"""
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset1 as o1
import openvino.opset8 as o8

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model  # noqa: E402  (models/write.py)

SEED = 20261201
BATCH, SIZE, CLASSES = 2, 64, 5
BOX_PRIORS, CLUSTER_PRIORS = 4, 3


def _name(node, name):
    node.output(0).get_tensor().set_names({name})
    return node


def _conv(rng, x, cin, cout, stride, name, scale=None):
    w = rng.normal(0, scale or np.sqrt(2.0 / (9 * cin)), (cout, cin, 3, 3)).astype(np.float32)
    y = o8.convolution(x, o8.constant(w), [stride, stride], [1, 1], [1, 1], [1, 1], name=name)
    b = rng.normal(0, 0.1, (1, cout, 1, 1)).astype(np.float32)
    return o8.add(y, o8.constant(b), name=name + "_bias")


def _flat(x, name):
    x = o8.transpose(x, o8.constant(np.array([0, 2, 3, 1], np.int64)), name=name + "_nhwc")
    return o8.reshape(x, o8.constant(np.array([0, -1], np.int64)), special_zero=True, name=name)


def _hw(x, name):
    # The grid and image sizes as Constants, as converters leave them for static shapes
    # (OpenVINO's CPU plugin refuses PriorBox-8 with computed inputs).
    return o8.constant(np.array(x.get_output_partial_shape(0).to_shape()[2:], np.int64), name=name)


def build() -> ov.Model:
    rng = np.random.default_rng(SEED)
    image = _name(o8.parameter([BATCH, 3, SIZE, SIZE], ov.Type.f32, name="image"), "image")
    x = o8.relu(_conv(rng, image, 3, 16, 2, "conv1"))
    f1 = o8.relu(_conv(rng, x, 16, 24, 2, "conv2"), name="feature1")
    f2 = o8.relu(_conv(rng, f1, 24, 32, 2, "conv3"), name="feature2")

    locs, confs = [], []
    for i, (f, cin, k) in enumerate(((f1, 24, BOX_PRIORS), (f2, 32, CLUSTER_PRIORS))):
        locs.append(_flat(_conv(rng, f, cin, 4 * k, 1, f"loc{i}", 0.3 / np.sqrt(9 * cin)), f"loc{i}_flat"))
        confs.append(_flat(_conv(rng, f, cin, CLASSES * k, 1, f"conf{i}", 2.5 / np.sqrt(9 * cin)),
                           f"conf{i}_flat"))
    loc = o8.concat(locs, axis=1, name="loc")
    conf = o8.concat(confs, axis=1, name="conf_logits")
    conf = o8.reshape(conf, o8.constant(np.array([0, -1, CLASSES], np.int64)), special_zero=True)
    conf = o8.softmax(conf, axis=2, name="conf_softmax")
    conf = o8.reshape(conf, o8.constant(np.array([0, -1], np.int64)), special_zero=True, name="conf")

    img_hw = _hw(image, "image_hw")
    pb = o8.prior_box(_hw(f1, "feature1_hw"), img_hw, dict(
        min_size=[12.0], max_size=[24.0], aspect_ratio=[2.0], flip=True, clip=False, step=4.0,
        offset=0.5, variance=[0.1, 0.1, 0.2, 0.2], scale_all_sizes=True), name="priors1")
    pbc = o1.prior_box_clustered(_hw(f2, "feature2_hw"), img_hw, dict(
        width=[20.0, 36.0, 14.0], height=[20.0, 18.0, 30.0], clip=True, step=8.0, offset=0.5,
        variance=[0.1, 0.1, 0.2, 0.2]), name="priors2")
    axis0 = o8.constant(np.array([0], np.int64))
    priors = o8.concat([o8.unsqueeze(pb, axis0), o8.unsqueeze(pbc, axis0)], axis=2, name="priors")

    det = o8.detection_output(loc, conf, priors, dict(
        keep_top_k=[50], top_k=100, nms_threshold=0.45, confidence_threshold=0.56,
        background_label_id=0, code_type="caffe.PriorBoxParameter.CENTER_SIZE",
        share_location=True, variance_encoded_in_target=False, normalized=True,
        clip_after_nms=True), name="detection_output")
    result = o8.result(det, name="detections")
    result.output(0).get_tensor().set_names({"detections"})
    det.output(0).get_tensor().set_names({"detections"})
    return ov.Model([result], [image], "ssd_head")


def sample_inputs(rng) -> dict:
    return {"image": rng.uniform(0, 1, (BATCH, 3, SIZE, SIZE)).astype(np.float32)}


if __name__ == "__main__":
    out = write_model(build(), HERE, sample_inputs(np.random.default_rng(SEED + 1)))
    det = out["detections"].reshape(-1, 7)
    print("detections", det.shape, "valid rows", int((det[:, 0] >= 0).cumprod().sum()),
          "scores", det[:6, 2])
