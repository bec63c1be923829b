"""In-process A/B fuzz: one seeded op script run on a scheduler without a cache and one with a
tiny PrefixCache (a few states); every reply compared; cache invariants checked every step."""
import sys, random, argparse, time
sys.path.insert(0, "/tmp/fz_cache/fuzz")
from common import *
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache, state_nbytes, ENTRY_OVERHEAD, DEFER_MAX
from server.task.task import Task, Status
from server.task.cache_origin import origin_of

TT = 261
ap = argparse.ArgumentParser()
ap.add_argument("--seeds", default="0-9"); ap.add_argument("--per-row", type=int, default=1)
ap.add_argument("--batch", type=int, default=4); ap.add_argument("--ops", type=int, default=40)
ap.add_argument("--exact", type=int, default=1)
args = ap.parse_args()
L = loader(); M = L.model
if args.per_row: per_row(M)
SB = state_nbytes(M.new_state(1))
LOG = 4 * M.cfg.vocab_size

def toks(rng, n): return [rng.choice([11] + list(range(300, 400)) + list(range(20000, 20100))) for _ in range(n)]

def script(seed):
    rng = random.Random(seed)
    systems = [toks(rng, rng.choice([20, 40, 70, 150, 300])) for _ in range(3)]
    convs = []  # list of turn lists
    ops = []
    for i in range(args.ops):
        r = rng.random()
        samp = dict(temperature=0.0) if rng.random() < 0.5 else dict(temperature=1.0, top_p=0.9, top_k=0, seed=rng.randrange(1000))
        mt = rng.choice([0, 1, 3, 6, 6, 10])
        if r < 0.3 or not convs:  # new conversation
            c = [systems[rng.randrange(3)], toks(rng, rng.randrange(3, 60))]
            convs.append(c)
            ops.append(("new", i, prompt(c), mt, samp))
        elif r < 0.5:  # next turn of a conversation
            c = rng.choice(convs); c.append(toks(rng, rng.randrange(3, 80))); c.append(toks(rng, rng.randrange(3, 60)))
            ops.append(("new", i, prompt(c), mt, samp))
        elif r < 0.58:  # branch: other last message
            c = rng.choice(convs); c2 = c[:-1] + [toks(rng, rng.randrange(3, 60))]; convs.append(c2)
            ops.append(("new", i, prompt(c2), mt, samp))
        elif r < 0.66:  # same prompt again
            c = rng.choice(convs); ops.append(("new", i, prompt(c), mt, samp))
        elif r < 0.72:  # n>1: same prompt, seeds differ
            c = rng.choice(convs); s = rng.randrange(1000)
            for k in range(rng.choice([2, 3])):
                ops.append(("new", f"{i}.{k}", prompt(c), max(mt, 1), dict(temperature=1.0, top_p=0.9, top_k=0, seed=s + k)))
        elif r < 0.78:  # template then forks
            c = rng.choice(convs); ops.append(("new", i, prompt(c), 0, samp))
            for k in range(rng.choice([1, 2])):
                ops.append(("fork", f"{i}.f{k}", i, toks(rng, rng.randrange(1, 50)) + [TT], max(mt, 1), samp))
        elif r < 0.84:  # continue a finished task (Task API continue)
            ops.append(("cont", i, rng.randrange(i), toks(rng, rng.randrange(1, 50)), mt, samp))
        elif r < 0.9:  # stop mid-prefill a long prompt
            c = rng.choice(convs); ops.append(("new", i, prompt(c) + toks(rng, 400), mt, samp)); ops.append(("stop", i, rng.randrange(0, 3)))
        elif r < 0.95:  # warm next-turn prefix
            c = rng.choice(convs); ops.append(("warm", prompt(c[:-1]) + c[-1][:5]))
        else:
            ops.append(("wait", rng.randrange(1, 6)))
        if rng.random() < 0.4: ops.append(("wait", rng.randrange(0, 4)))
    return ops

def prompt(c):
    out = list(c[0])
    for t in c[1:]: out += [TT] + t
    return out + [TT, 5585, 41]  # "Assistant:"-ish

def check_cache(cache, where):
    if cache is None: return
    assert cache.bytes <= cache.max_bytes, (where, cache.bytes, cache.max_bytes)
    tot = sum(e.nbytes for e in cache._lru.values()); hot = sum(e.nbytes for e in cache._hot.values())
    assert tot == cache.bytes and hot == cache.hot_bytes, (where, tot, cache.bytes, hot, cache.hot_bytes)
    for e in cache._lru.values():
        exp = state_nbytes(e.state) + 4 * len(e.tokens) + ENTRY_OVERHEAD + (0 if e.logits is None else LOG)
        assert e.nbytes == exp, (where, e.nbytes, exp)
        assert (e.logits is None) or e.hot, where
    assert set(cache._hot) <= set(cache._lru)
    assert sorted(n for o in cache._lengths for n in cache._lengths[o]) == sorted(k[1] for k in cache._lru)

