"""SlotCycle: the phases of one scheduler step, over the slots (``BaseScheduler`` inherits it).

``BaseScheduler.step()`` runs, on the thread that owns the device:

- ``_drop_stopped_waiting``: waiting tasks asked to stop finish ("abort") without a slot;
- ``_admit``: waiting tasks go into free slots (growing capacity to ``target_capacity``) and
  their state is loaded;
- ``_prefill``: prompt tokens are fed (``Prefiller``), then ``_start_ready`` starts decoding the
  tasks whose prompt is fed (or finishes them: ``max_tokens=0``, stopped);
- ``_pulse``: one pulse of decode steps; tokens go to the tasks, finished ones are released;
- ``_shrink``: capacity comes down to ``target_capacity`` when fewer tasks are left.

``_release`` frees slots (tasks that keep their state finish in ``_finish_home`` once the
copy-back thread has brought it home); ``_resize`` changes capacity and compacts live slots to the
front; ``_fail_all`` fails the tasks in slots after a fault, their state restored
(``_restore_admitted``); ``_fail_broken`` fails the tasks whose model output became NaN or
infinite the same way, the batch going on.

The state it works on (``slots``, ``decoding``, ``waiting``, ``engine``, ``prefiller``, ``stats``,
``_cv``, ``_ramp``, …) and the capacity policy (``initial_capacity``, ``target_capacity``) belong
to ``BaseScheduler``, which sets them up.
"""

from __future__ import annotations

import functools
import time
import traceback

from server.scheduler.engine import (REASON_EOS, REASON_LENGTH, REASON_NONFINITE, REASON_STOP,
                                     RowsMoved)
from server.task.policy import loaded_digest, model_mismatch
from server.task.task import Status, Task, call_all

REASON_NAMES = {REASON_EOS: "stop", REASON_LENGTH: "length", REASON_STOP: "abort",
                REASON_NONFINITE: "nonfinite"}
# a task whose row ended with REASON_NONFINITE fails with this error
NONFINITE_ERROR = ("the model's output became NaN or infinite: a numeric overflow (the weights' "
                   "or the state's dtype: RWKV_DTYPE=fp32 or bf16, RWKV_STATE_DTYPE=fp32 avoid "
                   "fp16's range) or a broken imported state; the task's state is as it was "
                   "before this round")


def finish_all(items) -> None:
    """``task._finish(reason, error)`` for each ``(task, reason, error)``: every one of them,
    also when a callback raises on the way (``call_all``)."""
    call_all(functools.partial(task._finish, reason, error) for task, reason, error in items)


def ending(task: Task, reason: str, error: str | None = None) -> tuple:
    """``finish_all``'s item for a task whose row ended for ``reason``. A reply that ended at
    end-of-text because its grammar engine failed (``Constraint.error``: its row was let end
    there, guide.py) is an error naming the fault, not a reply that followed its grammar to
    its end: the client is told (a 500 / an error event) rather than given a cut-off text as
    complete; unless the reply was a whole sentence of the grammar when the engine failed
    asking what came next (``Constraint.whole_at_fault``: its end is one the grammar
    allowed). So is one that ended there with no fault and no whole sentence: the grammar
    allowed no token the model has (``_unfinished``)."""
    c = task.constraint
    fault = None
    if reason == "stop" and c is not None and not c.whole_at_fault:
        fault = c.error or _unfinished(c)
    if error is None and fault:
        return task, "error", f"the reply could not follow its grammar: {fault}"
    return task, "error" if error else reason, error


def _unfinished(c) -> str | None:
    """Why a constrained reply that ended at end-of-text, its grammar engine sound, is no whole
    sentence of its grammar (None: it is one). The grammar allows end-of-text only once the
    reply is whole, so its row ended through guide.py's fallback: the grammar allowed no token
    the model has (all past a model smaller than the tokenizer: a forced call's "arguments" is
    id 58155). A cut-off text, not a reply to hand out as complete (it went out as "stop")."""
    if c.complete:
        return None
    return "the grammar allowed no token of the model's vocabulary here"


