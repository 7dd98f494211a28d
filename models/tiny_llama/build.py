"""Builds a tiny Llama causal language model from `transformers` (random weights, seeded,
no KV cache, grouped-query attention) and converts it with openvino.convert_model:

    input_ids [B, T] i64, attention_mask [B, T] i64 (1 = token, 0 = padding)
      --LlamaForCausalLM: 2 layers, hidden 32, 4 query heads over 2 key/value heads,
        intermediate 64, vocab 100, 32 positions, use_cache=False, attn_implementation="sdpa"-->
      logits [B, T, 100] f32

The converter repeats the 2 key/value heads to 4 before ScaledDotProductAttention-13 (whose
batch dims broadcast only from 1); RoPE arrives as Sin/Cos arithmetic, RMSNorm as
Power/ReduceMean/Sqrt/Divide, SiLU as Swish-4. The LM head is rescaled so the logits have
standard deviation ~1 on the sample. Run with a build venv (torch, transformers, openvino):
`python models/tiny_llama/build.py`. Writes model.xml/.bin (ov.save_model,
compress_to_fp16), inputs.npz and expected.npz (OpenVINO CPU plugin's outputs).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 1406


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
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         use_cache=False, attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    inputs = sample_inputs(np.random.default_rng(SEED))
    example = {k: torch.from_numpy(v) for k, v in inputs.items()}
    with torch.no_grad():
        std = float(model(**example).logits.std())
        model.lm_head.weight.mul_(1.0 / std)
    ov_model = ov.convert_model(model, example_input=example)
    ov_model.outputs[0].get_tensor().set_names({"logits"})
    return ov_model, inputs


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    from write import write_model  # models/write.py

    m, inputs = build()
    out = write_model(m, HERE, inputs)
    print({k: (v.shape, float(v.std())) for k, v in out.items()})
