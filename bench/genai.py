"""The decode step of an OpenVINO GenAI LLM folder: irrun's time per generated token beside
OpenVINO's CPU plugin on the same openvino_model.xml (2 threads, f32 inference precision, an
f32 KV cache, no dynamic quantization: the oracle's settings), for f16 and int4 weights.

    python bench/genai.py                         # models/genai_llama and genai_llama_int4
    python bench/genai.py --tokens 64 --rounds 5 models/genai_llama

Both runtimes are fed what openvino_genai's stateful pipeline feeds: a prefill of the prompt,
then one token a step (input_ids [1, 1], the mask grown by one, position_ids [[k]], beam_idx
[0]), the KV cache kept in the runtime's state (irrun: a Session; OpenVINO: an InferRequest).
A step is timed from the feed to the logits (no sampling, no detokenizing); each round
generates --tokens tokens greedily after a prefill, and the median step of the best round
counts. irrun runs with IRRUN_THREADS=2 (set here before irrun is imported).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("IRRUN_THREADS", "2")

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = [os.path.join(ROOT, "models", n) for n in ("genai_llama", "genai_llama_int4")]
OV_CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32",
             "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0", "INFERENCE_NUM_THREADS": "2",
             "NUM_STREAMS": "1"}


def feed(ids, total, positions):
    return {"input_ids": np.asarray(ids, np.int64)[None],
            "attention_mask": np.ones((1, total), np.int64),
            "position_ids": np.asarray(positions, np.int64)[None],
            "beam_idx": np.zeros(1, np.int32)}


def decode_times(step, reset, prompt, tokens):
    """Seconds of each decode step after a prefill of `prompt`; `step(feed)` -> logits."""
    reset()
    n = len(prompt)
    logits = step(feed(prompt, n, np.arange(n)))
    times, generated = [], []
    for _ in range(tokens):
        token = int(np.argmax(logits[0, -1]))
        generated.append(token)
        n += 1
        f = feed([token], n, [n - 1])
        t0 = time.perf_counter()
        logits = step(f)
        times.append(time.perf_counter() - t0)
    return times, generated


def runners(folder):
    import irrun
    import openvino as ov

    xml = os.path.join(folder, "openvino_model.xml")
    session = irrun.read_model(xml).create_session()
    request = ov.Core().compile_model(xml, "CPU", OV_CONFIG).create_infer_request()

    def ov_step(f):
        request.infer(f)
        return request.get_tensor("logits").data.copy()

    return {"irrun": (lambda f: session.infer(f, outputs=["logits"])["logits"],
                      session.reset_state),
            "openvino": (ov_step, request.reset_state)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", default=FOLDERS)
    parser.add_argument("--tokens", type=int, default=32, help="decode steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    import openvino as ov

    # Other work on the machine moves both columns (OpenVINO's two threads more than irrun's
    # step, mostly one thread's Python), so the load goes beside them.
    load = " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(f"openvino {ov.get_version()}; IRRUN_THREADS={os.environ['IRRUN_THREADS']}; "
          f"{args.tokens} decode steps x {args.rounds} rounds, median step of the best round; "
          f"load average {load}")
    print(f"{'folder':20s} {'prompt':>6s} {'irrun ms':>9s} {'openvino ms':>12s} {'ratio':>7s}")
    for folder in args.folders:
        with open(os.path.join(folder, "oracle.json"), encoding="utf-8") as f:
            prompt = json.load(f)["cases"][0]["prompt_ids"]
        best, outputs = {}, {}
        for name, (step, reset) in runners(folder).items():
            decode_times(step, reset, prompt, 4)                 # warm-up
            medians = []
            for _ in range(args.rounds):
                times, generated = decode_times(step, reset, prompt, args.tokens)
                medians.append(statistics.median(times))
            best[name], outputs[name] = min(medians), generated
        same = "same tokens" if outputs["irrun"] == outputs["openvino"] else "TOKENS DIFFER"
        print(f"{os.path.basename(folder):20s} {len(prompt):6d} {best['irrun'] * 1e3:9.2f} "
              f"{best['openvino'] * 1e3:12.3f} {best['irrun'] / best['openvino']:6.1f}x  {same}")


if __name__ == "__main__":
    sys.exit(main())
