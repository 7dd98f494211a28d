"""Builds an ONNX Scan-13 recurrence (an Elman-style RNN written by hand in ONNX), converted
with `openvino.convert_model` (the ONNX frontend), which writes Scan as a **TensorIterator-1**:

    state s [1, 4], sequence x [T, 1, 3] (scanned in reverse: scan_input_directions = [1])
    s_t = tanh(s_{t-1} @ U + x_t @ W + b);  outputs: the last s [1, 4] and every s_t [T, 1, 4]

T is dynamic, so the TensorIterator's sliced input and concatenated output have a dynamic
length. Run with the build venv (onnx and openvino):
`/work/buildenv/bin/python models/onnx_scan_rnn/build.py`. Writes model.xml/.bin,
inputs.npz keyed by input name and expected.npz with OpenVINO CPU plugin's outputs keyed by
output name. Weights come from a fixed seed; the tests use only `sample_inputs` (NumPy).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 5


def sample_inputs(rng, steps: int) -> dict:
    return {"s0": rng.standard_normal((1, 4)).astype(np.float32),
            "x": rng.standard_normal((steps, 1, 3)).astype(np.float32)}


def build(path: str) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(SEED)
    u = (rng.standard_normal((4, 4)) / 2).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = (rng.standard_normal((1, 4)) * 0.1).astype(np.float32)
    value = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("MatMul", ["s", "U"], ["su"]),
         helper.make_node("MatMul", ["xt", "W"], ["xw"]),
         helper.make_node("Add", ["su", "xw"], ["a"]),
         helper.make_node("Add", ["a", "B"], ["ab"]),
         helper.make_node("Tanh", ["ab"], ["s_next"]),
         helper.make_node("Identity", ["s_next"], ["s_t"])],
        "step",
        [value("s", TensorProto.FLOAT, [1, 4]), value("xt", TensorProto.FLOAT, [1, 3])],
        [value("s_next", TensorProto.FLOAT, [1, 4]), value("s_t", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(u, "U"), numpy_helper.from_array(w, "W"),
         numpy_helper.from_array(b, "B")])
    scan = helper.make_node("Scan", ["s0", "x"], ["s_last", "states"], body=body,
                            num_scan_inputs=1, scan_input_directions=[1])
    graph = helper.make_graph(
        [scan], "onnx_scan_rnn",
        [value("s0", TensorProto.FLOAT, [1, 4]), value("x", TensorProto.FLOAT, ["T", 1, 3])],
        [value("s_last", TensorProto.FLOAT, [1, 4]),
         value("states", TensorProto.FLOAT, ["T", 1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def main() -> None:
    import tempfile

    import openvino as ov

    sys.path.insert(0, os.path.dirname(HERE))
    from write import write_model

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "scan.onnx")
        build(path)
        model = ov.convert_model(path)
    print(write_model(model, HERE, sample_inputs(np.random.default_rng(SEED), 6)))


if __name__ == "__main__":
    main()
