#!/bin/bash
# RWKV_MAX_TOKENS_CAP=0 / RWKV_DEFAULT_MAX_TOKENS=0 are accepted at start; every reply is then empty
cd /work/main
for V in RWKV_MAX_TOKENS_CAP=0 RWKV_DEFAULT_MAX_TOKENS=0; do
  echo "== $V"
  env $V RWKV_TASK_DB_PATH=:memory: OMP_NUM_THREADS=1 uv run python run.py --demo tiny --port 8431 --host 127.0.0.1 > /tmp/qa42_cfg/repro/r2.log 2>&1 &
  P=$!; for i in $(seq 60); do curl -s -m1 localhost:8431/health >/dev/null && break; sleep 1; done
  grep -E "WARNING|ERROR" /tmp/qa42_cfg/repro/r2.log | grep -v "DEMO MODE\|No API key" | cut -c1-200
  echo "chat, no max_tokens:"; curl -s localhost:8431/v1/chat/completions -H content-type:application/json -d '{"model":"rwkv-7","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none"}' | python3 -c "import json,sys;j=json.load(sys.stdin);print(' ',j['choices'][0],j['usage'])"
  echo "chat, max_tokens 20:"; curl -s localhost:8431/v1/chat/completions -H content-type:application/json -d '{"model":"rwkv-7","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none","max_tokens":20}' | python3 -c "import json,sys;j=json.load(sys.stdin);print(' ',j['choices'][0],j['usage'])"
  echo "task create, max_tokens 20:"; curl -s localhost:8431/v1/tasks/create -H content-type:application/json -d '{"prompt":"hi","max_tokens":20,"stream":true}'
  kill -TERM $P; wait $P
done
