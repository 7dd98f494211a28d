"""Builds a tiny BERT sequence classifier from `transformers` (random weights, seeded) and
converts it with openvino.convert_model, the way a new user would:

    input_ids [B, T] i64, attention_mask [B, T] i64 (1 = token, 0 = padding)
      --BertForSequenceClassification: 2 layers, hidden 32, 2 heads, intermediate 64,
        vocab 100, 16 positions, 3 labels, attn_implementation="sdpa"-->
      logits [B, 3] f32

B and T are dynamic in the IR (the sample has B = 2, T = 8, the second row padded). The
classifier is rescaled so the logits have standard deviation ~1 on the sample (BERT's
initialiser alone gives logits of ~0.01). Run with a build venv (torch, transformers,
openvino): `python models/tiny_bert/build.py`. Writes model.xml/.bin (ov.save_model,
compress_to_fp16), inputs.npz and expected.npz (OpenVINO CPU plugin's outputs).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 1401


def sample_inputs(rng, batch=2, seq=8):
    ids = rng.integers(1, 100, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    for b in range(1, batch):
        mask[b, rng.integers(2, seq + 1):] = 0        # padding at the end of later rows
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask}


def torch_model():
    """The seeded PyTorch model (classifier rescaled) and the sample inputs."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(SEED)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=16, num_labels=3,
                        attn_implementation="sdpa")
    model = BertForSequenceClassification(config).eval()
    inputs = sample_inputs(np.random.default_rng(SEED))
    example = {k: torch.from_numpy(v) for k, v in inputs.items()}
    with torch.no_grad():
        std = float(model(**example).logits.std())
        model.classifier.weight.mul_(1.0 / std)
        model.classifier.bias.mul_(1.0 / std)
    return model, inputs


def build():
    # The frameworks are imported here: the tests load sample_inputs() without them.
    import openvino as ov
    import torch

    model, inputs = torch_model()
    example = {k: torch.from_numpy(v) for k, v in inputs.items()}
    ov_model = ov.convert_model(model, example_input=example)
    ov_model.outputs[0].get_tensor().set_names({"logits"})
    return ov_model, inputs


if __name__ == "__main__":
    from write import write_model  # models/write.py

    m, inputs = build()
    print(write_model(m, HERE, inputs))
