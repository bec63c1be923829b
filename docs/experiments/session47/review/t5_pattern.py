from common import loader
L = loader()
from server.api.tools import parse_tools, forced_call_grammar
from server.task.constraint import Constraint, json_grammar
for n in [1000, 5000, 20000, 100000]:
    for k in [1, 2, 3]:
        tools = parse_tools([{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "[a-z]{%d}" % n}}, "required": ["s"]}}} for i in range(k)])
        try:
            g = forced_call_grammar(tools, "required", ">")
            print(n, k, "ok")
        except Exception as e:
            print(n, k, "->", type(e).__module__, type(e).__name__, str(e)[:200])
