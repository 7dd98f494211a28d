"""Builds a Keras text classifier: Embedding(mask_zero=True) -> GRU -> Dense softmax,
saved as a TensorFlow SavedModel and converted with `openvino.convert_model`.

OpenVINO's TensorFlow frontend writes the masked GRU as a Loop-5 whose body runs one GRU
step per time step (MatMul, Sigmoid, Tanh, Select on the mask, ...), with the time steps
sliced from the input and the hidden state on a back edge, plus TensorList ops lowered to
ScatterUpdate/Gather.

    inputs [?, ?] i32 (token ids, 0 = padding) -> output_0 [?, 3] f32 (class probabilities)

Run with the TensorFlow venv: `/work/tfenv/bin/python models/keras_gru_classifier/build.py`.
Writes model.xml/.bin, inputs.npz keyed by input name and expected.npz with OpenVINO CPU
plugin's outputs keyed by output name. Weights come from a fixed seed; the Dense head is
(and the embeddings) scaled so that the classes are told apart. The tests use only `sample_inputs` (no
TensorFlow needed).
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB, EMBED, HIDDEN, CLASSES = 50, 8, 12, 3
SEED = 7


def sample_inputs(rng, batch: int, time: int) -> dict:
    """Token ids in [1, VOCAB) followed by zero padding: lengths 1..time, one per row."""
    tokens = rng.integers(1, VOCAB, (batch, time)).astype(np.int32)
    lengths = rng.integers(1, time + 1, batch)
    tokens[np.arange(time)[None, :] >= lengths[:, None]] = 0
    return {"inputs": tokens}


def build(directory: str):
    import tensorflow as tf

    tf.keras.utils.set_random_seed(SEED)
    inp = tf.keras.Input((None,), dtype="int32", name="tokens")
    embedding = tf.keras.layers.Embedding(VOCAB, EMBED, mask_zero=True)
    x = embedding(inp)
    x = tf.keras.layers.GRU(HIDDEN)(x)
    head = tf.keras.layers.Dense(CLASSES, activation="softmax")
    out = head(x)
    model = tf.keras.Model(inp, out)
    # Keras initialises embeddings within +-0.05, which leaves every probability near 1/3:
    # unit-scale embeddings and a scaled head make the classes differ.
    rng = np.random.default_rng(SEED)
    embedding.set_weights([rng.standard_normal((VOCAB, EMBED)).astype(np.float32)])
    kernel, bias = head.get_weights()
    head.set_weights([kernel * 3.0, bias])
    saved = os.path.join(directory, "saved_model")
    tf.saved_model.save(model, saved)
    return saved


def main() -> None:
    import openvino as ov

    sys.path.insert(0, os.path.dirname(HERE))
    from write import write_model

    with tempfile.TemporaryDirectory() as tmp:
        model = ov.convert_model(build(tmp))
    rng = np.random.default_rng(SEED)
    inputs = sample_inputs(rng, 4, 9)
    print(inputs)
    print(write_model(model, HERE, inputs))


if __name__ == "__main__":
    main()
