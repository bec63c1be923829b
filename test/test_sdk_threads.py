"""The Python SDK embedded in an application: misuse from user threads and callbacks (session
28's QA). Each case was a silent wrong result, a hang or a dead scheduler thread before."""

import asyncio
import threading
import time

import pytest
from loguru import logger

from server.scheduler import DynamicScheduler, SimpleScheduler
from server.task.task import Status, Task

PROMPT = "User: hi\n\nAssistant:"


@pytest.fixture
def errors():
    lines = []
    sink = logger.add(lines.append, level="ERROR", format="{message}")
    yield lines
    logger.remove(sink)


def test_a_running_task_cannot_be_forked(tiny_loader):
    """``Task.fork`` of a running task copied its tokens with another state (None)."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    seen = []

    def on_tokens(tokens):
        if not seen:
            with pytest.raises(RuntimeError, match="running"):
                task.fork("TMP")
            seen.append(True)

    task = sched.new_task(PROMPT, max_tokens=12, temperature=0, collect_callback=on_tokens)
    sched.run()
    assert seen and task.fork("TMP").state is not None  # (finished: it may)


def test_wait_in_a_callback_refuses_instead_of_freezing(tiny_loader, errors):
    """``wait()`` on a task not yet done, in a callback (the scheduler's or the copy-back
    thread), blocked that thread for ever: every later task stayed RUNNING."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    sched.start_daemon()
    try:
        first = sched.new_task(PROMPT, max_tokens=3, temperature=0,
                               finish_callback=lambda toks: first.wait())
        assert first.wait(30)
        later = sched.new_task(PROMPT, max_tokens=3, temperature=0)
        assert later.wait(30) and len(later.round_tokens()) == 3
    finally:
        sched.shutdown()
    assert any("wait() in a task's callback" in e for e in errors), errors


@pytest.mark.parametrize("case", ["own task, token callback", "another task, finish callback"])
def test_wait_in_a_callback_for_a_task_this_scheduler_holds_refuses(tiny_loader, errors, case):
    """The refusal covered tasks no scheduler held only: a token callback waiting for its own
    running task, or a finish callback waiting for another task in the same scheduler's
    slots, blocked the thread that had to finish it, and every task of the scheduler hung
    (session 29's review)."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    sched.start_daemon()
    box = {}
    try:
        if case.startswith("own"):
            a = sched.new_task(PROMPT, max_tokens=5, temperature=0,
                               collect_callback=lambda toks: box["a"].wait())
            box["a"] = a
            waited = [a]
        else:
            a = sched.new_task(PROMPT, max_tokens=2, temperature=0,
                               finish_callback=lambda toks: box["b"].wait())
            box["b"] = b = sched.new_task(PROMPT + " y", max_tokens=20, temperature=0)
            waited = [a, b]
        assert all(t.wait(30) for t in waited)
        later = sched.new_task(PROMPT, max_tokens=3, temperature=0)
        assert later.wait(30) and len(later.round_tokens()) == 3
    finally:
        sched.shutdown()
    assert any("wait() in a task's callback" in e for e in errors), errors


def test_a_finish_racing_add_task_is_refused(tiny_loader):
    """``add_task`` checked the status before the queue's lock and ``held`` under it: a task
    finishing in between (held no more, FINISHED only after) was queued again."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    task = Task(tiny_loader.encode(PROMPT), max_tokens=0)
    task.status, task._stop_hook = Status.READY, lambda t: None  # finishing (copy-back)
    outcome = []

    def add():
        try:
            sched.add_task(task)
            outcome.append("queued")
        except ValueError as e:
            outcome.append(str(e))

    with sched._cv:  # add_task passes its first check, then waits here
        t = threading.Thread(target=add)
        t.start()
        time.sleep(0.2)
        task._finish("stop")
    t.join(10)
    assert len(outcome) == 1 and "FINISHED" in outcome[0] and not sched.waiting, outcome


