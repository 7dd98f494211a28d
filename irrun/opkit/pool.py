"""The one worker pool kernels share: a few threads for work that releases the GIL.

Fork-safe: a forked child (multiprocessing, Dask's process workers) would inherit a pool
whose threads do not exist in it and hang on its first job, so the pool belongs to the
process that made it and a child makes its own.
"""
from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from irrun.config import config

_pool: tuple[int, ThreadPoolExecutor] | None = None
_lock = threading.Lock()


def workers(items: int, min_per_worker: int) -> int:
    """How many threads to split `items` units of work over: at most the configured thread
    count (IRRUN_THREADS), and none with less than `min_per_worker` units each."""
    return max(1, min(config().threads, items // max(1, min_per_worker)))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(max_workers=max(1, config().threads - 1),
                                                     thread_name_prefix="irrun-kernel"))
        return _pool[1]


def parallel(fn, ranges: list[tuple]) -> list:
    """[fn(*r) for r in ranges], the calling thread running the first one, the pool the rest.

    fn should release the GIL (NumPy on large arrays, a nogil numba loop) to gain anything.
    """
    if len(ranges) <= 1:
        return [fn(*r) for r in ranges]
    futures = [_executor().submit(fn, *r) for r in ranges[1:]]
    try:
        first = fn(*ranges[0])
    finally:
        rest = [f.result() for f in futures]
    return [first, *rest]


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
