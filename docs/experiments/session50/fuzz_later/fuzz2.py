"""Prefix-cache fuzz on the CPU under the GPU emulation (a pass of >= 4 rows has other WKV bits;
``pass_keeps_bits(rows) = rows < 4``). In process, DynamicScheduler, real loader, tiny random
checkpoint. Concurrent bursts of multi-turn chats, n>1, templates (fork of a task as '_T..'),
forks/continues, stops mid-prefill, warm prefixes, small step budgets, small/large batches,
evicting caches.

Checks:
 P1  every state the cache is given (checked at insert time, wrapping PrefixCache.insert) and
     every entry left at the end equals bit for bit a lone uncached prefill of its tokens from
     its origin's state (zero state, or the template's); logits too where kept;
 P2  after the workload, probe requests sent alone give the same output and final state with
     the (warm) cache as on a fresh cache-off scheduler (greedy and seeded);
 P3  no crash, no hang (timeouts), cache bytes within bound after every step, nothing left over;
 P4  later/warm jobs: <= LATER_MAX waiting, the scheduler idles once tasks end (steps counted),
     later/warm tokens bounded by the prompt tokens.
Usage: OMP_NUM_THREADS=1 uv run python report/fuzz2.py --seeds 0-9
"""
import os, sys, random, argparse, time, traceback
sys.path.insert(0, "/tmp/h1"); sys.path.insert(0, "/tmp/h1/test")
import torch
torch.set_num_threads(1)
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache, state_nbytes, ENTRY_OVERHEAD
from server.scheduler.later import LATER_MAX, WARM_MAX
from server.task.task import Task, Status
from server.task.cache_origin import origin_of, origin_base
from server.task.template_start import start_from

MODEL = "/tmp/h1/report/tiny.pth"
TT = 261
ap = argparse.ArgumentParser()
ap.add_argument("--seeds", default="0-9")
ap.add_argument("--ops", type=int, default=30)
ap.add_argument("--emulate", type=int, default=1)
ap.add_argument("--ab", type=int, default=1, help="also run the workload cache-off (info only)")
ap.add_argument("--nudge-y", type=int, default=0, help="also nudge the WKV output of a >= 4-row pass (its logits and shift states differ too)")
ap.add_argument("--rows", type=int, default=4, help="a pass of this many rows or more has other bits")
ap.add_argument("--chunks", default="32,40,64,100,256,4096")
ap.add_argument("--lie", type=int, default=0, help="sanity: pass_keeps_bits always True (the checker must then fail)")
args = ap.parse_args()

if not os.path.exists(MODEL):
    from server.model.random import main as make_random
    make_random([MODEL, "--preset", "tiny", "--seed", "1"])
from server.model.loader import RWKV070ModelLoader
L = RWKV070ModelLoader(MODEL, device="cpu")
M = L.model
REAL_CHUNK = M.wkv_chunk
COUNT = dict(nudged=0, nokeep=0)
EMU = [bool(args.emulate)]


def batched_other_bits(S, *a, **kw):
    y = REAL_CHUNK(S, *a, **kw)
    if EMU[0] and S.shape[0] >= args.rows:
        S.mul_(1 + 2 ** -20)
        COUNT["nudged"] += 1
        if args.nudge_y:
            y = y * (1 + 2 ** -20)
    return y


def keeps(rows):
    ok = rows < args.rows or not EMU[0] or args.lie
    if not ok:
        COUNT["nokeep"] += 1
    return ok


M.wkv_chunk = batched_other_bits
M.pass_keeps_bits = keeps
SB = state_nbytes(M.new_state(1))
LOG = 4 * M.cfg.vocab_size
ORIGINS = {"": (None, 0)}  # origin -> (state, base)


def lone(origin, tokens, logits=False):
    """State (and logits) of a lone uncached prefill of ``tokens`` from ``origin``'s state."""
    st0, base = ORIGINS[origin]
    st = M.new_state(1) if st0 is None else st0.clone()
    rest = list(tokens)[base:]
    lg = M.prefill([rest], st, logits=logits) if rest else None
    return st, lg


def same(a, b):
    return torch.equal(a.wkv, b.wkv) and torch.equal(a.shift, b.shift)


BAD_INSERTS = []
N_INSERT_CHECKED = [0, 0]  # states, logits


def wrap_insert(cache):
    real = cache.insert

    def insert(key, tokens, state, logits=None, defer=False):
        origin = key[0]
        if origin in ORIGINS and EMU[0] is not None:
            want, wl = lone(origin, tokens, logits=logits is not None)
            N_INSERT_CHECKED[0] += 1
            ok = same(want, state.to(device="cpu"))
            if logits is not None:
                N_INSERT_CHECKED[1] += 1
                ok = ok and torch.equal(wl.reshape(-1), logits.reshape(-1))
            if not ok:
                BAD_INSERTS.append((origin, len(tokens), logits is not None,
                                    "".join(traceback.format_stack(limit=6)[:-1])))
        else:
            BAD_INSERTS.append((origin, len(tokens), "unknown origin", ""))
        return real(key, tokens, state, logits, defer)
    cache.insert = insert


