"""Builds torchvision's mobilenet_v3_small (random weights, seeded) and converts it with
openvino.convert_model, the way a new user would:

    image [1, 3, 64, 64] f32
      --mobilenet_v3_small(weights=None, width_mult=0.5, reduced_tail=True, num_classes=10):
        Convolution,
        GroupConvolution (depthwise), HSwish, HSigmoid (squeeze-excitation), ReLU,
        ReduceMean (the pooling), MatMul-->
      logits [1, 10] f32

The full-width network (1.5M parameters with 10 classes, 3 MB as f16) is more than
models/ allows (1 MB per folder); width_mult=0.5 with reduced_tail keeps every layer type and
the block structure (172k parameters, 0.35 MB as f16). BatchNorm statistics are re-estimated on random images (a freshly initialised
network's running statistics are 0/1, which makes every activation vanish: outputs ~1e-10)
and the classifier is rescaled so the logits have standard deviation ~1 on the sample.
Run with a build venv (torch, torchvision, openvino): `python models/mobilenet_v3_small/build.py`.
Writes model.xml/.bin (ov.save_model, compress_to_fp16), inputs.npz and expected.npz.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 1603
SIZE = 64


def sample_inputs(rng):
    return {"image": rng.standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)}


def torch_model():
    """The seeded torchvision network with re-estimated BatchNorm statistics, in eval mode."""
    import torch
    import torchvision

    torch.manual_seed(SEED)
    model = torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.5, reduced_tail=True,
                                                  num_classes=10)
    # Re-estimate BatchNorm on random images: cumulative averages (momentum=None).
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for _ in range(8):
            model(torch.randn(16, 3, SIZE, SIZE, generator=gen))
    model.eval()
    inputs = sample_inputs(np.random.default_rng(SEED))
    with torch.no_grad():
        head = model.classifier[-1]
        logits = model(torch.from_numpy(inputs["image"]))
        head.bias.sub_(logits.mean())
        std = float(logits.std())
        head.weight.mul_(1.0 / std)
        head.bias.mul_(1.0 / std)
    return model, inputs


def build():
    import openvino as ov
    import torch

    model, inputs = torch_model()
    ov_model = ov.convert_model(model, example_input=torch.from_numpy(inputs["image"]),
                                input=[1, 3, SIZE, SIZE])
    ov_model.inputs[0].get_tensor().set_names({"image"})
    ov_model.outputs[0].get_tensor().set_names({"logits"})
    return ov_model, inputs


if __name__ == "__main__":
    from write import write_model  # models/write.py

    m, inputs = build()
    print(write_model(m, HERE, inputs))
