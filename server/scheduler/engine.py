"""BatchEngine: the device side of the scheduler — slot tensors, prefill and decode pulses.

Every tensor here has the slot (capacity) dimension; slot ``i`` of every tensor belongs to the same
sequence. The scheduler (no torch) decides which task sits in which slot; the engine moves data.

A pulse runs up to ``steps`` decode steps with no host synchronisation except one copy at the end.
End of generation is detected on the device: token 0, a new turn (``User`` right after ``\\n\\n``),
``max_tokens``, or a stop request (a host flag copied to the device before each step). A
finished row stops updating its state, penalties and random stream at once, so its state is
exactly "all tokens but ``current_token`` consumed", and its penalties have counted exactly
the tokens it returned (the token that ends a row adds no penalty, nor its step's decay with
a ``penalty_decay`` below 1: the sampler's update runs for the accepted tokens); its random
stream has
counted every draw, the ending one too. The pulse ends early once every row has ended
(``EndProbe``: on CUDA the host reads the rows' flags a few steps behind the device, through
events, never stalling it).

A prompt's last token is normally consumed by the first decode step, which samples the first
token. ``prefill(..., first=...)`` can feed it with the rest instead: the pass keeps that token's
logits, and the next pulse samples the row's first token from them with no decode step for it (the
row's ``current`` is still that token, so the host's bookkeeping is the same). When every live row
is such a row, the pulse's first step runs no model at all: a request's time to first token is
then its prefill pass, not a prefill pass and a decode step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from server.model.fused import kernel_module
from server.model.sampler import BatchSampler, wrap_seed
from server.model.state import rows_of, rows_on, to_device, use_device
from server.model.tokenizer import NEWLINE, NEWLINE_ENDED, TURN_NEWLINE, USER_TOKEN
from server.scheduler.copyback import CopyBack
from server.scheduler.guide import Guide
from server.scheduler.logit_bias import LogitBias
from server.scheduler.logprobs import LogprobRecorder
from server.scheduler.probe import EndProbe
from server.scheduler.slots import FLOAT_PARAMS, LONG_PARAMS, SlotBuffers

EOS_TOKEN = 0
# a new turn: USER_TOKEN right after TURN_NEWLINE, or after NEWLINE that follows a token of
# NEWLINE_ENDED ("。\n" "\n" "User": the greedy encoder's "。\n\nUser"; a Chinese reply ran on
# into made-up turns before session 54). The chat format folds "\n\n" inside a message to
# "\n", so only these open a turn: "User" after one newline ("\nUser-Agent: curl", "Step 2\nUser
# clicks", "完成。\nUser") is the reply's own text (it ended the reply too, before session 35's
# QA). The check cannot wait for the ":" of "\n\nUser:": "User" would be in the state by then.
# A row's ``turn``: NO_TURN (no new turn ends it), else the token that, as ``cur``, arms the
# check besides TURN_NEWLINE: NEWLINE where the token before ``cur`` is one of NEWLINE_ENDED,
# else TURN_NEWLINE (each accepted token sets it from the ``cur`` it follows)
NO_TURN = -1  # (no token is -1)
# A prefill pass over slots that are not consecutive gathers their states into a copy (and puts
# them back after): at most this many bytes of it at once, the rest in further passes (a pass
# of 64 scattered 2.9B rows gathered 629 MiB at a served process's peak, session 63)
GATHER_BYTES = 256 << 20

# SamplingBatch field -> (Task attribute, dtype) copied into a slot when a task is loaded
TASK_PARAMS = {
    "temperature": ("temperature", torch.float32), "top_p": ("top_p", torch.float32),
    "min_p": ("min_p", torch.float32),
    "top_k": ("top_k", torch.int32), "presence": ("presence_penalty", torch.float32),
    "repetition": ("repetition_penalty", torch.float32), "decay": ("penalty_decay", torch.float32),
    "seed": ("seed", torch.long), "counter": ("rng_counter", torch.long),
}

# what warm_requests runs: prompt lengths fed together (1 and 2 tokens, a multiple of 16, one
# past it, one past the ln_mix split's 64 rows all told) and each sampler variant (greedy; the
# whole vocabulary; top-k buckets 2, 4, 8, 16, 32, 64 (sampling_triton.TOPK_MAX) with top-p; a
# sorted top-p; a top-k above the kernel's)
WARM_PROMPTS = (1, 2, 16, 17, 40)
WARM_SAMPLING = ([dict(temperature=0.0)]
                 + [dict(top_k=k, top_p=0.9) for k in (2, 3, 5, 9, 17, 50)]
                 + [dict(top_k=0, top_p=1.0), dict(top_k=0, top_p=0.5),
                    dict(top_k=200, top_p=1.0)])


@dataclass
class SlotTask:
    """The attributes ``BatchEngine.load`` reads, for rows that are no ``Task`` (the warm-up's
    throwaway requests, benchmarks): a fresh task with the seed's penalties (the penalty values
    do not change which kernels run)."""
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    presence_penalty: float = 0.5
    repetition_penalty: float = 0.0
    penalty_decay: float = 0.996
    seed: int = 1
    rng_counter: int = 0
    state: object = None
    penalties: object = None
    logprobs: int | None = None  # (``Task.logprobs``)


# the engine's slot -> value maps: they follow their rows when slots move (``resize``) and lose
# them when a slot is freed (``free``, ``load``) or the engine released
SLOT_MAPS = ("_first", "_logprobs", "_bias", "_constraints")


class RowsMoved(RuntimeError):
    """``resize`` failed part way through an in-place compaction: live rows may have moved
    while the caller's slot map has not (no failed growth to go on from: a fault)."""


