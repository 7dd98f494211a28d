"""Builds the Bucketize-3 spec example: x [[3, 50], [10, -1]], boundaries [0, 5, 10],
with_right_bound=true -> [[1, 3], [2, 0]].

Run from anywhere: `python models/bucketize_spec/build.py`. Writes model.xml/.bin with
OpenVINO's Python API (ov.save_model, default compress_to_fp16, so the f32 boundaries are
stored as f16 plus a decompression Convert), inputs.npz keyed by input name and
expected.npz with OpenVINO CPU plugin's outputs keyed by output name.
"""
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset3 as o3

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model  # noqa: E402  (models/write.py)


def build() -> ov.Model:
    data = o3.parameter([2, 2], ov.Type.f32, name="data")
    data.output(0).get_tensor().set_names({"data"})
    boundaries = o3.constant(np.array([0, 5, 10], np.float32), name="boundaries")
    node = o3.bucketize(data, boundaries, output_type="i64", with_right_bound=True, name="bucketize")
    node.output(0).get_tensor().set_names({"out"})
    return ov.Model([node.output(0)], [data], "bucketize_spec")


def main() -> None:
    inputs = {"data": np.array([[3, 50], [10, -1]], np.float32)}
    print(write_model(build(), HERE, inputs))


if __name__ == "__main__":
    main()
