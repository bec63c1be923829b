"""Device memory of this process, as /health, /metrics and the start log report it."""

from __future__ import annotations

import time

import torch

from server.logger import get_logger
from server.model.cuda_graph import CAPTURE_LOCK

log = get_logger(__name__)
# the last driver reading (free, total bytes) of each device: what a read gets while
# CAPTURE_LOCK is held
_LAST: dict[torch.device, tuple[int, int]] = {}


def device_memory(device, wait: bool = False) -> dict | None:
    """On CUDA: bytes of ``device`` that PyTorch's tensors hold (``allocated``; the most since
    the start: ``peak_allocated``), that its caching allocator holds (``reserved``: allocated
    plus cached blocks, CUDA graphs' pools included) and that the device has in use by every
    process and context (``used``, of ``total``: what nvidia-smi shows; this process's share
    above ``reserved`` is its CUDA context and libraries). None elsewhere.

    The allocator's figures are host-side counters. ``used`` and ``total`` come from a driver
    query, which another thread's graph capture must not meet (it could invalidate it), so it
    is made only while CAPTURE_LOCK is free. Otherwise the last reading is given (None
    before any): /health and /metrics never wait for a capture or the copy-back's gather,
    which hold the lock. ``wait`` (the start log, benchmarks; not on the event loop) waits
    for the lock instead. Not to be called while this thread holds it."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    if CAPTURE_LOCK.acquire(blocking=wait):
        try:
            _LAST[device] = torch.cuda.mem_get_info(device)
        finally:
            CAPTURE_LOCK.release()
    free, total = _LAST.get(device, (None, None))
    return {"allocated": torch.cuda.memory_allocated(device),
            "peak_allocated": torch.cuda.max_memory_allocated(device),
            "reserved": torch.cuda.memory_reserved(device),
            "used": None if total is None else total - free, "total": total}


def describe(memory: dict) -> str:
    """``device_memory``'s figures in GiB, for a log line."""
    def gib(key: str) -> str:
        return "?" if memory[key] is None else f"{memory[key] / 2**30:.2f}"
    return (f"{gib('allocated')} GiB allocated (peak {gib('peak_allocated')}), "
            f"{gib('reserved')} GiB reserved; {gib('used')} of the device's {gib('total')} GiB "
            "in use")


def give_back_cached(device) -> bool | None:
    """Give PyTorch's cached, unused device blocks back to the driver (``empty_cache``; with
    expandable segments, their pages); True if done. Not done: False while another thread
    holds CAPTURE_LOCK (a graph capture, which the call would break, or the copy-back's
    gather: try again later); None off CUDA and while another GPU than ``device`` has memory
    reserved (not to be tried again while it does): ``empty_cache``
    empties every device's cache, and with expandable segments PyTorch waited on the wrong
    device's stream before unmapping another device's pages (pytorch#196258, fixed by #197159
    in September 2026), which could pull memory from under work queued there. Live tensors
    and the CUDA graphs' private pools are not touched. It waits for the device's queued
    work: for an idle server, not between a task's steps."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    index = torch.cuda.current_device() if device.index is None else device.index
    if any(torch.cuda.memory_reserved(i) for i in range(torch.cuda.device_count())
           if i != index):
        return None
    if not CAPTURE_LOCK.acquire(blocking=False):
        return False
    try:
        t, before = time.perf_counter(), torch.cuda.memory_reserved(index)
        with torch.cuda.device(index):
            torch.cuda.empty_cache()
        after = torch.cuda.memory_reserved(index)
    finally:
        CAPTURE_LOCK.release()
    log.debug(f"idle: {(before - after) / 2**20:,.0f} MiB of cached device blocks given back in "
              f"{(time.perf_counter() - t) * 1e3:.1f} ms ({after / 2**20:,.0f} MiB reserved)")
    return True
