"""Builds a TorchScript module with a data-dependent loop and branch, converted with
`openvino.convert_model` (the PyTorch frontend):

    h = 0;  for i in range(n): h = tanh(0.5 h + x[i] @ W); if h.sum() > 0: h = 0.9 h
    return h @ V

The frontend writes the Python loop as a **Loop-5** whose trip count is the input `n` and
whose body holds an **If-8** (the `if`); `n = 0` runs no iteration.

    x [?, 3] f32, n [] i64 (0 <= n <= x's rows) -> out [4] f32

Run with the torch venv: `/work/buildenv/bin/python models/torch_scripted_loop/build.py`.
Writes model.xml/.bin, inputs.npz keyed by input name and expected.npz with OpenVINO CPU
plugin's outputs keyed by output name. Weights come from a fixed seed. The tests use only
`sample_inputs` (no torch needed).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 31


def sample_inputs(rng, rows: int, n: int) -> dict:
    return {"x": rng.standard_normal((rows, 3)).astype(np.float32), "n": np.array(n, np.int64)}


def build():
    import torch

    torch.manual_seed(SEED)

    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 3))
            self.v = torch.nn.Parameter(torch.randn(3, 4) / 2)

        def forward(self, x, n):
            h = torch.zeros_like(x[0])
            for i in range(int(n)):
                h = torch.tanh(h * 0.5 + x[i] @ self.w)
                if h.sum() > 0:
                    h = h * 0.9
            return h @ self.v

    return torch.jit.script(Recurrent()), torch


def main() -> None:
    import openvino as ov

    sys.path.insert(0, os.path.dirname(HERE))
    from write import write_model

    module, torch = build()
    model = ov.convert_model(module, example_input=(torch.randn(5, 3), torch.tensor(4)))
    model.inputs[0].get_tensor().set_names({"x"})
    model.inputs[1].get_tensor().set_names({"n"})
    model.outputs[0].get_tensor().set_names({"out"})
    rng = np.random.default_rng(SEED)
    inputs = sample_inputs(rng, 6, 5)
    print(write_model(model, HERE, inputs))


if __name__ == "__main__":
    main()