class SlotCycle:
    """Admission, prefill, pulses, release, resizing and faults: host bookkeeping of the slots."""

    def _drop_stopped_waiting(self) -> None:
        with self._cv:
            stopped = [t for t in self.waiting if t.stop_requested]
            for t in stopped:
                self.waiting.remove(t)
        finish_all((t, "abort", None) for t in stopped)

    def _admit(self) -> None:
        with self._cv:
            if not self.waiting:
                return
            used = [i for i, t in enumerate(self.slots) if t is not None]
            target = self.target_capacity(len(used) + len(self.waiting))
            if target > self.capacity:
                # the parameters earlier loads noted, written first and outside the try: a
                # fault writing them is the tasks' (step() fails them), not a failed growth
                # (it would be swallowed below, and the tasks run with the rows' old values)
                self.engine.write_params()
                try:
                    self._resize(target, used)
                    self._grow_failed = None
                except RowsMoved:  # an in-place growth moved rows before failing: a fault
                    raise  # (step() fails the tasks in slots and resets the engine)
                except Exception as e:  # (out of memory) the engine is as it was: admit into
                    # the slots there are; raising would fail the tasks in slots and leave the
                    # waiting ones waiting, every step again, forever
                    self._grow_failed = self.capacity  # (no early pulse end for them: _pulse_check)
                    self.log.error(f"Growing capacity {self.capacity} -> {target} failed, "
                                   f"going on at {self.capacity}: {type(e).__name__}: {e}")
            free = [i for i, t in enumerate(self.slots) if t is None]
            batch = [self.waiting.popleft() for _ in range(min(len(free), len(self.waiting)))]
            # off the queue and not yet in a slot: still counted against max_queue
            self._admitting = len(batch)
        taken, fit = batch, None
        try:
            fit, unfit = self._split_unfit(batch)
            finish_all(unfit)
            batch = fit
            slots = free[: len(batch)]
            # in a slot and off the admitting count in one step under the lock: counted twice
            # between the two, a full queue's check refused a task there was room for (and
            # named more busy slots than there are; session 28's QA)
            with self._cv:
                for slot, task in zip(slots, batch):  # in a slot before loading: a fault
                    self.slots[slot] = task  # fails them
                    # what the task's CPU state stands for, restored if a fault loses the slot
                    task._admitted_as = (len(task.history), list(task.pending),
                                         task.current_token, task.state_decoded)
                    task._forced_feed = False  # (its pending tokens: a prompt, not a forced run)
                self._admitting = 0
                # a shutdown() under way stopped the queue and the slots, not these (off the
                # queue, not yet in a slot then): a run() on another thread decoded them on
                stopping = self._stopping
            if stopping:
                for task in batch:
                    task.stop()
        except BaseException as e:  # the tasks taken off the queue, neither refused nor in a
            # slot, were held by no scheduler (their wait() never returned; session 34's review)
            with self._cv:  # (not a refused one: its callback may have queued it again)
                placed = {id(t) for t in self.slots if t is not None}
                left = [t for t in (taken if fit is None else fit) if id(t) not in placed]
                if not isinstance(e, Exception):  # Ctrl-C in run(): they wait again, first
                    self.waiting.extendleft(reversed(left))
            if isinstance(e, Exception):  # a fault: they end with it (the step's handler
                finish_all((t, "error", f"{type(e).__name__}: {e}") for t in left)  # fails
            raise  # those in slots; queued again, they met the same fault every step)
        finally:
            with self._cv:
                self._admitting = 0  # (also when a check above raised)
        if not batch:
            return
        self.stats.on_admit(batch)  # (its prompt tokens: before a resume consumes some)
        # a task that resumes a cached state has it loaded instead of its own (a template's)
        resumed = self.prefiller.find_at_admission(zip(slots, batch))
        self.engine.load(slots, batch, cached={slot for slot, *_ in resumed})
        self.prefiller.take_at_admission(resumed)
        for task in batch:
            task.status = Status.PREFILL if task.needs_prefill else Status.READY
            task._t_admit = time.perf_counter()

    def _split_unfit(self, batch: list[Task]) -> tuple[list[Task], list]:
        """(fit, unfit): the tasks whose state and next tokens fit the model, and ``(task,
        "error", why)`` for the others (``model_mismatch``: ids past the vocabulary, a state
        stored with another model; ``Task.sampling_problem``: parameters set after
        ``add_task``), to be finished before any is loaded. Loaded, such a task
        failed every task of the step (an index error in the first pass). Checked here, on
        this thread, not in ``add_task``: the API checked its prompts already, and its event
        loop would scan each task's tokens again."""
        cfg, fit, unfit = self.engine.model.cfg, [], []
        digest = loaded_digest(self.loader)
        for task in batch:
            problem = model_mismatch(task, cfg, digest)
            if problem:
                unfit.append((task, "error", f"task {task.task_id} does not fit the model: "
                                             f"{problem}"))
            elif problem := task.sampling_problem(cfg.vocab_size):  # (changed after add_task)
                unfit.append((task, "error", problem))
            else:
                fit.append(task)
        return fit, unfit

    def _prefill(self) -> None:
        """Feed pending prompt tokens of admitted tasks, within the budget (``Prefiller``: with
        a prefix cache, cached prefixes are loaded instead of computed; the last token goes
        with the rest when it fits, and the first token then comes from that pass)."""
        work = self._being_fed()
        if work:  # (in the order ``Prefiller.run`` gives the budget: fewest tokens left first)
            self.prefiller.run(work, self.prefill_chunk)
        self._start_ready()

    def _being_fed(self) -> list[tuple[int, Task]]:
        """``(slot, task)`` of the slots whose prompt has tokens left to feed (all but the
        last) and that were not asked to stop."""
        return [(slot, task) for slot, task in enumerate(self.slots)
                if task is not None and slot not in self.decoding and len(task.pending) > 1
                and not task.stop_requested]

    def _start_ready(self) -> None:
        start, finish = [], []
        for slot, task in enumerate(self.slots):
            if task is None or slot in self.decoding:
                continue
            # A slot whose prefill fed the prompt's last token too (its first token comes from
            # that pass) has consumed it: it must start, so that the token is counted as fed
            # (a stop then ends it after one token). Others stop within one step, mid-prompt too
            # (the rest of the prompt stays pending).
            merged = self.engine.has_first(slot)
            if task.stop_requested and not merged:
                finish.append(slot)
                continue
            if len(task.pending) > 1:
                continue
            if task.pending:
                task.current_token = task.pending.pop()
            if not task._forced_feed:  # (one going on after a forced run stays RUNNING: a
                task.status = Status.READY  # client polling /status saw it go back)
            if not merged and (task.max_tokens <= 0 or task.current_token is None):
                finish.append(slot)
            else:
                start.append(slot)
        for slot in finish:
            task = self.slots[slot]
            reason = "abort" if task.stop_requested else "length" if task.max_tokens <= 0 else "stop"
            self._release([slot], reason)
        if start:
            tasks = [self.slots[s] for s in start]
            # (a row that was fed its grammar's forced run goes on with what its round has left)
            resumed = [t._forced_feed for t in tasks]
            self.engine.start(start, [t.current_token for t in tasks],
                              [t._max_new - len(t.output) if again else t.max_tokens
                               for t, again in zip(tasks, resumed)],
                              [t.stop_at_turn for t in tasks],
                              [t.history[-1] if t.history else None for t in tasks])
            for t, again in zip(tasks, resumed):
                t.status = Status.RUNNING
                if again:
                    t._forced_feed = False
                    continue
                t._t_gen = time.perf_counter()
                t._max_new = t.max_tokens  # the round's end, as the engine has it (_pulse)
            # the pulses ramp from 1 step (``_pulse``), unless tasks already decoding ramped
            # less than ``ramp_gap`` steps ago (then the newcomers join that ramp), or the rows
            # are only ones going on after a fed forced run (their text is out already)
            if not all(resumed) and (not self.decoding or self._since_ramp >= self.ramp_gap):
                self._ramp, self._since_ramp = 1, 0
            self.decoding.update(start)

    def _pulse(self) -> None:
        # Right after tasks start, pulses ramp up 1, 2, 4, ... steps to buffer_size: the first
        # token reaches its reader at once, and text that needs a few tokens before any of it
        # can be shown (a chat reply's ">" closing the think tag, a character split over
        # tokens, a held-back "\n" that may start a stop string) follows within ~2x the steps
        # it needs, instead of after a whole buffer_size pulse. A handful of extra pulses per
        # start; steady decoding runs buffer_size steps a pulse.
        steps = min(self._ramp, self.buffer_size)
        self._ramp = min(2 * steps, self.buffer_size)
        # no more steps than the longest remaining max_tokens: a step gives a row one token at
        # most, so every row ends within them (the rest ran idle, holding the replies' end)
        # (the round's max_tokens as it started: one lowered by hand meanwhile is not the
        # engine's, and made every later pulse a single step; session 29's review)
        steps = min(steps, max(self.slots[s]._max_new - len(self.slots[s].output)
                               for s in self.decoding))
        self._since_ramp += steps
        kept = {s for s in self.decoding if self.engine.has_first(s)}  # current: fed by prefill
        t0 = time.perf_counter()
        res = self.engine.pulse(steps, before_step=self._pulse_check())
        dt = time.perf_counter() - t0
        steps = res.steps  # (fewer than asked when stop requests ended every row)
        self.iteration += 1
        n_tok = sum(len(res.tokens[s]) for s in self.decoding)
        active = len(self.decoding)
        stat = dict(iter=self.iteration, cap=self.capacity, active=active, tokens=n_tok,
                    seconds=dt, steps=steps)
        self.pulses.append(stat)
        now = time.perf_counter()
        level = "INFO" if now - self._last_info >= 1.0 else "DEBUG"  # progress, ~1 line/s
        if level == "INFO":
            self._last_info = now
        self.log.log(level, f"Iter {self.iteration} cap={self.capacity} active={active} "
                     f"speed={n_tok / dt:.2f} tok/s per_task={n_tok / dt / max(active, 1):.2f} tok/s")
        finished: dict[str, list[int]] = {}
        for slot in sorted(self.decoding):
            task, toks = self.slots[slot], res.tokens[slot]
            reason = res.reason[slot]
            n_fed = len(toks) + (reason == REASON_EOS)
            task.history.extend(([task.current_token] + toks)[:n_fed])
            if n_fed > (slot in kept):  # a token went into the state through a decode step
                task.state_decoded = True
            task.current_token = None if reason == REASON_EOS else res.current[slot]
            task.gen_time = time.perf_counter() - task._t_gen
            self.stats.on_tokens(task, len(toks), dt, steps, steps - (slot in kept))
            task._append_output(toks, res.logprobs.get(slot))
            if reason:
                task.ended_at_turn = slot in res.turns
                finished.setdefault(REASON_NAMES[reason], []).append(slot)
            elif slot in res.forced:
                self._fast_forward(slot, res.forced[slot])
        broken = finished.pop("nonfinite", None)
        if broken:
            self._fail_broken(broken)
        for name, slots in finished.items():
            self._release(slots, name)

    def _fast_forward(self, slot: int, forced: list[int]) -> None:
        """The slot's grammar forces ``forced`` next (guide.py): they join its reply now and
        the next step's prefill feeds them (from its last token, not fed yet) apart from
        prompts (``Prefiller._forced``); the row starts again once they are in
        (``_start_ready``). At least one token of the round is left to decode (its last comes
        from a step, as it would). A row asked to stop stops instead."""
        task = self.slots[slot]
        forced = forced[:task._max_new - len(task.output) - 1]
        if not forced or task.stop_requested:
            return
        self.engine.pause(slot, forced)
        self.decoding.discard(slot)
        for token in forced:  # (its grammar's: the tokens it forced)
            task.constraint.accept(token)
        task.pending = [task.current_token] + forced
        task.current_token, task._forced_feed = None, True  # (its status stays RUNNING)
        self.stats.on_tokens(task, len(forced), 0.0, 0, 0)  # (generated: /metrics counts them)
        task._append_output(forced)

    def _pulse_check(self):
        """``engine.pulse``'s ``before_step``: apply stop requests; end the pulse once it has
        run ``admit_wait`` steps while a task waits that a slot (or a larger capacity) could
        take, or a prompt to score has arrived. Without it a task arriving mid-pulse waited for
        the rest of the pulse (up to ``buffer_size`` steps: ~80 ms at 2.9B on the H200, over a
        second on a CPU)."""
        # (not a larger capacity this step's growth failed to reach: the next step's fails
        # too, and every pulse was cut to admit_wait steps while the task waited)
        grow = self.capacity < self.max_batch_size and self._grow_failed != self.capacity
        room = grow or any(t is None for t in self.slots)
        wait = self.admit_wait
        # a prompt longer than a step's budget still being fed: the pulse ends after a quarter
        # of buffer_size steps (at least admit_wait), so that its next chunk is not held behind
        # a whole pulse of the others' decoding (a 20k-token prompt beside two decoding streams
        # took 7.3 s on a CPU server where alone it took 0.9; session 40's QA). admit_wait 0
        # lets every pulse run out, this one too (its documented meaning; session 40's review)
        # prompts to score (``_score_some``) likewise: a pass of one a step, and no slot needed
        # (each pass waited for a whole pulse, one arriving for the rest of the pulse)
        scoring = len(self._scores)
        feeding = wait and (scoring > 0 or bool(self._being_fed()))
        cut = max(wait, self.buffer_size // 4) if feeding else 0

        def check(ran: int) -> bool:
            self._apply_stops()
            arrived = (room and self.waiting) or len(self._scores) > scoring
            return bool((wait and ran >= wait and arrived) or (cut and ran >= cut))
        return check

    def _release(self, slots: list[int], reason: str) -> None:
        """Free finished slots and finish their tasks — tasks that keep their state once it is
        home (the copy runs on the copy-back thread while the batch goes on)."""
        tasks = [self.slots[s] for s in slots]
        self.prefiller.on_release(slots, tasks)  # the prefix cache keeps their state
        home = [(s, t) for s, t in zip(slots, tasks) if t.keep_state]
        # out of the slots before the copy-back thread can finish them: a finish_callback may
        # resubmit its task at once (add_task refused a task still in a slot: it was lost)
        for slot in slots:
            self.slots[slot] = None
            self.decoding.discard(slot)
        handed, fault = [], None
        try:
            if home:  # (each task the copy-back has is in ``handed``: finished there)
                self.engine.unload([s for s, _ in home], [t for _, t in home],
                                   then=lambda ts, err: self._finish_home(ts, reason, err),
                                   handed=handed)
            self.engine.free(slots)
        except BaseException as e:  # (Ctrl-C in run() too) finished here all the same: out
            fault = e  # of the slots, the step's fault handler (_fail_all) would not see them
            # (they hung, RUNNING)
        going_home = {id(t) for t in handed}
        stranded = {id(t) for _, t in home} - going_home  # their state never left the slot
        for task in tasks:
            if id(task) in stranded:
                self._restore_admitted(task)
        try:
            finish_all((t, "error", f"{type(fault).__name__}: {fault}") if id(t) in stranded
                       else ending(t, reason) for t in tasks if id(t) not in going_home)
        finally:
            if fault is not None:
                raise fault

    def _fail_broken(self, slots: list[int]) -> None:
        """Rows whose model output was NaN or infinite (REASON_NONFINITE): their state is
        garbage, so it neither goes home nor into the prefix cache as their end state (states
        a prefill pass cached on the way there, from a broken template say, fail the same way
        where they are reused). Their tasks are back to the state they were admitted with, as
        after a fault, and fail naming the cause; the other rows go on."""
        tasks = [self._take_lost(slot) for slot in slots]
        self.stats.on_nonfinite(len(tasks))
        self.log.error(f"Non-finite model output: failing {', '.join(t.task_id for t in tasks)} "
                       f"({NONFINITE_ERROR})")
        try:
            self.engine.free(slots)
        finally:
            finish_all((t, "error", NONFINITE_ERROR) for t in tasks)

    def _finish_home(self, tasks: list[Task], reason: str, error: str | None) -> None:
        """Copy-back thread: the tasks' state is home (or failed to come): finish them. A
        state that came home was computed by this model: stamped with its weights' digest."""
        try:
            digest = loaded_digest(self.loader)
            for task in tasks:
                if error is not None:
                    self._restore_admitted(task)
                else:
                    task.state_model = digest
            finish_all(ending(t, reason, error) for t in tasks)
        finally:
            with self._cv:
                self._cv.notify_all()

    def _take_lost(self, slot: int) -> Task:
        """The task in ``slot``, whose state there is lost (a fault) or garbage (a NaN output),
        out of its slot and back to what its own (CPU) state stands for; its caller finishes
        it."""
        task = self.slots[slot]
        self.slots[slot] = None
        self.decoding.discard(slot)
        self.prefiller.forget(task)  # (its prefill plan: a resubmission plans anew)
        self._restore_admitted(task)
        return task

    @staticmethod
    def _restore_admitted(task: Task) -> None:
        """The slot's state is lost: back to what the task's own (CPU) state stands for."""
        n_hist, task.pending, task.current_token, task.state_decoded = task._admitted_as
        del task.history[n_hist:]

    def _shrink(self) -> None:
        used = [i for i, t in enumerate(self.slots) if t is not None]
        with self._cv:
            needed = len(used) + len(self.waiting)
        target = self.target_capacity(needed)
        if target < self.capacity:
            self._resize(target, used)

    def _resize(self, cap: int, used: list[int]) -> None:
        t0 = time.perf_counter()
        old = self.engine.capacity if self.slots else 0
        self.engine.resize(cap, used)
        tasks = [self.slots[i] for i in used]
        self.slots = tasks + [None] * (cap - len(tasks))
        remap = {old_i: new_i for new_i, old_i in enumerate(used)}
        self.decoding = {remap[i] for i in self.decoding}
        ms = (time.perf_counter() - t0) * 1000
        if old and old != cap:
            self.resizes.append(dict(frm=old, to=cap, tasks=len(used), ms=ms))
            self.log.info(f"Compact {len(used)} tasks, cap {old} -> {cap} in {ms:.1f} ms")

    def _fail_all(self, exc: BaseException) -> None:
        msg = f"{type(exc).__name__}: {exc}"
        self.log.error(f"Pulse failed, failing {self.num_active} tasks: {msg}\n{traceback.format_exc()}")
        slots = [i for i, t in enumerate(self.slots) if t is not None]
        interrupt = None
        for slot in slots:
            task = self._take_lost(slot)
            try:
                task._finish("error", msg)
            except Exception as e:  # a failing listener must not keep the others unfinished
                self.log.error(f"Finishing {task.task_id} after the fault failed: {e!r}")
            except BaseException as e:  # Ctrl-C in a callback (main thread): the others and
                interrupt = interrupt or e  # the slots' reset first, then raised again
        self.decoding.clear()
        try:
            self.engine.resize(self.initial_capacity(), [])
        except Exception as e:  # (raised out of step(), it ended the daemon's thread for good)
            self.log.error(f"Resetting the slots after the fault failed too ({e!r}); the next "
                           "step sizes them again")
        else:
            self.slots = [None] * self.engine.capacity
        if interrupt is not None:
            raise interrupt
