"""Daemon stress: threads add, stop, continue tasks at random moments; every finished task's
state must be its history's state (a slot mix-up gives another sequence's), its random stream
must have counted its draws, and nothing may hang."""
import random, sys, threading, time
import torch
from common import loader
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task

L = loader()
V = 65536
lock = threading.Lock()
problems = []

def ref_state(history):
    st = L.model.new_state(1)
    if history:
        L.model.prefill([list(history)], st, logits=False)
    return st

def check(t, draws, tag):
    if t.state is None:
        return
    r = ref_state(t.history)
    d = max((t.state.wkv - r.wkv).abs().max().item(), (t.state.shift - r.shift).abs().max().item())
    if d > 1e-2:
        with lock:
            problems.append(f"{tag}: state differs from its history's by {d:.3g} ({t})")
    if t.rng_counter != draws:
        with lock:
            problems.append(f"{tag}: rng_counter {t.rng_counter} != draws {draws} ({t}) reason={t.finish_reason}")

def worker(s, wid, n, rng):
    for k in range(n):
        toks = [rng.randrange(1, V) for _ in range(rng.choice([1, 3, 40, 90, 300]))]
        t = Task(toks, max_tokens=rng.choice([0, 1, 4, 16, 40]), temperature=1.0, top_p=1.0,
                 top_k=0, seed=rng.randrange(1 << 30))
        if rng.random() < 0.3:
            t.logit_bias = {0: rng.choice([4.0, 7.0])}  # end-of-text now and then
        t.cache_origin = "" if rng.random() < 0.5 else None
        draws = 0
        for rnd in range(rng.randint(1, 3)):
            try:
                s.add_task(t)
            except Exception as e:
                problems.append(f"add_task: {e!r}"); return
            if rng.random() < 0.4:
                time.sleep(rng.random() * 0.05)
                t.stop()
            if not t.wait(60):
                with lock:
                    problems.append(f"w{wid} task {k} round {rnd} HUNG: {t} status={t.status}")
                return
            draws += len(t.output) + (t.finish_reason == "stop")
            check(t, draws, f"w{wid} task {k} round {rnd}")
            if t.finish_reason == "error":
                problems.append(f"error: {t.error}")
            more = [rng.randrange(1, V) for _ in range(rng.choice([0, 1, 20]))]
            t.continue_gen(more or None, max_tokens=rng.choice([1, 5, 20]))

if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    rng = random.Random(seed)
    cache = PrefixCache(1 << 24, min_tokens=16) if rng.random() < 0.5 else None
    s = DynamicScheduler(L, max_batch_size=rng.choice([2, 4, 8]), buffer_size=rng.choice([1, 4, 8]),
                         prefill_chunk=rng.choice([32, 64, 512]), prefix_cache=cache)
    s.start_daemon()
    ths = [threading.Thread(target=worker, args=(s, i, 6, random.Random(seed * 100 + i))) for i in range(5)]
    for th in ths: th.start()
    for th in ths: th.join(300)
    s.shutdown()
    print("seed", seed, "problems:", problems[:10] if problems else "none")
