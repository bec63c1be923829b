#!/bin/bash
name=$1; shift
if [ -n "$MODEL" ]; then W="--model $MODEL"; else W="--demo tiny"; fi
cd /work/main
env RWKV_TASK_DB_PATH=${DB:-/tmp/qa42_state/tasks.db} OMP_NUM_THREADS=1 "$@" /work/main/.venv/bin/python run.py $W --port 8451 > /tmp/qa42_state/$name.log 2>&1 &
echo $! > /tmp/qa42_state/server.pid
for i in $(seq 1 120); do curl -s localhost:8451/health >/dev/null && break; sleep 1; done
curl -s localhost:8451/health | head -c 200; echo
