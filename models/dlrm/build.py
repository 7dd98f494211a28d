"""Builds a small DLRM-style recommender in PyTorch and converts it with
openvino.convert_model:

    dense [B, 4] f32 --bottom MLP 4 -> 16 -> 8 (ReLU)--> [B, 8]
    dense[:, 0] --torch.bucketize (9 boundaries, right=False)--> bucket ids [B] i64
        --nn.Embedding(10, 8)--> [B, 8]
    item_ids [n] i64, offsets [B] i64, weights [n] f32
        --nn.EmbeddingBag(1000, 8, mode="sum")(ids, offsets, per_sample_weights)--> [B, 8]
    Concat [B, 24] --top MLP 24 -> 16 (ReLU) -> 1--> sigmoid --> score [B, 1]
    outputs: score [B, 1] f32 and buckets [B] i64

The batch B is dynamic; the number of item ids n is static (20 per request, spread over the
users by offsets): OpenVINO 2026.4's CPU plugin cannot compile the embedding bag with
per_sample_weights when n is dynamic ("to_shape was called on a dynamic shape"), and the
model must run there to give expected.npz. Run with a build venv that has torch and
openvino (`/work/buildenv/bin/python models/dlrm/build.py`). Weights come from a fixed seed
(torch.manual_seed); the last layer is rescaled on the sample so the logits have unit spread
(sigmoid outputs of order 1 rather than all near 0.5). Writes model.xml/.bin with
ov.save_model (compress_to_fp16), inputs.npz and expected.npz (OpenVINO CPU, f32).
"""
import os
import sys

import numpy as np
import openvino as ov

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model

SEED = 1512
SLOTS = 20   # item ids per request (static, see below)
DENSE, ITEMS, DIM = 4, 1000, 8
# Boundaries of the first dense feature (f16-exact, so compression keeps them unchanged).
BOUNDARIES = [-2.0, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 2.0]


def network():
    """The PyTorch module (torch is imported here, so sample_inputs works without it)."""
    import torch
    from torch import nn

    class DLRM(nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom = nn.Sequential(nn.Linear(DENSE, 16), nn.ReLU(), nn.Linear(16, DIM), nn.ReLU())
            self.register_buffer("boundaries", torch.tensor(BOUNDARIES))
            self.buckets = nn.Embedding(len(BOUNDARIES) + 1, DIM)
            self.items = nn.EmbeddingBag(ITEMS, DIM, mode="sum")
            self.top = nn.Sequential(nn.Linear(3 * DIM, 16), nn.ReLU(), nn.Linear(16, 1))

        def forward(self, dense, item_ids, offsets, weights):
            bucket = torch.bucketize(dense[:, 0], self.boundaries)
            items = self.items(item_ids, offsets, per_sample_weights=weights)
            x = torch.cat([self.bottom(dense), self.buckets(bucket), items], dim=1)
            return torch.sigmoid(self.top(x)), bucket

    torch.manual_seed(SEED)
    return DLRM().eval()


def sample_inputs(rng, batch: int = 6, n: int = SLOTS) -> dict:
    """Dense features around 0; n item ids spread over the batch by sorted offsets, below n
    (OpenVINO's CPU plugin refuses an offset equal to n); with batch > 2 the middle user gets
    none (an empty bag, zeros)."""
    offsets = np.sort(rng.integers(0, n, batch))
    offsets[0] = 0
    if batch > 2:
        offsets[batch // 2] = offsets[batch // 2 - 1]
    return {"dense": rng.normal(0, 1.0, (batch, DENSE)).astype(np.float32),
            "item_ids": rng.integers(0, ITEMS, n).astype(np.int64),
            "offsets": offsets.astype(np.int64),
            "weights": rng.uniform(0.5, 1.5, n).astype(np.float32)}


def build(inputs) -> ov.Model:
    import torch

    net = network()
    example = tuple(torch.from_numpy(inputs[k]) for k in ("dense", "item_ids", "offsets", "weights"))
    with torch.no_grad():
        h = net.top[1](net.top[0](torch.cat([net.bottom(example[0]),
                                             net.buckets(torch.bucketize(example[0][:, 0], net.boundaries)),
                                             net.items(example[1], example[2], per_sample_weights=example[3])],
                                            dim=1)))
        logits = net.top[2](h)
        net.top[2].weight.div_(float(logits.std()))
        net.top[2].bias.sub_(float(logits.mean()) / float(logits.std()))
        model = ov.convert_model(net, example_input=example,
                                 input=[("dense", [-1, DENSE], ov.Type.f32),
                                        ("item_ids", [SLOTS], ov.Type.i64),
                                        ("offsets", [-1], ov.Type.i64),
                                        ("weights", [SLOTS], ov.Type.f32)])
    for parameter, name in zip(model.get_parameters(), ("dense", "item_ids", "offsets", "weights")):
        parameter.set_friendly_name(name)
        parameter.output(0).get_tensor().set_names({name})
    model.outputs[0].get_tensor().set_names({"score"})
    model.outputs[1].get_tensor().set_names({"buckets"})
    return model


def main() -> None:
    inputs = sample_inputs(np.random.default_rng(7))
    expected = write_model(build(inputs), HERE, inputs)
    print({k: (v.shape, v.dtype) for k, v in expected.items()})
    print(sorted({op.get_type_name() for op in ov.Core().read_model(os.path.join(HERE, "model.xml")).get_ops()}))


if __name__ == "__main__":
    main()
