"""Constrained rows in a pulse (``Task.constraint``: a grammar the reply must follow; see
``server/task/constraint.py``).

Before each step's sampling the constrained rows' grammars give the tokens they allow (a bit per
token, computed on the host); the other tokens' logits become -inf in a copy of the step's
logits (the log probabilities stay the model's own). After the step the rows' tokens, and
whether each was accepted, are copied home without waiting (``record``); the next step reads
them (``apply``, called once that step's decode is queued: the wait is for the last step's
sampling, and the grammars' host work overlaps the decode on the device) and advances each
grammar by its row's token before computing the masks. So a pulse with a constrained row
waits once a step for the device (a pulse without one never does), and its other rows run at
that pace too while it lasts; ``finish`` takes the last step's tokens.

Fast-forward: where the grammar forces a run of tokens whatever the model says (a forced
call's ``<tool_call>{"name":"get_weather","arguments":{"`` once its ``<`` came: 14 tokens; a
schema's closing ``"}}</tool_call>``), decoding them one step each is wasted time. A row whose
grammar forces at least ``FF_MIN`` tokens is armed (``Constraint.arm``); it takes one more
step, the pulse ends there (``pause_due``), and ``forced_runs`` hands the scheduler the forced
run from there, which it feeds in one prefill pass before the row decodes again
(``cycle._fast_forward``). Where a row arms and pauses depends on its tokens alone, not on
where pulses end, so a reply is the same however the batch around it ran. Not for a row that
asks for log probabilities (fed tokens have none). On CUDA unless ``FAST_ON_CUDA`` is False.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import Tensor

from server.model.sampler import GREEDY_BELOW
from server.model.state import rows_of, to_device
from server.task.constraint import fill_masks


@functools.cache
def _byte_masks(device: torch.device) -> Tensor:
    """[256, 8] float32: for each byte of a mask, its 8 tokens' additive mask (0 where the bit
    is set, -inf where not; bit b of byte k is token 8k + b of a little-endian int32 row)."""
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")
    return to_device(torch.from_numpy(np.where(bits != 0, 0.0, -np.inf).astype(np.float32)),
                     device, torch.float32)


# what a +inf logit of a constrained row becomes: the largest value that stays finite divided
# by any temperature that samples (>= GREEDY_BELOW); the float32 maximum overflowed back to
# +inf below temperature 1, every weight NaN then, and the draw fell on a disallowed token
_BIG = torch.finfo(torch.float32).max * GREEDY_BELOW / 2


def _eos_where_none(words: np.ndarray, vocab_size: int, eos: int) -> None:
    """Rows of ``words`` (int32 bit rows, in place) that allow none of the first
    ``vocab_size`` tokens allow ``eos`` (< 32 * the row's words) instead."""
    n, r = divmod(vocab_size, 32)
    some = words[:, :n].any(axis=1)
    if r and n < words.shape[1]:
        some |= (words[:, n] & ((1 << r) - 1)) != 0
    words.view(np.uint32)[~some, eos // 32] |= np.uint32(1 << eos % 32)

FF_MIN = 4  # forced tokens that arm a row: it pauses with FF_MIN - 1 or more to feed at once
# On CUDA too since session 49: as a server runs it (docs/experiments/session48/ff_daemon.py,
# each fed run a graphed pass of its own), a forced call's reply at 2.9B on an H100 took 63.6-65.4
# against 120.2-121.3 ms alone and 202.7-233.7 against 208.9-226.1 ms for eight rows (0.1B:
# 30.0 against 48.6, 106.0 against 115.8); session 47's slower figures ran several rows' runs in
# one eager, launch-bound pass. On the CPU, where a step is the weights' read, 1.6-2.2x faster.
FAST_ON_CUDA = True


class Guide:
    """One pulse's constrained rows: ``constraints`` (slot -> Constraint); ``eos``: the
    end-of-text token; ``fast``: the slots that may be fast-forwarded (none on CUDA unless
    ``FAST_ON_CUDA``)."""

    def __init__(self, constraints: dict, vocab_size: int, device: torch.device, eos: int,
                 fast=frozenset()):
        self.slots = sorted(constraints)
        self.constraints = [constraints[s] for s in self.slots]
        cuda = torch.device(device).type == "cuda"
        self.fast = [s in fast and (FAST_ON_CUDA or not cuda) for s in self.slots]
        self.pause_due = False  # an armed row takes its token this step: end the pulse after
        self.rows = to_device(self.slots, device)
        self.span = rows_of(self.slots)  # a slice where the rows are consecutive
        self.vocab_size, self.eos = vocab_size, eos
        # the masks as the grammars give them: the tokenizer's ids (``apply`` fits them to
        # the model's vocabulary)
        self.words = np.zeros((len(self.slots), self.constraints[0].words), dtype=np.int32)
        self.masks = _byte_masks(torch.device(device))
        self.live = [True] * len(self.slots)  # rows that have not ended in this pulse
        # the last step's tokens and acceptances of the rows, on their way home (``record``)
        self._home = torch.empty((2, len(self.slots)), dtype=torch.long, pin_memory=cuda)
        self._copied = torch.cuda.Event() if cuda else None
        self._pending = False

    def apply(self, logits: Tensor) -> Tensor:
        """``logits`` [cap, V] with each constrained row's disallowed tokens at -inf (a new
        tensor; in a constrained row a NaN logit becomes -inf, +inf ``_BIG``;
        ended rows allow every token: theirs are not used). The masks are cut to the
        model's V tokens (a model padded past the tokenizer's ids never draws those); a row
        left with no token allowed (a grammar in an error state, or whose tokens all lie past
        a smaller model's V) allows end-of-text alone: it ends rather than draw from
        nothing."""
        self.finish()
        self.pause_due = any([c.arm(FF_MIN, self.vocab_size) for c, live, fast in
                              zip(self.constraints, self.live, self.fast) if live and fast])
        fill_masks([(c, i) for i, c in enumerate(self.constraints) if self.live[i]], self.words)
        for i, live in enumerate(self.live):
            if not live:
                self.words[i] = -1
        V = logits.shape[1]
        _eos_where_none(self.words, V, self.eos)
        # each row's additive mask from its bytes (a table lookup: on CUDA a few launches and
        # an upload of 8 KB a row; on the CPU far less time than expanding the bits in torch:
        # docs/performance.md, session 48)
        words = to_device(torch.from_numpy(self.words), logits.device, torch.int32)
        mask = torch.nn.functional.embedding(words.view(torch.uint8).int(), self.masks)
        mask = mask.view(len(self.slots), -1)[:, :V]
        if mask.shape[1] < V:  # ids past the tokenizer's: never allowed
            mask = torch.nn.functional.pad(mask, (0, V - mask.shape[1]), value=float("-inf"))
        # a disallowed token is -inf whatever its logit: NaN and +inf (an overflowing half-
        # precision head) become -inf and ``_BIG`` first (+inf - inf is NaN)
        out = logits.clone()
        if isinstance(self.span, slice):  # consecutive rows (one, or all): in place, no copy
            out[self.span].nan_to_num_(nan=float("-inf"), posinf=_BIG).add_(mask)
            return out
        rows = logits.index_select(0, self.rows).nan_to_num_(nan=float("-inf"), posinf=_BIG)
        return out.index_copy_(0, self.rows, rows.add_(mask))

    def record(self, tokens: Tensor, valid: Tensor) -> None:
        """After a step: its ``tokens`` [cap] and ``valid`` [cap] (accepted) of the
        constrained rows start home (no wait)."""
        self._home.copy_(torch.stack([tokens.index_select(0, self.rows),
                                      valid.index_select(0, self.rows).long()]),
                         non_blocking=True)
        if self._copied is not None:
            self._copied.record()
        self._pending = True

    def finish(self) -> None:
        """Each live row's grammar takes its last recorded token if the row accepted it (a row
        that did not has ended); waits for that copy."""
        if not self._pending:
            return
        self._pending = False
        if self._copied is not None:
            self._copied.synchronize()
        for i, (tok, ok) in enumerate(zip(*self._home.tolist())):
            if not self.live[i]:
                continue
            if ok:
                self.constraints[i].accept(tok)
            else:
                self.live[i] = False

    def forced_runs(self) -> dict[int, list[int]]:
        """After ``finish`` at the pulse's end: slot -> the forced run of each live row that
        armed (``apply``, before its last step: that step took its token) and is still live
        (``Constraint.take_forced``; not yet accepted)."""
        runs = {}
        for slot, c, live, fast in zip(self.slots, self.constraints, self.live, self.fast):
            if live and fast and (run := c.take_forced(self.vocab_size)):
                runs[slot] = run
        return runs
