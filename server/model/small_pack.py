"""Small weight tensors gathered into one buffer (CUDA memory).

PyTorch's allocator serves blocks up to 1 MiB from 2 MiB segments of their own, and gives a
segment back only once none of its blocks is live. Loading a model leaves its small tensors
(norms, mixing vectors, per-channel constants: ~6 MiB at 2.9B) scattered among the freed
temporaries and LoRA matrices of every layer, one here and there in each segment: after a
2.9B server's start, 23 such segments held 70 MiB for 6.4 MiB live (session 70, the memory
bench's small-segment breakdown). Copied into one buffer (a large block), those segments are
left empty and can be given back.
"""

from __future__ import annotations

from dataclasses import fields

import torch
from torch import Tensor

SMALL_BYTES = 1 << 20  # the allocator's small blocks: at most 1 MiB
ALIGN = 512  # bytes: each storage's start in the buffer, as the allocator aligns its blocks


def pack_small_tensors(objects: list, device) -> int:
    """Every tensor field of the dataclass ``objects`` on ``device`` whose storage is at most
    ``SMALL_BYTES`` re-pointed into one new buffer, values, shapes and strides kept; fields
    sharing a storage (views of one another) still share it there. Returns the bytes moved.
    The old storages are freed only if nothing else holds them (a state dict on the device
    whose tensors the fields still are, e.g. the benchmarks' random weights, keeps them until
    it goes). The buffer (~6.4 MiB at 2.9B) is a large block: with expandable segments, as
    run.py sets, it takes its size rounded to 2 MiB; without, a 20 MiB segment that later
    large blocks share."""
    device = torch.device(device)
    users: dict[int, tuple] = {}  # storage data_ptr -> (storage, [(object, field, tensor)])
    for obj in objects:
        for f in fields(obj):
            t = getattr(obj, f.name)
            if not isinstance(t, Tensor) or t.device != device:
                continue
            s = t.untyped_storage()
            if s.nbytes() <= SMALL_BYTES:
                users.setdefault(s.data_ptr(), (s, []))[1].append((obj, f.name, t))
    if not users:
        return 0
    offsets, total = {}, 0
    for ptr, (s, _) in users.items():
        offsets[ptr] = total
        total += -(-s.nbytes() // ALIGN) * ALIGN
    buf = torch.empty(total, dtype=torch.uint8, device=device)
    for ptr, (s, refs) in users.items():
        start = offsets[ptr]
        buf[start:start + s.nbytes()].copy_(torch.empty(0, dtype=torch.uint8, device=device)
                                            .set_(s))
        for obj, name, t in refs:
            moved = torch.empty(0, dtype=t.dtype, device=device).set_(
                buf.untyped_storage(), start // t.element_size() + t.storage_offset(),
                t.shape, t.stride())
            setattr(obj, name, moved)
    return sum(s.nbytes() for s, _ in users.values())
