"""The SDK without HTTP, given wrong arguments (item 1 of session 66's QA brief): each call
should raise a clear exception at once; the scheduler (run() and the daemon thread) must not
die or hang. Model: /tmp/qa66/sdk/model.pth (tiny random). Run from the repository root:
    RWKV_TASK_DB_PATH=/tmp/qa66/sdk/bad.db uv run python docs/experiments/session66/qa/sdk_bad_input.py
Prints one line per case: the exception (type: message) or what came back; HANG if a run()
took more than 30 s.
"""
import os, sys, threading, time
sys.path.insert(0, os.getcwd())
from server import RWKV070ModelLoader, DynamicScheduler, SimpleScheduler, Task
from server.task.manager import get_task_manager

MP = "/tmp/qa66/sdk/model.pth"


def case(name, fn):
    try:
        r = fn()
        print(f"{name:36s} OK  {str(r)[:150]}")
        return r
    except BaseException as e:
        print(f"{name:36s} {type(e).__name__}: {str(e)[:200]}")


def run_with_timeout(s, limit=30):
    err = []
    def target():
        try:
            s.run()
        except BaseException as e:
            err.append(e)
    th = threading.Thread(target=target, daemon=True); t0 = time.time(); th.start(); th.join(limit)
    if th.is_alive():
        return f"HANG (> {limit}s)"
    return f"returned in {time.time()-t0:.2f}s" + (f", raised {type(err[0]).__name__}: {err[0]}" if err else "")


case("loader missing file", lambda: RWKV070ModelLoader("/tmp/qa66/none.pth"))
case("loader directory", lambda: RWKV070ModelLoader("/tmp/qa66/sdk"))
case("loader text file", lambda: RWKV070ModelLoader("/work/main/README.md"))
case("loader None", lambda: RWKV070ModelLoader(None))
loader = RWKV070ModelLoader(MP)
case("loader bad device", lambda: RWKV070ModelLoader(MP, device="gpu7"))
case("Dyn max_batch_size=0", lambda: DynamicScheduler(loader, max_batch_size=0))
case("Dyn buffer_size=-1", lambda: DynamicScheduler(loader, buffer_size=-1))
case("Dyn max_batch_size='8'", lambda: DynamicScheduler(loader, max_batch_size="8"))
case("Dyn max_batch_size=3", lambda: DynamicScheduler(loader, max_batch_size=3).max_batch_size)
case("Simple(loader) no args", lambda: SimpleScheduler(loader, max_batch_size=2).capacity)
s = DynamicScheduler(loader, max_batch_size=4, buffer_size=8)
print("run with nothing queued:", run_with_timeout(s))
V = loader.cfg.vocab_size if hasattr(loader, "cfg") else 65536
bad = {
    "prompt None": dict(prompt=None),
    "prompt int": dict(prompt=5),
    "prompt empty str": dict(prompt=""),
    "prompt empty list": dict(prompt=[]),
    "prompt ids oob": dict(prompt=[V + 5]),
    "prompt ids neg": dict(prompt=[-3]),
    "prompt ids float": dict(prompt=[1.5, 2.0]),
    "prompt ids str list": dict(prompt=["a", "b"]),
    "prompt bytes": dict(prompt=b"hello"),
    "max_tokens -1": dict(prompt="hi", max_tokens=-1),
    "max_tokens '5'": dict(prompt="hi", max_tokens="5"),
    "max_tokens 1.5": dict(prompt="hi", max_tokens=1.5),
    "max_tokens None": dict(prompt="hi", max_tokens=None),
    "max_tokens 10**12": dict(prompt="hi", max_tokens=10**12),
    "temperature -1": dict(prompt="hi", temperature=-1),
    "temperature nan": dict(prompt="hi", temperature=float("nan")),
    "temperature inf": dict(prompt="hi", temperature=float("inf")),
    "temperature '0.5'": dict(prompt="hi", temperature="0.5"),
    "top_p 2": dict(prompt="hi", top_p=2),
    "top_p nan": dict(prompt="hi", top_p=float("nan")),
    "top_k -5": dict(prompt="hi", top_k=-5),
    "top_k 10**9": dict(prompt="hi", top_k=10**9),
    "top_k 2.5": dict(prompt="hi", top_k=2.5),
    "min_p 2": dict(prompt="hi", min_p=2),
    "presence nan": dict(prompt="hi", presence_penalty=float("nan")),
    "penalty_decay 5": dict(prompt="hi", penalty_decay=5),
    "seed 'x'": dict(prompt="hi", seed="x"),
    "seed 2**70": dict(prompt="hi", seed=2**70),
    "seed -1": dict(prompt="hi", seed=-1),
    "seed 1.5": dict(prompt="hi", seed=1.5),
    "collect_callback 5": dict(prompt="hi", collect_callback=5),
    "finish_callback 'x'": dict(prompt="hi", finish_callback="x"),
    "logit_bias oob": dict(prompt="hi", logit_bias={V + 1: 5}),
    "logit_bias nan": dict(prompt="hi", logit_bias={1: float("nan")}),
    "logit_bias list": dict(prompt="hi", logit_bias=[1, 2]),
    "logit_bias str keys": dict(prompt="hi", logit_bias={"1": 5}),
    "constraint 'json'": dict(prompt="hi", constraint="json"),
    "task_id None": dict(prompt="hi", task_id=None),
    "unknown kwarg": dict(prompt="hi", foo=1),
}
made = []
for name, kw in bad.items():
    t = case(name, lambda kw=kw: s.new_task(**kw))
    if isinstance(t, Task):
        made.append((name, t))
