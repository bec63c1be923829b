"""Log probabilities of the tokens a pulse generates, for the rows that asked for them.

A row asks with ``Task.logprobs`` (an int: how many of the most likely tokens to list beside the
chosen one, 0 to ``TOP_MAX``; None: no log probabilities). Each is the log-softmax of the
model's own logits for that step, in fp32, before logit biases, penalties, temperature, top-k
and top-p (what the model thinks, whatever the sampler then did with it, as vLLM reports by
default). Only the asking rows are gathered, so a pulse without them does no more work, and
the values come to the host after the pulse's results (a few small copies after the pulse's
own synchronisation; none inside the pulse).

An entry per accepted token: ``(logprob, alternatives, their logprobs)`` (two lists, most
likely first; ties in ``torch.topk``'s order): few objects (a pulse of 256 rows makes 8,192
entries on the scheduler's thread).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from server.model.sampler import token_logprobs
from server.model.state import to_device

TOP_MAX = 20  # the most alternatives a token lists (OpenAI's chat top_logprobs limit)

Entry = tuple[float, list[int], list[float]]


def to_entries(chosen: list[float], ids: list | None, vals: list | None, steps, n: int,
               top: int) -> list[Entry]:
    """Entries of positions ``steps`` from host lists (``ids``/``vals``: [position][top], None
    when ``top`` is 0), with the first ``n`` alternatives each (the lists as they came when
    ``n`` is ``top``: no copies)."""
    if not n:
        return [(chosen[s], [], []) for s in steps]
    if n == top:
        return [(chosen[s], ids[s], vals[s]) for s in steps]
    return [(chosen[s], ids[s][:n], vals[s][:n]) for s in steps]


class LogprobRecorder:
    """One pulse's log probabilities for the slots of ``wants`` (slot -> alternatives)."""

    def __init__(self, wants: dict[int, int], device: torch.device):
        self.wants = dict(wants)
        self.slots = sorted(self.wants)
        self.rows = to_device(self.slots, device)
        self.top = min(max(self.wants.values()), TOP_MAX)
        self.chosen: list[Tensor] = []  # per step: [R]
        self.alt: list[tuple[Tensor, Tensor]] = []  # per step: values, ids [R, top]

    def record(self, logits: Tensor, tokens: Tensor) -> None:
        """After a step's sampling: ``logits`` [cap, V] the step sampled from, ``tokens`` [cap]
        what it drew (rows that accept none are recorded too and dropped in ``result``)."""
        chosen, vals, ids = token_logprobs(logits.index_select(0, self.rows),
                                           tokens.index_select(0, self.rows), self.top)
        self.chosen.append(chosen)
        if self.top:
            self.alt.append((vals, ids))

    def result(self, valid: np.ndarray) -> dict[int, list[Entry]]:
        """Each slot's entries for its accepted tokens, ``valid`` [cap, steps] (the pulse's
        accepted-token mask, read back already) telling which steps' tokens it accepted."""
        if not self.chosen:
            return {}
        ran = len(self.chosen)
        chosen = torch.stack(self.chosen, 1).cpu().tolist()  # [R][ran]
        vals = ids = None
        if self.top:  # (nested lists once: indexing arrays per entry cost ~10x more)
            vals = torch.stack([v for v, _ in self.alt], 1).cpu().tolist()  # [R][ran][top]
            ids = torch.stack([i for _, i in self.alt], 1).cpu().tolist()
        return {slot: to_entries(chosen[j], ids[j] if ids else None, vals[j] if vals else None,
                                 np.flatnonzero(valid[slot, :ran]).tolist(),
                                 min(self.wants[slot], self.top), self.top)
                for j, slot in enumerate(self.slots)}
