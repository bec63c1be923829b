"""Prefiller: feeds admitted tasks' prompt tokens into their slots, within a per-step token
budget, and — with a ``PrefixCache`` — reuses and records prefix states.

All but the last token of a prompt are prefilled; the last one too when the round that reaches the
end has room for it and the task will decode (``max_tokens > 0``): the engine then keeps its logits
and the first token is sampled from them (engine.py), so a prompt's first token costs one model
call, not a prefill call and a decode step. The task's bookkeeping stays "history + current":
the last token stays ``pending`` (the scheduler makes it ``current_token``).

The budget goes to the tasks with the fewest tokens left first, but to one left unfed
``AGE_STEPS`` steps in a row before the others (``_order``): a short request is not held behind
a long prompt, nor a long prompt behind short ones that keep coming.

Without a cache (or a disabled one) it is the plain loop: each task in that order gets up to the
remaining budget of its ``pending``, all in one batched ``engine.prefill``.

With a cache, a task whose ``cache_origin`` is set (not None: its state is its origin's state
after exactly ``history``) is *eligible*. Its sequence ``history + pending`` is hashed once, and:

* **jump**: when first seen (and after waiting, below), the longest cached prefix beyond
  ``history`` (short of the last token, or the whole prompt with its logits for a task that
  decodes) is loaded into its slot; those tokens (but the last) move from
  ``pending`` to ``history`` without being computed. The first lookup is made at admission
  for a task holding a state of its own (``find_at_admission``): a jump short of its
  prompt's end is taken there, and the engine does not load that state into the slot first
  (a template's, from host memory).
  A jump to all but the last token leaves that token to a pass of its own (``_last_alone``)
  for a task that decodes, as part of a pass it is without the cache;
* **checkpoints**: positions where its state is worth keeping and feeding stops — the end of
  its prompt (all but the last token; when the round feeds the last token too, the whole prompt
  is stored instead, with the last token's logits: the same prompt again starts decoding at
  once) and branch points (where its tokens part from a task in flight or recently seen: a
  prefix others share; a branch just after a turn boundary, closer than ``min_tokens``, is that
  boundary). Feeding runs in rounds that stop at each task's next checkpoint; the state there is
  copied into the cache. Every checkpoint costs a model call of its own (fixed costs that
  dominate a short prefill's time to first token), so there are few;
* **later**: the first and the last ``\\n\\n`` token, or ``\\n`` after ``。\\n`` (``_turn_ends``;
  chat turn boundaries: the end of a system prompt, which other chats load; the conversation up
  to the last message, which the next turn re-sends) are wanted by *later* requests, not this
  one, so feeding does not stop there unless a task in flight shares them (then they are branch
  points). A round of one task takes the
  ones it passes out of its own pass (``_export_points``: ``RWKV7.prefill``'s ``mid``, the bits
  a pass ending there leaves) and stores them; a round of several tasks (one batched pass) keeps
  a copy of the state each started from, and after a step's pulse, once the task is past its
  prefill (its first token out), ``run_later`` computes the boundary states from that copy in
  passes of their own and stores them. Every chat turn prefills in one call before its first
  token, and computes its tokens once when it is fed alone (at most ``LATER_MAX`` later jobs
  wait; a feed that would add one more stops at its first boundary instead, a checkpoint like
  the others, except in a pass whose states are not kept: there the stop would keep nothing,
  and the boundaries past the room are lost);
* **one leader per prefix**: in a round, only the first task heading for a given checkpoint key
  feeds; the others wait, and jump from the cache once the leader has stored it (a shared system
  prompt is prefilled once even when 64 requests arrive together).

**next turn** (``queue_warm``): a chat reply's history as the client will re-send it, computed
after a pulse when the scheduler has time, so the next turn prefills only its new message
(``later.py``, with the deferred boundary jobs above).

``on_release`` stores a finishing task's state under its whole ``history`` (a conversation's turn
boundary, or a completion the client extends), unless the task says ``cache_finish = False``.

**exact** (a split-invariant model, the default: ``align`` = its ``prefill_align``, else 1):
the model's prefill gives the same bits however a sequence is cut into passes at multiples of
``align`` tokens from its starting state (the zero state, or a template's: positions count from
its origin's history length, ``origin_base``), so the prefiller cuts and resumes only there: a
feed cut by the budget ends at a multiple of ``align`` (the rest waits for the next step),
branch points and ``later`` points move down to one, a lookup resumes only such a state (or the
whole prompt, with its logits), a next-turn prefix is stored at the multiple before its end,
states no lookup would resume are not kept, and ``on_release`` keeps nothing (decode computed
the generated tokens' state, with other bits than a prefill of them). A task that came with
history of another length, or with tokens its state consumed through decode steps
(``Task.state_decoded``: a fork or continue of a task that generated, or of one fed from such
a history, wherever that feed ended), computes from its own state, neither storing nor
jumping nor stopping before its prompt's end (``_Seq.canonical``): a cached state would give
other bits than that state gives. A cached prompt then ends in the bits an uncached one does
(docs/prefix_cache.md).
"""

