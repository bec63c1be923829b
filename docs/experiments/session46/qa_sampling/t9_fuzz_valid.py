"""Many sampled constrained replies (varied schemas, temperatures, min_p, logit_bias): every 'stop' reply must validate; every 'length' reply must be a prefix (not already complete); no U+FFFD."""
import sys, json, asyncio, random, enum; sys.path.insert(0, "/tmp/qa46/qa")
import httpx, jsonschema
from typing import Optional, List, Literal
from pydantic import BaseModel, Field
from openai.lib._pydantic import to_strict_json_schema
from common import BASE
class E(str, enum.Enum):
    a = "alpha"; b = "beta"
class Item(BaseModel):
    id: int
    label: str = Field(max_length=8)
    score: float
    flag: Optional[bool]
class Order(BaseModel):
    kind: E
    items: List[Item] = Field(max_length=3)
    note: Optional[str] = Field(max_length=5)
    mode: Literal["x", "y"]
schemas = [to_strict_json_schema(Order),
           {"type": "object", "properties": {"s": {"type": "string", "maxLength": 6}, "u": {"type": "string", "format": "uuid"}}, "required": ["s", "u"], "additionalProperties": False},
           {"type": "object", "properties": {"n": {"type": "number", "minimum": 0, "maximum": 10}, "i": {"type": "integer", "minimum": -5, "maximum": 5}}, "required": ["n", "i"]},
           {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 4},
           {"type": "object", "properties": {"d": {"type": "string", "format": "date-time"}}, "required": ["d"], "additionalProperties": False},
           {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"], "additionalProperties": False}}, "$ref": "#/$defs/node"},
           {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
           {"type": "object", "properties": {"e": {"type": "string", "enum": ["é", "ü\"q", "a\\b", "日本"]}}, "required": ["e"]}]
stats = {"stop_ok": 0, "stop_bad": 0, "length": 0, "length_bad": 0, "fffd": 0, "err": 0}
async def one(c, i):
    rnd = random.Random(i)
    si = i % len(schemas); s = schemas[si]
    body = {"model": "rwkv-7", "max_tokens": rnd.choice([40, 120]), "temperature": rnd.choice([0, 0.7, 1.0, 1.5]), "seed": i,
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": s, "strict": True}}}
    if rnd.random() < 0.3: body["min_p"] = rnd.choice([0.05, 0.3, 1])
    if rnd.random() < 0.3: body["logit_bias"] = {str(rnd.randrange(65536)): rnd.uniform(-100, 100) for _ in range(rnd.randrange(1, 300))}
    if rnd.random() < 0.5: path, body["prompt"] = "/v1/completions", f"Q{i}"
    else: path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": f"Q{i}"}]
    r = await c.post(path, json=body)
    if r.status_code != 200: stats["err"] += 1; print("ERR", r.status_code, r.text[:200]); return
    ch = r.json()["choices"][0]; t = ch.get("text") if "text" in ch else ch["message"]["content"]
    if "\ufffd" in t: stats["fffd"] += 1; print("FFFD", si, repr(t[:80]))
    if ch["finish_reason"] == "stop":
        try: jsonschema.validate(json.loads(t), s, format_checker=jsonschema.FormatChecker()); stats["stop_ok"] += 1
        except Exception as e: stats["stop_bad"] += 1; print("STOP_BAD", si, repr(t), str(e)[:200])
    else:
        stats["length"] += 1
        try:
            json.loads(t); jsonschema.validate(json.loads(t), s); stats["length_bad"] += 1; print("LENGTH_BUT_COMPLETE", si, repr(t))
        except Exception: pass
async def main():
    sem = asyncio.Semaphore(16)
    async with httpx.AsyncClient(base_url=BASE, timeout=300) as c:
        async def g(i):
            async with sem: await one(c, i)
        await asyncio.gather(*[g(i) for i in range(240)])
asyncio.run(main())
print(stats)
