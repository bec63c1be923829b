#!/usr/bin/env bash
# Starts a demo server on damaged copies of a task database (item 6 of session 66's QA brief):
# truncated, pages overwritten, empty file, a zero-filled header. Needs /tmp/qa66/base.db (a
# backup of a database holding templates; restart_probe.py makes those). Prints the exit status
# (124 = still serving after the timeout, i.e. it started), /health and a template fork.
# Run from the repository root: bash docs/experiments/session66/qa/db_damage.sh
S=/tmp/qa66
mk() {  # name, python snippet working on bytes b
  rm -f $S/dmg_$1.db*; python3 - "$S/base.db" "$S/dmg_$1.db" <<PY
import sys, os
b = bytearray(open(sys.argv[1], 'rb').read())
$2
open(sys.argv[2], 'wb').write(b)
PY
}
mk truncated  'b = b[:len(b)//3]'
mk pages      'import random; random.seed(1); [b.__setitem__(slice(4096*p, 4096*p+4096), os.urandom(4096)) for p in range(5, 600, 7)]'
mk empty      'b = b""'
mk header0    'b[:100] = bytes(100)'
mk schema     'b[4096:8192] = os.urandom(4096)'
for n in truncated pages empty header0 schema; do
  echo "=== $n"
  ( RWKV_TASK_DB_PATH=$S/dmg_$n.db RWKV_MAX_BATCH_SIZE=2 OMP_NUM_THREADS=1 timeout 25 uv run python run.py --demo tiny --port 8897 > $S/dmg_$n.log 2>&1; echo "rc=$?" > $S/dmg_$n.rc ) &
  for i in $(seq 1 20); do sleep 1; curl -s -m 2 localhost:8897/health >/dev/null && break; done
  curl -s -m 5 localhost:8897/health | head -c 300; echo
  curl -s -m 10 -X POST localhost:8897/v1/tasks/_qa_restart/fork?tmp=true -H 'content-type: application/json' -d '{"prompt":"x","max_tokens":3}' | head -c 200; echo
  curl -s -m 10 localhost:8897/v1/tasks/list | head -c 200; echo
  curl -s -m 10 -X POST localhost:8897/v1/tasks/create -H 'content-type: application/json' -d '{"prompt":"x","max_tokens":2}' | head -c 120; echo
  wait; cat $S/dmg_$n.rc
  grep -E "ERROR|WARNING|Traceback" $S/dmg_$n.log | grep -v "DEMO MODE\|No API key" | cut -c1-330 | head -6
done
