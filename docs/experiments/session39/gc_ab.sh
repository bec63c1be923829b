#!/usr/bin/env bash
# Garbage collection on a cached chat turn's way (issue 7, 2.9B over HTTP), GPU machine:
# server.bench.chat --client raw, alternating the interpreter's generation-0 threshold as
# served before session 39 (700) and raised (GC0; RWKV_GC_THRESHOLD too, which the server
# sets while serving since 7e29fb8), every process logging its collections (gcsite/).
#   [PRESET=tiny] OUT=... bash docs/experiments/session39/gc_ab.sh [ROUNDS] [GC0] [REPEAT]
set -u
ROUNDS=${1:-2}; RAISED=${2:-50000}; REPEAT=${3:-2}; OUT=${OUT:-/tmp/gc-ab}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
for r in $(seq "$ROUNDS"); do
  for g in 700 "$RAISED"; do
    d="$OUT/r$r-gc$g"; mkdir -p "$d"
    # each line of the bench's output stamped with its epoch: the conversations start at the
    # line "model: ..." (both servers up and warmed), so collections from then on count
    GC_LOG_DIR=$d GC0=$g RWKV_GC_THRESHOLD=$g PYTHONPATH="$HERE/gcsite:${PYTHONPATH:-}" timeout 280 \
      python3 -u -m server.bench.chat --demo "${PRESET:-2.9b}" --repeat "$REPEAT" --client raw 2>&1 |
      python3 -c 'import sys, time
for line in sys.stdin: print(f"{time.time():.3f} {line}", end="", flush=True)' >"$d/chat.log"
    t0=$(grep -m1 " model: " "$d/chat.log" | cut -d" " -f1); t1=$(grep -m1 " last turn: " "$d/chat.log" | cut -d" " -f1)
    echo "== round $r gen0 threshold $g"
    cut -d" " -f2- "$d/chat.log" | grep -vE "^[0-9:.]+ \| " | tail -16
    python3 "$HERE/gc_summary.py" "$d" "${t0:-0}" "${t1:-0}"
  done
done
