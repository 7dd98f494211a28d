"""Builds a tiny wav2vec2 CTC speech recogniser from `transformers` (random weights,
seeded) whose logits go through argmax, converted with openvino.convert_model:

    input_values [B, N] f32 (raw audio samples)
      --Wav2Vec2ForCTC: feature encoder of 2 convolutions (16 channels, kernels 10 and 3,
        strides 5 and 2, feat_extract_norm="group": GroupNorm after the first), feature
        projection to hidden 32, convolutional position embedding (kernel 16, 2 groups),
        2 transformer layers (2 heads, intermediate 64, attn_implementation="sdpa"),
        CTC head to a vocabulary of 12-->
      logits [B, T, 12] f32, predicted_ids = argmax(logits, -1) [B, T] i64

T = floor((floor((N - 10) / 5) + 1 - 3) / 2) + 1; the sample has B = 1, N = 800 (T = 79).
The CTC head is rescaled so the logits have standard deviation ~1 on the sample. Run with a
build venv (torch, transformers, openvino): `python models/tiny_wav2vec2/build.py`. Writes
model.xml/.bin (ov.save_model, compress_to_fp16), inputs.npz and expected.npz (OpenVINO CPU
plugin's outputs).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 1403


def sample_inputs(rng, batch=1, samples=800):
    t = np.arange(samples) / 16000
    tone = np.sin(2 * np.pi * rng.uniform(100, 400, (batch, 1)) * t)
    return {"input_values": (0.5 * tone + 0.1 * rng.standard_normal((batch, samples))).astype(np.float32)}


def build():
    # The frameworks are imported here: the tests load sample_inputs() without them.
    import openvino as ov
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    torch.manual_seed(SEED)
    config = Wav2Vec2Config(vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                            conv_kernel=(10, 3), feat_extract_norm="group", num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=2, do_stable_layer_norm=False,
                            attn_implementation="sdpa")
    model = Wav2Vec2ForCTC(config).eval()
    inputs = sample_inputs(np.random.default_rng(SEED))
    example = torch.from_numpy(inputs["input_values"])
    with torch.no_grad():
        std = float(model(example).logits.std())
        model.lm_head.weight.mul_(1.0 / std)
        model.lm_head.bias.mul_(1.0 / std)

    class WithArgmax(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_values):
            logits = self.model(input_values).logits
            return logits, logits.argmax(-1)

    ov_model = ov.convert_model(WithArgmax(model), example_input=example)
    ov_model.inputs[0].get_tensor().set_names({"input_values"})
    ov_model.outputs[0].get_tensor().set_names({"logits"})
    ov_model.outputs[1].get_tensor().set_names({"predicted_ids"})
    return ov_model, inputs


if __name__ == "__main__":
    from write import write_model  # models/write.py

    m, inputs = build()
    out = write_model(m, HERE, inputs)
    logits = out["logits"]
    top2 = np.sort(logits, axis=-1)[..., -2:]
    print({k: (v.shape, v.dtype) for k, v in out.items()}, "std", float(logits.std()),
          "smallest top-2 gap", float((top2[..., 1] - top2[..., 0]).min()))
