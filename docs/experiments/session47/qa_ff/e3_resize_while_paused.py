"""Capacity grows (arrivals) and shrinks (others finish) while a fast-forwarded row is paused:
its reply must equal the one it gets alone."""
from common import *

def alone(i):
    s = DynamicScheduler(L, max_batch_size=8, buffer_size=8)
    t = s.new_task(prompt(i), max_tokens=60, seed=i, presence_penalty=0.5, **SAMPLED)
    t.constraint = Constraint(CALL, L.tokenizer); s.run(); return list(t.output)

def crowded(i, mode):
    s = DynamicScheduler(L, max_batch_size=8, buffer_size=8)
    others = []
    if mode == "shrink":  # short rows in lower slots that end around A's pauses
        for k in range(3):
            others.append(s.new_task(L.encode(f"User: story {k}\n\nAssistant:"), max_tokens=2 + 3 * k, temperature=0.0))
    t = s.new_task(prompt(i), max_tokens=60, seed=i, presence_penalty=0.5, **SAMPLED)
    t.constraint = Constraint(CALL, L.tokenizer)
    if mode == "grow":
        def cb(tokens, t=t):
            if t.status == Status.PREFILL and len(others) < 6:
                for k in range(3):
                    others.append(s.new_task(L.encode(f"User: tale {k}\n\nAssistant:"), max_tokens=1 + 2 * k, temperature=0.0))
        t.collect_callback = cb
    s.run()
    return list(t.output), s.resizes, t.finish_reason

for i in range(4):
    ref = alone(i)
    for mode in ("shrink", "grow"):
        out, rs, fr = crowded(i, mode)
        print(i, mode, "same" if out == ref else "DIFFERENT", fr, [(r['frm'], r['to']) for r in rs])
