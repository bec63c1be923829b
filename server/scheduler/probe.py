"""EndProbe: whether every row of a pulse has ended, read without stalling the device.

A pulse's rows end on the device (end of text, a new turn, ``max_tokens``): the host learns it
at the pulse's one synchronisation, at its end. Before, the pulse ran all its steps after its
last row had ended: a reply's end (and a queued request's admission) waited up to
``buffer_size - 1`` steps that produced nothing (31 decode steps at the default; ~1 s of a 0.1B
model on a CPU; session 29's review). The probe lets the pulse stop there:

- on the CPU the device is the host: the rows' ``done`` flags are read directly at each step;
- on CUDA each step's flags are copied to pinned host memory behind an event, and the check
  before step ``s`` reads those of step ``s - LAG``, waiting for that event. The host then runs
  at most LAG steps ahead of the device, which keeps the device fed (a step's host work is far
  shorter than a device step), and a pulse whose rows have all ended stops within LAG steps
  (their tokens are masked: an ended row is inactive, so the extra steps change nothing).
"""

from __future__ import annotations

import torch

LAG = 2  # steps the host may run ahead of the device's flags (CUDA)


class EndProbe:
    def __init__(self, done: torch.Tensor, rows: list[int], buffers=None):
        """``done``: the pulse's [cap] bool flags, updated in place by each step; ``rows``: the
        slots live at the pulse's start (non-empty). ``buffers``: an earlier probe's
        ``buffers``, reused when they fit ``done`` (CUDA: pinned flags and events, made anew
        only when the capacity changes, not at every pulse. Reuse is safe: a new copy into a
        flag tensor is queued on the stream behind any earlier one, even one a failed pulse
        left, and the flags are read only after the new copy's own event)."""
        self.done, self.rows = done, rows
        self.cuda = done.device.type == "cuda"
        self.buffers = None
        if self.cuda:
            fits = buffers is not None and buffers[0][0].shape == done.shape
            self.buffers = buffers if fits else (
                [torch.empty(done.shape, dtype=torch.bool, pin_memory=True) for _ in range(LAG)],
                [torch.cuda.Event() for _ in range(LAG)])
            self.host, self.events = self.buffers
        self.recorded = 0  # steps whose flags were recorded

    def record(self) -> None:
        """After a step: note its flags (CUDA: queue their copy)."""
        if self.cuda:
            i = self.recorded % LAG
            self.host[i].copy_(self.done, non_blocking=True)
            self.events[i].record()
        self.recorded += 1

    def ended(self) -> bool:
        """Before a step: True if every row had ended by the last step (CPU) or by the step LAG
        before the next one (CUDA; False while fewer steps ran)."""
        if not self.cuda:
            return bool(self.done[self.rows].all())
        n = self.recorded - LAG + 1  # the step whose flags are read: recorded - LAG + 1 steps
        if n < 1:
            return False
        i = (n - 1) % LAG
        self.events[i].synchronize()
        return bool(self.host[i][self.rows].all())
