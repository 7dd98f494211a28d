"""Builds an OpenVINO GenAI LLM folder the way optimum-intel exports one: a tiny Llama
(`transformers.LlamaForCausalLM`, seeded random weights) with a byte-level BPE tokenizer
trained here with `tokenizers` on the text below, exported stateful by
`optimum-cli export openvino --task text-generation-with-past`:

    openvino_model.xml/.bin        input_ids, attention_mask, position_ids, beam_idx -> logits
                                   (the KV cache lives in ReadValue/Assign variables)
    openvino_tokenizer.xml/.bin    string -> input_ids, attention_mask (openvino_tokenizers)
    openvino_detokenizer.xml/.bin  token ids -> string
    config.json, generation_config.json, tokenizer files

and the oracle: oracle.json (for each prompt, the text and token ids that
`openvino_genai.LLMPipeline(folder, "CPU", **ORACLE_CONFIG)` generates greedily with
max_new_tokens=20, and one run that stops at an eos_token_id it meets) and prefill.npz (one
prefill's inputs and OpenVINO's logits for them, then one decode step's).

    python models/genai_llama/build.py           # f16 weights -> models/genai_llama/
    python models/genai_llama/build.py int4      # int4 weights -> models/genai_llama_int4/

Run it in a venv with torch, transformers, optimum-intel, nncf, tokenizers, openvino,
openvino-tokenizers and openvino-genai (see models/README.md).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.dirname(HERE)
SEED = 2718
VOCAB = 512
MAX_NEW_TOKENS = 20
PROMPTS = [
    "The river runs past the mill",
    "Once upon a time, a small robot",
    "def add(a, b):\n    return",
    "Tea or coffee? The baker said",
]
# Properties for OpenVINO's CPU plugin when it is the oracle: f32 arithmetic throughout, an
# f32 KV cache and no dynamic quantization of activations (by default the plugin stores the
# cache in u8 and quantizes activations for compressed weights), so the reference is the
# model's float computation.
ORACLE_CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32",
                 "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}

# Text to train the tokenizer on (written for this model; any text would do).
TEXT = """\
The river runs past the mill and under the old stone bridge, where the children stand
and count the boats. In the morning the water is grey; by noon it shines like glass.
The miller keeps a small notebook of the level of the river, one line for every day.
Once upon a time, a small robot lived in a lighthouse by the sea. Every night it climbed
the stairs, wiped the lamp and watched the ships. It did not sleep; it counted waves.
One winter a storm broke the lamp, and the robot carried a candle up the stairs instead.
def add(a, b):
    return a + b

def mean(values):
    total = 0
    for v in values:
        total += v
    return total / len(values)