@pytest.mark.parametrize("error", [SystemExit(3), asyncio.CancelledError(), KeyboardInterrupt()],
                         ids=["SystemExit", "CancelledError", "KeyboardInterrupt"])
def test_callbacks_that_exit_or_fail_leave_everything_running(tiny_loader, errors, error):
    """A ``SystemExit`` in a callback ended the scheduler's thread for good; so did any other
    exception outside ``Exception`` (a callback bridging into asyncio raising CancelledError
    ended the copy-back thread from a finish callback: that task never woke its waiters).
    A KeyboardInterrupt raised by a callback on these threads (not Ctrl-C: that reaches the
    main thread only) ended the copy-back thread too, and every later task hung (session 34's
    review): it is contained there as well."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    sched.start_daemon()
    try:
        def bail(_):
            raise error

        a = sched.new_task(PROMPT, max_tokens=6, temperature=0, collect_callback=bail)
        b = sched.new_task(PROMPT, max_tokens=6, temperature=0, finish_callback=bail)

        assert a.wait(30) and b.wait(30)
        assert len(a.round_tokens()) == len(b.round_tokens()) == 6
        d = sched.new_task(PROMPT, max_tokens=4, temperature=0)  # both threads still serve
        assert d.wait(30) and len(d.round_tokens()) == 4
    finally:
        sched.shutdown()
    assert sum(type(error).__name__ in e or "failed" in e for e in errors) >= 2, errors


def test_wait_on_another_schedulers_task_in_a_callback_is_allowed(tiny_loader):
    """The refusal is for waits that cannot end: a task of another scheduler may be waited
    for in a callback (a review of the change)."""
    a = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    b = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    a.start_daemon()
    b.start_daemon()
    got = []
    try:
        def on_finish(_):
            other = b.new_task(PROMPT, max_tokens=3, temperature=0)
            got.append(other.wait())

        task = a.new_task(PROMPT, max_tokens=2, temperature=0, finish_callback=on_finish)
        assert task.wait(60) and got == [True]
    finally:
        a.shutdown()
        b.shutdown()


def test_shutdown_from_a_finish_callback_under_a_run_elsewhere_ends(tiny_loader):
    """``shutdown()`` in a finish callback (the copy-back thread) while ``run()`` steps on
    another thread: each waited for the other (timeout + 120 s; a review of the change)."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    took = []

    def stop_all(_):
        t0 = time.monotonic()
        sched.shutdown(timeout=5)
        took.append(time.monotonic() - t0)

    sched.new_task(PROMPT, max_tokens=2, temperature=0, finish_callback=stop_all)
    runner = threading.Thread(target=sched.run)
    runner.start()
    runner.join(30)
    assert not runner.is_alive() and took and took[0] < 3, took


