"""irrun's seed kernels, interpreter and loader beside OpenVINO and PyTorch, in one process.

    python bench/run.py            # full sizes (the issue's targets)
    python bench/run.py --quick    # smaller sizes, for a smoke run
    python bench/run.py --write bench/results.md
    python bench/run.py --only embedding --rounds 15    # some rows, more rounds

Every row times irrun through its public API (read_model + Model.infer, interpreter
included) and the other runtimes on the same data, taking turns (best_of_each). The time
columns are each side's best call; the ratio column is irrun / reference, the median over
the rounds of each round's best against the other's best in the same round (see ratio).
Timing never goes into tests: the machine is noisy, so this prints ratios instead.
OpenVINO's EmbeddingSegmentsSum is not timed: its CPU plugin scans every id once per
segment, minutes at these sizes; PyTorch's embedding_bag is the reference there.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc

import numpy as np

import irrun
from chain import convert_chain_xml

try:
    import openvino as ov
    import openvino.opset3 as ov3
    import openvino.opset4 as ov4
    import openvino.opset6 as ov6
    import openvino.opset8 as ov8
    import openvino.opset15 as ov15
    import openvino.opset16 as ov16
except ImportError:   # the test extra brings OpenVINO; without it irrun is timed alone
    ov = None
try:
    import torch
except ImportError:
    torch = None


def best_of(fn, repeat: int) -> float:
    """The best wall time of `repeat` calls (after one warm-up call)."""
    return best_of_each([fn], repeat)[0]


ROUNDS = 7


class Timing(float):
    """A best wall time in seconds that also keeps each round's best (`rounds`)."""
    rounds: tuple = ()


def ratio(a: float, b: float) -> float:
    """a / b. For two Timings from one best_of_each call: the median over the rounds of
    a's best in a round against b's best in the same round. This VM's speed moves by 2x
    over seconds, and the ratio of the overall bests compares two different moments, the
    best one each side happened to get: EmbeddingBagOffsetsSum-3 and EmbeddingBagOffsets-15
    (one kernel, the same data) came out at 1.29x and 1.08x PyTorch in one run. Round by
    round, both sides see the same moment; the median drops the rounds that a slow spell
    split."""
    ra, rb = getattr(a, "rounds", ()), getattr(b, "rounds", ())
    if ra and len(ra) == len(rb):
        return statistics.median(x / y for x, y in zip(ra, rb))
    return a / b


def best_of_each(fns: list, repeat: int, rounds: int | None = None) -> list[Timing]:
    """The best wall time of each fn, timed side by side: `rounds` rounds in which each fn
    in turn makes `repeat` calls (after one warm-up call each).

    Taking turns, rather than timing one fn and then the other, lets a machine that speeds
    up and slows down during the run (a shared VM does, by 2x over minutes) weigh on all of
    them alike. A pause after each fn's turn lets its worker threads go idle before the
    next one starts: PyTorch's OpenMP threads spin for milliseconds after a call, on the
    cores the next fn would use.
    """
    rounds = rounds or ROUNDS
    for fn in fns:
        fn()
    per_round = [[] for _ in fns]
    for r in range(rounds):
        # Every other round in the reverse order, so that no fn always follows the same one.
        for k in (range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))):
            best = float("inf")
            for _ in range(repeat):
                t0 = time.perf_counter()
                fns[k]()
                best = min(best, time.perf_counter() - t0)
            per_round[k].append(best)
            time.sleep(0.05)
    timings = []
    for bests in per_round:
        t = Timing(min(bests))
        t.rounds = tuple(bests)
        timings.append(t)
    return timings


def peak_extra_bytes(fn) -> int:
    """Peak memory NumPy allocated during fn (tracemalloc sees NumPy's buffers), after one
    call to warm up: a compiled loop's first call loads (or compiles) it, which is not
    what this measures."""
    fn()
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - base


