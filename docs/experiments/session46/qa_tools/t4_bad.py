import json, requests
B = "http://localhost:8792/v1/chat/completions"
MSG = [{"role": "user", "content": "x"}]
T = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
def t(label, body, timeout=60):
    b = {"model": "rwkv-7", "messages": MSG, "max_tokens": 30}; b.update(body)
    try:
        r = requests.post(B, json=b, timeout=timeout)
    except Exception as e:
        print(f"{label}: EXC {e}"); return
    try: j = r.json()
    except Exception: j = r.text
    shape = isinstance(j, dict) and "error" in j and set(j["error"]) >= {"message", "type", "param", "code"}
    if r.status_code == 200:
        ch = j["choices"][0]
        print(f"{label}: 200 finish={ch['finish_reason']} msg={json.dumps(ch['message'])[:160]}")
    else:
        print(f"{label}: {r.status_code} shape_ok={shape} param={j['error'].get('param') if shape else None} msg={(j['error']['message'] if shape else str(j))[:160]!r}")
t("named not in tools", {"tools": T, "tool_choice": {"type": "function", "function": {"name": "g"}}})
t("named w/o tools", {"tool_choice": {"type": "function", "function": {"name": "g"}}})
t("required w/o tools", {"tool_choice": "required"})
t("required empty tools", {"tools": [], "tool_choice": "required"})
t("tool_choice bad str", {"tools": T, "tool_choice": "any"})
t("tool_choice int", {"tools": T, "tool_choice": 3})
t("tool_choice dict no name", {"tools": T, "tool_choice": {"type": "function"}})
t("tool_choice name non-str", {"tools": T, "tool_choice": {"type": "function", "function": {"name": 5}}})
t("tool_choice type not function", {"tools": T, "tool_choice": {"type": "custom", "function": {"name": "f"}}})
t("tools not list", {"tools": {"a": 1}, "tool_choice": "required"})
t("tool not dict", {"tools": [5], "tool_choice": "required"})
t("params list", {"tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}], "tool_choice": "required"})
t("params string", {"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}], "tool_choice": "required"})
t("params bad type", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "frob"}}}], "tool_choice": "required"})
t("params type string (not object)", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}], "tool_choice": "required"})
t("params type array", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}}}], "tool_choice": "required"})
t("params false-ish required unknown", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": ["zz"], "additionalProperties": False}}}], "tool_choice": "required"})
t("params unsat minimum>maximum", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}, "required": ["a"]}}}], "tool_choice": "required"})
t("params remote $ref", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"$ref": "http://example.com/x.json"}}}], "tool_choice": "required"})
t("params pattern bad regex", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(("}}, "required": ["a"]}}}], "tool_choice": "required"})
t("params recursive $ref self", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"c": {"$ref": "#"}}}}}], "tool_choice": "required"})
t("params bool true", {"tools": [{"type": "function", "function": {"name": "f", "parameters": True}}], "tool_choice": "required"})
t("params deep nest 2000", {"tools": [{"type": "function", "function": {"name": "f", "parameters": json.loads('{"type":"object","properties":{"a":' * 0 + '{}' )}}], "tool_choice": "required"})
deep = {"type": "string"}
for i in range(300): deep = {"type": "object", "properties": {"a": deep}, "required": ["a"]}
t("params nested 300", {"tools": [{"type": "function", "function": {"name": "f", "parameters": deep}}], "tool_choice": "required"}, timeout=120)
deep = "1"
deepj = '{"type":"object","properties":{"a":' * 900 + '{"type":"string"}' + '}}' * 900
r = requests.post(B, data='{"model":"rwkv-7","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":' + deepj + '}}]}', headers={"content-type": "application/json"}, timeout=120)
print("params nested 900 (raw):", r.status_code, r.text[:200])
t("tool name weird chars", {"tools": [{"type": "function", "function": {"name": "a\"b</tool_call>\\", "parameters": {"type": "object", "properties": {"k": {"enum": [1]}}, "required": ["k"], "additionalProperties": False}}}], "tool_choice": "required", "max_tokens": 60})
t("tool name unicode/space", {"tools": [{"type": "function", "function": {"name": "get weather ☃", "parameters": {"type": "object", "properties": {"k": {"enum": [1]}}, "required": ["k"], "additionalProperties": False}}}], "tool_choice": {"type": "function", "function": {"name": "get weather ☃"}}, "max_tokens": 60})
t("dup tool names", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"k": {"enum": [1]}}, "required": ["k"], "additionalProperties": False}}}, {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"j": {"enum": [2]}}, "required": ["j"], "additionalProperties": False}}}], "tool_choice": "required", "max_tokens": 60})
t("response_format + tools required", {"tools": T, "tool_choice": "required", "response_format": {"type": "json_object"}})
t("response_format + tools none", {"tools": T, "tool_choice": "none", "response_format": {"type": "json_object"}})
t("tool_choice none", {"tools": T, "tool_choice": "none", "reasoning_effort": "none"})
t("tool_choice auto", {"tools": T, "tool_choice": "auto", "reasoning_effort": "none"})
t("parallel_tool_calls str", {"tools": T, "tool_choice": "required", "parallel_tool_calls": "yes"})
t("n=0", {"tools": T, "tool_choice": "required", "n": 0})
t("n=200", {"tools": T, "tool_choice": "required", "n": 200})
t("max_tokens 0 forced", {"tools": T, "tool_choice": "required", "max_tokens": 0})
t("max_tokens -1", {"tools": T, "tool_choice": "required", "max_tokens": -1})
t("strict in function", {"tools": [{"type": "function", "function": {"name": "f", "strict": True, "parameters": {"type": "object", "properties": {"a": {"type": "integer", "maximum": 3, "minimum": 0}}, "required": ["a"], "additionalProperties": False}}}], "tool_choice": "required"})
t("completions with tools", {})
r = requests.post("http://localhost:8792/v1/completions", json={"model": "rwkv-7", "prompt": "x", "max_tokens": 5, "tools": T, "tool_choice": "required"}); print("completions+tools", r.status_code, r.text[:200])
t("history tool_calls bad", {"messages": MSG + [{"role": "assistant", "tool_calls": [{"x": 1}]}, {"role": "user", "content": "y"}], "tools": T, "tool_choice": "required"})
t("tool msg without tool_call_id", {"messages": MSG + [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}, {"role": "tool", "content": "42"}], "tools": T, "tool_choice": "required"})
t("tool followup", {"messages": MSG + [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "42"}], "tools": T, "tool_choice": "required", "max_tokens": 60})
t("tool followup args object", {"messages": MSG + [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}, {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "42"}]}], "tools": T, "tool_choice": {"type": "function", "function": {"name": "f"}}, "max_tokens": 60})
t("tool followup then auto", {"messages": MSG + [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "42"}], "tools": T, "tool_choice": "auto", "reasoning_effort": "none", "max_tokens": 30})
