import json
from server_common import live, httpx
M = [{"role": "user", "content": "hi"}]
def js(schema): return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
cases = [
 ("chat", {"response_format": js({"$ref": "http://example.com/s.json"})}),
 ("chat", {"response_format": js({"type": "object", "x-guidance": {"lenient": True}})}),
 ("chat", {"response_format": js({"type": "object", "x-guidance": {"whitespace_pattern": "[ \\n]*"}})}),
 ("chat", {"response_format": js({"type": "object", "x-guidance": {"item_separator": 5}})}),
 ("chat", {"response_format": js({"type": "object", "x-guidance": {"foo": 1}})}),
 ("chat", {"response_format": js({"type": "wat"})}),
 ("chat", {"response_format": js({"type": "string", "format": "nope"})}),
 ("chat", {"response_format": js({"type": "string", "pattern": "("})}),
 ("chat", {"response_format": js({"type": "integer", "minimum": 5, "maximum": 1})}),
 ("chat", {"response_format": js({"allOf": [{"type": "string"}, {"type": "integer"}]})}),
 ("chat", {"response_format": js({"not": {"type": "string"}})}),
 ("chat", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}),
 ("chat", {"response_format": {"type": "json_object", "json_schema": 5}}),
 ("chat", {"response_format": {"type": None}}),
 ("chat", {"response_format": {}}),
 ("chat", {"logit_bias": {"0": -100, "65535": 100}}),
 ("chat", {"logit_bias": {"65536": 1}}),
 ("chat", {"logit_bias": {"-1": 1}}),
 ("chat", {"logit_bias": {"1": "5"}}),
 ("chat", {"logit_bias": {"1": None}}),
 ("chat", {"logit_bias": {"1": 1e308}}),
 ("chat", {"logit_bias": []}),
 ("chat", {"logit_bias": "x"}),
 ("chat", {"min_p": 1, "temperature": 1}),
 ("chat", {"min_p": 0.5, "temperature": 0}),
 ("chat", {"logprobs": True, "top_logprobs": 20, "n": 2}),
 ("chat", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "x-guidance": {"lenient": 1}}}}], "tool_choice": "required"}),
 ("chat", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}}}], "tool_choice": "required"}),
 ("chat", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": ["object", "null"]}}}], "tool_choice": "required"}),
 ("chat", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "x-guidance": "s"}}}], "tool_choice": "required"}),
 ("cmpl", {"prompt": [0, 5, 6], "echo": True, "logprobs": 5}),
 ("cmpl", {"prompt": [5], "echo": True, "logprobs": 0, "max_tokens": 0}),
 ("cmpl", {"prompt": "", "echo": True, "logprobs": 1}),
 ("cmpl", {"prompt": ["a", "b"], "echo": True, "logprobs": 1, "n": 2}),
 ("cmpl", {"prompt": "x", "response_format": js({"type": "string"}), "logit_bias": {"0": 100}}),
 ("cmpl", {"prompt": "x", "suffix": "y", "response_format": {"type": "json_object"}}),
]
with live() as srv:
    c = httpx.Client(base_url=srv.url, timeout=300)
    for route, extra in cases:
        if route == "chat":
            body = {"messages": M, "max_tokens": 8, "seed": 3, **extra}; path = "/v1/chat/completions"
        else:
            body = {"max_tokens": 8, "seed": 3, **extra}; path = "/v1/completions"
        r = c.post(path, json=body)
        t = r.text
        try:
            j = r.json(); ch = j.get("choices")
            t = json.dumps(ch[0]["message"] if route == "chat" else ch[0]["text"]) + " " + str(ch[0]["finish_reason"]) if ch else json.dumps(j)[:250]
        except Exception: pass
        print(r.status_code, route, json.dumps(extra)[:110], "=>", t[:220].replace("\n", "\\n"))