def test_shutdown_waits_for_a_run_on_another_thread(tiny_loader, errors):
    """``shutdown()`` released the slots under another thread's ``run()`` mid-pulse: failed
    pulses, and states short of (or past) their tokens."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=2)
    tasks = [sched.new_task(PROMPT, max_tokens=5000, temperature=0) for _ in range(2)]
    runner = threading.Thread(target=sched.run)
    runner.start()
    deadline = time.monotonic() + 30
    while not all(len(t.round_tokens()) > 8 for t in tasks):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sched.shutdown()
    runner.join(30)
    assert not runner.is_alive() and errors == []
    assert all(t.status == Status.FINISHED for t in tasks)
    # each state is its tokens': a greedy continue equals the same tokens fed afresh
    t = tasks[0]
    fresh = sched.new_task(t.history + [t.current_token], max_tokens=4, temperature=0)
    t.continue_gen(max_tokens=4)
    sched.add_task(t)
    sched.run()
    assert t.round_tokens() == fresh.round_tokens()


def test_shutdown_from_a_finish_callback_does_not_wait_for_itself(tiny_loader):
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    sched.start_daemon()
    took = []

    def stop_all(_):
        t0 = time.monotonic()
        sched.shutdown(timeout=5)
        took.append(time.monotonic() - t0)

    task = sched.new_task(PROMPT, max_tokens=2, temperature=0, finish_callback=stop_all)
    assert task.wait(30) and took and took[0] < 2, took


def test_continue_gen_checks_its_parameters_before_changing_anything(tiny_loader):
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    task = sched.new_task(PROMPT, max_tokens=2, temperature=0)
    sched.run()
    with pytest.raises(ValueError, match="temperature=nan"):
        task.continue_gen(" x", temperature=float("nan"))
    assert task.temperature == 0 and task.status == Status.FINISHED  # unchanged
    with pytest.raises(TypeError, match="temprature"):  # (max_tokens was set before it)
        task.continue_gen(" x", max_tokens=7, temprature=0.5)
    assert task.max_tokens == 2 and task.status == Status.FINISHED
    output = list(task.output)
    for call in (lambda: task.continue_gen([1, "x"], max_tokens=7),
                 lambda: task.prefill([1.5])):  # a bad prompt: the round was reset first (and
        with pytest.raises(TypeError, match="integers"):  # the task left READY, queued
            call()  # nowhere: wait() blocked for ever; session 34's review)
        assert task.max_tokens == 2 and task.status == Status.FINISHED and task.output == output
        assert task.wait(0)


@pytest.mark.parametrize("ending", ["return", "raise"])
def test_a_script_ending_while_the_daemon_generates_exits_cleanly(tiny_model_path, ending):
    """The seed's background mode: start_daemon(), a task, and the script ends (or fails)
    without shutdown() while the daemon generates. The process aborted ("terminate called
    without an active exception", status 134: the thread was inside torch as Python
    finalized; session 29's QA). It ends with the script's own status now."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import time\n"
        "from server import RWKV070ModelLoader, DynamicScheduler\n"
        f"loader = RWKV070ModelLoader({str(tiny_model_path)!r}, device='cpu')\n"
        "scheduler = DynamicScheduler(loader, 4, 32)\n"
        "scheduler.start_daemon()\n"
        "task = scheduler.new_task('User: hi\\n\\nAssistant:', max_tokens=40000)\n"
        "while len(task.round_tokens()) < 40:\n"
        "    time.sleep(0.01)\n"
        + ("raise SystemExit(3)\n" if ending == "raise" else "print('done')\n"))
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == (3 if ending == "raise" else 0), r.stderr[-2000:]
    assert "terminate called" not in r.stderr


@pytest.mark.parametrize("mode", ["daemon", "run"])
def test_shutdown_from_a_callback_on_the_stepping_thread(tiny_loader, errors, mode):
    """``shutdown()`` in a token callback, on the thread running the step: the daemon raised
    "cannot join current thread" and ended with its tasks RUNNING for ever; run() released
    the slots under its pulse ("Pulse failed", a state past its history). The step ends, then
    the slots are released: every task finishes, its state its history's, nothing logged."""
    from model_cases import state_gap

    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    calls = []

    def on_a(_):
        if not calls:
            calls.append(1)
            sched.shutdown(timeout=2)

    if mode == "daemon":
        sched.start_daemon()
    a = sched.new_task(PROMPT, max_tokens=50, temperature=0, collect_callback=on_a)
    b = sched.new_task(PROMPT + " y", max_tokens=50, temperature=0)
    if mode == "run":
        sched.run()
    else:
        sched._thread.join(30)
        assert not sched._thread.is_alive()
    assert all(t.wait(10) and t.finish_reason == "abort" for t in (a, b)), (a, b)
    assert sched.slots == [None] and errors == []
    for t in (a, b):
        if t.state is not None:
            assert state_gap(tiny_loader.model, t.history, t.state) is None


def _shutdown_once(sched):
    fired = []

    def on_tokens(_):
        if not fired:
            fired.append(1)
            sched.shutdown()
    return on_tokens


