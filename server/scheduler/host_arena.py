"""HostArena: the prefix cache's host tier in one block of pinned memory, cut into state slots.

Moving a state from the GPU to host memory either waits for the device (a pageable copy) or
needs pinned memory, and allocating pinned memory is itself slow; both cost ~15 ms per 2.9B state
on the H200 (measured), on the scheduler thread, at every insert once the device tier is full.
Every cached state of a model has the same shapes, so the host tier is allocated once (at a
server's start through ``PrefixCache.reserve_host``, else at the first move; sized to its byte
budget) as ``slots`` rows of pinned memory; a move is then one non-blocking copy into a free
row. A row has room for one logits vector too (``vocab`` fp32 values: a whole prompt's entry keeps
its last token's logits on either tier), so moving an entry with logits allocates no pinned
memory either (session 55's first version allocated a fresh pinned block per move: the suspected
cause of a cached chat turn ~0.6 ms slower on the H200). The rows are counted by state bytes
(``slots`` = budget // state bytes + 1: every entry the host tier's byte budget holds gets a
row, most without logits: a turn's boundary), so the logits areas come on top of the budget:
4 × vocab bytes a row, ~1 % more pinned memory for a 2.9B model's 21 MB fp32 states, ~10 %
for 0.1B's 2.4 MB. (Rows sized with their logits were fewer than the entries the budget holds,
and the moves past them allocated pinned memory of their own: session 56's review.) Rows are
handed back when their entry is dropped or moved back to the device. Reuse is safe without
waiting because every copy into or out of a row is queued on the scheduler thread's stream, in
order.
"""

from __future__ import annotations

import torch

from server.model.state import State


class HostArena:
    def __init__(self, budget_bytes: int, pin: bool = True, vocab: int = 0):
        self.budget_bytes, self.pin, self.vocab = budget_bytes, pin, max(0, int(vocab))
        self.shift: torch.Tensor | None = None  # [slots, L, 2, 1, C]
        self.wkv: torch.Tensor | None = None  # [slots, L, 1, H, N, N]
        self.logits: torch.Tensor | None = None  # [slots, vocab] fp32 (vocab > 0)
        self.free: list[int] = []

    @property
    def slots(self) -> int:
        return 0 if self.shift is None else self.shift.shape[0]

    def allocate(self, state: State) -> None:
        per = sum(t.numel() * t.element_size() for t in (state.shift, state.wkv))
        n = self.budget_bytes // per + 1  # the host tier may use budget the device tier leaves
        self.shift = torch.empty((n, *state.shift.shape), dtype=state.shift.dtype,
                                 pin_memory=self.pin)
        self.wkv = torch.empty((n, *state.wkv.shape), dtype=state.wkv.dtype, pin_memory=self.pin)
        self.logits = (torch.empty((n, self.vocab), dtype=torch.float32, pin_memory=self.pin)
                       if self.vocab else None)
        self.free = list(range(n - 1, -1, -1))

    def put(self, state: State) -> tuple[State, int] | None:
        """A host copy of ``state`` in a free row (the copy is queued, not awaited) and its row;
        None when no row is free or the state is not of the arena's shape and dtypes."""
        if self.shift is None and self.budget_bytes > 0:
            self.allocate(state)
        if not self.free or self.shift.shape[1:] != state.shift.shape \
                or self.wkv.shape[1:] != state.wkv.shape or self.shift.dtype != state.shift.dtype \
                or self.wkv.dtype != state.wkv.dtype:
            return None
        i = self.free.pop()
        self.shift[i].copy_(state.shift, non_blocking=True)
        self.wkv[i].copy_(state.wkv, non_blocking=True)
        return State(self.shift[i], self.wkv[i]), i

    def put_logits(self, row: int, logits: torch.Tensor) -> torch.Tensor | None:
        """A host copy of ``logits`` (a whole prompt's, ``vocab`` fp32 values) in ``row``'s
        logits area (queued, not awaited), shaped as ``logits``; None when the arena has no
        such area or they are not of its size and dtype (the caller copies them elsewhere)."""
        if self.logits is None or logits.numel() != self.vocab \
                or logits.dtype != self.logits.dtype:
            return None
        out = self.logits[row].view(logits.shape)
        return out.copy_(logits, non_blocking=True)

    def release(self, row: int) -> None:
        self.free.append(row)

    def reset(self) -> None:
        """Every row free again (the cache dropped all its entries)."""
        self.free = list(range(self.slots - 1, -1, -1))
