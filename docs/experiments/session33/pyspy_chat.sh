#!/usr/bin/env bash
# Where a cached chat turn's host time goes over HTTP, by thread: py-spy samples the cache-on
# server (attached after its warm-up) while server.bench.chat drives one-token replies (the
# turn's way to its first token, without a decode pulse after it). GPU machine, with py-spy's
# wheel among .whl/ (pip install --target /tmp/site puts the binary in /tmp/site/bin).
#   OUT=... bash docs/experiments/session33/pyspy_chat.sh [RATE] [REPEAT]
set -u
RATE=${1:-2000}; REPEAT=${2:-10}; OUT=${OUT:-/tmp/pyspy-out}; mkdir -p "$OUT"
SPY=${SPY:-/tmp/site/bin/py-spy}
id; cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null
start() {  # start PORT CACHE_MB
  RWKV_STATE_CACHE_MB=$2 RWKV_TASK_DB_PATH=/tmp/spy-$1.db python3 run.py --demo "${PRESET:-2.9b}" \
    --host 127.0.0.1 --port "$1" >"$OUT/server-$1.log" 2>&1 &
  echo $!
}
ON=$(start 8101 1024); OFF=$(start 8102 0)
for p in 8101 8102; do
  for i in $(seq 300); do curl -sf "http://127.0.0.1:$p/health" >/dev/null && break; sleep 1; done
done
"$SPY" record --pid "$ON" --rate "$RATE" --threads --nonblocking --format raw \
  -o "$OUT/on.collapsed" >"$OUT/pyspy.log" 2>&1 &
SPYPID=$!
sleep 2
python3 -m server.bench.chat --url-on http://127.0.0.1:8101 --url-off http://127.0.0.1:8102 \
  --repeat "$REPEAT" --max-tokens 1 --client raw >"$OUT/chat.log" 2>&1
kill -INT "$SPYPID"; wait "$SPYPID"
kill -TERM "$ON" "$OFF"; wait
tail -3 "$OUT/chat.log"; tail -3 "$OUT/pyspy.log"; wc -l "$OUT/on.collapsed"