def test_a_script_ending_after_a_shutdown_from_a_callback_exits_cleanly(tiny_model_path):
    """A token callback's ``shutdown()`` puts the teardown off to the daemon's step end; the
    task finished inside that teardown, the script ended while the daemon was still in torch,
    and the process aborted (status 134) because the atexit hook was already gone (a review of
    this session's changes): the hook now waits for that teardown."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "from server import RWKV070ModelLoader, DynamicScheduler\n"
        f"loader = RWKV070ModelLoader({str(tiny_model_path)!r}, device='cpu')\n"
        "sched = DynamicScheduler(loader, 4, 32)\n"
        "fired = []\n"
        "def on_tok(_):\n"
        "    if not fired:\n"
        "        fired.append(1)\n"
        "        sched.shutdown()\n"
        "sched.start_daemon()\n"
        "a = sched.new_task('User: hi\\n\\nAssistant:', max_tokens=400, collect_callback=on_tok)\n"
        "b = sched.new_task('User: ho\\n\\nAssistant:', max_tokens=400)\n"
        "assert a.wait(30)\n")
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                       text=True, timeout=120)  # (before: 8 runs of 8 aborted)
    assert r.returncode == 0 and "terminate called" not in r.stderr, r.stderr[-2000:]


def test_the_daemon_serves_again_after_a_shutdown_from_a_callback(tiny_loader):
    """``start_daemon()`` right after a callback's ``shutdown()`` found the old thread alive
    (still tearing down) and did nothing: later tasks waited for ever (2-5 runs in 10 for the
    reviewer). It waits for that thread to end, then starts a new one."""
    for _ in range(5):
        sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
        sched.start_daemon()
        a = sched.new_task(PROMPT, max_tokens=50, temperature=0,
                           collect_callback=_shutdown_once(sched))
        assert a.wait(30) and a.finish_reason == "abort"
        sched.start_daemon()
        b = sched.new_task(PROMPT, max_tokens=5, temperature=0)
        try:
            assert b.wait(30) and len(b.round_tokens()) == 5, b
        finally:
            sched.shutdown()


def test_a_second_shutdown_from_a_finish_callback_does_not_stall(tiny_loader):
    """After a token callback's ``shutdown()``, a finish callback calling it again (on the
    copy-back thread) joined the daemon, whose teardown waited for the copy-back thread: 10 s
    of both waiting, a false "step still running" warning, and a second teardown."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    sched.start_daemon()
    a = sched.new_task(PROMPT, max_tokens=50, temperature=0,
                       collect_callback=_shutdown_once(sched),
                       finish_callback=lambda _: sched.shutdown())
    b = sched.new_task(PROMPT + " y", max_tokens=50, temperature=0)
    t0 = time.perf_counter()
    assert a.wait(60) and b.wait(60)
    sched._thread.join(30)
    assert time.perf_counter() - t0 < 5 and not sched._thread.is_alive()