# reasons a row ended, as stored in PulseResult.reason. REASON_NONFINITE: the model's logits
# at the row's drawn token were NaN or infinite (its state overflowed or was imported broken:
# every later token would be garbage); the token is not accepted, the scheduler fails the task
RUNNING, REASON_EOS, REASON_LENGTH, REASON_STOP, REASON_NONFINITE = 0, 1, 2, 3, 4


@dataclass
class PulseResult:
    """Host copies of one pulse's outcome (rows = slots)."""

    tokens: list[list[int]]  # accepted tokens per slot, in order
    reason: list[int]  # RUNNING / REASON_* per slot
    current: list[int]  # next input token per slot (valid unless reason == REASON_EOS)
    steps: int  # decode steps run (fewer than asked once a stop request ended every row)
    # slot -> an entry per accepted token, for the slots whose task asked (logprobs.py)
    logprobs: dict = field(default_factory=dict)
    # slot -> the tokens its grammar forces next, for rows that paused for them (guide.py)
    forced: dict = field(default_factory=dict)
    # slots of the REASON_EOS rows that a new turn ended ("User" drawn, not end-of-text)
    turns: set = field(default_factory=set)


def accepted(out, valid) -> list[list[int]]:
    """Each row's accepted tokens (``out[i][valid[i] != 0]``, in order) from [rows, steps]
    numpy arrays: one selection and one ``tolist`` for the whole pulse. Per row through torch
    (a boolean index and a ``tolist`` each) it took ~9 ms at 1,024 rows on a slow CPU, with the
    device idle until the next pulse."""
    mask = valid != 0
    flat = out[mask].tolist()  # row after row
    rows, i = [], 0
    for n in mask.sum(axis=1).tolist():
        rows.append(flat[i:i + n])
        i += n
    return rows


def _fill(t: torch.Tensor, rows, value) -> None:
    """``t[rows] = value`` for ``rows`` from ``rows_on``: a view's fill or ``index_fill_``,
    never ``t[idx] = scalar``, which on CUDA copies the scalar from pageable memory and waits
    for the device (``BatchEngine.load``)."""
    if isinstance(rows, slice):
        t[rows].fill_(value)
    else:
        t.index_fill_(0, rows, value)


