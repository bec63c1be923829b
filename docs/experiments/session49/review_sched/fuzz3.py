"""Differential fuzz: stop / continue / fork at random steps in a busy scheduler.
A task stopped at a random step then continued (same stream) must give the same tokens as one
run straight through; a fork of a finished task continued must equal the original continued."""
import random, sys
from common import loader, rowwise
from server.scheduler import DynamicScheduler
from server.task.task import Task, Status
from fuzz1 import params

L = loader(); rowwise(L.model)
V = 65536

def straight(toks, p, total, chunk, buf):
    s = DynamicScheduler(L, max_batch_size=1, buffer_size=buf, prefill_chunk=chunk)
    t = Task(list(toks), **{**p, "max_tokens": total}); s.add_task(t); s.run()
    return t.output, t.finish_reason

def one(seed, verbose=False):
    rng = random.Random(seed)
    chunk = rng.choice([32, 64, 512]); buf = rng.choice([1, 2, 4, 8])
    s = DynamicScheduler(L, max_batch_size=rng.choice([2, 4, 8]), buffer_size=buf, prefill_chunk=chunk)
    # background load
    bg = []
    for i in range(rng.randint(0, 6)):
        p = params(rng); p["max_tokens"] = rng.choice([3, 10, 40])
        bg.append((rng.randint(0, 15), Task([rng.randrange(1, V) for _ in range(rng.choice([1, 40, 100]))], **p)))
    toks = [rng.randrange(1, V) for _ in range(rng.choice([1, 2, 33, 80]))]
    p = params(rng); p["temperature"] = rng.choice([0.0, 1.0]); total = rng.randint(4, 30)
    p["max_tokens"] = total
    t = Task(list(toks), **p)
    stop_at = rng.randint(0, 12)
    arrive = rng.randint(0, 5)
    out = []
    step = 0; rounds = 0; stopped = False
    while True:
        for a, b in bg:
            if a == step and b.status == Status.PREFILL and not b.held:
                s.add_task(b)
        if step == arrive:
            s.add_task(t)
        if step == stop_at and not stopped:
            t.stop(); stopped = True
        if step > arrive and t.is_finished and not t.held:
            out += t.output
            left = total - len(out)
            if t.finish_reason == "abort" and left > 0 and rounds < 3:
                rounds += 1
                t.continue_gen(max_tokens=left)
                s.add_task(t)
                if rng.random() < 0.5:
                    stopped, stop_at = False, step + rng.randint(0, 6)
            else:
                break
        if s._has_slot_work:
            s.step()
        else:
            s.engine.copyback.wait_idle(0.1)
        step += 1
        if step > 3000:
            print("STUCK", seed); return False
    exp, reason = straight(toks, p, total, chunk, buf)
    n = len(out)
    ok = out == exp[:n] and (t.finish_reason == "abort" or out == exp)
    if not ok or verbose:
        print(f"seed {seed} p={p} toks={len(toks)} chunk={chunk} buf={buf} stop_at={stop_at} arrive={arrive} rounds={rounds} reason={t.finish_reason}")
        print("  got", out); print("  exp", exp, reason)
    return ok

if __name__ == "__main__":
    a, b = int(sys.argv[1]), int(sys.argv[2])
    bad = [sd for sd in range(a, b) if not one(sd)]
    print("bad seeds", bad)
