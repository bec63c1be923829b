#!/bin/bash
# usage: review/srv.sh start|stop|kill9  (server on :8791, db /tmp/rev_task/db.sqlite)
cd /tmp/rev_task
case "$1" in
start) RWKV_TASK_DB_PATH=${DB:-/tmp/rev_task/db.sqlite} OMP_NUM_THREADS=2 nohup .venv/bin/python ${RUNPY:-run.py} --demo tiny --port 8791 >> review/server.log 2>&1 &
  echo $! > review/server.pid
  for i in $(seq 60); do curl -sf localhost:8791/health >/dev/null && break; sleep 0.5; done ;;
stop) kill -TERM $(cat review/server.pid); while kill -0 $(cat review/server.pid) 2>/dev/null; do sleep 0.2; done ;;
kill9) kill -9 $(cat review/server.pid); sleep 0.5 ;;
esac
