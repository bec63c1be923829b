#!/usr/bin/env bash
# Session 55, GPU call 8 (run inline as one command on the H200 of calls 6-7; kept here as it
# ran): issue 7's chat bench on session 54's final code (b10bc47, in .whl/ab_old from
# `git archive b10bc47 server run.py few_shot.txt eof_v20230424.txt pyproject.toml`), then on
# this session's 3af3a30. Its log: gpu_call8/ab.log (the card: gpu_call7/gpu.txt).
set -u
OUT=${OUT:-/tmp/out}
for tree in old new; do
  if [ $tree = new ]; then d=.; else d=.whl/ab_old; fi
  echo "=== tree $tree ($(date -u +%T))" >> "$OUT/ab.log"
  (cd $d && PYTHONPATH=/tmp/site:. timeout 110 python3 -m server.bench.chat --demo 2.9b \
    --repeat 3 --client raw >> "$OUT/ab.log" 2>&1; echo "rc=$?" >> "$OUT/ab.log")
done
grep -E "^===|rc=|turns 2\+ of|last turn" "$OUT/ab.log"
