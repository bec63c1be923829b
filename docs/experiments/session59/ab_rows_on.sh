#!/usr/bin/env bash
# Written in session 59 for the next GPU session (not run): issue 7's chat bench (2.9B,
# `server.bench.chat --demo 2.9b --repeat 2 --client raw`, session 58 call 1's configuration)
# at HEAD against 4c8c04c (before 550e564 / ea158d1: a prefill pass's last rows to the head
# through a slice copy instead of two index uploads and an index_copy_; never timed against
# it), new / old / new on one machine. Needs .whl/ab_rows = `git archive 4c8c04c server run.py
# few_shot.txt eof_v20230424.txt pyproject.toml` (git-ignored; make it before the call).
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
NEW=$PWD
for run in new1 old1 new2; do
  dir=$NEW; case $run in old*) dir=$NEW/.whl/ab_rows;; esac
  (cd "$dir" && PYTHONPATH=/tmp/site:. timeout 170 python3 -m server.bench.chat --demo 2.9b \
    --repeat 2 --client raw) > "$OUT/chat_$run.log" 2>&1
  echo "$run rc=$?: $(grep -E 'turns 2\+ of all|last turn' "$OUT/chat_$run.log" | tr '\n' ' ')"
done
