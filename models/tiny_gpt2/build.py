"""Builds a tiny GPT-2 language model from `transformers` (random weights, seeded, no KV
cache) and converts it with openvino.convert_model, the way a new user would:

    input_ids [B, T] i64, attention_mask [B, T] i64 (1 = token, 0 = padding)
      --GPT2LMHeadModel: 2 layers, n_embd 32, 2 heads, vocab 100, 16 positions,
        use_cache=False, attn_implementation="sdpa", untied head-->
      logits [B, T, 100] f32

B and T are dynamic in the IR (the sample has B = 2, T = 8, the second row padded at the
end). The LM head is untied from the token embeddings and rescaled so the logits have
standard deviation ~1 on the sample. Run with a build venv (torch, transformers, openvino):
`python models/tiny_gpt2/build.py`. Writes model.xml/.bin (ov.save_model,
compress_to_fp16), inputs.npz and expected.npz (OpenVINO CPU plugin's outputs).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 1402


def sample_inputs(rng, batch=2, seq=8):
    ids = rng.integers(1, 100, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    for b in range(1, batch):
        mask[b, rng.integers(2, seq + 1):] = 0
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask}


def build():
    # The frameworks are imported here: the tests load sample_inputs() without them.
    import openvino as ov
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(SEED)
    config = GPT2Config(vocab_size=100, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                        use_cache=False, tie_word_embeddings=False, attn_implementation="sdpa")
    model = GPT2LMHeadModel(config).eval()
    inputs = sample_inputs(np.random.default_rng(SEED))
    example = {k: torch.from_numpy(v) for k, v in inputs.items()}
    with torch.no_grad():
        std = float(model(**example).logits.std())
        model.lm_head.weight.mul_(1.0 / std)
    ov_model = ov.convert_model(model, example_input=example)
    ov_model.outputs[0].get_tensor().set_names({"logits"})
    return ov_model, inputs


if __name__ == "__main__":
    from write import write_model  # models/write.py

    m, inputs = build()
    out = write_model(m, HERE, inputs)
    print({k: (v.shape, float(v.std())) for k, v in out.items()})
