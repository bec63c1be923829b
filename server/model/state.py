"""State: the batched recurrent state of RWKV-7 (one row per sequence, "slots").

Shapes (L layers, B rows, C = n_embd, H heads of N = 64):
    shift [L, 2, B, C]    run dtype; [:, 0] = previous ln1 output (att), [:, 1] = previous ln2 output (ffn)
    wkv   [L, B, H, N, N] state dtype (fp32 default); S[i, j]: row i = value index, col j = key index
The zero state (all zeros) is the state before any token. Its size does not grow with the context.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def to_device(values, device, dtype=torch.long) -> Tensor:
    """A short host list (or host tensor) as a tensor on ``device`` without waiting for it: on
    CUDA through pinned memory, non-blocking (a copy from pageable memory waits until the device
    has finished all the work queued before it)."""
    t = values if isinstance(values, Tensor) else torch.tensor(values, dtype=dtype)
    if torch.device(device).type != "cuda":
        return t
    return t.pin_memory().to(device, non_blocking=True)


def use_device(device) -> None:
    """Make ``device`` this thread's current CUDA device (no-op elsewhere). Each thread that
    drives a model calls it: the calls that name no device (a CUDA event's ``record``,
    ``current_stream``, graph capture, ``is_current_stream_capturing``) act on the current
    one, which is per thread and cuda:0 unless set; a model on cuda:1 recorded its events on
    cuda:0's idle stream, so waits on them did not wait (session 47's review)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)


def rows_of(idx):
    """``idx`` as a slice when it lists consecutive rows in order (one slot: the common case),
    else as given: rows taken by a slice are views and copies, with no index tensor to upload
    first (on CUDA each upload costs tens of µs of host time, on a request's way to its first
    token). Negative rows stay as given (a slice would count them from the end differently)."""
    if isinstance(idx, (list, tuple)) and idx and all(isinstance(a, int) for a in idx) \
            and idx[0] >= 0 and all(b == a + 1 for a, b in zip(idx, idx[1:])):
        return slice(idx[0], idx[-1] + 1)
    return idx


def rows_on(idx: list[int], device):
    """``idx`` as a slice where its rows are consecutive and in order (``rows_of``: one
    request's, the common case; no upload), else as an index tensor on ``device`` (one upload,
    through pinned memory: ``to_device``)."""
    rows = rows_of(idx)
    return rows if isinstance(rows, slice) else to_device(idx, device)


def index_on(idx, device) -> Tensor:
    """Row indices as a LongTensor on ``device``."""
    if isinstance(idx, Tensor):
        return idx.to(device=device, dtype=torch.long)
    return to_device(list(idx), device)


@dataclass
class State:
    shift: Tensor  # [L, 2, B, C] run dtype
    wkv: Tensor  # [L, B, H, N, N] state dtype

    @classmethod
    def zeros(cls, cfg, batch: int, device="cpu", dtype=torch.float32,
              state_dtype=torch.float32) -> "State":
        """The zero state for ``batch`` rows of a model with config ``cfg`` (a ModelConfig)."""
        L, C, H, N = cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.head_size
        shift = torch.zeros(L, 2, batch, C, dtype=dtype, device=device)
        wkv = torch.zeros(L, batch, H, N, N, dtype=state_dtype, device=device)
        return cls(shift, wkv)

    @property
    def batch_size(self) -> int:
        return self.shift.shape[2]

    @property
    def device(self) -> torch.device:
        return self.shift.device

    def row_bytes(self) -> int:
        """Bytes that one row takes (its wkv and shift state)."""
        return sum(t.numel() // max(self.batch_size, 1) * t.element_size()
                   for t in (self.shift, self.wkv))

    def _slice(self, idx, other: "State | None" = None) -> slice | None:
        """``rows_of(idx)`` when it is a slice of rows that exist (and that ``other`` has as
        many rows for), else None: the indexed path, which raises for rows out of range where
        a slice would silently take fewer rows (or broadcast ``other``'s one row)."""
        rows = rows_of(idx)
        if not isinstance(rows, slice) or rows.stop > self.batch_size:
            return None
        if other is not None and other.batch_size < rows.stop - rows.start:
            return None
        return rows

    def rows(self, idx) -> "State | None":
        """Rows ``idx`` as views (writes reach self) when they are consecutive rows that exist,
        else None (``select`` copies them)."""
        rows = self._slice(idx)
        if rows is None:
            return None
        return State(self.shift[:, :, rows], self.wkv[:, rows])

    def select(self, idx) -> "State":
        """A new State holding rows ``idx`` (a copy), in that order."""
        rows = self._slice(idx)
        if rows is not None:
            return State(self.shift[:, :, rows].clone(), self.wkv[:, rows].clone())
        i = index_on(idx, self.device)
        return State(self.shift.index_select(2, i), self.wkv.index_select(1, i))

    def assign(self, idx, other: "State") -> None:
        """Rows ``idx`` of self <- rows 0..len(idx)-1 of ``other`` (cast and moved as needed)."""
        rows = self._slice(idx, other)
        if rows is not None:
            n = rows.stop - rows.start
            self.shift[:, :, rows].copy_(other.shift[:, :, :n].to(self.shift.device))
            self.wkv[:, rows].copy_(other.wkv[:, :n].to(self.wkv.device))
            return
        i = index_on(idx, self.device)
        n = i.numel()
        self.shift.index_copy_(2, i, other.shift[:, :, :n].to(self.shift.device, self.shift.dtype))
        self.wkv.index_copy_(1, i, other.wkv[:, :n].to(self.wkv.device, self.wkv.dtype))

    def clone(self) -> "State":
        return State(self.shift.clone(), self.wkv.clone())

    def to(self, device=None, dtype=None, state_dtype=None) -> "State":
        """A State on ``device`` with shift in ``dtype`` and wkv in ``state_dtype`` (None = keep).
        Returns self when nothing changes (like Tensor.to)."""
        shift = self.shift.to(device=device or self.shift.device, dtype=dtype or self.shift.dtype)
        wkv = self.wkv.to(device=device or self.wkv.device, dtype=state_dtype or self.wkv.dtype)
        if shift is self.shift and wkv is self.wkv:
            return self
        return State(shift, wkv)

    def zero_(self, idx=None) -> None:
        """Reset rows ``idx`` (all rows when None) to the zero state, in place."""
        if idx is None:
            self.shift.zero_()
            self.wkv.zero_()
            return
        rows = self._slice(idx)
        if rows is not None:
            self.shift[:, :, rows].zero_()
            self.wkv[:, rows].zero_()
            return
        i = index_on(idx, self.device)
        self.shift.index_fill_(2, i, 0)
        self.wkv.index_fill_(1, i, 0)
