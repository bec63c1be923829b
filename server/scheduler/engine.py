"""BatchEngine: the device side of the scheduler — slot tensors, prefill and decode pulses.

Every tensor here has the slot (capacity) dimension; slot ``i`` of every tensor belongs to the same
sequence. The scheduler (no torch) decides which task sits in which slot; the engine moves data.

A pulse runs ``steps`` decode steps with no host synchronisation except one copy at the end. End of
generation is detected on the device: token 0, a new turn (``User`` right after ``\\n\\n`` or ``\\n``),
``max_tokens``, or a stop request (a host flag copied to the device before each step). A finished
row stops updating its state, penalties and random stream at once, so its state is exactly "all
tokens but ``current_token`` consumed".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from server.model.sampler import BatchSampler, SamplingBatch

EOS_TOKEN = 0
NEWLINE_TOKENS = (11, 261)  # "\n", "\n\n"
USER_TOKEN = 24281  # "User"

# reasons a row ended, as stored in PulseResult.reason
RUNNING, REASON_EOS, REASON_LENGTH, REASON_STOP = 0, 1, 2, 3


@dataclass
class PulseResult:
    """Host copies of one pulse's outcome (rows = slots)."""

    tokens: list[list[int]]  # accepted tokens per slot, in order
    reason: list[int]  # RUNNING / REASON_* per slot
    current: list[int]  # next input token per slot (valid unless reason == REASON_EOS)