def toks(rng, n):
    return [rng.choice([11] + list(range(300, 400)) + list(range(20000, 20100))) for _ in range(n)]


def prompt(c):
    out = list(c[0])
    for t in c[1:]:
        out += [TT] + t
    return out + [TT, 5585, 41]


def samp_of(rng):
    return dict(temperature=0.0) if rng.random() < 0.5 else dict(
        temperature=1.0, top_p=0.9, top_k=0, seed=rng.randrange(1000))


def script(seed):
    rng = random.Random(seed)
    systems = [toks(rng, rng.choice([20, 40, 70, 150, 300])) for _ in range(3)]
    convs, ops = [], []
    for i in range(args.ops):
        r = rng.random()
        mt = rng.choice([0, 1, 3, 6, 6, 10])
        if r < 0.35 or not convs:  # a burst: several chats arrive together
            k = rng.randrange(3, 9)
            for j in range(k):
                if convs and rng.random() < 0.5:  # next turn of a chat
                    c = rng.choice(convs); c.append(toks(rng, rng.randrange(3, 60)))
                    c.append(toks(rng, rng.randrange(3, 60)))
                else:
                    c = [systems[rng.randrange(3)], toks(rng, rng.randrange(3, 90))]
                    convs.append(c)
                ops.append(("new", f"{i}.{j}", prompt(c), rng.choice([0, 1, 3, 6, 10]), samp_of(rng)))
        elif r < 0.45:  # branch
            c = rng.choice(convs); c2 = c[:-1] + [toks(rng, rng.randrange(3, 60))]; convs.append(c2)
            ops.append(("new", i, prompt(c2), mt, samp_of(rng)))
        elif r < 0.52:  # same prompt again
            ops.append(("new", i, prompt(rng.choice(convs)), mt, samp_of(rng)))
        elif r < 0.60:  # n>1
            c = rng.choice(convs); s = rng.randrange(1000)
            for k in range(rng.choice([2, 3, 4, 5])):
                ops.append(("new", f"{i}.{k}", prompt(c), max(mt, 1),
                            dict(temperature=1.0, top_p=0.9, top_k=0, seed=s + k)))
        elif r < 0.70:  # template (max_tokens 0 + as_template) then forks, several at once
            c = rng.choice(convs); ops.append(("new", i, prompt(c), 0, samp_of(rng)))
            ops.append(("tpl", f"T{i}", i))
            for k in range(rng.choice([1, 2, 4, 5])):
                ops.append(((rng.choice(["tfork", "tstart"])), f"{i}.t{k}", f"T{i}",
                            toks(rng, rng.randrange(1, 70)) + [TT], max(mt, 1), samp_of(rng)))
        elif r < 0.76:  # fork of a plain task
            ops.append(("fork", f"{i}.f", rng.randrange(i) if i else 0, toks(rng, rng.randrange(1, 60)) + [TT], mt, samp_of(rng)))
        elif r < 0.82:  # continue
            ops.append(("cont", i, rng.randrange(i) if i else 0, toks(rng, rng.randrange(1, 50)), mt, samp_of(rng)))
        elif r < 0.88:  # stop mid-prefill
            c = rng.choice(convs); ops.append(("new", i, prompt(c) + toks(rng, 300), mt, samp_of(rng)))
            ops.append(("stop", i, rng.randrange(0, 3)))
        elif r < 0.94:  # warm next-turn prefix
            c = rng.choice(convs); ops.append(("warm", prompt(c[:-1]) + c[-1][:5]))
        else:
            ops.append(("wait", rng.randrange(1, 6)))
        if rng.random() < 0.3:
            ops.append(("wait", rng.randrange(0, 4)))
    probes = []
    for k in range(3):
        c = rng.choice(convs)
        probes.append(prompt(c))
        probes.append(prompt(c + [toks(rng, 7), toks(rng, 9)]))
    return ops, probes


class Fail(Exception):
    pass


def check_cache(cache, where):
    if cache is None:
        return
    if cache.bytes > cache.max_bytes:
        raise Fail(("bytes over", where, cache.bytes, cache.max_bytes))
    tot = sum(e.nbytes for e in cache._lru.values())
    if tot != cache.bytes:
        raise Fail(("bytes count", where, tot, cache.bytes))