def run(ops, cache, batch, chunk):
    sched = DynamicScheduler(L, max_batch_size=batch, buffer_size=4, prefix_cache=cache, prefill_chunk=chunk)
    tasks, tainted = {}, set()
    steps = 0
    def step(n):
        nonlocal steps
        for _ in range(n):
            if not sched.has_work: break
            sched.step(); steps += 1
            check_cache(cache, steps)
            if cache is not None:
                assert cache.hot_bytes <= cache.device_bytes or not cache._hot, ("after settle", cache.hot_bytes, cache.device_bytes)
    def finish(tid):
        t = tasks[tid]; t0 = time.time()
        while not t.is_finished:
            step(1)
            if not t.is_finished: t.wait(0.002)
            if time.time() - t0 > 60: raise AssertionError(("hang", tid, t, t.status, sched.has_work))
    for op in ops:
        if op[0] == "new":
            _, tid, p, mt, samp = op
            t = Task(list(p), max_tokens=mt, **samp); t.cache_origin = ""
            tasks[tid] = t; sched.add_task(t)
        elif op[0] == "fork":
            _, tid, src, more, mt, samp = op
            if src in tainted: tainted.add(tid); continue
            finish(src); s = tasks[src]
            origin = origin_of(s); f = s.fork(f"f{tid}"); f.cache_origin = origin
            f.continue_gen(more, max_tokens=mt, **samp) if False else None
            f.max_tokens = mt; f.prefill(more)
            tasks[tid] = f; sched.add_task(f)
        elif op[0] == "cont":
            _, tid, src, more, mt, samp = op
            if tasks.get(src) is None or src in tainted or tasks[src].max_tokens == 0: continue
            finish(src); s = tasks[src]
            s.continue_gen(more, max_tokens=mt); tasks[tid] = s; sched.add_task(s)
            tasks[src] = None  # its output is gone (the task continued)
            tasks[f"{src}>{tid}"] = None
        elif op[0] == "stop":
            _, tid, k = op; step(k); tasks[tid].stop(); tainted.add(tid)
        elif op[0] == "warm":
            sched.warm_prefix("", op[1])
        elif op[0] == "wait":
            step(op[1])
    t0 = time.time()
    while sched.has_work:
        step(1); time.sleep(0.0005)
        assert time.time() - t0 < 120, "hang at end"
    check_cache(cache, "end")
    res = {}
    for tid, t in tasks.items():
        if t is None or tid in tainted: continue
        assert t.is_finished, (tid, t)
        res[tid] = (list(t.output), t.finish_reason)
    pf = sched.prefiller
    leaks = dict(seqs=len(pf._seqs), later=len(pf._later), warm=len(pf._warm), cap=sched.capacity,
                 active=sched.num_active, slots=sum(x is not None for x in sched.slots))
    return res, leaks, sched

bad = 0
lo, hi = map(int, args.seeds.split("-"))
for seed in range(lo, hi + 1):
    rng = random.Random(seed * 7919)
    ops = script(seed)
    budget = int(SB * rng.choice([1.1, 1.6, 2.5, 4, 7, 12]))
    frac = rng.choice([0.0, 0.3, 0.5, 1.0])
    arena = rng.random() < 0.5
    chunk = rng.choice([40, 64, 100, 256, 4096])
    cache = PrefixCache(budget, device="cpu", device_bytes=int(budget * frac), arena=arena)
    t0 = time.time()
    try:
        ref, _, _ = run(ops, None, args.batch, chunk)
        got, leaks, sched = run(ops, cache, args.batch, chunk)
    except AssertionError as e:
        import traceback; traceback.print_exc(); print(f"seed {seed}: ASSERT {e!r}"); bad += 1; continue
    diff = [k for k in ref if ref[k] != got.get(k)]
    st = cache.stats()
    exact = None
    if args.exact:
        from model_cases import state_gap
        exact = sum(state_gap(M, e.tokens, e.state, rtol=0, atol=0) is not None for (o, _, _), e in cache._lru.items() if o == "")
    print(f"seed {seed}: budget={budget/SB:.1f}st frac={frac} arena={arena} chunk={chunk} tasks={len(ref)} diff={len(diff)} "
          f"hits={st['hits']} miss={st['misses']} ins={st['inserts']} ev={st['evictions']} entries={st['entries']} inexact={exact} leaks={leaks} {time.time()-t0:.0f}s", flush=True)
    for k in diff[:5]:
        print("   ", k, "ref", ref[k], "got", got.get(k))
    bad += bool(diff) or bool(exact)
print("BAD", bad)
