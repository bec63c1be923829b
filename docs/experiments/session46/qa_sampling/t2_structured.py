"""response_format with the openai SDK: parse() with pydantic models, streaming, n>1, stop, seeds, max_tokens."""
import sys, json, enum; sys.path.insert(0, "/tmp/qa46/qa")
from typing import Optional, List, Literal
from pydantic import BaseModel, ValidationError
import jsonschema
from common import *
from openai.lib._pydantic import to_strict_json_schema

class Color(str, enum.Enum):
    red = "red"; green = "green"; blue = "blue"
class Address(BaseModel):
    street: str
    zip: Optional[int]
class Person(BaseModel):
    name: str
    age: int
    color: Color
    tags: List[str]
    home: Address
    work: Optional[Address]
    kind: Literal["a", "b"]
class Tree(BaseModel):
    label: str
    children: List["Tree"]
class Team(BaseModel):
    lead: Person
    members: List[Person]

parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
fails = 0
def bad(msg):
    global fails; fails += 1; print("BAD", msg)

for model in (Person, Tree, Team, Address):
    schema = to_strict_json_schema(model)
    print("schema has $defs:", "$defs" in schema, model.__name__)
    for seed in range(4):
        try:
            r = parse(model="rwkv-7", messages=[{"role": "user", "content": "JSON please"}], response_format=model,
                      max_tokens=400, seed=seed, temperature=1.0)
        except Exception as e:
            # LengthFinishReasonError is raised by the SDK when finish_reason == length
            print(f"  {model.__name__} seed={seed}: exception {type(e).__name__}: {str(e)[:150]}")
            continue
        ch = r.choices[0]
        print(f"  {model.__name__} seed={seed}: finish={ch.finish_reason} parsed={ch.message.parsed is not None} len={len(ch.message.content)} content={ch.message.content[:100]!r}")
        if ch.finish_reason == "stop":
            try:
                jsonschema.validate(json.loads(ch.message.content), schema)
            except Exception as e:
                bad(f"{model.__name__} seed={seed} stop but invalid: {e}")
            if " " in ch.message.content.replace('" ', '').replace(' "','') and False:
                pass

# raw json_schema: same seed twice -> same, stream equals non-stream
schema = to_strict_json_schema(Person)
rf = {"type": "json_schema", "json_schema": {"name": "Person", "schema": schema, "strict": True}}
outs = []
for i in range(2):
    c, j = chat(response_format=rf, max_tokens=300, seed=7, temperature=1.0)
    outs.append(j["choices"][0]["message"]["content"]); print("seed7 run", i, c, j["choices"][0]["finish_reason"], outs[-1][:80])
if outs[0] != outs[1]: bad("same seed differs")
# streaming with response_format
st = client.chat.completions.create(model="rwkv-7", messages=[{"role": "user", "content": "Give JSON"}], response_format=rf,
                                    max_tokens=300, seed=7, temperature=1.0, stream=True)
text, fin, reasoning = "", None, ""
for ev in st:
    for ch in ev.choices:
        text += ch.delta.content or ""
        reasoning += getattr(ch.delta, "reasoning_content", None) or ""
        fin = ch.finish_reason or fin
print("stream:", fin, text[:80], "reasoning:", repr(reasoning[:40]))
if text != outs[0]: bad(f"stream text != non-stream text: {text!r} vs {outs[0]!r}")
# chat reply without response_format has reasoning?; with it, none
c, j = chat(response_format=rf, max_tokens=50, seed=1)
if j["choices"][0]["message"].get("reasoning_content"): bad("reasoning present with response_format")
# n>1
c, j = chat(response_format=rf, max_tokens=400, n=5, temperature=1.0, seed=3)
print("n=5", c, [ (x["finish_reason"], x["message"]["content"][:40]) for x in j["choices"]])
for x in j["choices"]:
    if x["finish_reason"] == "stop":
        try: jsonschema.validate(json.loads(x["message"]["content"]), schema)
        except Exception as e: bad(f"n=5 choice {x['index']} invalid {e}")
    elif x["finish_reason"] != "length": bad(f"n=5 finish {x['finish_reason']}")
# completions n>1 and multiple prompts
c, j = comp(prompt=["a", "b"], response_format={"type": "json_object"}, max_tokens=200, n=3, temperature=1.0)
print("comp 2 prompts x n=3:", c, [(x["index"], x["finish_reason"], x["text"][:30]) for x in j["choices"]])
for x in j["choices"]:
    if x["finish_reason"] == "stop":
        try:
            v = json.loads(x["text"]); assert isinstance(v, dict)
        except Exception as e: bad(f"comp choice {x['index']} invalid {x['text']!r}")
# max_tokens small: prefix
for mt in (1, 2, 5):
    c, j = chat(response_format=rf, max_tokens=mt, seed=7, temperature=1.0)
    t = j["choices"][0]["message"]["content"]; fr = j["choices"][0]["finish_reason"]
    print(f"max_tokens={mt}: {fr} {t!r} usage={j['usage']['completion_tokens']}")
    if not outs[0].startswith(t): bad(f"max_tokens={mt} not a prefix of full reply: {t!r}")
    if fr != "length": bad(f"max_tokens={mt} finish {fr}")
# max_tokens 0
c, j = chat(response_format=rf, max_tokens=0)
print("max_tokens=0 chat:", c, str(j)[:200])
# stop strings with response_format
for stop in ['"', ",", "}", "name"]:
    c, j = chat(response_format=rf, max_tokens=300, seed=7, temperature=1.0, stop=stop)
    t = j["choices"][0]["message"]["content"]; fr = j["choices"][0]["finish_reason"]
    valid = True
    try: jsonschema.validate(json.loads(t), schema)
    except Exception: valid = False
    print(f"stop={stop!r}: finish={fr} valid_json={valid} text={t[:60]!r}")
    if fr == "stop" and not valid: bad(f"stop={stop!r}: finish_reason stop with JSON not matching schema: {t!r}")
# greedy
c, j = chat(response_format=rf, max_tokens=300, temperature=0)
print("greedy:", j["choices"][0]["finish_reason"], j["choices"][0]["message"]["content"][:100])
# json_object greedy and sampled: always objects
for s in range(6):
    c, j = comp(response_format={"type": "json_object"}, max_tokens=300, seed=s, temperature=1.0)
    t = j["choices"][0]["text"]; fr = j["choices"][0]["finish_reason"]
    ok = True
    try: ok = isinstance(json.loads(t), dict)
    except Exception: ok = False
    print(f"json_object seed={s}: {fr} ok={ok} {t[:60]!r}")
    if fr == "stop" and not ok: bad(f"json_object seed={s} invalid")
    if " " in t and ok and "\n" in t: bad("whitespace")
print("FAILS", fails)
