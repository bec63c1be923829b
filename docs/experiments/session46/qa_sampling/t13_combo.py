"""Grammar mask combined with logit_bias on a forbidden token and min_p / top_k / top_p that could leave nothing allowed."""
import sys, json; sys.path.insert(0, "/tmp/qa46/qa")
from common import *
rf = {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties": {"word": {"type": "string", "maxLength": 10}, "k": {"type": "integer"}}, "required": ["word", "k"], "additionalProperties": False}}}
for extra in ({"min_p": 1}, {"min_p": 0.5}, {"top_k": 1}, {"top_p": 0.0001}, {"min_p": 1, "top_k": 1}, {"temperature": 0}):
    for route, f in (("chat", chat), ("comp", comp)):
        body = dict(response_format=rf, max_tokens=60, temperature=1.0, seed=3, logit_bias={"33155": 100, "40213": 100, "0": 100})
        body.update(extra)
        c, j = f(**body)
        if c != 200: print(extra, route, c, j); continue
        ch = j["choices"][0]; t = ch.get("text") if "text" in ch else ch["message"]["content"]
        try: v = json.loads(t); ok = set(v) == {"word", "k"}
        except Exception: ok = False
        print(f"{json.dumps(extra):35s} {route}: {ch['finish_reason']:6s} valid={ok} {t[:70]!r}")
