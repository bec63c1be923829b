"""Finished tasks' state comes home through the copy-back thread intact: on the CPU, and on
CUDA (pinned staging, side stream) while graphs are captured for new capacities; submissions
are split into groups within a memory budget, in order, the scheduler thread waiting for
earlier groups rather than gathering past the budget."""

import threading
import time
from types import SimpleNamespace

import pytest
import torch

from server.model.loader import RWKV070ModelLoader
from server.model.state import State
from server.scheduler import DynamicScheduler, copyback
from server.scheduler.copyback import CopyBack, Staging, gather_rows, row_bytes, split_groups
from server.task.task import Status

CUDA = pytest.param("cuda", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")])


@pytest.mark.parametrize("small_budget", [False, True])
@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_copy_back_brings_exact_state_home(tiny_model_path, device, small_budget, monkeypatch):
    if small_budget:  # one row a group, two rows in flight: every unload is split and waits
        monkeypatch.setattr(copyback, "GROUP_BYTES", 1)
        monkeypatch.setattr(copyback, "BUDGET_BYTES", 700_000)  # a tiny-model row: ~330 kB
    gpu = RWKV070ModelLoader(tiny_model_path, device=device, dtype="fp32")
    sched = DynamicScheduler(gpu, max_batch_size=16, buffer_size=4)
    prompts = [gpu.encode(f"User: question {i}" + " more" * i + "\n\nAssistant:") for i in range(12)]
    tasks = [sched.new_task(p, max_tokens=3 + i % 4, temperature=0) for i, p in enumerate(prompts)]
    sched.run()  # capacities 16 -> ... -> 1: graphs captured while copies are in flight
    for task, p in zip(tasks, prompts):
        assert task.status == Status.FINISHED and task.state.device.type == "cpu"
        assert not task.state.wkv.is_pinned() and not task.penalties.is_pinned()
        ref = gpu.model.new_state(1)
        gpu.model.prefill([task.history], ref)  # the tokens the state should have consumed
        torch.testing.assert_close(task.state.wkv, ref.wkv.cpu(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(task.state.shift, ref.shift.cpu(), rtol=1e-4, atol=1e-5)
        assert task.history[: len(p) - 1] == p[:-1]
        assert task.rng_counter == len(task.output)
    sched.shutdown()


# ---- CopyBack alone, on small random rows ------------------------------------------------
def _rows(device="cpu", batch=8, shift_dtype=torch.float16):
    g = torch.Generator().manual_seed(0)
    state = State(torch.randn(2, 2, batch, 8, generator=g).to(device, shift_dtype),
                  torch.randn(2, batch, 2, 4, 4, generator=g).to(device))
    penalties = torch.randn(batch, 16, generator=g).to(device)
    counter = torch.randint(0, 1 << 40, (batch,), generator=g).to(device)
    return state, penalties, counter


def _tasks(n):
    return [SimpleNamespace(i=i, state=None, penalties=None, rng_counter=None) for i in range(n)]


def _assert_home(task, slot, state, penalties, counter):
    want = state.select([slot])
    assert torch.equal(task.state.wkv, want.wkv.cpu()) and torch.equal(task.state.shift, want.shift.cpu())
    assert task.state.shift.dtype == state.shift.dtype
    assert task.state.wkv.is_contiguous() and task.state.shift.is_contiguous()
    assert torch.equal(task.penalties, penalties[slot].cpu()) and task.rng_counter == counter[slot]


def test_split_groups_cover_all_rows_in_order():
    assert [len(r) for r in split_groups(10, 100, 250)] == [2, 2, 2, 2, 2]
    assert [len(r) for r in split_groups(5, 100, 1000)] == [5]
    assert split_groups(3, 100, 50) == [range(1), range(1, 2), range(2, 3)]  # a row alone
    assert [i for r in split_groups(7, 3, 7) for i in r] == list(range(7))


def test_row_bytes_counts_every_gathered_tensor():
    state, penalties, counter = _rows()
    g = gather_rows(state, penalties, counter, [3, 1])
    assert 2 * row_bytes(state, penalties, counter) == sum(
        t.numel() * t.element_size() for t in g.tensors())


def test_split_submission_brings_exact_rows_home_in_order():
    state, penalties, counter = _rows()
    rb = row_bytes(state, penalties, counter)
    cb = CopyBack(torch.device("cpu"), budget=3 * rb, group_bytes=2 * rb)
    slots, tasks, calls = [5, 1, 7, 0, 3], _tasks(5), []
    cb.submit(state, penalties, counter, slots, tasks, lambda ts, err: calls.append((ts, err)))
    assert cb.wait_idle(10)
    assert calls == [(tasks[0:2], None), (tasks[2:4], None), (tasks[4:5], None)]
    for task, slot in zip(tasks, slots):
        _assert_home(task, slot, state, penalties, counter)


@pytest.mark.parametrize("budget_rows,group_rows", [(3, 1), (4, 2), (0.5, 0.25)])
def test_gathered_rows_in_flight_stay_within_the_budget(monkeypatch, budget_rows, group_rows):
    """Bytes gathered and not yet copied home never exceed the budget (a row larger than the
    budget: one at a time); submit returns with every row gathered, the last ones in flight."""
    state, penalties, counter = _rows(batch=12)
    rb = row_bytes(state, penalties, counter)
    budget = int(budget_rows * rb)
    live, peak, lock = [0], [0], threading.Lock()
    real_gather, real_to_host = copyback.gather_rows, copyback.to_host

    def gather(*args):
        g = real_gather(*args)
        with lock:
            live[0] += sum(t.numel() * t.element_size() for t in g.tensors())
            peak[0] = max(peak[0], live[0])
        return g

    def to_host(g, *args):
        nbytes = sum(t.numel() * t.element_size() for t in g.tensors())
        time.sleep(0.02)  # a slow copy: a submit that did not wait would run past the budget
        out = real_to_host(g, *args)
        with lock:
            live[0] -= nbytes
        return out

    monkeypatch.setattr(copyback, "gather_rows", gather)
    monkeypatch.setattr(copyback, "to_host", to_host)
    cb = CopyBack(torch.device("cpu"), budget=budget, group_bytes=int(group_rows * rb))
    slots, tasks, calls = list(range(11, -1, -1)), _tasks(12), []
    t0 = time.perf_counter()
    cb.submit(state, penalties, counter, slots, tasks, lambda ts, err: calls.append(err))
    took = time.perf_counter() - t0
    # submit waited for room at least twice (20 ms copies), and the stats count it
    assert 0.04 <= cb.stats[2] <= took
    assert cb.busy  # the last groups are still on their way home
    assert cb.wait_idle(10) and live[0] == 0 and calls == [None] * len(calls)
    assert peak[0] == max(budget // rb, 1) * rb  # the budget was filled, never exceeded
    for task, slot in zip(tasks, slots):
        _assert_home(task, slot, state, penalties, counter)


def _submit_six_failing(monkeypatch, name, message, budget_rows):
    """Submit slots 0..5 in groups of two to a CopyBack whose copyback.<name> raises
    RuntimeError(message) on its second call only; returns what the test needs."""
    real, n = getattr(copyback, name), [0]

    def flaky(*args):
        n[0] += 1
        if n[0] == 2:
            raise RuntimeError(message)
        return real(*args)

    monkeypatch.setattr(copyback, name, flaky)
    state, penalties, counter = rows = _rows()
    rb = row_bytes(state, penalties, counter)
    cb = CopyBack(torch.device("cpu"), budget=budget_rows * rb, group_bytes=2 * rb)
    tasks, calls = _tasks(6), []
    cb.submit(state, penalties, counter, [0, 1, 2, 3, 4, 5], tasks,
              lambda ts, err: calls.append((ts, err)))  # does not raise
    assert cb.wait_idle(10)
    return rows, cb, tasks, calls


def test_failed_copies_fail_their_group_and_the_thread_goes_on(monkeypatch):
    rows, cb, tasks, calls = _submit_six_failing(monkeypatch, "to_host", "copy failed", 2)
    assert calls == [
        (tasks[0:2], None), (tasks[2:4], "RuntimeError: copy failed"), (tasks[4:6], None)]
    assert tasks[2].state is None and tasks[3].state is None
    for i in (0, 1, 4, 5):
        _assert_home(tasks[i], i, *rows)
    later = _tasks(1)  # the thread goes on
    cb.submit(*rows, [7], later, lambda ts, err: calls.append((ts, err)))
    assert cb.wait_idle(10) and calls[-1] == (later, None)
    _assert_home(later[0], 7, *rows)


def test_a_failed_gather_fails_the_rest_of_the_submission_in_order(monkeypatch):
    rows, _, tasks, calls = _submit_six_failing(monkeypatch, "gather_rows", "out of memory", 4)
    assert calls == [(tasks[0:2], None), (tasks[2:6], "RuntimeError: out of memory")]
    assert all(t.state is None for t in tasks[2:])
    _assert_home(tasks[1], 1, *rows)


# ---- the staging path (CUDA's), run on the CPU with an ordinary buffer -------------------
def test_staging_copies_exact_rows_and_is_reused():
    state, penalties, counter = _rows(shift_dtype=torch.bfloat16)
    staging = Staging(min_bytes=64, pin=False)
    for slots in ([6, 2, 4], [1], [0, 1, 2, 3, 4, 5, 6, 7], [3, 5]):
        ref = copyback.to_host(gather_rows(state, penalties, counter, slots))
        states, pens, counters = copyback.to_host(
            gather_rows(state, penalties, counter, slots), None, staging)
        assert counters == ref[2] == [int(counter[s]) for s in slots]
        for st, want, pen, want_pen in zip(states, ref[0], pens, ref[1]):
            assert torch.equal(st.wkv, want.wkv) and torch.equal(st.shift, want.shift)
            assert st.shift.dtype == torch.bfloat16 and torch.equal(pen, want_pen)
        if slots == [1]:
            small = staging.buf
        staging.buf.fill_(0)  # the rows handed out are copies, not views of the buffer
        assert torch.equal(states[0].wkv, ref[0][0].wkv)
    assert staging.nbytes >= 8 * row_bytes(state, penalties, counter)  # grown for 8 rows
    assert small is not staging.buf
    grown = staging.buf
    copyback.to_host(gather_rows(state, penalties, counter, [0, 1]), None, staging)
    assert staging.buf is grown  # smaller copies reuse it


def test_staged_rows_leave_the_budget_before_they_are_cloned(monkeypatch):
    """Through a staging buffer (CUDA's path), a group's rows count against the budget only
    until they are in the buffer: the scheduler gathers the next group while the rows are
    still being cloned out of it (budget and group of one row, the first clone held)."""
    state, penalties, counter = _rows()
    rb = row_bytes(state, penalties, counter)
    entered, release = threading.Event(), threading.Event()
    real_split = copyback.split_rows

    def held_split(*host):
        if not entered.is_set():
            entered.set()
            release.wait(10)
        return real_split(*host)

    monkeypatch.setattr(copyback, "split_rows", held_split)
    cb = CopyBack(torch.device("cpu"), budget=rb, group_bytes=rb)
    cb.staging = Staging(rb, pin=False)
    held = []  # the budget in use while each group is copied into the buffer: still counted
    real_copy_in = cb.staging.copy_in
    monkeypatch.setattr(cb.staging, "copy_in",
                        lambda *a: held.append(cb._in_flight) or real_copy_in(*a))
    tasks, calls = _tasks(2), []
    submit = threading.Thread(target=cb.submit, args=(
        state, penalties, counter, [4, 0], tasks, lambda ts, err: calls.append((ts, err))))
    submit.start()
    assert entered.wait(5)  # the first row's clone is held...
    submit.join(5)  # ...and the second group was gathered meanwhile
    assert not submit.is_alive() and not release.is_set()
    release.set()
    assert cb.wait_idle(10)
    assert calls == [([t], None) for t in tasks] and cb._in_flight == 0
    assert held == [rb, rb]
    for task, slot in zip(tasks, [4, 0]):
        _assert_home(task, slot, state, penalties, counter)


def test_a_group_is_at_most_the_budget():
    """A group goes through whenever nothing else is in flight, so a budget below the group
    size bounded nothing (256 MiB groups, the budget's default since session 66: any
    RWKV_COPYBACK_MB up to 256 gave the same peak; session 66's review). Groups shrink to the
    budget, and the staging buffer with them; a larger budget keeps the group size."""
    cb = CopyBack(torch.device("cpu"), budget=1000, group_bytes=4000)
    assert cb.group_bytes == 1000
    cb.staging = Staging(4000, pin=False)
    cb.budget = 3000
    pad = 4 * copyback._ALIGN  # (a group's 4 tensors each start at an aligned offset)
    assert cb.group_bytes == 3000 and cb.staging.min_bytes == 3000 + pad
    cb.budget = 10_000
    assert cb.group_bytes == 4000 and cb.staging.min_bytes == 4000 + pad
    served = CopyBack(torch.device("cpu"))
    assert served.budget == copyback.BUDGET_BYTES and served.group_bytes == copyback.GROUP_BYTES
    served.budget = 1 << 20  # RWKV_COPYBACK_MB=1
    assert served.group_bytes == 1 << 20


def test_copy_back_time_is_split_into_the_copy_home_and_the_clones(monkeypatch):
    """The thread's seconds are reported as getting the rows to host memory and cloning them
    (the stress bench prints both: which one paces a small budget)."""
    state, penalties, counter = _rows()
    rb = row_bytes(state, penalties, counter)
    real_split = copyback.split_rows
    monkeypatch.setattr(copyback, "split_rows",
                        lambda *host: time.sleep(0.3) or real_split(*host))
    cb = CopyBack(torch.device("cpu"), budget=rb, group_bytes=rb)
    cb.staging = Staging(rb, pin=False)
    real_copy_in = cb.staging.copy_in
    monkeypatch.setattr(cb.staging, "copy_in", lambda *a: time.sleep(0.1) or real_copy_in(*a))
    cb.submit(state, penalties, counter, [1, 3], _tasks(2), lambda ts, err: None)
    assert cb.wait_idle(10)
    tasks, busy, _, home, clones = cb.stats
    assert tasks == 2 and 0.2 <= home < 0.55 and 0.6 <= clones <= home + clones <= busy


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_copy_back_bounds_device_memory_and_reuses_pinned_staging():
    state, penalties, counter = _rows("cuda", batch=64, shift_dtype=torch.float16)
    state.wkv = torch.randn(2, 64, 4, 64, 64, device="cuda")  # ~128 kB a row
    rb = row_bytes(state, penalties, counter)
    cb = CopyBack(torch.device("cuda"), budget=8 * rb, group_bytes=2 * rb)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    slots, tasks = list(range(63, -1, -1)), _tasks(64)
    cb.submit(state, penalties, counter, slots, tasks, lambda ts, err: None)
    assert cb.wait_idle(30)
    # in flight: the budget (a group is gathered in one copy, with no intermediate)
    assert torch.cuda.max_memory_allocated() - base <= 8 * rb + (1 << 20)
    buf = cb.staging.buf
    assert buf.is_pinned() and buf.numel() <= 2 * rb + 4 * 256
    cb.submit(state, penalties, counter, [5, 9], _tasks(2), lambda ts, err: None)
    assert cb.wait_idle(30) and cb.staging.buf is buf
    for task, slot in zip(tasks, slots):
        assert not task.state.wkv.is_pinned()
        _assert_home(task, slot, state, penalties, counter)


@pytest.mark.parametrize("stepper", ["run", "daemon"])
def test_a_shutdown_from_a_finish_callback_with_the_budget_full_ends(tiny_loader, stepper):
    """``shutdown()`` in a finish callback (the copy-back thread) while the step that released
    the task waits for room in the budget: the shutdown sent the states of the slots left home
    from the copy-back thread, and waited there for room only the copy-back thread itself
    makes — for ever, with every task unfinished. Then it joined the stepping thread, stuck in
    that wait, until both its time limits ran out (~130 s by default; session 54). Now the
    stepping thread (a ``run()`` caller or the daemon) tears down once its step ends, as after
    a shutdown from a callback of its own: default limits, done in seconds."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=4)
    eng = sched.engine
    eng.copyback.budget = row_bytes(eng.state, eng.samp.penalties, eng.samp.counter)
    eng.copyback.group_bytes = 1  # a row a group, one in flight: the step waits for each
    returned = threading.Event()

    def stop_all(_):
        sched.shutdown()
        returned.set()

    prompt = [300 + i for i in range(6)]
    short = [sched.new_task(prompt, max_tokens=2, temperature=0) for _ in range(3)]
    short[0].finish_callback = stop_all  # (the first of the three to come home)
    long = sched.new_task(prompt, max_tokens=500, temperature=0)
    t0 = time.monotonic()
    if stepper == "run":
        runner = threading.Thread(target=sched.run, daemon=True)
        runner.start()
    else:
        sched.start_daemon()
        runner = sched._thread
    assert returned.wait(20)
    runner.join(20)
    assert not runner.is_alive()
    assert all(t.wait(5) for t in short + [long])
    assert time.monotonic() - t0 < 20
    assert [t.finish_reason for t in short] == ["length"] * 3
    assert long.finish_reason == "abort" and long.state is not None
    assert sched.slots == [None] and not sched._stopping  # torn down, the shutdown over


def test_a_copy_back_thread_that_fails_to_start_fails_its_tasks_alone(tiny_loader, monkeypatch):
    """Starting the copy-back thread can fail ("can't start new thread": a process at its
    thread limit; the thread ends when idle and starts again on demand). The group was queued
    and its tasks counted as on their way home first: they never finished, and no thread ever
    started again (one not started was taken for running), so every later state stayed on
    its way home too. Now nothing is queued then: the tasks end as errors, later ones go on."""
    real, failed = threading.Thread, []

    class Flaky(real):
        def start(self):
            if self.name == "rwkv-copyback" and not failed:
                failed.append(True)
                raise RuntimeError("can't start new thread")
            super().start()

    monkeypatch.setattr(copyback.threading, "Thread", Flaky)
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    prompt = [300 + i for i in range(6)]
    first = sched.new_task(prompt, max_tokens=2, temperature=0)
    sched.start_daemon()
    try:
        assert first.wait(10) and failed
        assert first.finish_reason == "error" and "can't start new thread" in first.error
        assert first.history == [] and first.state is None  # (its own state: none)
        later = sched.new_task(prompt, max_tokens=2, temperature=0)
        assert later.wait(10) and later.finish_reason == "length" and later.state is not None
    finally:
        sched.shutdown()


def test_a_submit_from_the_copy_back_thread_never_waits_for_room():
    """A submit made on the copy-back's own thread (a finish callback whose task goes on at
    once) while the budget is full goes ahead: waiting there for room only that same thread
    frees would hang for ever (``submit``'s ``own``; untested since the shutdown's teardown
    moved to the stepping thread: session 72's mutation review). A budget of one row, two
    rows submitted: in the first group's callback the second is in flight."""
    state, penalties, counter = _rows()
    rb = row_bytes(state, penalties, counter)
    cb = CopyBack(torch.device("cpu"), budget=rb, group_bytes=rb)
    done, calls = threading.Event(), []

    def then(ts, err):
        calls.append(ts)
        if len(calls) == 1:  # the second row gathered meanwhile: the budget is full
            t0 = time.monotonic()
            while cb._in_flight == 0 and time.monotonic() - t0 < 5:
                time.sleep(0.001)
            assert cb._in_flight == rb
            cb.submit(state, penalties, counter, [4], _tasks(1), lambda ts, err: None)
            done.set()

    cb.submit(state, penalties, counter, [0, 1], _tasks(2), then)
    assert done.wait(5)
    assert cb.wait_idle(10)
