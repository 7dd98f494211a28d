"""Builds a small U-Net in PyTorch (random weights, seeded) and converts it with
openvino.convert_model:

    image [1, 3, 32, 32] f32
      enc1: Conv3x3(3->8) BN ReLU           [1, 8, 32, 32]
      enc2: MaxPool2 Conv3x3(8->16) BN ReLU [1, 16, 16, 16]
      mid:  MaxPool2 Conv3x3(16->32) BN ReLU [1, 32, 8, 8]
      up2:  ConvTranspose2d(32->16, 2, stride 2) + Upsample(x2, bilinear) of mid's 1x1
            projection; Concat enc2 -> Conv3x3 BN ReLU        [1, 16, 16, 16]
      up1:  ConvTranspose2d(16->8, 3, stride 2, padding 1, output_padding 1)
            + Upsample(x2, nearest) of up2's 1x1 projection; Concat enc1 -> Conv3x3 [1, 8, 32, 32]
      head: Conv1x1(8->2)                   mask logits [1, 2, 32, 32]

So the IR holds ConvolutionBackpropData-1 (with and without pads/output_padding) and
Interpolate-11 in linear_onnx (pytorch_half_pixel) and nearest (asymmetric, floor) modes.
BatchNorm statistics are re-estimated on random images and the head is rescaled so the
output has standard deviation ~1. Run with a build venv (torch, openvino):
`python models/tiny_unet/build.py`. Writes model.xml/.bin, inputs.npz and expected.npz.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 1605


def sample_inputs(rng):
    return {"image": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}


def torch_model():
    import torch
    from torch import nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    class TinyUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc1, self.enc2, self.mid = block(3, 8), block(8, 16), block(16, 32)
            self.pool = nn.MaxPool2d(2)
            self.up2 = nn.ConvTranspose2d(32, 16, 2, stride=2)
            self.proj2 = nn.Conv2d(32, 16, 1)
            self.bilinear = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.dec2 = block(32, 16)
            self.up1 = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
            self.proj1 = nn.Conv2d(16, 8, 1)
            self.nearest = nn.Upsample(scale_factor=2, mode="nearest")
            self.dec1 = block(16, 8)
            self.head = nn.Conv2d(8, 2, 1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(self.pool(e1))
            m = self.mid(self.pool(e2))
            d2 = self.up2(m) + self.bilinear(self.proj2(m))
            d2 = self.dec2(torch.cat([d2, e2], 1))
            d1 = self.up1(d2) + self.nearest(self.proj1(d2))
            d1 = self.dec1(torch.cat([d1, e1], 1))
            return self.head(d1)

    torch.manual_seed(SEED)
    model = TinyUNet()
    for mod in model.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None
    model.train()
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, 32, 32, generator=gen))
    model.eval()
    inputs = sample_inputs(np.random.default_rng(SEED))
    with torch.no_grad():
        out = model(torch.from_numpy(inputs["image"]))
        model.head.bias.sub_(out.mean())
        std = float(out.std())
        model.head.weight.mul_(1.0 / std)
        model.head.bias.mul_(1.0 / std)
    return model, inputs


def build():
    import openvino as ov
    import torch

    model, inputs = torch_model()
    ov_model = ov.convert_model(model, example_input=torch.from_numpy(inputs["image"]), input=[1, 3, 32, 32])
    ov_model.inputs[0].get_tensor().set_names({"image"})
    ov_model.outputs[0].get_tensor().set_names({"mask"})
    return ov_model, inputs


if __name__ == "__main__":
    from write import write_model  # models/write.py

    m, inputs = build()
    out = write_model(m, HERE, inputs)
    print({k: (v.shape, float(v.std())) for k, v in out.items()})
