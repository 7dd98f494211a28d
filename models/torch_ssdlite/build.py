"""Builds torchvision's SSDlite320-MobileNetV3-Large detector the way
torchvision.models.detection.ssdlite320_mobilenet_v3_large does (random weights, seeded), at
a quarter of the width, and converts it with openvino.convert_model, post-processing and NMS
included:

    image [1, 3, 320, 320] u8 (an RGB image as a camera gives it)
      --/255, then SSD's GeneralizedRCNNTransform (normalise to [-1, 1], resize to 320x320)
      --mobilenet_v3_large(width_mult=0.25, reduced_tail=True) cut at C4 (stride 16) and its end
        (stride 32), then SSDLiteFeatureExtractorMobileNet's four extra blocks (width_mult
        0.25): six feature maps 20x20, 10x10, 5x5, 3x3, 2x2, 1x1
      --SSDLiteHead (depthwise 3x3 + 1x1 box and class predictors, 6 anchors per cell from
        DefaultBoxGenerator): 3234 anchors, 3 classes (0 is the background)
      --SSD.postprocess_detections: softmax, decode and clip boxes, per class score > 0.25 and
        TopK(10), batched NMS (IoU 0.55, the builder's), the best 20-->
      boxes [?, 4] f32, scores [?] f32, labels [?] i64

ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3) is 2.2M
parameters (4.4 MB as f16); this one has 200k. Its builder passes **kwargs both to the
backbone and to SSD, so width_mult cannot go through it; this file repeats its steps (norm
layer, _normal_init, reduced tail, extractor at the last-but-one stage, 6-level
DefaultBoxGenerator, SSDLiteHead, image mean/std 0.5) with width 0.25 on the backbone and
the extra blocks.
The post-processing thresholds differ from the builder's (score 0.001, TopK 300, 300
detections): with random weights hundreds of near-equal scores would make the result hang on
float rounding. BatchNorm statistics are re-estimated on random images and each predictor's
last convolution is rescaled (class logits spread 1, box offsets 1), then
check_unambiguous asserts that the sample's result (and the fresh inputs tests/test_models.py
draws) does not hang on float rounding.
Run with a build venv (torch, torchvision, openvino):
`/work/buildenv/bin/python models/torch_ssdlite/build.py`.
Writes model.xml/.bin (ov.save_model, compress_to_fp16), inputs.npz and expected.npz.
"""
import os
import sys
from functools import partial

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 2702
SIZE = 320
WIDTH = 0.25
CLASSES = 3
SCORE_THRESH = 0.25
TOPK = 10
DETECTIONS = 20
NMS_THRESH = 0.55
CLASS_STD = 1.0
BOX_STD = 1.0
OUTPUTS = ("boxes", "scores", "labels")


def sample_inputs(rng):
    return {"image": rng.integers(0, 256, (1, 3, SIZE, SIZE)).astype(np.uint8)}


def torch_model():
    """The seeded detector with re-estimated BatchNorm statistics and rescaled predictors."""
    import torch
    import torchvision
    from torch import nn
    from torchvision.models.detection import _utils as det_utils
    from torchvision.models.detection import ssdlite
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
    from torchvision.models.detection.ssd import SSD

    class Detector(nn.Module):
        """torchvision's SSD takes a list of float [C, H, W] images and returns a list of
        dicts; this is u8 image [1, 3, H, W] -> (boxes, scores, labels)."""

        def __init__(self, ssd):
            super().__init__()
            self.ssd = ssd

        def forward(self, image):
            d = self.ssd([image[0].float() / 255.0])[0]
            return d["boxes"], d["scores"], d["labels"]

    torch.manual_seed(SEED)
    # ssdlite320_mobilenet_v3_large's steps, with width_mult.
    norm_layer = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
    mobilenet = torchvision.models.mobilenet_v3_large(weights=None, norm_layer=norm_layer,
                                                      reduced_tail=True, width_mult=WIDTH)
    ssdlite._normal_init(mobilenet)
    features = mobilenet.features
    stages = [0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)] \
        + [len(features) - 1]
    backbone = ssdlite.SSDLiteFeatureExtractorMobileNet(features, stages[-2], norm_layer,
                                                        width_mult=WIDTH)
    size = (SIZE, SIZE)
    anchors = DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2, max_ratio=0.95)
    channels = det_utils.retrieve_out_channels(backbone, size)
    head = ssdlite.SSDLiteHead(channels, anchors.num_anchors_per_location(), CLASSES, norm_layer)
    ssd = SSD(backbone, anchors, size, CLASSES, head=head, score_thresh=SCORE_THRESH,
              nms_thresh=NMS_THRESH, detections_per_img=DETECTIONS, topk_candidates=TOPK,
              image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])

    # Re-estimate BatchNorm on random images: cumulative averages (momentum=None).
    for m in ssd.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    gen = torch.Generator().manual_seed(SEED)
    ssd.train()
    with torch.no_grad():
        for _ in range(6):
            x = torch.rand(8, 3, SIZE, SIZE, generator=gen)
            ssd.head(list(ssd.backbone((x - 0.5) / 0.5).values()))
    ssd.eval()

    # Rescale each predictor's last 1x1 convolution: mean 0 per channel, spread *_STD, over
    # random images (the last maps are 1x1: one image would give every channel mean 0).
    x = (torch.rand(16, 3, SIZE, SIZE, generator=gen) - 0.5) / 0.5
    with torch.no_grad():
        feats = list(ssd.backbone(x).values())
        for predictors, std in ((head.classification_head.module_list, CLASS_STD),
                                (head.regression_head.module_list, BOX_STD)):
            for block, f in zip(predictors, feats):
                conv = block[-1]
                y = block(f)
                conv.bias.sub_(y.mean(dim=(0, 2, 3)))
                scale = std / float(y.std())
                conv.weight.mul_(scale)
                conv.bias.mul_(scale)
    inputs = sample_inputs(np.random.default_rng(SEED))
    return Detector(ssd).eval(), inputs


