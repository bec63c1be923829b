#!/bin/bash
# usage: run_one.sh NAME DURATION_S [extra env assignments...]
NAME=$1; DUR=$2; shift 2
cd /work/main
rm -f /tmp/soak35b/$NAME.db*
env "$@" RWKV_STATE_CACHE_MB=0 RWKV_TASK_DB_PATH=/tmp/soak35b/$NAME.db OMP_NUM_THREADS=1 \
  uv run python run.py --demo tiny --port 8792 > /tmp/soak35b/server_$NAME.log 2>&1 &
UVPID=$!
echo "uv pid $UVPID" > /tmp/soak35b/$NAME.pids
for i in $(seq 1 120); do curl -sf http://127.0.0.1:8792/health >/dev/null && break; sleep 1; done
CHILD=$(pgrep -P $UVPID | head -1)
# descend to the python process listening
for p in $(pgrep -P $UVPID) $(pgrep -P $CHILD 2>/dev/null); do grep -q python /proc/$p/cmdline 2>/dev/null && CHILD=$p; done
echo "child $CHILD $(tr '\0' ' ' < /proc/$CHILD/cmdline)" >> /tmp/soak35b/$NAME.pids
grep -a MALLOC /proc/$CHILD/environ | tr '\0' '\n' | grep MALLOC >> /tmp/soak35b/$NAME.pids
tr '\0' '\n' < /proc/$CHILD/environ | grep -E '^(MALLOC|RWKV|OMP)' >> /tmp/soak35b/$NAME.pids
cd /tmp/soak35b
SOAK_DB=/tmp/soak35b/$NAME.db OMP_NUM_THREADS=1 uv run --project /work/main python sampler.py $CHILD samples_$NAME.csv 20 $((DUR+15)) > sampler_$NAME.out 2>&1 &
SPID=$!
SOAK_SEED=35 uv run --project /work/main python load.py $DUR 5 load_$NAME.log > load_$NAME.out 2>&1
wait $SPID
cat /proc/$CHILD/smaps_rollup > smaps_rollup_${NAME}_end.txt
kill -INT $UVPID; sleep 10; kill -0 $CHILD 2>/dev/null && kill -TERM $CHILD; sleep 3
echo "done $(date)" >> /tmp/soak35b/$NAME.pids
