"""Builds a small speech/OCR-style CTC acoustic model in PyTorch and converts it with
openvino.convert_model (the PyTorch frontend writes each nn.LSTM layer as LSTMSequence-5):

    features [N, 8, T] f32 (N and T dynamic)
      --Conv1d 8 -> 16, kernel 3, padding 1--> ReLU --> [N, 16, T]
      --transpose--> [N, T, 16]
      --nn.LSTM(16, hidden 24, num_layers=2, bidirectional, batch_first)--> [N, T, 48]
      --Linear 48 -> 10--> log_softmax(-1) --> log_probs [N, T, 10] (class 0 = CTC blank)

Run with a build venv that has torch and openvino (`/work/buildenv/bin/python
models/torch_bilstm_ctc/build.py`). Weights come from a fixed seed (torch.manual_seed);
the Linear head is re-centred and rescaled so its logits have zero mean per class and unit
spread on the sample (an untrained network's outputs would otherwise be nearly uniform and
one class would win every frame). Writes model.xml/.bin with
ov.save_model (compress_to_fp16), inputs.npz and expected.npz (OpenVINO CPU, f32).
"""
import os
import sys

import numpy as np
import openvino as ov

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model

SEED = 2213
FEATURES, CHANNELS, HIDDEN, CLASSES = 8, 16, 24, 10


def network():
    """The PyTorch module (torch is imported here, so sample_inputs works without it)."""
    import torch
    from torch import nn

    class BiLSTMCTC(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(FEATURES, CHANNELS, kernel_size=3, padding=1)
            self.lstm = nn.LSTM(CHANNELS, HIDDEN, num_layers=2, bidirectional=True,
                                batch_first=True)
            self.head = nn.Linear(2 * HIDDEN, CLASSES)

        def forward(self, features):
            x = torch.relu(self.conv(features)).transpose(1, 2)
            x, _ = self.lstm(x)
            return torch.log_softmax(self.head(x), dim=-1)

    torch.manual_seed(SEED)
    return BiLSTMCTC().eval()


def sample_inputs(rng, batch: int = 2, steps: int = 20) -> dict:
    """Smooth random 'spectrogram' frames: a random walk over time per feature."""
    walk = np.cumsum(rng.normal(0, 0.4, (batch, FEATURES, steps)), axis=2)
    return {"features": (walk + rng.normal(0, 0.1, walk.shape)).astype(np.float32)}


def build(inputs) -> ov.Model:
    import torch

    net = network()
    with torch.no_grad():
        example = torch.from_numpy(inputs["features"])
        x = torch.relu(net.conv(example)).transpose(1, 2)
        logits = net.head(net.lstm(x)[0])
        scale = 1.0 / float(logits.std())
        net.head.bias.sub_(logits.mean(dim=(0, 1)))
        net.head.weight.mul_(scale)
        net.head.bias.mul_(scale)
        model = ov.convert_model(net, example_input=example,
                                 input=[("features", [-1, FEATURES, -1], ov.Type.f32)])
    model.outputs[0].get_tensor().set_names({"log_probs"})
    return model


def main() -> None:
    inputs = sample_inputs(np.random.default_rng(7))
    expected = write_model(build(inputs), HERE, inputs)
    print({k: v.shape for k, v in expected.items()})


if __name__ == "__main__":
    main()
