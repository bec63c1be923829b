"""Log probabilities of the tokens a pulse generates, for the rows that asked for them.

A row asks with ``Task.logprobs`` (an int: how many of the most likely tokens to list beside the
chosen one, 0 to ``TOP_MAX``; None: no log probabilities). Each is the log-softmax of the
model's own logits for that step, in fp32, before penalties, temperature, top-k and top-p (what
the model thinks, whatever the sampler then did with it, as vLLM reports by default). Only the
asking rows are gathered, so a pulse without them does no more work, and the values come to
the host after the pulse's results (a few small copies after the pulse's own synchronisation;
none inside the pulse).

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
        if self.top:  # (nested lists once: indexing arrays per entry cost ~10x more)
            vals = torch.stack([v for v, _ in self.alt], 1).cpu().tolist()  # [R][ran][top]
            ids = torch.stack([i for _, i in self.alt], 1).cpu().tolist()
        out = {}
        for j, slot in enumerate(self.slots):
            n = min(self.wants[slot], self.top)
            steps = np.flatnonzero(valid[slot, :ran]).tolist()
            c = chosen[j]
            if not n:
                out[slot] = [(c[s], [], []) for s in steps]
            elif n == self.top:  # the lists as they came
                ids_j, vals_j = ids[j], vals[j]
                out[slot] = [(c[s], ids_j[s], vals_j[s]) for s in steps]
            else:
                ids_j, vals_j = ids[j], vals[j]
                out[slot] = [(c[s], ids_j[s][:n], vals_j[s][:n]) for s in steps]
        return out
