"""Scheduler regressions found by a review (tiny random model, CPU), each minimised: a deferred
prefix job that hangs ``run()``, a task accepted twice, a failed growth retried forever, a
shutdown that released tasks under a running step, a run() left waiting by shutdown, stop
requests piling up without a decode pulse."""

import threading
import time

import pytest
from loguru import logger

import server.scheduler.slots as slots
from model_cases import state_gap
from server.scheduler import DynamicScheduler
from server.scheduler.prefill import TURN_TOKEN
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Status, Task


@pytest.fixture
def errors():
    """Messages logged at ERROR (or worse) while the test runs."""
    lines: list[str] = []
    sink = logger.add(lines.append, level="ERROR", format="{message}")
    yield lines
    logger.remove(sink)


def run_bounded(sched, seconds: float = 10.0) -> bool:
    """``sched.run()`` on a thread; True if it returned within ``seconds``."""
    worker = threading.Thread(target=sched.run, daemon=True)
    worker.start()
    worker.join(seconds)
    return not worker.is_alive()


def run_alone(loader, tokens, **kw) -> list[int]:
    sched = DynamicScheduler(loader, max_batch_size=1, buffer_size=4)
    task = Task(tokens, **kw)
    sched.add_task(task)
    sched.run()
    return task.output


def test_a_boundary_job_of_a_task_stopped_mid_prompt_and_given_a_new_prompt_still_runs(
        tiny_loader, monkeypatch):
    """A chat prompt fed over several steps passes its first turn boundary: the prefiller keeps
    a job computing that boundary's state once the task is past its prefill. The task is
    stopped mid-prompt (its history stays short of the prompt) and its finish_callback gives it
    a new prompt (status PREFILL) without resubmitting it: the job waited for that task
    forever, so ``run()`` never returned and the scheduler stepped without end. (Feeds cut
    anywhere: the positions below are not multiples of the split-invariant model's 32.)"""
    monkeypatch.setattr(tiny_loader.model, "split_invariant", False)
    cache = PrefixCache(1 << 22, min_tokens=4)
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4, prefill_chunk=10,
                             prefix_cache=cache)
    prompt = ([300 + i for i in range(6)] + [TURN_TOKEN] + [320 + i for i in range(12)]
              + [TURN_TOKEN] + [340 + i for i in range(20)])
    reasons = []

    def again(_tokens):
        reasons.append(task.finish_reason)
        task.prefill([400, 401, 402])  # (continue_gen: a new round, not submitted)

    task = Task(prompt, max_tokens=3, temperature=0.0, finish_callback=again)
    task.cache_origin, task.keep_state = "", False
    sched.add_task(task)
    sched.step()  # 10 tokens fed: past the first boundary, a job kept for it
    assert task.status == Status.PREFILL and len(task.history) == 10
    assert sched.prefiller.has_later
    task.stop()
    sched.step()  # "abort" mid-prompt; the callback makes it PREFILL again, not resubmitted
    assert reasons == ["abort"] and task.status == Status.PREFILL
    done = run_bounded(sched)
    sched.prefiller.drop_later()  # (a hung scheduler thread would spin on for the session)
    assert done, "run() did not return: the boundary job waits forever"
    assert sched.prefiller.later_tokens > 0  # the job ran
    assert len(task.history) == 10 and task.pending == prompt[10:] + [400, 401, 402]


