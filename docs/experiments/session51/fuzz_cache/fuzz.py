"""Lockstep A/B fuzz of the prefix cache: scheduler A (cache on) vs B (cache off), same tiny
random model (CPU fp32, split-invariant), same op script. Every task's output, finish_reason
and logprobs must be equal (stopped tasks: common prefix only).
Usage: OMP_NUM_THREADS=1 uv run python /tmp/fz51_fuzz/fuzz.py --seeds 0-9
"""
import os, sys, random, argparse, time, traceback, json
REPO = "/tmp/fz51"
sys.path.insert(0, REPO)
import torch
torch.set_num_threads(1)
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache, state_nbytes
from server.task.task import Task, Status
from server.task.cache_origin import origin_of
from server.task.template_start import start_all
from server.api.chat import build_chat_prompt, history_text

MODEL = "/tmp/fz51_fuzz/tiny.pth"
if not os.path.exists(MODEL):
    from server.model.random import main as make_random
    make_random([MODEL, "--preset", "tiny", "--seed", "1"])
from server.model.loader import RWKV070ModelLoader
L = RWKV070ModelLoader(MODEL, device="cpu")
M = L.model
SB = state_nbytes(M.new_state(1))
from server.model.state import State
REAL_DECODE = M.decode
ROWWISE = [os.environ.get("FZ_ROWWISE", "1") == "1"]


def rowwise_decode(tokens, state, active=None, borrow=False):
    """Decode each row alone (batch 1): a row's bits no longer depend on the batch's row count
    (CPU decode is not row-count invariant: rowinv.py). Harness only."""
    if not ROWWISE[0]:
        return REAL_DECODE(tokens, state, active, borrow)
    outs = []
    for i in range(tokens.shape[0]):
        sub = State(state.shift[:, :, i:i + 1].clone(), state.wkv[:, i:i + 1].clone())
        lg = REAL_DECODE(tokens[i:i + 1], sub, None if active is None else active[i:i + 1])
        state.shift[:, :, i:i + 1].copy_(sub.shift); state.wkv[:, i:i + 1].copy_(sub.wkv)
        outs.append(lg)
    return torch.cat(outs, 0)


M.decode = rowwise_decode
if os.environ.get("FZ_BREAK") == "1":  # sanity: the harness must then see differences
    M.set_split_invariant(False)
from server.task.cache_origin import state_digest

WORDS = ("the a of to and in is it you that he was for on are with as I his they be at one have "
         "this from or had by hot word but what some we can out other were all there when up use "
         "your how said an each she which do their time if will way about many then them write "
         "would like so these her long make thing see him two has look more day could go come did "
         "number sound no most people my over know water than call first who may down side been "
         "now find any new work part take get place made live where after back little only round "
         "man year came show every good me give our under name very through just form sentence "
         "great think say help low line differ turn cause much mean before move right boy old too "
         "same tell does set three want air well also play small end put home read hand port large "
         "spell add even land here must big high such follow act why ask men change went light kind "
         "off need house picture try us again animal point mother world near build self earth "
         "father 1 2 3 42 100 , . ? ! : ; ( ) \" ' - 中文 日本語 émigré").split()


def text(rng, n):
    out = []
    for _ in range(n):
        w = rng.choice(WORDS)
        out.append(w)
        if rng.random() < 0.03:
            out.append("\n")
    return " ".join(out)


