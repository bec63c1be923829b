"""The embedding table (ln0 folded in) and its lookup.

On CUDA the table stays in pinned host memory: the device reads the rows it needs over the bus
(``kernels.embed_triton``), a row a token, instead of holding V x C half-precision values that
each step uses a few rows of (2.9B: 320 MiB of device memory; 7.2B: 512). Elsewhere (the CPU;
CUDA without Triton) it is an ordinary tensor on the device, indexed. PyTorch's pinned
allocator rounds a block up to a power of two: the 2.9B table locks 512 MiB of host memory (by
its documentation; not measured here)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from loguru import logger
from torch import Tensor


def host_table(device: torch.device) -> bool:
    """Whether the table for a model on ``device`` is kept in pinned host memory: on CUDA
    where Triton imports (its kernel reads it; without Triton the table stays on the device)."""
    if device.type != "cuda":
        return False
    from server.model.kernels import HAS_TRITON

    return HAS_TRITON


def build_table(emb: Tensor, ln0_w: Tensor, ln0_b: Tensor, eps: float, device: torch.device,
                dtype: torch.dtype, rows: int = 8192) -> Tensor:
    """LayerNorm(emb) in fp32 on ``device``, ``rows`` at a time, stored in ``dtype``: [V, C]
    in pinned host memory where ``host_table(device)``, else on ``device``; on ``device`` too,
    with a warning, where the pinned block is refused (WSL2 and some containers cap pinned
    memory below the table's 512 MiB block at 2.9B: a helper's review, session 61)."""
    table = None
    if host_table(device):
        try:
            table = torch.empty(emb.shape, dtype=dtype, pin_memory=True)
        except RuntimeError as e:  # (torch.OutOfMemoryError is one)
            logger.warning(f"the embedding table ({emb.shape[0]} x {emb.shape[1]}) stays on "
                           f"{device}: pinned host memory for it was refused ({e!r:.200})")
    if table is None:
        table = torch.empty(emb.shape, dtype=dtype, device=device)
    w, b = ln0_w.to(device, torch.float32), ln0_b.to(device, torch.float32)
    for i in range(0, emb.shape[0], rows):
        part = emb[i:i + rows].to(device, torch.float32)
        table[i:i + rows] = F.layer_norm(part, part.shape[-1:], w, b, eps).to(dtype)
    return table


def embed(table: Tensor, tokens: Tensor) -> Tensor:
    """table[tokens] as fp32 on the tokens' device: [*tokens.shape, C]."""
    if table.device == tokens.device:
        return table[tokens].float()
    from server.model.kernels.embed_triton import rows_into

    idx = tokens.reshape(-1).contiguous()  # (the kernel reads ids one after another)
    out = torch.empty(idx.shape[0], table.shape[1], dtype=torch.float32, device=tokens.device)
    return rows_into(table, idx, out).view(*tokens.shape, table.shape[1])
