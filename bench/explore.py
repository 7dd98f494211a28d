"""A 10,000-layer LLM-shaped model in Model Explorer through `irrun explore`: seconds from
the command's start to the server answering and to the graph drawn in headless Chromium, and
the time to build its graph JSON. Needs the explore and test extras and Debian's chromium and
chromium-driver (as the tests).

    python bench/explore.py                 # 3 rounds, the best and the median of each
    python bench/explore.py --rounds 5 --blocks 200

The model is tests/test_explore.py's build_llm (200 decoder blocks of RMSNorm, attention and
a gated MLP with tiny weights: 10,000+ layers), built once in a temporary folder.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_explore as te  # noqa: E402
from irrun.explore import graph as xg  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=200)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(te.build_llm(Path(tmp) / "big.xml", blocks=args.blocks))
        program = xg.load(xml)
        layers = len(program.doc.layers)
        t0 = time.perf_counter()
        graphs = xg.to_json(program)
        build = time.perf_counter() - t0
        expected = te.shown_count(graphs)

        class Factory:
            def mktemp(self, name):
                return Path(tempfile.mkdtemp(dir=tmp, prefix=name))
        browser_gen = te.browser.__wrapped__(Factory())
        browser = next(browser_gen)
        served, drawn = [], []
        try:
            for _ in range(args.rounds):
                explorer = te.Explorer(xml)
                try:
                    browser.get(explorer.url)
                    te.wait_for_graph(browser, expected)
                    te.wait_drawn(browser)
                    drawn.append(time.perf_counter() - explorer.started)
                    served.append(explorer.served - explorer.started)
                finally:
                    explorer.stop()
        finally:
            browser.quit()
    print(f"{layers} layers; graph JSON built in {build:.2f} s; irrun explore to served: best "
          f"{min(served):.1f} s, median {statistics.median(served):.1f} s; to drawn in "
          f"Chromium: best {min(drawn):.1f} s, median {statistics.median(drawn):.1f} s "
          f"({args.rounds} rounds; load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
