"""A small ResNet-style network for the README's --profile and `irrun extract` examples:
stem conv + ReLU, one residual block (conv, ReLU, conv, add the skip, ReLU), max pool, global
average pool, a linear head and a softmax. Seeded random weights, f16 in the file (as
ov.save_model compresses them) behind decompression Converts.

Run from anywhere: `python models/resnetish/build.py` (needs `pip install openvino`).
"""
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset8 as o8

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model  # noqa: E402  (models/write.py)


def main():
    rng = np.random.default_rng(11)

    def conv(x, cin, cout, name):
        w = (rng.standard_normal((cout, cin, 3, 3)) / (3 * cin ** 0.5)).astype(np.float32)
        return o8.convolution(x, o8.constant(w), [1, 1], [1, 1], [1, 1], [1, 1], name=name)

    image = o8.parameter([1, 3, 16, 16], ov.Type.f32, name="image")
    image.output(0).get_tensor().set_names({"image"})
    stem = o8.relu(conv(image, 3, 8, "stem/conv"), name="stem/relu")
    a = o8.relu(conv(stem, 8, 8, "block1/conv1"), name="block1/relu1")
    b = conv(a, 8, 8, "block1/conv2")
    block = o8.relu(o8.add(b, stem, name="block1/add"), name="block1/relu2")
    pooled = o8.max_pool(block, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2], name="pool")
    gap = o8.reduce_mean(pooled.output(0), o8.constant(np.array([2, 3])), False, name="gap")
    w = (rng.standard_normal((8, 10)) / 8 ** 0.5).astype(np.float32)
    logits = o8.matmul(gap, o8.constant(w), False, False, name="fc")
    probs = o8.softmax(logits, 1, name="probs")
    probs.output(0).get_tensor().set_names({"probs"})
    inputs = {"image": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    write_model(ov.Model([probs], [image], "resnetish"), HERE, inputs)


if __name__ == "__main__":
    main()