def samp_of(rng, api=True):
    if rng.random() < 0.4:
        d = dict(temperature=0.0, top_p=1.0, top_k=0)
    else:
        d = dict(temperature=rng.choice([0.5, 1.0, 1.5]), top_p=rng.choice([1.0, 0.9, 0.5]),
                 top_k=rng.choice([0, 0, 20, -1]), min_p=rng.choice([0.0, 0.0, 0.05]),
                 seed=rng.randrange(1 << 30))
    if rng.random() < 0.6:
        d.update(presence_penalty=rng.choice([0.0, 0.5, 2.0]),
                 repetition_penalty=rng.choice([0.0, 0.5, 1.5]),
                 penalty_decay=rng.choice([0.0, 0.5, 0.9, 0.996, 1.0]))
    extra = {}
    if api and rng.random() < 0.35:
        extra["logit_bias"] = {rng.choice([11, 261, 33, 45, 300, 310, 20000, 1000, rng.randrange(65536)]):
                               rng.choice([-100.0, -5.0, 3.0, 8.0, 100.0]) for _ in range(rng.randrange(1, 5))}
    if api and rng.random() < 0.35:
        extra["logprobs"] = rng.choice([0, 1, 3, 5])
    return d, extra


def script(seed):
    rng = random.Random(seed)
    systems = [text(rng, rng.choice([30, 80, 150, 300, 500])) for _ in range(3)]
    ops = []
    nconv = 0
    convs = []  # conv ids
    tpls, ptasks = [], []  # template names, persistent task ids
    n_ops = rng.randrange(15, 40)
    for i in range(n_ops):
        r = rng.random()
        mt = rng.choice([0, 1, 2, 5, 8, 16, 30])
        if r < 0.30 or not convs:  # burst of chats (new or next turns), arriving together
            for j in range(rng.randrange(1, 7)):
                if convs and rng.random() < 0.5:
                    c = rng.choice(convs)
                    ops.append(("turn", f"{i}.{j}", c, text(rng, rng.randrange(2, 40)), max(mt, 1), *samp_of(rng)))
                else:
                    c = nconv; nconv += 1; convs.append(c)
                    sysi = rng.randrange(3) if rng.random() < 0.85 else None
                    ops.append(("chat", f"{i}.{j}", c, sysi, text(rng, rng.randrange(2, 60)), max(mt, 1), *samp_of(rng)))
                if rng.random() < 0.3:
                    ops.append(("wait", rng.randrange(0, 3)))
        elif r < 0.40:  # n>1 on a chat's next turn
            c = rng.choice(convs)
            d, ex = samp_of(rng)
            d.setdefault("seed", rng.randrange(1 << 30))
            ops.append(("turnn", f"{i}", c, text(rng, rng.randrange(2, 30)), max(mt, 1), d, ex, rng.choice([2, 3, 4])))
        elif r < 0.52:  # template: persistent task (system [+ turns]) -> as_template -> requests
            name = f"T{i}"
            ops.append(("tplmake", name, rng.randrange(3), text(rng, rng.randrange(0, 30)), rng.choice([0, 0, 0, 3])))
            tpls.append(name)
            for k in range(rng.randrange(1, 5)):
                if rng.random() < 0.6:
                    ops.append(("tplreq", f"{i}.r{k}", name, text(rng, rng.randrange(2, 40)), max(mt, 1), *samp_of(rng)))
                else:
                    ops.append(("tplfork", f"{i}.f{k}", name, text(rng, rng.randrange(1, 40)), max(mt, 1), samp_of(rng, False)[0]))
        elif r < 0.60 and tpls:  # more requests on an old template
            name = rng.choice(tpls)
            ops.append(("tplreq", f"{i}", name, text(rng, rng.randrange(2, 40)), max(mt, 1), *samp_of(rng)))
        elif r < 0.68:  # persistent task (Task API)
            sysi = rng.randrange(3)
            ops.append(("ptask", f"P{i}", sysi, text(rng, rng.randrange(2, 50)), mt, samp_of(rng, False)[0]))
            ptasks.append(f"P{i}")
        elif r < 0.76 and ptasks:  # fork of a persistent task
            src = rng.choice(ptasks)
            ops.append(("fork", f"F{i}", src, text(rng, rng.randrange(1, 40)), max(mt, 1), samp_of(rng, False)[0]))
            ptasks.append(f"F{i}")
        elif r < 0.82 and ptasks:  # continue
            src = rng.choice(ptasks)
            ops.append(("cont", f"C{i}", src, text(rng, rng.randrange(0, 40)), max(mt, 1), samp_of(rng, False)[0]))
        elif r < 0.84:  # a chat that arrives when an earlier chat has k output tokens
            c = nconv; nconv += 1
            ops.append(("after", rng.randrange(1, 6), ("chat", f"{i}", c, rng.randrange(3), text(rng, rng.randrange(2, 60)), max(mt, 1), *samp_of(rng))))
        elif r < 0.90:  # a chat stopped after k lockstep steps
            c = nconv; nconv += 1  # (not continued later)
            ops.append(("chat", f"{i}", c, rng.randrange(3), text(rng, rng.randrange(2, 400)), rng.choice([5, 30, 60]), *samp_of(rng)))
            ops.append(("stop", f"{i}", rng.randrange(0, 4)))
        else:
            ops.append(("wait", rng.randrange(1, 6)))
        if rng.random() < 0.25:
            ops.append(("wait", rng.randrange(0, 4)))
    return systems, ops


