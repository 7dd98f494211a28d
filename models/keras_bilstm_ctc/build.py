"""Builds a Keras speech/OCR-style CTC model: Conv1D -> Bidirectional LSTM -> GRU -> Dense
logits -> `tf.nn.ctc_greedy_decoder`, saved as a TensorFlow SavedModel and converted with
`openvino.convert_model` (the TensorFlow frontend).

The frontend writes each Keras recurrent layer as a **Loop-5** with a body (three: the
forward and backward LSTM and the GRU; the backward one between two ReverseSequence-1), and
the greedy decoder as CTCGreedyDecoderSeqLen-6 followed by the sparse-to-dense lowering
(NonZero-3, GatherND-8, ScatterNDUpdate-4, ReduceMax, ...).

    inputs [?, ?, 8] f32 (N sequences of T frames)
      -> output_0 [?, ?, 6] f32 (logits; class 5 is the CTC blank)
      -> output_1 [?, ?] i64 (decoded labels, padded with -1)

Run with the TensorFlow venv: `/work/tfenv/bin/python models/keras_bilstm_ctc/build.py`.
Writes model.xml/.bin, inputs.npz keyed by input name and expected.npz with OpenVINO CPU
plugin's outputs keyed by output name. Weights come from a fixed seed; the Dense head is
scaled so that frames pick varied classes. The tests use only `sample_inputs` (NumPy).
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 3
FEATURES, CLASSES = 8, 6


def sample_inputs(rng, batch: int, frames: int) -> dict:
    return {"inputs": rng.standard_normal((batch, frames, FEATURES)).astype(np.float32)}


def build(directory: str) -> str:
    import tensorflow as tf

    tf.keras.utils.set_random_seed(SEED)
    inp = tf.keras.Input((None, FEATURES), name="features")
    x = tf.keras.layers.Conv1D(16, 3, padding="same", activation="relu")(inp)
    x = tf.keras.layers.Bidirectional(tf.keras.layers.LSTM(12, return_sequences=True))(x)
    x = tf.keras.layers.GRU(10, return_sequences=True)(x)
    head = tf.keras.layers.Dense(CLASSES)
    logits = head(x)

    class GreedyDecode(tf.keras.layers.Layer):
        def call(self, logits):
            frames, batch = tf.shape(logits)[1], tf.shape(logits)[0]
            decoded, _ = tf.nn.ctc_greedy_decoder(tf.transpose(logits, [1, 0, 2]),
                                                  tf.fill([batch], frames))
            return tf.sparse.to_dense(decoded[0], default_value=-1)

    model = tf.keras.Model(inp, [logits, GreedyDecode()(logits)])
    kernel, bias = head.get_weights()
    head.set_weights([kernel * 4.0, bias])     # logits of order 1: varied best classes
    saved = os.path.join(directory, "saved_model")
    tf.saved_model.save(model, saved)
    return saved


def main() -> None:
    import openvino as ov

    sys.path.insert(0, os.path.dirname(HERE))
    from write import write_model

    with tempfile.TemporaryDirectory() as tmp:
        model = ov.convert_model(build(tmp))
    print(write_model(model, HERE, sample_inputs(np.random.default_rng(SEED), 2, 12)))


if __name__ == "__main__":
    main()
