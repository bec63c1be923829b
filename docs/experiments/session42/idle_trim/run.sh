#!/bin/bash
# Session 42: the idle trim (server/scheduler/idle_trim.py) against the tree before it, side by
# side on the 2-core CPU machine: two tiny demo servers under soak.py's mixed load (2 workers
# each) for LOAD_S seconds, then IDLE seconds of no load; sitecustomize.py (../mem_hour) logs
# RSS and glibc's figures every 5 s.
# usage: bash docs/experiments/session42/idle_trim/run.sh OLD_TREE [LOAD_S] [IDLE_S]
#   OLD_TREE: a checkout of the commit before the change (git worktree add /tmp/old42 <commit>)
set -u
OLD=$1; LOAD=${2:-300}; IDLE=${3:-30}
PY=/work/main/.venv/bin/python
MEM=/work/main/docs/experiments/session42/mem_hour
W=/tmp/trim42; rm -rf $W; mkdir -p $W
start() {  # NAME TREE PORT
  mkdir -p $W/$1/soak
  (cd $2 && env PYTHONPATH=$MEM:$2 MEM_LOG=$W/$1/mem.jsonl MEM_EVERY_S=5 OMP_NUM_THREADS=1 \
    RWKV_TASK_DB_PATH=$W/$1/tasks.db RWKV_TASK_DB_MAX_SIZE=1000 RWKV_STATE_CACHE_MB=64 \
    $PY run.py --demo tiny --port $3 > $W/$1/server.log 2>&1 & echo $! > $W/$1/server.pid)
}
start old $OLD 8441; start new /work/main 8442
for P in 8441 8442; do for i in $(seq 120); do curl -sf localhost:$P/health >/dev/null && break; sleep 1; done; done
date +%s > $W/load_start
for N in old new; do
  P=$([ $N = old ] && echo 8441 || echo 8442)
  IDLE_S=$IDLE $PY docs/experiments/session41/qa_soak/soak.py $(cat $W/$N/server.pid) $LOAD 2 \
    $W/$N/soak $P $W/$N/tasks.db > $W/$N/soak.log 2>&1 &
done
sleep $LOAD; date +%s > $W/load_end
wait
for N in old new; do kill -TERM $(cat $W/$N/server.pid); done
sleep 5
$PY docs/experiments/session42/idle_trim/analyze.py $W