def run(ops, cache, batch, chunk, stats):
    sched = DynamicScheduler(L, max_batch_size=batch, buffer_size=4, prefix_cache=cache,
                             prefill_chunk=chunk)
    tasks, tainted, tpls = {}, set(), {}
    steps = [0]
    max_later = [0]

    def step(n):
        for _ in range(n):
            if not sched.has_work:
                break
            sched.step(); steps[0] += 1
            max_later[0] = max(max_later[0], len(sched.prefiller._later))
            check_cache(cache, steps[0])

    def finish(tid):
        t = tasks[tid]; t0 = time.time()
        while not t.is_finished:
            step(1)
            if not t.is_finished:
                t.wait(0.001)
            if time.time() - t0 > 90:
                raise Fail(("hang", tid, t, sched.has_work))

    for op in ops:
        kind = op[0]
        if kind == "new":
            _, tid, p, mt, samp = op
            t = Task(list(p), max_tokens=mt, **samp); t.cache_origin = ""
            tasks[tid] = t; sched.add_task(t)
        elif kind == "tpl":  # as_template: a copy named "_..."
            _, tid, src = op
            if src in tainted:
                tainted.add(tid); continue
            finish(src); s = tasks[src]
            origin = origin_of(s); tpl = s.fork("_" + tid); tpl.cache_origin = origin
            tpl.status = Status.FINISHED
            o = origin_of(tpl)
            if o and o not in ORIGINS:
                ORIGINS[o] = (tpl.state.clone(), origin_base(o))
            tpls[tid] = tpl
        elif kind in ("tfork", "tstart"):
            _, tid, src, more, mt, samp = op
            if src not in tpls:
                tainted.add(tid); continue
            tpl = tpls[src]
            if kind == "tfork":  # Task API fork of a template, then continue with a prompt
                origin = origin_of(tpl); f = tpl.fork("f" + tid); f.cache_origin = origin
                f.continue_gen(more, max_tokens=mt, **samp)
            else:  # an OpenAI request naming the template
                f = Task(list(more), max_tokens=mt, **samp)
                f.cache_origin = origin_of(tpl); start_from(f, tpl)
            tasks[tid] = f; sched.add_task(f)
        elif kind == "fork":
            _, tid, src, more, mt, samp = op
            if tasks.get(src) is None or src in tainted:
                continue
            finish(src); s = tasks[src]
            origin = origin_of(s); f = s.fork(f"f{tid}"); f.cache_origin = origin
            f.continue_gen(more, max_tokens=mt, **samp)
            tasks[tid] = f; sched.add_task(f)
        elif kind == "cont":
            _, tid, src, more, mt, samp = op
            if tasks.get(src) is None or src in tainted:
                continue
            finish(src); s = tasks[src]
            s.continue_gen(more, max_tokens=mt, **samp); tasks[tid] = s; sched.add_task(s)
            tasks[src] = None
        elif kind == "stop":
            _, tid, k = op; step(k); tasks[tid].stop(); tainted.add(tid)
        elif kind == "warm":
            sched.warm_prefix("", op[1])
        elif kind == "wait":
            step(op[1])
    t0 = time.time()
    while any(t is not None and not t.is_finished for t in tasks.values()):
        step(1)
        if time.time() - t0 > 180:
            raise Fail("hang at end (tasks)")
    idle_steps = 0
    while sched.has_work:  # only later/warm jobs left
        step(1); idle_steps += 1
        if idle_steps > 50:
            raise Fail(("later/warm never ends", len(sched.prefiller._later), len(sched.prefiller._warm)))
    check_cache(cache, "end")
    pf = sched.prefiller
    leaks = dict(seqs=len(pf._seqs), later=len(pf._later), warm=len(pf._warm),
                 active=sched.num_active, slots=sum(x is not None for x in sched.slots))
    if any(leaks.values()):
        raise Fail(("leftover", leaks))
    if pf.later_tokens > pf.prefilled_tokens or pf.warm_tokens > pf.prefilled_tokens + 4096:
        raise Fail(("later/warm recompute", pf.later_tokens, pf.warm_tokens, pf.prefilled_tokens))
    stats.update(steps=steps[0], idle_steps=idle_steps, max_later=max_later[0],
                 later_tokens=pf.later_tokens, warm_tokens=pf.warm_tokens,
                 prefilled=pf.prefilled_tokens, decoded=sum(t.state_decoded for t in tasks.values() if t))
    res = {tid: (list(t.output), t.finish_reason) for tid, t in tasks.items()
           if t is not None and tid not in tainted}
    return res, sched, tpls


def probe(sched, p, samp):
    if isinstance(p, tuple):  # a request naming a template
        tpl = p[1]
        t = Task([300, 301, 302, TT, 5585, 41], max_tokens=6, **samp)
        t.cache_origin = origin_of(tpl); start_from(t, tpl)
    else:
        t = Task(list(p), max_tokens=6, **samp); t.cache_origin = ""
    sched.add_task(t); t0 = time.time()
    while not t.is_finished:
        sched.step()
        if time.time() - t0 > 60:
            raise Fail("probe hang")
    while sched.has_work:
        sched.step()
    return t


