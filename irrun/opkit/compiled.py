"""Compiled loops for kernels (numba): `cached_loop`, numba.njit(nogil=True) with its
machine code cached on disk and an unreadable cache rebuilt.

Not imported by irrun.opkit itself: a kernel imports it (or a module that uses it) on its
first run, so loading models whose ops have no compiled loop never imports numba.
"""
import os
import sys

import numba


def cached_loop(fn):
    """numba.njit(nogil=True) with the machine code cached on disk: beside this file, or
    in the user's cache directory (NUMBA_CACHE_DIR, else ~/.cache/numba) when the package's
    folder is read-only. Where neither can be written (a read-only container), numba
    refuses to cache at all: the loop is then compiled in each process instead.

    The loops are called from Python only, through a guard: a cache file that cannot be
    read (truncated by a full disk or a killed process) makes numba raise from its cache
    loader on every call, so the guard empties that cache entry, says so once on stderr,
    and compiles the loop again."""
    try:
        dispatcher = numba.njit(nogil=True, cache=True)(fn)
    except RuntimeError:            # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(fn)

    return _Guarded(dispatcher, fn.__name__)


class _Guarded:
    """A cached dispatcher whose unreadable cache is rebuilt (see cached_loop); every other
    attribute (stats, signatures, ...) is the dispatcher's."""

    def __init__(self, dispatcher, name: str):
        self.dispatcher = dispatcher
        self.__name__ = name

    def __call__(self, *args):
        try:
            return self.dispatcher(*args)
        except Exception as e:
            if not _raised_by_cache(e):
                raise
        _recover_cache(self.dispatcher, self.__name__)
        return self.dispatcher(*args)

    def __getattr__(self, name):
        return getattr(self.dispatcher, name)


def _raised_by_cache(e: BaseException) -> bool:
    """Whether `e` came out of numba's on-disk cache (its caching module)."""
    tb = e.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if name.endswith("numba/core/caching.py"):
            return True
        tb = tb.tb_next
    return False


def _recover_cache(dispatcher, name: str) -> None:
    cache = dispatcher._cache
    index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    try:
        if index is not None and os.path.exists(index):
            os.unlink(index)       # the unreadable index; its data files are then unused
        for data in os.listdir(os.path.dirname(index)) if index else ():
            if data.startswith(os.path.basename(index)[:-len(".nbi")]) and data.endswith(".nbc"):
                os.unlink(os.path.join(os.path.dirname(index), data))
    except OSError:
        pass
    print(f"irrun: numba's cache of the compiled loop {name} could not be read (a truncated "
          f"file?); removed it and compiling the loop again", file=sys.stderr)
