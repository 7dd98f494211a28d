"""Builds torchvision's LR-ASPP segmentation net on a MobileNetV3-Large backbone (random
weights, seeded) and converts it with openvino.convert_model, the way a new user would:

    image [1, 3, 128, 128] f32
      --mobilenet_v3_large(width_mult=0.5, dilated=True) features, taken at C2 (stride 8,
        "low") and C5 (stride 16, dilated, "high") by IntermediateLayerGetter
      --LRASPPHead: 1x1 conv + BN + ReLU on "high", times a sigmoid gate from a global
        average pool (AdaptiveAvgPool2d(1) -> 1x1 conv -> Sigmoid); bilinear upsampling to
        "low"'s size, 1x1 classifiers on both, summed; bilinear upsampling to the image-->
      out [1, 3, 128, 128] f32 (per-pixel class logits)

torchvision.models.segmentation.lraspp_mobilenet_v3_large builds the backbone at width 1
(3.2M parameters, 6.4 MB as f16), more than models/ allows (1 MB per folder); the same
builder (torchvision's _lraspp_mobilenetv3) on mobilenet_v3_large(width_mult=0.5,
dilated=True) keeps every layer and block (about 0.9M parameters less the tail: see
models/README.md). BatchNorm statistics are re-estimated on random images (a freshly
initialised net's running statistics are 0/1) and both classifiers are rescaled so the
logits have standard deviation ~1 on the sample.
Run with a build venv (torch, torchvision, openvino): `python models/torch_lraspp/build.py`.
Writes model.xml/.bin (ov.save_model, compress_to_fp16), inputs.npz and expected.npz.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 2101
SIZE = 128
CLASSES = 3
WIDTH = 0.25


def sample_inputs(rng):
    return {"image": rng.standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)}


def torch_model():
    """The seeded LR-ASPP net with re-estimated BatchNorm statistics, in eval mode."""
    import torch
    import torchvision
    from torchvision.models.segmentation.lraspp import _lraspp_mobilenetv3

    class Segmenter(torch.nn.Module):
        """torchvision's segmentation nets return {"out": logits}; this returns the tensor."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, image):
            return self.net(image)["out"]

    torch.manual_seed(SEED)
    backbone = torchvision.models.mobilenet_v3_large(weights=None, width_mult=WIDTH, dilated=True,
                                                   reduced_tail=True)
    net = _lraspp_mobilenetv3(backbone, CLASSES)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    net.train()
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for _ in range(6):
            net(torch.randn(8, 3, SIZE, SIZE, generator=gen))
    net.eval()
    model = Segmenter(net).eval()
    inputs = sample_inputs(np.random.default_rng(SEED))
    with torch.no_grad():
        out = model(torch.from_numpy(inputs["image"]))
        scale = 1.0 / float(out.std())
        # The logits are the sum of the two 1x1 classifiers, upsampled: linear in both.
        for conv in (net.classifier.low_classifier, net.classifier.high_classifier):
            conv.weight.mul_(scale)
            conv.bias.mul_(scale)
    return model, inputs


def build():
    import openvino as ov
    import torch

    model, inputs = torch_model()
    ov_model = ov.convert_model(model, example_input=torch.from_numpy(inputs["image"]),
                                input=[1, 3, SIZE, SIZE])
    ov_model.inputs[0].get_tensor().set_names({"image"})
    ov_model.outputs[0].get_tensor().set_names({"out"})
    return ov_model, inputs


if __name__ == "__main__":
    import collections

    from write import write_model  # models/write.py

    m, inputs = build()
    ops = collections.Counter(f"{n.get_type_name()}-{n.get_type_info().version_id}"
                              for n in m.get_ordered_ops())
    print(dict(sorted(ops.items())))
    out = write_model(m, HERE, inputs)
    print({k: (v.shape, v.dtype, float(v.std())) for k, v in out.items()})
