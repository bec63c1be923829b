"""Time to first token: what the scheduler makes a new task wait for (CPU, tiny checkpoint)."""

import time

from server.scheduler import DynamicScheduler

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
