"""irrun's thread policy: the one worker pool kernels share, and BLAS kept to one thread.

At most `config().threads` threads work at any moment (IRRUN_THREADS, `--threads`,
`read_model(threads=N)`; by default the CPUs this process may use). BLAS (OpenBLAS under
NumPy) never starts threads of its own during a run: `serial_blas()` sets it to one thread
for the run, through threadpoolctl. A product large enough to gain from more threads is
split by `matmul` over this pool instead, each part one single-threaded BLAS call. Two
pools never wait on each other (OpenBLAS's threads spin after each product, taking the core
the next layer's work needs), and the split adapts to a busy machine, where a static one does
not: see `parallel` and `threads_now`.

Fork-safe: a forked child (multiprocessing, Dask's process workers) would inherit a pool
whose threads do not exist in it and hang on its first job, so the pool belongs to the
process that made it and a child makes its own.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from irrun.config import config

_pool: tuple[int, int, ThreadPoolExecutor] | None = None
_lock = threading.Lock()


def workers(items: int, min_per_worker: int) -> int:
    """How many threads to split `items` units of work over: at most the configured thread
    count (IRRUN_THREADS), and none with less than `min_per_worker` units each; one while
    the machine is found busy (see `threads_now`)."""
    return max(1, min(threads_now(), items // max(1, min_per_worker)))


# ---------------------------------------------------------------- a busy machine

# While other processes keep every CPU busy, a split costs more than it gains: the pool
# thread that took a range is preempted for a scheduler slice (milliseconds) and the
# caller waits for it at the join, where one thread would have finished. `parallel` notices
# such a join (the wait far longer than a range takes), or a calling thread that was off the
# CPU for much of its own ranges (see _judge_join), and work then stays on the calling
# thread for a while; the first split after that probes again, and the time on one thread
# doubles while probes keep finding the machine busy.
SERIAL_AFTER_BUSY_JOIN = 0.05     # seconds on one thread after the first busy join
SERIAL_AFTER_BUSY_JOIN_MAX = 1.0
JOIN_SLACK = 0.0002               # seconds of wake-up and hand-over a join may take anyway
BUSY_CPU_SHARE = 0.75             # of its own ranges' time the calling thread runs, or busy
BUSY_MIN_SECONDS = 0.0005         # shorter ranges say little of the CPU share

_serial_until = 0.0
_serial_for = SERIAL_AFTER_BUSY_JOIN


def threads_now() -> int:
    """The threads a split may use now: `config().threads`, or 1 while a recent join found
    the machine busy."""
    threads = config().threads
    if threads > 1 and _serial_until and time.perf_counter() < _serial_until:
        return 1
    return threads


def _judge_join(own_seconds: float, own_ranges: int, waited: float,
                own_cpu: float | None = None) -> None:
    """After a split: the calling thread spent `own_seconds` on its `own_ranges` ranges (of
    which `own_cpu` seconds on a CPU), then `waited` for the pool threads. Ranges are taken
    one at a time in order, so on CPUs of its own a pool thread ends within about one range
    of the caller; a longer wait means it did not run (the machine is busy), and the next
    splits run on one thread. So does a calling thread that ran for less than
    BUSY_CPU_SHARE of its own ranges' time: it was preempted, or waited for the GIL behind a
    preempted pool thread, and every thread of the split ran at a fraction of a CPU (the
    split ends on time, each thread as slow as the other, and costs more than one thread)."""
    global _serial_until, _serial_for
    per_range = own_seconds / own_ranges if own_ranges else 0.0
    starved = (own_cpu is not None and own_seconds > BUSY_MIN_SECONDS
               and own_cpu < BUSY_CPU_SHARE * own_seconds)
    if starved or waited > 2 * per_range + JOIN_SLACK:
        _serial_until = time.perf_counter() + _serial_for
        _serial_for = min(2 * _serial_for, SERIAL_AFTER_BUSY_JOIN_MAX)
    else:
        _serial_until = 0.0
        _serial_for = SERIAL_AFTER_BUSY_JOIN


def _executor() -> ThreadPoolExecutor:
    global _pool
    size = max(1, config().threads - 1)
    with _lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[1] < size:
            # A larger thread count than the pool was made for (read_model(threads=8) after
            # a default run): a new pool; the old one's idle threads end with it.
            _pool = (os.getpid(), size, ThreadPoolExecutor(max_workers=size,
                                                           thread_name_prefix="irrun-kernel"))
        return _pool[2]


def parallel(fn, ranges: list[tuple]) -> list:
    """[fn(*r) for r in ranges], the calling thread and at most threads - 1 pool threads
    taking the ranges in order, each the next one not yet taken.

    The calling thread works too, and when it runs out of ranges it takes back the pool
    threads' turns that have not started (a busy machine may not run a woken thread for
    milliseconds): a run never waits for a thread that has not begun, only for ranges
    already under way. fn should release the GIL (NumPy on large arrays, a nogil numba
    loop) to gain anything.
    """
    threads = threads_now()
    if len(ranges) <= 1 or threads < 2:
        return [fn(*r) for r in ranges]
    results: list = [None] * len(ranges)
    taken = itertools.count()       # next() on a count is atomic under the GIL

    def take() -> int:
        done = 0
        while (i := next(taken)) < len(ranges):
            results[i] = fn(*ranges[i])
            done += 1
        return done

    helpers = min(threads, len(ranges)) - 1
    futures = [_executor().submit(take) for _ in range(helpers)]
    start, start_cpu = time.perf_counter(), time.thread_time()
    own = 0
    try:
        own = take()
    finally:
        own_end, own_cpu = time.perf_counter(), time.thread_time() - start_cpu
        for f in futures:
            f.cancel()          # not started: nothing left for it; started: runs to its end
        errors = [f.exception() for f in futures if not f.cancelled()]
        _judge_join(own_end - start, own, time.perf_counter() - own_end, own_cpu)
    for e in errors:
        if e is not None:
            raise e
    return results


def submit(fn, *args):
    """fn(*args) on the pool, now: its Future (fn should release the GIL, as for parallel)."""
    return _executor().submit(fn, *args)


def even_ranges(n: int, parts: int) -> list[tuple[int, int]]:
    """`parts` consecutive (lo, hi) ranges covering range(n), of about equal length."""
    cuts = [n * i // parts for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(cuts, cuts[1:]) if hi > lo]


def balanced_ranges(bounds, parts: int) -> list[tuple[int, int]]:
    """`parts` ranges (first, last) of items covering all of them, of about equal work, for
    items whose work is cumulative in `bounds` (items + 1 non-decreasing entries from 0:
    item i is bounds[i]..bounds[i+1]): each cut is at the start of the item holding the unit
    of work it aims at, so no item is split between two ranges."""
    import numpy as np

    bounds = np.asarray(bounds)
    items = len(bounds) - 1
    total = int(bounds[-1])
    aims = (np.arange(1, max(1, parts), dtype=np.int64) * total) // max(1, parts)
    aims = aims[aims > 0]       # (even_ranges drops the empty ranges of a small total)
    # bounds rises, so the cuts do: unique drops the repeats of an item holding several aims.
    cuts = np.searchsorted(bounds, aims, side="right") - 1
    cuts = np.unique(cuts[(cuts > 0) & (cuts < items)]).tolist()
    return list(itertools.pairwise([0, *cuts, items]))


# ---------------------------------------------------------------- BLAS

_blas_found: tuple = (-1, ())


def _blas_libraries() -> tuple:
    """threadpoolctl's handles on the BLAS libraries loaded now (NumPy's OpenBLAS, and SciPy's
    own when something imports SciPy later). Looking them up walks every loaded library
    (milliseconds), setting a count through a handle is one C call (a microsecond), so the
    lookup is redone only when a module was imported since the last one: a BLAS library
    arrives with the extension module that links it."""
    global _blas_found
    seen, libraries = _blas_found
    if seen == len(sys.modules):
        return libraries
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:       # not installed (a broken environment): leave BLAS as it is
        libraries = ()
    else:
        libraries = tuple(ThreadpoolController().select(user_api="blas").lib_controllers)
    _blas_found = (len(sys.modules), libraries)
    return libraries


_serial_depth = threading.local()


@contextlib.contextmanager
def serial_blas():
    """BLAS at one thread for the block (a load or a run), then as it was: the thread count
    a user gave NumPy outside irrun is theirs. Nested blocks and other threads' runs
    inside one keep it at one."""
    libraries = _blas_libraries()
    depth = getattr(_serial_depth, "n", 0)
    if depth or not libraries:
        _serial_depth.n = depth + 1
        try:
            yield
        finally:
            _serial_depth.n = depth
        return
    before = [lib.get_num_threads() for lib in libraries]
    for lib, n in zip(libraries, before):
        if n != 1:
            lib.set_num_threads(1)
    _serial_depth.n = 1
    try:
        yield
    finally:
        _serial_depth.n = 0
        for lib, n in zip(libraries, before):
            if n != 1:
                lib.set_num_threads(n)


# A product gains from more threads from about this many multiply-adds: below it, waking a
# pool thread (tens of microseconds on a VM) and moving the operands' halves between the
# cores' caches cost what the second core saves. On a 2-core AMD EPYC (AVX2), alone and
# warm: 17M multiply-adds 1.0x, 34M 1.1x, 134M 1.8x; inside RAFT-small, whose convolution
# products are 6M to 19M, the split ones were slower than one BLAS call.
PARALLEL_MATMUL_MACS = 16_000_000


def matmul(a, b):
    """np.matmul(a, b), split over the pool when both are f32 or f64 matrices (rank >= 2)
    and the product is large: over the output's leading batch dim, else its rows, else its
    columns, each part one BLAS call writing its slice of the output. Each output element is
    the same dot product; BLAS may sum a part's in another order than the whole's (it picks
    its kernel by size), so the last bits may differ from one np.matmul call."""
    import numpy as np

    if (a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype.kind != "f"
            or a.dtype.itemsize < 4):
        return np.matmul(a, b)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if math.prod(a.shape[:-2]) * math.prod(b.shape[:-2]) * m * k * n < 2 * PARALLEL_MATMUL_MACS:
        return np.matmul(a, b)      # at most that many multiply-adds: one call is best
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    macs = math.prod(batch) * m * k * n
    threads = threads_now()
    if threads < 2 or macs < 2 * PARALLEL_MATMUL_MACS:
        return np.matmul(a, b)
    out = np.empty(batch + (m, n), a.dtype)
    parts = min(2 * threads, macs // PARALLEL_MATMUL_MACS)
    if batch and batch[0] >= parts:
        # The leading batch dim: an operand with that dim (not broadcast) is cut with it.
        rank = len(batch) + 2
        cut_a = a.ndim == rank and a.shape[0] == batch[0]
        cut_b = b.ndim == rank and b.shape[0] == batch[0]

        def part(lo, hi):
            np.matmul(a[lo:hi] if cut_a else a, b[lo:hi] if cut_b else b, out=out[lo:hi])
        ranges = even_ranges(batch[0], parts)
    elif m >= parts:
        def part(lo, hi):
            np.matmul(a[..., lo:hi, :], b, out=out[..., lo:hi, :])
        ranges = even_ranges(m, parts)
    else:
        def part(lo, hi):
            np.matmul(a, b[..., lo:hi], out=out[..., lo:hi])
        ranges = even_ranges(n, parts)
    parallel(part, ranges)
    return out
