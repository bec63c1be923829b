"""Session 46's smoke (docs/experiments/session46/ci/smoke.py, which runs session 45's first:
the same server, its checks and helpers), then session 47's: fast-forwarded forced calls (named,
n=2, streamed), a call cut by max_tokens as text, a schema round on the Task API with its
status polled, and verify on a checkpoint cut short. Run from the repository root against
run.py --demo tiny --port 8765 (a fresh RWKV_TASK_DB_PATH)."""
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time

env = runpy.run_path("docs/experiments/session46/ci/smoke.py")
c, ok = env["c"], env["ok"]
params = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
          "properties": {"city": {"enum": ["Paris", "Oslo"]}, "unit": {"enum": ["c", "f"]}}}
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params}}]
named = {"type": "function", "function": {"name": "get_weather"}}
body = {"model": "rwkv-7", "messages": [{"role": "user", "content": "Weather?"}], "tools": tools,
        "tool_choice": named, "max_tokens": 60, "n": 2, "seed": 5, "temperature": 1}
r = c.post("/v1/chat/completions", json=body).json()
args = [json.loads(ch["message"]["tool_calls"][0]["function"]["arguments"]) for ch in r["choices"]]
ok("forced named call, n=2", all(ch["finish_reason"] == "tool_calls" for ch in r["choices"])
   and all(set(a) == {"city", "unit"} for a in args))
streamed = {}
with c.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as s:
    for line in s.iter_lines():
        if line.startswith("data: {"):
            for ch in json.loads(line[6:])["choices"]:
                for call in ch["delta"].get("tool_calls") or []:
                    streamed.setdefault(ch["index"], "")
                    streamed[ch["index"]] += call["function"].get("arguments", "")
ok("streamed forced calls equal", [json.loads(streamed[i]) for i in (0, 1)] == args)
r = c.post("/v1/chat/completions", json={**body, "n": 1, "max_tokens": 12}).json()["choices"][0]
ok("cut call is text", r["finish_reason"] == "length" and not r["message"].get("tool_calls")
   and r["message"]["content"].startswith("<tool_call>"))
fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": params}}
t = c.post("/v1/tasks/create", json={"prompt": "User: JSON\n\nAssistant:", "max_tokens": 40,
                                      "response_format": fmt}).json()["task_id"]
seen = []
for _ in range(400):
    st = c.get(f"/v1/tasks/{t}/status").json()["status"]
    if not seen or seen[-1] != st:
        seen.append(st)
    if st == 3:
        break
    time.sleep(0.005)
res = c.get(f"/v1/tasks/{t}/get_result").json()["result"]
ok("task schema round", set(json.loads(res)) == {"city", "unit"} and seen == sorted(seen))
with tempfile.TemporaryDirectory() as d:
    ck = os.path.join(d, "t.pth")
    subprocess.run([sys.executable, "-m", "server.model.random", ck, "--preset", "tiny"],
                   check=True, capture_output=True)
    data = open(ck, "rb").read()
    open(ck, "wb").write(data[:len(data) // 2])
    v = subprocess.run([sys.executable, "-m", "server.model.verify", ck], capture_output=True)
    ok("verify: cut short is exit 1", v.returncode == 1 and b"cut short" in v.stdout)
