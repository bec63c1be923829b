"""README: '2,000 alternatives in one place' is refused. Which kinds of 2,000+ alternatives does
the probe refuse, and would a model's reply have failed (random walks)?"""
import sys; sys.path.insert(0, "review")
from probe_limits import random_walk, fmt, tok  # (runs probe_limits' cases first)
from server.api.response_format import response_grammar
from server.task.constraint import Constraint
K = 2100
cases = {
 "anyOf objects with distinct keys": {"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"], "additionalProperties": False} for i in range(K)]},
 "anyOf consts": {"type": "object", "properties": {"v": {"anyOf": [{"const": f"v{i}"} for i in range(K)]}}, "required": ["v"]},
 "enum": {"type": "object", "properties": {"v": {"enum": [f"v{i}" for i in range(K)]}}, "required": ["v"]},
 "2100 optional properties": {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(K)}},
 "anyOf objects const tag": {"anyOf": [{"type": "object", "properties": {"kind": {"const": f"t{i}"}, "x": {"type": "integer"}}, "required": ["kind", "x"], "additionalProperties": False} for i in range(K)]},
}
for name, s in cases.items():
    try:
        c = Constraint(response_grammar(fmt(s)), tok)
    except Exception as e:
        print(f"{name}: compile refused: {str(e)[:120]}"); continue
    print(f"{name:34s} probe: {str(c.probe())[:110]!s:110} | walks: {[str(w)[:60] for w in (random_walk(c, s_) for s_ in range(2))]}")
