"""Task API: templates of several prompt lengths, forks (seeded, greedy), forks sharing prefixes,
the same fork twice, empty-prompt forks, fork-of-fork chains; final states compared bit for bit
(export_state) between the cache-on and cache-off servers."""
import sys

from harness import SEEDED, Cmp, Pair, as_template, create, fork, state_hash, toks

chunk = int(sys.argv[1]) if len(sys.argv) > 1 else 0
p = Pair("s1", prefill_chunk=chunk)
cmp = Cmp()
print("prefill_chunk", chunk)
for L in [1, 2, 31, 32, 33, 45, 64, 65, 100]:
    head = toks(L, L)
    res = {}
    for side in ("on", "off"):
        c = p.c[side]
        t = create(c, head, max_tokens=0)
        tpl = as_template(c, t["task_id"])
        r = {"tpl_state": state_hash(c, tpl)}
        q1 = toks(70, 1000 + L)
        q2 = q1[:40] + toks(30, 2000 + L)
        for i, (q, kw) in enumerate([(q1, SEEDED), (q2, SEEDED), (q1, SEEDED),
                                     (q1[:33], {"temperature": 0}), (None, SEEDED),
                                     (q1 + toks(5, 9), SEEDED), (q2[:64], SEEDED)]):
            f = fork(c, tpl, q, max_tokens=5, **kw)
            r[f"fork{i}"] = f.get("result", f)
            if "task_id" in f:
                r[f"fork{i}_state"] = state_hash(c, f["task_id"])
        # fork of fork: a prefill-only fork (F1), then forks of it sharing a prefix
        f1 = fork(c, tpl, toks(10, 3000 + L), max_tokens=0)
        for i, q in enumerate([q1, q1[:40] + toks(40, 4000 + L), q1[:40] + toks(41, 4100)]):
            f = fork(c, f1["task_id"], q, max_tokens=5, **SEEDED)
            r[f"ff{i}"] = f["result"]
            r[f"ff{i}_state"] = state_hash(c, f["task_id"])
        # template of F1 (a fork of the template, prefill only), and forks of it
        tpl2 = as_template(c, f1["task_id"])
        for i, q in enumerate([q1, q1[:40] + toks(40, 5000 + L)]):
            f = fork(c, tpl2, q, max_tokens=5, **SEEDED)
            r[f"t2f{i}"] = f["result"]
            r[f"t2f{i}_state"] = state_hash(c, f["task_id"])
        res[side] = r
    for k in res["on"]:
        cmp.eq(f"L={L} {k}", res["on"][k], res["off"][k])
    print(L, p.stats(), flush=True)
cmp.report()
p.close()
