#!/bin/bash
# usage: srv.sh NAME PORT DBPATH [env...]; writes NAME.pid (uv pid) ; waits and writes NAME.cpid (python pid)
NAME=$1; PORT=$2; DB=$3; shift 3
if curl -s -o /dev/null localhost:$PORT/health; then echo "PORT $PORT BUSY"; exit 1; fi
cd /work/main
env RWKV_TASK_DB_PATH="$DB" OMP_NUM_THREADS=1 "$@" uv run python run.py --demo ${PRESET:-tiny} --port $PORT > /tmp/qa_store/$NAME.log 2>&1 &
echo $! > /tmp/qa_store/$NAME.pid
sleep 1; ps -o pid= --ppid $(cat /tmp/qa_store/$NAME.pid) | tr -d ' ' > /tmp/qa_store/$NAME.cpid
