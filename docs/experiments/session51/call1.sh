#!/usr/bin/env bash
# Session 51, GPU call 1: the penalties' decay (session 50 moved it into the sampler's update)
# timed at decay 0.996 against 1 at batch 256 and 1,024 (alternating, two rounds each), then
# every CUDA test of gpu_all.sh on the final code of session 50.
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
for d in 1 0.996 1 0.996; do
  echo "=== penalty decay $d ($(date -u +%T))" | tee -a "$OUT/decay.log"
  timeout 100 python3 -m server.bench decode --preset 2.9b --batch 256,1024 --state-dtype fp16 \
    --pulses 3 --penalty-decay "$d" >> "$OUT/decay.log" 2>&1
  echo "rc=$?" >> "$OUT/decay.log"
done
grep -E "^===|^\|" "$OUT/decay.log"
OUT=$OUT STEPS="tests" timeout 380 bash server/bench/gpu_all.sh > /dev/null 2>&1
tail -8 "$OUT/summary.txt"