def test_run_after_a_shutdown_from_a_callback_steps_the_new_task(tiny_loader):
    """After a token callback's ``shutdown()`` of the daemon, ``run()`` on the main thread found
    the stopping daemon alive and waited for it to run the new task, for ever (10 runs of 10;
    a review). It waits for that shutdown to end, then steps the task itself."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    sched.start_daemon()
    a = sched.new_task(PROMPT, max_tokens=50, temperature=0,
                       collect_callback=_shutdown_once(sched))
    assert a.wait(30) and a.finish_reason == "abort"
    c = sched.new_task(PROMPT, max_tokens=3, temperature=0)
    runner = threading.Thread(target=sched.run, daemon=True)
    runner.start()
    runner.join(30)
    assert not runner.is_alive() and c.wait(0) and len(c.round_tokens()) == 3


def test_an_interrupted_run_still_ends_a_shutdown_from_its_callback(tiny_loader):
    """``run()`` left by an exception (Ctrl-C) after a callback's ``shutdown()`` put the
    teardown off: nothing did it, every later ``shutdown()`` waited 130 s and returned with the
    tasks RUNNING, and a daemon started then could not be stopped (a review). run()'s exit does
    the teardown, whatever ends it."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    real_step = sched.step

    def step():
        real_step()
        if sched._teardown_due:
            raise KeyboardInterrupt

    sched.step = step
    a = sched.new_task(PROMPT, max_tokens=500, temperature=0,
                       collect_callback=_shutdown_once(sched))
    b = sched.new_task(PROMPT + " y", max_tokens=500, temperature=0)
    with pytest.raises(KeyboardInterrupt):
        sched.run()
    assert not sched._stopping and all(t.wait(5) for t in (a, b)) and sched.slots == [None]
    sched.step = real_step
    sched.start_daemon()
    c = sched.new_task(PROMPT, max_tokens=3, temperature=0)
    assert c.wait(30)
    t0 = time.monotonic()
    sched.shutdown(timeout=2)
    assert time.monotonic() - t0 < 5 and not sched._daemon_alive


