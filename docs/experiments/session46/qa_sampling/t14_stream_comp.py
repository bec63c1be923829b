"""/v1/completions stream with response_format equals non-stream (SDK); stop strings in stream with rf."""
import sys, json; sys.path.insert(0, "/tmp/qa46/qa")
from common import *
rf = {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties": {"w": {"type": "string", "maxLength": 20}, "l": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 5}}, "required": ["w", "l"], "additionalProperties": False}}}
for seed in range(3):
    ns = client.completions.create(model="rwkv-7", prompt="J", max_tokens=80, seed=seed, temperature=1.0, n=2, extra_body={"response_format": rf})
    st = client.completions.create(model="rwkv-7", prompt="J", max_tokens=80, seed=seed, temperature=1.0, n=2, stream=True, extra_body={"response_format": rf})
    txt, fin = {}, {}
    for ev in st:
        for c in ev.choices:
            txt[c.index] = txt.get(c.index, "") + c.text; fin[c.index] = c.finish_reason or fin.get(c.index)
    for c in ns.choices:
        same = txt[c.index] == c.text and fin[c.index] == c.finish_reason
        print(f"seed {seed} choice {c.index}: same={same} {c.finish_reason} {c.text!r}")
st = client.completions.create(model="rwkv-7", prompt="J", max_tokens=80, seed=0, temperature=1.0, stream=True, stop=[","], extra_body={"response_format": rf})
t, f = "", None
for ev in st:
    for c in ev.choices: t += c.text; f = c.finish_reason or f
print("stream stop=',':", f, repr(t))
