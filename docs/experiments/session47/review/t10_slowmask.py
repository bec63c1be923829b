import time, numpy as np
from common import loader
L = loader()
from server.task.constraint import Constraint, json_grammar, fill_masks
rng = np.random.default_rng(0)
pats = {"evil1": "^(a|b)*a(a|b){18}c$", "wide": "^[^\"\\\\]{0,5000}$", "alt": "^(" + "|".join(f"w{i}x" for i in range(3000)) + ")$",
        "nested": "^((a+)+b)+$"}
for name, p in pats.items():
    g = json_grammar({"type": "object", "properties": {"s": {"type": "string", "pattern": p}}, "required": ["s"]})
    c = Constraint(g, L.tokenizer)
    w = np.zeros((1, c.words), dtype=np.int32)
    times = []
    for step in range(60):
        t = time.perf_counter(); fill_masks([(c, 0)], w); times.append(time.perf_counter() - t)
        bits = np.unpackbits(w.view(np.uint8), bitorder="little")
        allowed = np.flatnonzero(bits)
        allowed = allowed[allowed != 0] if len(allowed) > 1 else allowed
        if len(allowed) == 0 or c.error: print(name, "error", c.error); break
        tok = int(rng.choice(allowed))
        if tok == 0: break
        c.accept(tok)
    print(name, f"steps {len(times)} max {max(times)*1e3:.1f} ms median {np.median(times)*1e3:.2f} ms total {sum(times):.2f}s err={c.error}")