def check_unambiguous(model, inputs):
    """The detections must not hang on float rounding. irrun and the CPU plugin give scores a
    few 1e-6 apart (sums in another order), so: among each class's TopK candidates (and the
    next one) no two scores closer than 2e-5, no score within 1e-6 of the score threshold, and
    no pair of a class's candidate boxes with an IoU within 1e-4 of the NMS threshold."""
    import torch
    from torchvision.ops import box_iou

    ssd = model.ssd
    with torch.no_grad():
        image = torch.from_numpy(inputs["image"][0]).float() / 255.0
        images, _ = ssd.transform([image])
        features = list(ssd.backbone(images.tensors).values())
        head = ssd.head(features)
        anchors = ssd.anchor_generator(images, features)[0]
        boxes = ssd.box_coder.decode_single(head["bbox_regression"][0], anchors)
        scores = torch.softmax(head["cls_logits"][0], dim=-1)
        labels = model(torch.from_numpy(inputs["image"]))[2].numpy()
    candidates, to_threshold, to_iou = [], [], []
    for label in range(1, CLASSES):
        s = scores[:, label]
        kept = s > ssd.score_thresh
        top = s[kept].topk(min(ssd.topk_candidates + 1, int(kept.sum())))
        candidates.append(top.values)
        to_threshold.append(float((s - ssd.score_thresh).abs().min()))
        chosen = boxes[kept][top.indices[:ssd.topk_candidates]]
        to_iou.append(float((box_iou(chosen, chosen) - ssd.nms_thresh).abs().min()))
    gap = float(torch.diff(torch.sort(torch.cat(candidates)).values).min())
    assert gap > 2e-5, f"two candidate scores differ by {gap:.2g}"
    assert min(to_threshold) > 1e-6, f"a score lies {min(to_threshold):.2g} from the threshold"
    assert min(to_iou) > 1e-4, f"an IoU lies {min(to_iou):.2g} from the NMS threshold"
    print(f"{len(labels)} detections, per label {np.bincount(labels, minlength=CLASSES)}; "
          f"candidate scores at least {gap:.2g} apart, {min(to_threshold):.2g} from the "
          f"threshold; IoUs {min(to_iou):.2g} from the NMS threshold")


def build():
    import openvino as ov
    import torch

    model, inputs = torch_model()
    check_unambiguous(model, inputs)
    # tests/test_models.py's fresh inputs: two draws of sample_inputs from this generator.
    rng = np.random.default_rng(sum(map(ord, os.path.basename(HERE))))
    for _ in range(2):
        check_unambiguous(model, sample_inputs(rng))
    ov_model = ov.convert_model(model, example_input=torch.from_numpy(inputs["image"]),
                                input=[1, 3, SIZE, SIZE])
    ov_model.inputs[0].get_tensor().set_names({"image"})
    # The converter names tensors after torchvision's variables, and one inside the
    # post-processing is "boxes": take the output names off every inner tensor first.
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
