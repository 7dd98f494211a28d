"""Builds a tiny DETR object detector from `transformers` (random weights, seeded) and
converts it with openvino.convert_model, the way a new user would:

    pixel_values [1, 3, 96, 128] f32 (normalised image)
      --DetrForObjectDetection: a transformers ResNet backbone (AutoBackbone, not timm:
        basic blocks, widths 8/16/32/64, one block per stage, its BatchNorms frozen),
        stride-32 features (3x4) projected to d_model 64 with sine position embeddings;
        2 encoder and 2 decoder layers (4 heads, FFN 128) over 10 object queries; a class
        head (3 classes + "no object") and a 3-layer box MLP with a sigmoid-->
      logits [1, 10, 4] f32, pred_boxes [1, 10, 4] f32 (cx, cy, w, h in [0, 1])

DETR predicts a set: no NMS, no sorting, so the outputs have fixed shapes. The frozen
BatchNorm statistics (0/1 in a fresh net) are re-estimated on random images and the class
head is rescaled so the logits have standard deviation ~1 on the sample.
Run with a build venv (torch, transformers, openvino): `python models/detr_tiny/build.py`.
Writes model.xml/.bin (ov.save_model, compress_to_fp16), inputs.npz and expected.npz.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 2611
HEIGHT, WIDTH = 96, 128
OUTPUTS = ("logits", "pred_boxes")
# Linear layers drawn with std 1/sqrt(d_model) rather than DETR's 0.02 (a trained model's
# convention): with 0.02 every attention is nearly uniform and all queries see the same thing.
INIT_STD = 0.125


def sample_inputs(rng):
    return {"pixel_values": rng.standard_normal((1, 3, HEIGHT, WIDTH)).astype(np.float32)}


def _reestimate_frozen_batchnorm(backbone, size, seed):
    """Swap each DetrFrozenBatchNorm2d for a BatchNorm2d in training mode (cumulative
    averages), run random images through the backbone, and write the statistics back."""
    import torch
    from torch import nn

    frozen = [(parent, name, child) for parent in backbone.modules()
              for name, child in parent.named_children()
              if type(child).__name__ == "DetrFrozenBatchNorm2d"]
    swapped = []
    for parent, name, child in frozen:
        bn = nn.BatchNorm2d(child.weight.numel(), eps=1e-5, momentum=None)
        parent._modules[name] = bn
        swapped.append(bn)
    backbone.train()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _ in range(6):
            backbone(torch.randn(8, 3, *size, generator=gen))
        for (parent, name, child), bn in zip(frozen, swapped):
            child.running_mean.copy_(bn.running_mean)
            child.running_var.copy_(bn.running_var)
            parent._modules[name] = child
    backbone.eval()


def torch_model():
    import torch
    from transformers import DetrConfig, DetrForObjectDetection, ResNetConfig

    class Detector(torch.nn.Module):
        """DetrForObjectDetection returns a ModelOutput; this returns its two tensors."""

        def __init__(self, detr):
            super().__init__()
            self.detr = detr

        def forward(self, pixel_values):
            out = self.detr(pixel_values=pixel_values)
            return out.logits, out.pred_boxes

    torch.manual_seed(SEED)
    backbone = ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16, 32, 64],
                            depths=[1, 1, 1, 1], layer_type="basic", out_features=["stage4"])
    config = DetrConfig(use_timm_backbone=False, backbone_config=backbone,
                        use_pretrained_backbone=False, d_model=64, encoder_layers=2,
                        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                        encoder_ffn_dim=128, decoder_ffn_dim=128, num_queries=10,
                        num_labels=3, init_std=INIT_STD)
    detr = DetrForObjectDetection(config).eval()
    _reestimate_frozen_batchnorm(detr.model.backbone.model, (HEIGHT, WIDTH), SEED)
    inputs = sample_inputs(np.random.default_rng(SEED))
    image = torch.from_numpy(inputs["pixel_values"])
    with torch.no_grad():
        # DETR initialises the object queries with std 0.02: every query then sees the same
        # thing and predicts the same box. Unit queries (nn.Embedding's default) tell them apart.
        detr.model.query_position_embeddings.weight.normal_(generator=torch.Generator().manual_seed(SEED))
        # The box MLP's last layer: pre-sigmoid outputs of mean 0 and spread 1 over the queries.
        pre = torch.logit(detr(pixel_values=image).pred_boxes)
        last = detr.bbox_predictor.layers[-1]
        last.bias.sub_(pre.mean(dim=(0, 1)))
        scale = 1.0 / float((pre - pre.mean(dim=(0, 1))).std())
        last.weight.mul_(scale)
        last.bias.mul_(scale)
        logits = detr(pixel_values=image).logits
        head = detr.class_labels_classifier
        head.bias.sub_(logits.mean(dim=(0, 1)))
        scale = 1.0 / float((logits - logits.mean(dim=(0, 1))).std())
        head.weight.mul_(scale)
        head.bias.mul_(scale)
    return Detector(detr).eval(), inputs


def build():
    import openvino as ov
    import torch

    model, inputs = torch_model()
    ov_model = ov.convert_model(model, example_input=torch.from_numpy(inputs["pixel_values"]),
                                input=[1, 3, HEIGHT, WIDTH])
    ov_model.inputs[0].get_tensor().set_names({"pixel_values"})
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
    print({k: (v.shape, v.dtype, float(v.std())) for k, v in out.items()})
    print(out["pred_boxes"][0, :3])
