"""Session 47's smoke (docs/experiments/session47/ci/smoke.py, which runs 46's and 45's first:
the same server, its checks and helpers), then session 48's: a chat offering tools under
tool_choice auto (no grammar), a json_schema chat with n=3 (consecutive constrained rows,
masked in place), and constrained and free requests at once (rows apart: masked through
index_copy_), each constrained reply JSON matching its schema; a strict schema without
additionalProperties (its objects closed). Run from the repository root
against run.py --demo tiny --port 8765 (a fresh RWKV_TASK_DB_PATH)."""
import json
import runpy
from concurrent.futures import ThreadPoolExecutor

env = runpy.run_path("docs/experiments/session47/ci/smoke.py")
c, ok = env["c"], env["ok"]
params = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
          "properties": {"city": {"enum": ["Paris", "Oslo"]}, "unit": {"enum": ["c", "f"]}}}
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params}}]
r = c.post("/v1/chat/completions", json={"model": "rwkv-7", "max_tokens": 20, "tools": tools,
           "messages": [{"role": "user", "content": "Hi"}], "tool_choice": "auto"})
ok("tools offered, tool_choice auto", r.status_code == 200
   and r.json()["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls"))
fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": params}}
chat = {"model": "rwkv-7", "messages": [{"role": "user", "content": "JSON"}], "max_tokens": 60,
        "response_format": fmt, "temperature": 1, "seed": 3}


def matches(text: str) -> bool:
    try:
        v = json.loads(text)
    except ValueError:
        return False
    return set(v) == {"city", "unit"} and v["city"] in ("Paris", "Oslo") and v["unit"] in "cf"


r = c.post("/v1/chat/completions", json={**chat, "n": 3}).json()
ok("json_schema n=3", all(ch["finish_reason"] == "stop" and matches(ch["message"]["content"])
                          for ch in r["choices"]))
free = {"model": "rwkv-7", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 40}
with ThreadPoolExecutor(6) as pool:
    bodies = [free, {**chat, "seed": 1}, free, {**chat, "seed": 2}, free, {**chat, "seed": 4}]
    got = list(pool.map(lambda b: c.post("/v1/chat/completions", json=b), bodies))
ok("constrained beside free rows", all(g.status_code == 200 for g in got)
   and all(matches(got[i].json()["choices"][0]["message"]["content"]) for i in (1, 3, 5)))
open_schema = {k: v for k, v in params.items() if k != "additionalProperties"}
strict = {"type": "json_schema", "json_schema": {"name": "w", "strict": True,
                                                 "schema": open_schema}}
r = c.post("/v1/chat/completions", json={**chat, "response_format": strict, "max_tokens": 120})
ok("strict schema: its keys only", matches(r.json()["choices"][0]["message"]["content"]))
print("session 48 smoke done")
