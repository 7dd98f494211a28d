"""Decompression ahead: a model's f16 -> f32 decompression Converts, computed on a pool
thread while the loader goes on inferring shapes.

Why: folding them is most of the time a compressed model takes to read (ResNet-18: 11.7M
weights, 47 MB of f32 to write, much of it page faults), while the loader's own work on
the layers (shape inference, the rest of folding) is Python on one core. So the loader
lists them before it starts (a Convert to f32 of a large f16 Const: the pattern
`convert_model` writes), hands them to one call of the compiled F16C loop on the pool
(opkit.f16c: one release of the GIL per half of them), and meets the results where they
are needed: a fold reading one waits for the batch, and so does the end of the load, whose
thread converts the second half itself if the pool thread has not started it yet.

Only where it pays and cannot cost more: the process already has the compiled loop (the
ski-rental rule in opkit.f16c decides when it is built; until then casts stay NumPy's, in
the fold as before) and the kit may use more than one thread. The outputs are the arrays
folding would have made (same shapes, values and lifetime); a Convert whose shape
inference fails leaves its output unused, freed with the batch at the end of the load.

Not every decompression Convert is computed: one whose every consumer reads halves itself
stays compressed (compressed_source; irrun.opkit.compressed says why), and neither the
batch nor folding writes its f32 values.
"""
from __future__ import annotations

import sys
import threading
import time

import numpy as np

from ..config import config
from ..errors import Collector, IrrunError
from ..ir.weights import check_alloc
from ..opkit.compressed import COMPRESSED_MIN_ELEMENTS
from ..opkit.numeric import COMPILED_CAST_ELEMENTS


class _Part:
    """Part of a batch, run once, by whichever thread claims it first."""

    def __init__(self, loops, pairs):
        self._loops, self._pairs = loops, pairs
        self._lock = threading.Lock()
        self._claimed = False
        self._finished = threading.Event()
        self.seconds = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        with self._lock:
            if self._claimed:
                return
            self._claimed = True
        t0 = time.perf_counter()
        try:
            self._loops.convert_many(self._pairs)
        except BaseException as e:       # re-raised by the thread that waits for it
            self.error = e
        finally:
            self.seconds = time.perf_counter() - t0
            self._finished.set()

    def join(self) -> None:
        self._finished.wait()
        if self.error is not None:
            raise self.error


class Ahead:
    """The decompression batch of one load: outputs by Convert layer id, being written.

    Two parts of about equal size: the pool thread starts the first at once and takes the
    second after it, unless the loader, done with its own work, has taken it by then."""

    def __init__(self, outputs: dict[str, np.ndarray], parts: list[_Part],
                 elements: dict[str, int]):
        self.outputs = outputs
        self._parts = parts
        self._elements = elements
        self.seconds = 0.0
        self._done = False

    def wait(self) -> None:
        """Until every output is written (re-raises what the batch raised)."""
        if not self._done:
            for part in reversed(self._parts):
                part.run()           # the part not started yet, on this thread
            for part in self._parts:
                part.join()
            self.seconds = sum(part.seconds for part in self._parts)
            self._done = True

    def share(self, lid: str) -> float:
        """The batch's time spent on layer `lid`'s output (by its share of the elements)."""
        self.wait()
        return self.seconds * self._elements[lid] / max(1, sum(self._elements.values()))


def is_decompression(node) -> bool:
    """A Convert to f32 of an f16 Const: the pattern `convert_model` writes after each
    compressed weight."""
    if (node.op is None or node.op.type != "Convert" or node.attrs is None
            or node.attrs.destination_type != "f32" or len(node.inputs) != 1
            or node.inputs[0] is None or getattr(node.op.impl, "NO_FOLD", False)):
        return False
    const = node.program.nodes[node.inputs[0][0]]
    return (const.kind == "const" and const.attrs is not None
            and const.attrs.element_type == "f16")


def compressed_source(node, source) -> np.ndarray | None:
    """`source`, the f16 Const behind decompression Convert `node`, when the Convert is
    to stay compressed (irrun.opkit.compressed): it is large, every layer it feeds takes
    it compressed at that input (its op's COMPRESSED_INPUTS), and this process runs the
    kernels that read halves (a CPU with F16C, and LLVM loaded already). Else None: it
    is folded.

    Why "loaded already": the kernels are compiled by LLVM, and loading it costs a process
    about 40 ms and 70 MB of its code pages in RSS (measured: 40 MB to import, 28 MB more
    at the first compile), more than ResNet-18's kept weights save (33 MB of f32, 5 ms of
    load). A process that has it (one that built the F16C cast, ran a compiled sparse
    loop, or imported numba) pays nothing more; a one-shot run stays as it was. The cost
    of the rule: the layers reading kept weights sum in another order, so a model loaded
    before LLVM and one loaded after can differ in the last bits (1e-6 relative) there;
    IRRUN_KEEP_COMPRESSED=1 (always, loading LLVM) or 0 (never) makes it the same in every
    process."""
    mode = config().keep_compressed
    if (mode == "0" or not isinstance(source, np.ndarray) or source.dtype != np.float16
            or source.size < COMPRESSED_MIN_ELEMENTS or not source.flags.c_contiguous
            or (mode == "auto" and sys.modules.get("llvmlite.binding") is None)):
        return None
    program = node.program
    consumers = program.graph.succ.get(node.id, {})
    if not consumers:
        return None
    for lid, edges in consumers.items():
        taker = program.nodes[lid]
        ports = getattr(taker.op.impl, "COMPRESSED_INPUTS", ()) if taker.op else ()
        if taker.attrs is None or any(position not in ports for position in edges):
            return None
    from ..opkit.llvm import host_has

    return source if host_has("f16c") else None


def start(program, load_const) -> Ahead | None:
    """Start the batch for `program`'s decompression Converts (None: none, or not worth
    it: see the module's docstring). load_const(node) is a Const node's value or None."""
    from ..opkit import f16c
    from ..opkit.pool import submit

    loops = f16c.loop()
    if loops is None or config().threads < 2:
        return None
    nodes = program.nodes
    pairs, outputs, elements = [], {}, {}
    for lid in program.order:
        node = nodes[lid]
        if not is_decompression(node):
            continue
        src = load_const(nodes[node.inputs[0][0]])
        if (not isinstance(src, np.ndarray) or src.dtype != np.float16
                or src.size < COMPILED_CAST_ELEMENTS or not src.flags.c_contiguous
                or compressed_source(node, src) is not None):
            continue
        try:
            check_alloc(src.shape, np.dtype(np.float32), "the decompressed Const")
        except IrrunError:
            continue          # folding refuses it the same way, and reports at run time
        out = np.empty(src.shape, np.float32)
        pairs.append((src, out))
        outputs[lid] = out
        elements[lid] = src.size
    if not pairs:
        return None
    total, half = sum(src.size for src, _ in pairs), 0
    cut = 0
    while cut < len(pairs) - 1 and 2 * (half + pairs[cut][0].size) <= total:
        half += pairs[cut][0].size
        cut += 1
    parts = [_Part(loops, pairs[:max(cut, 1)]), _Part(loops, pairs[max(cut, 1):])]

    def on_pool() -> None:
        for part in parts:
            part.run()
    submit(on_pool)
    return Ahead(outputs, parts, elements)


def quiet_loader(load_const, weights, bin_path):
    """load_const(node, weights, bin_path, diag) as start() calls it: its problems are not
    reported here (the loader meets the same Const again and reports them there)."""
    return lambda node: load_const(node, weights, bin_path, Collector(file=bin_path or ""))
