"""The tiny BERT classifier of models/tiny_bert (same config, seed and weights) taken the
ONNX route: torch.onnx.export (opset 17, TorchScript exporter, dynamic batch and sequence)
and openvino.convert_model of the .onnx file.

    input_ids [B, T] i64, attention_mask [B, T] i64 --> logits [B, 3] f32

The exporter writes torch's scaled_dot_product_attention as MatMul/Softmax with the padding
mask as an additive -inf bias and an IsNaN/Where guard that zeroes fully masked rows, which
OpenVINO keeps as IsNaN-10 and Select; LayerNorm arrives as MVN-6. Run with a build venv (torch,
transformers, onnx, openvino): `python models/tiny_bert_onnx/build.py`. Writes
model.xml/.bin (ov.save_model, compress_to_fp16), inputs.npz and expected.npz.
"""
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(os.path.dirname(HERE), "tiny_bert", "build.py")


def _base():
    spec = importlib.util.spec_from_file_location("_tiny_bert_build", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample_inputs(rng, batch=2, seq=8):
    return _base().sample_inputs(rng, batch, seq)


def build():
    import openvino as ov
    import torch

    # transformers' default sdpa attention: the TorchScript exporter writes
    # aten::scaled_dot_product_attention as MatMul/Softmax with an IsNaN guard for fully
    # masked rows. (With eager attention, OpenVINO fuses the pattern back into SDPA-13.)
    model, inputs = _base().torch_model()
    args = tuple(torch.from_numpy(inputs[k]) for k in ("input_ids", "attention_mask"))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        torch.onnx.export(model, args, path, input_names=["input_ids", "attention_mask"],
                          output_names=["logits"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                        "attention_mask": {0: "batch", 1: "seq"}})
        ov_model = ov.convert_model(path)
    return ov_model, inputs


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    from write import write_model  # models/write.py

    m, inputs = build()
    print(write_model(m, HERE, inputs))