def test_a_daemon_started_while_run_tears_down_keeps_its_exit_hook(tiny_loader):
    """``run()`` on a worker thread, a token callback's ``shutdown()``, and the main thread
    starting the daemon meanwhile: run()'s teardown removed the new daemon's atexit hook (a
    script ending then aborted, 8 runs of 8; a review). start_daemon() waits for that
    shutdown, then registers its own hook."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    stopping = threading.Event()

    def stop(_):
        if not stopping.is_set():
            sched.shutdown()
            stopping.set()

    sched.new_task(PROMPT, max_tokens=500, temperature=0, collect_callback=stop)
    sched.new_task(PROMPT + " y", max_tokens=500, temperature=0)
    worker = threading.Thread(target=sched.run)
    worker.start()
    assert stopping.wait(30)
    sched.start_daemon()
    worker.join(30)
    try:
        assert sched._at_exit is not None and sched._daemon_alive and sched._running
        c = sched.new_task(PROMPT, max_tokens=3, temperature=0)
        assert c.wait(30)
    finally:
        sched.shutdown()


def test_a_task_with_nothing_to_generate_from_is_refused(tiny_loader):
    """``new_task("")`` raised; ``add_task(Task(""))`` was taken and "finished" at once with
    reason stop and no tokens (a QA helper's report). A prefill-only task (max_tokens 0)
    without tokens is still taken."""
    sched = SimpleScheduler(tiny_loader, 4, 8)
    for task in (Task(""), Task([]), Task(max_tokens=10)):
        with pytest.raises(ValueError, match="has no prompt"):
            sched.add_task(task)
    assert not sched.waiting
    empty = Task([], max_tokens=0)
    sched.add_task(empty)
    sched.run()
    assert empty.status == Status.FINISHED and empty.output == []


def _ctrl_c_in_first_callback():
    """(calls, callback): a callback that records each call and raises KeyboardInterrupt in
    the first (Ctrl-C pressed while it ran)."""
    hits = []

    def cb(_):
        hits.append(1)
        if len(hits) == 1:
            raise KeyboardInterrupt

    return hits, cb


def _interrupt_second_pulse(sched):
    """Ctrl-C after the device ran ``sched``'s second pulse, before its results are taken;
    returns the engine's own ``pulse``."""
    real, calls = sched.engine.pulse, []

    def pulse(*a, **k):
        out = real(*a, **k)
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return out

    sched.engine.pulse = pulse
    return real


def test_ctrl_c_inside_a_pulse_ends_the_tasks_in_slots(tiny_loader):
    """Ctrl-C while run() was inside a pulse, then run() again: the tasks in slots resumed
    from host bookkeeping the cut pulse had left behind the device, and finished "length"
    with other tokens than an uninterrupted run (a QA helper's report). They end with an
    error naming the interrupt now; the tasks still queued then run as ever."""
    prompts = [f"User: question {i}\n\nAssistant:" for i in range(4)]
    ref = SimpleScheduler(tiny_loader, 2, 4)
    want = [ref.new_task(p, max_tokens=12, temperature=0) for p in prompts]
    ref.run()
    sched = SimpleScheduler(tiny_loader, 2, 4)
    tasks = [sched.new_task(p, max_tokens=12, temperature=0) for p in prompts]
    _interrupt_second_pulse(sched)
    with pytest.raises(KeyboardInterrupt):
        sched.run()
    cut = [t for t in tasks if t.status == Status.FINISHED]
    assert len(cut) == 2 and all(t.finish_reason == "error" and "KeyboardInterrupt" in t.error
                                 for t in cut)
    sched.run()
    for t, w in zip(tasks, want):
        if t not in cut:
            assert t.finish_reason == "length" and t.output == w.output


def test_ctrl_c_while_releasing_slots_finishes_their_tasks(tiny_loader):
    """Ctrl-C while a step released finished slots (their states on the way to the copy-back):
    the tasks were out of their slots and not finished, held by no scheduler; wait() never
    returned and continue_gen refused them for ever (session 34's review). They end with an
    error naming the interrupt, back to their own state, and serve again."""
    sched = SimpleScheduler(tiny_loader, 2, 4)
    tasks = [sched.new_task(f"User: q{i}\n\nAssistant:", max_tokens=3, temperature=0)
             for i in range(2)]
    real = sched.engine.unload

    def unload(*a, **k):
        sched.engine.unload = real
        raise KeyboardInterrupt

    sched.engine.unload = unload
    with pytest.raises(KeyboardInterrupt):
        sched.run()
    for t in tasks:
        assert t.wait(0) and t.finish_reason == "error" and "KeyboardInterrupt" in t.error
        assert t.history == [] and t.state is None  # back to what it stood for
    tasks[0].continue_gen(" more", max_tokens=2)
    sched.add_task(tasks[0])
    sched.run()
    assert tasks[0].wait(0) and tasks[0].finish_reason == "length"


def test_ctrl_c_while_admitting_keeps_the_tasks_queued(tiny_loader, monkeypatch):
    """Ctrl-C while a step took tasks off the queue for free slots (checking them against the
    model): they were in no queue and no slot, PREFILL for ever (session 34's review). They
    wait again, first in line, and the next run() runs them."""
    import server.scheduler.cycle as cycle

    sched = SimpleScheduler(tiny_loader, 2, 4)
    tasks = [sched.new_task(f"User: q{i}\n\nAssistant:", max_tokens=3, temperature=0)
             for i in range(3)]
    real = cycle.model_mismatch

    def check(*a, **k):
        monkeypatch.setattr(cycle, "model_mismatch", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(cycle, "model_mismatch", check)
    with pytest.raises(KeyboardInterrupt):
        sched.run()
    assert list(sched.waiting) == tasks and sched.num_waiting == 3
    sched.run()
    assert all(t.wait(0) and t.finish_reason == "length" for t in tasks)


def test_ctrl_c_again_in_a_finish_callback_after_a_cut_pulse(tiny_loader):
    """Ctrl-C cut a pulse, and again while the first task's finish callback ran as the tasks
    in slots were failed: that task was FINISHED with its wait() never returning, the other
    stayed in its slot, and the next run() failed it with an AttributeError (session 34's
    review). Both end (an error naming the interrupt) and the next run() serves."""
    sched = SimpleScheduler(tiny_loader, 2, 4)
    hits, cb = _ctrl_c_in_first_callback()
    tasks = [sched.new_task(f"User: question {i}\n\nAssistant:", max_tokens=12,
                            temperature=0, finish_callback=cb) for i in range(2)]
    real = _interrupt_second_pulse(sched)
    with pytest.raises(KeyboardInterrupt):
        sched.run()
    assert len(hits) == 2  # the second task's callback ran too
    for t in tasks:
        assert t.wait(0) and t.finish_reason == "error" and "KeyboardInterrupt" in t.error
    assert all(s is None for s in sched.slots) and not sched.decoding
    sched.engine.pulse = real
    later = sched.new_task("User: again\n\nAssistant:", max_tokens=3, temperature=0)
    sched.run()
    assert later.wait(0) and later.finish_reason == "length"


def test_ctrl_c_after_a_refused_task_was_queued_again_queues_it_once(tiny_loader):
    """A task refused at admission (a token past the vocabulary) whose finish callback queued
    it again, then Ctrl-C: the tasks taken off the queue went back to it, this one included,
    so it was queued twice (two slots for one task at the next run: every task there failed;
    a review of session 34's change). It is queued once."""
    sched = SimpleScheduler(tiny_loader, 4, 4)
    good = tiny_loader.encode(PROMPT)
    reasons = []

    def retry_once(_):
        reasons.append(task.finish_reason)
        if len(reasons) == 1:
            task.continue_gen()
            sched.add_task(task)
            raise KeyboardInterrupt

    task = Task(good[:-1] + [tiny_loader.cfg.vocab_size + 5], task_id="A", max_tokens=3,
                finish_callback=retry_once, tokenizer=tiny_loader)
    other = sched.new_task(PROMPT, max_tokens=3, temperature=0)
    sched.add_task(task)
    with pytest.raises(KeyboardInterrupt):
        sched.run()
    assert list(sched.waiting) == [other, task]  # (other: taken with it, waits again first)
    sched.run()
    assert reasons == ["error", "error"] and other.wait(0) and other.finish_reason == "length"


def test_ctrl_c_in_a_callback_during_shutdown_finishes_every_task(tiny_loader):
    """shutdown() from the main thread finishes the queued tasks ("abort"); Ctrl-C in the
    first one's callback left the others queued nowhere, held for ever, and the scheduler
    stopping (a review of session 34's change). Every task ends, the shutdown completes,
    then the interrupt is raised; the scheduler runs again afterwards."""
    sched = SimpleScheduler(tiny_loader, 2, 4)
    hits, cb = _ctrl_c_in_first_callback()
    tasks = [sched.new_task(f"User: {i}\n\nAssistant:", max_tokens=3, finish_callback=cb)
             for i in range(3)]
    with pytest.raises(KeyboardInterrupt):
        sched.shutdown()
    assert all(t.wait(0) and t.finish_reason == "abort" for t in tasks) and len(hits) == 3
    later = sched.new_task(PROMPT, max_tokens=3, temperature=0)
    sched.run()
    assert later.wait(0) and later.finish_reason == "length"


@pytest.mark.parametrize("callback", ["finish_callback", "collect_callback"])
def test_a_callbacks_shutdown_with_a_daemon_beside_a_run_tears_down_once(tiny_loader, errors,
                                                                          callback):
    """``run()`` stepping on a worker thread (begun before the daemon, which then leaves the
    steps to it) and a callback's ``shutdown()`` (a finish callback on the copy-back thread, or
    a token callback in run()'s step): the teardown was left to "the stepping thread", but the
    daemon's loop end did it, releasing the slots under run()'s step. Only run() tears down."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    seen, real_teardown, real_admit = [], sched._teardown, sched._admit
    daemon_up, fired = threading.Event(), []

    def teardown(timeout):
        seen.append((threading.current_thread(), sched._stepper, sched._busy))
        real_teardown(timeout)

    def admit():
        if sched._stopping:  # (run()'s step is under way when the daemon wakes)
            time.sleep(0.3)
        real_admit()

    def stop_all(_):
        if not fired:
            fired.append(1)
            assert daemon_up.wait(10)
            sched.shutdown()

    sched._teardown, sched._admit = teardown, admit
    short = sched.new_task(PROMPT, max_tokens=2, temperature=0, **{callback: stop_all})
    long = sched.new_task(PROMPT + " y", max_tokens=500, temperature=0)
    runner = threading.Thread(target=sched.run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 30
    while sched._stepper is not runner:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    sched.start_daemon()
    daemon_up.set()
    runner.join(30)
    sched._thread.join(30)
    assert not runner.is_alive() and not sched._daemon_alive
    assert all(t.wait(5) for t in (short, long)) and long.finish_reason == "abort"
    assert len(seen) == 1 and errors == [] and sched.slots == [None], (seen, errors)
    who, stepper, busy = seen[0]
    assert not (busy and who is not stepper), seen  # (not under run()'s step)


def _second_run_waiting(sched, real_step):
    """``run()`` on a worker thread held in its first step until a second ``run()`` (another
    worker) waits for it: (first, second, steps) with steps the (thread, tearing down) of every
    step after."""
    first_steps, go, steps = threading.Event(), threading.Event(), []

    def step():
        if not first_steps.is_set():
            first_steps.set()
            assert go.wait(10)
        steps.append((threading.current_thread(), sched._stopping))
        real_step()

    sched.step = step
    first = threading.Thread(target=sched.run, daemon=True)
    first.start()
    assert first_steps.wait(30) and sched._stepper is first
    second = threading.Thread(target=sched.run, daemon=True)
    second.start()
    time.sleep(0.2)  # (the second run() waits for the first's end)
    go.set()
    return first, second, steps


def test_a_run_waiting_for_another_threads_run_returns_when_it_ends(tiny_loader):
    """A second ``run()`` waits (no timeout) for the thread stepping: that thread's end must
    wake it (here nothing else does: every task is home), else it waits for ever."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    cb, second = sched.engine.copyback, threading.Thread(target=sched.run, daemon=True)
    real_idle = cb.wait_idle

    def wait_idle(timeout=None):  # (the first run(), its tasks on their way home)
        idle = real_idle(timeout)
        if idle and all(t.wait(0) for t in tasks) and second.ident is None:
            second.start()
            time.sleep(0.2)  # (it waits for the first run()'s end)
        return idle

    cb.wait_idle = wait_idle
    tasks = [sched.new_task(PROMPT, max_tokens=3, temperature=0,
                            finish_callback=lambda _: time.sleep(0.3)) for _ in range(2)]
    sched.run()
    assert second.ident is not None  # (started while this run() waited for the copy-back)
    second.join(10)
    assert not second.is_alive() and all(t.finish_reason == "length" for t in tasks)


def test_a_run_waiting_does_not_step_under_a_deferred_teardown(tiny_loader, errors):
    """A token callback's ``shutdown()`` in ``run()``'s step leaves the teardown to that run()'s
    end; a second ``run()`` waiting meanwhile takes over only once it is over (it stepped the
    slots being released beside it when run() gave up the stepping before its teardown: a
    task added meanwhile ended "abort")."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    real_teardown, later = sched._teardown, []

    def teardown(timeout):
        later.append(sched.new_task(PROMPT, max_tokens=3, temperature=0))  # (served after)
        time.sleep(0.3)  # (a second run() would step it meanwhile)
        real_teardown(timeout)

    sched._teardown = teardown
    a = sched.new_task(PROMPT, max_tokens=500, temperature=0,
                       collect_callback=_shutdown_once(sched))
    b = sched.new_task(PROMPT + " y", max_tokens=500, temperature=0)
    first, second, steps = _second_run_waiting(sched, sched.step)
    first.join(30)
    second.join(30)
    assert not first.is_alive() and not second.is_alive()
    assert all(who is first or not stopping for who, stopping in steps), steps
    assert all(t.wait(5) and t.finish_reason == "abort" for t in (a, b)) and errors == []
    assert later[0].wait(5) and later[0].finish_reason == "length", later[0].finish_reason
    assert sched.slots == [None] and not sched._stopping
