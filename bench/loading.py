"""Where loading time goes: read_model / validate of a long chain and of one huge Concat,
against lxml's own iterparse walking the same file.

    python bench/loading.py                       # 200,000-layer chain, 1,000,000-input Concat
    python bench/loading.py --chain 20000 --concat 100000      # smaller, for a smoke run
    python bench/loading.py --concat-of const     # the Concat fed by Consts instead
    python bench/loading.py --repeat 3            # best of 3 fresh processes for each
    python bench/loading.py --profile concat      # cProfile of one load, top 25 functions

Each file is generated in a temporary folder and loaded in a fresh child process (so the
peak RSS is that load's alone). The phases are timed by wrapping irrun.run.program's stages:
parse (the XML reader), graph (edges, order, unused layers), bind (nodes, ops, attributes),
infer (Const data, shape inference, folding) and validate (the whole-model checks and the
sorting of diagnostics, what is left of load_program; for read_model, the Model around it
too), in CPU seconds. Timing never goes into tests.

The floor is `iterparse`: lxml's etree.iterparse over the file doing nothing with the
elements but freeing each once its end tag is parsed (and the siblings before it), which is
the least a reader that never holds the whole tree does (freeing is faster than keeping the
tree). Each load is given as a ratio to it, of CPU time (what other jobs on the machine
disturb least) and of wall time; the target is 3. For scale, `libxml2 alone` is the same
parser checking the file with no Python callback at all (lxml's parser with a target that
only has close()): what parsing costs before any element reaches Python.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from chain import convert_chain_xml


def concat_xml(path: str, inputs: int, kind: str = "parameter") -> None:
    """`inputs` Parameters (or f32 Consts) of shape [1] feeding one Concat, and a Result."""
    out = ['<?xml version="1.0"?>\n<net name="concat" version="11">\n<layers>\n']
    if kind == "parameter":
        for i in range(inputs):
            out.append(f'<layer id="{i}" name="p{i}" type="Parameter" version="opset1">'
                       f'<data shape="1" element_type="f32"/><output><port id="0" '
                       f'precision="FP32" names="p{i}"><dim>1</dim></port></output></layer>\n')
    else:
        for i in range(inputs):
            out.append(f'<layer id="{i}" name="c{i}" type="Const" version="opset1">'
                       f'<data element_type="f32" shape="1" offset="{4 * (i % 1024)}" size="4"/>'
                       f'<output><port id="0" precision="FP32"><dim>1</dim></port></output>'
                       f'</layer>\n')
    ports = "".join(f'<port id="{i}" precision="FP32"><dim>1</dim></port>' for i in range(inputs))
    out.append(f'<layer id="{inputs}" name="cat" type="Concat" version="opset1">'
               f'<data axis="0"/><input>{ports}</input><output><port id="{inputs}" '
               f'precision="FP32" names="y"><dim>{inputs}</dim></port></output></layer>\n')
    out.append(f'<layer id="{inputs + 1}" name="y" type="Result" version="opset1"><input>'
               f'<port id="0" precision="FP32"><dim>{inputs}</dim></port></input></layer>\n')
    out.append("</layers>\n<edges>\n")
    for i in range(inputs):
        out.append(f'<edge from-layer="{i}" from-port="0" to-layer="{inputs}" to-port="{i}"/>\n')
    out.append(f'<edge from-layer="{inputs}" from-port="{inputs}" to-layer="{inputs + 1}" '
               'to-port="0"/>\n</edges>\n</net>\n')
    with open(path, "w") as f:
        f.write("".join(out))
    if kind != "parameter":
        import numpy as np
        np.arange(1024, dtype=np.float32).tofile(os.path.splitext(path)[0] + ".bin")


def _phases(xml: str, how: str) -> dict:
    """Load `xml` once (how: read_model | validate) with each stage wrapped in a timer."""
    t_import = time.perf_counter()
    import irrun
    from irrun.run import program as P
    t_import = time.perf_counter() - t_import

    spent: dict[str, float] = {}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - t0
        return wrapper

    P.read_document = timed("parse", P.read_document)
    P.build_graph = timed("graph", P.build_graph)
    P._prepare = timed("_prepare", P._prepare)
    P.infer_network = timed("infer", P.infer_network)
    t0, c0 = time.perf_counter(), time.process_time()
    model = None   # kept until the end: its teardown is not loading
    if how == "read_model":
        model = irrun.read_model(xml)
        count = None
    else:
        count = len(irrun.validate(xml))
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    # _prepare recurses into bodies; these files have none, so bind = _prepare - graph.
    phases = {"parse": spent["parse"], "graph": spent["graph"],
              "bind": spent["_prepare"] - spent["graph"], "infer": spent["infer"]}
    phases["validate"] = cpu - sum(phases.values())
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    del model
    return {"phases": phases, "total": total, "cpu": cpu, "import": t_import, "rss": rss,
            "diagnostics": count}


def _walk(xml: str) -> dict:
    """The floor: iterparse visiting every element and freeing it (see the docstring)."""
    from lxml import etree

    t0, c0 = time.perf_counter(), time.process_time()
    count = 0
    for _, el in etree.iterparse(xml, events=("end",)):
        count += 1
        el.clear()
        parent = el.getparent()
        if parent is not None:
            while el.getprevious() is not None:
                del parent[0]
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"total": total, "cpu": cpu, "rss": rss, "elements": count}


def _sax(xml: str) -> dict:
    """libxml2 parsing the file with nothing called back into Python."""
    from lxml import etree

    class Nothing:
        def close(self):
            return None

    t0, c0 = time.perf_counter(), time.process_time()
    etree.parse(xml, etree.XMLParser(target=Nothing()))
    return {"total": time.perf_counter() - t0, "cpu": time.process_time() - c0}


def _child(xml: str, how: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", how, xml], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _best(xml: str, how: str, repeat: int) -> dict:
    """The run of least CPU time of `repeat` fresh children."""
    return min((_child(xml, how) for _ in range(repeat)), key=lambda r: r["cpu"])


def _row(label: str, r: dict, floor: dict) -> str:
    p = r["phases"]
    cells = "  ".join(f"{k} {v:6.2f}" for k, v in p.items())   # CPU s
    extra = "" if r["diagnostics"] is None else f", {r['diagnostics']} diagnostics"
    return (f"{label:12s} {cells}  | total {r['total']:6.2f} s (CPU {r['cpu']:6.2f} s; "
            f"import irrun {r['import']:.2f} s), peak RSS {r['rss'] / 2**20:5.0f} MiB{extra}; "
            f"x iterparse: CPU {r['cpu'] / floor['cpu']:.2f}, wall "
            f"{r['total'] / floor['total']:.2f}")


def _profile(xml: str, how: str, top: int) -> None:
    import cProfile
    import pstats

    import irrun
    fn = irrun.read_model if how == "read_model" else irrun.validate
    prof = cProfile.Profile()
    prof.enable()
    fn(xml)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chain", type=int, default=200_000, help="Converts in the chain (0: skip)")
    ap.add_argument("--concat", type=int, default=1_000_000, help="Concat inputs (0: skip)")
    ap.add_argument("--concat-of", choices=("parameter", "const"), default="parameter")
    ap.add_argument("--profile", choices=("chain", "concat"),
                    help="cProfile one validate of this file instead of timing the phases")
    ap.add_argument("--repeat", type=int, default=1,
                    help="fresh processes per measurement; the one of least CPU time is shown")
    ap.add_argument("--child", nargs=2, metavar=("HOW", "XML"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        how, xml = args.child
        print(json.dumps(_walk(xml) if how == "iterparse" else _sax(xml) if how == "sax"
                         else _phases(xml, how)))
        return
    import platform

    import irrun
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    from lxml import etree
    print(f"irrun from {os.path.dirname(irrun.__file__)}, {cpu}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, lxml {etree.__version__} (libxml2 "
          f"{'.'.join(map(str, etree.LIBXML_VERSION))}); phases in CPU s, totals in wall s and "
          "CPU s (CPU time is what other jobs on the machine disturb least)")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        if args.chain:
            files.append(("chain", f"{args.chain}-layer Convert chain", convert_chain_xml, args.chain))
        if args.concat:
            files.append(("concat", f"Concat of {args.concat} {args.concat_of}s",
                          lambda p, n: concat_xml(p, n, args.concat_of), args.concat))
        for key, label, make, n in files:
            if args.profile and args.profile != key:
                continue
            xml = os.path.join(tmp, f"{key}.xml")
            t0 = time.perf_counter()
            make(xml, n)
            size = os.path.getsize(xml)
            print(f"{label}: {size / 2**20:.0f} MiB of XML, written in "
                  f"{time.perf_counter() - t0:.1f} s")
            if args.profile:
                _profile(xml, "validate", 25)
                continue
            sax = _best(xml, "sax", args.repeat)
            floor = _best(xml, "iterparse", args.repeat)
            print(f"  libxml2 alone total {sax['total']:6.2f} s (CPU {sax['cpu']:6.2f} s)")
            print(f"  iterparse    {floor['elements']} elements | total {floor['total']:6.2f} s "
                  f"(CPU {floor['cpu']:6.2f} s), peak RSS {floor['rss'] / 2**20:5.0f} MiB, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
            for how in ("read_model", "validate"):
                load = os.getloadavg()[0]
                print(_row(f"  {how}", _best(xml, how, args.repeat), floor)
                      + f", load {load:.1f}", flush=True)


if __name__ == "__main__":
    main()
