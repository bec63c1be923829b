"""Small fake tasks for the task store/manager tests (no model needed), and the crash-test child.

Run as ``python test/task_fakes.py crash-child DB`` it writes a template, then keeps creating and
finishing persistent tasks, printing ``FIN <task_id> <i> <time>`` after each, until it is killed.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from server.model.state import State  # noqa: E402
from server.task.task import Status, Task  # noqa: E402

L, C, H, N, V = 2, 8, 2, 4, 32  # tiny model shapes


def make_task(i: int, task_id: str = "TASK_x", dtype=torch.float32, state_dtype=torch.float32,
              status: Status = Status.FINISHED, shape=(L, C, H, N)) -> Task:
    """A deterministic task (depends only on ``i``) with state, penalties and tokens."""
    nl, nc, nh, nn = shape
    g = torch.Generator().manual_seed(1000 + i)
    t = Task(task_id=task_id, max_tokens=7 + i, temperature=0.25 + i / 8, top_p=0.5, top_k=3,
             presence_penalty=0.5, repetition_penalty=0.25, penalty_decay=0.996, seed=12345 + i,
             min_p=0.125 + i / 64)
    t.state = State(torch.randn(nl, 2, 1, nc, generator=g).to(dtype),  # shift [L, 2, 1, C]
                    torch.randn(nl, 1, nh, nn, nn, generator=g).to(state_dtype))  # wkv [L,1,H,N,N]
    t.penalties = torch.randn(V, generator=g)  # [V]
    t.history = list(range(i, i + 5 + i % 3))
    t.output = [i + 100, i + 101]
    t.round_lead = t.history[-2:]  # (the sequence before the round: stored with it)
    t.current_token = i + 101
    t.rng_counter = 2 + i
    t.prefill_time, t.gen_time, t.created = 0.01 * i, 0.5, 1.6e9 + i
    if status == Status.FINISHED:
        t.status, t.finish_reason, t.finished_at = status, "length", 1.7e9 + i
    else:
        t.status = status
    return t


def same_bits(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Bit-exact equality (NaNs and -0.0 included), dtype and shape too."""
    if a is None or b is None:
        return a is None and b is None
    return (a.dtype == b.dtype and a.shape == b.shape
            and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def same_task(a: Task, b: Task, check_id: bool = True) -> bool:
    """Every stored field equal, tensors bit-exact."""
    fields = ("status", "max_tokens", "temperature", "top_p", "top_k", "presence_penalty",
              "repetition_penalty", "penalty_decay", "seed", "min_p", "rng_counter",
              "current_token",
              "pending", "history", "output", "round_lead", "finish_reason", "error",
              "prefill_time", "gen_time", "created", "finished_at")
    if check_id and a.task_id != b.task_id:
        return False
    if any(getattr(a, f) != getattr(b, f) for f in fields):
        return False
    if (a.state is None) != (b.state is None):
        return False
    states = a.state is None or (same_bits(a.state.shift, b.state.shift)
                                 and same_bits(a.state.wkv, b.state.wkv))
    return states and same_bits(a.penalties, b.penalties)


def delete_held_at_the_row(tm, task_id, force: bool = False):
    """Start deleting ``task_id`` and hold it where it has dropped the id from memory but not
    yet called the writer (as when the writer is busy with another task's write, or another
    connection holds SQLite's lock). Returns its release."""
    reached, go = threading.Event(), threading.Event()
    real_delete = tm.writer.delete

    def held_delete(*args, **kwargs):
        reached.set()
        assert go.wait(10)
        return real_delete(*args, **kwargs)

    tm.writer.delete = held_delete
    deleter = threading.Thread(target=tm.delete_task_from_any_level, args=(task_id, force))
    deleter.start()
    assert reached.wait(10)

    def release():
        go.set()
        deleter.join(10)
        assert not deleter.is_alive()
        tm.writer.delete = real_delete
    return release


def crash_child(db: str) -> None:
    from server.task.manager import TaskManager

    # nothing is evicted: only the write-on-finish hook can have stored the tasks
    tm = TaskManager(db_path=db, capacity=10**6, queue_size=8, max_db_size=10**6)
    big = (4, 64, 4, 16)  # a few hundred KB per task: writes are in progress when killed
    tm.put_task("_crash_tpl", make_task(0, shape=big))
    print("TPL", flush=True)
    i = 1
    while True:
        t = make_task(i, status=Status.READY, shape=big)
        tm.put_task(f"TASK_{i:032x}", t)
        t._finish("length")  # as the scheduler does: the manager writes it now
        print(f"FIN {t.task_id} {i} {time.time()}", flush=True)
        i += 1
        time.sleep(0.005)


if __name__ == "__main__" and sys.argv[1:2] == ["crash-child"]:
    crash_child(sys.argv[2])
