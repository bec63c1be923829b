import time
from common import loader
L = loader()
from server.api.tools import parse_tools, forced_call_grammar
from server.task.constraint import Constraint
for ntools, nprops in [(50, 20), (200, 50), (500, 100)]:
    tools = parse_tools([{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object", "properties": {f"p{j}": {"type": "string", "pattern": "[a-z]+[0-9]{2,5}"} for j in range(nprops)}, "required": [f"p{j}" for j in range(nprops)]}}} for i in range(ntools)])
    t = time.time()
    try:
        g = forced_call_grammar(tools, "required", ">")
        t1 = time.time()
        c = Constraint(g, L.tokenizer)
        print(ntools, nprops, "ok", f"grammar {t1-t:.2f}s constraint {time.time()-t1:.2f}s len {len(g)}")
    except Exception as e:
        print(ntools, nprops, "->", type(e).__module__, type(e).__name__, str(e)[:300], f"{time.time()-t:.2f}s")
