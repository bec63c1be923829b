"""Task API with min_p: tmp/create, status/get_result, fork/continue with and without min_p; min_p inheritance checked via min_p=1 == greedy."""
import sys, json, time; sys.path.insert(0, "/tmp/qa46/qa")
from common import *
fails = 0
def bad(m):
    global fails; fails += 1; print("BAD", m)
def wait(tid):
    for _ in range(600):
        c, j = raw(f"/v1/tasks/{tid}/get_result", None, "GET")
        if c != 200: return c, j
        if j.get("finished"): return c, j
        time.sleep(0.05)
    return None, "timeout"
P = "User: tell me\n\nAssistant:"
# reference greedy
c, j = raw("/v1/tasks/tmp", {"prompt": P, "max_tokens": 15, "temperature": 0, "presence_penalty": 0, "repetition_penalty": 0})
_, g = wait(j["task_id"]); greedy = g["result"]; print("greedy tmp:", repr(greedy))
# persistent with min_p 1, temperature 1
c, j = raw("/v1/tasks/create", {"prompt": P, "max_tokens": 15, "temperature": 1.0, "min_p": 1, "presence_penalty": 0, "repetition_penalty": 0, "seed": 5})
tid = j["task_id"]; print("create:", c, tid)
c, r = wait(tid); print("get_result:", c, r)
if r["result"] != greedy: bad(f"create min_p=1 != greedy: {r['result']!r}")
c, s = raw(f"/v1/tasks/{tid}/status", None, "GET"); print("status:", c, s)
# stream of the created task
st = H.get(f"/v1/tasks/{tid}/stream?pos=0"); print("stream:", st.status_code, st.text[:300].replace("\n", " | "))
# fork without min_p: inherits 1 -> greedy continuation. compare with a fork at temperature 0
c, f1 = raw(f"/v1/tasks/{tid}/fork?tmp=true", {"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 10, "seed": 9}); print("fork no min_p:", c, f1.get("task_id"))
_, f1r = wait(f1["task_id"])
c, f0 = raw(f"/v1/tasks/{tid}/fork?tmp=true", {"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 10, "temperature": 0}); _, f0r = wait(f0["task_id"])
print("fork inherit:", repr(f1r["result"]), " fork greedy:", repr(f0r["result"]))
if f1r["result"] != f0r["result"]: bad("fork without min_p did not keep min_p=1 (not greedy)")
# fork with min_p 0 and temperature 2: differs from greedy (sample) across seeds
outs = set()
for sd in range(4):
    c, f = raw(f"/v1/tasks/{tid}/fork?tmp=true", {"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 10, "min_p": 0, "temperature": 2.0, "top_p": 1, "top_k": 0, "seed": sd})
    if c != 200: bad(f"fork min_p 0: {c} {f}"); continue
    _, fr = wait(f["task_id"]); outs.add(fr["result"])
print("fork min_p 0 distinct:", len(outs))
if len(outs) < 2: bad("fork with min_p 0 still greedy")
# fork with bad min_p
for v in (2, -1, "x", None):
    c, f = raw(f"/v1/tasks/{tid}/fork?tmp=true", {"prompt": "x", "max_tokens": 2, "min_p": v})
    print(f"fork min_p={v!r}:", c, json.dumps(f)[:150])
# persistent fork (not tmp) with min_p, then continue it without and with min_p
c, pf = raw(f"/v1/tasks/{tid}/fork?tmp=false", {"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 10, "min_p": 0.3}); print("persistent fork:", c, pf.get("task_id"))
_, pfr = wait(pf["task_id"]); print("  result", pfr)
# continue original (min_p 1) without min_p: greedy
c, co = raw(f"/v1/tasks/{tid}/continue", {"prompt": "\n\nUser: again\n\nAssistant:", "max_tokens": 10, "temperature": 1.0, "seed": 3}); print("continue:", c, co)
_, cor = wait(tid); print("  continue result:", cor)
c, ref = raw(f"/v1/tasks/{tid}/fork?tmp=true", {"prompt": "x", "max_tokens": 1})  # just to check fork after continue works
print("fork after continue:", c)
c, co2 = raw(f"/v1/tasks/{tid}/continue", {"prompt": "\n\nUser: again\n\nAssistant:", "max_tokens": 10, "min_p": 0.0, "temperature": 1.0, "seed": 3}); print("continue min_p 0:", c, co2)
_, cor2 = wait(tid); print("  result:", cor2)
for v in (1.5, "0.1", True):
    c, e = raw(f"/v1/tasks/{tid}/continue", {"prompt": "x", "max_tokens": 2, "min_p": v}); print(f"continue min_p={v!r}:", c, json.dumps(e)[:150])
c, s = raw(f"/v1/tasks/{tid}/status", None, "GET"); print("status end:", c, s)
# list shows it
c, l = raw("/v1/tasks/list?limit=500", None, "GET"); print("in list:", tid in json.dumps(l))
open("/tmp/qa46/qa/t5_task_id.txt", "w").write(tid)
# tmp stream with min_p
r = H.post("/v1/tasks/tmp", json={"prompt": P, "max_tokens": 5, "min_p": 0.5, "stream": True}); print("tmp stream:", r.status_code, r.text[:300].replace("\n", " | "))
# fim with min_p
c, fm = raw("/v1/tasks/fim", {"prefix": "def f(", "suffix": "\n", "max_tokens": 5, "min_p": 0.5}); print("fim min_p:", c, json.dumps(fm)[:200])
print("FAILS", fails)
