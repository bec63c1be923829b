"""Give the allocator's free memory back to the system once the scheduler has gone idle.

Under load, glibc keeps memory that Python and torch freed in its arenas (per-thread heaps) for
reuse; resident memory then creeps up and stays up after the load ends (docs/reliability.md,
sessions 41-42: an hour's soak of the tiny CPU demo grew 944 -> 1,062 MB, ~190 MB of it free
memory the allocator held; ``malloc_trim(0)`` gave ~47 MB back each minute). ``IdleTrim`` calls
``malloc_trim(0)`` once the scheduler has had nothing to do for ``IDLE_S`` seconds, once per idle
spell: never between a running task's steps (a trim took 14 ms, up to 59, on a busy 2-core
machine, and it holds the arenas' locks while it walks them). A no-op where the C library has
no ``malloc_trim`` (macOS, Windows, musl).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import time

from server.logger import get_logger

IDLE_S = 2.0  # seconds without work before the trim
log = get_logger(__name__)


@functools.lru_cache(maxsize=1)  # (find_library runs ldconfig: once a process)
def _malloc_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


class IdleTrim:
    """``worked()`` after each step with work; ``due()`` in the idle loop: True once per idle
    spell, ``IDLE_S`` after the last work; then ``trim()`` (off any lock the request path takes)."""

    def __init__(self):
        self._fn = _malloc_trim()
        self._last = None  # monotonic time of the last work; None: trimmed since (or never worked)

    def worked(self) -> None:
        self._last = time.monotonic()

    def due(self) -> bool:
        return (self._fn is not None and self._last is not None
                and time.monotonic() - self._last >= IDLE_S)

    def trim(self) -> None:
        self._last = None
        t = time.perf_counter()
        self._fn(0)
        log.debug(f"idle: malloc_trim took {(time.perf_counter() - t) * 1e3:.1f} ms")
