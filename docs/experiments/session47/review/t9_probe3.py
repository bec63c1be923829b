from common import loader
L = loader()
from server.api.tools import parse_tools, forced_call_grammar, tools_instructions
def tools(n, sch):
    return parse_tools([{"type": "function", "function": {"name": f"f{i}", "parameters": {"properties": {"a": sch}}}} for i in range(n)])
for sch in [{}, {"type": "string"}]:
  for n in [4000, 5000, 6000]:
    t = tools(n, sch)
    try:
        forced_call_grammar(t, "required", ">"); r = "ok"
    except Exception as e:
        r = f"{type(e).__name__}: {str(e)[:120]}"
    print(sch, n, "prompt tokens", len(L.encode(tools_instructions(t, "required"))), r)
