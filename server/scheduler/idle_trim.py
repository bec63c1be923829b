"""Give the allocator's free memory back to the system once the scheduler has gone idle.

Under load, glibc keeps memory that Python and torch freed in its arenas (per-thread heaps) for
reuse; resident memory then creeps up and stays up after the load ends (docs/reliability.md,
sessions 41-42: an hour's soak of the tiny CPU demo grew 944 -> 1,062 MB, ~190 MB of it free
memory the allocator held; ``malloc_trim(0)`` gave ~47 MB back each minute). ``IdleTrim`` calls
``malloc_trim(0)`` once the scheduler has had nothing to do for ``IDLE_S`` seconds, once per idle
spell: never between a running task's steps (a trim took 14 ms, up to 59, on a busy 2-core
machine, and it holds the arenas' locks while it walks them). A no-op where the C library has
no ``malloc_trim`` (macOS, Windows, musl).

On CUDA the same idle spell also gives PyTorch's cached device blocks back to the driver
(``give_back_cached``): a load's prefill passes leave ~0.6-1 GiB reserved above what a served
2.9B holds at rest (session 71, H200: 8.99 GiB reserved after a load of 256 requests for 8.00
allocated), which nvidia-smi counts against the device until the next load reuses it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import time

from server.logger import get_logger
from server.model.memory import give_back_cached

IDLE_S = 2.0  # seconds without work before the trim
RETRY_S = 0.1  # a device give-back that could not run (CAPTURE_LOCK held) is tried again after
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
    spell, ``IDLE_S`` after the last work; then ``trim()`` (off any lock the request path
    takes). A device give-back that met CAPTURE_LOCK held is due again ``RETRY_S`` later in
    the same spell (one that may not run, another GPU holding memory, is not); ``gave_back``
    counts those that ran."""

    def __init__(self, device=None):
        self._fn = _malloc_trim()
        self._device = device  # the model's: its cached blocks go back too (on CUDA)
        self._cuda = device is not None and str(device).startswith("cuda")
        self._last = 0.0  # monotonic time of the last work (or of a give-back's failed try)
        self._host = self._dev = False  # each trim still due in this idle spell
        self.gave_back = 0

    def worked(self) -> None:
        self._last = time.monotonic()
        self._host, self._dev = self._fn is not None, self._cuda

    def due(self) -> bool:
        return (self._host or self._dev) and time.monotonic() - self._last >= IDLE_S

    def trim(self, busy=lambda: False) -> None:
        """``busy``: True once work has come in (checked again before the device's give-back,
        which waits for the device and makes the next pass map its memory again)."""
        if self._host:
            self._host = False
            t = time.perf_counter()
            self._fn(0)
            log.debug(f"idle: malloc_trim took {(time.perf_counter() - t) * 1e3:.1f} ms")
        if self._dev and not busy():
            done = give_back_cached(self._device)
            if done is False:  # (the lock was held: tried again RETRY_S later)
                self._last = time.monotonic() - IDLE_S + RETRY_S
            else:  # (None: not to be done in this spell, another GPU holding memory)
                self._dev = False
                self.gave_back += bool(done)