print("run after bad input:", run_with_timeout(s, 60))
for name, t in made:
    print(f"   {name:30s} status={t.status.name} finish={getattr(t, 'finish_reason', None)} "
          f"err={getattr(t, 'error', None)!s:.100} n={len(t.round_tokens())}")

# callbacks that raise
def boom(*a):
    raise RuntimeError("callback boom")
t1 = s.new_task("hi", max_tokens=5, collect_callback=boom)
t2 = s.new_task("hi", max_tokens=5, finish_callback=boom)
t3 = s.new_task("hi", max_tokens=5)
print("run with raising callbacks:", run_with_timeout(s))
for t in (t1, t2, t3):
    print("   ", t.status.name, getattr(t, "finish_reason", None), str(getattr(t, "error", None))[:80], len(t.round_tokens()))

# task misuse
t = s.new_task("hi", max_tokens=3)
case("add_task same queued task", lambda: s.add_task(t))
print("run:", run_with_timeout(s))
case("add_task finished task", lambda: s.add_task(t))
case("add_task(str)", lambda: s.add_task("hello"))
case("add_task(None)", lambda: s.add_task(None))
case("continue_gen(prompt=5)", lambda: t.continue_gen(5))
case("continue_gen(temperature=-1)", lambda: t.continue_gen("x", temperature=-1))
print("   status after bad continue:", t.status.name)
case("continue_gen(bogus=1)", lambda: t.continue_gen("x", bogus=1))
case("t.prefill(None)", lambda: t.prefill(None))
case("t.max_tokens=-5; add_task", lambda: (t.continue_gen("x"), setattr(t, "max_tokens", -5), s.add_task(t)))
case("t.temperature='a'; add_task", lambda: (setattr(t, "max_tokens", 3), setattr(t, "temperature", "a"), s.add_task(t)))
case("fix and run again", lambda: (setattr(t, "temperature", 0.5), s.add_task(t), run_with_timeout(s)))
case("Task() bare", lambda: Task())
case("Task(prompt='x') no tokenizer add", lambda: s.add_task(Task("hello there")))
print("run:", run_with_timeout(s))
case("Task([1,2,3], max_tokens=2) add", lambda: (lambda tt: (s.add_task(tt), run_with_timeout(s), tt.round_tokens()))(Task([1, 2, 3], max_tokens=2)))
case("Task tokens oob add", lambda: (lambda tt: (s.add_task(tt), run_with_timeout(s), tt.status.name, tt.finish_reason, tt.error))(Task([V + 10], max_tokens=2)))

# task manager misuse
tm = get_task_manager()
case("tm.get_task('nope')", lambda: tm.get_task("nope"))
case("tm.put_task('_x', None)", lambda: tm.put_task("_x", None))
case("tm.put_task('_tpl', running-less new task)", lambda: tm.put_task("_tpl_new", Task([1, 2], max_tokens=0)))
case("tm.fork_template('_missing')", lambda: tm.fork_template("_missing"))
case("tm.put_task('bad id', t)", lambda: tm.put_task("bad id", t))
case("tm.put_task(5, t)", lambda: tm.put_task(5, t))

# daemon: bad input while it runs, it must stay alive and keep serving
s.start_daemon()
case("start_daemon twice", lambda: s.start_daemon())
case("run() while daemon", lambda: run_with_timeout(s, 10))
for name, kw in list(bad.items())[:12]:
    try:
        s.new_task(**kw)
    except Exception:
        pass
done = threading.Event(); got = []
s.new_task("hello", max_tokens=6, finish_callback=lambda toks: (got.append(toks), done.set()))
print("daemon served after bad input:", done.wait(30), got and len(got[0]), "thread alive:", s._thread and s._thread.is_alive())
tb = s.new_task("hi", max_tokens=4, collect_callback=boom)
tb.wait(20)
done2 = threading.Event()
s.new_task("hello", max_tokens=6, finish_callback=lambda toks: done2.set())
print("daemon after raising callback:", done2.wait(30), "alive:", s._thread and s._thread.is_alive())
t0 = time.time(); s.shutdown(); print(f"shutdown {time.time()-t0:.2f}s")
case("shutdown twice", lambda: s.shutdown())
case("new_task after shutdown", lambda: s.new_task("hi", max_tokens=2))
print("run after shutdown:", run_with_timeout(s, 30))
print("END")
