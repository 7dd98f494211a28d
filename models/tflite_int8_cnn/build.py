"""Builds a small Keras CNN (random weights, seeded), quantizes it to full-integer int8 with
TensorFlow Lite's post-training quantization (tf.lite.TFLiteConverter, a representative
dataset of random images, int8 builtins only, int8 input, float output) and converts the
.tflite file with openvino.convert_model, the way a new user would:

    image [1, 32, 32, 3] i8 (quantized: scale and zero point in the TFLite file)
      --Conv2D 3x3 (16, ReLU) -> DepthwiseConv2D 3x3 (ReLU) -> Conv2D 1x1 (32, ReLU)
        -> MaxPooling2D 2x2 -> DepthwiseConv2D 3x3 stride 2 (ReLU6) -> Conv2D 1x1 (32, ReLU)
        -> AveragePooling2D 2x2 -> Flatten -> Dense (32, ReLU) -> Dense (10)-->
      logits [1, 10] f32 (the int8 logits dequantized)

OpenVINO's TensorFlow Lite frontend writes the quantized tensors as FakeQuantize layers
around float convolutions, with the int8 weights as i8 Consts decompressed by Convert,
Subtract and Multiply. Run with the TensorFlow venv (tensorflow-cpu, openvino):
`/work/tfenv/bin/python models/tflite_int8_cnn/build.py`. Writes model.xml/.bin
(ov.save_model, compress_to_fp16), inputs.npz and expected.npz (OpenVINO CPU plugin's
outputs); also prints the TFLite interpreter's outputs beside OpenVINO's.
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 2406
SIZE = 32
CLASSES = 10
# The input's quantization as the converter calibrated it on standard normal images (build
# checks it): float = IN_SCALE * (code - IN_ZERO).
IN_SCALE, IN_ZERO = 0.0348, 3


def sample_inputs(rng, batch=1):
    """Quantized images: the int8 codes of standard normal pixels."""
    codes = np.rint(rng.standard_normal((batch, SIZE, SIZE, 3)) / IN_SCALE) + IN_ZERO
    return {"image": np.clip(codes, -128, 127).astype(np.int8)}


def keras_model():
    import tensorflow as tf

    tf.keras.utils.set_random_seed(SEED)
    layers = tf.keras.layers
    inp = tf.keras.Input((SIZE, SIZE, 3), batch_size=1, name="image")
    x = layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
    x = layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = layers.Conv2D(32, 1, activation="relu")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.DepthwiseConv2D(3, strides=2, padding="same")(x)
    x = layers.ReLU(max_value=6.0)(x)
    x = layers.Conv2D(32, 1, activation="relu")(x)
    x = layers.AveragePooling2D(2)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(32, activation="relu")(x)
    head = layers.Dense(CLASSES)
    out = head(x)
    model = tf.keras.Model(inp, out)
    # Logits of mean 0 and spread ~2 on random images (Keras' initialisers give ~0.3).
    images = np.random.default_rng(SEED).standard_normal((64, SIZE, SIZE, 3)).astype(np.float32)
    logits = model.predict(images, verbose=0)
    kernel, bias = head.get_weights()
    mean = logits.mean(axis=0)
    scale = 2.0 / float((logits - mean).std())
    head.set_weights([kernel * scale, (bias - mean) * scale])
    return model


def tflite_bytes(model):
    import tensorflow as tf

    gen = np.random.default_rng(SEED + 1)

    def representative():
        for _ in range(64):
            yield [gen.standard_normal((1, SIZE, SIZE, 3)).astype(np.float32)]

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.float32
    return converter.convert()


def tflite_run(data, inputs):
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_content=data)
    interpreter.allocate_tensors()
    scale, zero = interpreter.get_input_details()[0]["quantization"]
    assert abs(scale - IN_SCALE) < 1e-4 and zero == IN_ZERO, (scale, zero)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs["image"])
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def build(directory):
    import openvino as ov

    data = tflite_bytes(keras_model())
    path = os.path.join(directory, "model.tflite")
    with open(path, "wb") as f:
        f.write(data)
    ov_model = ov.convert_model(path)
    ov_model.inputs[0].get_tensor().set_names({"image"})
    ov_model.outputs[0].get_tensor().set_names({"logits"})
    return ov_model, data


if __name__ == "__main__":
    import collections

    from write import write_model  # models/write.py

    with tempfile.TemporaryDirectory() as tmp:
        m, data = build(tmp)
    inputs = sample_inputs(np.random.default_rng(SEED))
    ops = collections.Counter(f"{n.get_type_name()}-{n.get_type_info().version_id}"
                              for n in m.get_ordered_ops())
    print(dict(sorted(ops.items())))
    print([(i.get_any_name(), i.get_element_type(), i.get_partial_shape()) for i in m.inputs],
          [(o.get_any_name(), o.get_element_type(), o.get_partial_shape()) for o in m.outputs])
    out = write_model(m, HERE, inputs)
    print("OpenVINO:", {k: v for k, v in out.items()})
    print("TFLite:  ", tflite_run(data, inputs))
