"""Programmatic dependent launch (PDL; Hopper and later) for the chain of Triton kernels of a
small-batch decode step (launches over at most ``MAX_ROWS`` rows: ln_mix, the skinny products,
the one-kernel time mix).

A decode step at a few rows is ~300 short kernels (ln_mix, the skinny products, the time mix),
each a few microseconds; between two of them the GPU drains one grid and launches the next. With
PDL a kernel may be scheduled while its predecessor still runs: each kernel of the chain first
waits for its predecessor's completion and memory (``griddepcontrol.wait``), then lets its own
successor launch (``griddepcontrol.launch_dependents``). So the launch of kernel i + 1 overlaps the
run of kernel i, and no kernel touches memory before the previous one is done: the results are the
same bits as without PDL. A kernel launched with PDL after one that never signals (a cuBLAS or
torch kernel) simply starts when that one ends.

On by default where it applies (CUDA, compute capability 9.0 or more); ``RWKV_PDL=false`` turns it
off (e.g. to compare; the server validates the value with its other settings). Never on the CPU
or under Triton's interpreter.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl


@functools.cache
def enabled(device: torch.device) -> bool:
    """Whether kernels on ``device`` are launched with PDL."""
    device = torch.device(device)
    if device.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        return False
    if os.environ.get("RWKV_PDL", "1").strip().lower() in ("0", "false", "f", "no", "n", "off"):
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


# the small-batch chain: decode steps of at most 16 rows (ln_mix, the time mix, and the products
# while they run through gemv_triton: up to fused.GEMV_MAX_ROWS rows, cuBLAS above; measured so)
MAX_ROWS = 16


def launch_options(device: torch.device, rows: int) -> dict:
    """The kernel's ``PDL`` flag and the launch option, to splat into a launch of a kernel over
    ``rows`` rows: PDL only in the small-batch chain (measured there; larger launches follow
    cuBLAS products, which never signal, and were not measured with it)."""
    on = rows <= MAX_ROWS and enabled(device)
    return {"PDL": True, "launch_pdl": True} if on else {"PDL": False}


@triton.jit
def enter(PDL: tl.constexpr):
    """A PDL kernel's first statement: wait for the predecessor, then let the successor launch."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
