"""Builds a small SSDlite detector from torchvision's parts (random weights, seeded) and
converts it with openvino.convert_model, post-processing and NMS included:

    image [1, 3, 128, 128] f32 (values in [0, 1])
      --GeneralizedRCNNTransform (normalise, resize to 128x128: Interpolate)
      --mobilenet_v3_small(width_mult=0.25, reduced_tail=True) cut at C4 (stride 16) and its
        end (stride 32), then the first two of SSDLiteFeatureExtractorMobileNet's extra blocks
        (width_mult=0.25): four feature maps 8x8, 4x4, 2x2, 1x1
      --SSDLiteHead (depthwise 3x3 + 1x1 box and class predictors, 6 anchors per cell from
        DefaultBoxGenerator): 510 anchors, 5 classes (0 is background)
      --SSD.postprocess_detections: softmax, decode and clip boxes, per class score > 0.2 and
        TopK(15), batched NMS (IoU 0.3), the best 100-->
      boxes [?, 4] f32, scores [?] f32, labels [?] i64

torchvision's ssdlite320_mobilenet_v3_large (width 1, 320x320) is 4.4 MB as f16: more than the
1 MB per folder models/ allows. The converter writes about 500 bytes of XML per op (0.5 MB
here, 950 ops), so the weights must stay small too: MobileNetV3-Small (the MobileNetV3 paper's
other SSDLite backbone) at width 0.25, two extra blocks instead of four and a 128x128 input
keep every layer type (98k parameters, 0.19 MB as f16).
A freshly initialised net gives every class the same score (0.2: its class logits are ~0), so
TopK would have to order ties, which OpenVINO leaves to the implementation (sort=value,
stable=false). Therefore BatchNorm statistics are re-estimated on random images and the last
convolution of every class and box predictor is rescaled so its outputs have mean 0 per
channel and a fixed spread on random images; check_unambiguous then asserts that the sample's
result does not hang on float rounding (the seed is one where it holds).
Run with a build venv (torch, torchvision, openvino):
`/work/buildenv/bin/python models/ssdlite_detector/build.py`.
Writes model.xml/.bin (ov.save_model, compress_to_fp16), inputs.npz and expected.npz.
"""
import os
import sys
from functools import partial

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 326
SIZE = 128
CLASSES = 5
SCORE_THRESH = 0.2
CLASS_STD = 1.5   # spread of the class logits on the sample image
OUTPUTS = ("boxes", "scores", "labels")
BOX_STD = 1.0     # spread of the box offsets (decoded with weights 10, 10, 5, 5)


def sample_inputs(rng):
    return {"image": rng.random((1, 3, SIZE, SIZE), dtype=np.float32)}


def torch_model():
    """The seeded detector with re-estimated BatchNorm statistics and rescaled predictors."""
    import torch
    import torchvision
    from torch import nn
    from torchvision.models.detection import ssdlite
    from torchvision.models.detection import _utils as det_utils
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
    from torchvision.models.detection.ssd import SSD

    class Detector(nn.Module):
        """torchvision's SSD takes a list of [C, H, W] images and returns a list of dicts; this
        is image [1, 3, H, W] -> (boxes, scores, labels)."""

        def __init__(self, ssd):
            super().__init__()
            self.ssd = ssd

        def forward(self, image):
            d = self.ssd([image[0]])[0]
            return d["boxes"], d["scores"], d["labels"]

    torch.manual_seed(SEED)
    norm_layer = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
    mobilenet = torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.25,
                                                      reduced_tail=True, norm_layer=norm_layer)
    features = mobilenet.features
    stages = [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)]
    backbone = ssdlite.SSDLiteFeatureExtractorMobileNet(features, stages[-1], norm_layer,
                                                        width_mult=0.25)
    backbone.extra = backbone.extra[:2]
    size = (SIZE, SIZE)
    anchors = DefaultBoxGenerator([[2, 3] for _ in range(4)], min_ratio=0.2, max_ratio=0.95)
    channels = det_utils.retrieve_out_channels(backbone, size)
    head = ssdlite.SSDLiteHead(channels, anchors.num_anchors_per_location(), CLASSES, norm_layer)
    ssd = SSD(backbone, anchors, size, CLASSES, head=head, score_thresh=SCORE_THRESH,
              nms_thresh=0.3, detections_per_img=100, topk_candidates=15,
              image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])

    # Re-estimate BatchNorm on random images: cumulative averages (momentum=None).
    for m in ssd.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    gen = torch.Generator().manual_seed(SEED)
    ssd.train()
    with torch.no_grad():
        for _ in range(8):
            x = torch.rand(16, 3, SIZE, SIZE, generator=gen)
            feats = list(ssd.backbone((x - 0.5) / 0.5).values())
            ssd.head(feats)
    ssd.eval()

    # Rescale each predictor's last 1x1 convolution: mean 0 per channel, spread *_STD, over
    # random images (the last maps are 1x1: one image would give every channel mean 0).
    inputs = sample_inputs(np.random.default_rng(SEED))
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
    return Detector(ssd).eval(), inputs


def check_unambiguous(model, inputs):
    """The sample's detections must not hang on float rounding. irrun and the CPU plugin give
    scores up to ~4e-6 apart (sums in another order), so: among each class's TopK candidates
    (and the next one) no two scores closer than 2e-5 (closer ones could swap places, and ties
    leave the order to the implementation), no score within 1e-6 of the score threshold, and no
    pair of a class's candidate boxes with an IoU within 1e-4 of the NMS threshold."""
    import torch
    from torchvision.ops import box_iou

    ssd = model.ssd
    with torch.no_grad():
        images, _ = ssd.transform([torch.from_numpy(inputs["image"][0])])
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
    ov_model = ov.convert_model(model, example_input=torch.from_numpy(inputs["image"]),
                                input=[1, 3, SIZE, SIZE])
    ov_model.inputs[0].get_tensor().set_names({"image"})
    # The converter names tensors after torchvision's variables: one inside the
    # post-processing is "boxes" (with a number). The CPU plugin folds the steps after it and
    # merges its names into the output's, so that expected.npz would be keyed by the number.
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
    print(dict(sorted(ops.items())))
    out = write_model(m, HERE, inputs)
    print({k: (v.shape, v.dtype) for k, v in out.items()}, out["labels"])
