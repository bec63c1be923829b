import sys, threading, time
sys.path.insert(0, "/tmp/qa_samp"); sys.path.insert(0, "/work/main")
import os
os.environ.setdefault("RWKV_TASK_DB_PATH", "/tmp/qa_samp/tasks.db")
import numpy as np, torch
from exact import ref_token, u_of
from server import RWKV070ModelLoader, DynamicScheduler

loader = RWKV070ModelLoader("/tmp/qa_samp/m.pth", device="cpu")
P = [
    dict(temperature=0.0, top_k=50, top_p=0.3, presence_penalty=2.0, repetition_penalty=0.5, penalty_decay=0.9, seed=1),
    dict(temperature=1.5, top_k=0, top_p=1.0, presence_penalty=0.5, repetition_penalty=0.3, penalty_decay=0.99, seed=11),
    dict(temperature=1.0, top_k=1, top_p=1.0, presence_penalty=0.0, repetition_penalty=0.0, penalty_decay=1.0, seed=12),
    dict(temperature=1.0, top_k=0, top_p=1.0, presence_penalty=0.0, repetition_penalty=0.0, penalty_decay=1.0, seed=13),
    dict(temperature=0.7, top_k=50, top_p=0.9, presence_penalty=1.0, repetition_penalty=0.0, penalty_decay=1.0, seed=14),
    dict(temperature=1.0, top_k=2000, top_p=0.95, presence_penalty=0.2, repetition_penalty=0.2, penalty_decay=0.5, seed=15),
    dict(temperature=1e-6, top_k=5, top_p=0.5, presence_penalty=0.0, repetition_penalty=0.0, penalty_decay=1.0, seed=16),
    dict(temperature=0.3, top_k=-1, top_p=0.1, presence_penalty=0.0, repetition_penalty=1.0, penalty_decay=0.0, seed=-17),
    dict(temperature=1.0, top_k=3, top_p=1.0, presence_penalty=3.0, repetition_penalty=3.0, penalty_decay=1.0, seed=2**70 + 3),
]
MAXT = [30, 45, 20, 40, 35, 25, 30, 40, 28]
prompts = [f"User: q{i} " + "blah " * (i * 3) + "\n\nAssistant:" for i in range(len(P))]

def run_alone(i):
    s = DynamicScheduler(loader, max_batch_size=1, buffer_size=8)
    t = s.new_task(prompts[i], max_tokens=MAXT[i], **P[i]); s.run()
    return list(t.output)

def run_together(order=None):
    s = DynamicScheduler(loader, max_batch_size=16, buffer_size=8)
    ts = {i: s.new_task(prompts[i], max_tokens=MAXT[i], **P[i]) for i in (order or range(len(P)))}
    s.run()
    return [list(ts[i].output) for i in range(len(P))]

def run_staggered():
    """tasks join while others run (from callbacks), in reverse order"""
    s = DynamicScheduler(loader, max_batch_size=4, buffer_size=4)
    todo = list(range(len(P)))[::-1]
    ts = {}
    lock = threading.Lock()
    def grow(_):
        with lock:
            if todo:
                i = todo.pop(0)
            else:
                return
        ts[i] = s.new_task(prompts[i], max_tokens=MAXT[i], collect_callback=grow, **P[i])
    i = todo.pop(0)
    ts[i] = s.new_task(prompts[i], max_tokens=MAXT[i], collect_callback=grow, **P[i])
    s.run()
    while todo:  # anything left
        grow(None); s.run()
    return [list(ts[i].output) for i in range(len(P))]

@torch.no_grad()
def replay(i):
    """reference: single-row model, ref sampler, own SplitMix64."""
    m = loader.model; p = P[i]
    toks = loader.encode(prompts[i])
    st = m.new_state(1)
    logits = m.prefill([toks], st)[0].float().numpy()
    V = logits.size
    Pen = np.zeros(V, np.float32); out = []; margins = []
    for c in range(MAXT[i]):
        tk = ref_token(logits, Pen, p["temperature"], p["top_k"], p["top_p"], u_of(p["seed"], c))
        Pen = (Pen * np.float32(p["penalty_decay"])).astype(np.float32)
        Pen[tk] = np.float32(Pen[tk] + np.float32(p["presence_penalty"] if Pen[tk] == 0 else p["repetition_penalty"]))
        if tk == 0: break
        out.append(tk)
        if len(out) >= 2 and out[-1] == 24281 and out[-2] == 261: out.pop(); break
        logits = m.decode(torch.tensor([tk]), st)[0].float().numpy()
    return out

if __name__ == "__main__":
    t0 = time.time()
    alone = [run_alone(i) for i in range(len(P))]
    tog = run_together()
    tog2 = run_together(order=list(range(len(P)))[::-1])
    stag = run_staggered()
    refs = [replay(i) for i in range(len(P))]
    for i in range(len(P)):
        def first_diff(a, b):
            return next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))
        print(i, P[i]["temperature"], P[i]["top_k"], P[i]["top_p"], "len", len(alone[i]),
              "alone==together", alone[i] == tog[i], "==rev", alone[i] == tog2[i], "==staggered", alone[i] == stag[i],
              "==ref", alone[i] == refs[i], "ref first diff", first_diff(alone[i], refs[i]))
    print("distinct outputs", len({tuple(o) for o in alone}), "time", round(time.time() - t0, 1))
    import json; json.dump(dict(alone=alone, refs=refs), open("/tmp/qa_samp/sched_out.json", "w"))
