"""Vectorised per-row sampling with penalties and seeded, layout-independent random streams.

`BatchSampler.sample(logits, batch)` does, for every row at once (no per-row Python loop):

1. `x = logits - penalties` (API.md "Penalties": before temperature);
2. rows with `temperature < GREEDY_BELOW` (0 included) take `argmax(x)`; the others use
   `x / temperature` (a smaller one would overflow it to inf: NaN weights);
3. min-p (`min_p = 0` = off: tokens whose tempered probability is below `min_p` times the most
   likely token's are dropped, i.e. `x < max(x) + log(min_p)`), then top-k (`top_k <= 0` = off)
   then top-p (`top_p >= 1` = off) on the tempered distribution of what remains.
   Top-p keeps the shortest prefix of the descending-sorted candidates whose mass reaches
   `top_p`, always at least the top token (so `top_p = 0` is greedy on the tempered logits);
4. one uniform per row from `uniform(seed, counter)` (below), then inverse-CDF sampling;
5. penalties in place: every entry `*= decay`, then `P[t] += presence` if `P[t] == 0`
   (checked after the decay) else `+= repetition` (`update`; steps 1 and 2 are one pass over
   [B, V], step 5 another where the decay is not 1: a Triton kernel each on CUDA,
   kernels/sampling_triton.py);
6. `counter += 1` for every (active) row, greedy ones included.

Candidate selection (a full-vocabulary sort is the expensive step, so it is avoided):
- rows with top-k off and top-p off ("full") sample the whole distribution in vocabulary
  order: one cumsum and a `searchsorted`, no sort (min-p's dropped tokens weigh 0 there);
- rows with `1 <= top_k <= TOPK_CAP` ("topk") share one `torch.topk` with k = the largest k of
  those rows (ties put in column order, `_topk_low_ties`: a row's candidates do not depend on
  that k) (on CUDA with k <= 64: `sampling_triton.topk_draw`, four launches: the same candidates,
  the draw in the last launch);
  each row then truncates to its own k;
- the remaining filtered rows (top-k off or above the cap, with top-p on) are fully sorted.
Each group runs on its rows only. The grouping (and the k of `torch.topk`, a Python int) needs
the parameters on the host: it is read back once and cached on the `SamplingBatch` until its
parameters change (`assign()` resets it; after writing temperature/top_k/top_p in place call
`invalidate()`), so steady-state decoding never waits for the device. Penalties, seeds and
counters are not part of the plan. `sample(..., active=mask)` leaves the penalties and counter
of inactive rows untouched (their tokens are computed anyway and should be ignored).

Randomness: `uniform(seed, counter)` is the `counter`-th output of SplitMix64 seeded with
`seed`, computed with wrapping int64 tensor arithmetic (right shifts are masked to make them
logical), top 53 bits -> float64 in [0, 1). No global generator is involved, so a row's tokens
depend only on its logits, parameters, seed and counter, never on its slot or the batch size.
Mass is accumulated with a float64 cumsum of unnormalised weights `exp(x - max)`; truncation to
a prefix reuses that cumsum, so a row's result does not depend on the other rows. (Kernels may
round the last bit differently for different shapes, e.g. vectorised vs scalar tails on CPU or
parallel scans on CUDA; a token can then differ only if the draw lands within that rounding of
a CDF boundary, or between exactly tied logits.)
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import Tensor

from server.model.state import index_on, to_device

TOPK_CAP = 1024  # larger k (or top-k off with top-p on) falls back to a full sort
GREEDY_BELOW = 1e-5  # smaller temperatures are greedy: logits / 1e-38 overflow float32

_MASK64 = (1 << 64) - 1


def wrap_seed(v: int) -> int:
    """Any integer -> the int64 with the same low 64 bits (for `SamplingBatch.seed`). A numpy
    integer (``Task.check_params`` takes any) is made a Python int first: its ``&`` with the
    64-bit mask overflowed, and the step loading it failed every task in the batch."""
    v = operator.index(v) & _MASK64
    return v - (1 << 64) if v >= 1 << 63 else v


_GAMMA = wrap_seed(0x9E3779B97F4A7C15)
_MIX1 = wrap_seed(0xBF58476D1CE4E5B9)
_MIX2 = wrap_seed(0x94D049BB133111EB)


def _shr(x: Tensor, s: int) -> Tensor:
    """Logical right shift of int64 (torch's `>>` is arithmetic on negatives)."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def splitmix64(seed: Tensor, counter: Tensor) -> Tensor:
    """The `counter`-th (0-based) output of SplitMix64(seed), elementwise; int64 in, int64 out."""
    z = seed + (counter + 1) * _GAMMA  # int64 products wrap mod 2**64
    z = (z ^ _shr(z, 30)) * _MIX1
    z = (z ^ _shr(z, 27)) * _MIX2
    return z ^ _shr(z, 31)


def uniform(seed: Tensor, counter: Tensor) -> Tensor:
    """float64 in [0, 1) from the top 53 bits of `splitmix64(seed, counter)`."""
    return _shr(splitmix64(seed, counter), 11).to(torch.float64) * (2.0 ** -53)


@dataclass
class SamplingBatch:
    """Per-row sampling parameters and state; every tensor is indexed by row along dim 0."""

    temperature: Tensor  # [B] f32, < GREEDY_BELOW = greedy
    top_k: Tensor        # [B] i32, <= 0 = off
    top_p: Tensor        # [B] f32, >= 1 = off
    min_p: Tensor        # [B] f32, 0 = off
    presence: Tensor     # [B] f32
    repetition: Tensor   # [B] f32
    decay: Tensor        # [B] f32
    penalties: Tensor    # [B, V] f32, updated in place by sample()
    seed: Tensor         # [B] i64
    counter: Tensor      # [B] i64, incremented in place by sample()

    def __post_init__(self):
        self._plan = None  # BatchSampler's host-side row grouping, built from the parameters
        # [4, B] float64: temperature, top_k, top_p, min_p as stored above, kept equal to them by
        # the batch's owner (the engine's slot buffers) so that building the plan reads no
        # device memory (a read waits for all queued work: after a load, the prefill pass);
        # None: the plan reads the tensors
        self.host = None

    def invalidate(self) -> None:
        """Call after writing temperature/top_k/top_p/min_p in place (assign() does it itself); a
        batch with a ``host`` copy needs that written too (or set to None)."""
        self._plan = None

    @classmethod
    def empty(cls, batch: int, vocab_size: int, device="cpu") -> "SamplingBatch":
        """`batch` neutral rows: temperature 1, top-k/top-p/min-p off, no penalties, seed 0,
        counter 0."""
        def full(value, dtype):
            return torch.full((batch,), value, dtype=dtype, device=device)
        return cls(
            temperature=full(1.0, torch.float32), top_k=full(0, torch.int32),
            top_p=full(1.0, torch.float32), min_p=full(0.0, torch.float32),
            presence=full(0.0, torch.float32),
            repetition=full(0.0, torch.float32), decay=full(1.0, torch.float32),
            penalties=torch.zeros(batch, vocab_size, dtype=torch.float32, device=device),
            seed=full(0, torch.int64), counter=full(0, torch.int64))

    @property
    def batch_size(self) -> int:
        return self.temperature.shape[0]

    def select(self, idx) -> "SamplingBatch":
        """New batch holding rows `idx` (a copy)."""
        idx = index_on(idx, self.temperature.device)
        return SamplingBatch(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def assign(self, idx, other: "SamplingBatch") -> None:
        """Rows `idx` <- rows 0..len(idx)-1 of `other` (moved/cast as needed), in place."""
        idx = index_on(idx, self.temperature.device)
        n = idx.shape[0]
        for f in fields(self):
            dst = getattr(self, f.name)
            dst[idx] = getattr(other, f.name)[:n].to(dst.device, dst.dtype)
        if self.host is not None:  # from other's host copy, else from the rows just written
            rows = idx.cpu().numpy()
            self.host[:, rows] = (other.host[:, :n] if other.host is not None
                                  else self.read_plan_params(idx))
        self.invalidate()

    def read_plan_params(self, idx: Tensor | None = None) -> np.ndarray:
        """[4, R] float64: temperature, top_k, top_p, min_p of rows ``idx`` (all: None) read
        from the tensors in one copy (float64 holds each exactly; the read waits for queued
        work)."""
        params = (self.temperature, self.top_k, self.top_p, self.min_p)
        if idx is not None:
            params = tuple(t[idx] for t in params)
        return torch.stack([t.double() for t in params]).cpu().numpy()

    def to(self, device) -> "SamplingBatch":
        return SamplingBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def token_logprobs(logits: Tensor, targets: Tensor, top: int
                   ) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """The model's log probabilities of ``targets`` [R] under ``logits`` [R, V] (log-softmax
    in fp32, no penalty or temperature) and the ``top`` most likely tokens': ``(chosen [R],
    values [R, top], ids [R, top])`` (None, None when ``top`` is 0), on the logits' device."""
    lsm = torch.log_softmax(logits.float(), dim=-1)
    chosen = lsm.gather(1, targets[:, None])[:, 0]
    if not top:
        return chosen, None, None
    vals, ids = lsm.topk(top, dim=-1)
    return chosen, vals, ids


def min_p_filter(x: Tensor, min_p: Tensor) -> Tensor:
    """``x`` [B, V] (tempered logits) with every entry below its row's ``max + log(min_p)``
    set to -inf (a new tensor): the tokens less likely than ``min_p`` times the row's most
    likely one. A row with ``min_p`` 0 keeps every entry (its bound is -inf); the most likely
    token always stays."""
    bound = x.amax(dim=1, keepdim=True) + torch.log(min_p.float())[:, None]
    return x.masked_fill(x < bound, float("-inf"))


def _topk_low_ties(x: Tensor, kmax: int, k: Tensor) -> tuple[Tensor, Tensor]:
    """``torch.topk(x, kmax)`` [R, kmax] with equal values in column order, the lower first (as
    ``sampling_triton``'s kernels and a stable sort break ties), so that each row's first ``k``
    are one set in one order whatever ``kmax``. ``kmax`` is the largest k of the batch's top-k
    rows, and ``torch.topk`` orders and cuts ties by it: a seeded row's token changed with its
    neighbours' top_k where its logits tied (bf16 logits tie often; session 36's QA: 4 of 4
    seeded tasks changed beside a top_k 500 one, and top_k 1 could differ from greedy).
    Where a row's tie at its k-th value reaches past ``kmax`` (the (kmax + 1)-th value equals
    it: ``topk`` kept an arbitrary part of the tie), the tie's lowest columns are taken from the
    whole row. That check reads a count back, so it runs on the CPU only (on CUDA, k <= 64 runs
    in the kernels, which break ties alike; above, such a row may still follow ``topk``)."""
    V = x.shape[1]
    check = x.device.type == "cpu" and kmax < V
    vals, idx = torch.topk(x, kmax + 1 if check else kmax, dim=1)
    beyond = vals[:, -1] if check else None
    idx, by_col = torch.sort(idx[:, :kmax], dim=1)
    vals, order = torch.sort(vals[:, :kmax].gather(1, by_col), dim=1, descending=True,
                             stable=True)
    idx = idx.gather(1, order)
    if check:
        t = vals.gather(1, (k - 1)[:, None]).squeeze(1)
        for r in (beyond == t).nonzero().squeeze(1).tolist():
            g, n = int((vals[r] > t[r]).sum()), int(k[r])
            idx[r, g:n] = (x[r] == t[r]).nonzero().squeeze(1)[:n - g]
            vals[r, g:n] = t[r]
    return vals, idx


def _draw_prefix(vals: Tensor, k: Tensor, top_p: Tensor, u: Tensor) -> Tensor:
    """Inverse-CDF draw among descending-sorted candidates, truncated by top-k then top-p.

    vals: [R, K] tempered logits, descending; k: [R] candidates allowed (1..K); top_p: [R];
    u: [R] f64 in [0, 1). Returns positions [R] into dim 1.
    """
    w = torch.exp(vals - vals[:, :1])                   # [R, K], w[:, 0] == 1
    cum = torch.cumsum(w, dim=1, dtype=torch.float64)   # [R, K], nondecreasing
    pos = torch.arange(vals.shape[1], device=vals.device)
    in_k = pos[None, :] < k[:, None]                    # [R, K]
    mass_k = cum.gather(1, (k - 1)[:, None]).squeeze(1)  # [R] mass of the top-k prefix
    before = torch.nn.functional.pad(cum[:, :-1], (1, 0))  # [R, K] mass strictly before each
    limit = torch.where(top_p >= 1, torch.inf, top_p.double() * mass_k)
    n = ((before < limit[:, None]) & in_k).sum(1).clamp_(min=1)  # prefix is contiguous
    return _invert(cum, cum.gather(1, (n - 1)[:, None]).squeeze(1), u)


def _invert(cum: Tensor, total: Tensor, u: Tensor) -> Tensor:
    """First index i with cum[i] > u * total; never past the entry where cum reaches total."""
    target = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))
    idx = torch.searchsorted(cum, target[:, None], right=True).squeeze(1)
    return idx.clamp_(max=cum.shape[1] - 1)


