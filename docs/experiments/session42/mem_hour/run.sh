#!/bin/bash
# Session 42: hour-long memory soak, two servers side by side (CPU, --demo tiny).
#   A (port 8421): as served.   B (port 8422): MEM_TRIM_EVERY_S=60 (malloc_trim(0) every 60 s
#   on the probe's own thread). Both carry sitecustomize.py (MEM_LOG every 15 s).
# usage: nohup bash docs/experiments/session42/mem_hour/run.sh [DURATION_S] > /tmp/mem42/run.out 2>&1 &
# Scratch under /tmp/mem42/{a,b}: tasks.db, server.log, mem.jsonl, soak/ (samples.jsonl, errors.log, ids.json).
set -u
DUR=${1:-3600}
HERE=/work/main/docs/experiments/session42/mem_hour
cd /work/main
start() {  # NAME PORT [env...]
  local N=$1 P=$2; shift 2
  local D=/tmp/mem42/$N; rm -rf $D; mkdir -p $D/soak
  env "$@" PYTHONPATH=$HERE MEM_LOG=$D/mem.jsonl MEM_EVERY_S=15 \
    RWKV_TASK_DB_PATH=$D/tasks.db RWKV_TASK_DB_MAX_SIZE=1000 RWKV_STATE_CACHE_MB=64 \
    uv run python run.py --demo tiny --port $P > $D/server.log 2>&1 &
  echo $! > $D/uv.pid
}
start a 8421
start b 8422 MEM_TRIM_EVERY_S=60
for N in a b; do
  P=$([ $N = a ] && echo 8421 || echo 8422); UV=$(cat /tmp/mem42/$N/uv.pid)
  for i in $(seq 180); do curl -sf localhost:$P/health >/dev/null && break; sleep 1; done
  PID=$(pgrep -P $UV | head -1); [ -z "$PID" ] && PID=$UV
  echo $PID > /tmp/mem42/$N/server.pid
  echo "$N port=$P uv=$UV server=$PID cmd=$(tr '\0' ' ' < /proc/$PID/cmdline)" | tee /tmp/mem42/$N/info.txt
  tr '\0' '\n' < /proc/$PID/environ | grep -E "^(MEM_|MALLOC|PYTHONPATH|RWKV_)" >> /tmp/mem42/$N/info.txt
done
date +%s > /tmp/mem42/load_start
for N in a b; do
  P=$([ $N = a ] && echo 8421 || echo 8422)
  IDLE_S=60 uv run python docs/experiments/session41/qa_soak/soak.py $(cat /tmp/mem42/$N/server.pid) $DUR 2 \
    /tmp/mem42/$N/soak $P /tmp/mem42/$N/tasks.db > /tmp/mem42/$N/soak.log 2>&1 &
  echo $! > /tmp/mem42/$N/soak.pid
done
wait $(cat /tmp/mem42/a/soak.pid) $(cat /tmp/mem42/b/soak.pid)
date +%s > /tmp/mem42/load_end
for N in a b; do kill -TERM $(cat /tmp/mem42/$N/server.pid); done
for N in a b; do
  for i in $(seq 30); do kill -0 $(cat /tmp/mem42/$N/server.pid) 2>/dev/null || break; sleep 1; done
  kill -0 $(cat /tmp/mem42/$N/server.pid) 2>/dev/null && echo "$N still alive after 30 s" >> /tmp/mem42/$N/info.txt
  kill -TERM $(cat /tmp/mem42/$N/uv.pid) 2>/dev/null
done
echo DONE $(date +%s)
