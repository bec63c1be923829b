"""Randomized concurrency fuzzer of TaskManager (see report). Usage:
   python fuzz.py SEED_FROM SEED_TO [--threads 4] [--ops 40] [--no-templates] [--fail 0.1] [--busy]"""
import argparse, gc, random, sqlite3, sys, threading, time, traceback
from common import *
import server.task.writer as W
from server.task.manager import TaskNotFound, TemplateExists, TaskBusy

W.RETRY_FAILED_S = 0.02
HOLD_MS = 3.0
DUMP = False

def sig(t):
    return None if t is None else (tuple(t.history), tuple(t.output), t.seed, t.max_tokens)

def exp_sig(i):
    return sig(make_task(i))

class Slow:
    def __init__(self, seed):
        self.on, self.fail_p = True, 0.0
        self.rng = random.Random(seed ^ 0x5EED)
        self.lock = threading.Lock()
    def r(self):
        with self.lock:
            return self.rng.random()
    def nap(self, ms=2.0):
        if self.on:
            time.sleep(self.r() * ms / 1000)

def wrap(tm, slow):
    st, wr = tm.store, tm.writer
    real_put, real_del, real_ins, real_get, real_meta = st.put, st.delete, st.insert, st.get, st.get_meta
    def put(*a, **k):
        slow.nap()
        if slow.on and slow.fail_p and slow.r() < slow.fail_p:
            raise sqlite3.OperationalError("disk I/O error")
        return real_put(*a, **k)
    def delete(*a, **k):
        slow.nap(); return real_del(*a, **k)
    def insert(*a, **k):
        slow.nap(); return real_ins(*a, **k)
    def get(*a, **k):
        slow.nap(); r = real_get(*a, **k); slow.nap(); return r
    def get_meta(*a, **k):
        slow.nap(); return real_meta(*a, **k)
    st.put, st.delete, st.insert, st.get, st.get_meta = put, delete, insert, get, get_meta
    real_wdel, real_wt = wr.delete, wr.write_template
    def wdelete(*a, **k):
        slow.nap(HOLD_MS); return real_wdel(*a, **k)
    def wtemplate(*a, **k):
        slow.nap(); r = real_wt(*a, **k); slow.nap(); return r
    wr.delete, wr.write_template = wdelete, wtemplate

