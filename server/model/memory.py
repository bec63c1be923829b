"""Device memory of this process, as /health, /metrics and the start log report it."""

from __future__ import annotations

import torch

from server.model.cuda_graph import CAPTURE_LOCK


def device_memory(device) -> dict | None:
    """On CUDA: bytes of ``device`` that PyTorch's tensors hold (``allocated``; the most since
    the start: ``peak_allocated``), that its caching allocator holds (``reserved``: allocated
    plus cached blocks, CUDA graphs' pools included) and that the device has in use by every
    process and context (``used``, of ``total``: what nvidia-smi shows; this process's share
    above ``reserved`` is its CUDA context and libraries). None elsewhere. Host-side counters
    and one driver query: no wait for the device's work (only for a graph capture under way).
    Not to be called while this thread captures a graph."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    with CAPTURE_LOCK:  # (a driver call from another thread while a graph is captured can
        # invalidate the capture: /health waits for it instead, a few ms, rarely at all once
        # the warm-up has captured every graph)
        free, total = torch.cuda.mem_get_info(device)
    return {"allocated": torch.cuda.memory_allocated(device),
            "peak_allocated": torch.cuda.max_memory_allocated(device),
            "reserved": torch.cuda.memory_reserved(device),
            "used": total - free, "total": total}


def describe(memory: dict) -> str:
    """``device_memory``'s figures in GiB, for a log line."""
    def gib(key: str) -> str:
        return f"{memory[key] / 2**30:.2f}"
    return (f"{gib('allocated')} GiB allocated (peak {gib('peak_allocated')}), "
            f"{gib('reserved')} GiB reserved; {gib('used')} of the device's {gib('total')} GiB "
            "in use")