@dataclass
class _Plan:
    groups: list  # [(draw, rows or None, kmax)] of the rows that sample
    any_greedy: bool
    k: Tensor | None  # [B] long 1..V: top-k (V when off); None without groups
    temp: Tensor | None  # [B] f32: temperature, 1 for greedy rows; None without groups
    min_p: bool = False  # a drawing row has min_p > 0: the min-p filter runs


class BatchSampler:
    """Samples one token per row; see the module docstring for the exact procedure."""

    def __init__(self, vocab_size: int, device="cpu"):
        self.vocab_size = vocab_size
        self.device = torch.device(device)
        from server.model.fused import kernel_module

        self._fused = kernel_module("sampling_triton", self.device)  # None: the torch path

    def _kernels(self, t: Tensor):
        """The Triton kernel module for work on ``t`` (a CUDA tensor, with Triton), else None:
        the torch path. Tests override it to run the kernels in Triton's CPU interpreter."""
        return self._fused if self._fused and t.is_cuda else None

    def sample(self, logits: Tensor, batch: SamplingBatch, active: Tensor | None = None,
               u: Tensor | None = None, update: bool = True) -> Tensor:
        """logits: [B, V] f32 -> tokens [B] int64; updates batch.penalties and batch.counter.

        active: optional [B] bool; rows where it is False get a token but keep their penalties
        and counter (their random stream does not advance). u: optional [B] f64, the rows'
        uniforms ``uniform(seed, counter)`` computed beforehand (``uniforms``). ``update``
        False: the penalties (their decay, the tokens' presence/repetition) and the counters are
        left to ``update`` (the engine: a token that ends its row counts in none of them).
        """
        B, V = logits.shape
        assert V == self.vocab_size and batch.batch_size == B, (logits.shape, batch.batch_size)
        plan = batch._plan if batch._plan is not None else self._make_plan(batch)
        active = None if active is None else active.to(batch.penalties.device)
        # temp: greedy rows divide by 1 (exact), so their argmax is the untempered one
        x = self._prepare(logits, batch.penalties, plan.temp)  # [B, V]
        if plan.min_p:
            x = min_p_filter(x, batch.min_p)
        if plan.any_greedy:
            tokens = x.argmax(dim=1)                                # greedy rows keep this
        else:
            tokens = torch.empty(B, dtype=torch.long, device=x.device)  # every row drawn below
        if plan.groups:
            k = plan.k                                              # [B] 1..V
            u = uniform(batch.seed, batch.counter) if u is None else u  # [B] f64
            for draw, rows, kmax in plan.groups:
                if rows is None:  # the group is the whole batch: no gather/scatter
                    tokens = draw(x, k, batch.top_p, u, kmax)
                else:
                    tokens[rows] = draw(x[rows], k[rows], batch.top_p[rows], u[rows], kmax)
        if update:
            self.update(batch, tokens, active)
        return tokens

    def update(self, batch: SamplingBatch, tokens: Tensor, active: Tensor | None) -> None:
        """Step 5 (the decay, then presence/repetition on ``tokens``) and step 6's
        ``counter += 1``, for the ``active`` rows ([B] bool, contiguous; None: all)."""
        P = batch.penalties
        f = self._kernels(P)
        if f and P.is_contiguous():  # one launch; the same bits
            f.update(P, tokens, batch.presence, batch.repetition, batch.decay, active,
                     batch.counter)
        else:
            self._update(batch, tokens, active)

    @staticmethod
    def count_forced(batch: SamplingBatch, row: int, tokens: list[int]) -> None:
        """Row ``row`` took ``tokens`` without drawing them (fed: a grammar forced them): each
        counts as a step that drew it would, the decay, its presence or repetition and
        ``counter += 1`` (``_update``), so the draws after them are the ones
        decoding them one by one gives."""
        P = batch.penalties[row]                                    # [V]
        for t in tokens:
            P.mul_(batch.decay[row])
            cur = P[t]
            P[t] = cur + torch.where(cur == 0, batch.presence[row], batch.repetition[row])
        batch.counter[row:row + 1].add_(len(tokens))

    def uniforms(self, batch: SamplingBatch, steps: int) -> Tensor | None:
        """[B, steps] f64: column s holds the uniforms of step s of a pulse, for rows active at
        that step (a row active at step s was active at every earlier step of its pulse, so its
        counter then is ``counter + s``): one computation for the pulse instead of ~20 small
        ops a step. None when no row samples (greedy rows need none)."""
        plan = batch._plan if batch._plan is not None else self._make_plan(batch)
        if not plan.groups:
            return None
        s = torch.arange(steps, device=batch.counter.device)
        return uniform(batch.seed[:, None], batch.counter[:, None] + s[None, :])

    def warm(self, logits: Tensor) -> None:
        """Run the first pass both ways (with and without temperature) on scratch penalties, and
        the top-k draw of the largest k it serves: compiles their kernels on CUDA (a server's
        warm-up; the default top_k 50 uses that variant); no effect."""
        B = logits.shape[0]
        ones = torch.ones(B, dtype=torch.float32, device=logits.device)
        for temp in (None, ones):
            self._prepare(logits, torch.zeros_like(logits, dtype=torch.float32), temp)
        f = self._kernels(logits)
        if f and f.TOPK_MAX <= self.vocab_size:  # one row compiles it all
            dev = logits.device
            f.topk_draw(logits[:1].contiguous(), f.TOPK_MAX, torch.ones(1, dtype=torch.long,
                        device=dev), torch.ones(1, device=dev),
                        torch.zeros(1, dtype=torch.float64, device=dev))

    def _prepare(self, logits: Tensor, P: Tensor, temp: Tensor | None) -> Tensor:
        """x = (logits - P) / temp (temp None: no division): steps 1 and 2. On CUDA one Triton
        pass; the same fp32 operations here."""
        f = self._kernels(logits)
        if f and P.is_contiguous():
            return f.prepare(logits.contiguous(), P, temp)
        x = logits.float() - P
        if temp is not None:
            x = x / temp[:, None]
        return x

    def _make_plan(self, batch: SamplingBatch) -> "_Plan":
        """The row groups ([(draw, rows [R] on device or None for all, kmax)] per non-empty
        group), whether any row is greedy, and the per-row k and temperature the draws use;
        one host sync unless the batch has a host copy of its parameters. Cached on the batch
        until its parameters change (assign() / invalidate())."""
        V, B = self.vocab_size, batch.batch_size
        # the three parameters from the batch's host copy, else read from the device; the
        # grouping is computed on the host in numpy (each torch op, even on a host tensor,
        # costs dispatcher time on a request's way to its first token)
        temperature, top_k, top_p, min_p = (batch.host if batch.host is not None
                                            else batch.read_plan_params())
        k_host = np.where(top_k > 0, np.minimum(top_k, V), V).astype(np.int64)
        use_topk = (top_k > 0) & (k_host <= TOPK_CAP)
        full = (k_host == V) & (top_p >= 1)  # no truncation (but min-p's -inf weights)
        group = np.where(temperature < GREEDY_BELOW, 0,
                         np.where(full, 1, np.where(use_topk, 2, 3)))
        plan = []
        for g, draw in ((1, self._full), (2, self._topk), (3, self._sorted)):
            rows = np.flatnonzero(group == g)                       # [R] host
            if rows.size:
                kmax = int(k_host[rows].max())
                # (pinned, non-blocking: a pageable upload would wait for the device, e.g.
                # for the prefill pass of the task just loaded)
                plan.append((draw, None if rows.size == B else to_device(
                    torch.from_numpy(rows), batch.penalties.device), kmax))
        k = temp = None
        if plan:  # device tensors, computed once per plan instead of every step
            k = torch.where(batch.top_k > 0, batch.top_k.clamp(max=V), V).long()
            temp = torch.where(batch.temperature < GREEDY_BELOW, 1.0, batch.temperature)
        batch._plan = _Plan(plan, bool((group == 0).any()), k, temp,
                            bool(((min_p > 0) & (group != 0)).any()))
        return batch._plan

    @staticmethod
    def _full(x: Tensor, k, top_p, u: Tensor, kmax) -> Tensor:
        """Whole distribution in vocabulary order (no sort)."""
        w = torch.exp(x - x.amax(dim=1, keepdim=True))
        cum = torch.cumsum(w, dim=1, dtype=torch.float64)
        return _invert(cum, cum[:, -1], u)

    def _topk(self, x: Tensor, k: Tensor, top_p: Tensor, u: Tensor, kmax: int) -> Tensor:
        f = self._kernels(x)
        if f and kmax <= min(f.TOPK_MAX, x.shape[1]):  # four launches
            return f.topk_draw(x.contiguous(), kmax, k, top_p, u)
        vals, idx = _topk_low_ties(x, kmax, k)                      # [R, kmax] descending
        return idx.gather(1, _draw_prefix(vals, k, top_p, u)[:, None]).squeeze(1)

    @staticmethod
    def _sorted(x: Tensor, k: Tensor, top_p: Tensor, u: Tensor, kmax: int) -> Tensor:
        vals, idx = torch.sort(x, dim=1, descending=True, stable=True)  # [R, V], ties: lower
        # column first
        return idx.gather(1, _draw_prefix(vals, k, top_p, u)[:, None]).squeeze(1)

    @staticmethod
    def _update(batch: SamplingBatch, tokens: Tensor, active: Tensor | None) -> None:
        """The decay, then presence/repetition on the sampled token; counter += 1 (active
        rows). On CUDA one Triton launch does the same (`sampling_triton.update`); this code is
        its definition."""
        P = batch.penalties                                         # [B, V]
        presence, repetition, decay = batch.presence, batch.repetition, batch.decay
        if active is not None:
            presence, repetition = presence * active, repetition * active
            decay = torch.where(active, decay, 1.0)
        P.mul_(decay[:, None])
        rows = torch.arange(P.shape[0], device=P.device)
        cur = P[rows, tokens]
        new = cur + torch.where(cur == 0, presence, repetition)
        # (an inactive row's entry is left as it is: -0.0 + 0 would write +0.0, the kernel
        # writes nothing)
        P[rows, tokens] = new if active is None else torch.where(active, new, cur)
        batch.counter.add_(1 if active is None else active.long())