def run(seed, n_threads, n_ops, templates, fail_p, busy, verbose=False):
    rng = random.Random(seed)
    cap = rng.choice([2, 3, 4]); qs = rng.choice([2, 4, 8])
    db = fresh_db()
    tm = TaskManager(db_path=db, capacity=cap, queue_size=qs, max_db_size=1000)
    slow = Slow(seed); slow.fail_p = fail_p
    wrap(tm, slow)
    ids = ["TASK_a", "TASK_b", "TASK_c"] + (["_Ta", "_Tb"] if templates else [])
    counter = [1]; clock = threading.Lock()
    log = []  # (id, kind, start, end, effect, result)
    errors = []
    extra = {}
    def nexti():
        with clock:
            counter[0] += 1; return counter[0]
    def rec(tid, kind, s, effect, result=None):
        e = time.monotonic_ns()
        with clock:
            log.append((tid, kind, s, e, effect, result, threading.current_thread().name, extra.pop(threading.get_ident(), None)))
    def worker(k):
        r = random.Random(seed * 1000 + k)
        for _ in range(n_ops):
            tid = r.choice(ids)
            op = r.choices(["put", "get", "del", "close", "fork", "putbusy"],
                           [30, 20, 20, 12, 10, 8 if busy else 0])[0]
            s = time.monotonic_ns()
            try:
                if op == "put":
                    i = nexti()
                    try:
                        tm.put_task(tid, make_task(i, task_id=tid)); rec(tid, "put", s, ("put", i))
                    except TemplateExists:
                        rec(tid, "put", s, ("fail",))
                elif op == "putbusy":
                    i = nexti()
                    t = make_task(i, task_id=tid, status=Status.READY)
                    t._stop_hook = lambda t: None
                    try:
                        tm.put_task(tid, t)
                    except TemplateExists:
                        rec(tid, "putbusy", s, ("fail",)); continue
                    time.sleep(r.random() * 0.004)
                    t._finish("length"); del t
                    rec(tid, "putbusy", s, ("put", i))
                elif op == "get":
                    got = sig(tm.get_task(tid)); rec(tid, "get", s, None, got)
                elif op == "del":
                    try:
                        tm.delete_task_from_any_level(tid, force=True); rec(tid, "del", s, ("del",))
                    except TaskNotFound:
                        rec(tid, "del", s, ("del",), "notfound")
                elif op == "close":
                    tm.close_task(tid); rec(tid, "close", s, None)
                elif op == "fork":
                    src = r.choice(ids)
                    if src == tid:
                        continue
                    try:
                        extra[threading.get_ident()] = src
                        tm.fork_template(src, new_id=tid); rec(tid, "fork", s, ("put?",))
                    except (TaskNotFound, TaskBusy, TemplateExists):
                        rec(tid, "fork", s, ("fail",))
            except Exception as e:
                errors.append(f"op {op} {tid}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
            if r.random() < 0.05:
                gc.collect()
    ths = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in ths: t.start()
    for t in ths: t.join(120)
    if any(t.is_alive() for t in ths):
        return [f"seed {seed}: worker hung"]
    slow.on = False
    deadline = time.time() + 10
    while True:
        tm.writer.flush()
        if not tm.writer.unsaved or time.time() > deadline:
            break
        time.sleep(0.03)
    gc.collect()
    probs = [f"seed {seed}: exception {e}" for e in errors]
    w = tm.writer
    for name, val in [("writer._deletes", getattr(w, "_deletes", {})), ("tm._deleting", tm._deleting),
                      ("writer._failed", w._failed), ("writer._tickets", w._tickets)]:
        if val:
            probs.append(f"seed {seed}: leftover {name} = {dict(val)}")
    # per-get linearizability where unambiguous; final-state model
    muts = {}
    for x in log:
        if x[4] is not None:
            muts.setdefault(x[0], []).append(x)
    def settled_before(tid, t0):
        """effect of the unambiguous last mutating op ending before t0 (None if ambiguous)."""
        prev = [m for m in muts.get(tid, []) if m[3] < t0]
        if not prev:
            return ("del",)  # never put: absent
        last = max(prev, key=lambda m: m[2])
        if any(m is not last and m[3] > last[2] for m in prev):
            return None
        return last[4]
    def check(effect, got, what):
        if effect is None or effect[0] == "fail":
            return
        if effect[0] == "put" and got != exp_sig(effect[1]):
            probs.append(f"seed {seed}: {what}: expected put #{effect[1]} {exp_sig(effect[1])[0]}, got {got and got[0]}")
        if effect[0] == "put?" and got is None:
            probs.append(f"seed {seed}: {what}: expected present (fork), got None")
        if effect[0] == "del" and got is not None:
            probs.append(f"seed {seed}: {what}: expected absent (deleted), got {got[0]}")
    for x in log:
        if x[1] != "get":
            continue
        tid, _, s, e, _, got = x[:6]
        if any(m[2] < e and m[3] > s for m in muts.get(tid, [])):
            continue  # overlaps a mutation
        check(settled_before(tid, s), got, f"get {tid} at {s}")
    end = time.monotonic_ns() + 1
    live = {}
    for tid in ids:
        t = tm.get_task(tid)
        live[tid] = (sig(t), t)
    finals = {tid: settled_before(tid, end) for tid in ids}
    for tid in ids:
        check(finals[tid], live[tid][0], f"final live {tid}")
    live_objs = {tid: v[1] for tid, v in live.items()}
    live = {tid: v[0] for tid, v in live.items()}
    tm.close()
    tm2 = TaskManager(db_path=db, capacity=cap, queue_size=qs, max_db_size=1000)
    for tid in ids:
        t2 = tm2.get_task(tid)
        check(finals[tid], sig(t2), f"final restart {tid}")
        a = live_objs[tid]
        if (a is None) != (t2 is None) or (a is not None and not same_task(a, t2)):
            probs.append(f"seed {seed}: live/restart disagree on {tid}: live {live[tid] and live[tid][0]} restart {sig(t2) and sig(t2)[0]}")
    tm2.close()
    if verbose or probs:
        ops = {}
        for x in log:
            ops[x[1]] = ops.get(x[1], 0) + 1
        print(f"seed {seed} cap {cap} qs {qs} ops {ops} writes {w.writes} failures {w.failures}", flush=True)
    if probs and DUMP:
        t0 = min(x[2] for x in log)
        bad_ids = {i for i in ids if any(i in p for p in probs)}
        for x in sorted(log, key=lambda x: x[2]):
            if x[0] in bad_ids or x[7] in bad_ids:
                print(f"   {x[6]:>10} {x[0]:7} {x[1]:6} {(x[2]-t0)/1e6:9.2f}-{(x[3]-t0)/1e6:9.2f}ms eff={x[4]} res={x[5] and x[5][0] if isinstance(x[5], tuple) else x[5]} src={x[7]}")
    return probs

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("a", type=int); ap.add_argument("b", type=int)
    ap.add_argument("--threads", type=int, default=4); ap.add_argument("--ops", type=int, default=40)
    ap.add_argument("--no-templates", action="store_true"); ap.add_argument("--fail", type=float, default=0.0)
    ap.add_argument("--busy", action="store_true"); ap.add_argument("-v", action="store_true")
    ap.add_argument("--hold", type=float, default=3.0); ap.add_argument("--dump", action="store_true")
    args = ap.parse_args()
    HOLD_MS = args.hold
    DUMP = args.dump
    import logging
    from loguru import logger; logger.remove()
    bad, t0, nops = 0, time.time(), 0
    for seed in range(args.a, args.b):
        probs = run(seed, args.threads, args.ops, not args.no_templates, args.fail, args.busy, args.v)
        for p in probs:
            print(p, flush=True)
        bad += bool(probs)
    print(f"DONE seeds {args.a}..{args.b-1}: {bad} with problems, {time.time()-t0:.0f}s", flush=True)
