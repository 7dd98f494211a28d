"""Builds a CRNN-style text recognition model (convolutional features, per-column
classifier, greedy CTC decoding), as converters emit it:

    image [1, 1, 32, W] f32
      --Convolution 3x3, 8 filters, auto_pad=same_upper--> Add bias --> ReLU
      --MaxPool-8 2x2 stride 2--> [1, 8, 16, W/2]
      --Convolution 3x3, 16 filters, explicit pads 1--> Add bias --> ReLU
      --MaxPool-1 2x2 stride 2--> [1, 16, 8, W/4]
      --Transpose (0, 3, 1, 2)--> [1, W/4, 16, 8] --Reshape [0, 0, 128]--> [N=1, T=W/4, 128]
      --MatMul [128, 12] + bias--> logits [1, T, 12] --SoftMax-8 (axis -1)--> probs
      --CTCGreedyDecoderSeqLen (sequence_length [1], blank = C - 1 = 11)-->
        decoded_classes [1, T] i32, decoded_lengths [1] i32

The width W is dynamic (T = floor(W / 4)); the sequence length is an input, at most T.
Run from anywhere: `python models/crnn/build.py`. Writes model.xml/.bin with ov.save_model
(default compress_to_fp16: the f32 weights are stored as f16 plus a decompression Convert),
inputs.npz keyed by input name and expected.npz with OpenVINO CPU plugin's outputs keyed by
output name. The weights come from a fixed seed.
"""
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset1 as o1
import openvino.opset6 as o6
import openvino.opset8 as o8

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model  # noqa: E402  (models/write.py)
SEED = 1507
CLASSES = 12      # 11 symbols and the blank, last


def _name(node, name, port=0):
    node.output(port).get_tensor().set_names({name})
    return node


def build() -> ov.Model:
    rng = np.random.default_rng(SEED)
    image = _name(o8.parameter([1, 1, 32, -1], ov.Type.f32, name="image"), "image")
    seq_len = _name(o8.parameter([1], ov.Type.i32, name="sequence_length"), "sequence_length")

    w1 = rng.normal(0, 0.5, (8, 1, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (1, 8, 1, 1)).astype(np.float32)
    x = o1.convolution(image, o8.constant(w1), [1, 1], [0, 0], [0, 0], [1, 1], "same_upper", name="conv1")
    x = o8.relu(o8.add(x, o8.constant(b1)), name="relu1")
    x = o8.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2], "floor", "explicit", name="pool1").output(0)

    w2 = rng.normal(0, 1 / np.sqrt(72), (16, 8, 3, 3)).astype(np.float32)
    b2 = rng.normal(0, 0.1, (1, 16, 1, 1)).astype(np.float32)
    x = o1.convolution(x, o8.constant(w2), [1, 1], [1, 1], [1, 1], [1, 1], "explicit", name="conv2")
    x = o8.relu(o8.add(x, o8.constant(b2)), name="relu2")
    x = o1.max_pool(x, [2, 2], [0, 0], [0, 0], [2, 2], "floor", "explicit", name="pool2")

    x = o8.transpose(x, o8.constant(np.array([0, 3, 1, 2], np.int64)), name="to_columns")
    x = o8.reshape(x, o8.constant(np.array([0, 0, 16 * 8], np.int64)), special_zero=True, name="features")
    # The classifier sees standardised features: a normalisation folded into w3 and b3 from
    # the feature statistics of a calibration image (an untrained network's columns differ
    # little, so without it every column would get the same class).
    mu, sigma = _feature_stats(ov.Model([x], [image]))
    w3 = (rng.normal(0, 1, (128, CLASSES)) / (sigma[:, None] * np.sqrt(128))).astype(np.float32)
    b3 = (-mu @ w3).astype(np.float32)
    b3[-1] += 0.5   # favour the blank a little, as trained CTC models do
    logits = o8.add(o8.matmul(x, o8.constant(w3), False, False), o8.constant(b3), name="logits")
    probs = o8.softmax(logits, -1, name="probs")
    dec = o6.ctc_greedy_decoder_seq_len(probs, seq_len, merge_repeated=True,
                                        classes_index_type="i32", sequence_length_type="i32",
                                        name="ctc_decoder")
    _name(dec, "decoded_classes", 0)
    _name(dec, "decoded_lengths", 1)
    return ov.Model(dec.outputs(), [image, seq_len], "crnn")


def _feature_stats(trunk: ov.Model):
    compiled = ov.Core().compile_model(trunk, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    features = compiled(sample_inputs(np.random.default_rng(99), width=200)["image"])[0][0]
    return features.mean(axis=0), features.std(axis=0) + 1e-3


def sample_inputs(rng, width: int, seq_len: int | None = None) -> dict:
    """A synthetic text line: dark strokes (vertical bars and blobs) on a light background."""
    image = np.full((1, 1, 32, width), 0.9, np.float32)
    x = 2
    while x < width - 4:
        w = int(rng.integers(1, 4))
        top, bottom = int(rng.integers(4, 12)), int(rng.integers(20, 28))
        image[0, 0, top:bottom, x:x + w] = rng.uniform(0.0, 0.3)
        x += w + int(rng.integers(2, 6))
    image += rng.normal(0, 0.05, image.shape).astype(np.float32)
    t = width // 4
    return {"image": image, "sequence_length": np.array([t if seq_len is None else seq_len], np.int32)}


def main() -> None:
    inputs = sample_inputs(np.random.default_rng(3), width=100, seq_len=23)
    print(write_model(build(), HERE, inputs))


if __name__ == "__main__":
    main()
