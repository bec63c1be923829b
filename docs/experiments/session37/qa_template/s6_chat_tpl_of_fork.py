"""Chat naming a template made from a prefill-only fork of another template (T2 keeps T1's cache
origin, its history off the align rule -> every request non-canonical): turn 2 stops at a branch
point shared with turn 1 on the cache-on server only.  Seeded replies compared."""
from harness import Cmp, Pair, as_template, chat, create, fork

p = Pair("s6")
cmp = Cmp()
SYS = "System: You are a pirate who answers in riddles and never gives a straight answer. " * 3
names = {}
for side in ("on", "off"):
    c = p.c[side]
    t1 = as_template(c, create(c, SYS + "\n\n", max_tokens=0)["task_id"])
    f1 = fork(c, t1, "User: remember the number 7.\n\nAssistant: ok\n\n", max_tokens=0)
    names[side] = as_template(c, f1["task_id"])
q1 = "Tell me a long story about a ship and its crew and the sea. " * 3
for seed in range(8):
    kw = {"temperature": 1.0, "top_p": 1.0, "seed": seed, "max_tokens": 64,
          "presence_penalty": 0, "frequency_penalty": 0}
    out = {}
    for side in ("on", "off"):
        c, model = p.c[side], f"rwkv-7:{names[side]}"
        m1 = [{"role": "user", "content": q1}]
        r1 = chat(c, model, m1, **kw)
        m2 = m1 + [{"role": "assistant", "content": "Arr."}, {"role": "user", "content": "More!"}]
        r2 = chat(c, model, m2, **kw)
        out[side] = (r1, r2)
    cmp.eq(f"seed={seed} turn1", out["on"][0], out["off"][0])
    cmp.eq(f"seed={seed} turn2", out["on"][1], out["off"][1])
print(p.stats())
cmp.report()
p.close()
