"""Builds a tiny stateful recurrent model and runs OpenVINO's infer request over 20 steps.

Two state variables:
- "h" (a recurrent state, [1,8]): written as a plain Parameter "h_in" -> Result "h_out" pair
  and made stateful with OpenVINO's own MakeStateful transformation (as converters do for
  LLM KV caches), then given an init subgraph: the first step (and each after a reset)
  starts from tanh(x @ W0) instead of zeros.
- "total" (a running sum of x, [1,4]): a hand-built ReadValue-6 without an init value, so
  it starts from zeros of its variable_shape.

Per step: h' = tanh(x @ W + h @ U + b), total' = total + x; outputs y = h' @ V (order 1) and
total'. Run from anywhere: `python models/stateful_accumulator/build.py`. Writes
model.xml/.bin, inputs.npz (step 0's x), expected.npz (OpenVINO's outputs of one fresh
run: step 0), sequence.npz (x for 20 steps, axis 0 is the step) and expected_steps.npz
(OpenVINO's outputs for each of the 20 steps of one infer request, stacked on axis 0).
"""
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset6 as o6
import openvino.opset8 as o8
from openvino._offline_transformations import apply_make_stateful_transformation
from openvino.op.util import Variable, VariableInfo

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model

STEPS = 20
D_IN, D_H, D_OUT = 4, 8, 3


def build(rng) -> ov.Model:
    x = o8.parameter([1, D_IN], np.float32, name="x")
    x.output(0).get_tensor().set_names({"x"})
    h_in = o8.parameter([1, D_H], np.float32, name="h_in")
    h_in.output(0).get_tensor().set_names({"h_in"})
    w = (rng.standard_normal((D_IN, D_H)) / np.sqrt(D_IN)).astype(np.float32)
    u = (rng.standard_normal((D_H, D_H)) / np.sqrt(D_H)).astype(np.float32)
    b = (rng.standard_normal((1, D_H)) * 0.1).astype(np.float32)
    v = (rng.standard_normal((D_H, D_OUT)) / np.sqrt(D_H)).astype(np.float32)
    h = o8.tanh(o8.add(o8.add(o8.matmul(x, o8.constant(w), False, False),
                              o8.matmul(h_in, o8.constant(u), False, False)), o8.constant(b)))
    h_out = o8.result(h, name="h_out")
    h_out.output(0).get_tensor().set_names({"h_out"})
    y = o8.matmul(h, o8.constant(v), False, False)
    y.output(0).get_tensor().set_names({"y"})

    info = VariableInfo()
    info.data_shape = ov.PartialShape([1, D_IN])
    info.data_type = ov.Type.f32
    info.variable_id = "total"
    var = Variable(info)
    total = o6.read_value(var)                  # no init value: zeros of [1,4]
    new_total = o8.add(total, x)
    new_total.output(0).get_tensor().set_names({"total"})
    assign = o6.assign(new_total, var)
    model = ov.Model([o8.result(y), o8.result(new_total), h_out], [assign], [x, h_in],
                     "stateful_accumulator")
    apply_make_stateful_transformation(model, {"h_in": "h_out"})
    # MakeStateful starts "h" from zeros; give its ReadValue an init subgraph instead.
    w0 = (rng.standard_normal((D_IN, D_H)) / np.sqrt(D_IN)).astype(np.float32)
    for op in model.get_ordered_ops():
        if op.get_type_name() == "ReadValue" and op.get_variable_id() != "total":
            init = o8.tanh(o8.matmul(x, o8.constant(w0), False, False))
            op.set_arguments([init.output(0)])
            op.validate_and_infer_types()
    model.validate_nodes_and_infer_types()
    return model


def main() -> None:
    rng = np.random.default_rng(2026)
    model = build(rng)
    seq = rng.standard_normal((STEPS, 1, D_IN)).astype(np.float32)
    expected = write_model(model, HERE, {"x": seq[0]})
    print("one run:", expected)
    np.savez(os.path.join(HERE, "sequence.npz"), x=seq)
    compiled = ov.Core().compile_model(os.path.join(HERE, "model.xml"), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    steps = {out.get_any_name(): [] for out in compiled.outputs}
    for k in range(STEPS):
        results = request.infer({"x": seq[k]})
        for out in compiled.outputs:
            steps[out.get_any_name()].append(np.array(results[out]))
    stacked = {name: np.stack(values) for name, values in steps.items()}
    np.savez(os.path.join(HERE, "expected_steps.npz"), **stacked)
    print({k: v.shape for k, v in stacked.items()})


if __name__ == "__main__":
    main()