class BatchEngine:
    def __init__(self, model, sampler: BatchSampler | None = None):
        self.model = model
        self.device = torch.device(model.device)
        self.vocab_size = model.cfg.vocab_size
        self.sampler = sampler or BatchSampler(self.vocab_size, self.device)
        self.capacity = 0
        self._alloc(1)

    # ---- slot storage ----------------------------------------------------------------
    def _alloc(self, cap: int) -> None:
        dev = self.device
        self.capacity = cap
        self.state = self.model.new_state(cap)  # shift [L,2,cap,C], wkv [L,cap,H,N,N]
        self.samp = SamplingBatch.empty(cap, self.vocab_size, dev)
        self.cur = torch.zeros(cap, dtype=torch.long, device=dev)  # [cap] next input token
        self.n_gen = torch.zeros(cap, dtype=torch.long, device=dev)  # [cap] generated this round
        self.max_new = torch.zeros(cap, dtype=torch.long, device=dev)  # [cap] max_tokens
        self.live = torch.zeros(cap, dtype=torch.bool, device=dev)  # [cap] decoding
        pin = dev.type == "cuda"
        self.stop_host = torch.zeros(cap, dtype=torch.bool, pin_memory=pin)  # [cap] host flags
        self.stop_dev = self.stop_host if dev.type == "cpu" else torch.zeros_like(self.live)

    def resize(self, cap: int, keep: list[int]) -> None:
        """Reallocate to ``cap`` slots, moving rows ``keep`` to slots ``0..len(keep)-1``."""
        assert len(keep) <= cap
        old_state, old_samp = self.state, self.samp
        old = (self.cur, self.n_gen, self.max_new, self.live, self.stop_host)
        self._alloc(cap)
        if not keep:
            return
        idx = torch.tensor(keep, dtype=torch.long, device=self.device)
        dst = list(range(len(keep)))
        self.state.assign(dst, old_state.select(idx))
        self.samp.assign(dst, old_samp.select(idx))
        n = len(keep)
        for new_t, old_t in zip((self.cur, self.n_gen, self.max_new, self.live), old[:4]):
            new_t[:n] = old_t[idx]
        self.stop_host[:n] = old[4][idx.cpu()]

    # ---- moving tasks in and out -------------------------------------------------------
    def load(self, slots: list[int], tasks: list) -> None:
        """Copy tasks' state, penalties and sampling parameters into ``slots`` (not yet live)."""
        dev, n = self.device, len(slots)
        idx = torch.tensor(slots, dtype=torch.long, device=dev)
        for slot, task in zip(slots, tasks):
            if task.state is None:
                self.state.zero_([slot])
            else:
                self.state.assign([slot], task.state)
        rows = SamplingBatch.empty(n, self.vocab_size, dev)
        f32 = dict(dtype=torch.float32, device=dev)
        rows.temperature.copy_(torch.tensor([t.temperature for t in tasks], **f32))
        rows.top_p.copy_(torch.tensor([t.top_p for t in tasks], **f32))
        rows.top_k.copy_(torch.tensor([t.top_k for t in tasks], dtype=torch.int32, device=dev))
        rows.presence.copy_(torch.tensor([t.presence_penalty for t in tasks], **f32))
        rows.repetition.copy_(torch.tensor([t.repetition_penalty for t in tasks], **f32))
        rows.decay.copy_(torch.tensor([t.penalty_decay for t in tasks], **f32))
        rows.seed.copy_(torch.tensor([t.seed for t in tasks], dtype=torch.long, device=dev))
        rows.counter.copy_(torch.tensor([t.rng_counter for t in tasks], dtype=torch.long, device=dev))
        for i, task in enumerate(tasks):
            if task.penalties is not None:
                rows.penalties[i].copy_(task.penalties)
        self.samp.assign(slots, rows)
        self.live[idx] = False
        self.n_gen[idx] = 0
        self.stop_host[idx.cpu()] = False

    def start(self, slots: list[int], current: list[int], max_new: list[int]) -> None:
        """Make ``slots`` live: decoding starts from ``current`` for up to ``max_new`` tokens."""
        idx = torch.tensor(slots, dtype=torch.long, device=self.device)
        self.cur[idx] = torch.tensor(current, dtype=torch.long, device=self.device)
        self.max_new[idx] = torch.tensor(max_new, dtype=torch.long, device=self.device)
        self.n_gen[idx] = 0
        self.live[idx] = True

    def unload(self, slots: list[int], tasks: list) -> None:
        """Copy state, penalties and random-stream position of ``slots`` back to the tasks (CPU)."""
        if not slots:
            return
        idx = torch.tensor(slots, dtype=torch.long, device=self.device)
        states = self.state.select(idx).to(device="cpu")
        penalties = self.samp.penalties[idx].to("cpu")
        counters = self.samp.counter[idx].tolist()
        for i, task in enumerate(tasks):
            task.state = states.select([i])
            task.penalties = penalties[i].clone()
            task.rng_counter = counters[i]
        self.live[idx] = False

    def free(self, slots: list[int]) -> None:
        if slots:
            self.live[torch.tensor(slots, dtype=torch.long, device=self.device)] = False

    def request_stop(self, slot: int) -> None:
        self.stop_host[slot] = True

    # ---- compute -----------------------------------------------------------------------
    @torch.no_grad()
    def prefill(self, slots: list[int], token_lists: list[list[int]]) -> None:
        """Feed ``token_lists[i]`` into the state of ``slots[i]`` (in place)."""
        idx = torch.tensor(slots, dtype=torch.long, device=self.device)
        sub = self.state.select(idx)
        self.model.prefill(token_lists, sub)
        self.state.assign(slots, sub)

    @torch.no_grad()
    def pulse(self, steps: int) -> PulseResult:
        """Run up to ``steps`` decode steps for live slots; return what each produced."""
        cap, dev = self.capacity, self.device
        out = torch.zeros(cap, steps, dtype=torch.long, device=dev)  # [cap, steps]
        valid = torch.zeros(cap, steps, dtype=torch.bool, device=dev)
        reason = torch.zeros(cap, dtype=torch.long, device=dev)
        done = ~self.live
        for s in range(steps):
            if dev.type == "cuda":
                self.stop_dev.copy_(self.stop_host, non_blocking=True)
            reason.masked_fill_(~done & self.stop_dev, REASON_STOP)
            active = ~done & ~self.stop_dev
            logits = self.model.decode(self.cur, self.state, active=active)  # [cap, V]
            tok = self.sampler.sample(logits, self.samp, active=active)  # [cap]
            after_newline = (self.cur == NEWLINE_TOKENS[0]) | (self.cur == NEWLINE_TOKENS[1])
            is_eos = (tok == EOS_TOKEN) | ((tok == USER_TOKEN) & after_newline)
            ok = active & ~is_eos
            out[:, s] = tok
            valid[:, s] = ok
            self.n_gen += ok
            self.cur.copy_(torch.where(ok, tok, self.cur))
            reason.masked_fill_(active & is_eos, REASON_EOS)
            reason.masked_fill_(ok & (self.n_gen >= self.max_new), REASON_LENGTH)
            done = done | ~active | is_eos | (self.n_gen >= self.max_new)
        self.live &= ~done
        out_h, valid_h = out.cpu(), valid.cpu()  # the pulse's one synchronisation
        tokens = [row[m].tolist() for row, m in zip(out_h, valid_h)]
        return PulseResult(tokens, reason.cpu().tolist(), self.cur.cpu().tolist())
