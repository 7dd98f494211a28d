"""ScaledDotProductAttention-13: irrun beside OpenVINO's CPU plugin and PyTorch's
torch.nn.functional.scaled_dot_product_attention, at [1, 8, 512, 64] f32 by default.

    python bench/attention.py                    # times, ratios and peak memory
    python bench/attention.py --shape 1,8,2048,64 --causal

Times: each runtime in turn makes `--repeat` calls, for three rounds, and the best call
counts (irrun through read_model + Model.infer, the interpreter included). Peak memory:
each runtime runs in a fresh subprocess, which reports how far one call (after a warm-up
call) lifts the peak resident set over the resident set before it (Linux only), and for
irrun also tracemalloc's peak of NumPy allocations. PyTorch is optional.

OMP_WAIT_POLICY defaults to PASSIVE here: PyTorch's OpenMP threads otherwise spin between
calls on the cores NumPy's BLAS threads need, which slowed irrun 2-3x on a 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # before torch is imported

import numpy as np


def make_inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(shape).astype(np.float32) for n in ("q", "k", "v")}


def build_ir(shape, causal: bool, directory: str) -> str:
    import openvino as ov
    import openvino.opset13 as o13
    ps = [o13.parameter(list(shape), np.float32, name=n) for n in ("q", "k", "v")]
    node = o13.scaled_dot_product_attention(*ps, causal=causal)
    path = os.path.join(directory, "sdpa.xml")
    ov.save_model(ov.Model([node], ps, "sdpa"), path)
    return path


def runner(name: str, xml: str, feed: dict, causal: bool):
    """A no-argument callable that runs one SDPA with the named runtime."""
    if name == "irrun":
        import irrun
        model = irrun.read_model(xml)
        return lambda: model.infer(feed)
    if name == "openvino":
        import openvino as ov
        compiled = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        request = compiled.create_infer_request()
        return lambda: request.infer(feed)
    if name == "torch":
        import torch
        import torch.nn.functional as F
        q, k, v = (torch.from_numpy(feed[n]) for n in ("q", "k", "v"))

        def run():
            with torch.no_grad():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return run
    raise ValueError(name)


def available() -> list[str]:
    names = ["irrun"]
    try:
        import openvino  # noqa: F401
        names.append("openvino")
    except ImportError:
        pass
    try:
        import torch  # noqa: F401
        names.append("torch")
    except ImportError:
        pass
    return names


def best_of_each(fns, repeat: int, rounds: int = 3) -> list[float]:
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            for _ in range(repeat):
                t = time.perf_counter()
                fn()
                best[i] = min(best[i], time.perf_counter() - t)
            time.sleep(0.2)       # let spinning worker threads go idle before the next turn
    return best


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def measure_memory(name: str, shape, causal: bool) -> dict:
    """Run in a fresh process: how far one call lifts the peak resident set over the
    resident set before it (Linux: VmHWM reset through /proc/self/clear_refs), and for
    irrun also tracemalloc's peak of NumPy allocations."""
    feed = make_inputs(shape)
    with tempfile.TemporaryDirectory() as d:
        xml = build_ir(shape, causal, d)
        fn = runner(name, xml, feed, causal)
        fn()                                    # warm-up: lazy initialisation is not the call's
        out = {}
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                        # reset the peak to the current RSS
        before = _status_kib("VmRSS")
        if name == "irrun":
            import tracemalloc
            tracemalloc.start()
            result = fn()
            out["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        else:
            result = fn()
        out["rss_growth_mib"] = (_status_kib("VmHWM") - before) / 1024
        del result
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="1,8,512,64")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--memory-of", help=argparse.SUPPRESS)    # the subprocess's mode
    args = ap.parse_args(argv)
    shape = tuple(int(s) for s in args.shape.split(","))
    if args.memory_of:
        print(json.dumps(measure_memory(args.memory_of, shape, args.causal)))
        return 0

    names = available()
    feed = make_inputs(shape)
    with tempfile.TemporaryDirectory() as d:
        xml = build_ir(shape, args.causal, d) if "openvino" in names else None
        if xml is None:
            print("OpenVINO is needed to write the IR file; install the test extra", file=sys.stderr)
            return 1
        fns = [runner(n, xml, feed, args.causal) for n in names]
        # The three agree (irrun's result is checked against the others).
        ref = np.asarray(next(iter(fns[0]().values())))
        for n, fn in zip(names[1:], fns[1:]):
            got = fn()
            got = np.asarray(got.numpy() if hasattr(got, "numpy") else next(iter(got.values())))
            err = float(np.max(np.abs(got - ref)))
            print(f"max |irrun - {n}| = {err:.2e}")
        times = best_of_each(fns, args.repeat)
    mem = {}
    for n in names:
        cmd = [sys.executable, __file__, "--memory-of", n, "--shape", args.shape]
        r = subprocess.run(cmd + (["--causal"] if args.causal else []), check=False,
                           capture_output=True, text=True)
        mem[n] = (json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0
                  else {"error": r.stderr[-200:]})
    L, S = shape[-2], shape[-2]
    scores_mib = int(np.prod(shape[:-2])) * L * S * 4 / 2**20
    print(f"ScaledDotProductAttention f32 {list(shape)} causal={args.causal}: all scores at once "
          f"would be {scores_mib:.0f} MiB")
    print(f"{'runtime':10} {'best ms':>9} {'ratio':>14} {'peak RSS growth':>16} {'tracemalloc peak':>17}")
    base = dict(zip(names, times))
    for n, t in zip(names, times):
        ratio = "" if n == "irrun" else f"irrun {base['irrun'] / t:.2f}x"
        m = mem.get(n, {})
        rss = f"{m['rss_growth_mib']:.1f} MiB" if "rss_growth_mib" in m else m.get("error", "?")
        tm = f"{m['tracemalloc_peak_mib']:.1f} MiB" if "tracemalloc_peak_mib" in m else "-"
        print(f"{n:10} {t * 1e3:9.2f} {ratio:>14} {rss:>16} {tm:>17}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