def on_cache_lines(a: np.ndarray, past: int = 0) -> np.ndarray:
    """A copy of `a` whose data starts `past` bytes after a 64-byte boundary. PyTorch's and
    OpenVINO's allocators put a tensor on one (past=0); NumPy's large arrays start where
    malloc put them, often 16 bytes past one, and then a 128-byte f16 row spans three cache
    lines instead of two (measured on an AVX2 machine, one table: irrun's loop took 1.47x
    as long that way, PyTorch's 1.19x). The embedding rows give both runtimes this one
    buffer (PyTorch through from_numpy, no copy), on a boundary; one row per table type
    repeats a case 16 bytes past one."""
    raw = np.empty(a.nbytes + 128, np.uint8)
    skip = (past - raw.ctypes.data) % 64
    out = raw[skip:skip + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def save(model, directory, name) -> str:
    path = os.path.join(directory, name + ".xml")
    ov.save_model(model, path, compress_to_fp16=False)
    return path


def ov_callable(xml: str, feed: dict):
    compiled = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    return lambda: request.infer(feed)


def same_outputs(model, feed, ov_run) -> str:
    """'' when irrun and OpenVINO agree on this data, else a loud note for the table:
    a timing of a wrong answer means nothing."""
    ours = list(model.infer(feed).values())
    theirs = list(ov_run().values())
    for a, b in zip(ours, theirs):
        if a.shape != b.shape or not np.array_equal(a.astype(np.int64), np.asarray(b).astype(np.int64)):
            return "RESULTS DIFFER FROM OPENVINO"
    return ""


class Table:
    def __init__(self):
        self.rows = []

    def add(self, case, irrun_s, ov_s=None, torch_s=None, target=None, mem=None):
        self.rows.append((case, irrun_s, ov_s, torch_s, target, mem))
        print(self.format_row(self.rows[-1]), flush=True)

    @staticmethod
    def _t(s):
        return "—" if s is None else f"{s * 1e3:.1f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} µs"

    def format_row(self, row):
        case, ir, o, t, target, mem = row
        ratios = []
        if o is not None:
            ratios.append(f"{ratio(ir, o):.2f}× OV")
        if t is not None:
            ratios.append(f"{ratio(ir, t):.2f}× torch")
        return (f"| {case} | {self._t(ir)} | {self._t(o)} | {self._t(t)} | "
                f"{', '.join(ratios) or '—'} | {target or '—'} | {mem or '—'} |")

    def markdown(self):
        head = ("| case | irrun | OpenVINO CPU | PyTorch | ratio | target | peak extra memory |\n"
                "|---|---|---|---|---|---|---|")
        return head + "\n" + "\n".join(self.format_row(r) for r in self.rows)


# ------------------------------------------------------------------ the seed ops

def bench_ess(table, d, n, segments, num_emb, table_type, index_type, repeat):
    rng = np.random.default_rng(0)
    np_t = {"f32": np.float32, "f16": np.float16}[table_type]
    np_i = {"i32": np.int32, "i64": np.int64}[index_type]
    emb = on_cache_lines(rng.standard_normal((num_emb, d)).astype(np_t))
    indices = rng.integers(0, num_emb, n).astype(np_i)
    seg = np.sort(rng.integers(0, segments, n)).astype(np_i)
    weights = rng.random(n).astype(np_t)
    feed = {"emb": emb, "indices": indices, "segment_ids": seg, "weights": weights}
    with tempfile.TemporaryDirectory() as tmp:
        t_ov, t_i = getattr(ov.Type, table_type), getattr(ov.Type, index_type)
        p = [ov8.parameter([num_emb, d], t_ov, name="emb"),
             ov8.parameter([n], t_i, name="indices"),
             ov8.parameter([n], t_i, name="segment_ids"),
             ov8.parameter([n], t_ov, name="weights")]
        num = ov8.constant(np.array(segments, np_i))
        default = ov8.constant(np.array(0, np_i))
        out = ov3.embedding_segments_sum(p[0], p[1], p[2], num, default, p[3])
        xml = save(ov.Model([ov8.result(out)], p, "ess"), tmp, "ess")
        model = irrun.read_model(xml)

        def run_irrun():
            return model.infer(feed)
        run_irrun()                 # compiles the loop (or loads it from numba's cache)
        mem = peak_extra_bytes(run_irrun)
        ours = next(iter(run_irrun().values())).astype(np.float32)
        out_bytes = segments * d * emb.itemsize
        budget = out_bytes + 24 * n + (64 << 20)
        mem_text = f"{mem / 2**20:.0f} MiB (budget {budget / 2**20:.0f} MiB)"
        if torch is None:
            ir, t_torch = best_of(run_irrun, repeat), None
        else:
            te = torch.from_numpy(emb)       # the same buffer as irrun's
            ti = torch.from_numpy(indices)
            tw = torch.from_numpy(weights)
            # embedding_bag takes bag offsets: segment s starts at the first id >= s.
            offsets = torch.from_numpy(np.searchsorted(seg, np.arange(segments)).astype(np_i))

            def run_torch():
                return torch.nn.functional.embedding_bag(ti, te, offsets, mode="sum",
                                                         per_sample_weights=tw)
            ir, t_torch = best_of_each([run_irrun, run_torch], repeat)
            # Same answer, or the timing means nothing (empty bags are zeros in torch and
            # emb[0] in the model: compare the non-empty segments only).
            theirs = run_torch().float().numpy()
            filled = np.isin(np.arange(segments), seg)
            tol = 1e-2 if table_type == "f16" else 1e-4
            if not np.allclose(ours[filled], theirs[filled], rtol=tol, atol=tol * 10):
                mem_text += " — RESULTS DIFFER FROM TORCH"
    table.add(f"EmbeddingSegmentsSum {n // 1000}k lookups, d={d}, {segments // 1000}k segments, "
              f"{table_type} table, {index_type} ids, weights", ir, None, t_torch,
              "≤ 1.0× torch", mem_text)


def bench_bucketize(table, n, nb, repeat):
    rng = np.random.default_rng(1)
    data = rng.standard_normal(n).astype(np.float32)
    bounds = np.sort(rng.standard_normal(nb)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        p = ov8.parameter([n], ov.Type.f32, name="data")
        out = ov3.bucketize(p, ov8.constant(bounds), output_type="i64", with_right_bound=True)
        xml = save(ov.Model([ov8.result(out)], [p], "b"), tmp, "b")
        model = irrun.read_model(xml)
        feed = {"data": data}
        run_ov = ov_callable(xml, feed)
        check = same_outputs(model, feed, run_ov)
        fns = [lambda: model.infer(feed), run_ov]
        if torch is not None:
            td, tb = torch.from_numpy(data), torch.from_numpy(bounds)
            fns.append(lambda: torch.bucketize(td, tb))
        ir, t_ov, *t_torch = best_of_each(fns, repeat)
    t_torch = t_torch[0] if t_torch else None
    table.add(f"Bucketize {n / 1e6:g}M f32, {nb} boundaries", ir, t_ov, t_torch, "≤ 1.0× OV",
              check or None)


def bench_ctc(table, N, T, C, repeat):
    rng = np.random.default_rng(2)
    data = rng.standard_normal((N, T, C)).astype(np.float32)
    lengths = rng.integers(T // 2, T + 1, N).astype(np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        p = [ov8.parameter([N, T, C], ov.Type.f32, name="data"),
             ov8.parameter([N], ov.Type.i32, name="seq_len")]
        out = ov6.ctc_greedy_decoder_seq_len(p[0], p[1], merge_repeated=True)
        xml = save(ov.Model([ov8.result(out.output(0)), ov8.result(out.output(1))], p, "c"),
                   tmp, "c")
        model = irrun.read_model(xml)
        feed = {"data": data, "seq_len": lengths}
        run_ov = ov_callable(xml, feed)
        check = same_outputs(model, feed, run_ov)
        ir, t_ov = best_of_each([lambda: model.infer(feed), run_ov], repeat)
    table.add(f"CTCGreedyDecoderSeqLen {N}×{T}×{C} f32", ir, t_ov, None, "≤ 1.0× OV",
              check or None)


def _close(ours, theirs, tol) -> bool:
    return bool(np.allclose(np.asarray(ours, np.float32), np.asarray(theirs, np.float32),
                            rtol=tol, atol=tol * 10))


def bench_bags(table, op, reduction, d, n, bags, num_emb, table_type, repeat, with_ov=True,
               past=0):
    """EmbeddingBagOffsetsSum-3 / EmbeddingBagOffsets-15 / EmbeddingBagPackedSum-3 against
    torch.nn.functional.embedding_bag on the same lookups (the packed op: n // bags a bag),
    both reading one table, `past` bytes after a 64-byte boundary (on_cache_lines)."""
    rng = np.random.default_rng(0)
    np_t = {"f32": np.float32, "f16": np.float16}[table_type]
    emb = on_cache_lines(rng.standard_normal((num_emb, d)).astype(np_t), past)
    weighted = reduction == "sum"
    packed = op == "EmbeddingBagPackedSum"
    if packed:
        indices = rng.integers(0, num_emb, (bags, n // bags)).astype(np.int32)
        weights = rng.random((bags, n // bags)).astype(np_t)
    else:
        indices = rng.integers(0, num_emb, n).astype(np.int32)
        offsets = np.sort(rng.integers(0, n, bags)).astype(np.int32)
        offsets[0] = 0
        weights = rng.random(n).astype(np_t)
    with tempfile.TemporaryDirectory() as tmp:
        t_ov = getattr(ov.Type, table_type)
        p = [ov8.parameter(list(emb.shape), t_ov, name="emb"),
             ov8.parameter(list(indices.shape), ov.Type.i32, name="indices")]
        feed = {"emb": emb, "indices": indices}
        if not packed:
            p.append(ov8.parameter([bags], ov.Type.i32, name="offsets"))
            feed["offsets"] = offsets
        if weighted:
            p.append(ov8.parameter(list(weights.shape), t_ov, name="weights"))
            feed["weights"] = weights
        if op == "EmbeddingBagOffsetsSum":
            out = ov3.embedding_bag_offsets_sum(p[0], p[1], p[2], ov8.constant(np.array(-1, np.int32)), p[3])
        elif op == "EmbeddingBagOffsets":
            out = ov15.embedding_bag_offsets(p[0], p[1], p[2], ov8.constant(np.array(-1, np.int32)),
                                             p[3] if weighted else None, reduction=reduction)
        else:
            out = ov3.embedding_bag_packed_sum(p[0], p[1], p[2])
        xml = save(ov.Model([ov8.result(out)], p, "bag"), tmp, "bag")
        model = irrun.read_model(xml)

        def run_irrun():
            return model.infer(feed)
        run_irrun()
        mem = peak_extra_bytes(run_irrun)
        ours = next(iter(run_irrun().values()))
        out_bytes = bags * d * emb.itemsize
        mem_text = (f"{mem / 2**20:.0f} MiB (output {out_bytes / 2**20:.0f} MiB; [n, d] "
                    f"{n * d * emb.itemsize / 2**20:.0f} MiB)")
        fns = [run_irrun]
        te = torch.from_numpy(emb)                      # the same buffer as irrun's
        ti = torch.from_numpy(indices.astype(np.int64) if packed else indices)
        to = None if packed else torch.from_numpy(offsets)
        tw = torch.from_numpy(weights) if weighted else None

        def run_torch():
            return torch.nn.functional.embedding_bag(ti, te, to, mode=reduction,
                                                     per_sample_weights=tw)
        fns.append(run_torch)
        run_ov = ov_callable(xml, feed) if with_ov else None
        if run_ov is not None:
            fns.append(run_ov)
        times = best_of_each(fns, repeat)
        tol = 1e-2 if table_type == "f16" else 1e-4
        if not _close(ours, run_torch().float().numpy(), tol):
            mem_text += " — RESULTS DIFFER FROM TORCH"
        if run_ov is not None and not _close(ours, next(iter(run_ov().values())), tol):
            mem_text += " — RESULTS DIFFER FROM OPENVINO"
    what = f"{reduction}, weights" if weighted else reduction
    if past:
        what += f", table {past} bytes past a cache line"
    table.add(f"{op} {n // 1000}k lookups, d={d}, {bags // 1000}k bags, {table_type} table, {what}",
              times[0], times[2] if run_ov is not None else None, times[1], "≤ 1.0× torch", mem_text)


def bench_segment_max(table, n, d, segments, repeat):
    rng = np.random.default_rng(3)
    data = rng.standard_normal((n, d)).astype(np.float32)
    ids = np.sort(rng.integers(0, segments, n)).astype(np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        p = [ov8.parameter([n, d], ov.Type.f32, name="data"), ov8.parameter([n], ov.Type.i32, name="ids")]
        out = ov16.segment_max(p[0], p[1], ov8.constant(np.array(segments, np.int32)), fill_mode="ZERO")
        xml = save(ov.Model([ov8.result(out)], p, "sm"), tmp, "sm")
        model = irrun.read_model(xml)
        feed = {"data": data, "ids": ids}
        run_ov = ov_callable(xml, feed)
        check = same_outputs(model, feed, run_ov)
        td = torch.from_numpy(data)
        lengths = torch.from_numpy(np.bincount(ids, minlength=segments).astype(np.int64))
        run_torch = lambda: torch.segment_reduce(td, "max", lengths=lengths, unsafe=True)
        mem = peak_extra_bytes(lambda: model.infer(feed))
        ir, t_torch, t_ov = best_of_each([lambda: model.infer(feed), run_torch, run_ov], repeat)
        ours = next(iter(model.infer(feed).values()))
        theirs = run_torch().numpy()
        filled = lengths.numpy() > 0
        if not np.array_equal(ours[filled], theirs[filled]):
            check = (check + " — " if check else "") + "RESULTS DIFFER FROM TORCH"
    table.add(f"SegmentMax [{n // 1000}k, {d}] f32, {segments // 1000}k segments", ir, t_ov,
              t_torch, "≤ 1.0× torch", f"{mem / 2**20:.0f} MiB" + (f" {check}" if check else ""))


def bench_search_sorted(table, rows, m, k, repeat, with_ov=True, target="≤ 1.0× torch"):
    rng = np.random.default_rng(4)
    seq = np.sort(rng.standard_normal((rows, m)), axis=1).astype(np.float32)
    values = rng.standard_normal((rows, k)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        p = [ov8.parameter([rows, m], ov.Type.f32, name="seq"),
             ov8.parameter([rows, k], ov.Type.f32, name="values")]
        out = ov15.search_sorted(p[0], p[1], right_mode=False)
        xml = save(ov.Model([ov8.result(out)], p, "ss"), tmp, "ss")
        model = irrun.read_model(xml)
        feed = {"seq": seq, "values": values}
        # OpenVINO's CPU plugin takes ~50 s at [256, 1024] x [256, 400]: timed on a smaller case.
        run_ov = ov_callable(xml, feed) if with_ov else None
        check = same_outputs(model, feed, run_ov) if with_ov else ""
        ts, tv = torch.from_numpy(seq), torch.from_numpy(values)
        run_torch = lambda: torch.searchsorted(ts, tv)
        ir, t_torch, *t_ov = best_of_each([lambda: model.infer(feed), run_torch]
                                          + ([run_ov] if with_ov else []), repeat)
        t_ov = t_ov[0] if t_ov else None
        if not np.array_equal(next(iter(model.infer(feed).values())), run_torch().numpy()):
            check = (check + " — " if check else "") + "RESULTS DIFFER FROM TORCH"
    table.add(f"SearchSorted [{rows}, {m}] f32, values [{rows}, {k}]", ir, t_ov, t_torch,
              target, check or None)


def bench_ctc_loss(table, N, T, C, L, repeat):
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((N, T, C)).astype(np.float32)
    logit_len = rng.integers(T * 3 // 4, T + 1, N).astype(np.int32)
    labels = rng.integers(0, C - 1, (N, T)).astype(np.int32)
    label_len = rng.integers(L // 2, L + 1, N).astype(np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        p = [ov8.parameter([N, T, C], ov.Type.f32, name="logits"),
             ov8.parameter([N], ov.Type.i32, name="logit_len"),
             ov8.parameter([N, T], ov.Type.i32, name="labels"),
             ov8.parameter([N], ov.Type.i32, name="label_len")]
        out = ov4.ctc_loss(*p)
        xml = save(ov.Model([ov8.result(out)], p, "ctc"), tmp, "ctc")
        model = irrun.read_model(xml)
        feed = {"logits": logits, "logit_len": logit_len, "labels": labels, "label_len": label_len}
        run_ov = ov_callable(xml, feed)
        tl = torch.from_numpy(logits)
        targs = [torch.from_numpy(labels.astype(np.int64)), torch.from_numpy(logit_len.astype(np.int64)),
                 torch.from_numpy(label_len.astype(np.int64))]

        def run_torch():   # torch takes log-probabilities [T, N, C]: its log_softmax counts
            lp = torch.log_softmax(tl, 2).transpose(0, 1)
            return torch.nn.functional.ctc_loss(lp, targs[0], targs[1], targs[2], blank=C - 1,
                                                reduction="none")
        mem = peak_extra_bytes(lambda: model.infer(feed))
        ir, t_torch, t_ov = best_of_each([lambda: model.infer(feed), run_torch, run_ov], repeat)
        ours = next(iter(model.infer(feed).values()))
        note = f"{mem / 2**20:.0f} MiB"
        if not _close(ours, run_torch().numpy(), 1e-4):
            note += " — RESULTS DIFFER FROM TORCH"
        if not _close(ours, next(iter(run_ov().values())), 1e-4):
            note += " — RESULTS DIFFER FROM OPENVINO"
    table.add(f"CTCLoss N={N}, T={T}, C={C}, labels ≤ {L} f32", ir, t_ov, t_torch,
              "≤ 1.0× torch", note)


# ------------------------------------------------------------------ interpreter and loader

def bench_dispatch(table, layers, repeat):
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "chain.xml")
        convert_chain_xml(xml, layers)
        model = irrun.read_model(xml)
        feed = {"x": np.ones(1, np.float32)}
        ir = best_of(lambda: model.infer(feed), repeat)
    per_layer = ir / (layers + 2)
    table.add(f"interpreter: {layers}-layer chain of Converts on [1] "
              f"({per_layer * 1e6:.1f} µs per layer)", ir, None, None, "≤ 2 µs per layer")


def bench_loading(table, layers, with_ov):
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "chain.xml")
        convert_chain_xml(xml, layers)
        t0 = time.perf_counter()
        irrun.read_model(xml)
        ir = time.perf_counter() - t0
        t_ov = None
        if with_ov and ov is not None:
            t0 = time.perf_counter()
            core = ov.Core()
            core.compile_model(core.read_model(xml), "CPU")
            t_ov = time.perf_counter() - t0
    table.add(f"loading: read_model of a {layers}-layer IR file", ir, t_ov, None, "≤ 0.1× OV")


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def bench_mmap_rss(table, mib):
    with tempfile.TemporaryDirectory() as tmp:
        w = np.zeros((mib, 1 << 18), np.float32)   # mib MiB of weights
        p = ov8.parameter([1], ov.Type.f32, name="x")
        g = ov8.gather(ov8.constant(w), ov8.constant(np.array([0], np.int64)),
                       ov8.constant(np.array(0, np.int64)))
        xml = save(ov.Model([ov8.result(g), ov8.result(p)], [p], "big"), tmp, "big")
        del w
        gc.collect()
        before = _rss()
        t0 = time.perf_counter()
        model = irrun.read_model(xml)
        took = time.perf_counter() - t0
        grew = _rss() - before
        table.add(f"memory map: read_model with a {mib} MiB .bin", took, None, None,
                  "RSS does not grow with .bin", f"RSS +{grew / 2**20:.1f} MiB")
        del model


GROUPS = ("embedding", "segment_max", "search_sorted", "ctc_loss", "bucketize", "ctc_greedy",
          "interpreter", "loading")


def main(argv=None):
    global ROUNDS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--repeat", type=int, default=3, help="calls per fn per round")
    ap.add_argument("--write", help="also write the table (with the date) to this file")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="rounds of turns per row")
    ap.add_argument("--only", help="comma-separated groups of rows to run (default all): "
                                   + ", ".join(GROUPS))
    args = ap.parse_args(argv)
    if ov is None:
        sys.exit("bench/run.py needs OpenVINO: pip install -e '.[test]'")
    only = set(GROUPS) if not args.only else set(args.only.split(","))
    if only - set(GROUPS):
        sys.exit(f"--only: no group {', '.join(sorted(only - set(GROUPS)))}; "
                 f"the groups are {', '.join(GROUPS)}")
    ROUNDS = args.rounds
    q = args.quick
    print(f"irrun {irrun.__version__}, OpenVINO {ov.__version__}, "
          f"PyTorch {torch.__version__ if torch else 'not installed'}, NumPy {np.__version__}, "
          f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
          f"{args.rounds} rounds")
    table = Table()
    print(table.markdown().split("\n", 2)[0] + "\n" + table.markdown().split("\n", 2)[1])
    n, seg = (100_000, 10_000) if q else (1_000_000, 100_000)
    num_emb = 200_000 if not q else 20_000
    if "embedding" in only:
        for tt, it in (("f32", "i32"), ("f32", "i64"), ("f16", "i64")):
            bench_ess(table, 64, n, seg, num_emb, tt, it, args.repeat)
        if torch is not None:
            for op, reduction in (("EmbeddingBagOffsetsSum", "sum"),
                                  ("EmbeddingBagOffsets", "sum"),
                                  ("EmbeddingBagOffsets", "mean"),
                                  ("EmbeddingBagPackedSum", "sum")):
                for tt in ("f32", "f16"):
                    bench_bags(table, op, reduction, 64, n, seg, num_emb, tt, args.repeat)
            for tt in ("f32", "f16"):
                bench_bags(table, "EmbeddingBagOffsetsSum", "sum", 64, n, seg, num_emb, tt,
                           args.repeat, with_ov=False, past=16)
    if torch is not None:
        if "segment_max" in only:
            bench_segment_max(table, n, 16, seg, args.repeat)
        if "search_sorted" in only:
            bench_search_sorted(table, 256, 1024, 400 if q else 4096, args.repeat, with_ov=False)
            bench_search_sorted(table, 16, 1024, 64, args.repeat, target="OpenVINO's ratio")
        if "ctc_loss" in only:
            bench_ctc_loss(table, 8 if q else 32, 500, 100, 100, args.repeat)
    if "bucketize" in only:
        bench_bucketize(table, 400_000 if q else 4_000_000, 1000, args.repeat)
    if "ctc_greedy" in only:
        bench_ctc(table, 8 if q else 64, 500, 1000, args.repeat)
    if "interpreter" in only:
        bench_dispatch(table, 1000, args.repeat)
    if "loading" in only:
        bench_loading(table, 2000 if q else 10_000, with_ov=True)
        bench_mmap_rss(table, 64 if q else 512)
    if args.write:
        stamp = datetime.date.today().isoformat()
        with open(args.write, "w") as f:
            f.write(f"# Benchmark results, {stamp}\n\n`python bench/run.py` on "
                    f"{os.cpu_count()} cores ({platform.machine()}), irrun {irrun.__version__}, "
                    f"OpenVINO {ov.__version__}, PyTorch "
                    f"{torch.__version__ if torch else 'not installed'}, NumPy {np.__version__}."
                    f"\n\n{table.markdown()}\n")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
