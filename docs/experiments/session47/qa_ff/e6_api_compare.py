"""OpenAI chat (forced tool calls, response_format; streamed and not; n=2; logprobs) and Task API
(response_format, create/continue/stream) against two servers: FF on (8795) and FF off (8796).
Every reply (text, tool calls, usage, logprobs, task results) must be the same."""
import json, sys, requests

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "w",
          "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
                         "properties": {"city": {"type": "string", "maxLength": 12},
                                        "unit": {"enum": ["celsius", "fahrenheit"]}}}}},
         {"type": "function", "function": {"name": "get_time", "description": "t",
          "parameters": {"type": "object", "properties": {}}}}]
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["ok", "n", "tag"],
          "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 2, 3]},
                         "tag": {"type": "string", "maxLength": 3}}}
MSG = [{"role": "user", "content": "weather in Paris?"}]

def chat(port, body, stream=False):
    body = dict(body, model="x", stream=stream)
    if stream:
        body["stream_options"] = {"include_usage": True}
        r = requests.post(f"http://localhost:{port}/v1/chat/completions", json=body, stream=True, timeout=120)
        events = [json.loads(l[6:]) for l in r.iter_lines(decode_unicode=True) if l.startswith("data: ") and l != "data: [DONE]"]
        for e in events:
            e.pop("id", None); e.pop("created", None); e.pop("system_fingerprint", None)
            for c in e.get("choices", []):
                for tc in (c.get("delta") or {}).get("tool_calls") or []:
                    tc.pop("id", None)
        # merge per choice
        out = {}
        for e in events:
            for c in e.get("choices", []):
                d = out.setdefault(c["index"], {"content": "", "tool": "", "finish": None, "lp": []})
                d["content"] += (c.get("delta") or {}).get("content") or ""
                for tc in (c.get("delta") or {}).get("tool_calls") or []:
                    d["tool"] += json.dumps(tc.get("function", {}))
                d["finish"] = c.get("finish_reason") or d["finish"]
                if c.get("logprobs"):
                    d["lp"] += c["logprobs"].get("content") or []
        usage = [e["usage"] for e in events if e.get("usage")]
        return {"choices": out, "usage": usage}
    r = requests.post(f"http://localhost:{port}/v1/chat/completions", json=body, timeout=120).json()
    r.pop("id", None); r.pop("created", None); r.pop("system_fingerprint", None)
    for c in r.get("choices", []):
        for tc in c["message"].get("tool_calls") or []:
            tc.pop("id", None)
    return r

cases = {
  "forced_fn": dict(messages=MSG, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=80, seed=3, temperature=1.0, top_p=1.0, presence_penalty=0.5),
  "forced_fn_greedy": dict(messages=MSG, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=80, temperature=0.0),
  "required_n2": dict(messages=MSG, tools=TOOLS, tool_choice="required", max_tokens=80, seed=4, n=2, temperature=1.0),
  "forced_lp": dict(messages=MSG, tools=TOOLS, tool_choice="required", max_tokens=80, temperature=0.0, logprobs=True, top_logprobs=2),
  "schema": dict(messages=MSG, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}, max_tokens=60, seed=7, temperature=1.0),
  "schema_short": dict(messages=MSG, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}, max_tokens=9, temperature=0.0),
  "forced_stop": dict(messages=MSG, tools=TOOLS, tool_choice="required", max_tokens=80, temperature=0.0, stop=["arguments"]),
}
diff = 0
for name, body in cases.items():
    for stream in (False, True):
        a, b = chat(8795, body, stream), chat(8796, body, stream)
        same = a == b
        diff += not same
        print(name, "stream" if stream else "plain", "same" if same else "DIFFERENT")
        if not same:
            print("  on :", json.dumps(a)[:1500]); print("  off:", json.dumps(b)[:1500])
        elif name in ("forced_fn", "schema_short", "forced_stop"):
            print("  ", json.dumps(a)[:400])
print("different:", diff)
