#!/usr/bin/env bash
# Session 58, GPU call 1 (any card): issue 7's chat bench over HTTP (2.9B, `server.bench.chat
# --demo 2.9b --repeat 2 --client raw`) at HEAD (session 57's final code) against 2ca3edd (the
# code before session 57's first-pulse change, `git archive` in .whl/ab_old), new / old / new;
# then the cached turn's host/device time line at HEAD (`http_stages --demo 2.9b --timeline`),
# to see whether the first pulse's ~1.5 ms before its first parameter write (session 56's
# request 20, session 51's request 19) is still there.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
NEW=$PWD
for run in new1 old1 new2; do
  dir=$NEW; case $run in old*) dir=$NEW/.whl/ab_old;; esac
  (cd "$dir" && PYTHONPATH=/tmp/site:. timeout 170 python3 -m server.bench.chat --demo 2.9b \
    --repeat 2 --client raw) > "$OUT/chat_$run.log" 2>&1
  echo "$run rc=$?: $(grep -E 'turns 2\+ of all|last turn' "$OUT/chat_$run.log" | tr '\n' ' ')"
done
timeout 170 python3 -m server.bench.http_stages --demo 2.9b --timeline > "$OUT/timeline.log" 2>&1
echo "timeline rc=$?"
grep -A40 "request 19 on" "$OUT/timeline.log" | head -42
