"""Scheduler faults and shutdown found by a review (session 53; tiny random model, CPU): a failed
in-place growth that had moved the rows, tasks being admitted when a shutdown began (the third,
a fault keeping a released state at shutdown: test_scheduler.py's
``test_a_fault_releasing_one_slot_at_shutdown_finishes_every_task``). Each failed before its
fix."""

import server.scheduler.slots as slots_mod
from server.scheduler import DynamicScheduler
from server.task.task import Status


def prompt(i: int) -> str:
    return f"User: question number {i}" + " and more" * (i % 5) + "\n\nAssistant:"


def run_alone(loader, text, **kw) -> list[int]:
    sched = DynamicScheduler(loader, max_batch_size=1, buffer_size=4)
    task = sched.new_task(text, **kw)
    sched.run()
    return task.output


def test_a_failed_growth_within_the_allocated_rows_keeps_each_rows_state(tiny_loader,
                                                                        monkeypatch):
    """A growth back up within the allocated rows compacts the live rows in place; a fault
    after the compaction moved them (an out-of-memory in a temporary, say) is caught by
    ``_admit`` as a failed growth ("the engine is as it was"), but the engine's rows have
    moved while ``slots`` has not: the tasks decode each other's state."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=8, buffer_size=4)
    sched._resize(8, [])  # the buffers hold 8 rows (a load seen before) ...
    sched._resize(1, [])  # ... and the capacity came back down
    kw = dict(temperature=0.0)
    a = sched.new_task(prompt(0), max_tokens=1, **kw)
    rest = [sched.new_task(prompt(i), max_tokens=12, **kw) for i in (1, 2, 3)]
    sched.step()  # 4 tasks at capacity 4; a (slot 0) ends after its first token
    sched.engine.copyback.wait_idle(5)
    assert a.is_finished and sched.slots[0] is None and sched.capacity == 4
    real = slots_mod.SlotBuffers.neutral

    def faulty(self, lo, hi):
        monkeypatch.setattr(slots_mod.SlotBuffers, "neutral", real)
        raise RuntimeError("out of memory (injected)")

    monkeypatch.setattr(slots_mod.SlotBuffers, "neutral", faulty)
    more = [sched.new_task(prompt(i), max_tokens=12, **kw) for i in (4, 5)]  # grow 4 -> 8
    sched.run()
    for i, t in zip((1, 2, 3, 4, 5), rest + more):
        assert t.status == Status.FINISHED
        if t.finish_reason != "error":  # (failing them would be fair; wrong tokens are not)
            assert t.output == run_alone(tiny_loader, prompt(i), max_tokens=12, **kw), i


def test_shutdown_stops_tasks_being_admitted_by_a_run_on_another_thread(tiny_loader,
                                                                         monkeypatch):
    """``shutdown()`` stops the queued tasks and those in slots; a task ``_admit`` has taken off
    the queue but not yet put in a slot is neither: ``run()`` on another thread then decodes it
    to its max_tokens, and shutdown waits for that (its timeout, then STEP_WAIT_S more) and tears
    down under the running step."""
    import threading
    import time

    import server.scheduler.base as base

    monkeypatch.setattr(base, "STEP_WAIT_S", 3.0)
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    taken, go = threading.Event(), threading.Event()
    real = sched._split_unfit

    def held(batch):  # admission pauses between the queue and the slots
        taken.set()
        go.wait(10)
        return real(batch)

    monkeypatch.setattr(sched, "_split_unfit", held)
    task = sched.new_task("User: hi\n\nAssistant:", max_tokens=100000, temperature=0.0)
    task.keep_state = False
    runner = threading.Thread(target=sched.run, daemon=True)
    runner.start()
    assert taken.wait(10)
    t0 = time.monotonic()
    stopper = threading.Thread(target=sched.shutdown, kwargs=dict(timeout=1.0), daemon=True)
    stopper.start()
    time.sleep(0.3)  # shutdown() has emptied the queue and stopped the slots' tasks
    go.set()
    stopper.join(20)
    runner.join(20)
    took = time.monotonic() - t0
    assert task.status == Status.FINISHED and task.finish_reason == "abort"
    assert took < 1.5, f"shutdown took {took:.1f} s; the task decoded {len(task.output)} tokens"
