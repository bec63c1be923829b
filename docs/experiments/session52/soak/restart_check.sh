#!/bin/bash
# SIGTERM the server, time its exit, restart on the same DB, check templates + stored task, stop.
cd /tmp/soak52
PID=18626; UVPID=18519
echo "== SIGTERM $PID at $(date +%T.%N)"
T0=$(date +%s.%N); kill -TERM $PID
for i in $(seq 1 300); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
T1=$(date +%s.%N)
if kill -0 $PID 2>/dev/null; then echo "STILL ALIVE after 30 s"; else echo "exited after $(echo "$T1 - $T0" | bc) s"; fi
wait_uv() { for i in $(seq 1 50); do kill -0 $UVPID 2>/dev/null || return 0; sleep 0.1; done; echo "uv wrapper still alive"; }
wait_uv
echo "server.log tail:"; tail -15 server.log
ls -la t.db*
echo "== restart at $(date +%T)"
cd repo
RWKV_TASK_DB_PATH=/tmp/soak52/t.db RWKV_MAX_BATCH_SIZE=16 uv run python run.py --demo tiny --port 18611 > /tmp/soak52/server2.log 2>&1 &
UV2=$!
for i in $(seq 1 120); do curl -s -m 2 localhost:18611/health >/dev/null && break; sleep 1; done
cd /tmp/soak52
echo "health: $(curl -s localhost:18611/health | head -c 400)"
echo "models:"; curl -s localhost:18611/v1/models | python3 -m json.tool | grep '"id"'
python3 - <<'PY'
import json, urllib.request
ref = json.load(open("/tmp/soak52/restart_ref.json"))
B = "http://127.0.0.1:18611"
ids = [m["id"] for m in json.load(urllib.request.urlopen(B + "/v1/models"))["data"]]
for t in ref["templates"]: print("template", t, "listed" if f"rwkv-7:{t}" in ids else "MISSING")
g = json.load(urllib.request.urlopen(f"{B}/v1/tasks/{ref['task']}/get_result"))
print("stored task", ref["task"], "get_result", "SAME" if g["result"] == ref["result"]["result"] and g["finished"] else "DIFFERENT", g)
req = urllib.request.Request(f"{B}/v1/chat/completions", data=json.dumps({"model": f"rwkv-7:{ref['templates'][0]}", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}).encode(), headers={"content-type": "application/json"})
r = urllib.request.urlopen(req); print("template chat after restart", r.status, r.read()[:300])
req = urllib.request.Request(f"{B}/v1/tasks/{ref['task']}/continue", data=json.dumps({"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 5}).encode(), headers={"content-type": "application/json"})
r = urllib.request.urlopen(req); print("continue stored task after restart", r.status, r.read()[:300])
PY
echo "kept tasks from soak (sample get_result):"
python3 -c "
import json,urllib.request
s=json.load(open('/tmp/soak52/summary.json'))
ok=bad=0
for t in s['kept'][:50]:
    try: g=json.load(urllib.request.urlopen('http://127.0.0.1:18611/v1/tasks/%s/get_result'%t)); ok+=1
    except Exception as e: bad+=1; print(t,e)
print('kept tasks readable',ok,'failed',bad)
"
NPID=$(ps -o pid= --ppid $UV2 | tr -d ' ')
echo "== stop restarted server $NPID"
T0=$(date +%s.%N); kill -TERM $NPID
for i in $(seq 1 300); do kill -0 $NPID 2>/dev/null || break; sleep 0.1; done
T1=$(date +%s.%N); kill -0 $NPID 2>/dev/null && echo "STILL ALIVE" || echo "exited after $(echo "$T1 - $T0" | bc) s"
tail -6 server2.log
echo "ERROR/Traceback in server2.log: $(grep -c -E 'ERROR|Traceback' server2.log)"
