"""Builds a Keras transformer encoder block around `tf.keras.layers.MultiHeadAttention`,
saved as a TensorFlow SavedModel and converted with `openvino.convert_model`:

    inputs [?, ?, 16] f32, mask [?, ?] boolean (true = attend to this key)
      --MultiHeadAttention(num_heads=2, key_dim=8) self-attention with attention_mask
        [B, 1, T] (broadcast over the queries) --> + inputs --> LayerNormalization
      --Dense(32, gelu) --> Dense(16) --> + --> LayerNormalization --> Dense(4)-->
      output_0 [?, ?, 4] f32

Keras writes the attention's projections and scores as tf.einsum, which OpenVINO's
TensorFlow frontend keeps as Einsum-7 ("abc,cde->abde" for the Q/K/V projections,
"BTNH,BSNH->BNTS" for the scores, "BNTS,BSNH->BTNH" for the weighted values,
"abcd,cde->abe" for the output projection); the masked softmax becomes Select/SoftMax-8,
the LayerNorms ReduceMean/SquaredDifference/Power arithmetic, gelu Erf.

Run with the TensorFlow venv: `/work/tfenv/bin/python models/keras_mha_block/build.py`.
Writes model.xml/.bin, inputs.npz and expected.npz (OpenVINO CPU plugin's outputs). Weights
come from a fixed seed; the output Dense is scaled so the outputs have standard deviation ~1.
The tests use only `sample_inputs` (no TensorFlow needed).
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 1404
WIDTH = 16


def sample_inputs(rng, batch: int = 2, time: int = 6) -> dict:
    """Random features; the mask hides the last keys of every row but the first."""
    x = rng.standard_normal((batch, time, WIDTH)).astype(np.float32)
    lengths = np.concatenate([[time], rng.integers(1, time + 1, batch - 1)])
    mask = np.arange(time)[None, :] < lengths[:, None]
    return {"inputs": x, "mask": mask}


def build(directory: str):
    import tensorflow as tf

    tf.keras.utils.set_random_seed(SEED)
    x_in = tf.keras.Input((None, WIDTH), dtype="float32", name="inputs")
    m_in = tf.keras.Input((None,), dtype="bool", name="mask")
    attention_mask = m_in[:, tf.newaxis, :]
    mha = tf.keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)
    h = tf.keras.layers.LayerNormalization()(x_in + mha(x_in, x_in, attention_mask=attention_mask))
    f = tf.keras.layers.Dense(32, activation="gelu")(h)
    f = tf.keras.layers.Dense(WIDTH)(f)
    h = tf.keras.layers.LayerNormalization()(h + f)
    head = tf.keras.layers.Dense(4)
    out = head(h)
    model = tf.keras.Model([x_in, m_in], out)
    sample = sample_inputs(np.random.default_rng(SEED))
    std = float(np.std(model([sample["inputs"], sample["mask"]]).numpy()))
    kernel, bias = head.get_weights()
    head.set_weights([kernel / std, bias / std])
    saved = os.path.join(directory, "saved_model")
    tf.saved_model.save(model, saved)
    return saved


def main() -> None:
    import openvino as ov

    sys.path.insert(0, os.path.dirname(HERE))
    from write import write_model

    with tempfile.TemporaryDirectory() as tmp:
        model = ov.convert_model(build(tmp))
    for port in model.inputs:          # the SavedModel signature names them inputs, inputs_1
        port.get_tensor().set_names({"mask" if port.get_element_type() == ov.Type.boolean else "inputs"})
    inputs = sample_inputs(np.random.default_rng(SEED))
    out = write_model(model, HERE, inputs)
    print({k: (v.shape, float(v.std())) for k, v in out.items()})


if __name__ == "__main__":
    main()
