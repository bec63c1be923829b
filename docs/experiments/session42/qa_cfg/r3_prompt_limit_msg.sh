#!/bin/bash
# RWKV_MAX_PROMPT_TOKENS=20: the Task API's 400 names the setting, the OpenAI routes' 400 does not
cd /work/main
RWKV_MAX_PROMPT_TOKENS=20 RWKV_TASK_DB_PATH=:memory: OMP_NUM_THREADS=1 uv run python run.py --demo tiny --port 8431 --host 127.0.0.1 > /tmp/qa42_cfg/repro/r3.log 2>&1 &
P=$!; for i in $(seq 60); do curl -s -m1 localhost:8431/health >/dev/null && break; sleep 1; done
L=$(python3 -c "print('hello '*40)")
echo "/v1/tasks/create:"; curl -s localhost:8431/v1/tasks/create -H content-type:application/json -d "{\"prompt\":\"$L\",\"max_tokens\":3}"; echo
echo "/v1/completions:"; curl -s localhost:8431/v1/completions -H content-type:application/json -d "{\"model\":\"rwkv-7\",\"prompt\":\"$L\",\"max_tokens\":3}"; echo
echo "/v1/chat/completions:"; curl -s localhost:8431/v1/chat/completions -H content-type:application/json -d "{\"model\":\"rwkv-7\",\"messages\":[{\"role\":\"user\",\"content\":\"$L\"}],\"max_tokens\":3}"; echo
kill -TERM $P; wait $P