Tea or coffee? The baker said tea in the morning and coffee after lunch, and bread all day.
She baked rye on Mondays, white loaves on Tuesdays and a sweet cake on Sundays.
A recipe: four cups of flour, two spoons of salt, one spoon of yeast and warm water.
Mix, wait an hour, fold, wait again, then bake for forty minutes until the crust is brown.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 12 16 32 64 128 256 512 1024.
Questions and answers. Why is the sky blue? Because air scatters blue light more than red.
Where does the road go? Over the hill, through the forest and into the next town.
"""


def train_tokenizer(folder):
    """A byte-level BPE with <unk>, <s>, </s> as ids 0, 1, 2 (Llama's special ids) and a
    post-processor that puts <s> first, saved as a transformers tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TEXT.splitlines(keepends=True), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.save_pretrained(folder)
    return fast


def build_hf(folder):
    """The transformers folder: tokenizer and a seeded random LlamaForCausalLM whose LM head
    is scaled so the logits on the training text have standard deviation 1."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tok = train_tokenizer(folder)
    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, bos_token_id=1, eos_token_id=2,
                         pad_token_id=0, initializer_range=0.2, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    ids = torch.tensor([tok(TEXT[:400])["input_ids"]])
    with torch.no_grad():
        std = float(model(input_ids=ids).logits.std())
        model.lm_head.weight.mul_(1.0 / std)
    model.save_pretrained(folder)
    GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=0).save_pretrained(folder)


def export(hf_folder, out, weights):
    args = [os.path.join(os.path.dirname(sys.executable), "optimum-cli"), "export", "openvino",
            "--model", hf_folder, "--task", "text-generation-with-past"]
    if weights == "int4":
        # hidden 64 is below nncf's default group of 128: groups of 32. nncf's defaults
        # otherwise: asymmetric int4 (u4 weights and zero points, f16 scales) for the 14
        # projections; the embedding and the LM head as per-channel asymmetric int8.
        args += ["--weight-format", "int4", "--group-size", "32"]
    else:
        args += ["--weight-format", "fp16"]
    subprocess.run(args + [out], check=True)


def write_oracle(folder):
    import openvino as ov
    import openvino_genai as ov_genai

    pipe = ov_genai.LLMPipeline(folder, "CPU", **ORACLE_CONFIG)
    tokenizer = pipe.get_tokenizer()
    config = pipe.get_generation_config()
    config.max_new_tokens = MAX_NEW_TOKENS
    config.do_sample = False
    cases = []
    for prompt in PROMPTS:
        text = pipe.generate(prompt, config)
        encoded = tokenizer.encode(prompt)
        result = pipe.generate(encoded, config)
        cases.append({"prompt": prompt,
                      "prompt_ids": encoded.input_ids.data[0].tolist(),
                      "ids": list(map(int, result.tokens[0])),
                      "text": str(text)})
    # Stopping at EOS: the first prompt again, with its 8th generated token as eos_token_id.
    config.eos_token_id = cases[0]["ids"][7]
    stop = {"prompt": PROMPTS[0], "eos_token_id": config.eos_token_id,
            "ids": list(map(int, pipe.generate(tokenizer.encode(PROMPTS[0]), config).tokens[0])),
            "text": str(pipe.generate(PROMPTS[0], config))}
    with open(os.path.join(folder, "oracle.json"), "w") as f:
        json.dump({"max_new_tokens": MAX_NEW_TOKENS, "config": ORACLE_CONFIG,
                   "openvino": ov.get_version(), "cases": cases, "eos_case": stop}, f, indent=1)

    # One prefill of the first prompt and one decode step of its first generated token,
    # straight through openvino_model.xml, as the pipeline feeds it.
    compiled = ov.Core().compile_model(os.path.join(folder, "openvino_model.xml"), "CPU",
                                       ORACLE_CONFIG)
    request = compiled.create_infer_request()
    ids = np.array([cases[0]["prompt_ids"]], np.int64)
    n = ids.shape[1]
    prefill = {"input_ids": ids, "attention_mask": np.ones((1, n), np.int64),
               "position_ids": np.arange(n, dtype=np.int64)[None], "beam_idx": np.zeros(1, np.int32)}
    logits = request.infer(prefill)["logits"].copy()
    step = {"input_ids": np.array([[cases[0]["ids"][0]]], np.int64),
            "attention_mask": np.ones((1, n + 1), np.int64),
            "position_ids": np.array([[n]], np.int64), "beam_idx": np.zeros(1, np.int32)}
    step_logits = request.infer(step)["logits"].copy()
    np.savez(os.path.join(folder, "prefill.npz"), logits=logits, step_logits=step_logits,
             **prefill, **{f"step_{k}": v for k, v in step.items()})
    return cases


def main(weights="f16"):
    out = os.path.join(MODELS, "genai_llama" if weights == "f16" else "genai_llama_int4")
    keep = {"build.py"}
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        build_hf(hf)
        exported = os.path.join(tmp, "ov")
        export(hf, exported, weights)
        for name in os.listdir(out) if os.path.isdir(out) else []:
            if name not in keep:
                os.remove(os.path.join(out, name))
        os.makedirs(out, exist_ok=True)
        for name in sorted(os.listdir(exported)):
            shutil.copy(os.path.join(exported, name), out)
        # optimum records the transformers folder it read, a temporary path: name it "hf"
        # so that a rebuild writes the same bytes.
        config = os.path.join(out, "openvino_config.json")
        if os.path.exists(config):
            with open(config) as f:
                text = f.read()
            with open(config, "w") as f:
                f.write(text.replace(json.dumps(hf)[1:-1], "hf"))
    for case in write_oracle(out):
        print(repr(case["prompt"]), "->", repr(case["text"]), case["ids"])


if __name__ == "__main__":
    main(*sys.argv[1:])
