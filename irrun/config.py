"""irrun's settings, each read from its environment variable in this one place.

    IRRUN_MAX_BYTES   the memory budget: the largest tensor irrun allocates (`1000000`, `512M`,
                      `4G`); default half of the machine's (or the cgroup's) memory
    IRRUN_THREADS     the most threads irrun runs at once, BLAS's included (default: the CPUs
                      this process may use: its affinity mask and its cgroup's CPU quota)
    IRRUN_FOLD        `0` turns off constant folding at load (irrun.run.program); default `1`
    IRRUN_REUSE_MEMORY  `0` leaves glibc's malloc settings alone (irrun.ir.weights.reuse_memory);
                      default `1`
    IRRUN_KEEP_COMPRESSED  `auto` (default): large f16 convolution weights stay compressed in
                      a process that has LLVM loaded already; `1` always (loading LLVM);
                      `0` never (irrun.run.decompress.compressed_source)

A value is parsed once and kept for as long as the variable keeps that text (tests and
long-lived processes may change it); a bad value is one ConfigError, which the CLI reports
as a usage error (exit status 2) before any model is read.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import math
import os
from dataclasses import dataclass

from .errors import ConfigError

_SUFFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

@dataclass(frozen=True)
class Config:
    max_bytes: int     # the largest tensor irrun may allocate
    threads: int       # the most threads at work at once (irrun.opkit.pool)
    fold: bool = True  # fold all-Const subgraphs when a model is read
    reuse_memory: bool = True   # keep freed run buffers for the next allocations
    keep_compressed: str = "auto"   # "auto", "1" or "0": see compressed_source


@functools.cache
def _memory_available() -> int:
    """Physical memory, or the cgroup's limit when a container sets a lower one (read once)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
            if text.isdigit() and 0 < int(text) < total:
                total = int(text)
        except OSError:
            pass
    return total


@functools.cache
def usable_cpus() -> int:
    """The CPUs this process may use: its affinity mask, and no more than its cgroup's CPU
    quota (read once)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = None
    for path in ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        try:
            with open(path) as f:
                text = f.read()
            if path.endswith("cfs_quota_us"):          # cgroup v1: quota and period apart
                with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
                    text += " " + f.read()
        except OSError:
            continue
        quota = quota_cpus(text)
        break
    return max(1, min(cpus or 1, quota or cpus or 1))


def quota_cpus(text: str) -> int | None:
    """The whole CPUs a cgroup CPU quota allows ("QUOTA PERIOD" in microseconds, as
    cpu.max holds them; "max" or -1 for none): a container given 1.5 CPUs gets 1, since a
    second thread would only be throttled; at least 1."""
    fields = text.split()
    if len(fields) < 2 or not fields[0].isdigit() or not fields[1].isdigit():
        return None
    quota, period = int(fields[0]), int(fields[1])
    return max(1, quota // period) if period > 0 else None


def parse_bytes(text: str) -> int:
    """`1000000`, `512M`, `4G`, `1.5GiB` -> bytes; ValueError for anything else."""
    low = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = low[-1:] if low[-1:] in _SUFFIXES else ""
    try:
        value = float(low[:len(low) - len(unit)]) * _SUFFIXES[unit]
    except ValueError:
        value = -1.0
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(text)
    return int(value)


@functools.lru_cache(maxsize=8)
def _parse(max_bytes_text: str, threads_text: str, fold_text: str = "",
           reuse_text: str = "", keep_text: str = "") -> Config:
    if max_bytes_text:
        try:
            max_bytes = parse_bytes(max_bytes_text)
        except ValueError:
            raise ConfigError(f"IRRUN_MAX_BYTES='{max_bytes_text}' is not a byte count "
                              "(examples: 1000000, 512M, 4G)") from None
    else:
        max_bytes = _memory_available() // 2
    if threads_text:
        if not threads_text.isdigit() or int(threads_text) < 1:
            raise ConfigError(f"IRRUN_THREADS='{threads_text}' is not a thread count "
                              "(a whole number from 1)")
        threads = int(threads_text)
    else:
        threads = usable_cpus()
    for name, text in (("IRRUN_FOLD", fold_text), ("IRRUN_REUSE_MEMORY", reuse_text)):
        if text not in ("", "0", "1"):
            raise ConfigError(f"{name}='{text}' is not 0 or 1")
    if keep_text not in ("", "auto", "0", "1"):
        raise ConfigError(f"IRRUN_KEEP_COMPRESSED='{keep_text}' is not auto, 0 or 1")
    return Config(max_bytes, threads, fold_text != "0", reuse_text != "0", keep_text or "auto")


_PINNED: contextvars.ContextVar = contextvars.ContextVar("irrun_config", default=None)


_NAMES = ("IRRUN_MAX_BYTES", "IRRUN_THREADS", "IRRUN_FOLD", "IRRUN_REUSE_MEMORY",
          "IRRUN_KEEP_COMPRESSED")
# CPython's os.environ keeps the variables in a dict of encoded keys and values (`_data`):
# reading the five from it skips as many encode and decode calls through the mapping,
# 4 us of every load and run (a one-layer model's run takes 70).
_ENCODE = getattr(os.environ, "encodekey", None)
_KEYS = tuple(_ENCODE(n) for n in _NAMES) if _ENCODE is not None else ()


def config() -> Config:
    """The settings in force (parsed once per distinct environment text; during a run, the
    ones read when it started: see pinned)."""
    pinned = _PINNED.get()
    if pinned is not None:
        return pinned
    env = os.environ
    data = getattr(env, "_data", None)
    if type(data) is dict and getattr(env, "encodekey", None) is _ENCODE and _KEYS:
        return _parse_raw(tuple(data.get(k) for k in _KEYS), env.decodevalue)
    return _parse(*(env.get(n, "").strip() for n in _NAMES))


@functools.lru_cache(maxsize=8)
def _parse_raw(values: tuple, decode) -> Config:
    return _parse(*("" if v is None else decode(v).strip() for v in values))


@contextlib.contextmanager
def pinned(threads: int | None = None):
    """The settings read once for a whole load or run: the loader, the kernels and the
    executor ask for them at every layer, and reading three environment variables each
    time cost a tenth of a small model's run (and most of a check_alloc on a file of a
    million layers). A ContextVar: loads and runs in other threads keep their own.
    `threads` overrides IRRUN_THREADS for the block (a model read with threads=N)."""
    try:
        settings = config()
    except ConfigError:
        settings = None       # not pinned: each reader raises the error as it would
    if threads is not None and settings is not None and settings.threads != threads:
        settings = dataclasses.replace(settings, threads=threads)
    token = _PINNED.set(settings)
    try:
        yield
    finally:
        _PINNED.reset(token)
