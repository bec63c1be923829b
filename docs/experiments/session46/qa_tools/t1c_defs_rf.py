import json, requests
B = "http://localhost:8792/v1"
S = {"type": "object", "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"], "additionalProperties": False}},
     "properties": {"a": {"$ref": "#/$defs/P"}, "b": {"$ref": "#/$defs/P"}}, "required": ["a", "b"], "additionalProperties": False}
r = requests.post(B + "/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": S}}, "max_tokens": 200, "seed": 1})
print("response_format with $defs:", r.status_code, r.text[:400])
r = requests.post(B + "/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": S}}], "tool_choice": "required", "max_tokens": 200, "seed": 1})
print("forced tool with same $defs:", r.status_code, r.text[:300])
# openai SDK's pydantic_function_tool
import openai
from pydantic import BaseModel
class Inner(BaseModel):
    x: int
    y: int
class Outer(BaseModel):
    a: Inner
    b: Inner
t = openai.pydantic_function_tool(Outer)
print("pydantic_function_tool params:", json.dumps(t["function"]["parameters"])[:300])
c = openai.OpenAI(base_url=B, api_key="x", max_retries=0)
try:
    r = c.chat.completions.create(model="rwkv-7", messages=[{"role": "user", "content": "x"}], tools=[t], tool_choice="required", max_tokens=200)
    print("SDK ok", r.choices[0].message.tool_calls)
except Exception as e:
    print("SDK pydantic_function_tool forced:", type(e).__name__, str(e)[:200])
try:
    r = c.beta.chat.completions.parse(model="rwkv-7", messages=[{"role": "user", "content": "x"}], tools=[t], tool_choice={"type": "function", "function": {"name": "Outer"}}, max_tokens=200)
    print("SDK parse ok", r.choices[0].message.tool_calls[0].function.parsed_arguments)
except Exception as e:
    print("SDK parse:", type(e).__name__, str(e)[:200])
