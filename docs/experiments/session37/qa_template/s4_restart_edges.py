"""Templates across a restart (same DBs), a bare state-tuning template (.pth: history empty, no
next token), an imported export of a task that generated, empty/one-token prompts, completions
from templates; cache-on vs cache-off, before and after restart.  argv[1]: prefill_chunk."""
import io
import sys

import torch

from harness import (Cmp, Pair, as_template, chat, completion, create, export, fork,
                     state_hash, toks)

chunk = int(sys.argv[1]) if len(sys.argv) > 1 else 0
p = Pair("s4", prefill_chunk=chunk)
cmp = Cmp()
print("prefill_chunk", chunk)
SEEDED = {"temperature": 1.0, "top_p": 1.0, "seed": 11, "max_tokens": 20}

# a bare state-tuning file (tiny: L2, C128, head size 64 -> H=2)
g = torch.Generator().manual_seed(5)
cfg = p.srv["on"].runtime.loader.cfg
H, N = cfg.n_head, cfg.head_size
buf = io.BytesIO()
torch.save({f"blocks.{i}.att.time_state": torch.randn(H, N, N, generator=g) * 0.1
            for i in range(cfg.n_layer)}, buf)
pth = buf.getvalue()

names = {}
for side in ("on", "off"):
    c = p.c[side]
    r = c.post("/v1/tasks/import_state?name=_bare", content=pth)
    assert r.status_code == 200, r.text
    gen = create(c, toks(40, 1), max_tokens=7, temperature=0)     # generated: current_token set
    r = c.post("/v1/tasks/import_state?name=_gen", content=export(c, gen["task_id"]))
    assert r.status_code == 200, r.text
    t = create(c, toks(45, 2), max_tokens=0)
    tpl = as_template(c, t["task_id"])
    f1 = fork(c, tpl, toks(10, 3), max_tokens=0)
    names[side] = {"bare": "_bare", "gen": "_gen", "ids45": tpl,
                   "t2": as_template(c, f1["task_id"]),
                   "asgen": as_template(c, gen["task_id"])}


def round_(label):
    allres = {}
    for key in names["on"]:
        res = {}
        for side in ("on", "off"):
            c, tid = p.c[side], names[side][key]
            model = f"rwkv-7:{tid}"
            r = {"tpl": state_hash(c, tid)}
            msgs = [{"role": "user", "content": "Hello there, how are you? " * 4}]
            r["chat1"] = chat(c, model, msgs, **SEEDED)
            msgs2 = msgs + [{"role": "assistant", "content": str(r["chat1"][0])[:40]},
                            {"role": "user", "content": "Go on. " * 9}]
            r["chat2"] = chat(c, model, msgs2, **SEEDED)
            r["chat2b"] = chat(c, model, msgs2, **SEEDED)  # same again (whole-prompt hit)
            r["comp_empty"] = completion(c, model, "", **SEEDED)
            r["comp_one"] = completion(c, model, "a", **SEEDED)
            r["comp_long"] = completion(c, model, "word " * 150, **SEEDED)
            r["comp_long2"] = completion(c, model, "word " * 150 + "more " * 30, **SEEDED)
            r["comp_n2"] = completion(c, model, "word " * 100, n=2, **SEEDED)
            for i, q in enumerate([None, [5], toks(64, 9), toks(64, 9) + toks(40, 10)]):
                f = fork(c, tid, q, max_tokens=6, temperature=1.0, top_p=1.0, top_k=0, seed=1)
                r[f"fork{i}"] = f.get("result", f)
                if "task_id" in f:
                    r[f"fork{i}_state"] = state_hash(c, f["task_id"])
            res[side] = r
        for k in res["on"]:
            cmp.eq(f"{label} {key} {k}", res["on"][k], res["off"][k])
        allres[key] = res
        print(label, key, res["on"]["chat1"], res["on"].get("fork0"), flush=True)
    print(p.stats(), flush=True)
    return allres


b = round_("before")
p.restart()
a = round_("after-restart")
for key in b:
    for k in b[key]["off"]:
        if k != "tpl":
            cmp.eq(f"OFF before-vs-after {key} {k}", b[key]["off"][k], a[key]["off"][k])
cmp.report()
p.close()
