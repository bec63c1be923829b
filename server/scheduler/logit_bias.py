"""Per-row logit biases (OpenAI's ``logit_bias``): a value added to chosen tokens' logits before
sampling, for the rows whose task asks (``Task.logit_bias``: token id -> bias; checked by
``task.check_logit_bias``).

The bias is added before everything the sampler does (penalties, temperature, top-k, top-p, the
greedy argmax), so -100 bans a token and +100 all but forces it, as OpenAI describes. The
model's log probabilities (``logprobs.py``) stay those of its own logits, without the bias.

A pulse uploads the live biases once (row, token and value of every entry: at most
``task.LOGIT_BIAS_MAX`` a row) and adds them to each step's logits in one scatter into a copy (the
logits the model returned are read again for the log probabilities, and a kept prompt's are
read-only). A pulse where no row asks does no more work.
"""

from __future__ import annotations

import torch
from torch import Tensor

from server.model.state import to_device


class LogitBias:
    """One pulse's biases for the slots of ``biases`` (slot -> {token: bias})."""

    def __init__(self, biases: dict[int, dict[int, float]], device: torch.device):
        rows, cols, vals = [], [], []
        for slot, bias in biases.items():
            rows += [slot] * len(bias)
            cols += bias.keys()
            vals += bias.values()
        self.index = (to_device(rows, device), to_device(cols, device))
        self.values = to_device(vals, device, torch.float32)

    def apply(self, logits: Tensor) -> Tensor:
        """``logits`` [cap, V] with the biases added (a new tensor; ``logits`` is unchanged)."""
        return logits.index_put(self.index, self.values.to(logits.dtype), accumulate=True)