class Fail(Exception):
    pass


def snap(t):
    st = state_digest(t.state) if (t.keep_state and t.state is not None) else None
    return (list(t.output), t.finish_reason, [repr(x) for x in t.output_logprobs], st)


class Side:
    def __init__(self, cfg, cached):
        self.cache = PrefixCache(cfg["budget"], device="cpu", device_bytes=int(cfg["budget"] * cfg["frac"]),
                                 arena=cfg["arena"], min_tokens=cfg["min_tokens"]) if cached else None
        self.sched = DynamicScheduler(L, max_batch_size=cfg["batch"], buffer_size=cfg["buffer"],
                                      prefill_chunk=cfg["chunk"], prefix_cache=self.cache)
        self.live = {}  # tid -> task (not yet snapshotted)
        self.res = {}  # tid -> snapshot
        self.objs = {}  # tid -> task object
        self.warm = {}  # tid -> (origin, head tokens, messages)
        self.tpls = {}

    def add(self, tid, task):
        self.live[tid] = task; self.objs[tid] = task
        self.sched.add_task(task)

    def scan(self):
        for tid, t in list(self.live.items()):
            if t.is_finished:
                self.res[tid] = snap(t)
                del self.live[tid]
                w = self.warm.pop(tid, None)
                if w is not None and not t.stop_requested:
                    origin, head, msgs = w
                    reply = L.decode(t.output)
                    toks = L.encode(history_text(msgs + [{"role": "assistant", "content": reply}]))
                    self.sched.warm_prefix(origin, head + toks)


