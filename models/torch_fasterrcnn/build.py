"""Builds torchvision's Faster R-CNN MobileNetV3-Large 320 FPN detector the way
torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn does (random weights,
seeded), narrowed, and converts it with openvino.convert_model, both stages' post-processing
and NMS included:

    image [1, 3, 320, 320] u8 (an RGB image as a camera gives it)
      --/255, GeneralizedRCNNTransform (ImageNet mean/std, resize to min side 320)
      --mobilenet_v3_large(width_mult=0.25) C4 and C5 (strides 16, 32) into a
        FeaturePyramidNetwork with LastLevelMaxPool (BackboneWithFPN, 32 channels): 20x20,
        10x10, 5x5
      --RPN: RPNHead (3x3 conv, 15 anchors per cell: sizes 32-512 x ratios 0.5/1/2 on every
        level), decode, per level TopK 150 (the builder's), clip, drop small boxes and scores
        below 0.05, batched NMS 0.7, the best 150 proposals
      --RoI heads: MultiScaleRoIAlign (7x7, sampling 2) on the three levels, TwoMLPHead (64),
        FastRCNNPredictor (3 classes, 0 the background): softmax, decode, clip, score > 0.05,
        batched NMS 0.5, the best 100; boxes mapped back to the input size-->
      boxes [?, 4] f32, scores [?] f32, labels [?] i64

fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=3) has
19M parameters (its box head alone maps 256x7x7 RoI features to 1024); this file repeats the
builder's steps (mobilenet_v3_large with BatchNorm, _mobilenet_extractor's FPN on the last two
stages with LastLevelMaxPool, the AnchorGenerator, the builder's min/max size and RPN
settings) with width 0.25, 32 FPN channels instead of 256 and a 64-wide box head instead of
1024. BatchNorm statistics are re-estimated on random images and the RPN's and the box
predictor's last layers are rescaled to scores and box offsets of order 1.
check_stable asserts that the detections do not hang on float rounding: the model run in
float64 gives the same detections as in float32 on the sample and on the fresh inputs that
tests/test_models.py draws.
Run with a build venv (torch, torchvision, openvino):
`/work/buildenv/bin/python models/torch_fasterrcnn/build.py`.
Writes model.xml/.bin (ov.save_model, compress_to_fp16), inputs.npz and expected.npz.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 2801
SIZE = 320
WIDTH = 0.25
FPN_CHANNELS = 32
REPRESENTATION = 64
CLASSES = 3
RPN_CLASS_STD, RPN_BOX_STD = 1.5, 0.3
CLASS_STD, BOX_STD = 1.0, 1.0
BOX_SCORE_THRESH = 0.7
OUTPUTS = ("boxes", "scores", "labels")


def sample_inputs(rng):
    return {"image": rng.integers(0, 256, (1, 3, SIZE, SIZE)).astype(np.uint8)}


def _rescale(layer, y, dims, std):
    """Shift and scale a conv/linear layer so its outputs y have mean 0 per output channel and
    spread `std`."""
    import torch
    with torch.no_grad():
        layer.bias.sub_(y.mean(dim=dims))
        scale = std / float((y - y.mean(dim=dims, keepdim=True)).std())
        layer.weight.mul_(scale)
        layer.bias.mul_(scale)


def torch_model():
    import torch
    import torchvision
    from torch import nn
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.detection.faster_rcnn import (FasterRCNN, FastRCNNPredictor,
                                                          TwoMLPHead)
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool

    class Detector(nn.Module):
        """torchvision's detectors take a list of float [C, H, W] images and return a list of
        dicts; this is u8 image [1, 3, H, W] -> (boxes, scores, labels)."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, image):
            d = self.net([image[0].to(torch.float32) / 255.0])[0]
            return d["boxes"], d["scores"], d["labels"]

    torch.manual_seed(SEED)
    # fasterrcnn_mobilenet_v3_large_320_fpn's steps (no trained weights: BatchNorm2d, not
    # FrozenBatchNorm2d), narrowed.
    mobilenet = torchvision.models.mobilenet_v3_large(weights=None, norm_layer=nn.BatchNorm2d,
                                                      width_mult=WIDTH)
    features = mobilenet.features
    stages = [0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)] \
        + [len(features) - 1]
    returned = [len(stages) - 2, len(stages) - 1]
    backbone = BackboneWithFPN(features, {f"{stages[k]}": str(v) for v, k in enumerate(returned)},
                               [features[stages[i]].out_channels for i in returned],
                               FPN_CHANNELS, extra_blocks=LastLevelMaxPool())
    anchor_sizes = ((32, 64, 128, 256, 512),) * 3
    anchors = AnchorGenerator(anchor_sizes, ((0.5, 1.0, 2.0),) * 3)
    net = FasterRCNN(backbone, None, rpn_anchor_generator=anchors,
                     box_head=TwoMLPHead(FPN_CHANNELS * 7 * 7, REPRESENTATION),
                     box_predictor=FastRCNNPredictor(REPRESENTATION, CLASSES),
                     min_size=320, max_size=640, rpn_pre_nms_top_n_test=150,
                     rpn_post_nms_top_n_test=150, rpn_score_thresh=0.05,
                     box_score_thresh=BOX_SCORE_THRESH)

    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    gen = torch.Generator().manual_seed(SEED)
    mean = torch.tensor(net.transform.image_mean).view(1, 3, 1, 1)
    std = torch.tensor(net.transform.image_std).view(1, 3, 1, 1)
    net.backbone.train()
    with torch.no_grad():
        for _ in range(6):
            net.backbone((torch.rand(8, 3, SIZE, SIZE, generator=gen) - mean) / std)
    net.eval()

    # Rescale the RPN's predictors, then (on the proposals they give) the box predictor's.
    images = [torch.rand(3, SIZE, SIZE, generator=gen) for _ in range(8)]
    with torch.no_grad():
        batch, _ = net.transform(images)
        feats = net.backbone(batch.tensors)
        levels = list(feats.values())
        head = net.rpn.head
        objectness, deltas = head(levels)
        _rescale(head.cls_logits, torch.cat([o.flatten(2) for o in objectness], 2), (0, 2),
                 RPN_CLASS_STD)
        _rescale(head.bbox_pred, torch.cat([d.flatten(2) for d in deltas], 2), (0, 2),
                 RPN_BOX_STD)
        proposals, _ = net.rpn(batch, feats)
        roi = net.roi_heads
        x = roi.box_head(roi.box_roi_pool(feats, proposals, batch.image_sizes))
        _rescale(roi.box_predictor.cls_score, roi.box_predictor.cls_score(x), (0,), CLASS_STD)
        _rescale(roi.box_predictor.bbox_pred, roi.box_predictor.bbox_pred(x), (0,), BOX_STD)
    return Detector(net).eval(), sample_inputs(np.random.default_rng(SEED))


