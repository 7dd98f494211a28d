"""A tiny model that makes NaN and Inf on purpose, for the README's trace, --check-nan and
--dump examples: relu(x + y) / y. The sample inputs put a 5/0 and a 0/0 in the division, so the
Divide layer yields one Inf and one NaN (the same in OpenVINO).

Run from anywhere: `python models/trace_demo/build.py` (needs `pip install openvino`).
"""
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset8 as o8

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model  # noqa: E402  (models/write.py)


def parameter(name):
    p = o8.parameter([2, 3], ov.Type.f32, name=name)
    p.output(0).get_tensor().set_names({name})
    return p


def main():
    x, y = parameter("x"), parameter("y")
    add = o8.add(x, y, name="add")
    relu = o8.relu(add, name="relu")
    div = o8.divide(relu, y, name="div")
    div.output(0).get_tensor().set_names({"ratio"})
    model = ov.Model([div], [x, y], "trace_demo")
    inputs = {"x": np.array([[-1, 2, 3.5], [-6, 5, -2]], np.float32),
              "y": np.array([[3, 0.5, 4], [2, 0, 0]], np.float32)}
    write_model(model, HERE, inputs)


if __name__ == "__main__":
    main()
