from common import loader
L = loader()
from server.task.constraint import lark_grammar, json_rule, GrammarError
import json
shapes = {
 "string": {"type": "string"},
 "number": {"type": "number"},
 "fmt": {"type": "string", "format": "date-time"},
 "enum": {"enum": ["alpha", "beta", "gamma", "delta"]},
 "anyof": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]},
}
def ok(shape, p, opt):
    s = {"type": "object", "properties": {f"p{j}": shape for j in range(p)}}
    if not opt: s["required"] = [f"p{j}" for j in range(p)]
    try:
        lark_grammar("start: " + json_rule(s) + "\n"); return True
    except GrammarError as e:
        return False
for name, sh in shapes.items():
    for opt in (False, True):
        lo, hi = 1, 4096
        if ok(sh, hi, opt): print(name, opt, ">4096"); continue
        while hi - lo > 1:
            m = (lo + hi) // 2
            (lo, hi) = (m, hi) if ok(sh, m, opt) else (lo, m)
        s = {"type": "object", "properties": {f"p{j}": sh for j in range(hi)}}
        print(name, "optional" if opt else "required", "fails alone at", hi, "props; json chars", len(json.dumps(s)))