from __future__ import annotations

import time
from array import array
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from server.model.cuda_graph import MID_POINTS
from server.model.tokenizer import (NEWLINE, NEWLINE_ENDED, TURN_NEWLINE,
                                    common_prefix_length)
from server.scheduler.later import LATER_MAX, LaterWork
from server.scheduler.prefix_cache import PrefixCache, common_prefix, prefix_hashes
from server.task.cache_origin import origin_base

TURN_TOKEN = TURN_NEWLINE  # "\n\n": turns of the chat format are separated by it (or NEWLINE
# after a token of NEWLINE_ENDED: "。\n" then "\n")
RECENT = 32  # sequences remembered (tokens, hashes) to find branch points and reuse hashes
IN_FLIGHT = 128  # tasks in flight a new sequence is compared with (the most recent)
AGE_STEPS = 4  # steps a prompt may go unfed before it is fed first (``Prefiller._order``)


def _turn_ends(tokens: array, lo: int, end: int) -> np.ndarray:
    """Whether each token of ``tokens[lo + 1:end]`` ends a turn's ``\\n\\n`` (the state
    before it is a turn boundary): that token, or ``\\n`` after a token ending in one."""
    ids = np.frombuffer(tokens, dtype=np.uint32)
    prev, ids = ids[lo:end - 1], ids[lo + 1:end]
    return (ids == TURN_TOKEN) | ((ids == NEWLINE) & np.isin(prev, NEWLINE_ENDED))


@dataclass(eq=False)
class _Seq:
    """An eligible task's sequence while it is being prefilled."""

    task: object
    origin: str
    tokens: array  # history + pending when first seen (uint32)
    hashes: array  # prefix_hashes(tokens)
    points: list[int] = field(default_factory=list)  # checkpoints, ascending
    later: list[int] = field(default_factory=list)  # checkpoints computed after the pulse
    looked: bool = False  # first lookup done
    missed: bool = False  # the first lookup missed (and no hit since); not counted yet
    counted: bool = False  # its hit or miss is counted (once: the counters never go down)
    waited: bool = False  # skipped the last round: another task was computing its checkpoint
    # its state is what a prefill from its origin computes (the cut rule kept: ``align``); not
    # for a task that came with history of another length (decoded, or cut elsewhere): it
    # neither stores what it computes nor jumps
    canonical: bool = True

    @property
    def end(self) -> int:
        return len(self.tokens) - 1  # the prompt's end checkpoint: all but its last token

    @property
    def base(self) -> int:
        return origin_base(self.origin)  # cuts fall at base + a multiple of align

    def fits(self, task) -> bool:
        """Still this task's sequence (a task failed and resubmitted may have changed)."""
        return self.task is task and len(self.tokens) == len(task.history) + len(task.pending)

    def add_point(self, n: int) -> None:
        if n in self.later:
            self.later.remove(n)  # another task is waiting for it: a stop now
        if n not in self.points:
            self.points.append(n)
            self.points.sort()

    def next_point(self, pos: int) -> int:
        return next(p for p in self.points if p > pos)

    def later_between(self, lo: int, hi: int) -> list[int]:
        """The ``later`` points a feed from ``lo`` tokens to ``hi`` passes (strictly inside)."""
        return [p for p in self.later if lo < p < hi]


