"""Misc: tools+tool_choice none + response_format; reasoning_effort with rf; non-stream disconnect; n=128 constrained then disconnect; health afterwards."""
import sys, json, time; sys.path.insert(0, "/tmp/qa46/qa")
from common import *
import httpx
tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
for tc in (None, "none", "auto", "required"):
    body = dict(response_format={"type": "json_object"}, tools=tools, max_tokens=5)
    if tc: body["tool_choice"] = tc
    c, j = chat(**body); print(f"tools + tool_choice={tc} + rf:", c, json.dumps(j)[:200])
c, j = chat(response_format={"type": "json_object"}, reasoning_effort="high", max_tokens=20)
print("rf + reasoning_effort high:", c, j["choices"][0]["message"])
# non-stream disconnect
for n in (1, 64):
    try:
        httpx.post(BASE + "/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}, "required": ["a"]}}}, "max_tokens": 3000, "n": n, "temperature": 1.0}, timeout=1.0)
    except httpx.TimeoutException: print(f"client timed out (n={n})")
    time.sleep(2.5)
    h = H.get("/health").json(); print(f"health after non-stream disconnect n={n}:", h["status"], "active", h["active"], "queue", h["queue"], "finishing", h["finishing"])
# big schema with n=128 then disconnect quickly
big = {"anyOf": [{"type": "object", "properties": {f"k{i}": {"const": i}}, "required": [f"k{i}"]} for i in range(2000)]}
try:
    httpx.post(BASE + "/v1/completions", json={"model": "rwkv-7", "prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": big}}, "max_tokens": 3000, "n": 128}, timeout=0.5)
except httpx.TimeoutException: print("client timed out (big n=128)")
for k in range(10):
    time.sleep(1); h = H.get("/health").json()
    print("health:", h["status"], "active", h["active"], "queue", h["queue"], "finishing", h["finishing"])
    if not h["active"] and not h["queue"]: break
print(H.get("/metrics").text.count("\n"), "metrics lines")