tot = dict(seeds=0, fails=0, bad_insert=0, inserts=0, entries=0, bad_entries=0, probes=0,
           bad_probes=0, ab_diff=0, ab_tasks=0)
lo, hi = map(int, args.seeds.split("-"))
for seed in range(lo, hi + 1):
    rng = random.Random(seed * 7919)
    ops, probes = script(seed)
    budget = int(SB * rng.choice([1.1, 2.5, 4, 8, 30]))
    frac = rng.choice([0.0, 0.5, 1.0])
    arena = rng.random() < 0.5
    chunk = rng.choice([int(c) for c in args.chunks.split(',')])
    batch = rng.choice([2, 4, 5, 8, 16])
    cache = PrefixCache(budget, device="cpu", device_bytes=int(budget * frac), arena=arena)
    wrap_insert(cache)
    BAD_INSERTS.clear(); c0 = dict(COUNT); n0 = list(N_INSERT_CHECKED)
    st, t0 = {}, time.time()
    tot["seeds"] += 1
    try:
        got, sched, tpls = run(ops, cache, batch, chunk, st)
        # P1 at the end (entries evicted meanwhile were checked at insert)
        bad_e = 0
        for (o, n, _), e in list(cache._lru.items()):
            want, wl = lone(o, e.tokens, logits=e.logits is not None)
            if not same(want, e.state.to(device="cpu")) or (
                    e.logits is not None and not torch.equal(wl.reshape(-1), e.logits.reshape(-1))):
                bad_e += 1
        ents = len(cache._lru)
        # P2: probes alone, cached scheduler vs a fresh cache-off one
        plain = DynamicScheduler(L, max_batch_size=batch, buffer_size=4, prefill_chunk=chunk)
        bad_p = []
        etoks = [list(e.tokens) for (o, _, _), e in cache._lru.items() if o == ""]
        prng = random.Random(seed)
        probes = probes + [e + toks(prng, prng.choice([1, 5, 40])) for e in etoks[:4]] + [e for e in etoks[:2]]
        probes += [("tpl", t) for t in list(tpls.values())[:3]]
        for j, p in enumerate(probes):
            samp = dict(temperature=0.0) if j % 2 == 0 else dict(temperature=1.0, top_p=0.9, top_k=0, seed=j)
            a, b = probe(sched, p, samp), probe(plain, p, samp)
            if a.output != b.output or not same(a.state, b.state):
                bad_p.append((j, len(p) if not isinstance(p, tuple) else 'tpl', a.output, b.output, same(a.state, b.state)))
        ab = None
        if args.ab:
            ref, _, _ = run(ops, None, batch, chunk, {})
            ab = sum(ref[k] != got.get(k) for k in ref)
            for k in ref:
                if ref[k] != got.get(k):
                    print("   AB DIFF task", k, "cache-off", ref[k], "cache-on", got.get(k))
            tot["ab_diff"] += ab; tot["ab_tasks"] += len(ref)
    except Fail as e:
        print(f"seed {seed}: FAIL {e!r}", flush=True); tot["fails"] += 1; continue
    except Exception:
        traceback.print_exc(file=sys.stdout); print(f"seed {seed}: CRASH", flush=True); tot["fails"] += 1; continue
    cs = cache.stats()
    ni = N_INSERT_CHECKED[0] - n0[0]
    tot["bad_insert"] += len(BAD_INSERTS); tot["inserts"] += ni; tot["entries"] += ents
    tot["bad_entries"] += bad_e; tot["probes"] += len(probes); tot["bad_probes"] += len(bad_p)
    print(f"seed {seed}: batch={batch} chunk={chunk} budget={budget / SB:.1f}st frac={frac} "
          f"arena={arena} tasks={len(got)} nudged={COUNT['nudged'] - c0['nudged']} "
          f"nokeep={COUNT['nokeep'] - c0['nokeep']} decoded_flag={st['decoded']} ins_checked={ni} "
          f"(logits {N_INSERT_CHECKED[1] - n0[1]}) BAD_INS={len(BAD_INSERTS)} entries={ents} "
          f"BAD_ENT={bad_e} hits={cs['hits']} ev={cs['evictions']} probes_bad={len(bad_p)} "
          f"steps={st['steps']} idle={st['idle_steps']} max_later={st['max_later']} "
          f"later_tok={st['later_tokens']} warm_tok={st['warm_tokens']} prefilled={st['prefilled']} "
          f"ab_diff={ab} {time.time() - t0:.0f}s", flush=True)
    for b in BAD_INSERTS[:3]:
        print("   BAD INSERT", b[:3]); print(b[3])
    for b in bad_p[:3]:
        print("   BAD PROBE", b)
print("TOTAL", tot)