class Prefiller(LaterWork):
    def __init__(self, engine, cache: PrefixCache | None = None, step_budget: int = 0):
        self.engine = engine
        self.cache = cache
        self.prefilled_tokens = 0  # tokens run through the model by prefill (all tasks)
        self.prefill_calls = 0  # engine.prefill calls of those (a round's tasks together; a
        # call is a model pass per prefill chunk of its longest prompt)
        self._seqs: dict[int, _Seq] = {}  # id(task) -> _Seq, tasks still prefilling
        self._recent: deque[tuple[str, array, array]] = deque(maxlen=RECENT)  # origin, tokens,
        # hashes
        LaterWork.__init__(self)
        self.boundaries_kept = 0  # later points handed out by the pass that passed them
        # this step's whole budget (``run``; until the first, the scheduler's ``prefill_chunk``:
        # admission comes first, and a budget below ``align`` means no cache lookup there)
        self._step_budget = step_budget
        self._starved: dict[int, int] = {}  # id(task) -> steps its prompt went unfed in a row

    @property
    def caching(self) -> bool:
        return self.cache is not None and self.cache.enabled

    @property
    def align(self) -> int:
        """Feeds are cut, and states resumed, only at multiples of this many tokens (1:
        anywhere): a split-invariant model's prefill then gives the same bits as without the
        cache (module docstring, "exact")."""
        model = getattr(self.engine, "model", None)
        return model.prefill_align if getattr(model, "split_invariant", False) else 1

    def _cut(self, h: int, n: int, base: int) -> int:
        """``n`` tokens from ``h``, cut back so that the feed ends at ``base`` plus a multiple of
        ``align``; 0 when that leaves none (the next step feeds it), unless a whole step's budget
        is smaller than ``align``: then ``n``, progress before exactness."""
        end = h + n
        over = (end - base) % self.align
        if over == 0 or end - over > h:
            return n - over
        return n if self._step_budget < self.align else 0

    # ---- one scheduler step ----------------------------------------------------------------
    def run(self, work: list[tuple[int, object]], budget: int) -> None:
        """Feed ``work`` (``(slot, task)`` with ``len(pending) > 1``) up to ``budget`` tokens,
        in ``_order``'s order."""
        self._step_budget = budget
        work = self._order(work)
        before = [len(task.history) for _, task in work]
        try:
            budget = self._forced(work, budget)
            prompts = [(slot, task) for slot, task in work if len(task.pending) > 1]
            if not prompts or budget <= 0:
                return
            if not self.caching or self._step_budget < self.align:
                # (a step's budget below align cuts feeds off its grid, ``_cut``: no state such
                # a feed computes is a lone pass's, and a stop at a checkpoint would be a cut
                # the server without the cache does not make: fed as without the cache)
                return self._plain(prompts, budget)
            self._run(prompts, budget)
        finally:
            self._age(work, before)

    def _forced(self, work, budget: int) -> int:
        """Feed the forced runs of constrained replies (``cycle._fast_forward``) first, each
        whole with its last token (the row's next token comes from the pass), apart from
        prompts and in passes of as many rows as keep each row's bits
        (``RWKV7.pass_keeps_bits``: on CUDA a pass of more rows than #SMs / H takes another
        WKV form): a reply's bits depend neither on the rows fed beside it nor on the budget.
        Where single-sequence passes replay CUDA graphs (``RWKV7.graphed_prefill``), a pass
        each (a run is a few to tens of tokens: its graphed pass reads the weights once, as a
        step does; an eager pass of several rows is launch-bound). Their tokens count against
        ``budget``; returns what is left."""
        model = self.engine.model
        runs = [(slot, task, None, len(task.pending)) for slot, task in work
                if task._forced_feed]
        while runs:
            k = 1 if model.graphed_prefill else len(runs)
            while k > 1 and not model.pass_keeps_bits(k):
                k -= 1
            self._feed(runs[:k])
            budget -= sum(n for *_, n in runs[:k])
            runs = runs[k:]
        return budget

    def _order(self, work: list[tuple[int, object]]) -> list[tuple[int, object]]:
        """The budget's order: the fewest tokens left first (in slot order a long prompt took
        every step's budget, and a short request admitted beside it got its first token only
        once that prompt was fed: 15 s on a CPU server with streams decoding; session 40's QA),
        but a prompt left unfed ``AGE_STEPS`` steps in a row first (short prompts arriving
        without pause held a long one back for ever; session 40's review)."""
        starved = self._starved
        return sorted(work, key=lambda w: (starved.get(id(w[1]), 0) < AGE_STEPS,
                                           len(w[1].pending)))

    def _age(self, work, before: list[int]) -> None:
        """Count the steps each prompt of ``work`` went unfed; one that waited for another
        task's checkpoint (the leader of its prefix) was not left unfed."""
        ages = {}
        for (_, task), n in zip(work, before):
            s = self._seqs.get(id(task))
            fed = len(task.history) != n or (s is not None and s.waited)
            ages[id(task)] = 0 if fed else self._starved.get(id(task), 0) + 1
        self._starved = ages

    def _run(self, work: list[tuple[int, object]], budget: int) -> None:
        self._seqs = {id(t): s for _, t in work if (s := self._seqs.get(id(t))) and s.fits(t)}
        seqs = [(slot, task, self._seq(task)) for slot, task in work]
        while budget > 0:
            for slot, task, s in seqs:
                if s is not None and (not s.looked or s.waited):
                    self._jump(slot, s)
            plan = self._plan(seqs, budget)
            if not plan:
                break
            if self.align > 1 and not self.engine.model.pass_keeps_bits(len(plan)):
                # its states are not kept: a stop at a boundary for want of a later job's room
                # would cost a call before the first token and keep nothing
                plan = self._plan(seqs, budget, room_stops=False)
                if self.engine.model.pass_keeps_bits(len(plan)):
                    # (fed on, the round lost rows: its states are kept after all, so a stop
                    # for room keeps its state again; the same tasks, with their stops)
                    fed = {id(t) for _, t, _, _ in plan}
                    plan = self._plan([w for w in seqs if id(w[1]) in fed], budget)
            for *_, s, _ in plan:  # computing its prompt without a hit: its miss counts now
                if s is not None and s.missed and not s.counted:
                    self.cache.count_lookup(hit=False)
                    s.counted = True
            budget -= sum(n for *_, n in plan)
            mid = self._export_points(plan)
            self._keep_later(plan)
            first = self._feed(plan, mid)
            kept_bits = self.align == 1 or self.engine.model.pass_keeps_bits(len(plan))
            for _, task, s, _ in plan:
                if s is not None and not (kept_bits and s.canonical):
                    # its state is not what a prefill from its origin computes: not kept, nor
                    # those of its forks and templates; also where a feed from an off-grid
                    # history ends on the grid (its next round took it for canonical: seeded
                    # replies parted from the uncached ones; session 53's review)
                    s.canonical, task.state_decoded = False, True
            for slot, task, s, _ in plan:
                h = len(task.history)
                if s is None or not s.canonical:
                    continue
                if slot in first:  # the whole prompt, with its last token's logits: only a
                    # lone pass's (the head's product rounds by a pass's row count: the same
                    # prompt alone would start from another batch's bits; without them it is
                    # kept only at a multiple of align, for longer prompts)
                    lone = len(plan) == 1 or self.align == 1
                    self._store(slot, s.origin, s.hashes, s.tokens, len(s.tokens),
                                self.engine.first_logits(slot) if lone else None)
                elif h in s.points or h in s.later:  # (a budget cut may end a round on one)
                    self._store(slot, s.origin, s.hashes, s.tokens, h)

    def _plan(self, seqs, budget: int, room_stops: bool = True) -> list[tuple]:
        """``(slot, task, seq, n)`` to feed this round: up to each task's next checkpoint, one
        task per checkpoint key. A feed that would pass a ``later`` point when ``LATER_MAX``
        jobs already wait stops there instead (a checkpoint: one more call, not a lost state),
        unless it is the round's only feed (its pass hands the points out: ``_export_points``)
        or ``room_stops`` is off (a pass whose states are not kept: ``RWKV7.pass_keeps_bits``;
        the points it passes without a job's room are lost, as the stop's state would be)."""
        plan, claimed = [], {}  # claimed: checkpoint key -> index in plan (or None)
        room = LATER_MAX - len(self._later)  # deferred jobs this round may add without a drop
        # one task to feed, on a split-invariant model: its later points (multiples of align
        # from an aligned start) come out of its own pass and need no deferred job
        alone = self.align > 1 and sum(len(t.pending) > 1 for _, t, _ in seqs) == 1
        for slot, task, s in seqs:
            n = len(task.pending) - 1
            if n <= 0:
                if n == 0 and budget > 0 and self._last_alone(slot, task, s):
                    plan.append((slot, task, s, 1))
                    budget -= 1
                continue
            key = None
            if s is not None and s.canonical:  # (before the budget: a task heading for a
                # claimed key waits; not for one that stores nothing: no leader, nor waiting)
                h = len(task.history)
                target = s.next_point(h)
                key = self.cache.key(s.origin, s.hashes, target)
                passed = s.later_between(h, min(target, h + budget))
                if passed and room <= 0 and not alone and key not in claimed and room_stops:
                    # no room: a stop
                    target = passed[0]
                    key = self.cache.key(s.origin, s.hashes, target)
                s.waited = key in claimed
                if s.waited:
                    # its leader stops short of its last token after all: the state it stores
                    # there is what this one waits for. Not on a split-invariant model: a
                    # first token decoded from the last one, not taken from the prompt's pass,
                    # has other bits than without the cache; the leader stores its whole
                    # prompt with its logits (the same prompt loads it) and the other resumes
                    # from an aligned state
                    j = claimed[key] if self.align == 1 else None
                    if j is not None:
                        lead_slot, lead, lead_s, lead_n = plan[j]
                        plan[j] = (lead_slot, lead, lead_s, min(lead_n, len(lead.pending) - 1))
                    continue
                claimed[key] = None
                if passed and target > passed[0] and not alone:
                    room -= 1  # _keep_later keeps a job for it
                n = target - h
            if budget <= 0:
                continue
            n = self._fit(task, n, budget)
            if n <= 0:
                continue
            if key is not None:
                claimed[key] = len(plan)
            plan.append((slot, task, s, n))
            budget -= n
        return plan

    def _fit(self, task, n: int, budget: int) -> int:
        """Tokens of ``task`` to feed this round: ``n``, cut by the budget at a multiple of
        ``align`` from where the feed stands (``_cut``; 0: none this step), plus its last token
        where ``_with_last`` allows it. A task on its origin's grid stays on it (each cut a
        multiple of ``align``); one off it (a state decoded, a fork of a history off the grid)
        is cut at multiples of ``align`` from its own feed's start, wherever the budget others
        left falls: cut on the origin's grid, its bits depended on that (session 51's fuzz)."""
        if n > budget:
            h = len(task.history)
            n = self._cut(h, budget, h)
            if n <= 0:
                return 0
        return self._with_last(task, n, budget)

    @staticmethod
    def _decodes(task) -> bool:
        """The task will decode once its prompt is fed (its last token may go with the prompt)."""
        return task.max_tokens > 0 and not task.stop_requested

    def _last_alone(self, slot: int, task, s: _Seq | None) -> bool:
        """A jump left the task with its last token alone (the cache held the state after all
        but it): a task that decodes feeds it in a pass of its own, and its first token comes
        from that pass, as from its prompt's pass without the cache. A decode step of the token
        has other bits: seeded replies parted from the uncached ones (session 36's QA). Only
        where the cache is exact (``align`` > 1): elsewhere the decode step costs no more."""
        return (self.align > 1 and s is not None and s.looked and self._decodes(task)
                and not self.engine.has_first(slot))

    def _with_last(self, task, n: int, budget: int) -> int:
        """``n`` tokens of ``task`` to feed, plus its last token when ``n`` reaches the end of
        all but the last and the task decodes (the first token then comes from this pass),
        one past the budget if need be: left for the next step, a lone last token went to a
        decode step (other bits than a pass), and whether it did hung on where the budget's
        cuts fell, which a cache hit moves (a prompt of 32 cached + 64 + 1 tokens at a budget
        of 64 decoded its last token, the same prompt without the cache fed it: other bits,
        a seeded reply parted; a fuzzing helper, session 49). A pass of budget + 1 is the
        model's passes of its chunk and of one token."""
        if n == len(task.pending) - 1 and self._decodes(task):
            return n + 1
        return n

    def _export_points(self, plan) -> list[int]:
        """A round of one task whose feed passes ``later`` points (a chat's first and last turn
        boundaries): they come out of the round's own pass (``RWKV7.prefill``'s ``mid``, the
        same bits as a pass ending there), taken from the later points, so no later job computes
        them again. Returns their positions in the feed (none: [])."""
        chunk = getattr(getattr(self.engine, "model", None), "prefill_align", 0)
        if len(plan) != 1 or not chunk:
            return []
        slot, task, s, n = plan[0]
        h = len(task.history)
        passed = s.later_between(h, h + n) if s is not None and s.canonical else []
        # (a pass hands out states where its WKV chunks end: a split-invariant model's points
        # are all there)
        points = [p for p in passed if (p - h) % chunk == 0][-MID_POINTS:]
        for p in points:
            s.later.remove(p)
        return [p - h for p in points]

    def _feed(self, plan, mid: list[int] = ()) -> set[int]:
        """Feed ``n`` tokens of each planned task; ``n == len(pending)`` feeds its last token too
        (its slot's first token then comes from this pass; the token stays ``pending``). Returns
        those slots. ``mid`` (a plan of one task, ``_export_points``): the states after those
        many of its tokens go to the cache."""
        first = {slot for slot, task, _, n in plan if n == len(task.pending)}
        t0 = time.perf_counter()
        kept = self.engine.prefill([p[0] for p in plan], [p[1].pending[:p[3]] for p in plan],
                                   first, mid)
        dt = time.perf_counter() - t0
        if kept is not None:
            _, task, s, _ = plan[0]
            self.boundaries_kept += len(mid)
            for k, m in enumerate(mid):
                self._store_state(s.origin, s.hashes, s.tokens, len(task.history) + m,
                                  lambda k=k: kept if len(mid) == 1 else kept.select([k]))
        self.prefill_calls += 1
        for slot, task, _, n in plan:
            fed = n - (slot in first)
            task.history.extend(task.pending[:fed])
            del task.pending[:fed]
            task.prefill_time += dt
            self.prefilled_tokens += n
        return first

    def _plain(self, work, budget: int) -> None:
        plan = []
        for slot, task in work:
            n = self._fit(task, len(task.pending) - 1, budget)
            if n > 0:
                plan.append((slot, task, None, n))
                budget -= n
        if plan:
            self._feed(plan)

    # ---- the cache ---------------------------------------------------------------------------
    def _seq(self, task) -> _Seq | None:
        """The task's _Seq (made when first seen), or None if it is not eligible."""
        s = self._seqs.get(id(task))
        origin = task.cache_origin
        if s is not None or origin is None or task._forced_feed:
            return s  # (a reply's forced run, fed mid-round: nothing the cache could give)
        tokens = array("I", task.history + task.pending)
        shares = self._shares(tokens)
        s = _Seq(task, origin, tokens, prefix_hashes(tokens, self._known_hashes(shares)),
                 canonical=(len(task.history) - origin_base(origin)) % self.align == 0
                 and not task.state_decoded)
        if s.canonical:
            self._choose_points(s, len(task.history), shares)
        else:  # it stores nothing, so it stops nowhere but at its prompt's end: a stop at a
            # branch point was a cut the server without the cache never makes (other bits, and
            # seeded replies; session 37's QA)
            s.points = [s.end]
        self._seqs[id(task)] = s
        self._recent.append((origin, tokens, s.hashes))
        return s

    def _shares(self, tokens: array) -> list[tuple[str, int, array]]:
        """``(origin, tokens it shares with tokens, hashes)`` of each recent sequence."""
        return [(o, common_prefix_length(tokens, seen), h) for o, seen, h in self._recent]

    @staticmethod
    def _known_hashes(shares) -> array | None:
        """The hashes of the recent sequence sharing the longest prefix (a chat's previous
        turn), cut to that prefix; None if none shares any."""
        _, n, hashes = max(shares, key=lambda x: x[1], default=("", 0, None))
        return hashes[:n + 1] if n else None

    def _choose_points(self, s: _Seq, start: int, shares) -> None:
        """Checkpoints of a new sequence (see the module docstring); tells sequences in flight
        about the branch points they share with it. A branch point just after a turn boundary
        (closer than ``min_tokens``) is moved to the boundary: the state worth sharing."""
        gap, align, base = self.cache.min_tokens, self.align, s.base
        lo = max(start, gap - 1)
        raw = (np.flatnonzero(_turn_ends(s.tokens, lo, s.end)) + lo + 1).tolist()
        turns = [q for q in (q - (q - base) % align for q in raw) if q > start]

        def point(m: int) -> int:
            """A branch just after a turn boundary: the boundary (told apart before aligning:
            a fork a few tokens after a boundary, aligned, may fall a chunk past it; a chat's
            next turn sent at once then stopped there, one model call more)."""
            q = max((q for q in raw if 0 <= m - q < gap), default=m)
            return q - (q - base) % align

        branch = []
        for origin, m, _ in shares:  # recent sequences
            if origin == s.origin and lo < m < s.end and (p := point(m)) > start:
                branch.append(p)
        for other in list(self._seqs.values())[-IN_FLIGHT:]:
            if other.origin == s.origin and other.canonical:
                m = common_prefix(s.hashes, other.hashes)
                if len(other.task.history) < m < other.end and m >= gap:
                    p = point(m)
                    if p > len(other.task.history):
                        other.add_point(p)  # it is ahead: it computes the shared prefix
        stops = set([min(branch), max(branch)] if branch else []) | {s.end}
        s.points = sorted(stops)
        s.later = [p for p in sorted(set(turns[:1] + turns[-1:])) if p not in stops and p >= gap]

    def find_at_admission(self, placed) -> list[tuple[int, _Seq, tuple]]:
        """At admission, before the slots are loaded: the first lookup of each eligible task of
        ``placed`` (``(slot, task)``) that holds a state of its own (a template's: 21 MB at
        2.9B, a copy from host memory) and has more than one token to feed. ``(slot, seq,
        found)`` for each that resumes a cached state short of its prompt's end: the engine
        need not load its own state before ``take_at_admission`` replaces it. A hit at the
        prompt's end (or one token short of it) is left to ``run``'s lookup (its last token's
        pass and first logits), as is every task without a state of its own: it has no load to
        spare (its slot is zeroed by a fill), and on the H200 a plain chat's cached turns were
        0.3-0.6 ms slower with their lookup here in one of two alternating runs (unexplained;
        session 38)."""
        out = []
        if not self.caching or self._step_budget < self.align:  # (fed as without the cache:
            return out  # ``run``)
        for slot, task in placed:  # (as ``_prefill``'s work: a task stopped meanwhile ends
            # as it came, its prompt not fed)
            if task.state is None or len(task.pending) <= 1 or task.stop_requested \
                    or task.cache_origin is None:
                continue
            s = self._seq(task)
            found = self._find(s)
            if found is not None and found[0] < s.end:
                out.append((slot, s, found))
            elif found is not None:
                s.looked = False
        return out

    def take_at_admission(self, resumed) -> None:
        """``find_at_admission``'s hits, once their slots are loaded."""
        for slot, s, found in resumed:
            self._take(slot, s, found)

    def _jump(self, slot: int, s: _Seq) -> None:
        found = self._find(s)
        if found is not None:
            self._take(slot, s, found)

    def _find(self, s: _Seq) -> tuple | None:
        """The longest cached state ``s`` may resume from (``PrefixCache.lookup``'s
        ``(n, state, logits)``), None if none."""
        task, first = s.task, not s.looked
        if first and self._warm:
            self._drop_warm_for(s)
        s.looked, pos = True, len(task.history)
        if not s.canonical:
            # its state is not what a prefill from its origin computes (a fork or continue of a
            # history cut off a multiple of align, or decoded): without the cache it computes
            # its prompt from that state, and a cached state would give other bits (seeded
            # replies parted from the uncached ones; session 36's QA). A miss, counted when it
            # feeds, as any task's the cache did not serve
            s.missed = s.missed or first
            return None
        whole = len(s.tokens)  # the whole prompt, with logits: only for a task that decodes
        hi = whole if self._decodes(task) else s.end
        found = (self.cache.lookup(s.origin, s.hashes, s.tokens, pos, hi, logits_at=whole,
                                   align=self.align, base=s.base) if pos < s.end else None)
        if found is None:
            s.missed = s.missed or first  # counted when it feeds (a waiter may hit first)
        return found

    def _take(self, slot: int, s: _Seq, found: tuple) -> None:
        """Resume ``s``'s task in ``slot`` from ``found`` (``_find``'s)."""
        task, pos, whole = s.task, len(s.task.history), len(s.tokens)
        n, state, logits = found
        self.engine.state.assign([slot], state)
        s.canonical, task.state_decoded = True, False
        if n == whole:  # its last token is consumed too: the first token comes from the logits
            self.engine.set_first(slot, logits)
        k = min(n, s.end) - pos  # (the last token stays pending: it becomes current_token)
        task.history.extend(task.pending[:k])
        del task.pending[:k]
        s.missed = False
        if not s.counted:
            self.cache.count_lookup(hit=True)
            s.counted = True
        self.cache.count_saved(n - pos)

    def _store(self, slot: int, origin: str, hashes: array, tokens: array, n: int,
               logits=None) -> None:
        self._store_state(origin, hashes, tokens, n, lambda: self.engine.state.select([slot]),
                          logits)

    def _store_state(self, origin: str, hashes: array, tokens: array, n: int, state,
                     logits=None) -> None:
        """The cache keeps the one-row State ``state()`` makes (called only when it is kept)
        after ``tokens[:n]`` (with the logits after them, if given), unless it has it or could
        never resume it."""
        key = self.cache.key(origin, hashes, n)
        off_rule = (n - origin_base(origin)) % self.align  # never resumed (lookup's ``align``)
        if n < self.cache.min_tokens or self.cache.contains(key, logits is not None) or (
                off_rule and logits is None):
            return  # (kept without logits, a whole prompt fed with others gains a lone pass's)
        self.cache.insert(key, tokens[:n], state(),
                          None if logits is None else logits.clone(), defer=True)

    def forget(self, task) -> None:
        """``task`` left its slot with its state lost (a fault, a NaN output): its plan goes
        (``find_at_admission`` took a resubmitted task's old plan as it was)."""
        self._seqs.pop(id(task), None)

    def on_release(self, slots: list[int], tasks: list) -> None:
        """Finishing tasks (their slots still hold their state): keep ``history``'s state
        (not with ``align`` > 1: decode computes the generated tokens' state with other bits
        than a prefill of them, so resuming it would change the next request's output)."""
        keep = self.caching and self.align == 1
        for slot, task in zip(slots, tasks):
            self._seqs.pop(id(task), None)
            origin = task.cache_origin
            n = len(task.history)
            if not keep or origin is None or not task.cache_finish \
                    or n < self.cache.min_tokens:
                continue
            tokens = array("I", task.history)
            hashes = prefix_hashes(tokens, self._known_hashes(self._shares(tokens)))
            self._store(slot, origin, hashes, tokens, n)
