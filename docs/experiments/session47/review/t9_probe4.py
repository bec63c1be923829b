from common import loader
L = loader()
from server.api.tools import parse_tools, forced_call_grammar, tools_instructions
def tools(n):
    return parse_tools([{"type": "function", "function": {"name": f"{i}", "parameters": {"properties": {"a": {}}}}} for i in range(n)])
for n in [5200, 5400, 5600, 5800]:
    t = tools(n)
    try:
        forced_call_grammar(t, "required", ">"); r = "ok"
    except Exception as e:
        r = f"{type(e).__name__}: {str(e)[:60]}"
    print(n, "prompt tokens", len(L.encode(tools_instructions(t, "required"))), r)
