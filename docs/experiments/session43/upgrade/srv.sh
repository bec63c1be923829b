#!/bin/bash
# usage: srv.sh TREE DB PORT LOG  -> starts server in background, prints pid, waits for /health
TREE=$1; DB=$2; PORT=$3; LOG=$4
cd /tmp/qa43/upgrade/$TREE || exit 9
RWKV_TASK_DB_PATH=$DB RWKV_MAX_BATCH_SIZE=${BS:-1} RWKV_STATE_CACHE_MB=${CACHE:-0} OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE \
  RWKV_HOST=127.0.0.1 nohup .venv/bin/python run.py --model /tmp/qa43/upgrade/ckpt/tiny.pth --port $PORT >$LOG 2>&1 &
PID=$!
echo $PID > $LOG.pid
for i in $(seq 1 120); do
  if curl -sf http://127.0.0.1:$PORT/health >/dev/null 2>&1; then echo "UP pid=$PID"; exit 0; fi
  if ! kill -0 $PID 2>/dev/null; then wait $PID; echo "EXITED rc=$? pid=$PID"; exit 1; fi
  sleep 0.5
done
echo "TIMEOUT pid=$PID"; exit 2
