#!/usr/bin/env bash
# Session 55, GPU call 2: issue 7 over HTTP, session 54's final code (b10bc47, in .whl/ab_old
# from `git archive b10bc47 server run.py few_shot.txt eof_v20230424.txt pyproject.toml`)
# against this session's (7224169), alternating, old first, on one machine: call 1's cached
# turns (10.3 ms on an H100) were 1.6 ms above session 54's H100 (8.7 ms), cache off too.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|MHz" | tee -a "$OUT/gpu.txt"
for tree in old new old new; do
  if [ $tree = new ]; then d=.; else d=.whl/ab_old; fi
  echo "=== tree $tree ($(date -u +%T))" | tee -a "$OUT/ab.log"
  (cd $d && PYTHONPATH=/tmp/site:. timeout 110 python3 -m server.bench.chat --demo 2.9b --repeat 3 \
    --client raw >> "$OUT/ab.log" 2>&1)
  echo "rc=$?" >> "$OUT/ab.log"
done
grep -E "^===|turns 2\+ of all|last turn" "$OUT/ab.log"
