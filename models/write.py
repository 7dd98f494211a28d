"""What every models/<name>/build.py does last: write the IR with ov.save_model (default
compress_to_fp16, as real converters do), the sample inputs, and OpenVINO's outputs for them."""
import os

import numpy as np
import openvino as ov


def write_model(model: ov.Model, directory: str, inputs: dict) -> dict:
    """model.xml/.bin, inputs.npz (keyed by input name) and expected.npz (the CPU plugin's
    outputs at f32 precision, keyed by output name) in `directory`; returns the outputs."""
    xml = os.path.join(directory, "model.xml")
    ov.save_model(model, xml)
    np.savez(os.path.join(directory, "inputs.npz"), **inputs)
    compiled = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled.create_infer_request().infer(inputs)
    expected = {out.get_any_name(): np.array(results[out]) for out in compiled.outputs}
    np.savez(os.path.join(directory, "expected.npz"), **expected)
    return expected
