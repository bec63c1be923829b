"""Time to first token: what the scheduler makes a new task wait for (CPU, tiny checkpoint)."""

import time

import pytest

from server.scheduler import DynamicScheduler
from server.task.task import Status, Task

PROMPT = "User: 写一首诗\n\nAssistant:"


def test_pulses_ramp_up_after_a_start(tiny_loader):
    """After a task starts, pulses run 1, 2, 4, ... steps up to buffer_size: text that needs a
    few tokens before any of it can be shown (a chat reply's ">" closing the think tag) comes
    after 1 + 2 steps, not 1 + buffer_size. A task starting later ramps the pulses up again."""
    scheduler = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=8)
    first, second = [], []

    def on_first(tokens):
        first.append(tokens)
        if len(first) == 5:  # the scheduler thread; add_task is thread-safe and re-entrant
            scheduler.new_task(PROMPT, max_tokens=20, temperature=0.0,
                               collect_callback=second.append)

    scheduler.new_task(PROMPT, max_tokens=40, temperature=0.8, collect_callback=on_first)
    scheduler.run()
    assert [len(c) for c in second] == [1, 2, 4, 8, 5]
    # the running task's pulses ramp up with the newcomer's (one pulse for all slots)
    assert [len(c) for c in first][:9] == [1, 2, 4, 8, 8, 1, 2, 4, 8]
    assert sum(map(len, first)) == 40


@pytest.mark.parametrize("gap, pulses, firsts", [
    (0, [1] * 8, [1] * 8),  # the default: every start ramps from 1 step
    (8, [1, 2, 4, 8, 1, 2, 4, 8], [2, 3, 3, 1, 2, 3, 3, 1])])
def test_a_stream_of_starts_ramps_the_pulses_per_ramp_gap(tiny_loader, gap, pulses, firsts):
    """A task starts after each pulse while another decodes. By default each start makes the
    next pulse 1 step long, for every slot. With ``ramp_gap`` (a benchmark knob: ``stress
    --ramp-gap``), a start ramps the pulses from 1 again only ``ramp_gap`` steps after the
    last ramp began; until then the newcomers join the ramp in progress (their first text
    comes with its next pulse)."""
    scheduler = DynamicScheduler(tiny_loader, max_batch_size=16, buffer_size=8)
    scheduler.ramp_gap = gap
    running, newcomers = [], []

    def on_chunk(tokens):
        running.append(tokens)
        if len(running) <= 8:  # a new task after each of the first 8 pulses
            first = []
            newcomers.append(first)
            scheduler.new_task(PROMPT, max_tokens=3, temperature=0.0,
                               collect_callback=first.append)

    scheduler.new_task(PROMPT, max_tokens=60, temperature=0.8, collect_callback=on_chunk)
    scheduler.run()
    assert [len(c) for c in running][:8] == pulses
    assert [len(f[0]) for f in newcomers] == firsts
    assert sum(map(len, running)) == 60


def test_a_task_added_during_the_idle_check_starts_at_once(tiny_loader, monkeypatch):
    """The idle daemon re-checks for work under the lock before it waits: a task added between
    its first check and its wait (that notify is lost) must not wait for the 0.5 s timeout."""
    scheduler = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    cls = type(scheduler)
    real = cls._has_slot_work
    added, done = [], []

    def racing(self):
        busy = real.fget(self)
        if not busy and not added and self._running:  # the daemon found no work: add one now
            added.append(time.perf_counter())
            self.new_task(PROMPT, max_tokens=1, temperature=0.0,
                          finish_callback=lambda _: done.append(time.perf_counter()))
        return busy

    monkeypatch.setattr(cls, "_has_slot_work", property(racing))
    try:
        scheduler.start_daemon()
        deadline = time.monotonic() + 10
        while not added and time.monotonic() < deadline:
            time.sleep(0.001)
        while not done and time.monotonic() < deadline:
            time.sleep(0.001)
        waited = done[0] - added[0]
        assert waited < 0.3, f"the task took {waited:.3f} s: it waited for the idle timeout"
    finally:
        scheduler.shutdown()


