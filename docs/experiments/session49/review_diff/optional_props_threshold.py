"""How many optional properties (an object with no required keys) the engine takes: the probe
refuses past it (a reply would fail at its first key anyway)."""
from server.api.response_format import response_grammar
from server.task.constraint import Constraint
from server.model.tokenizer import Tokenizer
tok = Tokenizer()
def refused(n, strict):
    s = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(n)}}
    return Constraint(response_grammar({"type": "json_schema", "json_schema": {"name": "x", "schema": s, "strict": strict}}), tok).probe()
for strict in (False, True):
    lo, hi = 1, 2100
    while lo < hi:
        mid = (lo + hi) // 2
        if refused(mid, strict): hi = mid
        else: lo = mid + 1
    print(f"strict={strict}: first refused at {lo} optional properties: {str(refused(lo, strict))[:120]}")
