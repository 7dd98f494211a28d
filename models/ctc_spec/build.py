"""Builds the CTCGreedyDecoderSeqLen-6 spec example: data [8, 20, 128], sequence_length [8],
blank_index = 120 (a scalar), merge_repeated=true, i64 classes and lengths -> outputs
[8, 20] and [8].

The spec declares shapes only, so this ships sample logits: per batch item a random best
path with runs of repeats and blanks (class 120) is drawn and its classes get the highest
logit, over noise; sequence lengths run from 0 to T = 20.

Run from anywhere: `python models/ctc_spec/build.py`. Writes model.xml/.bin with OpenVINO's
Python API (ov.save_model, default compress_to_fp16), inputs.npz keyed by input name and
expected.npz with OpenVINO CPU plugin's outputs keyed by output name.
"""
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset3 as o3
import openvino.opset6 as o6

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model  # noqa: E402  (models/write.py)
N, T, C, BLANK = 8, 20, 128, 120


def build() -> ov.Model:
    data = o3.parameter([N, T, C], ov.Type.f32, name="data")
    data.output(0).get_tensor().set_names({"data"})
    seq = o3.parameter([N], ov.Type.i32, name="sequence_length")
    seq.output(0).get_tensor().set_names({"sequence_length"})
    blank = o3.constant(np.array(BLANK, np.int64), name="blank_index")
    node = o6.ctc_greedy_decoder_seq_len(data, seq, blank, merge_repeated=True,
                                         classes_index_type="i64", sequence_length_type="i64",
                                         name="ctc_greedy_decoder")
    node.output(0).get_tensor().set_names({"decoded_classes"})
    node.output(1).get_tensor().set_names({"decoded_lengths"})
    return ov.Model(node.outputs(), [data, seq], "ctc_spec")


def sample_inputs() -> dict:
    rng = np.random.default_rng(2020)
    logits = rng.normal(0.0, 1.0, (N, T, C)).astype(np.float32)
    # Runs: a few labels repeated 1-3 times, with blanks between some of them.
    for b in range(N):
        t = 0
        while t < T:
            label = BLANK if rng.random() < 0.3 else int(rng.choice([3, 7, 42, 99, 127]))
            for _ in range(int(rng.integers(1, 4))):
                if t < T:
                    logits[b, t, label] += 6.0
                    t += 1
    lengths = np.array([20, 0, 7, 20, 13, 1, 19, 10], np.int32)
    return {"data": logits, "sequence_length": lengths}


def main() -> None:
    inputs = sample_inputs()
    print(write_model(build(), HERE, inputs))


if __name__ == "__main__":
    main()
