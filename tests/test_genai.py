"""OpenVINO GenAI LLM folders (models/genai_llama, genai_llama_int4) run by irrun: the
stateful model's logits against OpenVINO's, the tokenizer and detokenizer, and generation
against what openvino_genai.LLMPipeline generated (oracle.json, written by build.py), from
Python and from the command line."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import irrun
from irrun.errors import FeedError, ReadError, UnsupportedError
from irrun.tools.genai import LLMPipeline
from irrun.ui.cli import printable

MODELS = Path(__file__).resolve().parent.parent / "models"
FOLDERS = ["genai_llama", "genai_llama_int4"]
# The largest |irrun - OpenVINO| allowed on the logits (standard deviation ~1): the same
# arithmetic up to summation order. int4: the IR writes (w - zero_point) * scale in f16;
# OpenVINO's CPU plugin computes it in f32 inside its MatMul, and irrun's folding does too
# (irrun/run/dequantize.py; literally in f16 the logits differ by up to 0.007).
LOGITS_ATOL = {"genai_llama": 1e-4, "genai_llama_int4": 1e-4}


def _oracle(name):
    with open(MODELS / name / "oracle.json", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module", params=FOLDERS)
def folder(request):
    return request.param


@pytest.fixture(scope="module")
def pipe(folder):
    return LLMPipeline(MODELS / folder)


def test_model_inputs_are_genai_s(pipe):
    assert [i.name for i in pipe.model.inputs] == ["input_ids", "attention_mask", "position_ids",
                                                   "beam_idx"]
    assert [o.name for o in pipe.model.outputs] == ["logits"]
    assert len(pipe.model.variables) == 4          # a key and a value per layer
    assert pipe.config.stop_token_ids == {2}       # generation_config.json's eos_token_id


def test_prefill_and_decode_logits_match_openvino(folder, pipe):
    with np.load(MODELS / folder / "prefill.npz") as z:
        data = dict(z)
    names = ("input_ids", "attention_mask", "position_ids", "beam_idx")
    session = pipe.model.create_session()
    got = session.infer({k: data[k] for k in names})["logits"]
    assert got.shape == data["logits"].shape and got.dtype == np.float32
    np.testing.assert_allclose(got, data["logits"], rtol=0, atol=LOGITS_ATOL[folder])
    assert (got.argmax(-1) == data["logits"].argmax(-1)).all()
    # The decode step reads the cache the prefill wrote: without it the logits differ.
    step = {k: data["step_" + k] for k in names}
    got = session.infer(step)["logits"]
    np.testing.assert_allclose(got, data["step_logits"], rtol=0, atol=LOGITS_ATOL[folder])
    fresh = pipe.model.create_session().infer(step)["logits"]
    assert np.abs(fresh - data["step_logits"]).max() > 0.1


def test_every_decode_step_matches_openvino_live(folder, pipe):
    """Prefill and 20 decode steps fed as GenAI feeds them, OpenVINO's CPU plugin (f32) and
    irrun side by side, each step's logits compared; the tokens are OpenVINO's choice."""
    ov = pytest.importorskip("openvino")
    config = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32",
              "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
    request = ov.Core().compile_model(MODELS / folder / "openvino_model.xml", "CPU",
                                      config).create_infer_request()
    session = pipe.model.create_session()
    prompt = np.array(_oracle(folder)["cases"][2]["prompt_ids"], np.int64)
    n = len(prompt)
    step, worst = pipe._feed(prompt, n, np.arange(n, dtype=np.int64)), 0.0
    for _ in range(21):
        expected = request.infer(step)["logits"].copy()
        got = session.infer(step)["logits"]
        assert got.shape == expected.shape
        worst = max(worst, float(np.abs(got - expected).max()))
        token = int(expected[0, -1].argmax())
        assert int(got[0, -1].argmax()) == token
        n += 1
        step = pipe._feed(np.array([token], np.int64), n, np.array([n - 1], np.int64))
    assert worst <= LOGITS_ATOL[folder], worst


def test_tokenize_and_detokenize_match_openvino(folder, pipe):
    for case in _oracle(folder)["cases"]:
        assert pipe.tokenize(case["prompt"]).tolist() == case["prompt_ids"]
        assert pipe.detokenize(case["ids"]) == case["text"]


@pytest.mark.parametrize("index", range(4))
def test_greedy_generation_equals_llm_pipeline(folder, pipe, index):
    oracle = _oracle(folder)
    case = oracle["cases"][index]
    pieces = []
    result = pipe.generate(case["prompt"], max_new_tokens=oracle["max_new_tokens"],
                           streamer=pieces.append)
    assert result.prompt_ids == case["prompt_ids"]
    assert result.ids == case["ids"]
    assert result.text == case["text"] and str(result) == case["text"]
    assert result.finish_reason == "length"
    # Streamed as it came, in more than one piece, and the pieces are the text.
    assert len(pieces) > 1 and "".join(pieces) == case["text"]
    # From the ids, the same ids; and the loop itself, one id at a time.
    assert pipe.generate(case["prompt_ids"], 20).ids == case["ids"]
    assert list(pipe.tokens(case["prompt_ids"], pipe._options(20, {}))) == case["ids"]


def test_generation_stops_at_eos_and_keeps_it(folder, pipe):
    case = _oracle(folder)["eos_case"]
    result = pipe.generate(case["prompt"], 20, eos_token_id=case["eos_token_id"])
    assert result.ids == case["ids"] and result.ids[-1] == case["eos_token_id"]
    assert result.text == case["text"] and result.finish_reason == "stop"
    # ignore_eos goes on to max_new_tokens: the plain run's ids.
    full = _oracle(folder)["cases"][0]["ids"]
    assert pipe.generate(case["prompt"], 20, eos_token_id=case["eos_token_id"],
                         ignore_eos=True).ids == full


def test_each_generation_starts_from_an_empty_cache(pipe, folder):
    cases = _oracle(folder)["cases"]
    first = pipe.generate(cases[0]["prompt_ids"], 20).ids
    pipe.generate(cases[1]["prompt_ids"], 3)
    assert pipe.generate(cases[0]["prompt_ids"], 20).ids == first == cases[0]["ids"]


def test_streamer_returning_true_stops(pipe, folder):
    case = _oracle(folder)["cases"][0]
    pieces = []

    def stop_after_first(piece):
        pieces.append(piece)
        return True

    result = pipe.generate(case["prompt"], 20, streamer=stop_after_first)
    assert result.finish_reason == "cancelled"
    assert len(pieces) == 1 or len(pieces) == 2        # the piece, then the rest at the end
    assert 0 < len(result.ids) < 20 and result.ids == case["ids"][:len(result.ids)]


def test_max_new_tokens_and_options(pipe, folder):
    ids = _oracle(folder)["cases"][0]["prompt_ids"]
    assert pipe.generate(ids, 0).ids == []
    assert pipe.generate(ids, 3).ids == _oracle(folder)["cases"][0]["ids"][:3]
    with pytest.raises(FeedError, match="unknown generation option num_beams"):
        pipe.generate(ids, 3, num_beams=4)
    with pytest.raises(FeedError, match="max_new_tokens=-1"):
        pipe.generate(ids, -1)
    with pytest.raises(FeedError, match="top_p=1.5"):
        pipe.generate(ids, 3, do_sample=True, top_p=1.5)
    with pytest.raises(FeedError, match="non-empty list of token ids"):
        pipe.generate([], 3)
    with pytest.raises(FeedError, match="non-empty list of token ids"):
        pipe.generate([1.5, 2.0], 3)


def test_sampling_is_seeded_and_top_k_1_is_greedy(pipe, folder):
    case = _oracle(folder)["cases"][2]
    a = pipe.generate(case["prompt_ids"], 20, do_sample=True, temperature=1.5, seed=7).ids
    b = pipe.generate(case["prompt_ids"], 20, do_sample=True, temperature=1.5, seed=7).ids
    c = pipe.generate(case["prompt_ids"], 20, do_sample=True, temperature=1.5, seed=8).ids
    assert a == b and a != c
    assert pipe.generate(case["prompt_ids"], 20, do_sample=True, top_k=1).ids == case["ids"]
    # A tiny top_p keeps only the most likely token: greedy again.
    assert pipe.generate(case["prompt_ids"], 20, do_sample=True, top_p=1e-6).ids == case["ids"]


def test_irrun_generate_is_the_pipeline():
    case = _oracle("genai_llama")["cases"][3]
    result = irrun.generate(MODELS / "genai_llama", case["prompt"], max_new_tokens=20)
    assert result.ids == case["ids"] and result.text == case["text"]


def test_folder_errors(tmp_path):
    with pytest.raises(ReadError, match="no such folder"):
        LLMPipeline(tmp_path / "missing")
    with pytest.raises(ReadError, match="has no openvino_model.xml"):
        LLMPipeline(MODELS / "tiny_llama")
    # A folder with a chat template: irrun does not render it and says so.
    copy = tmp_path / "chat"
    shutil.copytree(MODELS / "genai_llama", copy)
    config = json.loads((copy / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (copy / "tokenizer_config.json").write_text(json.dumps(config))
    chat = LLMPipeline(copy)
    case = _oracle("genai_llama")["cases"][0]
    with pytest.raises(UnsupportedError, match="chat template"):
        chat.generate(case["prompt"], 3)
    assert chat.generate(case["prompt"], 3, apply_chat_template=False).ids == case["ids"][:3]
    # generation_config.json that is not JSON: the file and line.
    (copy / "generation_config.json").write_text('{"eos_token_id": 2,\n oops}')
    with pytest.raises(ReadError, match="generation_config.json' is not JSON") as info:
        LLMPipeline(copy)
    assert info.value.diagnostic.line == 2


# ------------------------------------------------------------------ command line

def _irrun(*args):
    script = Path(sys.executable).with_name("irrun")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "irrun"]
    return subprocess.run(command + [str(a) for a in args], capture_output=True, text=True,
                          encoding="utf-8", timeout=300, env={**os.environ, "PYTHONUTF8": "1"})


@pytest.mark.parametrize("name", FOLDERS)
def test_cli_generate(name):
    case = _oracle(name)["cases"][1]
    done = _irrun("generate", MODELS / name, case["prompt"], "--max-new-tokens", 20, "--ids")
    assert done.returncode == 0, done.stderr
    text, ids = done.stdout.rsplit("\n", 2)[:2]
    # Control characters in the text are shown escaped, as everywhere in irrun's output.
    assert text == printable(case["text"])
    assert ids == f"ids: {' '.join(map(str, case['ids']))} (length)"


def test_cli_generate_from_ids_and_eos():
    case = _oracle("genai_llama")["eos_case"]
    prompt = " ".join(map(str, _oracle("genai_llama")["cases"][0]["prompt_ids"]))
    done = _irrun("generate", MODELS / "genai_llama", prompt, "--prompt-ids", "-n", 3, "--ids")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"ids: {' '.join(map(str, case['ids'][:3]))} (length)"


def test_cli_tokenize_and_detokenize():
    case = _oracle("genai_llama")["cases"][3]
    done = _irrun("tokenize", MODELS / "genai_llama", case["prompt"])
    assert done.returncode == 0, done.stderr
    assert done.stdout == " ".join(map(str, case["prompt_ids"])) + "\n"
    done = _irrun("detokenize", MODELS / "genai_llama", *case["ids"])
    assert done.returncode == 0, done.stderr
    assert done.stdout == printable(case["text"]) + "\n"


def test_cli_errors_are_one_line(tmp_path):
    done = _irrun("generate", MODELS / "tiny_llama", "hello")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"{MODELS / 'tiny_llama'}: error: '{MODELS / 'tiny_llama'}' is not an OpenVINO GenAI "
        "LLM folder: it has no openvino_model.xml (optimum-cli export openvino --task "
        "text-generation-with-past writes one)"]
    done = _irrun("generate", MODELS / "genai_llama", "1 x", "--prompt-ids")
    assert done.returncode == 2 and "'1 x' is not a list of token ids" in done.stderr
    done = _irrun("detokenize", MODELS / "genai_llama")
    assert done.returncode == 2 and "Missing argument 'IDS...'" in done.stderr
