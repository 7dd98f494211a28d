"""Builds the EmbeddingSegmentsSum-3 spec example: emb_table
[[-0.2, -0.6], [-0.1, -0.4], [-1.9, -1.8], [-1., 1.5], [0.8, -0.7]], indices [0, 2, 3, 4],
segment_ids [0, 0, 2, 2], num_segments 3, default_index 0, per_sample_weights
[0.5, 0.5, 0.5, 0.5] -> [[-1.05, -1.2], [-0.2, -0.6], [-0.1, 0.4]] (segment 1 is empty and
gets emb_table[0], not weighted).

Run from anywhere: `python models/ess_spec/build.py`. emb_table, indices, segment_ids and
per_sample_weights are inputs; num_segments and default_index are i32 constants, so the
output shape [3, 2] is known when the model is loaded. Writes model.xml/.bin with OpenVINO's
Python API (ov.save_model, default compress_to_fp16: there are no f32 constants to
compress), inputs.npz keyed by input name and expected.npz with OpenVINO CPU plugin's
outputs keyed by output name.
"""
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset3 as o3

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model  # noqa: E402  (models/write.py)


def parameter(shape, etype, name):
    p = o3.parameter(shape, etype, name=name)
    p.output(0).get_tensor().set_names({name})
    return p


def build() -> ov.Model:
    params = [parameter([5, 2], ov.Type.f32, "emb_table"),
              parameter([4], ov.Type.i32, "indices"),
              parameter([4], ov.Type.i32, "segment_ids"),
              parameter([4], ov.Type.f32, "per_sample_weights")]
    table, indices, segment_ids, weights = params
    num_segments = o3.constant(np.int32(3), name="num_segments")
    default_index = o3.constant(np.int32(0), name="default_index")
    node = o3.embedding_segments_sum(table, indices, segment_ids, num_segments, default_index,
                                     weights, name="ess")
    node.output(0).get_tensor().set_names({"out"})
    return ov.Model([node.output(0)], params, "ess_spec")


def main() -> None:
    inputs = {
        "emb_table": np.array([[-0.2, -0.6], [-0.1, -0.4], [-1.9, -1.8], [-1., 1.5], [0.8, -0.7]],
                              np.float32),
        "indices": np.array([0, 2, 3, 4], np.int32),
        "segment_ids": np.array([0, 0, 2, 2], np.int32),
        "per_sample_weights": np.array([0.5, 0.5, 0.5, 0.5], np.float32),
    }
    print(write_model(build(), HERE, inputs))


if __name__ == "__main__":
    main()
