"""The tiny wav2vec2 CTC model of models/tiny_wav2vec2 (same config, seed and weights), its
logits decoded by CTCGreedyDecoderSeqLen-6 instead of argmax:

    input_values [B, N] f32
      --Wav2Vec2ForCTC (models/tiny_wav2vec2/build.py)--> logits [B, T, 12]
      --CTCGreedyDecoderSeqLen (sequence_length = T for every row, from ShapeOf(logits);
        blank_index 0, the pad token; merge_repeated)-->
      decoded_classes [B, T] i32 (padded with -1), decoded_lengths [B] i32

Run with a build venv (torch, transformers, openvino):
`python models/tiny_wav2vec2_ctc/build.py`. Writes model.xml/.bin (ov.save_model,
compress_to_fp16), inputs.npz and expected.npz (OpenVINO CPU plugin's outputs).
"""
import importlib.util
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(os.path.dirname(HERE), "tiny_wav2vec2", "build.py")
SEED = 1405


def _base():
    spec = importlib.util.spec_from_file_location("_tiny_wav2vec2_build", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample_inputs(rng, batch=2, samples=800):
    return _base().sample_inputs(rng, batch, samples)


def build():
    import openvino as ov
    import openvino.opset6 as o6
    import openvino.opset8 as o8

    base, _ = _base().build()
    logits = base.get_results()[0].input_value(0)
    shape = o8.shape_of(logits, "i32")
    frames = o8.gather(shape, o8.constant(np.array([1], np.int32)), o8.constant(np.array(0, np.int32)))
    batch = o8.gather(shape, o8.constant(np.array([0], np.int32)), o8.constant(np.array(0, np.int32)))
    lengths = o8.broadcast(frames, batch)
    decoder = o6.ctc_greedy_decoder_seq_len(logits, lengths, o8.constant(np.array(0, np.int32)),
                                            merge_repeated=True, classes_index_type="i32",
                                            sequence_length_type="i32")
    decoder.output(0).get_tensor().set_names({"decoded_classes"})
    decoder.output(1).get_tensor().set_names({"decoded_lengths"})
    model = ov.Model([o8.result(decoder.output(0)), o8.result(decoder.output(1))],
                     base.get_parameters(), "tiny_wav2vec2_ctc")
    return model, sample_inputs(np.random.default_rng(SEED))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    from write import write_model  # models/write.py

    m, inputs = build()
    print(write_model(m, HERE, inputs))
