"""Constrained rows in a pulse (``Task.constraint``: a grammar the reply must follow; see
``server/task/constraint.py``).

Before each step's sampling the constrained rows' grammars give the tokens they allow (a bit per
token, computed on the host); the other tokens' logits become -inf in a copy of the step's
logits (the log probabilities stay the model's own). After the step the host reads the rows'
tokens and whether each was accepted, and advances each grammar by its row's token. That read
waits for the step: a pulse with a constrained row synchronises once a step (a pulse without
one never does), so its other rows run at the host's pace too while it lasts.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from server.model.state import to_device

_BITS = torch.arange(32, dtype=torch.int32)


class Guide:
    """One pulse's constrained rows: ``constraints`` (slot -> Constraint)."""

    def __init__(self, constraints: dict, vocab_size: int, device: torch.device):
        self.slots = sorted(constraints)
        self.constraints = [constraints[s] for s in self.slots]
        self.rows = to_device(self.slots, device)
        self.vocab_size = vocab_size
        self.words = np.zeros((len(self.slots), -(-vocab_size // 32)), dtype=np.int32)
        self.bits = _BITS.to(device)
        self.live = [True] * len(self.slots)  # rows that have not ended in this pulse

    def apply(self, logits: Tensor) -> Tensor:
        """``logits`` [cap, V] with each constrained row's disallowed tokens at -inf (a new
        tensor; ended rows keep theirs: their tokens are not used)."""
        for i, c in enumerate(self.constraints):
            if self.live[i]:
                c.fill_mask(self.words[i])
            else:
                self.words[i] = -1
        words = to_device(torch.from_numpy(self.words), logits.device, torch.int32)
        allowed = ((words[:, :, None] >> self.bits) & 1).flatten(1)[:, :logits.shape[1]]
        if allowed.shape[1] < logits.shape[1]:  # ids past the tokenizer's: never allowed
            allowed = torch.nn.functional.pad(allowed, (0, logits.shape[1] - allowed.shape[1]))
        out = logits.clone()
        out[self.rows] = logits.index_select(0, self.rows).masked_fill(allowed == 0,
                                                                        float("-inf"))
        return out

    def advance(self, tokens: Tensor, valid: Tensor) -> None:
        """After a step: each live row's grammar takes its token if the row accepted it (a
        row that did not has ended). Reads the step's results (a synchronisation)."""
        toks = torch.stack([tokens.index_select(0, self.rows),
                            valid.index_select(0, self.rows).long()]).cpu().tolist()
        for i, (tok, ok) in enumerate(zip(*toks)):
            if not self.live[i]:
                continue
            if ok:
                self.constraints[i].accept(tok)
            else:
                self.live[i] = False
