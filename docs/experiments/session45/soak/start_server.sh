#!/bin/bash
# usage: start_server.sh LOGFILE   (fresh DB under /tmp/soak45_db)
rm -rf /tmp/soak45_db && mkdir -p /tmp/soak45_db
cd /tmp/soak45
OMP_NUM_THREADS=1 RWKV_TASK_DB_PATH=/tmp/soak45_db/tasks.db RWKV_TASK_DB_MAX_SIZE=1000 \
  nohup uv run python run.py --demo tiny --port 8793 > "$1" 2>&1 &
echo $! > /tmp/soak45_out/uv.pid
