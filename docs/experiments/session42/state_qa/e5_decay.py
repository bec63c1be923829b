from lib import *
p = dict(temperature=0, presence_penalty=1.0, repetition_penalty=0.5, penalty_decay=0.5)
A = "Item 14: xx"; At = enc(A)
for A in ["Item 14: ", "Item 0: "]:
    At = enc(A)
    E, txt = run("/v1/tasks/create", dict(prompt=A, max_tokens=60, **p))
    e = export(E); out = e["history"][len(At):] + ([e["current"]] if e["current"] is not None else [])
    P = e["tensors"]["penalties"]
    exp = np.zeros(65536, np.float32)
    for t in out: exp *= np.float32(0.5); exp[t] += np.float32(1.0) if exp[t] == 0 else np.float32(0.5)
    print(f"{A!r}: returned tokens {out} text {txt!r}")
    print("   expected (returned tokens only):", {int(k): float(exp[k]) for k in np.nonzero(exp)[0]})
    print("   exported:                        ", {int(k): float(P[k]) for k in np.nonzero(P)[0]})
