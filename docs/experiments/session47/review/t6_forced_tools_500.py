"""Finding: chat with tool_choice "required" over many tools whose parameters each compile
alone but not together: the GrammarError of the combined grammar escapes forced_call_grammar
(server/api/tools.py: only per-function errors are caught) -> HTTP 500, not a 400.
Default settings (RWKV_MAX_PROMPT_TOKENS 131072, 8 MiB body)."""
import json
from server_common import live, httpx
def tools(n):
    return [{"type": "function", "function": {"name": f"{i}", "parameters": {"properties": {"a": {}}}}}
            for i in range(n)]
with live() as srv:
    c = httpx.Client(base_url=srv.url, timeout=600)
    for n in [5400, 5600]:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                "tools": tools(n), "tool_choice": "required"}
        r = c.post("/v1/chat/completions", json=body)
        print(f"{n} tools, body {len(json.dumps(body))} bytes ->", r.status_code, r.text[:300])
