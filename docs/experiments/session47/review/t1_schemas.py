import time, json, numpy as np
from common import loader
L = loader()
from server.task.constraint import Constraint, json_grammar, fill_masks, GrammarError
def nested(d):
    s = {"type": "object"}
    for _ in range(d):
        s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
    return s
cases = {
  "nested400": nested(400),
  "nested480": nested(480),
  "selfref": {"$ref": "#"},
  "selfref_obj": {"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]},
  "many_props": {"type":"object","properties":{f"p{i}":{"type":"string"} for i in range(3000)},"required":[f"p{i}" for i in range(3000)]},
  "pattern": {"type":"string","pattern":"(a|b)*c(a|b){20}"},
}
for name, sch in cases.items():
    t = time.time()
    try:
        g = json_grammar(sch, ">")
    except Exception as e:
        print(name, "grammar:", type(e).__name__, str(e)[:150], f"{time.time()-t:.3f}s"); continue
    t1 = time.time()
    try:
        c = Constraint(g, L.tokenizer)
    except Exception as e:
        print(name, "constraint:", type(e).__name__, str(e)[:150]); continue
    t2 = time.time()
    w = np.zeros((1, c.words), dtype=np.int32)
    fill_masks([(c, 0)], w)
    t3 = time.time()
    print(name, f"grammar {t1-t:.3f}s constraint {t2-t1:.3f}s mask {t3-t2:.4f}s allowed={int(np.unpackbits(w.view(np.uint8)).sum())} err={c.error}")