def test_a_task_is_under_way_once_its_pass_is_queued(tiny_loader):
    """``Task.under_way_callback`` fires once per task: on a device that queues passes (CUDA),
    after the step that queued the task's first pass and before its first token is sampled; on
    the CPU at ``add_task`` (the pass holds no GIL a caller needs). Each task of a batch gets
    its own, queued ones when admitted."""
    events = []
    for queued in (True, False):
        scheduler = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=4)
        scheduler._async_device = queued  # as on CUDA
        real = scheduler.prefiller._feed

        def feed(plan, _real=real):
            events.append(("pass", [t.task_id for _, t, _, _ in plan]))
            return _real(plan)

        scheduler.prefiller._feed = feed
        tasks = []
        for name in ("a", "b"):  # one slot: b waits for a's end
            task = Task(tiny_loader.encode(PROMPT), task_id=name, max_tokens=3,
                        temperature=0.0, collect_callback=(
                            lambda toks, n=name: events.append(("token", n))))
            task.under_way_callback = lambda t: events.append(("under way", t.task_id))
            scheduler.add_task(task)
            tasks.append(task)
        if queued:
            assert events == []  # nothing fired at add_task
        scheduler.run()
        assert all(t.under_way_callback is None for t in tasks)
        seen = events
        firsts = [seen.index(("token", n)) for n in "ab"]
        unders = [seen.index(("under way", n)) for n in "ab"]
        passes = [seen.index(("pass", [n])) for n in "ab"]
        assert [e[0] for e in seen].count("under way") == 2
        if queued:
            assert all(p < u < f for p, u, f in zip(passes, unders, firsts)), seen
        else:
            assert unders == [0, 1], seen  # at add_task, before any pass
        events.clear()


@pytest.mark.parametrize("wait", [4, 0])
def test_a_task_arriving_mid_pulse_ends_the_pulse_after_admit_wait_steps(tiny_loader,
                                                                          monkeypatch, wait):
    """A task that arrived while others decoded waited for the rest of the pulse (up to
    buffer_size steps: ~80 ms at 2.9B, over a second on a CPU) before it was admitted. Now a
    pulse ends once it has run ``admit_wait`` steps with such a task waiting, and the next step
    admits it (0: the whole pulse, as before). A task that cannot fit (every slot taken at the
    largest capacity) does not cut pulses short."""
    real = tiny_loader.model.decode
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=32)
    sched.admit_wait = wait

    def full_pulses():  # past the ramp after a start: 32-step pulses
        while not sched.pulses or sched.pulses[-1]["steps"] < 32:
            sched.step()

    def step_with_arrival(prompt: str) -> Task:
        """One step; a task arrives during its pulse's second decode step."""
        calls, late = [], []

        def decode(*a, **k):
            calls.append(1)
            if len(calls) == 2:
                late.append(sched.new_task(prompt, max_tokens=500, temperature=0))
            return real(*a, **k)

        monkeypatch.setattr(tiny_loader.model, "decode", decode)
        sched.step()
        monkeypatch.setattr(tiny_loader.model, "decode", real)
        return late[0]

    first = sched.new_task("User: hi\n\nAssistant:", max_tokens=500, temperature=0)
    full_pulses()
    second = step_with_arrival("User: late\n\nAssistant:")
    assert sched.pulses[-1]["steps"] == (wait or 32)
    assert second not in sched.slots
    sched.step()  # admits it: its first token comes from its prompt's pass
    assert second in sched.slots and second.output
    full_pulses()
    assert sched.capacity == 2 and first in sched.slots and second in sched.slots
    third = step_with_arrival("User: third\n\nAssistant:")  # no slot for it
    assert sched.pulses[-1]["steps"] == 32 and third not in sched.slots
    for t in (first, second, third):
        t.stop()
    sched.run()
    assert all(t.status == Status.FINISHED for t in (first, second, third))


def test_a_task_that_growth_failed_to_place_does_not_cut_pulses_short(tiny_loader,
                                                                       monkeypatch):
    """A task waiting because growing the capacity failed (out of memory: ``_admit`` goes on at
    the capacity it has) cannot be admitted by ending the pulse: the next step's growth fails
    again. Such a wait cut every pulse to ``admit_wait`` steps (4 of 32, plus a failed
    allocation every 4 steps) for as long as the task waited."""
    import torch

    sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=32)
    real = sched.engine.resize

    def resize(cap, keep):
        if cap > 2:
            raise torch.OutOfMemoryError("emulated: no memory for 4 slots")
        return real(cap, keep)

    monkeypatch.setattr(sched.engine, "resize", resize)
    tasks = [sched.new_task("User: hi\n\nAssistant:", max_tokens=400, temperature=0)
             for _ in range(2)]
    while not sched.pulses or sched.pulses[-1]["steps"] < 32:
        sched.step()
    tasks.append(sched.new_task("User: late\n\nAssistant:", max_tokens=400, temperature=0))
    last = sched.pulses[-1]["iter"]
    for _ in range(3):
        sched.step()
    assert sched.capacity == 2 and len(sched.waiting) == 1
    assert [p["steps"] for p in sched.pulses if p["iter"] > last] == [32, 32, 32]
    for t in tasks:
        t.stop()
    sched.run()
