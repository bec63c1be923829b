# Session 53 (a review helper's script, kept): the prefix cache on against off on the tiny CPU model, random
# forks, continues, templates and next turns; `SOLO=1 python fuzz2.py FIRST_SEED END_SEED`. Its runs' output was not kept.
import random, sys, os, torch
from server.model.loader import RWKV070ModelLoader
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task
from server.api.task_service import _fork
from server.task.template_start import start_all
torch.set_num_threads(2)
loader = RWKV070ModelLoader("/tmp/rev53_tiny.pth", device="cpu")
TT = 261

def scenario(seed):
    r = random.Random(seed)
    pieces = [[r.randrange(1, 60000) for _ in range(r.choice([5, 16, 31, 32, 33, 40, 64, 70]))] for _ in range(4)]
    for p in pieces:
        if r.random() < 0.5: p[r.randrange(len(p))] = TT
    def prompt():
        toks = []
        for _ in range(r.randint(1, 3)):
            toks += pieces[r.randrange(4)] + ([TT] if r.random() < 0.5 else [])
        if r.random() < 0.2:
            toks = toks[:r.randint(1, len(toks))]
        return toks
    waves, ntasks = [], 0
    for w in range(r.randint(4, 10) if os.environ.get('SOLO') == '1' else r.randint(2, 5)):
        wave = []
        used = set()
        for _ in range(r.randint(1, 1 if os.environ.get('SOLO') == '1' else 4)):
            kind = (r.choice(["new", "new", "cont", "fork", "tpl", "tplreq", "next", "next"]) if not os.environ.get("STEPS") else "new") if ntasks else "new"
            src = r.randrange(ntasks) if ntasks else None
            if src in used: kind = "new"
            if kind == "cont": used.add(src)
            mt = r.choice([0, 1, 4, 6])
            seeded = r.random() < 0.5
            wave.append((kind, src, prompt(), mt, seeded))
        ntasks += len(wave)
        waves.append(wave)
    cfg = dict(max_batch_size=r.choice([1, 2, 4]), prefill_chunk=r.choice([40, 64, 100, 4096]),
               cache=r.choice([64 << 20, 200_000, 1 << 20, 600_000]))
    return waves, cfg

def run(waves, cfg, cache):
    sched = DynamicScheduler(loader, max_batch_size=cfg["max_batch_size"], buffer_size=4,
                             prefix_cache=cache, prefill_chunk=cfg["prefill_chunk"])
    all_tasks, out, n = [], [], 0
    out_pending = []
    STEPS_R = random.Random(cfg["max_batch_size"] * 1000 + cfg["prefill_chunk"])
    for wave in waves:
        tasks = []
        for kind, src, toks, mt, seeded in wave:
            n += 1
            kw = dict(temperature=1.0, top_p=0.9, top_k=0, seed=7) if seeded else dict(temperature=0.0)
            if src is not None and all_tasks[src] is None: kind = "new"
            if kind == "new":
                t = Task(list(toks), max_tokens=mt, **kw); t.cache_origin = ""
            elif kind == "cont":
                t = all_tasks[src]
                if t.is_template: t = _fork(t, f"f{n}")
                t.continue_gen(list(toks), max_tokens=mt, **kw)
            elif kind == "fork":
                t = _fork(all_tasks[src], f"f{n}")
                t.continue_gen(list(toks), max_tokens=mt, **kw)
            elif kind == "next":
                src_t = all_tasks[src]
                if getattr(src_t, "_prompt", None) is None: src_t._prompt = list(src_t.history)
                base_toks = src_t._prompt + list(src_t.output) + [TT]
                t = Task(base_toks + list(toks), max_tokens=mt, **kw); t.cache_origin = ""
                t.cache_finish = False
            elif kind == "tpl":
                t = _fork(all_tasks[src], f"_T{n}")
                tasks.append(t); continue
            elif kind == "tplreq":
                tpl = all_tasks[src]
                if not tpl.is_template: tpl = _fork(tpl, f"_T{n}")
                t = Task(list(toks), max_tokens=mt, **kw)
                t.cache_origin = start_all(tpl, [t])
            if kind in ("new", "next"): t._prompt = list(t.pending)
            sched.add_task(t); tasks.append(t)
        if STEPS and wave is not waves[-1] and not any(k in ("cont", "fork", "tpl", "tplreq", "next") for wv in waves for k, *_ in wv):
            for _ in range(STEPS_R.randint(0, 6)):
                if sched._has_slot_work: sched.step()
            all_tasks += tasks
            out_pending.append(tasks)
            continue
        sched.run()
        for t in tasks:
            if not t.is_template: t.wait(60)
        for t in tasks:
            if getattr(t, "_prompt", None) is not None and t.output and WARM:
                sched.warm_prefix("", t._prompt + list(t.output) + [TT])
        if WARM: sched.run()
        all_tasks += [t if t not in all_tasks else None for t in tasks]
        out += [(str(t.status), list(t.output), t.finish_reason, t.error,
                 None if t.state is None or STEPS or (len(tasks) > 1 and not SOLO) else (t.state.wkv.sum().item())) for t in tasks]
    for tasks in out_pending:
        for t in tasks: t.wait(60)
        out += [(str(t.status), list(t.output), t.finish_reason, t.error) for t in tasks]
    return out, sched

WARM = os.environ.get('WARM') == '1'
ARENA = os.environ.get('ARENA') == '1'
STEPS = os.environ.get('STEPS') == '1'
SOLO = os.environ.get('SOLO') == '1'
bad = 0; H = [0, 0]; W = [0, 0]
for seed in range(int(sys.argv[1]), int(sys.argv[2])):
    waves, cfg = scenario(seed)
    try:
        plain, _ = run(waves, cfg, None)
        cached, sched = run(waves, cfg, PrefixCache(cfg["cache"], device_bytes=cfg["cache"] // 4 if ARENA else None, arena=ARENA))
    except Exception as e:
        import traceback; traceback.print_exc()
        print("EXC", seed, e, flush=True); bad += 1; continue
    c = sched.prefix_cache
    H[0] += c.hits; H[1] += c.misses; H.append(sched.prefiller.warm_tokens) if False else None; W[0] += sched.prefiller.warm_tokens; W[1] += c.evictions
    if plain != cached or c.bytes > c.max_bytes:
        bad += 1
        print("MISMATCH", seed, cfg, [[(k, s, len(t), mt, sd) for k, s, t, mt, sd in w] for w in waves], flush=True)
        for a, b in zip(plain, cached):
            if a != b: print("  ", a, "\n  ", b)
print("done bad=", bad, H, W)