class BatchEngine:
    """Slot tensors are views of the first ``capacity`` rows of ``SlotBuffers`` allocated for the
    largest capacity seen (see slots.py); ``resize`` within that is an in-place compaction."""

    def __init__(self, model, sampler: BatchSampler | None = None):
        self.model = model
        self.device = torch.device(model.device)
        self.vocab_size = model.cfg.vocab_size
        self.sampler = sampler or BatchSampler(self.vocab_size, self.device)
        self.capacity = 0
        self.copyback = CopyBack(self.device)
        self.gather_bytes = GATHER_BYTES  # (``prefill``)
        self._buf = SlotBuffers(model, self.vocab_size, 1, self.device)
        self._view(1)
        self._first: dict[int, torch.Tensor] = {}  # slot -> logits [V] of its prompt's last token
        self._probe_buffers = None  # the last pulse's EndProbe buffers (probe.py)
        self._params: list[tuple[list[int], dict]] = []  # loaded, not yet written (write_params)
        self._running: set[int] = set()  # live slots, as the host knows them
        self._logprobs: dict[int, int] = {}  # slot -> alternatives, where its task asks for
        # log probabilities (``Task.logprobs``; logprobs.py)
        self._bias: dict[int, dict[int, float]] = {}  # slot -> its task's ``logit_bias``
        self._constraints: dict = {}  # slot -> its task's ``constraint`` (guide.py)
        self._stop_asked = False  # a stop request came during this pulse (request_stop)
        # a step's bookkeeping in one launch each where the Triton kernels run (else None)
        self._kernels = kernel_module("pulse_triton", self.device)

    # ---- slot storage ----------------------------------------------------------------
    def _view(self, cap: int) -> None:
        """Point the slot tensors at the first ``cap`` rows of the buffers."""
        b = self._buf
        self.capacity = cap
        self.state = b.state_view(cap)  # shift [L,2,cap,C], wkv [L,cap,H,N,N]
        self._samp = b.samp_view(cap)  # read through ``samp``
        self.cur, self.n_gen, self.max_new, self.turn, self.live = (
            b.vectors[k][:cap] for k in ("cur", "n_gen", "max_new", "turn", "live"))
        self.stop_host = b.stop_host[:cap]  # [cap] host flags (pinned on CUDA)
        self.stop_dev = b.stop_dev[:cap]
        self._fparams, self._lparams, self._lvectors = b.packed_view(cap)

    def resize(self, cap: int, keep: list[int]) -> None:
        """Set the capacity to ``cap`` slots, moving rows ``keep`` to slots ``0..len(keep)-1``;
        the other slots become free. Up to the allocated rows this moves rows in place (the
        state keeps its address, so each capacity's decode graph stays valid); beyond, every
        buffer is reallocated and the graphs dropped; a failure there (out of memory) leaves the
        engine as it was. On CUDA it returns once the copies are done, so a caller's timing of
        it is the real one."""
        assert len(keep) <= cap
        self.write_params()  # (the rows they are for move now)
        if cap > self._buf.rows:
            new = SlotBuffers(self.model, self.vocab_size, cap, self.device)
            new.copy_rows(self._buf, self.capacity, keep)
            self._buf = new  # (the old buffers go with the last views of them, in _view)
            self.model.clear_graphs()
        else:
            try:
                self._buf.compact(keep)
                self._buf.neutral(len(keep), cap)
            except Exception as e:  # (rows may have moved: the engine is not as it was)
                raise RowsMoved(f"compacting the slots failed: {type(e).__name__}: {e}") from e
        self._view(cap)
        moved = {old: new for new, old in enumerate(keep)}
        self._running = {moved[s] for s in self._running if s in moved}
        for name in SLOT_MAPS:
            setattr(self, name, {moved[s]: v for s, v in getattr(self, name).items()
                                 if s in moved})
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def release(self) -> None:
        """Free the slot buffers (one free slot remains) and the captured graphs."""
        self._buf = SlotBuffers(self.model, self.vocab_size, 1, self.device)
        self.model.clear_graphs()
        self._view(1)
        self._params.clear()
        self._running.clear()
        for name in SLOT_MAPS:
            getattr(self, name).clear()

    def capture_graphs(self, max_cap: int) -> list[tuple[int, float]]:
        """Allocate ``max_cap`` rows and capture the decode graph of every power-of-two
        capacity up to it (and of ``max_cap`` itself) now (a server's warm-up), rather than in the
        first pulse at each capacity, and the model's single-sequence prefill graphs. Needs no
        live slot. Returns [(capacity, ms)] (empty without graphs)."""
        use_device(self.device)  # (the thread that warms up may not be the one that loaded)
        assert not bool(self.live.any()), "capture_graphs needs an idle engine"
        cap0 = self.capacity
        self.resize(max(max_cap, cap0), [])
        graphed = getattr(self.model, "_graphed", None)
        done = len(graphed.captures) if graphed is not None else 0
        caps = sorted({1 << i for i in range(max_cap.bit_length()) if 1 << i <= max_cap}
                      | {max_cap})  # the scheduler's capacities: powers of two and the cap
        for cap in caps if graphed is not None or self._kernels is not None else ():
            self._view(cap)
            if graphed is not None:
                idle = torch.zeros(cap, dtype=torch.bool, device=self.device)
                self.model.decode(self.cur, self.state, active=idle)  # identity steps
            self.warm_step()  # the step's Triton kernels (also when graphs are off)
        self._view(cap0)
        self.model.capture_prefill_graphs()
        return list(graphed.captures[done:]) if graphed is not None else []

    def warm_requests(self) -> int:
        """Run throwaway requests through the paths a request can take (an idle engine, after
        ``capture_graphs``): a prefill of one and of several rows (prompt lengths ``WARM_
        PROMPTS``: Triton compiles a variant of a kernel for an integer argument equal to 1 or
        divisible by 16, and the element-wise kernels another one for a few rows), its first
        token from the kept logits, then pulses of 1 and 2 steps with each sampling variant of
        ``WARM_SAMPLING`` (greedy, the whole vocabulary, each power-of-two top-k bucket, sorted
        top-p). On CUDA their kernels compile now, not in a served request: on the H200 a fresh
        server's first request with the Task API's defaults took 3.3 s, one with top_k 5 4.4 s
        (Triton compiling; session 22). The kernels take no specialisation from what was
        found to vary between requests (row counts, a pointer's alignment); ``python -m
        server.bench first`` shows a variant that still compiles in a request. Nothing is
        kept: the rows are freed. Returns the requests run."""
        use_device(self.device)
        assert not bool(self.live.any()), "warm_requests needs an idle engine"
        cap0 = self.capacity
        # prompts fed together at a captured capacity (a power of two) that holds them, as far
        # as the buffers go (capture_graphs allocated the server's max batch: never more rows
        # at once): lengths that differ (padded rows: the kernels' keep mask) and equal ones
        cap = min(1 << (len(WARM_PROMPTS) - 1).bit_length(), self._buf.rows)
        together = WARM_PROMPTS[:cap]
        runs = [(cap, together, WARM_SAMPLING[0])]
        if cap > 1:
            runs.append((cap, (WARM_PROMPTS[-1],) * 2, WARM_SAMPLING[0]))
        # each sampling variant in a lone request's capacity (an all-greedy batch, for one,
        # compiles another variant than greedy rows beside idle ones)
        runs += [(1, (WARM_PROMPTS[-1],), params) for params in WARM_SAMPLING]
        for rows, lengths, params in runs:
            self._view(rows)
            slots = list(range(len(lengths)))
            tasks = [SlotTask(**params) for _ in slots]
            self.load(slots, tasks)
            prompts = [[(7 * i + j) % (self.vocab_size - 1) + 1 for j in range(n)]
                       for i, n in enumerate(lengths)]
            self.prefill(slots, prompts, first=slots)
            self.start(slots, [p[-1] for p in prompts], [3] * len(slots))
            self.pulse(1)
            self.pulse(2)
            self.free(slots)
        self._view(cap0)
        return len(runs)

    # ---- moving tasks in and out -------------------------------------------------------
    def load(self, slots: list[int], tasks: list, cached=()) -> None:
        """Copy tasks' state and penalties into ``slots`` (not yet live) and note their sampling
        parameters, as they are now (later changes to a task do not count); not the state of
        the slots in ``cached``: the prefix cache's resumes it next (``Prefiller
        .take_at_admission``). The parameters
        reach the device in ``write_params``, which every reader of them calls first (``samp``,
        start, resize, ...): in a request's first scheduler step that is ``start``, after its
        prefill pass is queued, so their host time (~0.4 ms on the H200 machine: two uploads
        and a few scatters) overlaps the pass instead of delaying it.
        Rows are set with slices or ``index_fill_``, never ``t[idx] = scalar``: on CUDA that
        form waits for the device (the scalar is copied from pageable memory; measured on the
        H200: 100 ms behind a 100 ms kernel)."""
        column = {name: [getattr(t, attr) for t in tasks]
                  for name, (attr, _) in TASK_PARAMS.items()}
        self._params.append((list(slots), column))
        self._fill_rows(slots, (self._samp.penalties, 0.0), (self.live, False))
        fresh = [s for s, t in zip(slots, tasks) if t.state is None and s not in cached]
        if fresh:
            self.state.zero_(slots if len(fresh) == len(slots) else fresh)
        for slot, task in zip(slots, tasks):
            if task.state is not None and slot not in cached:
                self.state.assign([slot], task.state)
            if task.penalties is not None:
                self._samp.penalties[slot].copy_(task.penalties)
        self._forget(slots)
        for slot, task in zip(slots, tasks):
            if getattr(task, "logprobs", None) is not None:
                self._logprobs[slot] = task.logprobs
            if getattr(task, "logit_bias", None):
                self._bias[slot] = dict(task.logit_bias)  # (as it is now)
            if getattr(task, "constraint", None) is not None:
                self._constraints[slot] = task.constraint
        self.stop_host[rows_of(slots)] = False  # (a host tensor)

    def _fill_rows(self, slots: list[int], *fills) -> None:
        """``t[slots] = value`` for each ``(t, value)`` of ``fills`` (slot dimension first):
        through a slice for consecutive slots (no upload), else ``index_fill_`` with one upload
        of the slots for all of them."""
        rows = rows_on(slots, self.device)
        for t, value in fills:
            _fill(t, rows, value)

    @property
    def samp(self):
        """The slots' sampling rows (SamplingBatch), every parameter ``load`` noted written."""
        self.write_params()
        return self._samp

    def write_params(self) -> None:
        """Write the sampling parameters ``load`` noted (in load order: a slot loaded twice
        ends with the later task's) into the slot tensors and the sampler's host copy. The
        slots and parameters go to the device in two copies per load (a float and an integer
        table: each small copy costs tens of microseconds of host time)."""
        pending, self._params, dev = self._params, [], self.device
        for slots, column in pending:
            column["seed"] = [wrap_seed(v) for v in column["seed"]]  # its low 64 bits
            f = to_device(torch.tensor([column[n] for n in FLOAT_PARAMS], dtype=torch.float32),
                          dev)
            i = to_device(torch.tensor([slots, column["top_k"]] + [column[n] for n in LONG_PARAMS],
                                       dtype=torch.long), dev)
            idx = i[0]
            self._fparams[:, idx] = f  # the per-row parameters: one scatter per pack
            self._lparams[:, idx] = i[2:]
            self._samp.top_k[idx] = i[1].to(self._samp.top_k.dtype)
            self._buf.set_plan_params(slots, column["temperature"], column["top_k"],
                                      column["top_p"], column["min_p"])
        if pending:
            self._samp.invalidate()

    def start(self, slots: list[int], current: list[int], max_new: list[int],
              turn_stops: list[bool] | None = None, before: list | None = None) -> None:
        """Make ``slots`` live: decoding starts from ``current`` for up to ``max_new`` tokens;
        ``turn_stops`` (default: all): the rows a new turn ends (the chat format's "\n\nUser";
        not a fill-in-the-middle's code, where "User" may follow a blank line); ``before``:
        the token before each ``current`` (None: none), which may arm the new-turn check."""
        self.write_params()
        ons = turn_stops if turn_stops is not None else [True] * len(slots)
        turns = [NO_TURN if not on else NEWLINE if b in NEWLINE_ENDED else TURN_NEWLINE
                 for on, b in zip(ons, before or [None] * len(slots))]
        t = to_device(torch.tensor([slots, current, [0] * len(slots), max_new, turns],
                                   dtype=torch.long), self.device)
        idx = t[0]
        self._lvectors[:, idx] = t[1:]  # cur, n_gen = 0, max_new, turn
        self.live.index_fill_(0, idx, True)
        self._running.update(slots)

    def unload(self, slots: list[int], tasks: list, then, handed: list | None = None) -> None:
        """Send the state, penalties and random-stream position of ``slots`` home to the tasks
        without stalling the batch: the rows are gathered on the device now (before any reuse of
        the slots; in groups within a memory budget, so this may wait for earlier copies); the
        copy to host memory and ``then(tasks, error)`` — once per group, in order — happen on
        the copy-back thread (copyback.py). The caller frees the slots. ``handed``: gets each
        task once ``then`` has it (after a fault here, the others are the caller's)."""
        if slots:
            self.copyback.submit(self.state, self.samp.penalties, self.samp.counter, slots,
                                 tasks, then, handed)

    @property
    def unload_stats(self) -> list:
        """[tasks copied back, seconds the copy-back thread spent, seconds this thread waited
        for room in its budget, the copy-back's seconds to host memory, its seconds cloning]."""
        return self.copyback.stats

    def free(self, slots: list[int]) -> None:
        if slots:
            self._fill_rows(slots, (self.live, False))
            self._forget(slots)

    def _forget(self, slots) -> None:
        for s in slots:
            self._running.discard(s)
            for name in SLOT_MAPS:
                getattr(self, name).pop(s, None)

    def pause(self, slot: int, forced: list[int]) -> None:
        """The slot's row stops decoding, its state and parameters kept, to be fed ``forced``
        (its grammar's forced run: guide.py) by the prefill and started again. They count in
        its penalties and random stream as the steps that would have drawn them would."""
        self._fill_rows([slot], (self.live, False))
        self._running.discard(slot)
        self.sampler.count_forced(self.samp, slot, forced)

    def has_first(self, slot: int) -> bool:
        """The slot's prompt is fed to its end: its first token comes from kept logits."""
        return slot in self._first

    def first_logits(self, slot: int) -> torch.Tensor:
        return self._first[slot]

    def set_first(self, slot: int, logits: torch.Tensor) -> None:
        """The slot's state has consumed its prompt's last token (e.g. loaded from a cache):
        ``logits`` [V] (read, never written) are that token's; the next pulse samples from
        them."""
        self._first[slot] = logits

    def request_stop(self, slot: int) -> None:
        """The slot's row ends (REASON_STOP) at the pulse's next step; a pulse whose rows all
        ended so stops there (a stopped stream's end is not held up by the rest of it)."""
        self.stop_host[slot] = True
        self._stop_asked = True

    # ---- compute -----------------------------------------------------------------------
    @torch.no_grad()
    def prefill(self, slots: list[int], token_lists: list[list[int]], first=(),
                mid: list[int] = ()):
        """Feed ``token_lists[i]`` into the state of ``slots[i]`` (in place). For the slots in
        ``first`` the list ends with the prompt's last token: its logits are kept for the next
        pulse (module docstring); ``start`` then gets that token as ``current`` as usual.
        ``mid`` (one slot: positions in its tokens, ``RWKV7.prefill``): returns the states
        after them (a new State, a row per position), else None."""
        # longest first, the model's order: each of its passes (rows of like lengths,
        # ``pass_groups``) is then consecutive rows, views, of the slots' state or of the one
        # copy of it gathered here (each pass had copied its rows: 474 MiB of such copies at a
        # served load's peak, session 69). Slots consecutive in that order (one slot: a
        # request's prefill) are fed in place, through views: on CUDA a copy out and back is
        # four kernel launches, two before the pass
        order = sorted(range(len(slots)), key=lambda j: -len(token_lists[j]))
        slots = [slots[j] for j in order]
        token_lists = [token_lists[j] for j in order]
        sub = self.state.rows(slots)
        copied = sub is None
        if copied:
            per = max(1, self.gather_bytes // self.state.row_bytes())
            if len(slots) > per and not mid:  # (``mid``: one slot, never gathered)
                for a in range(0, len(slots), per):
                    group = slots[a:a + per]
                    self.prefill(group, token_lists[a:a + per], [s for s in group if s in first])
                return None
            sub = self.state.select(slots)
        kept = self.model.new_state(len(mid)) if mid else None
        logits = self.model.prefill(token_lists, sub, logits=bool(first), mid=list(mid),
                                    mid_state=kept)
        if copied:
            self.state.assign(slots, sub)
        for j, slot in enumerate(slots):
            if slot in first:
                self._first[slot] = logits[j]
        return kept

    @torch.no_grad()
    def pulse(self, steps: int, before_step=None) -> PulseResult:
        """Run up to ``steps`` decode steps for live slots; return what each produced.
        ``before_step(ran)`` runs on this thread before each step, ``ran`` the steps run so far
        (the scheduler applies stop requests there, so a stop takes effect within one step); a
        true result after at least one step ends the pulse there (requests waiting to be
        admitted: ``cycle._pulse``)."""
        cap, dev = self.capacity, self.device
        out = torch.zeros(cap, steps, dtype=torch.long, device=dev)  # [cap, steps]
        valid = torch.zeros(cap, steps, dtype=torch.bool, device=dev)
        reason = torch.zeros(cap, dtype=torch.long, device=dev)
        done = ~self.live  # [cap] bool, updated in place by each step
        first, self._first = self._first, {}
        if first:  # rows whose first logits came with their prefill (module docstring)
            order = sorted(first)
            rows = rows_on(order, dev)
            kept = torch.stack([first[r] for r in order])
        U = self.sampler.uniforms(self.samp, steps)  # [cap, steps] or None (all greedy)
        # a stop flag still set (a row whose first token came from its prompt's pass keeps it
        # for one step) counts as asked: its row ends in this pulse's first step
        running = list(self._running)
        self._stop_asked = bool(running) and bool(self.stop_host[running].any())
        applied, ran = None, 0
        probe = EndProbe(done, running, self._probe_buffers) if running else None
        if probe is not None:
            self._probe_buffers = probe.buffers  # (reused by the next pulse of this capacity)
        lp = LogprobRecorder(self._logprobs, dev) if self._logprobs else None
        bias = LogitBias(self._bias, dev) if self._bias else None
        # (a constrained task still being prefilled takes no token: no masks, no wait for it)
        constrained = {s: c for s, c in self._constraints.items() if s in self._running}
        guide = (Guide(constrained, self.vocab_size, dev, EOS_TOKEN,
                       fast={s for s in constrained if s not in self._logprobs})
                 if constrained else None)
        for s in range(steps):
            if before_step is not None and before_step(ran) and ran:
                break  # the scheduler has work for the pulse's end (arrivals to admit)
            if guide is not None and guide.pause_due:
                break  # a row's grammar forces a run of tokens: fed at once (guide.py)
            if applied is not None and bool(applied[running].all()):
                break  # the last step ended every row at a stop request: no more tokens come
            if probe is not None and probe.ended():
                break  # every row has ended (end of text, max_tokens): none would take a token
            if dev.type == "cuda":
                self.stop_dev.copy_(self.stop_host, non_blocking=True)
            # (a stop reaches its row in this step: known without reading the device)
            applied = self.stop_host.clone() if self._stop_asked else None
            ran += 1
            kept_step = s == 0 and bool(first)
            if kept_step and applied is not None:
                applied[order] = False  # (no stop before their first token: the next step)
            # rows whose state has consumed ``current`` (kept step): no stop before a token
            active = self._step_begin(done, reason, rows if kept_step else None)
            if kept_step:
                logits = self._first_logits(first.keys(), rows, kept, active)
            else:
                # [cap, V], read by the sampler before the next step's decode
                logits = self.model.decode(self.cur, self.state, active=active, borrow=True)
            x = logits if bias is None else bias.apply(logits)
            tok = self.sampler.sample(x if guide is None else guide.apply(x), self.samp,
                                      active=active, u=None if U is None else U[:, s],
                                      update=False)  # [cap]
            if lp is not None:
                lp.record(logits, tok)
            self._step_end(tok, logits, active, done, reason, out, valid, s)
            if guide is not None:
                guide.record(tok, valid[:, s])
            # penalties count the tokens accepted: not the one that ends a row (end-of-text, a
            # new turn), neither returned nor fed; it counted, and a continue after it started
            # from other penalties than the same tokens fed from scratch ("User" penalised
            # after a turn; session 42's QA). (cap 1: a view of the column, no copy)
            self.sampler.update(self.samp, tok, valid[:, s].contiguous())
            if probe is not None:
                probe.record()
        # the ending token's draw was made: its row's random stream moves past it (``update``
        # counted the accepted draws only), or a continue's first token reused that uniform,
        # biased to where the ending token lay (session 42's review). Once a pulse, not a step
        self.samp.counter.add_(reason == REASON_EOS)
        self.live &= ~done
        packed = torch.cat([out, valid.long(), reason[:, None], self.cur[:, None]], 1)
        packed = packed.cpu().numpy()  # the pulse's one synchronisation
        if guide is not None:
            guide.finish()
        ok, reasons = packed[:, steps:2 * steps], packed[:, 2 * steps].tolist()
        # a row's accepted tokens are its first steps': the step after them drew its ending
        # token, left in ``out`` (a new turn's "User" or end-of-text)
        turns = {r for r, why in enumerate(reasons)
                 if why == REASON_EOS and packed[r, ok[r].sum()] == USER_TOKEN}
        res = PulseResult(accepted(packed[:, :steps], ok), reasons, packed[:, -1].tolist(),
                          ran, {} if lp is None else lp.result(ok),
                          {} if guide is None else guide.forced_runs(), turns)
        self._running = {s for s in self._running if res.reason[s] == RUNNING}
        return res

    def warm_step(self) -> None:
        """Run a pulse step's sampling and bookkeeping at the current capacity with every row
        taken as done: nothing changes (no row is active: penalties decay by 1 and gain 0,
        counters gain 0, no token is accepted), but on CUDA their Triton kernels are compiled
        for this capacity now (a server's warm-up) rather than in a request's first pulse."""
        cap, dev = self.capacity, self.device
        done = torch.ones(cap, dtype=torch.bool, device=dev)
        reason = torch.zeros(cap, dtype=torch.long, device=dev)
        out = torch.zeros(cap, 1, dtype=torch.long, device=dev)
        valid = torch.zeros(cap, 1, dtype=torch.bool, device=dev)
        self._step_begin(done, reason, torch.zeros(1, dtype=torch.long, device=dev))
        active = self._step_begin(done, reason, None)
        logits = torch.zeros(cap, self.vocab_size, dtype=torch.float32, device=dev)
        tok = self.sampler.sample(logits, self.samp, active=active)
        self.sampler.warm(logits)
        self._step_end(tok, logits, active, done, reason, out, valid, 0)

    def _step_begin(self, done, reason, nostop_rows) -> torch.Tensor:
        """A step's start: rows with a stop request (except ``nostop_rows``) end with
        REASON_STOP; returns the step's active rows [cap] bool (live, not done, not stopped)."""
        if self._kernels is not None:
            active = torch.empty_like(done)
            nostop = None
            if nostop_rows is not None:
                nostop = torch.zeros_like(done)
                _fill(nostop, nostop_rows, True)
            self._kernels.step_begin(self.stop_dev, nostop, done, reason, active, REASON_STOP)
            return active
        # one snapshot per step: on the CPU stop_dev is the host tensor, which stop() may flip
        # between these lines (a row would end with no reason and never be released)
        stop = self.stop_dev.clone()
        if nostop_rows is not None:
            _fill(stop, nostop_rows, False)  # (on CUDA without the fused kernels: no wait)
        reason.masked_fill_(~done & stop, REASON_STOP)
        return ~done & ~stop

    def _step_end(self, tok, logits, active, done, reason, out, valid, s: int) -> None:
        """A step's end, for the sampled ``tok`` [cap] drawn from ``logits`` [cap, V] (the
        model's, before any bias or grammar mask): end of generation (EOS, a new turn, or
        max_tokens; REASON_NONFINITE where the model's logit of the drawn token is NaN or
        infinite: one value a row, no pass over the logits) into ``reason`` and ``done``;
        accepted tokens into column ``s`` of ``out``/``valid``, ``cur`` and ``n_gen``."""
        if self._kernels is not None:
            self._kernels.step_end(tok, logits, self.cur, active, self.n_gen, self.max_new,
                                   self.turn, done, reason, out, valid, s, EOS_TOKEN,
                                   USER_TOKEN, REASON_EOS, REASON_LENGTH, REASON_NONFINITE,
                                   TURN_NEWLINE, NEWLINE, NEWLINE_ENDED)
            return
        broken = active & ~torch.isfinite(logits.gather(1, tok[:, None]).squeeze(1))
        on = self.turn != NO_TURN
        armed = on & ((self.cur == TURN_NEWLINE) | (self.cur == self.turn))
        is_eos = (tok == EOS_TOKEN) | ((tok == USER_TOKEN) & armed)
        ok = active & ~is_eos & ~broken
        out[:, s] = tok
        valid[:, s] = ok
        self.n_gen += ok
        ended = (self.cur == NEWLINE_ENDED[0]) | (self.cur == NEWLINE_ENDED[1]) | (
            self.cur == NEWLINE_ENDED[2])
        self.turn.copy_(torch.where(ok & on, torch.where(ended, NEWLINE, TURN_NEWLINE),
                                    self.turn))
        self.cur.copy_(torch.where(ok, tok, self.cur))
        reason.masked_fill_(active & is_eos, REASON_EOS)
        reason.masked_fill_(broken, REASON_NONFINITE)
        reason.masked_fill_(ok & (self.n_gen >= self.max_new), REASON_LENGTH)
        done |= ~active | is_eos | broken | (self.n_gen >= self.max_new)

    def _first_logits(self, first_slots, rows, kept, active):
        """The first step's logits: ``kept`` [len(first_slots), V] for ``rows`` (those slots, in
        order: a slice where they are consecutive, else their device indices); a decode step
        for the other live rows, if any (``rows`` stay as they are in it)."""
        if len(first_slots) == self.capacity:  # every row's logits are kept (in slot order)
            return kept
        if self._running <= first_slots:
            logits = torch.zeros(self.capacity, self.vocab_size, dtype=kept.dtype,
                                 device=self.device)
        else:
            others = active.clone()
            _fill(others, rows, False)
            logits = self.model.decode(self.cur, self.state, active=others)
        logits[rows] = kept
        return logits
