import time
from server.model.tokenizer import Tokenizer
from server.task.constraint import Constraint, json_grammar
tok = Tokenizer()
schema = {"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":False}
c = Constraint(json_grammar(schema), tok)
ids = tok.encode(' {"city":"Paris","unit":"c"}')
ts=[]
for t in ids:
    t0=time.perf_counter(); f=c._matcher.compute_ff_tokens(); ts.append((time.perf_counter()-t0)*1e6)
    print(repr(tok.decode([t])), f)
    assert c.accept(t)
print("us per compute_ff_tokens", sorted(ts))
