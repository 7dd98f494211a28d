"""Builds a tiny Vision Transformer classifier from `transformers` (random weights, seeded)
and converts it with openvino.convert_model, the way a new user would:

    pixel_values [B, 3, 32, 32] f32
      --ViTForImageClassification: patch embedding (8x8 Conv, stride 8: 16 patches) + [CLS]
        token + learned positions; 2 pre-norm encoder layers (hidden 64, 4 heads, MLP 128,
        GELU), final LayerNorm, linear classifier on the [CLS] token, 10 labels,
        attn_implementation="sdpa"-->
      logits [B, 10] f32

B is dynamic in the IR (the sample has B = 2). The classifier is rescaled so the logits
have standard deviation ~1 on the sample. Run with a build venv (torch, transformers,
openvino): `python models/vit_tiny/build.py`. Writes model.xml/.bin (ov.save_model,
compress_to_fp16), inputs.npz and expected.npz (OpenVINO CPU plugin's outputs).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 2203
SIZE = 32


def sample_inputs(rng, batch=2):
    return {"pixel_values": rng.standard_normal((batch, 3, SIZE, SIZE)).astype(np.float32)}


def torch_model():
    """The seeded ViT (classifier rescaled) and the sample inputs."""
    import torch
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(SEED)
    config = ViTConfig(image_size=SIZE, patch_size=8, num_channels=3, hidden_size=64,
                       num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                       num_labels=10, attn_implementation="sdpa")
    model = ViTForImageClassification(config).eval()
    inputs = sample_inputs(np.random.default_rng(SEED))
    with torch.no_grad():
        logits = model(pixel_values=torch.from_numpy(inputs["pixel_values"])).logits
        model.classifier.bias.sub_(logits.mean())
        std = float(logits.std())
        model.classifier.weight.mul_(1.0 / std)
        model.classifier.bias.mul_(1.0 / std)
    return model, inputs


def build():
    import openvino as ov
    import torch

    model, inputs = torch_model()
    ov_model = ov.convert_model(model, example_input={"pixel_values": torch.from_numpy(inputs["pixel_values"])},
                                input=[-1, 3, SIZE, SIZE])
    ov_model.inputs[0].get_tensor().set_names({"pixel_values"})
    ov_model.outputs[0].get_tensor().set_names({"logits"})
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
