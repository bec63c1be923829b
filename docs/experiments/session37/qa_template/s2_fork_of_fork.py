"""Minimal repro: forks of a prefill-only fork of a template (history off the align rule from its
origin: non-canonical) stop at branch points the cache-off server does not stop at -> other bits,
other seeded outputs.  Also T2 = as_template(F1) forks (T2 keeps T1's origin)."""
from harness import Cmp, Pair, as_template, create, fork, state_hash, toks

p = Pair("s2")
cmp = Cmp()
for seed in range(6):
    kw = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "seed": seed, "max_tokens": 40,
          "presence_penalty": 0, "repetition_penalty": 0}
    res = {}
    for side in ("on", "off"):
        c = p.c[side]
        t = create(c, toks(45, 1 + seed), max_tokens=0)
        tpl = as_template(c, t["task_id"])
        f1 = fork(c, tpl, toks(10, 100 + seed), max_tokens=0)          # F1: history 44 + 10
        q = toks(80, 200 + seed)
        a = fork(c, f1["task_id"], q, **kw)
        b = fork(c, f1["task_id"], q[:40] + toks(40, 300 + seed), **kw)  # shares 40 with a
        tpl2 = as_template(c, f1["task_id"])
        d = fork(c, tpl2, q[:50] + toks(30, 400 + seed), **kw)            # shares 50 with a
        res[side] = dict(a=a["result"], b=b["result"], d=d["result"],
                         a_state=state_hash(c, a["task_id"]), b_state=state_hash(c, b["task_id"]),
                         d_state=state_hash(c, d["task_id"]))
    for k in res["on"]:
        cmp.eq(f"seed={seed} {k}", res["on"][k], res["off"][k])
print(p.stats())
cmp.report()
p.close()
