"""Peak memory of a whole-model run: irrun's RSS while it reads, folds and runs ResNet-18
(torchvision, random seeded weights, 64x64, f16 IR as save_model writes it), against the
network's f32 weights plus its activations.

    /work/buildenv/bin/python bench/memory.py            # build the IR, then measure
    python bench/memory.py --xml model.xml [--inputs x.npz]   # any model, irrun only

The measurement runs in a fresh process that imports irrun and NumPy first, so the
interpreter and its libraries are the baseline: the number is what the model adds.
"activations" is every layer's output of one inference added up (what an interpreter that
never freed anything would hold); "weights" is every Const as f32 (f16 and compressed
weights decompressed, as folding does). Peak RSS is the kernel's high-water mark (VmHWM),
so pages of the memory-mapped .bin that were read count too.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_MEASURE = r"""
import json, sys
import numpy as np
import irrun


def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


base = status("VmRSS")
xml, inputs = sys.argv[1], sys.argv[2]
m = irrun.read_model(xml)
after_read = status("VmRSS")
feed = dict(np.load(inputs)) if inputs else None
out = m.infer(feed)
peak = status("VmHWM")
print(json.dumps({"base": base, "after_read": after_read, "peak": peak}))
"""


def _sizes(xml, inputs):
    """f32 weight bytes, and the bytes of every op layer's output for one inference."""
    import numpy as np

    import irrun

    m = irrun.read_model(xml)
    weights = 0
    kind_of = {}
    for node in m.program.nodes.values():
        kind_of[node.layer.name] = "folded" if node.folded is not None else node.kind
        if node.kind == "const" and node.specs:
            spec = node.specs[0]
            count = int(np.prod([d.lo for d in spec.shape], dtype=np.int64))
            size = spec.etype.dtype.itemsize
            weights += count * (max(4, size) if spec.etype.dtype.kind == "f" else size)
    feed = dict(np.load(inputs)) if inputs else None
    everything = m.infer(feed, intermediate=True)
    activations = sum(a.nbytes for key, a in everything.items()
                      if kind_of.get(str(key).rsplit(":", 1)[0]) == "op")
    return weights, activations


def measure(xml, inputs=""):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _MEASURE, xml, inputs or ""], env=env,
                         capture_output=True, text=True, check=True)
    rss = json.loads(out.stdout.strip().splitlines()[-1])
    weights, activations = _sizes(xml, inputs)
    added = rss["peak"] - rss["base"]
    mib = 1 << 20
    print(f"model: {xml}")
    print(f"f32 weights {weights / mib:.1f} MiB, activations (all layer outputs) "
          f"{activations / mib:.1f} MiB")
    print(f"RSS: interpreter {rss['base'] / mib:.1f} MiB, after read_model "
          f"+{(rss['after_read'] - rss['base']) / mib:.1f} MiB, peak during the run "
          f"+{added / mib:.1f} MiB")
    print(f"peak / (weights + activations) = {added / (weights + activations):.2f} "
          "(target <= 2)")


def _build_resnet18(tmp):
    import numpy as np

    sys.path.insert(0, HERE)
    from models import _resnet18

    xml, feed, _ = _resnet18(tmp)
    inputs = os.path.join(tmp, "inputs.npz")
    np.savez(inputs, **feed)
    return xml, inputs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--xml", help="measure this model instead of building ResNet-18")
    ap.add_argument("--inputs", default="", help="its inputs (.npz); default: none")
    args = ap.parse_args(argv)
    if args.xml:
        measure(args.xml, args.inputs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        measure(*_build_resnet18(tmp))


if __name__ == "__main__":
    main()
