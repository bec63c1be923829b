from common import loader
L = loader()
from server.api.tools import parse_tools, forced_call_grammar, tools_instructions
def tools(n, p):
    return parse_tools([{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object",
             "properties": {f"p{j}": {"type": "string"} for j in range(p)}}}} for i in range(n)])
for n, p in [(20, 1000), (10, 3000), (4, 4000), (2, 4000), (1000, 3), (3000, 1), (6000, 1)]:
    t = tools(n, p)
    try:
        forced_call_grammar(t, "required", ">"); r = "ok"
    except Exception as e:
        r = f"{type(e).__name__}: {str(e)[:120]}"
    print(n, p, "prompt tokens", len(L.encode(tools_instructions(t, "required"))), r)
