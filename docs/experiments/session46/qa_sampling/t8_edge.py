"""Edge cases: deep-nested bodies, costly schemas over HTTP (with /health latency), echo/logprobs/suffix/template with response_format, stop-string + parse()."""
import sys, json, time, threading; sys.path.insert(0, "/tmp/qa46/qa")
from common import *
import httpx
def show(name, c, j): print(f"{name}: {c} {json.dumps(j)[:230]}")
# deep nesting in schema
deep = '{"model":"rwkv-7","prompt":"x","max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"name":"d","schema":' + '{"type":"array","items":' * 5000 + '{"type":"integer"}' + '}' * 5000 + '}}}'
show("deep 5000 schema comp", *raw("/v1/completions", deep))
deep2 = '{"model":"rwkv-7","prompt":"x","max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"name":"d","schema":{"type":"object","default":' + '[' * 100000 + ']' * 100000 + '}}}}'
show("deep 100000 list in schema", *raw("/v1/completions", deep2))
# costly-ish schemas over HTTP, measuring /health latency in parallel
def probe(stop, lat):
    while not stop.is_set():
        t = time.time(); httpx.get(BASE + "/health", timeout=60); lat.append(time.time() - t); time.sleep(0.02)
for name, schema in [("enum20k", {"enum": [f"value_{i}" for i in range(20000)]}),
                     ("anyOf2000", {"anyOf": [{"type": "object", "properties": {f"k{i}": {"const": i}}, "required": [f"k{i}"]} for i in range(2000)]}),
                     ("pattern_rep", {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|b|c){1,2000}x{1,2000}$"}}, "required": ["s"]})]:
    stop, lat = threading.Event(), []
    th = threading.Thread(target=probe, args=(stop, lat)); th.start()
    t = time.time(); c, j = comp(response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}, max_tokens=30, n=8, temperature=1.0)
    el = time.time() - t; stop.set(); th.join()
    print(f"{name}: {c} {el:.2f}s health max latency {max(lat):.3f}s; first {[ (x['finish_reason'], x['text'][:40]) for x in j['choices'][:2]] if c==200 else j}")
# strict false still strict
c, j = chat(response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"], "additionalProperties": False}, "strict": False}}, max_tokens=30)
print("strict false:", c, j["choices"][0]["message"]["content"], j["choices"][0]["finish_reason"])
# echo / logprobs / suffix with response_format
show("comp echo+rf", *comp(prompt="Hi", echo=True, response_format={"type": "json_object"}, max_tokens=10))
c, j = comp(prompt="Hi", logprobs=2, response_format={"type": "json_object"}, max_tokens=10)
print("comp logprobs+rf:", c, j["choices"][0]["text"], j["choices"][0]["logprobs"]["tokens"] if c == 200 else j)
show("comp suffix+rf", *comp(prompt="Hi", suffix="", response_format={"type": "json_object"}, max_tokens=10))
show("comp max_tokens 0 + rf", *comp(prompt="Hi", response_format={"type": "json_object"}, max_tokens=0))
show("comp max_tokens 0 + echo + logprobs + rf", *comp(prompt="Hi", echo=True, logprobs=1, response_format={"type": "json_object"}, max_tokens=0))
c, j = chat(response_format={"type": "json_object"}, max_tokens=10, logprobs=True, top_logprobs=2)
print("chat logprobs+rf:", c, j["choices"][0]["message"]["content"], [x["token"] for x in j["choices"][0]["logprobs"]["content"]] if c == 200 else j)
# stream n=3 with rf + include_usage
r = H.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}, "max_tokens": 20, "n": 3, "stream": True, "stream_options": {"include_usage": True}, "temperature": 1.0, "seed": 4})
texts, fins, usage = {}, {}, None
for line in r.text.splitlines():
    if line.startswith("data: {"):
        ev = json.loads(line[6:]); usage = ev.get("usage") or usage
        for ch in ev["choices"]:
            texts[ch["index"]] = texts.get(ch["index"], "") + (ch["delta"].get("content") or ""); fins[ch["index"]] = ch.get("finish_reason") or fins.get(ch["index"])
print("stream n=3:", r.status_code, texts, fins, usage, "DONE" in r.text)
# template + response_format
c, t = raw("/v1/tasks/create", {"prompt": "User: be json\n\nAssistant: ok\n\n", "max_tokens": 0}); 
c, tp = raw(f"/v1/tasks/{t['task_id']}/as_template?name=qajson", {}); print("template:", c, tp)
show("chat with template + rf", *chat(model="rwkv-7:_qajson", response_format={"type": "json_object"}, max_tokens=10))
# SDK parse() with a stop string
from pydantic import BaseModel
class A(BaseModel):
    name: str
    n: int
parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
try:
    r = parse(model="rwkv-7", messages=[{"role": "user", "content": "x"}], response_format=A, max_tokens=50, stop=['"'], seed=1)
    print("parse with stop:", r.choices[0].finish_reason, repr(r.choices[0].message.content), r.choices[0].message.parsed)
except Exception as e:
    print("parse with stop raised:", type(e).__name__, str(e)[:200])