def test_add_task_refuses_a_task_whose_state_is_still_on_its_way_home(tiny_loader,
                                                                        held_copyback):
    """A max_tokens=0 task (a template) leaves its slot READY and turns FINISHED only once the
    copy-back thread has brought its state home. Submitted again in between, add_task took it
    (not queued, not in a slot, not RUNNING): it ran a second time from its stale CPU state
    with its history already advanced, and the first round's finish marked it FINISHED (wait()
    returned) while it was queued."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    prompt = [300 + i for i in range(12)]
    finishes = []
    tpl = Task(prompt, max_tokens=0, temperature=0.0, finish_callback=finishes.append)
    sched.add_task(tpl)
    sched.step()  # prefilled and released; the copy-back is held
    assert sched.slots == [None] and tpl.status == Status.READY and not tpl.wait(0)
    with pytest.raises(ValueError, match="already queued or in a slot"):
        sched.add_task(tpl)
    held_copyback.set()
    assert run_bounded(sched)
    assert tpl.wait(0) and tpl.finish_reason == "length" and finishes == [[]]
    assert tpl.history == prompt[:-1] and tpl.current_token == prompt[-1]
    assert state_gap(tiny_loader.model, tpl.history, tpl.state) is None
    tpl.continue_gen()  # finished: it may run again
    sched.add_task(tpl)
    assert run_bounded(sched) and finishes == [[], []]


def test_a_failed_growth_goes_on_at_the_capacity_there_is(tiny_loader, monkeypatch, errors):
    """Growing past the allocated slots can fail (out of memory). The fault used to escape the
    admission: the tasks in slots failed, the waiting ones stayed waiting, and the next step
    tried the same growth again — forever ("failing 0 tasks" thousands of times a second,
    run() never returned). Now the engine is left as it was and the tasks run at the capacity
    there is, with the tokens they have alone."""
    real, broken = slots.SlotBuffers.copy_rows, threading.Event()
    broken.set()

    def copy_rows(self, src, cap, keep):  # fails after the new buffers were allocated
        if broken.is_set() and self.rows > 1:
            raise RuntimeError("injected out of memory")
        return real(self, src, cap, keep)

    monkeypatch.setattr(slots.SlotBuffers, "copy_rows", copy_rows)
    sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=2)
    prompts = [[300 + i, 301, 302 + i, 303] for i in range(3)]
    first = Task(prompts[0], max_tokens=9, temperature=0.0)
    sched.add_task(first)
    sched.step()  # decoding at capacity 1
    others = [Task(p, max_tokens=5, temperature=0.0) for p in prompts[1:]]
    for t in others:
        sched.add_task(t)
    done = run_bounded(sched)
    broken.clear()  # (a hung scheduler thread would spin on for the rest of the session)
    assert done, "run() did not return: admission retried the failing growth forever"
    assert sched.capacity == 1 and any("injected out of memory" in e for e in errors)
    for task, p in zip([first] + others, prompts):
        assert task.finish_reason == "length"
        assert task.output == run_alone(tiny_loader, p, max_tokens=task.max_tokens,
                                        temperature=0.0)


def test_shutdown_waits_for_a_step_that_outlasts_its_timeout(tiny_loader, monkeypatch):
    """A step longer than shutdown's timeout (a long CPU prefill): shutdown used to go on
    while it ran, released the task in its slot (its state, which had consumed the tokens just
    fed, sent home, the task finished "abort") and freed the engine; the step appended those
    tokens to the task's history only later. So the task finished (finish_callback, wait(),
    a persistent task written to the database next) with a history short of its state."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=2, prefill_chunk=8)
    real, fed = sched.engine.prefill, threading.Event()

    def slow_prefill(*args, **kw):
        out = real(*args, **kw)
        fed.set()
        time.sleep(0.5)  # the step goes on past shutdown's timeout
        return out

    monkeypatch.setattr(sched.engine, "prefill", slow_prefill)
    at_finish = []
    task = Task([300 + i for i in range(40)], max_tokens=5, temperature=0.0,
                finish_callback=lambda _: at_finish.append((len(task.history), task.state)))
    sched.start_daemon()
    sched.add_task(task)
    assert fed.wait(10)
    sched.shutdown(timeout=0.05)
    assert task.wait(0) and task.finish_reason == "abort" and not sched._thread.is_alive()
    assert [n for n, _ in at_finish] == [8] and at_finish[0][1] is task.state  # at its finish
    assert len(task.history) == 8
    assert task.history + task.pending == list(range(300, 340))
    assert state_gap(tiny_loader.model, task.history, task.state) is None


def test_run_on_another_thread_returns_when_the_scheduler_shuts_down(tiny_loader):
    """``run()`` waiting on another thread while the daemon serves: ``shutdown()`` releases the
    tasks after the daemon's last step (nothing notified the waiter then: it hung)."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    sched.start_daemon()
    task = Task([300 + i for i in range(8)], max_tokens=100000, temperature=0.0)
    task.keep_state = False  # no copy-back (whose end would notify)
    sched.add_task(task)
    deadline = time.monotonic() + 10
    while len(task.output) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(task.output) >= 4
    waiter = threading.Thread(target=sched.run, daemon=True)
    waiter.start()
    time.sleep(0.05)
    sched.shutdown()
    waiter.join(5)
    assert not waiter.is_alive(), "run() still waiting after shutdown"
    assert task.status == Status.FINISHED and task.finish_reason == "abort"


def test_a_held_task_refuses_new_prompts_and_rounds(tiny_loader, held_copyback):
    """SDK callers get the API's rule: a task a scheduler holds (queued, running, or finishing
    with its state on its way home) refuses ``prefill`` and ``continue_gen``; once finished it
    takes them."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    queued = Task([300 + i for i in range(6)], max_tokens=3, temperature=0.0)
    sched.add_task(queued)
    for change in (lambda: queued.prefill([5, 6]), queued.continue_gen):
        with pytest.raises(RuntimeError, match="queued"):
            change()
    sched.step()  # prefilled, decoded 3 tokens and released; the copy-back is held
    assert queued.status != Status.FINISHED
    with pytest.raises(RuntimeError, match="finishing"):
        queued.continue_gen()
    held_copyback.set()
    assert run_bounded(sched) and queued.status == Status.FINISHED
    queued.continue_gen([7, 8], max_tokens=2)
    sched.add_task(queued)
    assert run_bounded(sched) and len(queued.output) == 2


def test_stop_requests_of_tasks_that_never_decode_do_not_pile_up(tiny_loader):
    """Only a decode pulse applied (and emptied) the list of stop requests: 50 prefill-only
    tasks stopped while queued left 50 entries, each holding its task and state."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    tasks = [Task([7, 8, 9, i], max_tokens=0) for i in range(50)]
    for t in tasks:
        sched.add_task(t)
        t.stop()
    sched.run()
    assert all(t.is_finished for t in tasks)
    sched.add_task(extra := Task([1, 2], max_tokens=0))
    extra.stop()
    assert len(sched._stops) == 1  # the finished ones went when the next stop came
    sched.run()
