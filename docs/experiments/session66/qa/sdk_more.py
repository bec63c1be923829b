"""More SDK (no HTTP) probes, item 1 of session 66's QA brief: SimpleScheduler with more tasks
than slots; a template stored by another model's shapes forked in the SDK; stop() from another
thread; shutdown() with tasks running; run() from two threads at once; task.wait().
Needs /tmp/qa66/mix.db holding `_big01` (a 0.1b-shaped state) and `_small` (tiny-shaped), made by
`python -m server.task.state_templates import` (see the QA report). Run from the repository root:
    RWKV_TASK_DB_PATH=/tmp/qa66/mix_sdk.db uv run python docs/experiments/session66/qa/sdk_more.py
(the script copies mix.db to mix_sdk.db first).
"""
import os, shutil, sqlite3, sys, threading, time
sys.path.insert(0, os.getcwd())
db = os.environ["RWKV_TASK_DB_PATH"]
for suf in ("", "-wal", "-shm", ".lock"):
    if os.path.exists(db + suf):
        os.remove(db + suf)
sqlite3.connect("file:/tmp/qa66/mix.db?mode=ro", uri=True).backup(sqlite3.connect(db))
from server import RWKV070ModelLoader, DynamicScheduler, SimpleScheduler, Task
from server.task.manager import get_task_manager


def case(name, fn):
    try:
        r = fn(); print(f"{name:40s} OK  {str(r)[:160]}"); return r
    except BaseException as e:
        print(f"{name:40s} {type(e).__name__}: {str(e)[:220]}")


def timed_run(s, limit=60):
    err = []
    th = threading.Thread(target=lambda: _wrap(s.run, err), daemon=True); t0 = time.time(); th.start(); th.join(limit)
    return "HANG" if th.is_alive() else f"{time.time()-t0:.2f}s" + (f" raised {err[0]!r}" if err else "")


def _wrap(f, err):
    try:
        f()
    except BaseException as e:
        err.append(e)


loader = RWKV070ModelLoader("/tmp/qa66/sdk/model.pth")
ss = SimpleScheduler(loader, max_batch_size=2, buffer_size=8)
ts = [ss.new_task(f"q{i}", max_tokens=10, temperature=0) for i in range(5)]
print("SimpleScheduler 5 tasks on 2 slots:", timed_run(ss), [len(t.round_tokens()) for t in ts], {t.finish_reason for t in ts})

s = DynamicScheduler(loader, max_batch_size=4, buffer_size=8)
tm = get_task_manager()
print("templates in db:", case("template_ids", lambda: tm.template_ids()))
good = s.new_task("hello", max_tokens=20, temperature=0)
fid = case("fork_template('_big01')", lambda: tm.fork_template("_big01"))
if fid:
    t = tm.get_task(fid)
    case("continue_gen+prefill+add_task", lambda: (t.continue_gen(), t.prefill(loader.encode("x")),
                                                   setattr(t, "max_tokens", 5), s.add_task(t)))
    print("run:", timed_run(s), "| big01 fork:", t.status.name, t.finish_reason, str(t.error)[:150],
          "| innocent:", good.finish_reason, len(good.round_tokens()))
fid2 = tm.fork_template("_small"); t2 = tm.get_task(fid2)
t2.continue_gen(); t2.prefill(loader.encode("User: hi\n\nAssistant:")); t2.max_tokens = 5
s.add_task(t2); print("fork _small:", timed_run(s), t2.finish_reason, len(t2.round_tokens()))
case("fork_template on non-template TASK", lambda: tm.fork_template(fid2))
case("put_task('_small', t2) (exists)", lambda: tm.put_task("_small", t2))
case("put_task of a RUNNING task as template", lambda: (lambda tt: (s.start_daemon(), time.sleep(0.3), tm.put_task("_running_tpl", tt)))(s.new_task("run", max_tokens=3000)))

# stop() from another thread while the daemon runs
t3 = s.new_task("long", max_tokens=5000)
time.sleep(0.5)
t0 = time.time(); t3.stop(); ok = t3.wait(10)
print(f"stop from main thread: waited {time.time()-t0:.2f}s finished={ok} reason={t3.finish_reason} tokens={len(t3.round_tokens())}")
# wait with timeout on a task never added
t4 = Task(loader.encode("x"), max_tokens=3)
t0 = time.time(); print("wait() on a never-added task:", t4.wait(2), f"{time.time()-t0:.2f}s")
# shutdown with tasks running
running = [s.new_task(f"r{i}", max_tokens=5000) for i in range(3)]
queued = [s.new_task(f"w{i}", max_tokens=50) for i in range(4)]
time.sleep(0.5)
t0 = time.time(); s.shutdown(); print(f"shutdown with 7 tasks: {time.time()-t0:.2f}s")
for t in running + queued:
    print("   ", t.status.name, t.finish_reason, str(t.error)[:90], len(t.round_tokens()))
print("run() after shutdown finishes the leftovers:", timed_run(s, 120), [t.status.name for t in running + queued])

# two threads calling run() at once
s2 = DynamicScheduler(loader, max_batch_size=4, buffer_size=8)
tt = [s2.new_task(f"z{i}", max_tokens=200) for i in range(4)]
errs = []
ths = [threading.Thread(target=lambda: _wrap(s2.run, errs)) for _ in range(2)]
t0 = time.time(); [th.start() for th in ths]; [th.join(120) for th in ths]
print(f"two run() at once: {time.time()-t0:.2f}s alive={[th.is_alive() for th in ths]} errors={errs}",
      [t.finish_reason for t in tt], [len(t.round_tokens()) for t in tt])
print("END")
