#!/bin/bash
# Part 1d: persistent tasks' later rounds after a SIGTERM restart
cd /tmp/qa46c/qa
OUT=/tmp/qa46c/qa/t1d_restart.out
: > $OUT
uv run python - >> $OUT 2>&1 <<'EOF'
import json
from h import *
P = "User: Give me a JSON record.\n\nAssistant:"
# a task whose first round is constrained and finished, and one whose round runs during shutdown
a = post("/v1/tasks/create", {"prompt": P, "max_tokens": 200, "seed": 21, "response_format": RF})[1]["task_id"]
print("A before:", wait(a)[1]["result"])
b = post("/v1/tasks/create", {"prompt": P, "max_tokens": 3000, "seed": 22, "response_format": RF_OBJ})[1]["task_id"]
json.dump({"a": a, "b": b}, open("restart_ids.json", "w"))
EOF
sleep 1
PID=$(cat server.pid)
# the uv process: find the python child
CHILD=$(pgrep -P $PID | head -1)
echo "server pid $PID child $CHILD" >> $OUT
kill -TERM $PID
for i in $(seq 1 60); do kill -0 $PID 2>/dev/null || break; sleep 0.5; done
kill -0 $PID 2>/dev/null && echo "SERVER STILL ALIVE after 30 s" >> $OUT
tail -5 server.log >> $OUT
cd /tmp/qa46c && (RWKV_TASK_DB_PATH=/tmp/qa46c/qa/tasks.db nohup uv run python run.py --demo tiny --port 8794 > qa/server2.log 2>&1 & echo $! > qa/server.pid)
cd /tmp/qa46c/qa
for i in $(seq 1 60); do curl -sf localhost:8794/health >/dev/null && break; sleep 1; done
uv run python - >> $OUT 2>&1 <<'EOF'
import json
from h import *
ids = json.load(open("restart_ids.json")); ids.update(json.load(open("t1_ids.json"))); ids.update(json.load(open("t1c_ids.json")))
for k, t in ids.items():
    print(k, t, get(f"/v1/tasks/{t}/status")[1], repr(get(f"/v1/tasks/{t}/get_result")[1].get("result", "")[:100]))
a, b, chain = ids["a"], ids["b"], ids["chain"]
def rnd(t, body, label):
    s, j = post(f"/v1/tasks/{t}/continue", body)
    r = wait(t)[1] if s == 200 else j
    txt = r["result"] if isinstance(r, dict) and "result" in r else r
    print(label, s, parse_json(txt)[:2] if isinstance(txt, str) else "", repr(txt)[:150])
for t, n in ((a, "a"), (chain, "chain")):
    rnd(t, {"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 30}, f"{n} continue free:")
    rnd(t, {"prompt": "\n\nUser: json\n\nAssistant:", "max_tokens": 200, "response_format": RF}, f"{n} continue constrained:")
    rnd(t, {"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 30}, f"{n} continue free:")
    fk = post(f"/v1/tasks/{t}/fork", {"prompt": "\n\nUser: x\n\nAssistant:", "max_tokens": 30})[1]["task_id"]
    print(n, "fork free:", repr(wait(fk)[1]["result"][:80]))
    fk = post(f"/v1/tasks/{t}/fork?tmp=true", {"prompt": "\n\nUser: x\n\nAssistant:", "max_tokens": 200, "response_format": RF})[1]["task_id"]
    print(n, "fork tmp constrained:", parse_json(wait(fk)[1]["result"])[:2])
# b was cut by shutdown mid-JSON: continue with no prompt free, then constrained
rnd(b, {"max_tokens": 20}, "b (cut by shutdown) continue free no prompt:")
rnd(b, {"prompt": "\n\nUser: json\n\nAssistant:", "max_tokens": 200, "response_format": RF}, "b continue constrained:")
tp = ids["tpl"]
for seed in (1, 2):
    fk = post(f"/v1/tasks/{tp}/fork", {"max_tokens": 200, "seed": seed, "response_format": RF})[1]["task_id"]
    print("template fork after restart seed", seed, repr(wait(fk)[1]["result"]))
EOF
grep -c Traceback server2.log >> $OUT
