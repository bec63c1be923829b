"""Repro: a stop string ends a response_format reply mid-JSON with finish_reason "stop"; the SDK's parse() then raises pydantic ValidationError."""
import httpx, json
from openai import OpenAI
from pydantic import BaseModel
B = "http://127.0.0.1:8791"
rf = {"type": "json_schema", "json_schema": {"name": "A", "schema": {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}, "required": ["name", "n"], "additionalProperties": False}, "strict": True}}
for stop in ['"', ","]:
    r = httpx.post(B + "/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "response_format": rf, "max_tokens": 100, "seed": 1, "stop": stop}, timeout=60).json()
    ch = r["choices"][0]
    print(f"stop={stop!r}: finish_reason={ch['finish_reason']} content={ch['message']['content'][:60]!r}")
class A(BaseModel):
    name: str
    n: int
c = OpenAI(base_url=B + "/v1", api_key="x", max_retries=0)
try:
    c.chat.completions.parse(model="rwkv-7", messages=[{"role": "user", "content": "x"}], response_format=A, max_tokens=50, stop=['"'], seed=1)
except Exception as e:
    print("parse raised", type(e).__name__, str(e).splitlines()[0])
