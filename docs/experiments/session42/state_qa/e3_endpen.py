# Same tokens, same state: task E's round 1 ended at a new turn / end-of-text (the ending token neither
# returned nor fed); task L generated the same tokens but ended by max_tokens. Continue both with the same
# prompt B (server default penalties, greedy): round 2 should be identical.
from lib import *
p = dict(temperature=0)   # server defaults otherwise: presence_penalty 2.0, decay 1.0
n_same = n_diff = 0
for i in range(40):
    A = f"Item {i}: " + "x" * (i % 7)
    E, _ = run("/v1/tasks/create", dict(prompt=A, max_tokens=60, **p))
    e = export(E); At = enc(A)
    out = e["history"][len(At):] + ([e["current"]] if e["current"] is not None else [])
    if len(out) == 60: continue
    L, _ = run("/v1/tasks/create", dict(prompt=A, max_tokens=len(out), **p))
    assert seq(L) == e["history"], "round 1 differs"
    B = "\n\nUser: go on\n\nAssistant:" if out[-1] != 261 else "User: go on\n\nAssistant:"
    for t in (E, L): post(f"/v1/tasks/{t}/continue", dict(prompt=B, max_tokens=60)); wait(t)
    se, sl = seq(E), seq(L)
    d = first_diff(se, sl)
    ended = "turn" if out[-1] == 261 else "eos"
    if d is None: n_same += 1
    else:
        n_diff += 1
        print(f"A={A!r} round 1 ended at {ended} after {len(out)} tokens: round-2 first diff at sequence index {d} "
              f"(round-2 token {d - len(e['history']) - len(enc(B))}); E gives {se[d:d+3]} (len {len(se)}), L gives {sl[d:d+3]} (len {len(sl)})")
print(f"same {n_same}, differ {n_diff}")
