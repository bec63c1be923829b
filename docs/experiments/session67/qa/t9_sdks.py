import sys, json, time
from openai import OpenAI
import openai
cl=OpenAI(base_url="http://localhost:8871/v1", api_key="sk-local", max_retries=0, timeout=60)
print("models:", [m.id for m in cl.models.list()])
r=cl.chat.completions.create(model="rwkv-7", max_tokens=5, messages=[{"role":"user","content":"Hi"}])
print("chat:", r.choices[0].finish_reason, repr(r.choices[0].message.content), getattr(r.choices[0].message,"reasoning_content",None), r.usage)
parts=[]; fin=None; usage=None
for ch in cl.chat.completions.create(model="rwkv-7", stream=True, max_tokens=8, reasoning_effort="none", stream_options={"include_usage":True}, messages=[{"role":"user","content":"Tell a joke"}]):
    if ch.choices:
        d=ch.choices[0].delta
        if d.content: parts.append(d.content)
        if ch.choices[0].finish_reason: fin=ch.choices[0].finish_reason
    if ch.usage: usage=ch.usage
print("stream:", repr("".join(parts)), fin, usage)
r=cl.completions.create(model="rwkv-7", prompt=["a","b"], max_tokens=3)
print("completions:", [(c.index,c.text,c.finish_reason) for c in r.choices], r.usage)
for ch in cl.completions.create(model="rwkv-7", prompt="x", max_tokens=3, stream=True): pass
print("completions stream ok")
try:
    cl.chat.completions.create(model="rwkv-7", max_tokens=5, messages=[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}])
except openai.BadRequestError as e: print("image -> BadRequestError", e.status_code, e.body)
try:
    cl.chat.completions.create(model="rwkv-7", max_tokens=5, temperature=5, messages=[{"role":"user","content":"x"}])
except openai.BadRequestError as e: print("temp -> BadRequestError", e.status_code, e.code, e.param)
# tool call stream via SDK
tools=[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":6}},"required":["city"],"additionalProperties":False}}}]
calls={}
for ch in cl.chat.completions.create(model="rwkv-7", stream=True, max_tokens=60, tools=tools, tool_choice="required", messages=[{"role":"user","content":"weather?"}]):
    if ch.choices and ch.choices[0].delta.tool_calls:
        for tc in ch.choices[0].delta.tool_calls:
            e=calls.setdefault(tc.index,{"id":None,"name":"","args":""})
            if tc.id: e["id"]=tc.id
            if tc.function and tc.function.name: e["name"]+=tc.function.name
            if tc.function and tc.function.arguments: e["args"]+=tc.function.arguments
print("tool stream accum:", calls, "args json ok:", all(json.loads(v["args"]) is not None for v in calls.values()))
# rwkv_api SDK
from rwkv_api import Client
with Client("http://localhost:8871") as client:
    t=client.create("User: hi\n\nAssistant:", max_tokens=5, persistent=True); t.wait(); print("rwkv_api:", t.task_id, repr(t.result))
    print("rwkv_api stream:", repr("".join(client.create("User: hi\n\nAssistant:", max_tokens=5, stream=True))))