def run_ops(systems, ops, cfg, log=None):
    A, B = Side(cfg, True), Side(cfg, False)
    sides = (A, B)
    convs = {}  # conv -> messages (B's replies appended when the turn finished)
    conv_last = {}  # conv -> tid of its last turn
    stopped = set()
    nsteps = [0]

    pend = []

    def do_chat(op, only=None):
        _, tid, c, sysi, utext, mt, d, ex = op
        m = ([{"role": "system", "content": systems[sysi]}] if sysi is not None else []) + \
            [{"role": "user", "content": utext}]
        convs[c] = m
        api_tasks(tid, L.encode(build_chat_prompt(m, False)), 1, d, ex, mt, msgs=m, only=only)
        conv_last[c] = tid

    def fire():
        for e in list(pend):
            k, sub, watch = e
            for s in list(watch):
                w = watch[s]
                if w is None or w.is_finished or len(w.output) >= k:
                    do_chat(sub, only=(s,)); del watch[s]
            if not watch:
                pend.remove(e)

    def step_both(n=1):
        for _ in range(n):
            for s in sides:
                if s.sched.has_work:
                    s.sched.step()
                s.scan()
            fire()
            nsteps[0] += 1

    def finish(tid):
        t0 = time.time()
        while any(tid in s.live for s in sides):
            step_both()
            for s in sides:
                if tid in s.live:
                    s.live[tid].wait(0.0005)
            if time.time() - t0 > 120:
                raise Fail(("hang", tid))

    def msgs_for(c):
        """The conv's messages with the last turn's reply (B's) appended."""
        m = convs[c]
        lt = conv_last.get(c)
        if lt is not None:
            finish(lt)
            m.append({"role": "assistant", "content": L.decode(B.res[lt][0])})
            conv_last[c] = None
        return m

    def api_tasks(tid_base, tokens, n, d, ex, mt, origin_tpl=None, msgs=None, only=None):
        tids = [tid_base] if n == 1 else [f"{tid_base}#{k}" for k in range(n)]
        for s in (only or sides):
            ts = []
            for k, tid in enumerate(tids):
                dd = dict(d)
                if "seed" in dd and n > 1:
                    dd["seed"] = dd["seed"] + k
                t = Task(task_id=tid, max_tokens=mt, **dd)
                t.pending = list(tokens); t.keep_state = False; t.stop_at_turn = True
                t.logprobs = ex.get("logprobs"); t.logit_bias = ex.get("logit_bias")
                ts.append(t)
            origin, head = "", []
            if origin_tpl is not None:
                tpl = s.tpls[origin_tpl]
                origin = start_all(tpl, ts)
                head = list(tpl.history) + tpl.unfed()
            for t in ts:
                t.cache_origin = origin; t.cache_finish = False
            if n == 1 and msgs is not None:
                s.warm[tids[0]] = (origin, head, [dict(x) for x in msgs])
            for tid, t in zip(tids, ts):
                s.add(tid, t)
        return tids

    for op in ops:
        kind = op[0]
        if log:
            log(op)
        if kind == "chat":
            do_chat(op)
        elif kind in ("turn", "turnn"):
            if kind == "turn":
                _, tid, c, utext, mt, d, ex = op; n = 1
            else:
                _, tid, c, utext, mt, d, ex, n = op
            m = msgs_for(c)
            m.append({"role": "user", "content": utext})
            tids = api_tasks(tid, L.encode(build_chat_prompt(m, False)), n, d, ex, mt, msgs=m)
            conv_last[c] = tids[0]
        elif kind == "tplmake":
            _, name, sysi, extra, mt = op
            src = f"{name}.src"
            for s in sides:
                t = Task(L.encode(f"System: {systems[sysi]}\n\n" + (f"User: {extra}\n\nAssistant:" if extra else "")),
                         task_id=src, max_tokens=mt, temperature=0.0)
                t.cache_origin = ""
                s.add(src, t)
            finish(src)
            for s in sides:
                t = s.objs[src]
                o = origin_of(t)
                tpl = t.fork("_" + name); tpl.cache_origin = o; tpl.status = Status.FINISHED
                s.tpls[name] = tpl
            if origin_of(A.tpls[name]) != origin_of(B.tpls[name]):
                raise Fail(("template origin differs", name))
        elif kind == "tplreq":
            _, tid, name, utext, mt, d, ex = op
            m = [{"role": "user", "content": utext}]
            api_tasks(tid, L.encode(build_chat_prompt(m, False)), 1, d, ex, mt, origin_tpl=name, msgs=m)
        elif kind == "tplfork":
            _, tid, name, utext, mt, d = op
            for s in sides:
                tpl = s.tpls[name]
                o = origin_of(tpl); f = tpl.fork(tid); f.cache_origin = o
                f.continue_gen(L.encode(utext), max_tokens=mt, **d)
                s.add(tid, f)
        elif kind == "ptask":
            _, tid, sysi, utext, mt, d = op
            for s in sides:
                t = Task(L.encode(f"System: {systems[sysi]}\n\nUser: {utext}\n\nAssistant:"), task_id=tid,
                         max_tokens=mt, **d)
                t.cache_origin = ""
                s.add(tid, t)
        elif kind == "fork":
            _, tid, src, utext, mt, d = op
            if src in stopped or src not in A.objs:
                continue
            finish(src)
            for s in sides:
                st = s.objs[src]
                o = origin_of(st); f = st.fork(tid); f.cache_origin = o
                f.continue_gen(L.encode(utext) if utext else None, max_tokens=mt, **d)
                s.add(tid, f)
        elif kind == "cont":
            _, tid, src, utext, mt, d = op
            if src in stopped or src not in A.objs:
                continue
            finish(src)
            for s in sides:
                st = s.objs[src]
                st.continue_gen(L.encode(utext) if utext else None, max_tokens=mt, **d)
                s.add(tid, st)
            # later forks/continues of src go on from this round
            for s in sides:
                s.objs[src] = s.objs[tid]
            finish(tid)
        elif kind == "stop":
            _, tid, k = op
            step_both(k)
            for s in sides:
                s.objs[tid].stop()
            stopped.add(tid)
        elif kind == "wait":
            step_both(op[1])
        elif kind == "after":  # run op[2] on each side once that side's newest live task has k tokens
            k, sub = op[1], op[2]
            pend.append([k, sub, {s: (list(s.live.values()) or [None])[-1] for s in sides}])
            fire()
    t0 = time.time()
    while pend or any(s.live for s in sides) or any(s.sched.has_work for s in sides):
        step_both()
        if time.time() - t0 > 180:
            raise Fail("hang at end")
    diffs = []
    for tid, rb in B.res.items():
        ra = A.res.get(tid)
        if ra is None:
            diffs.append((tid, "missing in A")); continue
        if ra[3] != rb[3] and (ra[:3] == rb[:3]) and tid not in stopped:
            diffs.append((tid, "final state differs")); continue
        if tid in stopped or tid.split("#")[0] in stopped:
            n = min(len(ra[0]), len(rb[0]))
            if ra[0][:n] != rb[0][:n] or ra[2][:n] != rb[2][:n]:
                diffs.append((tid, "stopped prefix", ra[0], rb[0]))
        elif ra != rb:
            diffs.append((tid, ra[:2], rb[:2], ra[2] == rb[2], ra[3] == rb[3]))
    cs = A.cache.stats()
    return diffs, dict(tasks=len(B.res), steps=nsteps[0], hits=cs["hits"], ev=cs["evictions"],
                       saved=cs.get("tokens_saved"), entries=len(A.cache._lru))