def check_stable(model, feeds):
    """The same detections in float64 as in float32 (labels and count exactly, boxes within
    1e-3 pixels, scores within 1e-5) on every feed: the result does not hang on rounding."""
    import copy

    import torch

    model64 = copy.deepcopy(model).double()
    model64.net.transform.image_mean = [float(v) for v in model.net.transform.image_mean]
    for feed in feeds:
        image = torch.from_numpy(feed["image"])
        with torch.no_grad():
            b32, s32, l32 = model(image)
            b64, s64, l64 = _run64(model64, image)
        assert l32.shape == l64.shape and bool((l32 == l64).all()), \
            f"labels differ in float64: {l32.tolist()} vs {l64.tolist()}"
        db = float((b32.double() - b64).abs().max()) if len(b32) else 0.0
        ds = float((s32.double() - s64).abs().max()) if len(s32) else 0.0
        assert db < 1e-2 and ds < 1e-4, f"boxes {db:.2g} or scores {ds:.2g} apart in float64"
        gap = float(torch.diff(torch.sort(s32).values).min()) if len(s32) > 1 else 1.0
        assert gap > 5 * ds, f"two scores differ by {gap:.2g}, float64 moves them by {ds:.2g}"
        print(f"{len(l32)} detections, per label {np.bincount(l32.numpy(), minlength=CLASSES)}; "
              f"float64 within {db:.2g} px, scores within {ds:.2g}; scores {gap:.2g} apart")


def _run64(model64, image):
    import torch
    with torch.no_grad():
        d = model64.net([image[0].to(torch.float64) / 255.0])[0]
    return d["boxes"], d["scores"], d["labels"]


def build():
    import openvino as ov
    import torch

    model, inputs = torch_model()
    rng = np.random.default_rng(sum(map(ord, os.path.basename(HERE))))
    check_stable(model, [inputs] + [sample_inputs(rng) for _ in range(2)])
    ov_model = ov.convert_model(model, example_input=torch.from_numpy(inputs["image"]),
                                input=[1, 3, SIZE, SIZE])
    ov_model.inputs[0].get_tensor().set_names({"image"})
    for op in ov_model.get_ordered_ops():
        for out in op.outputs():
            if out.get_names() & set(OUTPUTS):
                out.get_tensor().set_names(set())
    for out, name in zip(ov_model.outputs, OUTPUTS):
        out.get_tensor().set_names({name})
    return ov_model, inputs


if __name__ == "__main__":
    import collections

    from write import write_model  # models/write.py

    m, inputs = build()
    ops = collections.Counter(f"{n.get_type_name()}-{n.get_type_info().version_id}"
                              for n in m.get_ordered_ops())
    print(dict(sorted(ops.items())), sum(ops.values()))
    out = write_model(m, HERE, inputs)
    print({k: (v.shape, v.dtype) for k, v in out.items()}, out["labels"])
