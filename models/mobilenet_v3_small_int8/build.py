"""The models/mobilenet_v3_small network quantized to INT8 with NNCF, the way OpenVINO users
ship models: `nncf.quantize` on the converted ov.Model with 8 random calibration images
(subset_size=8). The IR holds FakeQuantize-1 layers on activations (levels 256) and i8
weight Consts followed by Convert and Multiply (scale) decompression, as NNCF writes them.

    image [1, 3, 64, 64] f32 --INT8 mobilenet_v3_small--> logits [1, 10] f32

Run with a build venv (torch, torchvision, openvino, nncf):
`python models/mobilenet_v3_small_int8/build.py`. Writes model.xml/.bin, inputs.npz and
expected.npz (the CPU plugin's outputs, through its int8 kernels), and prints how far
OpenVINO's own float FakeQuantize path (low-precision transformations off) is from them.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.dirname(HERE)
sys.path.insert(0, MODELS)
sys.path.insert(0, os.path.join(MODELS, "mobilenet_v3_small"))

SEED = 1604


def sample_inputs(rng):
    return {"image": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)}


def build():
    import nncf
    import openvino as ov
    import torch

    import build as fp32    # models/mobilenet_v3_small/build.py

    model, _ = fp32.torch_model()
    ov_model = ov.convert_model(model, example_input=torch.zeros(1, 3, 64, 64), input=[1, 3, 64, 64])
    ov_model.inputs[0].get_tensor().set_names({"image"})
    ov_model.outputs[0].get_tensor().set_names({"logits"})
    rng = np.random.default_rng(SEED)
    calibration = [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(8)]
    quantized = nncf.quantize(ov_model, nncf.Dataset(calibration), subset_size=len(calibration))
    return quantized, sample_inputs(np.random.default_rng(SEED + 1))


def float_path_difference(xml, feeds):
    """Largest |int8 path - float FakeQuantize path| of OpenVINO's CPU plugin over `feeds`,
    relative to the logits' standard deviation."""
    import openvino as ov
    core = ov.Core()
    int8 = core.compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    flt = core.compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "LP_TRANSFORMS_MODE": False})
    worst = 0.0
    for feed in feeds:
        a, b = int8(feed)[0], flt(feed)[0]
        worst = max(worst, float(np.max(np.abs(a - b)) / np.std(a)))
    return worst


if __name__ == "__main__":
    from write import write_model  # models/write.py

    m, inputs = build()
    print(write_model(m, HERE, inputs))
    rng = np.random.default_rng(7)
    feeds = [inputs] + [sample_inputs(rng) for _ in range(20)]
    print("int8 vs float FakeQuantize path, max |diff| / std(logits):",
          float_path_difference(os.path.join(HERE, "model.xml"), feeds))