def cfg_of(seed):
    rng = random.Random(seed * 7919 + 1)
    budget_st = rng.choice([1.1, 2.5, 5, 12, 60])
    return dict(chunk=rng.choice([32, 33, 45, 64, 96, 128, 200, 4096]),
                batch=rng.choice([1, 2, 3, 4, 8, 16]), buffer=rng.choice([1, 2, 3, 5, 8, 32]),
                budget=int(SB * budget_st), frac=rng.choice([0.0, 0.5, 1.0]), arena=rng.random() < 0.5,
                min_tokens=rng.choice([2, 16, 16, 64]), budget_st=budget_st)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--tlimit", type=float, default=1e9)
    args = ap.parse_args()
    lo, hi = map(int, args.seeds.split("-"))
    T0 = time.time()
    tot = dict(seeds=0, tasks=0, diffs=0, crashes=0, ops=0)
    for seed in range(lo, hi + 1):
        if time.time() - T0 > args.tlimit:
            break
        systems, ops = script(seed)
        cfg = cfg_of(seed)
        t0 = time.time()
        tot["seeds"] += 1; tot["ops"] += len(ops)
        try:
            diffs, st = run_ops(systems, ops, cfg)
        except Exception as e:
            traceback.print_exc(file=sys.stdout)
            print(f"seed {seed}: CRASH {e!r} cfg={cfg}", flush=True); tot["crashes"] += 1
            continue
        tot["tasks"] += st["tasks"]; tot["diffs"] += len(diffs)
        print(f"seed {seed}: ops={len(ops)} {cfg} {st} DIFFS={len(diffs)} {time.time() - t0:.1f}s", flush=True)
        for d in diffs[:5]:
            print("   DIFF", d, flush=True)
    print("TOTAL", tot, f"{time.time() - T0:.0f}s")
