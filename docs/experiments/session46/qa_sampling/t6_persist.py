"""Persistent task created with min_p=1 (temp 1) behaves as greedy on continue (min_p kept); run with arg 'pre' then restart server, then 'post'."""
import sys, json, time; sys.path.insert(0, "/tmp/qa46/qa")
from common import *
def wait(tid):
    for _ in range(600):
        c, j = raw(f"/v1/tasks/{tid}/get_result", None, "GET")
        if c != 200 or j.get("finished"): return c, j
        time.sleep(0.05)
P = "User: persist me\n\nAssistant:"
Q = "\n\nUser: again\n\nAssistant:"
if sys.argv[1] == "pre":
    c, a = raw("/v1/tasks/create", {"prompt": P, "max_tokens": 8, "temperature": 1.0, "min_p": 1, "presence_penalty": 0, "repetition_penalty": 0})
    c, b = raw("/v1/tasks/create", {"prompt": P, "max_tokens": 8, "temperature": 0, "presence_penalty": 0, "repetition_penalty": 0})
    ra, rb = wait(a["task_id"])[1], wait(b["task_id"])[1]
    print("A:", ra["result"] == rb["result"], repr(ra["result"]))
    # continue both once now
    raw(f"/v1/tasks/{a['task_id']}/continue", {"prompt": Q, "max_tokens": 8, "seed": 1}); raw(f"/v1/tasks/{b['task_id']}/continue", {"prompt": Q, "max_tokens": 8})
    ra, rb = wait(a["task_id"])[1], wait(b["task_id"])[1]
    print("continue without min_p equal greedy:", ra["result"] == rb["result"], repr(ra["result"]), repr(rb["result"]))
    json.dump([a["task_id"], b["task_id"]], open("/tmp/qa46/qa/t6_ids.json", "w"))
else:
    a, b = json.load(open("/tmp/qa46/qa/t6_ids.json"))
    for t in (a, b): print("after restart status", raw(f"/v1/tasks/{t}/status", None, "GET"), "result", raw(f"/v1/tasks/{t}/get_result", None, "GET")[1])
    raw(f"/v1/tasks/{a}/continue", {"prompt": Q, "max_tokens": 8, "seed": 2}); raw(f"/v1/tasks/{b}/continue", {"prompt": Q, "max_tokens": 8})
    ra, rb = wait(a)[1], wait(b)[1]
    print("after restart continue equal greedy (min_p kept):", ra["result"] == rb["result"], repr(ra["result"]), repr(rb["result"]))
    c, fa = raw(f"/v1/tasks/{a}/fork?tmp=true", {"prompt": Q, "max_tokens": 8, "seed": 4}); c, fb = raw(f"/v1/tasks/{b}/fork?tmp=true", {"prompt": Q, "max_tokens": 8})
    ra, rb = wait(fa["task_id"])[1], wait(fb["task_id"])[1]
    print("after restart fork equal greedy:", ra["result"] == rb["result"])
