#!/bin/bash
# RWKV_API_KEY set to an empty string (e.g. RWKV_API_KEY=${SECRET} with SECRET unset) -> open server
cd /work/main
RWKV_API_KEY= RWKV_TASK_DB_PATH=:memory: OMP_NUM_THREADS=1 uv run python run.py --demo tiny --port 8431 --host 127.0.0.1 > /tmp/qa42_cfg/repro/r1.log 2>&1 &
P=$!; for i in $(seq 60); do curl -s -m1 localhost:8431/health >/dev/null && break; sleep 1; done
echo "start-up log lines mentioning the key:"; grep -i "api key" /tmp/qa42_cfg/repro/r1.log | cut -c1-220
echo -n "GET /v1/models without Authorization -> "; curl -s -o /dev/null -w "%{http_code}\n" localhost:8431/v1/models
echo -n "POST /v1/completions without Authorization -> "; curl -s -o /dev/null -w "%{http_code}\n" localhost:8431/v1/completions -H content-type:application/json -d '{"model":"rwkv-7","prompt":"hi","max_tokens":2}'
kill -TERM $P; wait $P; echo "exit $?"
