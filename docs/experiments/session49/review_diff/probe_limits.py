"""Schemas near the engine's limits: which the probe refuses, and whether the probe's refusal
matches a real walk's (a greedy walk choosing other tokens) -- i.e. the refusal is not an
artefact of the probe's lowest-token path."""
import time, random
import numpy as np
from server.api.response_format import response_grammar
from server.task.constraint import Constraint
from server.model.tokenizer import Tokenizer
tok = Tokenizer()

def fmt(s):
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": s, "strict": True}}

def random_walk(c, seed, steps=400):
    """A walk choosing random allowed tokens (as a model might): the first fault, or None."""
    rng = random.Random(seed)
    m = c._matcher.deep_copy()
    w = np.zeros(c.words, dtype=np.int32)
    for n in range(steps):
        m.unsafe_compute_mask_ptr(w.ctypes.data, w.nbytes)
        if m.is_error():
            return f"step {n}: {m.get_error().splitlines()[0][:150]}"
        allowed = np.flatnonzero(np.unpackbits(w.view(np.uint8), bitorder="little"))
        allowed = allowed[allowed != 0]
        if len(allowed) == 0:
            return None
        m.consume_token(int(rng.choice(list(allowed))))
        if m.is_error():
            return f"step {n}: {m.get_error().splitlines()[0][:150]}"
    return None

cases = {
  "maxLength 5000": {"type": "object", "properties": {"body": {"type": "string", "maxLength": 5000}}, "required": ["body"]},
  "sha256 pattern": {"type": "object", "properties": {"h": {"type": "string", "pattern": "^[a-f0-9]{64}$"}}, "required": ["h"]},
  "pattern .{0,2000}": {"type": "object", "properties": {"t": {"type": "string", "pattern": "^.{0,2000}$"}}, "required": ["t"]},
  "minItems 50": {"type": "object", "properties": {"v": {"type": "array", "items": {"type": "number"}, "minItems": 50}}, "required": ["v"]},
  "int range big": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1000, "maximum": 99999999}}, "required": ["n"]},
}
for k in (500, 1000, 1500, 1999, 2000, 3000, 5000):
    cases[f"enum {k}"] = {"type": "object", "properties": {"code": {"enum": [f"C{i:05d}" for i in range(k)]}}, "required": ["code"]}
    cases[f"enum words {k}"] = {"type": "object", "properties": {"city": {"enum": [f"city name {i}" for i in range(k)]}}, "required": ["city"]}
for name, s in cases.items():
    try:
        c = Constraint(response_grammar(fmt(s)), tok)
    except Exception as e:
        print(f"{name:22s} refused at compile: {str(e)[:150]}"); continue
    t = time.perf_counter(); why = c.probe(); dt = time.perf_counter() - t
    walks = [random_walk(c, seed) for seed in range(3)]
    print(f"{name:22s} probe {dt*1e3:7.1f} ms: {why and why[:150]!s:60.150s} | random walks: {walks}")
