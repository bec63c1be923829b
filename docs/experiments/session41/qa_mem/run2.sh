#!/bin/bash
# usage: run.sh NAME PORT NCHUNK CHUNK_S [extra env assignments...]
set -u
NAME=$1; PORT=$2; NCH=$3; CS=$4; shift 4
D=/tmp/qa_mem/$NAME; mkdir -p $D; rm -f $D/tasks.db*
cd /work/main
env "$@" RWKV_TASK_DB_PATH=$D/tasks.db RWKV_TASK_DB_MAX_SIZE=1000 RWKV_STATE_CACHE_MB=64 \
  uv run python run.py --demo tiny --port $PORT > $D/server.log 2>&1 &
UVPID=$!
for i in $(seq 120); do curl -sf localhost:$PORT/health >/dev/null && break; sleep 1; done
PID=$(pgrep -P $UVPID -f run.py | head -1); [ -z "$PID" ] && PID=$UVPID
echo "uv=$UVPID server=$PID env: $*" | tee $D/info.txt
tr '\0' '\n' < /proc/$PID/environ | grep -E "MALLOC|PYTHONMALLOC" >> $D/info.txt
snap() { echo "$(date +%s) $1 $(grep VmRSS /proc/$PID/status | tr -s ' ') $(python3 docs/experiments/session41/qa_soak/mapsnap.py $PID)" >> $D/mapsnap.txt
         QA_PYOBJ_OUT=$D/pyobj.jsonl; timeout 60 gdb -batch -p $PID -x /tmp/qa_mem/pyobj.gdb >/dev/null 2>&1 || echo "gdb fail $1" >> $D/mapsnap.txt; }
python3 /tmp/qa_mem/sampler.py $PID $PORT $D/mem.jsonl 15 & SPID=$!
# pyobj inject reads env QA_PYOBJ_OUT of the *server*; write default path then move
snap start; mv /tmp/qa_mem/pyobj.jsonl $D/pyobj.tmp 2>/dev/null; cat $D/pyobj.tmp >> $D/pyobj.jsonl 2>/dev/null; rm -f $D/pyobj.tmp
for c in $(seq $NCH); do
  SOAK_SEED=$((1000*c+7)) IDLE_S=0 uv run python docs/experiments/session41/qa_soak/soak.py $PID $CS 4 $D/soak $PORT $D/tasks.db > $D/soak_chunk$c.log 2>&1
  sleep 5
  snap "after_chunk$c"; cat /tmp/qa_mem/pyobj.jsonl >> $D/pyobj.jsonl 2>/dev/null; rm -f /tmp/qa_mem/pyobj.jsonl
done
sleep ${IDLE_END:-90}
snap idle_end; cat /tmp/qa_mem/pyobj.jsonl >> $D/pyobj.jsonl 2>/dev/null; rm -f /tmp/qa_mem/pyobj.jsonl
timeout 60 gdb -batch -p $PID -x /tmp/qa_mem/malloc.gdb > $D/malloc_gdb.txt 2>&1
sleep 3
echo "$(date +%s) after_trim $(grep VmRSS /proc/$PID/status | tr -s ' ') $(python3 docs/experiments/session41/qa_soak/mapsnap.py $PID)" >> $D/mapsnap.txt
timeout 60 gdb -batch -p $PID -x /tmp/qa_mem/gc.gdb > $D/gc_gdb.txt 2>&1; mv /tmp/qa_mem/gc_collect.jsonl $D/ 2>/dev/null
sleep 3
echo "$(date +%s) after_gc_collect $(grep VmRSS /proc/$PID/status | tr -s ' ') $(python3 docs/experiments/session41/qa_soak/mapsnap.py $PID)" >> $D/mapsnap.txt
sleep 15
kill $SPID; kill $PID; sleep 5; kill $UVPID 2>/dev/null
echo DONE >> $D/info.txt
